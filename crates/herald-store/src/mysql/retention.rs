use super::Bind;
use crate::clock::Now;
use crate::deliveries::Pruned;
use crate::error::StoreError;
use sqlx::MySqlConnection;

pub(crate) async fn retention_prune(
    c: &mut MySqlConnection,
    keep_ms: i64,
    now: Now,
    limit: i64,
) -> Result<Pruned, StoreError> {
    // Payloads, attempts and replay records go with their delivery (ON DELETE CASCADE).
    let q = format!(
        "DELETE FROM deliveries
         WHERE state IN ('sent', 'failed', 'cancelled') AND updated_at < {} - ?
         ORDER BY updated_at LIMIT ?",
        now.mysql_sql()
    );
    let deliveries = sqlx::query(super::sql(q))
        .bind_now(now)
        .bind(keep_ms)
        .bind(limit)
        .execute(&mut *c)
        .await?
        .rows_affected();
    let q = format!(
        "DELETE FROM receipts WHERE created_at < {} - ? ORDER BY created_at LIMIT ?",
        now.mysql_sql()
    );
    let receipts = sqlx::query(super::sql(q))
        .bind_now(now)
        .bind(keep_ms)
        .bind(limit)
        .execute(&mut *c)
        .await?
        .rows_affected();
    Ok(Pruned { deliveries, receipts })
}
