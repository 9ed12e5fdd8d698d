use crate::error::StoreError;
use crate::tenants::{TenantRow, tenant_row};
use sqlx::SqliteConnection;
use sqlx::types::Uuid;

pub(crate) async fn tenant_insert(
    c: &mut SqliteConnection,
    id: Uuid,
    name: &str,
    webhook_secret: &str,
) -> Result<bool, StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO tenants (id, name, webhook_secret) VALUES (?1, ?2, ?3)
         ON CONFLICT (name) DO NOTHING",
    )
    .bind(id)
    .bind(name)
    .bind(webhook_secret)
    .execute(c)
    .await?
    .rows_affected();
    Ok(inserted == 1)
}

pub(crate) async fn tenant_exists(
    c: &mut SqliteConnection,
    tenant: Uuid,
) -> Result<bool, StoreError> {
    let found: Option<i32> = sqlx::query_scalar("SELECT 1 FROM tenants WHERE id = ?1")
        .bind(tenant)
        .fetch_optional(c)
        .await?;
    Ok(found.is_some())
}

pub(crate) async fn tenant_get(
    c: &mut SqliteConnection,
    id: Uuid,
) -> Result<Option<TenantRow>, StoreError> {
    let row = sqlx::query(
        "SELECT id, name, webhook_secret, webhook_secret_previous FROM tenants WHERE id = ?1",
    )
    .bind(id)
    .fetch_optional(c)
    .await?;
    Ok(match row {
        Some(r) => Some(tenant_row!(r)),
        None => None,
    })
}

pub(crate) async fn tenant_rotate_secret(
    c: &mut SqliteConnection,
    id: Uuid,
    new_secret: &str,
) -> Result<bool, StoreError> {
    let rotated = sqlx::query(
        "UPDATE tenants SET webhook_secret_previous = webhook_secret, webhook_secret = ?2
         WHERE id = ?1",
    )
    .bind(id)
    .bind(new_secret)
    .execute(c)
    .await?
    .rows_affected();
    Ok(rotated == 1)
}

pub(crate) async fn tenants_list(
    c: &mut SqliteConnection,
    limit: usize,
) -> Result<Vec<(Uuid, String)>, StoreError> {
    Ok(sqlx::query_as("SELECT id, name FROM tenants ORDER BY name LIMIT ?1")
        .bind(limit as i64)
        .fetch_all(c)
        .await?)
}
