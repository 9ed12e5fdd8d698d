use super::{DELIVERY_COLS, sql};
use crate::clock::Now;
use crate::deliveries::{ExpiredLease, LaneFound, LanesDue, Lease, LeaseLanes, LeasedRow};
use crate::error::StoreError;
use herald_core::fair::Lane;
use sqlx::PgConnection;
use sqlx::types::Uuid;
use std::time::Duration;

/// One statement with `FOR UPDATE SKIP LOCKED`, so concurrent workers never take the same
/// row and never wait for each other.
pub(crate) async fn deliveries_lease(
    c: &mut PgConnection,
    lease: &Lease<'_>,
) -> Result<Vec<LeasedRow>, StoreError> {
    let q = format!(
        "WITH due AS (
             SELECT id FROM deliveries
             WHERE state = 'pending' AND next_attempt_at <= herald_now($1)
               AND channel = ANY($2)
             ORDER BY next_attempt_at
             LIMIT $3
             FOR UPDATE SKIP LOCKED),
         {}",
        mark_and_read("$4", "$5")
    );
    let rows = sqlx::query(sql(q))
        .bind(lease.now.pg())
        .bind(lease.channels)
        .bind(lease.limit as i64)
        .bind(lease.worker)
        .bind(lease.lease.as_millis() as i64)
        .fetch_all(c)
        .await?;
    leased_rows(rows)
}

/// The rest of a lease statement after its `due` CTE of ids: mark them `sending` for the
/// worker (`worker`, the lease's length in ms `lease_ms`: their parameters; `$1` is now)
/// and return each with its payload, oldest due first.
fn mark_and_read(worker: &str, lease_ms: &str) -> String {
    format!(
        "leased AS (
             UPDATE deliveries u SET state = 'sending', attempts = u.attempts + 1,
                 lease_owner = {worker},
                 lease_until = herald_now($1) + {lease_ms} * interval '1 millisecond',
                 updated_at = herald_now($1), attempt_worker = {worker},
                 attempt_started_at = herald_now($1)
             -- An array, not a join: a join on the CTE is planned as a hash
             -- join over a scan of every delivery, ever (O(history) per lease).
             WHERE u.id = ANY(ARRAY(SELECT id FROM due))
             RETURNING u.*)
         SELECT {DELIVERY_COLS}, p.payload, p.traceparent,
             d.reserve_stripe AS stripe,
             d.fingerprint_send_at_ms, d.destination
         -- LATERAL: one index probe per leased row, as a scalar subquery would be.
         FROM leased d
         CROSS JOIN LATERAL (SELECT p.payload::text AS payload, p.traceparent
                             FROM delivery_payloads p WHERE p.delivery_id = d.id) p
         ORDER BY d.next_attempt_at, d.id"
    )
}

fn leased_rows(rows: Vec<sqlx::postgres::PgRow>) -> Result<Vec<LeasedRow>, StoreError> {
    let mut leased = Vec::with_capacity(rows.len());
    for row in rows {
        leased.push(crate::deliveries::leased_row!(row));
    }
    Ok(leased)
}

/// `WITH RECURSIVE lanes (tenant_id, destination, n)`: the lanes with pending rows in
/// (tenant, destination) order, one index probe each, from the first after `start` (a
/// condition on the first probe, or empty), at most `lanes_max` (a parameter) of them.
fn lanes_cte(start: &str, lanes_max: &str) -> String {
    format!(
        "WITH RECURSIVE lanes (tenant_id, destination, n) AS (
             (SELECT tenant_id, destination, 1 FROM deliveries
              WHERE state = 'pending' {start}
              ORDER BY tenant_id, destination LIMIT 1)
           UNION ALL
             SELECT nx.tenant_id, nx.destination, l.n + 1 FROM lanes l
             CROSS JOIN LATERAL (
                 SELECT tenant_id, destination FROM deliveries
                 WHERE state = 'pending'
                   AND (tenant_id, destination) > (l.tenant_id, l.destination)
                 ORDER BY tenant_id, destination LIMIT 1) nx
             WHERE l.n < {lanes_max})"
    )
}

