use crate::clock::Now;
use crate::deliveries::{AttemptEnd, StateChange, truncate_error};
use crate::error::StoreError;
use sqlx::PgConnection;
use sqlx::types::Uuid;

pub(crate) async fn set_state(
    c: &mut PgConnection,
    id: Uuid,
    change: StateChange<'_>,
    now: Now,
) -> Result<(), StoreError> {
    let (state, delay_ms, error, own_attempt) = change.columns();
    sqlx::query(
        "UPDATE deliveries SET state = $2, lease_owner = NULL, lease_until = NULL,
             next_attempt_at = CASE WHEN $3::bigint IS NULL THEN next_attempt_at
                 ELSE herald_now($4) + $3 * interval '1 millisecond' END,
             last_error = CASE WHEN $2 = 'sent' THEN NULL ELSE coalesce($5, last_error) END,
             sent_at = CASE WHEN $2 = 'sent' THEN herald_now($4) ELSE sent_at END,
             updated_at = herald_now($4),
             attempt_worker = CASE WHEN $6 THEN attempt_worker END
         WHERE id = $1",
    )
    .bind(id)
    .bind(state)
    .bind(delay_ms)
    .bind(now.pg())
    .bind(error)
    .bind(own_attempt)
    .execute(c)
    .await?;
    Ok(())
}

pub(crate) async fn attempt_close(
    c: &mut PgConnection,
    id: Uuid,
    a: &AttemptEnd<'_>,
    now: Now,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO delivery_attempts (delivery_id, n, worker, started_at, finished_at,
             outcome, error_code, error_message)
         VALUES ($1, $2, $7, coalesce(herald_ts($8), herald_now($3)), herald_now($3),
             $4, $5, $6)
         ON CONFLICT (delivery_id, n) DO UPDATE SET finished_at = excluded.finished_at,
             outcome = excluded.outcome, error_code = excluded.error_code,
             error_message = excluded.error_message",
    )
    .bind(id)
    .bind(a.n)
    .bind(now.pg())
    .bind(a.outcome)
    .bind(a.error_code)
    .bind(a.error_message.map(truncate_error))
    .bind(a.worker)
    .bind(a.started_at)
    .execute(c)
    .await?;
    Ok(())
}

/// Judged by the server's clock, the one every node shares.
pub(crate) async fn lease_expired_now(
    c: &mut PgConnection,
    id: Uuid,
    _lease_until: i64,
) -> Result<bool, StoreError> {
    let expired: Option<bool> =
        sqlx::query_scalar("SELECT lease_until <= now() FROM deliveries WHERE id = $1")
            .bind(id)
            .fetch_optional(c)
            .await?
            .flatten();
    Ok(expired.unwrap_or(false))
}

/// The rows come through the primary key (`id = ANY`), and each row's attempt is looked
/// up by its position in the arrays: a join with `unnest` let the planner pick a nested
/// loop over every pair (O(batch²)) or a scan of the whole table, by the statistics of
/// the moment. The lease owner implies `sending` (a table constraint), so the state is
/// not tested again — which also keeps the planner off the partial `sending` index.
pub(crate) async fn deliveries_sent_fenced(
    c: &mut PgConnection,
    worker: &str,
    attempts: &[(Uuid, i32)],
    now: Now,
) -> Result<Vec<(Uuid, i32)>, StoreError> {
    let (ids, ns): (Vec<Uuid>, Vec<i32>) = attempts.iter().copied().unzip();
    // The commit of each reservation is written on its row (schema 20), not as a row of
    // its own: the stripes' updates are what the statement adds.
    let q = "WITH d AS (
             UPDATE deliveries u SET state = 'sent', lease_owner = NULL, lease_until = NULL,
                 last_error = NULL, sent_at = herald_now($4), updated_at = herald_now($4),
                 settle_kind = CASE WHEN u.reserve_id IS NOT NULL THEN 'commit' END,
                 settle_id = CASE WHEN u.reserve_id IS NOT NULL
                     THEN nextval('quota_movements_id_seq') END,
                 settled_at = CASE WHEN u.reserve_id IS NOT NULL THEN herald_now($4) END
             WHERE u.id = ANY($1) AND u.lease_owner = $3
               AND u.attempts = ($2::int4[])[array_position($1::uuid[], u.id)]
             RETURNING u.id, u.tenant_id, u.quota_key, u.cost, u.attempts,
                 u.reserve_stripe AS stripe, u.reserve_id),
         s AS (SELECT tenant_id, quota_key, stripe, sum(cost)::bigint AS cost FROM d
               WHERE reserve_id IS NOT NULL GROUP BY tenant_id, quota_key, stripe),
         a AS (UPDATE quota_accounts q SET reserved = q.reserved - s.cost,
                   spent = q.spent + s.cost, updated_at = herald_now($4)
               FROM s WHERE q.tenant_id = s.tenant_id AND q.quota_key = s.quota_key
                 AND q.stripe = s.stripe)
         SELECT id, attempts FROM d";
    Ok(sqlx::query_as(q).bind(ids).bind(ns).bind(worker).bind(now.pg()).fetch_all(c).await?)
}
