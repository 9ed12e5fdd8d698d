use super::Bind;
use crate::clock::Now;
use crate::error::StoreError;
use crate::keys::{KeyRow, key_row};
use sqlx::MySqlConnection;
use sqlx::types::Uuid;

pub(crate) async fn api_key_insert(
    c: &mut MySqlConnection,
    key_id: &str,
    tenant: Uuid,
    secret_sha256: &[u8],
    now: Now,
) -> Result<(), StoreError> {
    let q = format!(
        "INSERT INTO api_keys (key_id, tenant_id, secret_sha256, created_at) VALUES (?, ?, ?, {})",
        now.mysql_sql()
    );
    sqlx::query(super::sql(q))
        .bind(key_id)
        .bind(tenant)
        .bind(secret_sha256)
        .bind_now(now)
        .execute(c)
        .await?;
    Ok(())
}

pub(crate) async fn api_key_lookup(
    c: &mut MySqlConnection,
    key_id: &str,
) -> Result<Option<KeyRow>, StoreError> {
    let row = sqlx::query(
        "SELECT key_id, tenant_id, secret_sha256, revoked_at IS NOT NULL AS revoked
         FROM api_keys WHERE key_id = ?",
    )
    .bind(key_id)
    .fetch_optional(c)
    .await?;
    Ok(match row {
        Some(r) => Some(key_row!(r)),
        None => None,
    })
}

pub(crate) async fn api_key_revoke(
    c: &mut MySqlConnection,
    tenant: Uuid,
    key_id: &str,
    now: Now,
) -> Result<bool, StoreError> {
    // CLIENT_FOUND_ROWS: a key already revoked still counts as matched.
    let q = format!(
        "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, {})
         WHERE key_id = ? AND tenant_id = ?",
        now.mysql_sql()
    );
    let revoked = sqlx::query(super::sql(q))
        .bind_now(now)
        .bind(key_id)
        .bind(tenant)
        .execute(c)
        .await?
        .rows_affected();
    Ok(revoked == 1)
}
