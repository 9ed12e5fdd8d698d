use super::{Bind, bind_in_list, end_savepoint, in_list_len, placeholders, savepoint, sql};
use crate::clock::{MYSQL_NOW_MS, Now};
use crate::deliveries::{AttemptEnd, StateChange, truncate_error};
use crate::error::StoreError;
use crate::quota::Settle;
use sqlx::MySqlConnection;
use sqlx::types::Uuid;
use std::collections::BTreeMap;

/// Moves a delivery to another state, clearing the lease (see [`StateChange`]). MariaDB
/// assigns left to right and a later expression sees an earlier assignment, so no
/// expression here reads a column assigned before it.
pub(crate) async fn set_state(
    c: &mut MySqlConnection,
    id: Uuid,
    change: StateChange<'_>,
    now: Now,
) -> Result<(), StoreError> {
    let (state, delay_ms, error, own_attempt) = change.columns();
    let t = now.mysql_sql();
    let q = format!(
        "UPDATE deliveries SET state = ?, lease_owner = NULL, lease_until = NULL,
             next_attempt_at = CASE WHEN ? IS NULL THEN next_attempt_at ELSE {t} + ? END,
             last_error = CASE WHEN ? = 'sent' THEN NULL ELSE COALESCE(?, last_error) END,
             sent_at = CASE WHEN ? = 'sent' THEN {t} ELSE sent_at END,
             updated_at = {t},
             attempt_worker = CASE WHEN ? THEN attempt_worker END
         WHERE id = ?"
    );
    sqlx::query(sql(q))
        .bind(state)
        .bind(delay_ms)
        .bind_now(now)
        .bind(delay_ms)
        .bind(state)
        .bind(error)
        .bind(state)
        .bind_now(now)
        .bind_now(now)
        .bind(own_attempt)
        .bind(id)
        .execute(c)
        .await?;
    Ok(())
}

pub(crate) async fn attempt_close(
    c: &mut MySqlConnection,
    id: Uuid,
    a: &AttemptEnd<'_>,
    now: Now,
) -> Result<(), StoreError> {
    let t = now.mysql_sql();
    let q = format!(
        "INSERT INTO delivery_attempts (delivery_id, n, worker, started_at, finished_at,
             outcome, error_code, error_message)
         VALUES (?, ?, ?, COALESCE(?, {t}), {t}, ?, ?, ?)
         ON DUPLICATE KEY UPDATE finished_at = VALUES(finished_at),
             outcome = VALUES(outcome), error_code = VALUES(error_code),
             error_message = VALUES(error_message)"
    );
    sqlx::query(sql(q))
        .bind(id)
        .bind(a.n)
        .bind(a.worker)
        .bind(a.started_at)
        .bind_now(now)
        .bind_now(now)
        .bind(a.outcome)
        .bind(a.error_code)
        .bind(a.error_message.map(truncate_error))
        .execute(c)
        .await?;
    Ok(())
}

/// Judged by the server's clock, as on PostgreSQL.
pub(crate) async fn lease_expired_now(
    c: &mut MySqlConnection,
    id: Uuid,
    _lease_until: i64,
) -> Result<bool, StoreError> {
    let q = format!("SELECT lease_until <= {MYSQL_NOW_MS} FROM deliveries WHERE id = ?");
    let expired: Option<bool> =
        sqlx::query_scalar::<_, Option<bool>>(sql(q)).bind(id).fetch_optional(c).await?.flatten();
    Ok(expired.unwrap_or(false))
}

/// The batch's rows locked through the primary key, the fenced ones (this worker's lease,
/// this attempt) marked `sent`, their reservations committed: journal rows and account
/// movements per account, all in one savepoint. The caller has locked the accounts.
pub(crate) async fn deliveries_sent_fenced(
    c: &mut MySqlConnection,
    worker: &str,
    attempts: &[(Uuid, i32)],
    now: Now,
) -> Result<Vec<(Uuid, i32)>, StoreError> {
    if attempts.is_empty() {
        return Ok(Vec::new());
    }
    let wanted: BTreeMap<Uuid, i32> = attempts.iter().copied().collect();
    // With each reservation's stripe, from its `reserve` row (which this locks too: never
    // written again, so nothing waits for it).
    let q = format!(
        "SELECT d.id, d.attempts, d.tenant_id, d.quota_key, d.cost, d.reservation_seq,
             COALESCE(r.stripe, 0)
         FROM deliveries d LEFT JOIN quota_journal r ON r.reserve_of = d.id
              AND r.reservation_seq = d.reservation_seq
         WHERE d.id IN ({}) AND d.lease_owner = ? FOR UPDATE",
        placeholders(in_list_len(wanted.len()))
    );
    let ids: Vec<Uuid> = wanted.keys().copied().collect();
    let locked = sqlx::query_as::<_, (Uuid, i32, Uuid, String, i64, i32, i16)>(sql(q));
    let rows = bind_in_list(locked, &ids).bind(worker).fetch_all(&mut *c).await?;
    let fenced: Vec<_> = rows.into_iter().filter(|r| wanted.get(&r.0) == Some(&r.1)).collect();
    if fenced.is_empty() {
        return Ok(Vec::new());
    }
    savepoint(c).await?;
    let marked = async {
        let t = now.mysql_sql();
        let q = format!(
            "UPDATE deliveries SET state = 'sent', lease_owner = NULL, lease_until = NULL,
                 last_error = NULL, sent_at = {t}, updated_at = {t}
             WHERE id IN ({})",
            placeholders(in_list_len(fenced.len()))
        );
        let ids: Vec<Uuid> = fenced.iter().map(|row| row.0).collect();
        let mark = sqlx::query(sql(q)).bind_now(now).bind_now(now);
        bind_in_list(mark, &ids).execute(&mut *c).await?;
        let mut stripes = BTreeMap::<(Uuid, String, i16), Vec<(Uuid, i32, i64)>>::new();
        for (id, _, tenant, quota_key, cost, seq, stripe) in &fenced {
            if *cost > 0 {
                let movements = stripes.entry((*tenant, quota_key.clone(), *stripe)).or_default();
                movements.push((*id, *seq, *cost));
            }
        }
        for ((tenant, key, stripe), movements) in &stripes {
            let (tenant, stripe) = (*tenant, *stripe);
            super::quota::journal_insert(c, tenant, key, stripe, "commit", movements, now).await?;
            let total = movements.iter().map(|m| m.2).sum();
            super::quota::account_settle(c, tenant, key, stripe, total, Settle::Commit, now)
                .await?;
        }
        Ok(fenced.iter().map(|r| (r.0, r.1)).collect())
    }
    .await;
    end_savepoint(c, marked).await
}
