//! The lease: a worker's time-bounded right to perform a delivery (`sending`, lease owner,
//! lease until), taken with `SKIP LOCKED` on PostgreSQL so concurrent workers never take
//! the same row; its heartbeat; handing it back; and the leases the reconciler finds
//! expired.

use super::LeasedRow;
use crate::clock::Now;
use crate::conn::Conn;
use crate::error::StoreError;
use sqlx::types::Uuid;
use std::time::Duration;

/// What to lease.
#[derive(Debug, Clone)]
pub struct Lease<'a> {
    pub worker: &'a str,
    /// Only deliveries of these channels (the ones this process can send).
    pub channels: &'a [String],
    pub limit: usize,
    pub lease: Duration,
    pub now: Now,
}

/// Leases up to `limit` due deliveries, oldest due first: `sending`, `attempts + 1`, the
/// lease starting now. An attempt's row is written when it ends; until then the delivery
/// row stands for it (`attempt_worker`, `attempt_started_at`).
pub async fn deliveries_lease(
    conn: Conn<'_>,
    lease: &Lease<'_>,
) -> Result<Vec<LeasedRow>, StoreError> {
    if lease.limit == 0 || lease.channels.is_empty() {
        return Ok(Vec::new());
    }
    crate::per_backend!(conn, lease::deliveries_lease(lease))
}

/// Extends a live lease (heartbeat). `false` when attempt `n` of `worker` no longer holds it.
pub async fn delivery_lease_extend(
    conn: Conn<'_>,
    id: Uuid,
    worker: &str,
    n: i32,
    lease: Duration,
    now: Now,
) -> Result<bool, StoreError> {
    crate::per_backend!(conn, lease::delivery_lease_extend(id, worker, n, lease, now))
}

/// Hands back a lease whose send never started (shutdown, or a lease whose COMMIT went
/// unanswered): `pending` again, the attempt un-spent. `false` when attempt `n` of
/// `worker` no longer holds the lease.
pub async fn delivery_hand_back(
    conn: Conn<'_>,
    id: Uuid,
    worker: &str,
    n: i32,
) -> Result<bool, StoreError> {
    crate::per_backend!(conn, lease::delivery_hand_back(id, worker, n))
}

/// A lease the reconciler found expired, with the account its delivery reserves on (so
/// the account can be locked before the row, in the one lock order).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredLease {
    pub id: Uuid,
    pub lease_owner: String,
    pub attempts: i32,
    pub tenant_id: Uuid,
    pub quota_key: String,
    pub channel: String,
}

/// Deliveries `sending` whose lease has expired by `now`, oldest expiry first.
pub async fn deliveries_expired(
    conn: Conn<'_>,
    now: Now,
    limit: usize,
) -> Result<Vec<ExpiredLease>, StoreError> {
    crate::per_backend!(conn, lease::deliveries_expired(now, limit as i64))
}

/// Leases `worker` holds that have not expired by `now`, as (id, attempt), at most
/// `limit`. A worker compares them with the leases it knows of to find those taken by a
/// lease statement whose COMMIT it never heard back from.
pub async fn deliveries_leased_by(
    conn: Conn<'_>,
    worker: &str,
    now: Now,
    limit: usize,
) -> Result<Vec<(Uuid, i32)>, StoreError> {
    crate::per_backend!(conn, lease::deliveries_leased_by(worker, now, limit as i64))
}
