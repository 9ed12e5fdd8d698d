//! Receipts: `once(tx, scope, operation_id, apply)` applies an operation at most once per
//! (scope, operation id), durably, in the caller's transaction.

use crate::BoxFuture;
use crate::error::Error;
use herald_core::{OperationId, Scope};
use herald_store::AsConn;
use herald_store::receipts::receipt_insert;

/// What [`once`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Once<T> {
    /// The receipt was new and `apply` ran, returning this.
    Applied(T),
    /// A receipt already existed (or a concurrent transaction holding it committed first):
    /// `apply` did not run.
    AlreadyApplied,
}

impl<T> Once<T> {
    pub fn is_applied(&self) -> bool {
        matches!(self, Once::Applied(_))
    }
}

/// Records a receipt for (`scope`, `operation_id`) in `conn`'s transaction and runs
/// `apply` with the same connection only when the receipt is new.
///
/// The receipt and `apply`'s changes commit or roll back together, so a retried or
/// re-delivered operation is applied once, also across restarts. A duplicate is detected
/// without raising an SQL error (`ON CONFLICT DO NOTHING`), so the caller's transaction is
/// never aborted by it and the caller's other writes still commit. Under concurrency, the
/// second inserter of one id waits for the first transaction: if it commits, the second
/// sees `AlreadyApplied`; if it rolls back, the second applies.
///
/// `conn` must be inside a transaction (a [`crate::Tx`], or the application's own sqlx
/// transaction); otherwise the receipt would commit on its own and [`Error::NotInTransaction`]
/// is returned before anything is written. If `apply` fails, the caller must roll back
/// (the runner does): the receipt is already written in the transaction.
pub async fn once<C, T, F>(
    conn: &mut C,
    scope: &str,
    operation_id: &str,
    apply: F,
) -> Result<Once<T>, Error>
where
    C: AsConn + ?Sized,
    F: for<'c> FnOnce(&'c mut C) -> BoxFuture<'c, Result<T, Error>>,
{
    let scope = Scope::new(scope)?;
    let operation_id = OperationId::new(operation_id)?;
    if !conn.as_conn().in_transaction() {
        return Err(Error::NotInTransaction);
    }
    if !receipt_insert(conn.as_conn(), &scope, &operation_id).await? {
        return Ok(Once::AlreadyApplied);
    }
    Ok(Once::Applied(apply(conn).await?))
}
