use super::{DELIVERY_COLS, json_array, sql};
use crate::clock::Now;
use crate::deliveries::{
    ExpiredLease, LaneFound, LanesDue, Lease, LeaseLanes, LeasedRow, delivery_row,
};
use crate::error::StoreError;
use herald_core::fair::Lane;
use sqlx::SqliteConnection;
use sqlx::types::Uuid;
use std::time::Duration;

pub(crate) async fn deliveries_lease(
    c: &mut SqliteConnection,
    lease: &Lease<'_>,
) -> Result<Vec<LeasedRow>, StoreError> {
    let now = lease.now.sqlite_ms();
    let channels = json_array(lease.channels);
    let q = format!(
        "UPDATE deliveries SET state = 'sending', attempts = attempts + 1,
             lease_owner = ?1, lease_until = ?2 + ?3, updated_at = ?2,
             attempt_worker = ?1, attempt_started_at = ?2
         WHERE id IN (
             SELECT id FROM deliveries
             WHERE state = 'pending' AND next_attempt_at <= ?2
               AND channel IN (SELECT value FROM json_each(?4))
             ORDER BY next_attempt_at LIMIT ?5)
         RETURNING {DELIVERY_COLS}, destination"
    );
    let rows = sqlx::query(sql(q))
        .bind(lease.worker)
        .bind(now)
        .bind(lease.lease.as_millis() as i64)
        .bind(channels)
        .bind(lease.limit as i64)
        .fetch_all(&mut *c)
        .await?;
    with_payloads(c, rows).await
}

/// The leased rows, oldest due first, each with its payload and destination.
async fn with_payloads(
    c: &mut SqliteConnection,
    rows: Vec<sqlx::sqlite::SqliteRow>,
) -> Result<Vec<LeasedRow>, StoreError> {
    let mut deliveries = Vec::with_capacity(rows.len());
    for row in rows {
        let destination: String = sqlx::Row::try_get(&row, "destination")?;
        deliveries.push((delivery_row!(row), destination));
    }
    deliveries.sort_by_key(|(d, _)| (d.next_attempt_at, d.id));
    let mut leased = Vec::with_capacity(deliveries.len());
    for (delivery, destination) in deliveries {
        let (payload, traceparent): (String, Option<String>) = sqlx::query_as(
            "SELECT payload, traceparent FROM delivery_payloads WHERE delivery_id = ?1",
        )
        .bind(delivery.id)
        .fetch_one(&mut *c)
        .await?;
        // SQLite's accounts have one stripe (the schema's CHECK: stripe = 0).
        let stripe = (delivery.cost > 0).then_some(0);
        // No SQL API on SQLite: every row's fingerprint was computed by herald.
        leased.push(LeasedRow {
            delivery,
            payload,
            stripe,
            fingerprint_send_at: None,
            destination,
            traceparent,
        });
    }
    Ok(leased)
}

/// The lanes walk ([`crate::deliveries::lanes_walk_sql`], shared with MariaDB).
pub(crate) async fn deliveries_lanes(
    c: &mut SqliteConnection,
    walk: &LanesDue<'_>,
) -> Result<Vec<LaneFound>, StoreError> {
    let now = walk.now.sqlite_ms();
    let channels = vec!["?"; walk.channels.len()].join(", ");
    let q = crate::deliveries::lanes_walk_sql(
        walk.after.is_some(),
        &channels,
        "?",
        "INDEXED BY deliveries_lanes",
    );
    let mut query = sqlx::query_as::<_, crate::deliveries::WalkRow>(sql(q));
    if let Some(after) = walk.after {
        query = query.bind(after.tenant).bind(after.tenant).bind(after.destination.as_str());
    }
    query = query.bind(walk.lanes_max as i64);
    for channel in walk.channels {
        query = query.bind(channel.as_str());
    }
    query = query.bind(now);
    for channel in walk.channels {
        query = query.bind(channel.as_str());
    }
    let rows =
        query.bind(walk.due_max.saturating_sub(1) as i64).bind(now).fetch_all(&mut *c).await?;
    Ok(crate::deliveries::lanes_found(rows, walk.due_max))
}

