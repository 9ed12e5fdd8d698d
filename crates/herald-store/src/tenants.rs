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
    crate::per_backend!(conn, tenants::tenant_insert(id, name, webhook_secret))
}

/// Whether the tenant exists.
pub async fn tenant_exists(conn: Conn<'_>, tenant: Uuid) -> Result<bool, StoreError> {
    crate::per_backend!(conn, tenants::tenant_exists(tenant))
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
    crate::per_backend!(conn, tenants::tenant_get(id))
}

/// Makes `new_secret` the signing secret, keeping the current one as the previous (both
/// sign during a rotation). `false` when the tenant does not exist.
pub async fn tenant_rotate_secret(
    conn: Conn<'_>,
    id: Uuid,
    new_secret: &str,
) -> Result<bool, StoreError> {
    crate::per_backend!(conn, tenants::tenant_rotate_secret(id, new_secret))
}

/// (id, name) of tenants ordered by name (byte order, on every backend), at most `limit`.
pub async fn tenants_list(conn: Conn<'_>, limit: usize) -> Result<Vec<(Uuid, String)>, StoreError> {
    crate::per_backend!(conn, tenants::tenants_list(limit))
}

/// Decodes a [`TenantRow`] from a row of either backend.
macro_rules! tenant_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = &$row;
        $crate::tenants::TenantRow {
            id: row.try_get("id")?,
            name: row.try_get("name")?,
            webhook_secret: row.try_get("webhook_secret")?,
            webhook_secret_previous: row.try_get("webhook_secret_previous")?,
        }
    }};
}
pub(crate) use tenant_row;

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
