use super::{Bind, DELIVERY_COLS, bind_in_list, in_list_len, placeholders, sql};
use crate::clock::Now;
use crate::deliveries::{ExpiredLease, LaneFound, LanesDue, Lease, LeaseLanes, LeasedRow};
use crate::error::StoreError;
use herald_core::fair::Lane;
use herald_core::hex;
use sqlx::MySqlConnection;
use sqlx::types::Uuid;
use std::time::Duration;

/// The due rows locked with `FOR UPDATE SKIP LOCKED` (concurrent workers never take the
/// same row and never wait for each other), marked `sending`, then read back with their
/// payloads: three statements in the worker's transaction, since MariaDB has no
/// `UPDATE … RETURNING`.
pub(crate) async fn deliveries_lease(
    c: &mut MySqlConnection,
    lease: &Lease<'_>,
) -> Result<Vec<LeasedRow>, StoreError> {
    if lease.channels.is_empty() || lease.limit == 0 {
        return Ok(Vec::new());
    }
    let (now, t) = (lease.now, lease.now.mysql_sql());
    let q = format!(
        "SELECT id FROM deliveries
         WHERE state = 'pending' AND next_attempt_at <= {t} AND channel IN ({})
         ORDER BY next_attempt_at LIMIT ?
         FOR UPDATE SKIP LOCKED",
        placeholders(in_list_len(lease.channels.len()))
    );
    let channels: Vec<&str> = lease.channels.iter().map(|c| c.as_ref()).collect();
    let due = sqlx::query_scalar::<_, Uuid>(sql(q)).bind_now(now);
    let ids = bind_in_list(due, &channels).bind(lease.limit as i64).fetch_all(&mut *c).await?;
    lease_ids(c, lease.worker, lease.lease, now, &ids).await
}

/// Marks the locked `ids` `sending` for `worker`, then reads them back with their payloads.
async fn lease_ids(
    c: &mut MySqlConnection,
    worker: &str,
    lease: Duration,
    now: Now,
    ids: &[Uuid],
) -> Result<Vec<LeasedRow>, StoreError> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let t = now.mysql_sql();
    let q = format!(
        "UPDATE deliveries SET state = 'sending', attempts = attempts + 1, lease_owner = ?,
             lease_until = {t} + ?, updated_at = {t}, attempt_worker = ?,
             attempt_started_at = {t}
         WHERE id IN ({})",
        placeholders(in_list_len(ids.len()))
    );
    let mark = sqlx::query(sql(q))
        .bind(worker)
        .bind_now(now)
        .bind(lease.as_millis() as i64)
        .bind_now(now)
        .bind(worker)
        .bind_now(now);
    bind_in_list(mark, ids).execute(&mut *c).await?;
    let cols = DELIVERY_COLS.split(", ").map(|c| format!("d.{c}")).collect::<Vec<_>>().join(", ");
    let q = format!(
        "SELECT {cols}, p.payload, p.traceparent, v.stripe, d.fingerprint_send_at_ms, d.destination
         FROM deliveries d
         JOIN delivery_payloads p ON p.delivery_id = d.id
         LEFT JOIN quota_journal v ON v.reserve_of = d.id
              AND v.reservation_seq = d.reservation_seq
         WHERE d.id IN ({})
         ORDER BY d.next_attempt_at, d.id",
        placeholders(in_list_len(ids.len()))
    );
    let rows = bind_in_list(sqlx::query(sql(q)), ids).fetch_all(&mut *c).await?;
    let mut leased = Vec::with_capacity(rows.len());
    for row in rows {
        leased.push(crate::deliveries::leased_row!(row));
    }
    Ok(leased)
}

/// Each lane's rows through the lanes index, never another: InnoDB reads (and locks) the
/// rows of the index it scans, and by the due index that is every backlog ahead.
const LANES_INDEX: &str = "FORCE INDEX (deliveries_lanes)";

