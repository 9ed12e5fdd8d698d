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
    let result = match conn {
        Conn::Sqlite(c) => sqlx::query(
            "INSERT INTO receipts (scope, operation_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
        )
        .bind(scope.as_str())
        .bind(operation_id.as_str())
        .execute(c)
        .await?
        .rows_affected(),
        Conn::Postgres(c) => sqlx::query(
            "INSERT INTO receipts (scope, operation_id) VALUES ($1, $2) ON CONFLICT DO NOTHING",
        )
        .bind(scope.as_str())
        .bind(operation_id.as_str())
        .execute(c)
        .await?
        .rows_affected(),
    };
    Ok(result == 1)
}

/// How many receipts a scope holds.
pub async fn receipts_count(conn: Conn<'_>, scope: &Scope) -> Result<i64, StoreError> {
    let n = match conn {
        Conn::Sqlite(c) => {
            sqlx::query_scalar("SELECT count(*) FROM receipts WHERE scope = ?1")
                .bind(scope.as_str())
                .fetch_one(c)
                .await?
        }
        Conn::Postgres(c) => {
            sqlx::query_scalar("SELECT count(*) FROM receipts WHERE scope = $1")
                .bind(scope.as_str())
                .fetch_one(c)
                .await?
        }
    };
    Ok(n)
}
