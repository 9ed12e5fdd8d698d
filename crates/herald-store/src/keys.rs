//! API keys: a public key id for lookup and the SHA-256 of the secret part. The secret is
//! long and random, so a fast hash is enough and keeps the lookup indexable; the hash is
//! compared in constant time by the caller.

use crate::clock::Now;
use crate::conn::Conn;
use crate::error::StoreError;
use sqlx::types::Uuid;

/// A stored key.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyRow {
    pub key_id: String,
    pub tenant_id: Uuid,
    pub secret_sha256: Vec<u8>,
    pub revoked: bool,
}

/// The hash prints as `***`: it is what a presented key is checked against.
impl std::fmt::Debug for KeyRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRow")
            .field("key_id", &self.key_id)
            .field("tenant_id", &self.tenant_id)
            .field("secret_sha256", &herald_core::Redacted)
            .field("revoked", &self.revoked)
            .finish()
    }
}

/// Stores a key for `tenant`. A second key with one key id fails on the primary key.
pub async fn api_key_insert(
    conn: Conn<'_>,
    key_id: &str,
    tenant: Uuid,
    secret_sha256: &[u8],
    now: Now,
) -> Result<(), StoreError> {
    crate::per_backend!(conn, keys::api_key_insert(key_id, tenant, secret_sha256, now))
}

/// The key with this id, revoked or not.
pub async fn api_key_lookup(conn: Conn<'_>, key_id: &str) -> Result<Option<KeyRow>, StoreError> {
    crate::per_backend!(conn, keys::api_key_lookup(key_id))
}

/// Revokes a tenant's key (once: a later revoke keeps the first time); `false` when it
/// does not exist (or is another tenant's).
pub async fn api_key_revoke(
    conn: Conn<'_>,
    tenant: Uuid,
    key_id: &str,
    now: Now,
) -> Result<bool, StoreError> {
    crate::per_backend!(conn, keys::api_key_revoke(tenant, key_id, now))
}

/// Decodes a [`KeyRow`] from a row of either backend.
macro_rules! key_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = &$row;
        $crate::keys::KeyRow {
            key_id: row.try_get("key_id")?,
            tenant_id: row.try_get("tenant_id")?,
            secret_sha256: row.try_get("secret_sha256")?,
            revoked: row.try_get("revoked")?,
        }
    }};
}
pub(crate) use key_row;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_secret_hash() {
        let row = KeyRow {
            key_id: "0123456789abcdef".into(),
            tenant_id: Uuid::nil(),
            secret_sha256: vec![0xab; 32],
            revoked: false,
        };
        let shown = format!("{row:?}");
        // The bytes as Debug prints them (171) and as hex.
        assert!(
            shown.contains("0123456789abcdef") && !shown.contains("171") && !shown.contains("abab"),
            "{shown}"
        );
    }
}