/// The lanes walk in one statement: a loose index scan of `deliveries_lanes` (`GROUP BY`
/// its leading columns with `MIN` of the next: "Using index for group-by", one index dive
/// per lane, where a correlated subquery would read every backlog before it). MariaDB
/// cannot count a lane's due rows that way, so a lane whose first pending row is due
/// counts as `due_max` due (of any channel): the lease takes fewer when fewer are there.
pub(crate) async fn deliveries_lanes(
    c: &mut MySqlConnection,
    walk: &LanesDue<'_>,
) -> Result<Vec<LaneFound>, StoreError> {
    // Every value inline, as text (`raw_sql`, no prepared statement): MariaDB keeps the plan
    // a prepared statement got at its first execution, and a walk first run while nothing
    // was pending kept reading every pending row ever after instead of the loose index
    // scan (measured: 20,000 rows read and 29 ms per walk beside one lane's backlog, which
    // made the others' commit-to-start p99 88 ms). Re-preparing each walk instead cost a
    // p99 of 91 ms even without a backlog (the statement's close, a write with no answer,
    // held back the next). Every value is herald's own: numbers, and ids and a host name
    // as hex literals.
    let now = now_literal(walk.now);
    let start = match walk.after {
        Some(after) => {
            let (t, d) = (hex(after.tenant.as_bytes()), hex(after.destination.as_bytes()));
            format!(
                "AND (tenant_id > X'{t}' OR (tenant_id = X'{t}' AND destination > _utf8mb4 X'{d}'))"
            )
        }
        None => String::new(),
    };
    let (due_max, lanes_max) = (walk.due_max, walk.lanes_max);
    let q = format!(
        "SELECT w.tenant_id, w.destination, CASE WHEN w.first_due <= {now} THEN {due_max} ELSE 0 END,
             t.send_weight, p.until_ms, p.failures, p.disabled_ms
         FROM (SELECT tenant_id, destination, MIN(next_attempt_at) AS first_due
               FROM deliveries {LANES_INDEX}
               WHERE state = 'pending' {start}
               GROUP BY state, tenant_id, destination
               ORDER BY state, tenant_id, destination LIMIT {lanes_max}) w
         JOIN tenants t ON t.id = w.tenant_id
         LEFT JOIN herald_lanes p ON p.tenant_id = w.tenant_id AND p.destination = w.destination
         ORDER BY w.tenant_id, w.destination"
    );
    let mut rows = Vec::new();
    for row in sqlx::raw_sql(sql(q)).fetch_all(&mut *c).await? {
        rows.push(<crate::deliveries::WalkRow as sqlx::FromRow<_>>::from_row(&row)?);
    }
    Ok(crate::deliveries::lanes_found(rows, walk.due_max))
}

/// "Now" as text inline: the database's clock, or the caller's milliseconds.
fn now_literal(now: Now) -> String {
    match now {
        Now::Database => crate::clock::MYSQL_NOW_MS.to_string(),
        Now::At(ms) => ms.to_string(),
    }
}

/// Each lane's oldest due rows, locked with `FOR UPDATE SKIP LOCKED`, then marked and read
/// back as [`deliveries_lease`] does. Two statements find and lock them:
///
/// 1. a plain read of each lane's oldest due ids, twice as many as the lane is to give, one
///    UNION ALL branch per lane (padded to a power of two with empty branches, so that a
///    handful of texts serve every count of lanes);
/// 2. a locking read of those ids by primary key, `SKIP LOCKED`, each lane's first
///    `take` in key order, the row's state and due time checked again as locked.
///
/// One locking read by the lanes index did both, and cost most of a lease beside a
/// backlog: a leased row's old entry in the index stays, delete-marked, until purge
/// removes it, and InnoDB's locking read looks up and locks every such entry it passes,
/// where a plain read passes them in the index (measured beside a backlog of 20,000: 2,100
/// pages and 1.1-1.3 ms for ten rows, against 120 pages and 0.3 ms; docs/perf.md, issue
/// 36). Twice the ids: a worker whose first ids another worker holds takes the next ones.
pub(crate) async fn deliveries_lease_lanes(
    c: &mut MySqlConnection,
    lease: &LeaseLanes<'_>,
) -> Result<Vec<LeasedRow>, StoreError> {
    let lanes: Vec<&(Lane, usize)> = lease.lanes.iter().filter(|(_, n)| *n > 0).collect();
    if lanes.is_empty() || lease.channels.is_empty() {
        return Ok(Vec::new());
    }
    let (now, t) = (lease.now, lease.now.mysql_sql());
    let channels = placeholders(in_list_len(lease.channels.len()));
    let branch = format!(
        "(SELECT id, ? AS lane FROM deliveries {LANES_INDEX}
          WHERE state = 'pending' AND tenant_id = ? AND destination = ?
            AND next_attempt_at <= {t} AND channel IN ({channels})
          ORDER BY next_attempt_at LIMIT ?)"
    );
    let q = vec![branch; in_list_len(lanes.len())].join(" UNION ALL ");
    let channels: Vec<&str> = lease.channels.iter().map(|c| c.as_ref()).collect();
    let mut query = sqlx::query_as::<_, (Uuid, i64)>(sql(q));
    for i in 0..in_list_len(lanes.len()) {
        let (lane, take) = lanes[i.min(lanes.len() - 1)];
        let ask = if i < lanes.len() { take.saturating_mul(2) } else { 0 };
        query = query.bind(i as i64).bind(lane.tenant).bind(lane.destination.as_str());
        query = bind_in_list(query.bind_now(now), &channels).bind(ask as i64);
    }
    let found = query.fetch_all(&mut *c).await?;
    let mut per_lane: Vec<Vec<Uuid>> = vec![Vec::new(); lanes.len()];
    for (id, lane) in found {
        if let Some(ids) = usize::try_from(lane).ok().and_then(|l| per_lane.get_mut(l)) {
            ids.push(id);
        }
    }
    // Text with the ids inline: the lists' lengths vary with every lease, and a prepared
    // text per length would fill the statement cache for nothing.
    let now_sql = now_literal(now);
    let branches: Vec<String> = per_lane
        .iter()
        .zip(&lanes)
        .filter(|(ids, _)| !ids.is_empty())
        .map(|(ids, (_, take))| {
            let list =
                ids.iter().map(|id| format!("X'{}'", hex(id.as_bytes()))).collect::<Vec<_>>();
            format!(
                "(SELECT id FROM deliveries FORCE INDEX (PRIMARY)
                  WHERE id IN ({}) AND state = 'pending' AND next_attempt_at <= {now_sql}
                  ORDER BY id LIMIT {take} FOR UPDATE SKIP LOCKED)",
                list.join(", ")
            )
        })
        .collect();
    if branches.is_empty() {
        return Ok(Vec::new());
    }
    let mut ids = Vec::new();
    for row in sqlx::raw_sql(sql(branches.join(" UNION ALL "))).fetch_all(&mut *c).await? {
        ids.push(sqlx::Row::try_get::<Uuid, _>(&row, 0)?);
    }
    lease_ids(c, lease.worker, lease.lease, now, &ids).await
}

