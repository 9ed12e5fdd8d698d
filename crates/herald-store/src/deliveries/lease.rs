//! The lease: a worker's time-bounded right to perform a delivery (`sending`, lease owner,
//! lease until), taken with `SKIP LOCKED` on PostgreSQL so concurrent workers never take
//! the same row; its heartbeat; handing it back; and the leases the reconciler finds
//! expired.

use super::LeasedRow;
use crate::clock::Now;
use crate::conn::Conn;
use crate::error::StoreError;
use herald_core::fair::Lane;
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

/// Leases up to `limit` due deliveries, oldest due first whatever their lane (tools and
/// tests; workers lease lane by lane, [`deliveries_lease_lanes`]): `sending`, `attempts + 1`, the
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

/// Where to look for lanes with due work (herald_core::fair): the lanes of pending rows in
/// (tenant, destination) order after `after` (from the first when `None`), at most
/// `lanes_max` of them, one index probe each — never a scan of a lane's backlog.
#[derive(Debug, Clone)]
pub struct LanesDue<'a> {
    /// Due rows are counted only of these channels (the ones this process can send).
    pub channels: &'a [String],
    pub now: Now,
    pub after: Option<&'a Lane>,
    pub lanes_max: usize,
    /// Due rows are counted up to this many per lane (what the lease could take).
    pub due_max: usize,
}

/// A lane the walk visited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaneFound {
    pub lane: Lane,
    /// Due rows of the channels asked for, at most `due_max`; 0 for a lane whose pending
    /// rows are all scheduled later (or held).
    pub due: usize,
    /// The tenant's `send_weight`.
    pub weight: u32,
    /// Until when the lane waits (a receiver's Retry-After, an open circuit's next
    /// probe), Unix ms; `None`: a healthy lane.
    pub paused_until_ms: Option<i64>,
    /// Its consecutive failed sends (herald_core::fair::LaneHealth).
    pub failures: u32,
    /// Disabled: it waits until enabled again.
    pub disabled: bool,
}

/// The lanes with pending rows after `walk.after`, in order, each with its due count.
pub async fn deliveries_lanes(
    conn: Conn<'_>,
    walk: &LanesDue<'_>,
) -> Result<Vec<LaneFound>, StoreError> {
    if walk.lanes_max == 0 || walk.channels.is_empty() {
        return Ok(Vec::new());
    }
    crate::per_backend!(conn, lease::deliveries_lanes(walk))
}

/// The walk of `deliveries_lanes` on SQLite, which has no LATERAL: each step
/// finds the next lane with index probes (the next destination of the same tenant, else
/// the first of the next tenant); then each lane's due rows are counted up to
/// `due_max`, as the rows no later than its `due_max`-th due one (an OFFSET in a scalar
/// subquery, as MariaDB would need; MariaDB walks by a loose index scan instead, which
/// SQLite lacks). `channels`: the
/// placeholders of the channel list; `t`: the SQL of "now"; `hint`: what makes the
/// server read the lanes index (a planner may take another and read a backlog). Binds, in
/// order: the start
/// (tenant, tenant, destination) when `after`, `lanes_max`, the channels, now, the
/// channels, `due_max - 1`, now.
pub(crate) fn lanes_walk_sql(after: bool, channels: &str, t: &str, hint: &str) -> String {
    let start =
        if after { "AND (tenant_id > ? OR (tenant_id = ? AND destination > ?))" } else { "" };
    let pending = format!("FROM deliveries x {hint} WHERE x.state = 'pending'");
    // Each probe an index range read from its first entry (ORDER BY … LIMIT 1: MariaDB
    // reads a correlated MIN's whole range).
    let same_tenant = format!(
        "(SELECT x.destination {pending} AND x.tenant_id = l.tenant_id
             AND x.destination > l.destination ORDER BY x.destination LIMIT 1)"
    );
    let next_tenant = format!(
        "(SELECT x.tenant_id {pending} AND x.tenant_id > l.tenant_id
             ORDER BY x.tenant_id LIMIT 1)"
    );
    format!(
        "WITH RECURSIVE lanes (tenant_id, destination, n) AS (
             SELECT * FROM (
                 SELECT tenant_id, destination, 1 FROM deliveries {hint}
                 WHERE state = 'pending' {start}
                 ORDER BY tenant_id, destination LIMIT 1) first_lane
           UNION ALL
             SELECT
                 CASE WHEN {same_tenant} IS NOT NULL THEN l.tenant_id ELSE {next_tenant} END,
                 COALESCE({same_tenant},
                     (SELECT x.destination {pending} AND x.tenant_id = {next_tenant}
                      ORDER BY x.destination LIMIT 1)),
                 l.n + 1
             FROM lanes l WHERE l.tenant_id IS NOT NULL AND l.n < ?)
         SELECT l.tenant_id, l.destination,
             (SELECT COUNT(*) FROM deliveries d {hint}
              WHERE d.state = 'pending' AND d.tenant_id = l.tenant_id
                AND d.destination = l.destination AND d.channel IN ({channels})
                AND d.next_attempt_at <= COALESCE(
                    (SELECT k.next_attempt_at FROM deliveries k {hint}
                     WHERE k.state = 'pending' AND k.tenant_id = l.tenant_id
                       AND k.destination = l.destination AND k.next_attempt_at <= {t}
                       AND k.channel IN ({channels})
                     ORDER BY k.next_attempt_at LIMIT 1 OFFSET ?),
                    {t})) AS due,
             t.send_weight, p.until_ms, p.failures, p.disabled_ms
         FROM lanes l JOIN tenants t ON t.id = l.tenant_id
         LEFT JOIN herald_lanes p
             ON p.tenant_id = l.tenant_id AND p.destination = l.destination
         WHERE l.tenant_id IS NOT NULL
         ORDER BY l.n"
    )
}

