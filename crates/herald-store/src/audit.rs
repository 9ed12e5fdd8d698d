//! The audit log (`herald_audit`): append-only rows of who did what to which tenant, how
//! many and when. The table refuses updates (a trigger on every backend); rows leave only
//! by retention.

use crate::conn::Conn;
use crate::error::StoreError;
use sqlx::types::Uuid;

/// One entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditRow {
    /// Its place in the log (0 for one not written yet).
    pub id: i64,
    pub at_ms: i64,
    /// `admin`, `tenant`, `operator` or `anonymous`.
    pub actor: String,
    pub key_id: Option<String>,
    pub tenant_id: Option<Uuid>,
    pub action: String,
    pub target: Option<String>,
    pub count: Option<i64>,
    pub address: Option<String>,
}

pub(crate) type AuditTuple = (
    i64,
    i64,
    String,
    Option<String>,
    Option<Uuid>,
    String,
    Option<String>,
    Option<i64>,
    Option<String>,
);

pub(crate) fn audit_row(t: AuditTuple) -> AuditRow {
    let (id, at_ms, actor, key_id, tenant_id, action, target, count, address) = t;
    AuditRow { id, at_ms, actor, key_id, tenant_id, action, target, count, address }
}

/// The statements of a backend, in its placeholders, every parameter bound once and in
/// the order the functions below bind it.
pub(crate) struct AuditSql {
    /// at_ms, actor, key_id, tenant_id, action, target, count, address.
    pub insert: &'static str,
    /// tenant (or any when NULL), before (or none when NULL), limit.
    pub list: &'static str,
    /// before_ms, limit.
    pub prune: &'static str,
}

/// A backend's functions of this module over its connection type and its [`AuditSql`].
macro_rules! audit_fns {
    ($conn:ty, $sql:expr) => {
        use crate::audit::{AuditRow, AuditTuple, audit_row};
        use crate::error::StoreError;
        use sqlx::types::Uuid;

        pub(crate) async fn audit_insert(c: &mut $conn, row: &AuditRow) -> Result<(), StoreError> {
            sqlx::query($sql.insert)
                .bind(row.at_ms)
                .bind(&row.actor)
                .bind(&row.key_id)
                .bind(row.tenant_id)
                .bind(&row.action)
                .bind(&row.target)
                .bind(row.count)
                .bind(&row.address)
                .execute(c)
                .await?;
            Ok(())
        }

        pub(crate) async fn audit_list(
            c: &mut $conn,
            tenant: Option<Uuid>,
            before: Option<i64>,
            limit: i64,
        ) -> Result<Vec<AuditRow>, StoreError> {
            let q = sqlx::query_as($sql.list).bind(tenant).bind(before).bind(limit);
            let rows: Vec<AuditTuple> = q.fetch_all(c).await?;
            Ok(rows.into_iter().map(audit_row).collect())
        }

        pub(crate) async fn audit_prune(
            c: &mut $conn,
            before_ms: i64,
            limit: i64,
        ) -> Result<u64, StoreError> {
            let q = sqlx::query($sql.prune).bind(before_ms).bind(limit);
            Ok(q.execute(c).await?.rows_affected())
        }
    };
}
pub(crate) use audit_fns;

/// Appends `row` (its `id` is the log's to give).
pub async fn audit_insert(conn: Conn<'_>, row: &AuditRow) -> Result<(), StoreError> {
    crate::per_backend!(conn, audit::audit_insert(row))
}

/// Entries newest first, before the entry `before` when given: every tenant's, or
/// `tenant`'s (`Some`).
pub async fn audit_list(
    conn: Conn<'_>,
    tenant: Option<Uuid>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<AuditRow>, StoreError> {
    crate::per_backend!(conn, audit::audit_list(tenant, before, limit))
}

/// Deletes up to `limit` entries older than `before_ms`; how many.
pub async fn audit_prune(conn: Conn<'_>, before_ms: i64, limit: i64) -> Result<u64, StoreError> {
    crate::per_backend!(conn, audit::audit_prune(before_ms, limit))
}
