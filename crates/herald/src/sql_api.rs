//! Who may use the SQL API (`herald_submit_v1` on PostgreSQL, `submit_v1` on MariaDB, in an
//! application's own transaction): an explicit grant per database role (user, on
//! MariaDB), for one tenant or for every tenant. Without one the submit answers `invalid` / `tenant` / `not_granted` and writes nothing.

use crate::error::Error;
use crate::handle::Herald;
use herald_core::TenantId;
use herald_store::sql_api::{sql_grant, sql_grants, sql_revoke};
use herald_store::tenants::tenant_exists;

pub use herald_store::sql_api::SqlGrant;

/// PostgreSQL's limit on an identifier's length, in bytes (MariaDB's on a user name is 80
/// characters: herald keeps to the smaller on both).
const ROLE_LEN_MAX: usize = 63;

fn check_role(role: &str) -> Result<(), Error> {
    if role.is_empty() || role.len() > ROLE_LEN_MAX || role.chars().any(char::is_control) {
        return Err(Error::invalid(format!("a role name is 1 to {ROLE_LEN_MAX} printable bytes")));
    }
    Ok(())
}

impl Herald {
    /// Lets database role `role` submit through SQL for `tenant` (`None`: every tenant).
    /// `false` when it could already. The role must exist on the server.
    pub async fn sql_grant(&self, role: &str, tenant: Option<TenantId>) -> Result<bool, Error> {
        check_role(role)?;
        let tenant = tenant.map(|t| t.as_uuid());
        let granted = self
            .transaction(|tx| {
                Box::pin(async move {
                    if let Some(t) = tenant
                        && !tenant_exists(tx.conn(), t).await?
                    {
                        return Err(Error::UnknownTenant);
                    }
                    Ok(sql_grant(tx.conn(), role, tenant).await?)
                })
            })
            .await?;
        Ok(granted.value)
    }

    /// Takes back what [`Herald::sql_grant`] gave for the same `tenant`; `false` when
    /// there was no such grant.
    pub async fn sql_revoke(&self, role: &str, tenant: Option<TenantId>) -> Result<bool, Error> {
        check_role(role)?;
        let tenant = tenant.map(|t| t.as_uuid());
        let revoked = self
            .transaction(|tx| {
                Box::pin(async move { Ok(sql_revoke(tx.conn(), role, tenant).await?) })
            })
            .await?;
        Ok(revoked.value)
    }

    /// Every grant, by role.
    pub async fn sql_grants(&self) -> Result<Vec<SqlGrant>, Error> {
        let grants = self
            .transaction(|tx| Box::pin(async move { Ok(sql_grants(tx.conn()).await?) }))
            .await?;
        Ok(grants.value)
    }
}
