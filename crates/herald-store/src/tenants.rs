//! Tenants: the owners of deliveries, keys and quota accounts.

use crate::conn::Conn;
use crate::error::StoreError;
use sqlx::types::Uuid;

/// Inserts a tenant; `false` when the name is taken.
pub async fn tenant_insert(
    conn: Conn<'_>,
    id: Uuid,
    name: &str,
    webhook_secret: &str,
) -> Result<bool, StoreError> {
    let n = match conn {
        Conn::Sqlite(c) => sqlx::query(
            "INSERT INTO tenants (id, name, webhook_secret) VALUES (?1, ?2, ?3)
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(id)
        .bind(name)
        .bind(webhook_secret)
        .execute(c)
        .await?
        .rows_affected(),
        Conn::Postgres(c) => sqlx::query(
            "INSERT INTO tenants (id, name, webhook_secret) VALUES ($1, $2, $3)
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(id)
        .bind(name)
        .bind(webhook_secret)
        .execute(c)
        .await?
        .rows_affected(),
    };
    Ok(n == 1)
}

pub use crate::deliveries::tenant_exists;
