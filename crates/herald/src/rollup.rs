//! Outcomes per minute, for the dashboard's charts: each process counts the outcomes it
//! records in memory (a map of at most a few hundred entries a minute) and adds them to
//! `herald_rollup` every [`ROLLUP_FLUSH_EVERY`], one row per (minute, tenant, channel,
//! process). The chart then reads an hour as at most 60 × tenants × channels rows, summed
//! over processes — never a scan of the deliveries. Counting costs the hot path one
//! mutex-guarded map update per outcome and no database write.
//!
//! The minute is the process's wall clock, not the database's: a chart needs no more.
//! Counts a process had not yet flushed when it died are lost (at most one interval's);
//! a flush whose COMMIT outcome is unknown is not repeated (a chart may undercount, it
//! never counts twice).

use crate::error::Error;
use crate::handle::Herald;
use herald_core::{Decision, TenantId};
use herald_store::rollup::{RollupPoint, RollupRow, rollup_add, rollup_prune, rollup_read};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// How often a process adds what it counted to the database.
pub const ROLLUP_FLUSH_EVERY: Duration = Duration::from_secs(10);

const MINUTE_MS: i64 = 60_000;

/// What one outcome adds to its minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counted {
    Sent,
    Retried,
    Failed,
    Lost,
}

impl Counted {
    /// The count a decision about a report adds (a stale or ignored one adds none).
    pub(crate) fn of(decision: Option<Decision>) -> Option<Counted> {
        match decision? {
            Decision::MarkSent { stale: false } => Some(Counted::Sent),
            Decision::Requeue { .. } => Some(Counted::Retried),
            Decision::Fail { .. } => Some(Counted::Failed),
            _ => None,
        }
    }
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Counts {
    sent: i64,
    retried: i64,
    failed: i64,
    lost: i64,
}

/// This process's counts not yet added to the database, and its name there.
#[derive(Debug)]
pub(crate) struct Rollup {
    node: String,
    pending: Mutex<HashMap<(i64, Uuid, String), Counts>>,
}

impl Default for Rollup {
    fn default() -> Self {
        let suffix = Uuid::now_v7().simple().to_string();
        Rollup {
            node: format!("p{}-{}", std::process::id(), &suffix[suffix.len() - 8..]),
            pending: Mutex::default(),
        }
    }
}

fn wall_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

impl Rollup {
    pub(crate) fn count(&self, tenant: TenantId, channel: &str, counted: Counted) {
        let minute = wall_ms() / MINUTE_MS * MINUTE_MS;
        let Ok(mut pending) = self.pending.lock() else { return };
        let counts = pending.entry((minute, tenant.as_uuid(), channel.to_string())).or_default();
        match counted {
            Counted::Sent => counts.sent += 1,
            Counted::Retried => counts.retried += 1,
            Counted::Failed => counts.failed += 1,
            Counted::Lost => counts.lost += 1,
        }
    }

    fn take(&self) -> Vec<RollupRow> {
        let Ok(mut pending) = self.pending.lock() else { return Vec::new() };
        let mut rows: Vec<RollupRow> = pending
            .drain()
            .map(|((minute, tenant_id, channel), c)| RollupRow {
                minute,
                tenant_id,
                channel,
                sent: c.sent,
                retried: c.retried,
                failed: c.failed,
                lost: c.lost,
            })
            .collect();
        // One order, so two flushes never lock the same rows in opposite orders.
        rows.sort_by(|a, b| {
            (a.minute, a.tenant_id, &a.channel).cmp(&(b.minute, b.tenant_id, &b.channel))
        });
        rows
    }

