use super::quota::write_out_ends;
use crate::clock::Now;
use crate::deliveries::Pruned;
use crate::error::StoreError;
use sqlx::PgConnection;

/// The cutoff is computed by the server (`herald_now($2)`), not by this process.
pub(crate) async fn retention_prune(
    c: &mut PgConnection,
    keep_ms: i64,
    now: Now,
    limit: i64,
) -> Result<Pruned, StoreError> {
    // A delivery's ended reservation leaves with it as a final row of the journal (schema
    // 20: it was on the row), with its own id, time and reservation.
    let q = format!(
        "WITH gone AS (
             DELETE FROM deliveries WHERE id IN (
                 SELECT id FROM deliveries
                 WHERE state IN ('sent', 'failed', 'cancelled')
                   AND updated_at < herald_now($2) - $1 * interval '1 millisecond'
                 LIMIT $3 FOR UPDATE SKIP LOCKED)
             RETURNING *),
         kept AS ({})
         SELECT count(*) FROM gone",
        write_out_ends("gone", "TRUE")
    );
    let deliveries: i64 = sqlx::query_scalar(super::sql(q))
        .bind(keep_ms)
        .bind(now.pg())
        .bind(limit)
        .fetch_one(&mut *c)
        .await?;
    let deliveries = deliveries as u64;
    let receipts = sqlx::query(
        "DELETE FROM receipts WHERE ctid IN (
             SELECT ctid FROM receipts
             WHERE created_at < herald_now($2) - $1 * interval '1 millisecond' LIMIT $3)",
    )
    .bind(keep_ms)
    .bind(now.pg())
    .bind(limit)
    .execute(&mut *c)
    .await?
    .rows_affected();
    Ok(Pruned { deliveries, receipts })
}