pub(crate) async fn delivery_lease_extend(
    c: &mut MySqlConnection,
    id: Uuid,
    worker: &str,
    n: i32,
    lease: Duration,
    now: Now,
) -> Result<bool, StoreError> {
    // CLIENT_FOUND_ROWS: a lease extended to the same instant still counts.
    let q = format!(
        "UPDATE deliveries SET lease_until = {} + ?
         WHERE id = ? AND state = 'sending' AND lease_owner = ? AND attempts = ?",
        now.mysql_sql()
    );
    let extended = sqlx::query(sql(q))
        .bind_now(now)
        .bind(lease.as_millis() as i64)
        .bind(id)
        .bind(worker)
        .bind(n)
        .execute(c)
        .await?
        .rows_affected();
    Ok(extended == 1)
}

pub(crate) async fn delivery_hand_back(
    c: &mut MySqlConnection,
    id: Uuid,
    worker: &str,
    n: i32,
) -> Result<bool, StoreError> {
    let handed = sqlx::query(
        "UPDATE deliveries SET state = 'pending', attempts = attempts - 1,
             lease_owner = NULL, lease_until = NULL, attempt_worker = NULL,
             attempt_started_at = NULL
         WHERE id = ? AND state = 'sending' AND lease_owner = ? AND attempts = ?",
    )
    .bind(id)
    .bind(worker)
    .bind(n)
    .execute(&mut *c)
    .await?
    .rows_affected()
        == 1;
    if handed {
        sqlx::query("DELETE FROM delivery_attempts WHERE delivery_id = ? AND n = ?")
            .bind(id)
            .bind(n)
            .execute(&mut *c)
            .await?;
    }
    Ok(handed)
}

pub(crate) async fn deliveries_expired(
    c: &mut MySqlConnection,
    now: Now,
    limit: i64,
) -> Result<Vec<ExpiredLease>, StoreError> {
    let q = format!(
        "SELECT id, lease_owner, attempts, tenant_id, quota_key, channel FROM deliveries
         WHERE state = 'sending' AND lease_until <= {} ORDER BY lease_until LIMIT ?",
        now.mysql_sql()
    );
    let rows: Vec<(Uuid, String, i32, Uuid, String, String)> =
        sqlx::query_as(sql(q)).bind_now(now).bind(limit).fetch_all(c).await?;
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
    c: &mut MySqlConnection,
    worker: &str,
    now: Now,
    limit: i64,
) -> Result<Vec<(Uuid, i32)>, StoreError> {
    let q = format!(
        "SELECT id, attempts FROM deliveries
         WHERE state = 'sending' AND lease_owner = ? AND lease_until > {} LIMIT ?",
        now.mysql_sql()
    );
    Ok(sqlx::query_as(sql(q)).bind(worker).bind_now(now).bind(limit).fetch_all(c).await?)
}
