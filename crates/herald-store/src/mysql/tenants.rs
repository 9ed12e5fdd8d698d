use super::inserted;
use crate::clock::MYSQL_NOW_MS;
use crate::error::StoreError;
use crate::tenants::{TenantRow, tenant_row};
use sqlx::MySqlConnection;
use sqlx::types::Uuid;

pub(crate) async fn tenant_insert(
    c: &mut MySqlConnection,
    id: Uuid,
    name: &str,
    webhook_secret: &str,
) -> Result<bool, StoreError> {
    let q = format!(
        "INSERT INTO tenants (id, name, webhook_secret, created_at) VALUES (?, ?, ?, {MYSQL_NOW_MS})"
    );
    inserted(sqlx::query(super::sql(q)).bind(id).bind(name).bind(webhook_secret).execute(c).await)
}

pub(crate) async fn tenant_exists(
    c: &mut MySqlConnection,
    tenant: Uuid,
) -> Result<bool, StoreError> {
    let found: Option<i32> = sqlx::query_scalar("SELECT 1 FROM tenants WHERE id = ?")
        .bind(tenant)
        .fetch_optional(c)
        .await?;
    Ok(found.is_some())
}

pub(crate) async fn tenant_get(
    c: &mut MySqlConnection,
    id: Uuid,
) -> Result<Option<TenantRow>, StoreError> {
    let row = sqlx::query(
        "SELECT id, name, webhook_secret, webhook_secret_previous FROM tenants WHERE id = ?",
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
    c: &mut MySqlConnection,
    id: Uuid,
    new_secret: &str,
) -> Result<bool, StoreError> {
    // MariaDB assigns left to right: the previous secret is read before it is replaced.
    let rotated = sqlx::query(
        "UPDATE tenants SET webhook_secret_previous = webhook_secret, webhook_secret = ?
         WHERE id = ?",
    )
    .bind(new_secret)
    .bind(id)
    .execute(c)
    .await?
    .rows_affected();
    Ok(rotated == 1)
}

pub(crate) async fn tenants_list(
    c: &mut MySqlConnection,
    limit: usize,
) -> Result<Vec<(Uuid, String)>, StoreError> {
    Ok(sqlx::query_as("SELECT id, name FROM tenants ORDER BY name LIMIT ?")
        .bind(limit as i64)
        .fetch_all(c)
        .await?)
}
