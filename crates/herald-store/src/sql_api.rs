//! Administration of the SQL API (`herald_submit_v1`, `herald_receipt_v1`: PostgreSQL
//! migration 6; `submit_v1`, `submit_v2`, `receipt_v1`, `wake_targets_v1`: MariaDB's
//! routine files): which
//! database roles may submit for which tenants. The API's routines run with herald's
//! rights, so a role needs no rights on herald's tables; a grant gives it the right to
//! call them (USAGE on herald's schema; EXECUTE on its procedures, for every account of
//! that user name) and a row in `herald_sql_grants`, which the submit checks against the
//! session's role (MariaDB: the session's user name). SQLite has no server for an
//! application's connection to share; MySQL's JSON functions cannot compute the
//! fingerprint.

use crate::conn::Conn;
use crate::error::StoreError;
use sqlx::types::Uuid;

/// One grant: `role` may submit for `tenant`, or for every tenant (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SqlGrant {
    pub role: String,
    pub tenant: Option<Uuid>,
}

/// MariaDB's procedures, which a grant lets a user call.
const MYSQL_ROUTINES: [&str; 4] = ["submit_v1", "submit_v2", "receipt_v1", "wake_targets_v1"];

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
        Conn::MySql(c) => return mysql_grant(c, role, tenant).await,
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
        Conn::MySql(c) => {
            mysql_installed(c).await?;
            let deleted = sqlx::query(
                "DELETE FROM herald_sql_grants WHERE role_name = ? AND tenant_key = COALESCE(?, '')",
            )
            .bind(role)
            .bind(tenant)
            .execute(c)
            .await?
            .rows_affected();
            return Ok(deleted == 1);
        }
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
    let rows: Vec<(String, Option<Uuid>)> = match conn {
        Conn::Postgres(c) => {
            sqlx::query_as(
                "SELECT role_name, tenant_id FROM herald_sql_grants
                 ORDER BY role_name, tenant_id NULLS FIRST",
            )
            .fetch_all(c)
            .await?
        }
        Conn::MySql(c) => {
            mysql_installed(c).await?;
            // An empty tenant_key (every tenant) sorts first.
            sqlx::query_as(
                "SELECT role_name, tenant_id FROM herald_sql_grants ORDER BY role_name, tenant_key",
            )
            .fetch_all(c)
            .await?
        }
        other => return Err(not_here(&other)),
    };
    Ok(rows.into_iter().map(|(role, tenant)| SqlGrant { role, tenant }).collect())
}

/// MariaDB's procedures are there (MySQL runs the SQL API's migration as a no-op).
async fn mysql_installed(c: &mut sqlx::MySqlConnection) -> Result<(), StoreError> {
    let found: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.ROUTINES
         WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = 'submit_v1'",
    )
    .fetch_one(&mut *c)
    .await?;
    if found == 0 {
        return Err(StoreError::NotOnBackend { what: "the SQL API", backend: "MySQL" });
    }
    Ok(())
}

/// EXECUTE on every procedure of the SQL API for each account (`hosts`) of user `role`.
async fn mysql_grant_execute(
    c: &mut sqlx::MySqlConnection,
    role: &str,
    hosts: &[String],
) -> Result<(), sqlx::Error> {
    let database: String = sqlx::query_scalar("SELECT DATABASE()").fetch_one(&mut *c).await?;
    for host in hosts {
        for routine in MYSQL_ROUTINES {
            let grant = format!(
                "GRANT EXECUTE ON PROCEDURE `{}`.`{routine}` TO {}@{}",
                database.replace('`', "``"),
                mysql_literal(role),
                mysql_literal(host)
            );
            sqlx::raw_sql(sqlx::AssertSqlSafe(grant)).execute(&mut *c).await?;
        }
    }
    Ok(())
}

/// Grants every user that holds a grant of the SQL API EXECUTE on each of its procedures
/// again: run by `migrate` after the routines changed, so a procedure added since the
/// grant (`submit_v2`) can be called without a new `herald sql grant`.
pub(crate) async fn mysql_grant_again(c: &mut sqlx::MySqlConnection) -> Result<(), sqlx::Error> {
    let users: Vec<(String, String)> = sqlx::query_as(
        "SELECT DISTINCT u.User, u.Host FROM herald_sql_grants g
         JOIN mysql.user u ON u.User = g.role_name ORDER BY u.User, u.Host",
    )
    .fetch_all(&mut *c)
    .await?;
    for (user, host) in users {
        mysql_grant_execute(c, &user, std::slice::from_ref(&host)).await?;
    }
    Ok(())
}

/// A MySQL string literal of `s` (GRANT takes no placeholders for an account).
fn mysql_literal(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "''"))
}

/// EXECUTE on the procedures for every account named `role` (`role@host`), then the row.
/// GRANT commits the transaction it runs in (as all of MariaDB's account statements do),
/// so it runs before the row is written: a refused GRANT leaves nothing behind.
async fn mysql_grant(
    c: &mut sqlx::MySqlConnection,
    role: &str,
    tenant: Option<Uuid>,
) -> Result<bool, StoreError> {
    mysql_installed(c).await?;
    // Without this check a GRANT to no account would create one, where the server's
    // sql_mode lacks NO_AUTO_CREATE_USER.
    let hosts: Vec<String> = sqlx::query_scalar("SELECT Host FROM mysql.user WHERE User = ?")
        .bind(role)
        .fetch_all(&mut *c)
        .await?;
    if hosts.is_empty() {
        return Err(StoreError::NoSuchRole(role.to_string()));
    }
    mysql_grant_execute(c, role, &hosts).await?;
    let inserted = crate::mysql::inserted(
        sqlx::query(
            "INSERT INTO herald_sql_grants (role_name, tenant_id, granted_at)
             SELECT ?, ?, CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED) FROM DUAL
             WHERE NOT EXISTS (SELECT 1 FROM herald_sql_grants
                               WHERE role_name = ? AND tenant_key = COALESCE(?, ''))",
        )
        .bind(role)
        .bind(tenant)
        .bind(role)
        .bind(tenant)
        .execute(&mut *c)
        .await,
    )?;
    Ok(inserted)
}
