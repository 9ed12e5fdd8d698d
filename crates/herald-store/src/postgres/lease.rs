use super::{DELIVERY_COLS, sql};
use crate::clock::Now;
use crate::deliveries::{ExpiredLease, Lease, LeasedRow, delivery_row};
use crate::error::StoreError;
use sqlx::types::Uuid;
use sqlx::{PgConnection, Row};
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
         leased AS (
             UPDATE deliveries u SET state = 'sending', attempts = u.attempts + 1,
                 lease_owner = $4,
                 lease_until = herald_now($1) + $5 * interval '1 millisecond',
                 updated_at = herald_now($1), attempt_worker = $4,
                 attempt_started_at = herald_now($1)
             -- An array, not a join: a join on the CTE is planned as a hash
             -- join over a scan of every delivery, ever (O(history) per lease).
             WHERE u.id = ANY(ARRAY(SELECT id FROM due))
             RETURNING u.*)
         SELECT {DELIVERY_COLS},
             (SELECT p.payload::text FROM delivery_payloads p WHERE p.delivery_id = d.id)
                 AS payload,
             d.reserve_stripe AS stripe,
             d.fingerprint_send_at_ms
         FROM leased d
         ORDER BY d.next_attempt_at, d.id"
    );
    let rows = sqlx::query(sql(q))
        .bind(lease.now.pg())
        .bind(lease.channels)
        .bind(lease.limit as i64)
        .bind(lease.worker)
        .bind(lease.lease.as_millis() as i64)
        .fetch_all(c)
        .await?;
    let mut leased = Vec::with_capacity(rows.len());
    for row in rows {
        let payload: String = row.try_get("payload")?;
        let stripe: Option<i16> = row.try_get("stripe")?;
        let fingerprint_send_at = row.try_get("fingerprint_send_at_ms")?;
        leased.push(LeasedRow {
            delivery: delivery_row!(row),
            payload,
            stripe,
            fingerprint_send_at,
        });
    }
    Ok(leased)
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
