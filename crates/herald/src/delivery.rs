//! The public view of a delivery, its attempts and quota accounts, converted from store
//! rows (milliseconds) into typed values (jiff timestamps).

use crate::error::Error;
use herald_core::{DeliveryId, DeliveryState, TenantId};
use herald_store::deliveries::{AttemptRow, DeliveryRow};
use jiff::Timestamp;

/// A delivery as callers see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub id: DeliveryId,
    pub tenant: TenantId,
    pub operation_key: String,
    pub channel: String,
    pub to: String,
    pub state: DeliveryState,
    /// Leases taken over the delivery's life (never reset, also not by a replay).
    pub attempts: u32,
    /// Attempts allowed since the latest replay.
    pub max_attempts: u32,
    /// Attempts taken before the latest replay.
    pub attempts_base: u32,
    pub reservation_seq: u32,
    pub quota_key: String,
    pub cost: i64,
    /// When it is due; 9999-12-30 while [`Delivery::held`].
    pub next_attempt_at: Timestamp,
    /// Pending in a held scope (`Herald::hold`): it waits, no attempt spent.
    pub held: bool,
    pub last_error: Option<String>,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    pub sent_at: Option<Timestamp>,
}

/// One attempt of a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    pub n: u32,
    pub worker: String,
    pub started_at: Timestamp,
    pub finished_at: Option<Timestamp>,
    /// `sent`, `transient`, `terminal`, `lost`, `late_sent`; `None` while running.
    pub outcome: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// The release the attempt's worker ran (`WorkerOptions::release`, `HERALD_RELEASE`);
    /// `None` for a worker from before herald recorded releases.
    pub release: Option<String>,
}

/// A stored time; out of range is an error that names the value, never a default.
pub(crate) fn ts(ms: i64, what: impl FnOnce() -> String) -> Result<Timestamp, Error> {
    Timestamp::from_millisecond(ms)
        .map_err(|e| Error::Unreadable { what: format!("{} ({ms} ms): {e}", what()) })
}

fn count(n: i32) -> u32 {
    n.max(0) as u32
}

impl TryFrom<DeliveryRow> for Delivery {
    type Error = Error;

    fn try_from(r: DeliveryRow) -> Result<Delivery, Error> {
        let id = r.id;
        let at = |ms: i64, column: &'static str| ts(ms, || format!("{column} of delivery {id}"));
        Ok(Delivery {
            id: DeliveryId::from_uuid(r.id),
            tenant: TenantId::from_uuid(r.tenant_id),
            operation_key: r.operation_key,
            channel: r.channel,
            to: r.recipient,
            state: r.state,
            attempts: count(r.attempts),
            max_attempts: count(r.max_attempts),
            attempts_base: count(r.attempts_base),
            reservation_seq: count(r.reservation_seq),
            quota_key: r.quota_key,
            cost: r.cost,
            next_attempt_at: at(r.next_attempt_at, "next_attempt_at")?,
            held: r.state == DeliveryState::Pending
                && r.next_attempt_at == herald_store::holds::HELD_DUE_MS,
            last_error: r.last_error,
            created_at: at(r.created_at, "created_at")?,
            updated_at: at(r.updated_at, "updated_at")?,
            sent_at: r.sent_at.map(|ms| at(ms, "sent_at")).transpose()?,
        })
    }
}

impl TryFrom<AttemptRow> for Attempt {
    type Error = Error;

    fn try_from(r: AttemptRow) -> Result<Attempt, Error> {
        let n = r.n;
        let at = |ms: i64, column: &'static str| ts(ms, || format!("{column} of attempt {n}"));
        Ok(Attempt {
            n: count(r.n),
            worker: r.worker,
            started_at: at(r.started_at, "started_at")?,
            finished_at: r.finished_at.map(|ms| at(ms, "finished_at")).transpose()?,
            outcome: r.outcome,
            error_code: r.error_code,
            error_message: r.error_message,
            release: None,
        })
    }
}
