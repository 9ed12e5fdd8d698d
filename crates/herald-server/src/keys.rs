//! API keys: `hk_<key id>_<secret>`. The key id (public, 16 hex characters) finds the
//! row; the secret (32 random bytes, base64url) is checked against its SHA-256 in
//! constant time. Neither the key nor its hash is ever logged.

use base64::Engine as _;
use sha2::{Digest, Sha256};

/// Longest `Authorization` value we look at.
pub const KEY_LEN_MAX: usize = 200;

/// A new key: what to show once, and what to store.
#[derive(Clone, PartialEq, Eq)]
pub struct NewKey {
    pub key_id: String,
    pub secret_sha256: [u8; 32],
    /// The full key, shown to the caller exactly once.
    pub plaintext: String,
}

/// Only the public key id is shown: the key and its hash print as `***`.
impl std::fmt::Debug for NewKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewKey")
            .field("key_id", &self.key_id)
            .field("secret_sha256", &herald_core::Redacted)
            .field("plaintext", &herald_core::Redacted)
            .finish()
    }
}

fn random<const N: usize>() -> Result<[u8; N], getrandom::Error> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)?;
    Ok(bytes)
}

pub fn generate() -> Result<NewKey, getrandom::Error> {
    let id: String = random::<8>()?.iter().map(|b| format!("{b:02x}")).collect();
    let secret = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(random::<32>()?);
    Ok(NewKey {
        plaintext: format!("hk_{id}_{secret}"),
        secret_sha256: Sha256::digest(secret.as_bytes()).into(),
        key_id: id,
    })
}

/// Splits a presented key into (key id, secret hash); `None` if it is not shaped like one.
pub fn parse(presented: &str) -> Option<(&str, [u8; 32])> {
    if presented.len() > KEY_LEN_MAX {
        return None;
    }
    let rest = presented.strip_prefix("hk_")?;
    let (id, secret) = rest.split_once('_')?;
    if id.len() != 16 || !id.bytes().all(|b| b.is_ascii_hexdigit()) || secret.is_empty() {
        return None;
    }
    Some((id, Sha256::digest(secret.as_bytes()).into()))
}

/// Equal without an early exit, so timing does not reveal how much of a hash matched.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// SHA-256 of an arbitrary secret (the admin key), for constant-time comparison.
pub fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_and_others_do_not() {
        let key = generate().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(parse(&key.plaintext), Some((key.key_id.as_str(), key.secret_sha256)));
        for bad in
            ["", "hk_", "hk_zz_x", "hk_0123456789abcdef_", "Bearer x", "hk_0123456789abcde_x"]
        {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"abc", b"ab"));
    }
}
