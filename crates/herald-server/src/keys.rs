//! Checking what a request presents: API keys (`hk_<key id>_<secret>`, minted and parsed
//! by the library, `herald::api_key_parse`, so the CLI and the HTTP API make one kind of
//! key), the admin key and the metrics token, each compared in constant time. Neither a
//! key nor its hash is ever logged.

use sha2::{Digest, Sha256};

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

#[cfg(test)]
#[allow(clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn same_compares_whole_values() {
        assert!(same(b"abc", b"abc") && !same(b"abc", b"abd") && !same(b"abc", b"ab"));
        assert!(same(&digest("k"), &digest("k")) && !same(&digest("k"), &digest("K")));
    }
}
