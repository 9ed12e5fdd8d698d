//! Applying what the library decided. `herald` reads the row under its lock, asks
//! `herald_core::decide`, computes any retry delay, and hands the result here as a
//! [`Transition`]: the row's new state, the reservation's final movement, the attempt's
//! row. The store writes it and judges nothing. The one set-based exception,
//! [`deliveries_sent_fenced`], encodes a single decision in SQL (a fenced `sent`), and a
//! test holds it to `decide`.

use super::truncate_error;
use crate::clock::Now;
use crate::conn::Conn;
use crate::error::StoreError;
use crate::quota::{Settle, quota_settle};
use sqlx::types::Uuid;
use std::time::Duration;

/// A delivery's move to another state; every move clears the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StateChange<'a> {
    /// Sent. `own_attempt`: the current attempt ended `sent` under its own lease, so the
    /// row keeps standing for that attempt (no attempt row is written for it); otherwise
    /// `attempt_worker` is cleared.
    Sent { own_attempt: bool },
    /// Back to the queue, due `retry_in` from now; `error` becomes the last error.
    Pending { retry_in: Duration, error: Option<&'a str> },
    /// Failed for good; `error` becomes the last error.
    Failed { error: Option<&'a str> },
    /// Cancelled by its tenant.
    Cancelled,
}

impl StateChange<'_> {
    /// The change as columns: state, retry delay (ms), last error, whether the row keeps
    /// standing for its attempt.
    pub(crate) fn columns(self) -> (&'static str, Option<i64>, Option<String>, bool) {
        use herald_core::DeliveryState as S;
        match self {
            StateChange::Sent { own_attempt } => (S::Sent.as_str(), None, None, own_attempt),
            StateChange::Pending { retry_in, error } => (
                S::Pending.as_str(),
                Some(i64::try_from(retry_in.as_millis()).unwrap_or(i64::MAX)),
                error.map(truncate_error),
                false,
            ),
            StateChange::Failed { error } => {
                (S::Failed.as_str(), None, error.map(truncate_error), false)
            }
            StateChange::Cancelled => (S::Cancelled.as_str(), None, None, false),
        }
    }
}

/// The final movement of a delivery's current reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settlement<'a> {
    pub tenant_id: Uuid,
    pub quota_key: &'a str,
    pub cost: i64,
    pub reservation_seq: i32,
    pub settle: Settle,
}

/// The row of attempt `n` as it ends (or a new outcome for one that ended, as a late
/// `sent` after `lost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptEnd<'a> {
    pub n: i32,
    pub worker: &'a str,
    /// `herald_core::AttemptOutcome::as_str`.
    pub outcome: &'a str,
    /// When the attempt was leased, if known (else its end).
    pub started_at: Option<i64>,
    pub error_code: Option<&'a str>,
    pub error_message: Option<&'a str>,
}

/// What to write for one delivery, decided by the library. Each part is optional; all
/// parts happen in the caller's transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition<'a> {
    pub id: Uuid,
    pub state: Option<StateChange<'a>>,
    pub settle: Option<Settlement<'a>>,
    pub attempt: Option<AttemptEnd<'a>>,
    pub now: Now,
}

/// Writes a [`Transition`]. A second final movement of one reservation fails on the
/// journal's unique index (the database refuses it, whatever the caller decided).
pub async fn delivery_apply(mut conn: Conn<'_>, t: &Transition<'_>) -> Result<(), StoreError> {
    if let Some(change) = t.state {
        crate::per_backend!(conn.reborrow(), apply::set_state(t.id, change, t.now))?;
    }
    if let Some(s) = t.settle
        && s.cost > 0
    {
        let seq = s.reservation_seq;
        quota_settle(conn.reborrow(), s.tenant_id, s.quota_key, s.cost, t.id, seq, s.settle, t.now)
            .await?;
    }
    if let Some(attempt) = t.attempt {
        crate::per_backend!(conn, apply::attempt_close(t.id, &attempt, t.now))?;
    }
    Ok(())
}

/// Whether a lease that runs until `lease_until` has expired by `now`. A fixed instant is
/// compared here; the database's clock costs a round trip on PostgreSQL.
pub async fn lease_expired(
    conn: Conn<'_>,
    id: Uuid,
    lease_until: Option<i64>,
    now: Now,
) -> Result<bool, StoreError> {
    let Some(until) = lease_until else { return Ok(false) };
    match now {
        Now::At(ms) => Ok(until <= ms),
        Now::Database => crate::per_backend!(conn, apply::lease_expired_now(id, until)),
    }
}

/// The common case, set-based: every `(id, n)` whose attempt `n` of `worker` still holds
/// the lease and reported `sent` becomes `sent` — state, reservation committed per account
/// with one journal row per delivery; the attempt stays on the delivery row. Returns the
/// `(id, n)` it marked; the others are unchanged and the caller decides them one by one.
/// Only the first `(id, n)` of an id is considered (a worker can hold a stale and a new
/// attempt of one delivery). Per delivery, exactly `decide(Report::Sent)` on a fenced
/// attempt applied as a [`Transition`]. PostgreSQL: one statement; SQLite (no writing
/// CTEs): a statement per delivery and one per account.
///
/// Lock the quota rows first with `quota_lock` (in a stable order), or two concurrent
/// batches over the same tenants can deadlock.
pub async fn deliveries_sent_fenced(
    conn: Conn<'_>,
    worker: &str,
    attempts: &[(Uuid, i32)],
    now: Now,
) -> Result<Vec<(Uuid, i32)>, StoreError> {
    let mut seen = std::collections::HashSet::with_capacity(attempts.len());
    let attempts: Vec<(Uuid, i32)> =
        attempts.iter().copied().filter(|(id, _)| seen.insert(*id)).collect();
    if attempts.is_empty() {
        return Ok(Vec::new());
    }
    crate::per_backend!(conn, apply::deliveries_sent_fenced(worker, &attempts, now))
}
