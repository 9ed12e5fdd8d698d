use crate::error::StoreError;
use crate::rollup::{RollupPoint, RollupRow, rollup_point};
use sqlx::MySqlConnection;
use sqlx::types::Uuid;

/// The counts to add are bound a second time for the update, rather than read back with
/// `VALUES(col)`: MySQL 8.0.20+ deprecates `VALUES()` there, and its replacement (a row
/// alias, `AS new`) is MySQL's alone. Nothing reads the rows-affected count, which
/// CLIENT_FOUND_ROWS would blur here (an update adding zeros).
pub(crate) async fn rollup_add(
    c: &mut MySqlConnection,
    node: &str,
    rows: &[RollupRow],
) -> Result<(), StoreError> {
    for row in rows {
        sqlx::query(
            "INSERT INTO herald_rollup
                 (minute, tenant_id, channel, node, sent, retried, failed, lost)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)
             ON DUPLICATE KEY UPDATE sent = sent + ?, retried = retried + ?,
                 failed = failed + ?, lost = lost + ?",
        )
        .bind(row.minute)
        .bind(row.tenant_id)
        .bind(&row.channel)
        .bind(node)
        .bind(row.sent)
        .bind(row.retried)
        .bind(row.failed)
        .bind(row.lost)
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
    c: &mut MySqlConnection,
    tenant: Option<Uuid>,
    since_minute: i64,
) -> Result<Vec<RollupPoint>, StoreError> {
    let rows = sqlx::query(
        "SELECT minute, channel, CAST(SUM(sent) AS SIGNED) AS sent,
             CAST(SUM(retried) AS SIGNED) AS retried, CAST(SUM(failed) AS SIGNED) AS failed,
             CAST(SUM(lost) AS SIGNED) AS lost
         FROM herald_rollup
         WHERE minute >= ? AND (? IS NULL OR tenant_id = ?)
         GROUP BY minute, channel
         ORDER BY minute, channel",
    )
    .bind(since_minute)
    .bind(tenant)
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
    c: &mut MySqlConnection,
    before_minute: i64,
) -> Result<u64, StoreError> {
    Ok(sqlx::query("DELETE FROM herald_rollup WHERE minute < ?")
        .bind(before_minute)
        .execute(c)
        .await?
        .rows_affected())
}
