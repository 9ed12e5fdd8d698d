use crate::clock::Now;
use crate::deliveries::{AttemptEnd, StateChange, truncate_error};
use crate::error::StoreError;
use sqlx::SqliteConnection;
use sqlx::types::Uuid;

/// Moves a delivery to another state, clearing the lease (see [`StateChange`]). The start
/// of the latest attempt is kept: a row written later for it still starts when it was
/// leased.
pub(crate) async fn set_state(
    c: &mut SqliteConnection,
    id: Uuid,
    change: StateChange<'_>,
    now: Now,
) -> Result<(), StoreError> {
    let (state, delay_ms, error, own_attempt) = change.columns();
    sqlx::query(
        "UPDATE deliveries SET state = ?2, lease_owner = NULL, lease_until = NULL,
             next_attempt_at = CASE WHEN ?3 IS NULL THEN next_attempt_at ELSE ?4 + ?3 END,
             last_error = CASE WHEN ?2 = 'sent' THEN NULL ELSE coalesce(?5, last_error) END,
             sent_at = CASE WHEN ?2 = 'sent' THEN ?4 ELSE sent_at END,
             updated_at = ?4,
             attempt_worker = CASE WHEN ?6 THEN attempt_worker END
         WHERE id = ?1",
    )
    .bind(id)
    .bind(state)
    .bind(delay_ms)
    .bind(now.sqlite_ms())
    .bind(error)
    .bind(own_attempt)
    .execute(c)
    .await?;
    Ok(())
}

pub(crate) async fn attempt_close(
    c: &mut SqliteConnection,
    id: Uuid,
    a: &AttemptEnd<'_>,
    now: Now,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO delivery_attempts (delivery_id, n, worker, started_at, finished_at,
             outcome, error_code, error_message)
         VALUES (?1, ?2, ?7, coalesce(?8, ?3), ?3, ?4, ?5, ?6)
         ON CONFLICT (delivery_id, n) DO UPDATE SET finished_at = excluded.finished_at,
             outcome = excluded.outcome, error_code = excluded.error_code,
             error_message = excluded.error_message",
    )
    .bind(id)
    .bind(a.n)
    .bind(now.sqlite_ms())
    .bind(a.outcome)
    .bind(a.error_code)
    .bind(a.error_message.map(truncate_error))
    .bind(a.worker)
    .bind(a.started_at)
    .execute(c)
    .await?;
    Ok(())
}

/// SQLite is one machine: its database clock is the system clock.
pub(crate) async fn lease_expired_now(
    _c: &mut SqliteConnection,
    _id: Uuid,
    lease_until: i64,
) -> Result<bool, StoreError> {
    Ok(lease_until <= Now::Database.sqlite_ms())
}

pub(crate) async fn deliveries_sent_fenced(
    c: &mut SqliteConnection,
    worker: &str,
    attempts: &[(Uuid, i32)],
    now: Now,
) -> Result<Vec<(Uuid, i32)>, StoreError> {
    let now = now.sqlite_ms();
    let mut marked = Vec::with_capacity(attempts.len());
    let mut accounts = std::collections::BTreeMap::<(Uuid, String), i64>::new();
    for (id, n) in attempts {
        let row: Option<(Uuid, String, i64, i32)> = sqlx::query_as(
            "UPDATE deliveries SET state = 'sent', lease_owner = NULL, lease_until = NULL,
                 last_error = NULL, sent_at = ?4, updated_at = ?4
             WHERE id = ?1 AND state = 'sending' AND lease_owner = ?2 AND attempts = ?3
             RETURNING tenant_id, quota_key, cost, reservation_seq",
        )
        .bind(id)
        .bind(worker)
        .bind(n)
        .bind(now)
        .fetch_optional(&mut *c)
        .await?;
        let Some((tenant, quota_key, cost, seq)) = row else { continue };
        if cost > 0 {
            super::quota::journal_insert(c, tenant, &quota_key, "commit", cost, *id, seq, now)
                .await?;
            *accounts.entry((tenant, quota_key)).or_default() += cost;
        }
        marked.push((*id, *n));
    }
    for ((tenant, quota_key), cost) in accounts {
        sqlx::query(super::quota::ACCOUNT_COMMIT)
            .bind(tenant)
            .bind(quota_key)
            .bind(cost)
            .bind(now)
            .execute(&mut *c)
            .await?;
    }
    Ok(marked)
}
