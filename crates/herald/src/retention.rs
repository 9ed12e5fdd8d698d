//! Retention, a maintenance service beside the reconciler: final deliveries (with their
//! payloads, attempts and replay records) and receipts older than the retention window
//! are deleted in bounded batches, judged by the deciding clock — the database's in
//! production, so a node whose own clock runs fast cannot prune early and shrink the
//! idempotency window (a retry inside the window must find its delivery).

use crate::error::Error;
use crate::handle::Herald;
use herald_core::limits::{RETENTION_BATCH_MAX, RETENTION_EVERY_DEFAULT};
use herald_store::deliveries::retention_prune;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Retention settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetentionOptions {
    /// How long a final delivery (and a receipt) is kept (`HERALD_RETENTION`): its
    /// idempotency window.
    pub keep: Duration,
    /// Period of the loop.
    pub every: Duration,
    /// Rows deleted per statement.
    pub batch_max: usize,
}

impl RetentionOptions {
    /// Keeps `keep`, with the default period and batch.
    pub fn keep(keep: Duration) -> RetentionOptions {
        RetentionOptions { keep, every: RETENTION_EVERY_DEFAULT, batch_max: RETENTION_BATCH_MAX }
    }
}

/// What one pass deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionReport {
    pub deliveries: u64,
    pub receipts: u64,
}

#[derive(Debug, Clone)]
pub struct Retention {
    herald: Herald,
    options: RetentionOptions,
}

impl Retention {
    pub fn new(herald: Herald, options: RetentionOptions) -> Retention {
        Retention { herald, options }
    }

    /// One pass: batches until a batch deletes less than a full one of each.
    pub async fn run_once(&self) -> Result<RetentionReport, Error> {
        let (keep, limit) = (self.options.keep, self.options.batch_max.max(1));
        let mut report = RetentionReport::default();
        loop {
            let now = self.herald.clock().now();
            let pruned = self
                .herald
                .transaction(|tx| {
                    Box::pin(async move { Ok(retention_prune(tx.conn(), keep, now, limit).await?) })
                })
                .await?
                .value;
            report.deliveries += pruned.deliveries;
            report.receipts += pruned.receipts;
            if pruned.deliveries < limit as u64 && pruned.receipts < limit as u64 {
                // The dashboard's per-minute counts go with the deliveries they counted,
                // its ended sessions a day after they ended.
                self.herald.rollup_prune(keep).await?;
                while self.herald.ui_sessions_prune(limit).await? == limit as u64 {}
                // The audit log keeps the same window.
                while self.herald.audit_prune(keep, limit).await? == limit as u64 {}
                return Ok(report);
            }
        }
    }

    /// Runs `run_once` every `every` until `shutdown` is cancelled.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), Error> {
        loop {
            let pass = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                pass = self.run_once() => pass,
            };
            match pass {
                Ok(r) if r.deliveries + r.receipts > 0 => {
                    tracing::info!(deliveries = r.deliveries, receipts = r.receipts, "pruned")
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "retention pass failed"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(self.options.every) => {}
            }
        }
    }
}
