//! Tenants: the owners of deliveries, keys and quota accounts.

use crate::conn::Conn;
use crate::error::StoreError;
use herald_core::Redacted;
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

/// Whether the tenant exists.
pub async fn tenant_exists(conn: Conn<'_>, tenant: Uuid) -> Result<bool, StoreError> {
    let found: Option<i32> = match conn {
        Conn::Sqlite(c) => {
            sqlx::query_scalar("SELECT 1 FROM tenants WHERE id = ?1")
                .bind(tenant)
                .fetch_optional(c)
                .await?
        }
        Conn::Postgres(c) => {
            sqlx::query_scalar("SELECT 1 FROM tenants WHERE id = $1")
                .bind(tenant)
                .fetch_optional(c)
                .await?
        }
    };
    Ok(found.is_some())
}

/// A tenant row.
#[derive(Clone, PartialEq, Eq)]
pub struct TenantRow {
    pub id: Uuid,
    pub name: String,
    pub webhook_secret: String,
    pub webhook_secret_previous: Option<String>,
}

/// The signing secrets print as `***`.
impl std::fmt::Debug for TenantRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantRow")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("webhook_secret", &Redacted)
            .field("webhook_secret_previous", &Redacted::of(&self.webhook_secret_previous))
            .finish()
    }
}

/// One tenant.
pub async fn tenant_get(conn: Conn<'_>, id: Uuid) -> Result<Option<TenantRow>, StoreError> {
    use sqlx::Row;
    macro_rules! tenant_row {
        ($r:expr) => {
            TenantRow {
                id: $r.try_get("id")?,
                name: $r.try_get("name")?,
                webhook_secret: $r.try_get("webhook_secret")?,
                webhook_secret_previous: $r.try_get("webhook_secret_previous")?,
            }
        };
    }
    Ok(match conn {
        Conn::Sqlite(c) => {
            match sqlx::query(
                "SELECT id, name, webhook_secret, webhook_secret_previous FROM tenants WHERE id = ?1",
            )
            .bind(id)
            .fetch_optional(c)
            .await?
            {
                Some(r) => Some(tenant_row!(r)),
                None => None,
            }
        }
        Conn::Postgres(c) => {
            match sqlx::query(
                "SELECT id, name, webhook_secret, webhook_secret_previous FROM tenants WHERE id = $1",
            )
            .bind(id)
            .fetch_optional(c)
            .await?
            {
                Some(r) => Some(tenant_row!(r)),
                None => None,
            }
        }
    })
}

/// Makes `new_secret` the signing secret, keeping the current one as the previous (both
/// sign during a rotation). `false` when the tenant does not exist.
pub async fn tenant_rotate_secret(
    conn: Conn<'_>,
    id: Uuid,
    new_secret: &str,
) -> Result<bool, StoreError> {
    let n = match conn {
        Conn::Sqlite(c) => sqlx::query(
            "UPDATE tenants SET webhook_secret_previous = webhook_secret, webhook_secret = ?2 WHERE id = ?1",
        )
        .bind(id)
        .bind(new_secret)
        .execute(c)
        .await?
        .rows_affected(),
        Conn::Postgres(c) => sqlx::query(
            "UPDATE tenants SET webhook_secret_previous = webhook_secret, webhook_secret = $2 WHERE id = $1",
        )
        .bind(id)
        .bind(new_secret)
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
    fn debug_hides_the_signing_secrets() {
        let row = TenantRow {
            id: Uuid::nil(),
            name: "acme".into(),
            webhook_secret: "whsec_current".into(),
            webhook_secret_previous: Some("whsec_previous".into()),
        };
        let shown = format!("{row:?}");
        assert!(shown.contains("acme") && !shown.contains("whsec_"), "{shown}");
    }
}