/// One UPDATE of each lane's oldest due rows (SQLite has one writer: nothing to skip).
pub(crate) async fn deliveries_lease_lanes(
    c: &mut SqliteConnection,
    lease: &LeaseLanes<'_>,
) -> Result<Vec<LeasedRow>, StoreError> {
    let now = lease.now.sqlite_ms();
    let lanes: Vec<&(Lane, usize)> = lease.lanes.iter().filter(|(_, n)| *n > 0).collect();
    // Numbered parameters throughout: SQLite numbers a bare `?` after the largest so far.
    let branch = |i: usize| {
        let p = 5 + 3 * i;
        format!(
            "SELECT id FROM (SELECT id FROM deliveries INDEXED BY deliveries_lanes
             WHERE state = 'pending' AND tenant_id = ?{p} AND destination = ?{}
               AND next_attempt_at <= ?2 AND channel IN (SELECT value FROM json_each(?4))
             ORDER BY next_attempt_at LIMIT ?{})",
            p + 1,
            p + 2
        )
    };
    let q = format!(
        "UPDATE deliveries SET state = 'sending', attempts = attempts + 1,
             lease_owner = ?1, lease_until = ?2 + ?3, updated_at = ?2,
             attempt_worker = ?1, attempt_started_at = ?2
         WHERE id IN ({})
         RETURNING {DELIVERY_COLS}, destination",
        (0..lanes.len()).map(branch).collect::<Vec<_>>().join(" UNION ALL ")
    );
    let mut query = sqlx::query(sql(q))
        .bind(lease.worker)
        .bind(now)
        .bind(lease.lease.as_millis() as i64)
        .bind(json_array(lease.channels));
    for (lane, take) in &lanes {
        query = query.bind(lane.tenant).bind(lane.destination.as_str()).bind(*take as i64);
    }
    let rows = query.fetch_all(&mut *c).await?;
    with_payloads(c, rows).await
}

pub(crate) async fn delivery_lease_extend(
    c: &mut SqliteConnection,
    id: Uuid,
    worker: &str,
    n: i32,
    lease: Duration,
    now: Now,
) -> Result<bool, StoreError> {
    let extended = sqlx::query(
        "UPDATE deliveries SET lease_until = ?4 + ?5
         WHERE id = ?1 AND state = 'sending' AND lease_owner = ?2 AND attempts = ?3",
    )
    .bind(id)
    .bind(worker)
    .bind(n)
    .bind(now.sqlite_ms())
    .bind(lease.as_millis() as i64)
    .execute(c)
    .await?
    .rows_affected();
    Ok(extended == 1)
}

pub(crate) async fn delivery_hand_back(
    c: &mut SqliteConnection,
    id: Uuid,
    worker: &str,
    n: i32,
) -> Result<bool, StoreError> {
    let handed = sqlx::query(
        "UPDATE deliveries SET state = 'pending', attempts = attempts - 1,
             lease_owner = NULL, lease_until = NULL, attempt_worker = NULL,
             attempt_started_at = NULL
         WHERE id = ?1 AND state = 'sending' AND lease_owner = ?2 AND attempts = ?3",
    )
    .bind(id)
    .bind(worker)
    .bind(n)
    .execute(&mut *c)
    .await?
    .rows_affected()
        == 1;
    if handed {
        // An attempt's row is written when it ends, so a handed-back one has none; this
        // removes rows an older herald wrote at lease time.
        sqlx::query("DELETE FROM delivery_attempts WHERE delivery_id = ?1 AND n = ?2")
            .bind(id)
            .bind(n)
            .execute(&mut *c)
            .await?;
    }
    Ok(handed)
}

pub(crate) async fn deliveries_expired(
    c: &mut SqliteConnection,
    now: Now,
    limit: i64,
) -> Result<Vec<ExpiredLease>, StoreError> {
    let rows: Vec<(Uuid, String, i32, Uuid, String, String)> = sqlx::query_as(
        "SELECT id, lease_owner, attempts, tenant_id, quota_key, channel FROM deliveries
         WHERE state = 'sending' AND lease_until <= ?1 ORDER BY lease_until LIMIT ?2",
    )
    .bind(now.sqlite_ms())
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
    c: &mut SqliteConnection,
    worker: &str,
    now: Now,
    limit: i64,
) -> Result<Vec<(Uuid, i32)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, attempts FROM deliveries
         WHERE state = 'sending' AND lease_owner = ?1 AND lease_until > ?2 LIMIT ?3",
    )
    .bind(worker)
    .bind(now.sqlite_ms())
    .bind(limit)
    .fetch_all(c)
    .await?)
}
