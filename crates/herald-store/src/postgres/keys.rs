use crate::clock::Now;
use crate::error::StoreError;
use crate::keys::{KeyRow, key_row};
use sqlx::PgConnection;
use sqlx::types::Uuid;

pub(crate) async fn api_key_insert(
    c: &mut PgConnection,
    key_id: &str,
    tenant: Uuid,
    secret_sha256: &[u8],
    now: Now,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO api_keys (key_id, tenant_id, secret_sha256, created_at)
         VALUES ($1, $2, $3, herald_now($4))",
    )
    .bind(key_id)
    .bind(tenant)
    .bind(secret_sha256)
    .bind(now.pg())
    .execute(c)
    .await?;
    Ok(())
}

pub(crate) async fn api_key_lookup(
    c: &mut PgConnection,
    key_id: &str,
) -> Result<Option<KeyRow>, StoreError> {
    let row = sqlx::query(
        "SELECT key_id, tenant_id, secret_sha256, revoked_at IS NOT NULL AS revoked
         FROM api_keys WHERE key_id = $1",
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
    c: &mut PgConnection,
    tenant: Uuid,
    key_id: &str,
    now: Now,
) -> Result<bool, StoreError> {
    let revoked = sqlx::query(
        "UPDATE api_keys SET revoked_at = coalesce(revoked_at, herald_now($3))
         WHERE key_id = $1 AND tenant_id = $2",
    )
    .bind(key_id)
    .bind(tenant)
    .bind(now.pg())
    .execute(c)
    .await?
    .rows_affected();
    Ok(revoked == 1)
}
