use crate::error::StoreError;
use crate::rollup::{RollupPoint, RollupRow, rollup_point};
use sqlx::PgConnection;
use sqlx::types::Uuid;

/// One statement per row, not one over arrays: rows repeating a key would make a single
/// `ON CONFLICT DO UPDATE` affect one row twice, which PostgreSQL refuses.
pub(crate) async fn rollup_add(
    c: &mut PgConnection,
    node: &str,
    rows: &[RollupRow],
) -> Result<(), StoreError> {
    for row in rows {
        sqlx::query(
            "INSERT INTO herald_rollup
                 (minute, tenant_id, channel, node, sent, retried, failed, lost)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (minute, tenant_id, channel, node) DO UPDATE SET
                 sent = herald_rollup.sent + excluded.sent,
                 retried = herald_rollup.retried + excluded.retried,
                 failed = herald_rollup.failed + excluded.failed,
                 lost = herald_rollup.lost + excluded.lost",
        )
        .bind(row.minute)
        .bind(row.tenant_id)
        .bind(&row.channel)
        .bind(node)
        .bind(row.sent)
        .bind(row.retried)
        .bind(row.failed)
        .bind(row.lost)
        .execute(&mut *c)
        .await?;
    }
    Ok(())
}

/// Channels in byte order (`COLLATE "C"`), as the other backends order them.
pub(crate) async fn rollup_read(
    c: &mut PgConnection,
    tenant: Option<Uuid>,
    since_minute: i64,
) -> Result<Vec<RollupPoint>, StoreError> {
    let rows = sqlx::query(
        "SELECT minute, channel, CAST(sum(sent) AS bigint) AS sent,
             CAST(sum(retried) AS bigint) AS retried, CAST(sum(failed) AS bigint) AS failed,
             CAST(sum(lost) AS bigint) AS lost
         FROM herald_rollup
         WHERE minute >= $1 AND ($2::uuid IS NULL OR tenant_id = $2)
         GROUP BY minute, channel
         ORDER BY minute, channel COLLATE \"C\"",
    )
    .bind(since_minute)
    .bind(tenant)
    .fetch_all(c)
    .await?;
    let mut points = Vec::with_capacity(rows.len());
    for row in rows {
        points.push(rollup_point!(row));
    }
    Ok(points)
}

pub(crate) async fn rollup_prune(
    c: &mut PgConnection,
    before_minute: i64,
) -> Result<u64, StoreError> {
    Ok(sqlx::query("DELETE FROM herald_rollup WHERE minute < $1")
        .bind(before_minute)
        .execute(c)
        .await?
        .rows_affected())
}