/// A lanes walk's row: tenant, destination, due, send_weight, and the lane's health
/// (until, failures, disabled at).
pub(crate) type WalkRow =
    (sqlx::types::Uuid, String, i64, i32, Option<i64>, Option<i32>, Option<i64>);

/// A lanes walk's rows.
pub(crate) fn lanes_found(rows: Vec<WalkRow>, due_max: usize) -> Vec<LaneFound> {
    rows.into_iter()
        .map(|(tenant, destination, due, weight, until, failures, disabled)| LaneFound {
            lane: Lane { tenant, destination },
            due: (due.max(0) as usize).min(due_max),
            weight: weight.max(1) as u32,
            paused_until_ms: until,
            failures: failures.unwrap_or(0).max(0) as u32,
            disabled: disabled.is_some(),
        })
        .collect()
}

/// What to lease lane by lane: up to `take` rows of each lane, its oldest due first.
#[derive(Debug, Clone)]
pub struct LeaseLanes<'a> {
    pub worker: &'a str,
    pub channels: &'a [String],
    pub lanes: &'a [(Lane, usize)],
    pub lease: Duration,
    pub now: Now,
}

/// Leases what `lanes` asks for (rows another worker holds locked are skipped, never
/// waited for): `sending`, `attempts + 1`, the lease starting now.
pub async fn deliveries_lease_lanes(
    conn: Conn<'_>,
    lease: &LeaseLanes<'_>,
) -> Result<Vec<LeasedRow>, StoreError> {
    if lease.lanes.iter().all(|(_, n)| *n == 0) || lease.channels.is_empty() {
        return Ok(Vec::new());
    }
    crate::per_backend!(conn, lease::deliveries_lease_lanes(lease))
}

/// A quick lease: one row of each lane with due work, a lane not `busy` (in flight in the
/// asking worker) and not waiting (paused, disabled, its circuit open at `open_after`
/// failures), up to `room` rows — the walk and the lease in one statement, without a
/// transaction of its own (its locks last the statement). Only where
/// [`crate::store::Backend::leases_quickly`]; the caller has made sure no hold and no
/// destination limit could apply to what it takes.
#[derive(Debug, Clone)]
pub struct QuickLease<'a> {
    pub worker: &'a str,
    pub channels: &'a [String],
    pub busy: &'a [Lane],
    pub room: usize,
    pub lanes_max: usize,
    pub open_after: u32,
    pub lease: Duration,
    pub now: Now,
    /// The wall clock in ms, for a pause's end (`herald_lanes.until_ms`).
    pub now_ms: i64,
}

/// Leases what [`QuickLease`] asks for, in one statement; `None` where the backend has no
/// such statement ([`crate::store::Backend::leases_quickly`] is false).
pub async fn deliveries_lease_quick(
    conn: Conn<'_>,
    quick: &QuickLease<'_>,
) -> Result<Option<Vec<LeasedRow>>, StoreError> {
    if quick.room == 0 || quick.channels.is_empty() {
        return Ok(Some(Vec::new()));
    }
    match conn {
        Conn::Postgres(c) => {
            crate::postgres::lease::deliveries_lease_quick(c, quick).await.map(Some)
        }
        Conn::Sqlite(_) | Conn::MySql(_) => Ok(None),
    }
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
