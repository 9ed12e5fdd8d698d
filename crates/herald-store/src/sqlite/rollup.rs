use crate::error::StoreError;
use crate::rollup::{RollupPoint, RollupRow, rollup_point};
use sqlx::SqliteConnection;
use sqlx::types::Uuid;

pub(crate) async fn rollup_add(
    c: &mut SqliteConnection,
    node: &str,
    rows: &[RollupRow],
) -> Result<(), StoreError> {
    for row in rows {
        sqlx::query(
            "INSERT INTO herald_rollup
                 (minute, tenant_id, channel, node, sent, retried, failed, lost)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
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

pub(crate) async fn rollup_read(
    c: &mut SqliteConnection,
    tenant: Option<Uuid>,
    since_minute: i64,
) -> Result<Vec<RollupPoint>, StoreError> {
    let rows = sqlx::query(
        "SELECT minute, channel, sum(sent) AS sent, sum(retried) AS retried,
             sum(failed) AS failed, sum(lost) AS lost
         FROM herald_rollup
         WHERE minute >= ?1 AND (?2 IS NULL OR tenant_id = ?2)
         GROUP BY minute, channel
         ORDER BY minute, channel",
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
    c: &mut SqliteConnection,
    before_minute: i64,
) -> Result<u64, StoreError> {
    Ok(sqlx::query("DELETE FROM herald_rollup WHERE minute < ?1")
        .bind(before_minute)
        .execute(c)
        .await?
        .rows_affected())
}
