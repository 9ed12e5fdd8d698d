//! Receipts: one row per (scope, operation id) that has been applied. The insert never
//! raises on a duplicate (`ON CONFLICT DO NOTHING`), so a duplicate leaves the caller's
//! PostgreSQL transaction usable — a failed statement there would abort the whole
//! transaction and turn its COMMIT into a silent ROLLBACK.

use crate::conn::Conn;
use crate::error::StoreError;
use herald_core::{OperationId, Scope};

/// Inserts the receipt; `true` when it is new, `false` when it already existed. Under
/// concurrency the loser of the unique index waits for the winner's transaction and then
/// sees the conflict (or inserts, if the winner rolled back).
pub async fn receipt_insert(
    conn: Conn<'_>,
    scope: &Scope,
    operation_id: &OperationId,
) -> Result<bool, StoreError> {
    crate::per_backend!(conn, receipts::receipt_insert(scope.as_str(), operation_id.as_str()))
}

/// How many receipts a scope holds.
pub async fn receipts_count(conn: Conn<'_>, scope: &Scope) -> Result<i64, StoreError> {
    crate::per_backend!(conn, receipts::receipts_count(scope.as_str()))
}
