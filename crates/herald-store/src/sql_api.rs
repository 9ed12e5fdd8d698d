//! Administration of the SQL API (`herald_submit_v1`, `herald_receipt_v1`: PostgreSQL
//! migration 6): which database roles may submit for which tenants. The API's functions
//! run with herald's rights, so a role needs no rights on herald's tables; a grant gives
//! it USAGE on herald's schema and a row in `herald_sql_grants`, which the submit checks
//! against the session's role. PostgreSQL only for now (MariaDB's procedures are to come;
//! SQLite has no server for an application's connection to share).

use crate::conn::Conn;
use crate::error::StoreError;
use sqlx::types::Uuid;

/// One grant: `role` may submit for `tenant`, or for every tenant (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlGrant {
    pub role: String,
    pub tenant: Option<Uuid>,
}

fn not_here(conn: &Conn<'_>) -> StoreError {
    let backend = match conn {
        Conn::Sqlite(_) => "SQLite",
        Conn::MySql(_) => "MariaDB",
        Conn::Postgres(_) => "PostgreSQL",
    };
    StoreError::NotOnBackend { what: "the SQL API", backend }
}

/// Grants `role` the tenant (or every tenant); `false` when it had that grant already.
/// The role must exist on the server (an error otherwise, and nothing is written).
pub async fn sql_grant(
    conn: Conn<'_>,
    role: &str,
    tenant: Option<Uuid>,
) -> Result<bool, StoreError> {
    let c = match conn {
        Conn::Postgres(c) => c,
        other => return Err(not_here(&other)),
    };
    let usage: String = sqlx::query_scalar(
        "SELECT format('GRANT USAGE ON SCHEMA %I TO %I', current_schema(), $1::text)",
    )
    .bind(role)
    .fetch_one(&mut *c)
    .await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(usage)).execute(&mut *c).await?;
    let inserted = sqlx::query(
        "INSERT INTO herald_sql_grants (role_name, tenant_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
    )
    .bind(role)
    .bind(tenant)
    .execute(&mut *c)
    .await?
    .rows_affected();
    Ok(inserted == 1)
}

/// Takes back the grant of the tenant (or of every tenant); `false` when there was none.
/// The role keeps USAGE on the schema, which by itself lets it submit for no tenant.
pub async fn sql_revoke(
    conn: Conn<'_>,
    role: &str,
    tenant: Option<Uuid>,
) -> Result<bool, StoreError> {
    let c = match conn {
        Conn::Postgres(c) => c,
        other => return Err(not_here(&other)),
    };
    let deleted = sqlx::query(
        "DELETE FROM herald_sql_grants WHERE role_name = $1 AND tenant_id IS NOT DISTINCT FROM $2",
    )
    .bind(role)
    .bind(tenant)
    .execute(c)
    .await?
    .rows_affected();
    Ok(deleted == 1)
}

/// Every grant, by role, then tenant (every tenant first).
pub async fn sql_grants(conn: Conn<'_>) -> Result<Vec<SqlGrant>, StoreError> {
    let c = match conn {
        Conn::Postgres(c) => c,
        other => return Err(not_here(&other)),
    };
    let rows: Vec<(String, Option<Uuid>)> = sqlx::query_as(
        "SELECT role_name, tenant_id FROM herald_sql_grants
         ORDER BY role_name, tenant_id NULLS FIRST",
    )
    .fetch_all(c)
    .await?;
    Ok(rows.into_iter().map(|(role, tenant)| SqlGrant { role, tenant }).collect())
}
