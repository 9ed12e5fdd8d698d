//! The reconciler owns the vanished (SPEC guarantee 7): deliveries whose lease expired
//! get a `lost` attempt and are re-queued with backoff, or failed and released when their
//! attempts are exhausted. Every change is conditional on the lease still being the
//! expired one, so several reconcilers in several processes can run at once.

use crate::error::Error;
use crate::handle::Herald;
use crate::outcome::AttemptReport;
use crate::rollup::Counted;
use herald_core::limits::{RECONCILE_BATCH_MAX, RECONCILE_EVERY_DEFAULT};
use herald_core::{Decision, Report, RetryPolicy};
use herald_store::deliveries::{deliveries_expired, oldest_due_age_ms};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Reconciler settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconcilerOptions {
    /// Period of the loop (`HERALD_RECONCILE_EVERY`).
    pub every: Duration,
    /// Expired leases handled per pass at most.
    pub batch_max: usize,
    /// Backoff for re-queued deliveries.
    pub retry: RetryPolicy,
}

impl Default for ReconcilerOptions {
    fn default() -> Self {
        ReconcilerOptions {
            every: RECONCILE_EVERY_DEFAULT,
            batch_max: RECONCILE_BATCH_MAX,
            retry: RetryPolicy::default(),
        }
    }
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReconcileReport {
    pub requeued: usize,
    pub failed: usize,
    /// How long the oldest due, pending delivery has waited (queue health).
    pub oldest_due_age: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct Reconciler {
    herald: Herald,
    options: ReconcilerOptions,
}

impl Reconciler {
    pub fn new(herald: Herald, options: ReconcilerOptions) -> Reconciler {
        Reconciler { herald, options }
    }

    /// One pass over expired leases, judged by the deciding clock (the database's).
    pub async fn run_once(&self) -> Result<ReconcileReport, Error> {
        let now = self.herald.clock().now();
        let limit = self.options.batch_max.max(1);
        let expired = self
            .herald
            .transaction(|tx| {
                Box::pin(async move { Ok(deliveries_expired(tx.conn(), now, limit).await?) })
            })
            .await?
            .value;
        let mut report = ReconcileReport::default();
        for lease in expired {
            let lost = AttemptReport {
                delivery: lease.id.into(),
                n: lease.attempts,
                worker: lease.lease_owner,
                tenant: lease.tenant_id.into(),
                quota_key: lease.quota_key,
                stripe: None,
                report: Report::Lost,
                retry_after: None,
                jitter: fastrand::f64(),
                error_code: Some("lease_expired".into()),
                error_message: Some(
                    "the lease expired before the worker reported an outcome".into(),
                ),
            };
            let decision = self.herald.record_report(&lost, &self.options.retry).await?;
            if decision.is_some_and(|d| d.attempt_outcome().is_some()) {
                let tenant = herald_core::TenantId::from_uuid(lease.tenant_id);
                self.herald.count_outcome(tenant, &lease.channel, Counted::Lost);
                if let Some(Counted::Failed) = Counted::of(decision) {
                    self.herald.count_outcome(tenant, &lease.channel, Counted::Failed);
                }
            }
            match decision {
                Some(Decision::Requeue { .. }) => report.requeued += 1,
                Some(Decision::Fail { .. }) => report.failed += 1,
                _ => {} // another reconciler, or the worker, got there first
            }
        }
        metrics::counter!("herald_reconciler_requeued_total").increment(report.requeued as u64);
        metrics::counter!("herald_reconciler_failed_total").increment(report.failed as u64);
        if report.requeued > 0 {
            self.herald.wake().soon();
        }
        let age = self
            .herald
            .transaction(|tx| Box::pin(async move { Ok(oldest_due_age_ms(tx.conn(), now).await?) }))
            .await?
            .value;
        report.oldest_due_age = age.map(|ms| Duration::from_millis(ms.max(0) as u64));
        Ok(report)
    }

    /// Runs `run_once` every `every` until `shutdown` is cancelled.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), Error> {
        loop {
            // A pass is many bounded transactions; shutdown does not wait for all of them
            // (each delivery's change is its own transaction, so stopping between or in
            // the middle of one leaves nothing half-done).
            let pass = tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                pass = self.run_once() => pass,
            };
            match pass {
                Ok(r) if r.requeued + r.failed > 0 => {
                    tracing::info!(
                        requeued = r.requeued,
                        failed = r.failed,
                        "reconciled expired leases"
                    )
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "reconciler pass failed"),
            }
            tokio::select! {
                _ = shutdown.cancelled() => return Ok(()),
                _ = tokio::time::sleep(self.options.every) => {}
            }
        }
    }
}
