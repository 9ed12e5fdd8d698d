use super::{DELIVERY_COLS, json_array, sql};
use crate::clock::Now;
use crate::deliveries::{ExpiredLease, Lease, LeasedRow, delivery_row};
use crate::error::StoreError;
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
         RETURNING {DELIVERY_COLS}"
    );
    let rows = sqlx::query(sql(q))
        .bind(lease.worker)
        .bind(now)
        .bind(lease.lease.as_millis() as i64)
        .bind(channels)
        .bind(lease.limit as i64)
        .fetch_all(&mut *c)
        .await?;
    let mut deliveries = Vec::with_capacity(rows.len());
    for row in rows {
        deliveries.push(delivery_row!(row));
    }
    deliveries.sort_by_key(|d| (d.next_attempt_at, d.id));
    let mut leased = Vec::with_capacity(deliveries.len());
    for delivery in deliveries {
        let payload: String =
            sqlx::query_scalar("SELECT payload FROM delivery_payloads WHERE delivery_id = ?1")
                .bind(delivery.id)
                .fetch_one(&mut *c)
                .await?;
        // SQLite's accounts have one stripe (the schema's CHECK: stripe = 0).
        let stripe = (delivery.cost > 0).then_some(0);
        // No SQL API on SQLite: every row's fingerprint was computed by herald.
        leased.push(LeasedRow { delivery, payload, stripe, fingerprint_send_at: None });
    }
    Ok(leased)
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
