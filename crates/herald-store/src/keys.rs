//! API keys: a public key id for lookup and the SHA-256 of the secret part. The secret is
//! long and random, so a fast hash is enough and keeps the lookup indexable; the hash is
//! compared in constant time by the caller.

use crate::clock::sqlite_now;
use crate::conn::Conn;
use crate::error::StoreError;
use sqlx::Row;
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

pub async fn api_key_insert(
    conn: Conn<'_>,
    key_id: &str,
    tenant: Uuid,
    secret_sha256: &[u8],
    now: Option<i64>,
) -> Result<(), StoreError> {
    match conn {
        Conn::Sqlite(c) => {
            sqlx::query(
                "INSERT INTO api_keys (key_id, tenant_id, secret_sha256, created_at) VALUES (?1, ?2, ?3, ?4)",
            )
            .bind(key_id)
            .bind(tenant)
            .bind(secret_sha256)
            .bind(sqlite_now(now))
            .execute(c)
            .await?;
        }
        Conn::Postgres(c) => {
            sqlx::query(
                "INSERT INTO api_keys (key_id, tenant_id, secret_sha256, created_at)
                 VALUES ($1, $2, $3, herald_now($4))",
            )
            .bind(key_id)
            .bind(tenant)
            .bind(secret_sha256)
            .bind(now)
            .execute(c)
            .await?;
        }
    }
    Ok(())
}

pub async fn api_key_lookup(conn: Conn<'_>, key_id: &str) -> Result<Option<KeyRow>, StoreError> {
    let row = match conn {
        Conn::Sqlite(c) => sqlx::query(
            "SELECT key_id, tenant_id, secret_sha256, revoked_at IS NOT NULL AS revoked
             FROM api_keys WHERE key_id = ?1",
        )
        .bind(key_id)
        .fetch_optional(c)
        .await?
        .map(|r| -> Result<KeyRow, sqlx::Error> {
            Ok(KeyRow {
                key_id: r.try_get("key_id")?,
                tenant_id: r.try_get("tenant_id")?,
                secret_sha256: r.try_get("secret_sha256")?,
                revoked: r.try_get("revoked")?,
            })
        }),
        Conn::Postgres(c) => sqlx::query(
            "SELECT key_id, tenant_id, secret_sha256, revoked_at IS NOT NULL AS revoked
             FROM api_keys WHERE key_id = $1",
        )
        .bind(key_id)
        .fetch_optional(c)
        .await?
        .map(|r| -> Result<KeyRow, sqlx::Error> {
            Ok(KeyRow {
                key_id: r.try_get("key_id")?,
                tenant_id: r.try_get("tenant_id")?,
                secret_sha256: r.try_get("secret_sha256")?,
                revoked: r.try_get("revoked")?,
            })
        }),
    };
    Ok(row.transpose()?)
}

/// Revokes a tenant's key; `false` when it does not exist (or is another tenant's).
pub async fn api_key_revoke(
    conn: Conn<'_>,
    tenant: Uuid,
    key_id: &str,
    now: Option<i64>,
) -> Result<bool, StoreError> {
    let n = match conn {
        Conn::Sqlite(c) => sqlx::query(
            "UPDATE api_keys SET revoked_at = coalesce(revoked_at, ?3) WHERE key_id = ?1 AND tenant_id = ?2",
        )
        .bind(key_id)
        .bind(tenant)
        .bind(sqlite_now(now))
        .execute(c)
        .await?
        .rows_affected(),
        Conn::Postgres(c) => sqlx::query(
            "UPDATE api_keys SET revoked_at = coalesce(revoked_at, herald_now($3))
             WHERE key_id = $1 AND tenant_id = $2",
        )
        .bind(key_id)
        .bind(tenant)
        .bind(now)
        .execute(c)
        .await?
        .rows_affected(),
    };
    Ok(n == 1)
}

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
