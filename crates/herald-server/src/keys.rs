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
///
/// Under load a key must never expire for everyone at once: from half its bound on, the
/// first request to see it sets off a verification behind its answer, while every request
/// is still answered from the cache ([`Cached::Refresh`]); and requests that find no entry
/// ask the database one at a time per key ([`KeyCache::turn`], waited for at most
/// [`TURN_WAIT`]), the first answer serving the rest.
/// Before both, a key's expiry under thousands of requests in flight sent each of them to
/// the database, every one waiting for a pooled connection the group commit's lanes also
/// needed: with the shared settings' expiry (`herald/src/settings.rs`), answers 10 s late
/// in the bench's open loop at twice capacity (docs/perf.md).
#[derive(Debug)]
pub struct KeyCache {
    ttl: Duration,
    keys: Mutex<HashMap<String, Verified>>,
    turns: [tokio::sync::Mutex<()>; TURNS],
}

/// Stripes of the one-lookup-at-a-time rule: a bound on memory whatever ids are presented.
const TURNS: usize = 64;

/// The longest a request waits for its key's turn before asking the database itself: a
/// lookup takes milliseconds, and one that waits for a connection the pool cannot give
/// must not hold every other request with the key behind it.
pub const TURN_WAIT: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, Copy)]
struct Verified {
    secret_sha256: [u8; 32],
    tenant: herald::TenantId,
    at: Instant,
    /// A request is asking the database again (past half the bound).
    refreshing: bool,
}

/// What the cache knows of a presented key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cached {
    /// Verified within half the bound: believed.
    Fresh(herald::TenantId),
    /// Verified within the bound but past half of it: believed, and the caller is the one
    /// asked to verify it again ([`KeyCache::verified`] or [`KeyCache::refresh_failed`]).
    Refresh(herald::TenantId),
    /// Not verified within the bound with this secret: ask the database.
    Missing,
}

impl KeyCache {
    pub fn new(ttl: Duration) -> KeyCache {
        KeyCache {
            ttl,
            keys: Mutex::new(HashMap::new()),
            turns: std::array::from_fn(|_| tokio::sync::Mutex::new(())),
        }
    }

    /// The tenant of `key_id` when it was verified within the bound with this secret.
    pub fn tenant(&self, key_id: &str, secret_sha256: &[u8; 32]) -> Option<herald::TenantId> {
        match self.lookup_as(key_id, secret_sha256, false) {
            Cached::Fresh(tenant) | Cached::Refresh(tenant) => Some(tenant),
            Cached::Missing => None,
        }
    }

    /// What the cache knows of `key_id` with this secret; past half the bound, the first
    /// caller gets [`Cached::Refresh`] and the others [`Cached::Fresh`] until it reports.
    pub fn lookup(&self, key_id: &str, secret_sha256: &[u8; 32]) -> Cached {
        self.lookup_as(key_id, secret_sha256, true)
    }

    fn lookup_as(&self, key_id: &str, secret_sha256: &[u8; 32], refresher: bool) -> Cached {
        let Ok(mut keys) = self.keys.lock() else { return Cached::Missing };
        let Some(found) = keys.get_mut(key_id) else { return Cached::Missing };
        let age = found.at.elapsed();
        if age >= self.ttl || !same(&found.secret_sha256, secret_sha256) {
            return Cached::Missing;
        }
        if refresher && age >= self.ttl / 2 && !found.refreshing {
            found.refreshing = true;
            return Cached::Refresh(found.tenant);
        }
        Cached::Fresh(found.tenant)
    }

    /// The caller given [`Cached::Refresh`] could not ask the database: the next caller
    /// past half the bound is asked instead (the entry still expires at the bound).
    pub fn refresh_failed(&self, key_id: &str) {
        if let Ok(mut keys) = self.keys.lock()
            && let Some(found) = keys.get_mut(key_id)
        {
            found.refreshing = false;
        }
    }

    /// The turn to ask the database about `key_id` when the cache has no answer: held
    /// across the lookup, so concurrent requests with one key ask once (the others find
    /// the answer in the cache when their turn comes).
    pub fn turn(&self, key_id: &str) -> &tokio::sync::Mutex<()> {
        let stripe =
            key_id.bytes().fold(0usize, |h, b| h.wrapping_mul(31).wrapping_add(usize::from(b)));
        &self.turns[stripe % TURNS]
    }

    /// Remembers a key the database just said is valid.
    pub fn verified(&self, key_id: &str, secret_sha256: [u8; 32], tenant: herald::TenantId) {
        if let Ok(mut keys) = self.keys.lock() {
            if keys.len() >= KEY_CACHE_MAX && !keys.contains_key(key_id) {
                keys.clear();
            }
            keys.insert(
                key_id.to_string(),
                Verified { secret_sha256, tenant, at: Instant::now(), refreshing: false },
            );
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

    /// How long ago `key_id` was last verified, if it is held.
    pub fn verified_ago(&self, key_id: &str) -> Option<Duration> {
        Some(self.keys.lock().ok()?.get(key_id)?.at.elapsed())
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

    #[test]
    fn past_half_the_bound_one_caller_is_asked_to_verify_again() {
        let tenant = herald::TenantId::new_v7();
        let cache = KeyCache::new(Duration::from_secs(4));
        let secret = digest("secret");
        cache.verified("k1", secret, tenant);
        assert_eq!(cache.lookup("k1", &secret), Cached::Fresh(tenant));
        cache.age(Duration::from_secs(2));
        assert_eq!(cache.lookup("k1", &secret), Cached::Refresh(tenant), "the first past half");
        assert_eq!(cache.lookup("k1", &secret), Cached::Fresh(tenant), "the others meanwhile");
        assert_eq!(cache.lookup("k1", &digest("other")), Cached::Missing, "another secret");
        cache.refresh_failed("k1");
        assert_eq!(cache.lookup("k1", &secret), Cached::Refresh(tenant), "asked again");
        cache.verified("k1", secret, tenant);
        assert_eq!(cache.lookup("k1", &secret), Cached::Fresh(tenant), "verified anew");
        cache.age(Duration::from_secs(4));
        assert_eq!(cache.lookup("k1", &secret), Cached::Missing, "the bound holds regardless");
        assert!(std::ptr::eq(cache.turn("k1"), cache.turn("k1")), "one turn per key id");
    }
}
