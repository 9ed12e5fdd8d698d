//! The rollup: per-minute outcome counts (sent, retried, failed, lost) per tenant and
//! channel, each server process (`node`) flushing what it counted. A process adds to its
//! own rows only, so processes never write one row; a read sums over them.

use crate::conn::Conn;
use crate::error::StoreError;
use sqlx::types::Uuid;

/// One process's counts for one (minute, tenant, channel), to add.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupRow {
    /// Unix milliseconds at the start of the minute.
    pub minute: i64,
    pub tenant_id: Uuid,
    pub channel: String,
    pub sent: i64,
    pub retried: i64,
    pub failed: i64,
    pub lost: i64,
}

/// One (minute, channel)'s counts, summed over processes (and over tenants when asked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupPoint {
    /// Unix milliseconds at the start of the minute.
    pub minute: i64,
    pub channel: String,
    pub sent: i64,
    pub retried: i64,
    pub failed: i64,
    pub lost: i64,
}

/// Adds each row's counts to (minute, tenant, channel, `node`), inserting the row when it
/// is absent: an upsert that adds, one statement per row, in the caller's transaction.
/// Rows repeating a key add up. Nothing to add, no statement.
pub async fn rollup_add(conn: Conn<'_>, node: &str, rows: &[RollupRow]) -> Result<(), StoreError> {
    if rows.is_empty() {
        return Ok(());
    }
    crate::per_backend!(conn, rollup::rollup_add(node, rows))
}

/// The counts of every minute from `since_minute` on (inclusive), summed over processes —
/// and over tenants when `tenant` is `None` — per (minute, channel), ordered by minute then
/// channel (byte order, on every backend).
pub async fn rollup_read(
    conn: Conn<'_>,
    tenant: Option<Uuid>,
    since_minute: i64,
) -> Result<Vec<RollupPoint>, StoreError> {
    crate::per_backend!(conn, rollup::rollup_read(tenant, since_minute))
}

/// Deletes the rows of minutes before `before_minute` (exclusive); how many.
pub async fn rollup_prune(conn: Conn<'_>, before_minute: i64) -> Result<u64, StoreError> {
    crate::per_backend!(conn, rollup::rollup_prune(before_minute))
}

/// Decodes a [`RollupPoint`] from a row of any backend.
macro_rules! rollup_point {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = &$row;
        $crate::rollup::RollupPoint {
            minute: row.try_get("minute")?,
            channel: row.try_get("channel")?,
            sent: row.try_get("sent")?,
            retried: row.try_get("retried")?,
            failed: row.try_get("failed")?,
            lost: row.try_get("lost")?,
        }
    }};
}
pub(crate) use rollup_point;
