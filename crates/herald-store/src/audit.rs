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

pub(crate) const AUDIT_COLS: &str =
    "id, at_ms, actor, key_id, tenant_id, action, target, count, address";

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