    /// Puts back counts whose flush failed before it could have committed.
    fn restore(&self, rows: Vec<RollupRow>) {
        let Ok(mut pending) = self.pending.lock() else { return };
        for r in rows {
            let c = pending.entry((r.minute, r.tenant_id, r.channel)).or_default();
            c.sent += r.sent;
            c.retried += r.retried;
            c.failed += r.failed;
            c.lost += r.lost;
        }
    }
}

/// One minute of outcomes, summed over the processes (and channels, and tenants when
/// asked for all).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Minute {
    /// Unix milliseconds at the minute's start.
    pub at_ms: i64,
    pub sent: i64,
    /// Attempts that ended transient (the delivery was queued again).
    pub retried: i64,
    /// Deliveries that failed for good.
    pub failed: i64,
    /// Attempts the reconciler found abandoned.
    pub lost: i64,
}

impl Herald {
    pub(crate) fn count_outcome(&self, tenant: TenantId, channel: &str, counted: Counted) {
        self.rollup.count(tenant, channel, counted);
    }

    /// Adds what this process counted to the database (the dashboard's rollup). Called
    /// every [`ROLLUP_FLUSH_EVERY`] by [`Herald::run_rollup`]; callable any time.
    pub async fn rollup_flush(&self) -> Result<(), Error> {
        let rows = self.rollup.take();
        if rows.is_empty() {
            return Ok(());
        }
        let node = self.rollup.node.as_str();
        let written = self
            .transaction(|tx| {
                let rows = &rows;
                Box::pin(async move { Ok(rollup_add(tx.conn(), node, rows).await?) })
            })
            .await;
        match written {
            Ok(_) => Ok(()),
            Err(e @ Error::CommitOutcomeUnknown { .. }) => Err(e),
            Err(e) => {
                self.rollup.restore(rows);
                Err(e)
            }
        }
    }

    /// Flushes the rollup every [`ROLLUP_FLUSH_EVERY`] until `shutdown`, then once more.
    /// A failed flush is logged and its counts kept for the next.
    pub async fn run_rollup(&self, shutdown: CancellationToken) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(ROLLUP_FLUSH_EVERY) => {}
            }
            if let Err(e) = self.rollup_flush().await {
                tracing::warn!(error = %e, "could not write the per-minute rollup");
            }
        }
        if let Err(e) = self.rollup_flush().await {
            tracing::warn!(error = %e, "could not write the per-minute rollup at shutdown");
        }
    }

    /// The last `minutes` minutes of outcomes (the current one included), oldest first,
    /// one entry per minute (zero when nothing happened), for one tenant or all.
    pub async fn throughput(
        &self,
        tenant: Option<TenantId>,
        minutes: usize,
    ) -> Result<Vec<Minute>, Error> {
        let now = wall_ms() / MINUTE_MS * MINUTE_MS;
        let since = now - MINUTE_MS * (minutes.max(1) as i64 - 1);
        let tenant = tenant.map(TenantId::as_uuid);
        let points: Vec<RollupPoint> = self
            .read(|conn, _| Box::pin(async move { rollup_read(conn, tenant, since).await }))
            .await?;
        let mut series: Vec<Minute> = (0..minutes.max(1) as i64)
            .map(|i| Minute { at_ms: since + i * MINUTE_MS, ..Minute::default() })
            .collect();
        for p in points {
            let Some(slot) = usize::try_from((p.minute - since) / MINUTE_MS)
                .ok()
                .and_then(|i| series.get_mut(i))
            else {
                continue;
            };
            slot.sent += p.sent;
            slot.retried += p.retried;
            slot.failed += p.failed;
            slot.lost += p.lost;
        }
        Ok(series)
    }

    /// Deletes rollup minutes older than `keep` (retention calls it).
    pub(crate) async fn rollup_prune(&self, keep: Duration) -> Result<u64, Error> {
        let before = wall_ms() - i64::try_from(keep.as_millis()).unwrap_or(i64::MAX);
        let before = before / MINUTE_MS * MINUTE_MS;
        self.transaction(|tx| Box::pin(async move { Ok(rollup_prune(tx.conn(), before).await?) }))
            .await
            .map(|c| c.value)
    }
}