/// A recursive walk of `deliveries_lanes` (pending only): each step one probe for the
/// next (tenant, destination), then one bounded count of each lane's due rows.
pub(crate) async fn deliveries_lanes(
    c: &mut PgConnection,
    walk: &LanesDue<'_>,
) -> Result<Vec<LaneFound>, StoreError> {
    let start = if walk.after.is_some() {
        "AND (tenant_id, destination) > ($4, $5)"
    } else {
        // Every parameter named, so that each has a type.
        "AND $4::uuid IS NULL AND $5::text IS NULL"
    };
    let q = format!(
        "{}
         SELECT l.tenant_id, l.destination,
             (SELECT count(*) FROM (
                  SELECT 1 FROM deliveries d
                  WHERE d.state = 'pending' AND d.tenant_id = l.tenant_id
                    AND d.destination = l.destination
                    AND d.next_attempt_at <= herald_now($1) AND d.channel = ANY($2)
                  LIMIT $6) x) AS due,
             t.send_weight,
             p.until_ms, p.failures, p.disabled_ms
         FROM lanes l JOIN tenants t ON t.id = l.tenant_id
         LEFT JOIN herald_lanes p
             ON p.tenant_id = l.tenant_id AND p.destination = l.destination
         ORDER BY l.n",
        lanes_cte(start, "$3")
    );
    let rows: Vec<crate::deliveries::WalkRow> = sqlx::query_as(sql(q))
        .bind(walk.now.pg())
        .bind(walk.channels)
        .bind(walk.lanes_max as i64)
        .bind(walk.after.map(|l| l.tenant))
        .bind(walk.after.map(|l| l.destination.as_str()))
        .bind(walk.due_max as i64)
        .fetch_all(c)
        .await?;
    Ok(crate::deliveries::lanes_found(rows, walk.due_max))
}

/// One statement: each lane's oldest due rows locked with `SKIP LOCKED` (a bounded probe
/// of the lane's index range), marked `sending`, and returned with their payloads.
pub(crate) async fn deliveries_lease_lanes(
    c: &mut PgConnection,
    lease: &LeaseLanes<'_>,
) -> Result<Vec<LeasedRow>, StoreError> {
    let lanes: Vec<&(Lane, usize)> = lease.lanes.iter().filter(|(_, n)| *n > 0).collect();
    let tenants: Vec<Uuid> = lanes.iter().map(|(l, _)| l.tenant).collect();
    let destinations: Vec<&str> = lanes.iter().map(|(l, _)| l.destination.as_str()).collect();
    let takes: Vec<i64> = lanes.iter().map(|(_, n)| *n as i64).collect();
    let q = format!(
        "WITH due AS (
             SELECT x.id FROM unnest($5::uuid[], $6::text[], $7::bigint[])
                 AS w (tenant_id, destination, take)
             CROSS JOIN LATERAL (
                 SELECT id FROM deliveries
                 WHERE state = 'pending' AND tenant_id = w.tenant_id
                   AND destination = w.destination
                   AND next_attempt_at <= herald_now($1) AND channel = ANY($2)
                 ORDER BY next_attempt_at
                 LIMIT w.take
                 FOR UPDATE SKIP LOCKED) x),
         {}",
        mark_and_read("$3", "$4")
    );
    let rows = sqlx::query(sql(q))
        .bind(lease.now.pg())
        .bind(lease.channels)
        .bind(lease.worker)
        .bind(lease.lease.as_millis() as i64)
        .bind(&tenants)
        .bind(&destinations)
        .bind(&takes)
        .fetch_all(c)
        .await?;
    leased_rows(rows)
}

