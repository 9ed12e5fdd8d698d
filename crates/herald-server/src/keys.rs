//! Checking what a request presents: API keys (`hk_<key id>_<secret>`, minted and parsed
//! by the library, `herald::api_key_parse`, so the CLI and the HTTP API make one kind of
//! key), the admin key and the metrics token, each compared in constant time. Neither a
//! key nor its hash is ever logged.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Longest `Authorization` value we look at.
pub use herald_core::limits::API_KEY_LEN_MAX as KEY_LEN_MAX;

/// Splits a presented key into (key id, secret hash); `None` if it is not shaped like one.
pub use herald::api_key_parse as parse;

/// Equal without an early exit, so timing does not reveal how much of a hash matched.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// SHA-256 of an arbitrary secret (the admin key), for constant-time comparison.
pub fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// How long a verified API key is believed without asking the database again: the most a
/// key revoked by another process (`herald key revoke`, another server) can still be used
/// here. A revocation through this server's own API takes effect at once.
pub const KEY_CACHE_TTL: Duration = Duration::from_secs(5);

/// Most keys the cache holds; when full it starts over (a bound on memory, not a policy).
const KEY_CACHE_MAX: usize = 10_000;

/// Keys verified against the database in the last [`KEY_CACHE_TTL`], by key id: so that a
/// request does not cost a round trip to check its key. Only keys that were valid are
/// kept; a presented secret is compared with the kept hash in constant time, and a key
/// id whose secret does not match is asked of the database again (never believed).
#[derive(Debug)]
pub struct KeyCache {
    ttl: Duration,
    keys: Mutex<HashMap<String, Verified>>,
}

#[derive(Debug, Clone, Copy)]
struct Verified {
    secret_sha256: [u8; 32],
    tenant: herald::TenantId,
    at: Instant,
}

impl KeyCache {
    pub fn new(ttl: Duration) -> KeyCache {
        KeyCache { ttl, keys: Mutex::new(HashMap::new()) }
    }

    /// The tenant of `key_id` when it was verified within the bound with this secret.
    pub fn tenant(&self, key_id: &str, secret_sha256: &[u8; 32]) -> Option<herald::TenantId> {
        let keys = self.keys.lock().ok()?;
        let found = keys.get(key_id)?;
        (found.at.elapsed() < self.ttl && same(&found.secret_sha256, secret_sha256))
            .then_some(found.tenant)
    }

    /// Remembers a key the database just said is valid.
    pub fn verified(&self, key_id: &str, secret_sha256: [u8; 32], tenant: herald::TenantId) {
        if let Ok(mut keys) = self.keys.lock() {
            if keys.len() >= KEY_CACHE_MAX && !keys.contains_key(key_id) {
                keys.clear();
            }
            keys.insert(key_id.to_string(), Verified { secret_sha256, tenant, at: Instant::now() });
        }
    }

    /// Moves every verification `by` into the past: as if that much time had gone by
    /// (how a test sees the bound pass without waiting for it).
    pub fn age(&self, by: Duration) {
        if let Ok(mut keys) = self.keys.lock() {
            for found in keys.values_mut() {
                found.at = found.at.checked_sub(by).unwrap_or(found.at);
            }
        }
    }

    /// Forgets a key revoked through this process.
    pub fn forget(&self, key_id: &str) {
        if let Ok(mut keys) = self.keys.lock() {
            keys.remove(key_id);
        }
    }
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn same_compares_whole_values() {
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"abc", b"ab"));
        assert!(same(&digest("k"), &digest("k")) && !same(&digest("k"), &digest("K")));
    }

    #[test]
    fn a_cached_key_needs_its_own_secret_and_expires() {
        let tenant = herald::TenantId::new_v7();
        let cache = KeyCache::new(Duration::from_secs(5));
        cache.verified("k1", digest("secret"), tenant);
        assert_eq!(cache.tenant("k1", &digest("secret")), Some(tenant));
        assert_eq!(cache.tenant("k1", &digest("other")), None, "another secret");
        assert_eq!(cache.tenant("k2", &digest("secret")), None, "another key");
        cache.forget("k1");
        assert_eq!(cache.tenant("k1", &digest("secret")), None, "forgotten");
        cache.verified("k1", digest("secret"), tenant);
        cache.age(Duration::from_millis(4_900));
        assert_eq!(cache.tenant("k1", &digest("secret")), Some(tenant), "within the bound");
        cache.age(Duration::from_millis(100));
        assert_eq!(cache.tenant("k1", &digest("secret")), None, "expired");
    }
}
