//! From an attempt's report to the store's transition: the library's half of recording an
//! outcome. The row is read under its lock, `herald_core::decide` says what the report
//! does to it, [`transition`] turns that decision (and the retry delay) into the
//! [`Transition`] the store writes. The worker's recorder and the reconciler both come
//! through here, so a reconciler and a returning worker racing for one delivery are
//! serialised by the row lock and decided by one rule.
//!
//! One attempt's outcome has these names on its way down: the channel's [`Outcome`]
//! (crate::Outcome), the worker's or reconciler's [`AttemptReport`] (a
//! `herald_core::Report` about attempt `n`, with what the channel said), the `Decision`,
//! and the store's `Transition`.

use herald_core::{Current, Decision, DeliveryState, Report, RetryPolicy, decide};
use herald_core::{DeliveryId, TenantId};
use herald_store::deliveries::{
    AttemptEnd, DeliveryRow, Settlement, StateChange, Transition, delivery_apply, delivery_get,
    lease_expired,
};
use herald_store::quota::Settle;
use herald_store::{Conn, Now, StoreError};
use std::time::Duration;

/// What happened to attempt `n` of a delivery, as its worker (or the reconciler, with
/// `Report::Lost`) reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptReport {
    pub delivery: DeliveryId,
    pub n: i32,
    /// The attempt's worker; for `Lost`, the lease owner the reconciler saw.
    pub worker: String,
    /// The account the delivery reserves on (locked first, in the one lock order).
    pub tenant: TenantId,
    pub quota_key: String,
    /// The stripe of that account its reservation sits on, when the reporter knows it (a
    /// worker, from its lease); `None` (also: no reservation) has the recorder read it.
    pub stripe: Option<i16>,
    pub report: Report,
    /// The provider's Retry-After, for a transient outcome.
    pub retry_after: Option<Duration>,
    /// A random unit in [0, 1] for the backoff's jitter.
    pub jitter: f64,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
}

impl crate::Herald {
    /// Records what happened to attempt `n` of a delivery, in a transaction of its own,
    /// as a worker does when a send ends: fenced by (worker, n), so a stale report changes
    /// only what the fencing rules allow (SPEC guarantee 6). Returns the decision; `None`
    /// when the delivery is gone. Locks the reservation's stripe, then the row (the one lock
    /// order).
    pub async fn record_report(
        &self,
        report: &AttemptReport,
        retry: &RetryPolicy,
    ) -> Result<Option<Decision>, crate::Error> {
        let now = self.clock().now();
        let committed = self
            .transaction(|tx| {
                Box::pin(async move {
                    let delivery = [report.delivery.as_uuid()];
                    herald_store::quota::quota_lock_reservations(tx.conn(), &delivery, &[]).await?;
                    Ok(record(tx.conn(), report, retry, now).await?)
                })
            })
            .await?;
        Ok(committed.value)
    }
}

/// Records a report: reads the row (locked), decides, applies. `None` when the delivery
/// is gone.
pub(crate) async fn record(
    mut conn: Conn<'_>,
    r: &AttemptReport,
    retry: &RetryPolicy,
    now: Now,
) -> Result<Option<Decision>, StoreError> {
    let Some(row) = delivery_get(conn.reborrow(), None, r.delivery.as_uuid(), true).await? else {
        return Ok(None);
    };
    // Only the reconciler's `Lost` depends on expiry; a worker's own outcome does not, so
    // it costs no round trip to the database's clock.
    let expired = r.report == Report::Lost
        && lease_expired(conn.reborrow(), row.id, row.lease_until, now).await?;
    let decision = decide(&current(&row, expired), &r.worker, r.n.max(0) as u32, r.report);
    delivery_apply(conn, &transition(&row, decision, r, retry, now)).await?;
    Ok(Some(decision))
}

/// The row as `decide` sees it.
pub(crate) fn current(row: &DeliveryRow, lease_expired: bool) -> Current<'_> {
    Current {
        state: row.state,
        lease_owner: row.lease_owner.as_deref(),
        attempts: row.attempts.max(0) as u32,
        attempts_base: row.attempts_base.max(0) as u32,
        max_attempts: row.max_attempts.max(1) as u32,
        lease_expired,
    }
}

/// What `decision` (about report `r` on `row`) writes: the state, the reservation's final
/// movement, the attempt's row. Pure, so it is tested without a database.
pub(crate) fn transition<'a>(
    row: &'a DeliveryRow,
    decision: Decision,
    r: &'a AttemptReport,
    retry: &RetryPolicy,
    now: Now,
) -> Transition<'a> {
    let error = r.error_message.as_deref();
    let settle = |settle| {
        Some(Settlement {
            tenant_id: row.tenant_id,
            quota_key: &row.quota_key,
            cost: row.cost,
            reservation_seq: row.reservation_seq,
            settle,
        })
    };
    let (state, settlement) = match decision {
        Decision::MarkSent { stale } => {
            // A stale `sent` on a failed or cancelled row is `RecordLateSent`; here the
            // reservation is still held unless another `sent` already committed it.
            let commit = row.state.holds_reservation().then(|| settle(Settle::Commit)).flatten();
            (Some(StateChange::Sent { own_attempt: !stale }), commit)
        }
        Decision::Requeue { .. } => {
            let used = row.attempts.saturating_sub(row.attempts_base).max(1) as u32;
            let retry_in = retry.delay(used, r.retry_after, r.jitter);
            (Some(StateChange::Pending { retry_in, error }), None)
        }
        Decision::Fail { .. } => (Some(StateChange::Failed { error }), settle(Settle::Release)),
        Decision::RecordSentAgain | Decision::RecordLateSent | Decision::Ignore => (None, None),
    };
    // An attempt that ended `sent` under its own lease is read from the delivery row (its
    // worker, start and `sent_at`); a repeated `sent` from it changes nothing either.
    let own_attempt = row.attempts == r.n && row.attempt_worker.as_deref() == Some(&r.worker);
    let on_row = match decision {
        Decision::MarkSent { stale } => !stale,
        Decision::RecordSentAgain => own_attempt && row.state == DeliveryState::Sent,
        _ => false,
    };
    let attempt = match (decision.attempt_outcome(), on_row) {
        (Some(outcome), false) => Some(AttemptEnd {
            n: r.n,
            worker: &r.worker,
            outcome: outcome.as_str(),
            // The current attempt started when it was leased; an older attempt's row
            // normally exists already.
            started_at: (row.attempts == r.n)
                .then_some(row.attempt_started_at.unwrap_or(row.updated_at)),
            error_code: r.error_code.as_deref(),
            error_message: error,
        }),
        _ => None,
    };
    Transition { id: row.id, state, settle: settlement, attempt, now }
}