/// [`crate::deliveries::QuickLease`] in one statement: the walk of `deliveries_lanes` (as
/// [`deliveries_lanes`]), the lanes that may send now, one row of each locked with
/// `SKIP LOCKED`, marked and read back. Lanes are taken in walk order up to the room.
pub(crate) async fn deliveries_lease_quick(
    c: &mut PgConnection,
    quick: &crate::deliveries::QuickLease<'_>,
) -> Result<Vec<LeasedRow>, StoreError> {
    let busy_tenants: Vec<Uuid> = quick.busy.iter().map(|l| l.tenant).collect();
    let busy_destinations: Vec<&str> = quick.busy.iter().map(|l| l.destination.as_str()).collect();
    let q = format!(
        "{},
         open AS (
             SELECT l.tenant_id, l.destination, l.n FROM lanes l
             LEFT JOIN herald_lanes p
                 ON p.tenant_id = l.tenant_id AND p.destination = l.destination
             WHERE (p.tenant_id IS NULL
                    OR (p.disabled_ms IS NULL AND COALESCE(p.until_ms, 0) <= $6
                        AND p.failures < $7))
               AND NOT EXISTS (
                   SELECT 1 FROM unnest($8::uuid[], $9::text[]) AS b (tenant_id, destination)
                   WHERE b.tenant_id = l.tenant_id AND b.destination = l.destination)),
         due AS (
             SELECT x.id FROM open o
             CROSS JOIN LATERAL (
                 SELECT id FROM deliveries
                 WHERE state = 'pending' AND tenant_id = o.tenant_id
                   AND destination = o.destination
                   AND next_attempt_at <= herald_now($1) AND channel = ANY($2)
                 ORDER BY next_attempt_at
                 LIMIT 1
                 FOR UPDATE SKIP LOCKED) x
             LIMIT $10),
         {}",
        lanes_cte("", "$5"),
        mark_and_read("$3", "$4")
    );
    let rows = sqlx::query(sql(q))
        .bind(quick.now.pg())
        .bind(quick.channels)
        .bind(quick.worker)
        .bind(quick.lease.as_millis() as i64)
        .bind(quick.lanes_max as i64)
        .bind(quick.now_ms)
        .bind(i32::try_from(quick.open_after.max(1)).unwrap_or(i32::MAX))
        .bind(&busy_tenants)
        .bind(&busy_destinations)
        .bind(quick.room as i64)
        .fetch_all(c)
        .await?;
    leased_rows(rows)
}

pub(crate) async fn delivery_lease_extend(
    c: &mut PgConnection,
    id: Uuid,
    worker: &str,
    n: i32,
    lease: Duration,
    now: Now,
) -> Result<bool, StoreError> {
    let extended = sqlx::query(
        "UPDATE deliveries SET lease_until = herald_now($4) + $5 * interval '1 millisecond'
         WHERE id = $1 AND state = 'sending' AND lease_owner = $2 AND attempts = $3",
    )
    .bind(id)
    .bind(worker)
    .bind(n)
    .bind(now.pg())
    .bind(lease.as_millis() as i64)
    .execute(c)
    .await?
    .rows_affected();
    Ok(extended == 1)
}

pub(crate) async fn delivery_hand_back(
    c: &mut PgConnection,
    id: Uuid,
    worker: &str,
    n: i32,
) -> Result<bool, StoreError> {
    // An attempt's row is written when it ends, so a handed-back one has none; `gone`
    // removes rows an older herald wrote at lease time.
    let handed: i64 = sqlx::query_scalar(
        "WITH back AS (
             UPDATE deliveries SET state = 'pending', attempts = attempts - 1,
                 lease_owner = NULL, lease_until = NULL, attempt_worker = NULL,
                 attempt_started_at = NULL
             WHERE id = $1 AND state = 'sending' AND lease_owner = $2 AND attempts = $3
             RETURNING id),
         gone AS (DELETE FROM delivery_attempts a USING back
                  WHERE a.delivery_id = back.id AND a.n = $3)
         SELECT count(*) FROM back",
    )
    .bind(id)
    .bind(worker)
    .bind(n)
    .fetch_one(c)
    .await?;
    Ok(handed == 1)
}

pub(crate) async fn deliveries_expired(
    c: &mut PgConnection,
    now: Now,
    limit: i64,
) -> Result<Vec<ExpiredLease>, StoreError> {
    let rows: Vec<(Uuid, String, i32, Uuid, String, String)> = sqlx::query_as(
        "SELECT id, lease_owner, attempts, tenant_id, quota_key, channel FROM deliveries
         WHERE state = 'sending' AND lease_until <= herald_now($1)
         ORDER BY lease_until LIMIT $2",
    )
    .bind(now.pg())
    .bind(limit)
    .fetch_all(c)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(id, lease_owner, attempts, tenant_id, quota_key, channel)| ExpiredLease {
            id,
            lease_owner,
            attempts,
            tenant_id,
            quota_key,
            channel,
        })
        .collect())
}

pub(crate) async fn deliveries_leased_by(
    c: &mut PgConnection,
    worker: &str,
    now: Now,
    limit: i64,
) -> Result<Vec<(Uuid, i32)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, attempts FROM deliveries
         WHERE state = 'sending' AND lease_owner = $1 AND lease_until > herald_now($2)
         LIMIT $3",
    )
    .bind(worker)
    .bind(now.pg())
    .bind(limit)
    .fetch_all(c)
    .await?)
}
