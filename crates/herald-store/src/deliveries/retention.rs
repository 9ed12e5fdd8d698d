//! Retention: final deliveries and old receipts deleted in batches, judged by the
//! deciding clock — the database's in production, so a node whose own clock runs fast
//! cannot prune early and shrink the idempotency window.

use crate::clock::Now;
use crate::conn::Conn;
use crate::error::StoreError;
use std::time::Duration;

const KEEP_MS_MAX: i64 = 1_000 * 366 * 24 * 3_600 * 1_000;

/// What one retention batch deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub deliveries: u64,
    pub receipts: u64,
}

/// Deletes up to `limit` final deliveries (sent, failed, cancelled) last updated more than
/// `keep` before `now`, with their payloads, attempts and replay records, and up to
/// `limit` receipts older than that. The ledger journal is kept: it is the account's
/// history, not the delivery's.
pub async fn retention_prune(
    conn: Conn<'_>,
    keep: Duration,
    now: Now,
    limit: usize,
) -> Result<Pruned, StoreError> {
    // Clamped to a thousand years, which every backend's date arithmetic can hold.
    let keep_ms = i64::try_from(keep.as_millis()).unwrap_or(i64::MAX).min(KEEP_MS_MAX);
    crate::per_backend!(conn, retention::retention_prune(keep_ms, now, limit as i64))
}
