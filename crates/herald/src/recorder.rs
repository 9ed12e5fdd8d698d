//! The worker's recorder: outcomes recorded in batches, one transaction per batch — group
//! commit without a timer. A send waits until its outcome is committed, so its slot stays
//! taken meanwhile and a slow database slows leasing down.

use crate::error::Error;
use crate::handle::Herald;
use crate::outcome::{self, AttemptReport};
use crate::worker::WorkerCounts;
use herald_core::limits::RECORD_BATCH_MAX;
use herald_core::{Decision, Report, RetryPolicy};
use herald_store::deliveries::deliveries_sent_fenced;
use herald_store::quota::quota_lock_reservations;
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

/// First pause before recording a batch again after the database was unavailable; it
/// doubles up to `RECORD_RETRY_PAUSE_MAX`.
const RECORD_RETRY_PAUSE: Duration = Duration::from_millis(50);
const RECORD_RETRY_PAUSE_MAX: Duration = Duration::from_secs(1);

/// A report waiting for the recorder, and where to send its decision.
pub(crate) struct Recording {
    pub report: AttemptReport,
    pub reply: oneshot::Sender<Result<Option<Decision>, Error>>,
}

/// Records outcomes in batches: whatever finished while the previous batch committed goes
/// into the next transaction — group commit without a timer, so a lone outcome is
/// recorded at once and a busy worker pays one commit per batch. Ends when its worker is
/// dropped.
pub(crate) struct Recorder {
    pub herald: Herald,
    pub worker: String,
    pub retry: RetryPolicy,
    /// How long an unavailable database is waited out before an outcome is given up to
    /// the reconciler: the lease.
    pub retry_for: Duration,
    pub counts: Arc<WorkerCounts>,
}

impl Recorder {
    pub(crate) async fn run(self, mut pending: mpsc::UnboundedReceiver<Recording>) {
        let mut batch = Vec::with_capacity(RECORD_BATCH_MAX);
        while pending.recv_many(&mut batch, RECORD_BATCH_MAX).await > 0 {
            // Outcomes of one lease often finish together: the first to arrive woke this
            // task, the rest are runnable. Let them run before committing, while that still
            // adds to the batch — otherwise a batch of one costs a whole transaction while
            // the others wait for it (every third batch in a no-op drain).
            while batch.len() < RECORD_BATCH_MAX {
                let before = batch.len();
                tokio::task::yield_now().await;
                while batch.len() < RECORD_BATCH_MAX {
                    match pending.try_recv() {
                        Ok(r) => batch.push(r),
                        Err(_) => break,
                    }
                }
                if batch.len() == before {
                    break;
                }
            }
            self.record_and_reply(std::mem::take(&mut batch)).await;
        }
    }

    async fn record_and_reply(&self, batch: Vec<Recording>) {
        let (outcomes, replies): (Vec<_>, Vec<_>) =
            batch.into_iter().map(|r| (r.report, r.reply)).unzip();
        match self.record_while_available(&outcomes).await {
            Ok(decisions) => {
                for (reply, decision) in replies.into_iter().zip(decisions) {
                    let _ = reply.send(Ok(decision));
                }
            }
            // One bad outcome must not fail the others: each alone, in its own transaction.
            Err(e) if outcomes.len() > 1 => {
                tracing::debug!(error = %e, "recording a batch failed; one by one");
                for (outcome, reply) in outcomes.iter().zip(replies) {
                    let decision = self.record(std::slice::from_ref(outcome)).await;
                    let _ = reply.send(decision.map(|mut d| d.pop().flatten()));
                }
            }
            Err(e) => {
                if let Some(reply) = replies.into_iter().next() {
                    let _ = reply.send(Err(e));
                }
            }
        }
    }

    /// [`Recorder::record`], again and again (with a growing pause) while the database is
    /// unavailable — a broken connection, an empty pool, a COMMIT whose outcome is unknown —
    /// for up to a lease: recording is fenced by (lease owner, attempt), so a repeat of a
    /// batch that did commit changes nothing. Past a lease the reconciler owns the
    /// deliveries anyway. The sends' slots stay taken meanwhile, so leasing waits too.
    async fn record_while_available(
        &self,
        outcomes: &[AttemptReport],
    ) -> Result<Vec<Option<Decision>>, Error> {
        let give_up_at = Instant::now() + self.retry_for;
        let mut pause = RECORD_RETRY_PAUSE;
        loop {
            match self.record(outcomes).await {
                Err(e) if e.is_unavailable() && Instant::now() + pause < give_up_at => {
                    tracing::debug!(error = %e, "recording outcomes failed; trying again");
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(RECORD_RETRY_PAUSE_MAX);
                }
                result => return result,
            }
        }
    }

    /// One transaction: the stripes the reservations sit on locked first in a stable order
    /// (the one lock order: stripes, then delivery rows), the fenced `sent` reports in one set-based statement,
    /// every other report through `outcome::record` and its decision table.
    async fn record(&self, reports: &[AttemptReport]) -> Result<Vec<Option<Decision>>, Error> {
        let now = self.herald.clock().now();
        let (worker, retry) = (self.worker.as_str(), &self.retry);
        // The stripes the worker's lease read are locked as they are; the others (none from
        // a worker, but for cost-0 deliveries: no reservation) are read first.
        let (mut deliveries, mut stripes) = (Vec::new(), Vec::new());
        for r in reports {
            match r.stripe {
                Some(s) => stripes.push((r.tenant.as_uuid(), r.quota_key.clone(), s)),
                None => deliveries.push(r.delivery.as_uuid()),
            }
        }
        let sent: Vec<(uuid::Uuid, i32)> = reports
            .iter()
            .filter(|r| r.report == Report::Sent)
            .map(|r| (r.delivery.as_uuid(), r.n))
            .collect();
        let committed = self
            .herald
            .transaction(|tx| {
                let (deliveries, stripes, sent) = (&deliveries, &stripes, &sent);
                Box::pin(async move {
                    quota_lock_reservations(tx.conn(), deliveries, stripes).await?;
                    let marked: HashSet<(uuid::Uuid, i32)> =
                        deliveries_sent_fenced(tx.conn(), worker, sent, now)
                            .await?
                            .into_iter()
                            .collect();
                    let mut decisions = Vec::with_capacity(reports.len());
                    for r in reports {
                        if r.report == Report::Sent && marked.contains(&(r.delivery.as_uuid(), r.n))
                        {
                            decisions.push(Some(Decision::MarkSent { stale: false }));
                            continue;
                        }
                        decisions.push(outcome::record(tx.conn(), r, retry, now).await?);
                    }
                    Ok(decisions)
                })
            })
            .await?;
        self.counts.record_transactions.fetch_add(1, Ordering::Relaxed);
        Ok(committed.value)
    }
}
