use crate::clock::Now;
use crate::deliveries::Pruned;
use crate::error::StoreError;
use sqlx::SqliteConnection;

pub(crate) async fn retention_prune(
    c: &mut SqliteConnection,
    keep_ms: i64,
    now: Now,
    limit: i64,
) -> Result<Pruned, StoreError> {
    let cutoff = now.sqlite_ms().saturating_sub(keep_ms);
    let deliveries = sqlx::query(
        "DELETE FROM deliveries WHERE id IN (
             SELECT id FROM deliveries
             WHERE state IN ('sent', 'failed', 'cancelled') AND updated_at < ?1 LIMIT ?2)",
    )
    .bind(cutoff)
    .bind(limit)
    .execute(&mut *c)
    .await?
    .rows_affected();
    let receipts = sqlx::query(
        "DELETE FROM receipts WHERE rowid IN (
             SELECT rowid FROM receipts WHERE created_at < ?1 LIMIT ?2)",
    )
    .bind(cutoff)
    .bind(limit)
    .execute(&mut *c)
    .await?
    .rows_affected();
    Ok(Pruned { deliveries, receipts })
}
