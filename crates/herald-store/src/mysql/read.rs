use super::{Bind, DELIVERY_COLS, sql};
use crate::clock::Now;
use crate::deliveries::{
    AttemptRow, DeliveryRow, FINGERPRINT_NOT_COMPUTED, SelectFilter, attempt_row, delivery_row,
};
use crate::error::StoreError;
use sqlx::MySqlConnection;
use sqlx::types::Uuid;

/// A locking read (`LOCK IN SHARE MODE`): it reads the latest committed row whatever the
/// transaction's snapshot, so the identity a claim just ran into is found under
/// REPEATABLE READ too.
pub(crate) async fn delivery_by_identity(
    c: &mut MySqlConnection,
    tenant: Uuid,
    operation_key: &str,
    channel: &str,
) -> Result<Option<DeliveryRow>, StoreError> {
    let q = format!(
        "SELECT {DELIVERY_COLS} FROM deliveries
         WHERE tenant_id = ? AND operation_key = ? AND channel = ? LOCK IN SHARE MODE"
    );
    let row = sqlx::query(sql(q))
        .bind(tenant)
        .bind(operation_key)
        .bind(channel)
        .fetch_optional(&mut *c)
        .await?;
    let Some(row) = row else { return Ok(None) };
    let mut row: DeliveryRow = delivery_row!(row);
    if row.fingerprint_version == FINGERPRINT_NOT_COMPUTED {
        // Claimed through the SQL API, which leaves the fingerprint to the first repeat
        // (schema 15): version 2, computed from the row by the same SQL.
        sqlx::query("CALL herald_row_fingerprint(?, @herald_row_print)")
            .bind(row.id)
            .execute(&mut *c)
            .await?;
        let print: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT @herald_row_print").fetch_one(&mut *c).await?;
        row.fingerprint = print.unwrap_or_default();
        row.fingerprint_version = herald_core::fingerprint::FINGERPRINT_VERSION;
    }
    Ok(Some(row))
}

pub(crate) async fn delivery_get(
    c: &mut MySqlConnection,
    tenant: Option<Uuid>,
    id: Uuid,
    lock: bool,
) -> Result<Option<DeliveryRow>, StoreError> {
    let lock = if lock { "FOR UPDATE" } else { "" };
    let q = format!(
        "SELECT {DELIVERY_COLS} FROM deliveries WHERE id = ? AND (? IS NULL OR tenant_id = ?) {lock}"
    );
    Ok(match sqlx::query(sql(q)).bind(id).bind(tenant).bind(tenant).fetch_optional(c).await? {
        Some(row) => Some(delivery_row!(row)),
        None => None,
    })
}

pub(crate) async fn delivery_attempts(
    c: &mut MySqlConnection,
    id: Uuid,
) -> Result<Vec<AttemptRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT n, worker, started_at, finished_at, outcome, error_code, error_message
         FROM delivery_attempts WHERE delivery_id = ?
         UNION ALL
         SELECT d.attempts, d.attempt_worker, d.attempt_started_at,
             CASE WHEN d.state = 'sent' THEN d.sent_at END,
             CASE WHEN d.state = 'sent' THEN 'sent' END, NULL, NULL
         FROM deliveries d WHERE d.id = ? AND d.state IN ('sending', 'sent')
           AND d.attempt_worker IS NOT NULL AND d.attempt_started_at IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM delivery_attempts a
                           WHERE a.delivery_id = d.id AND a.n = d.attempts)
         ORDER BY n",
    )
    .bind(id)
    .bind(id)
    .fetch_all(c)
    .await?;
    let mut attempts = Vec::with_capacity(rows.len());
    for row in rows {
        attempts.push(attempt_row!(row));
    }
    Ok(attempts)
}

crate::deliveries::deliveries_list_fn!(
    sqlx::MySqlConnection,
    DELIVERY_COLS,
    crate::deliveries::ListDialect {
        ph: |_| "?".to_string(),
        time: |p| p,
        starts_with: |col, p| format!("LEFT({col}, CHAR_LENGTH({})) = {}", p[0], p[1]),
        prefix_binds: 2,
    }
);

pub(crate) async fn oldest_due_age_ms(
    c: &mut MySqlConnection,
    now: Now,
) -> Result<Option<i64>, StoreError> {
    let t = now.mysql_sql();
    let q = format!(
        "SELECT CAST({t} - MIN(next_attempt_at) AS SIGNED) FROM deliveries
         WHERE state = 'pending' AND next_attempt_at <= {t}"
    );
    Ok(sqlx::query_scalar::<_, Option<i64>>(sql(q))
        .bind_now(now)
        .bind_now(now)
        .fetch_one(c)
        .await?)
}

pub(crate) async fn deliveries_count_by_state(
    c: &mut MySqlConnection,
) -> Result<Vec<(String, i64)>, StoreError> {
    Ok(sqlx::query_as("SELECT state, COUNT(*) FROM deliveries GROUP BY state").fetch_all(c).await?)
}

/// `low` and `high` are the filter's id bounds, inclusive (the contract computes them).
pub(crate) async fn deliveries_select(
    c: &mut MySqlConnection,
    f: &SelectFilter<'_>,
    low: Uuid,
    high: Uuid,
) -> Result<Vec<(Uuid, String, String)>, StoreError> {
    let state = f.state.map(|s| s.as_str());
    Ok(sqlx::query_as(
        "SELECT id, channel, recipient FROM deliveries d
         WHERE tenant_id = ? AND id BETWEEN ? AND ?
           AND (? IS NULL OR state = ?) AND (? IS NULL OR channel = ?)
           AND (? IS NULL OR EXISTS (
               SELECT 1 FROM delivery_attempts a
               WHERE a.delivery_id = d.id AND a.n = d.attempts AND a.error_code = ?))
         ORDER BY id LIMIT ?",
    )
    .bind(f.tenant)
    .bind(low)
    .bind(high)
    .bind(state)
    .bind(state)
    .bind(f.channel)
    .bind(f.channel)
    .bind(f.error_code)
    .bind(f.error_code)
    .bind(f.limit as i64)
    .fetch_all(c)
    .await?)
}

pub(crate) async fn deliveries_count_by_channel(
    c: &mut MySqlConnection,
    tenant: Option<Uuid>,
) -> Result<Vec<(String, String, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT channel, state, COUNT(*) FROM deliveries WHERE (? IS NULL OR tenant_id = ?)
         GROUP BY channel, state ORDER BY channel, state",
    )
    .bind(tenant)
    .bind(tenant)
    .fetch_all(c)
    .await?)
}

pub(crate) async fn delivery_payload(
    c: &mut MySqlConnection,
    id: Uuid,
) -> Result<Option<String>, StoreError> {
    Ok(sqlx::query_scalar("SELECT payload FROM delivery_payloads WHERE delivery_id = ?")
        .bind(id)
        .fetch_optional(c)
        .await?)
}

crate::deliveries::deliveries_failing_fn!(
    sqlx::MySqlConnection,
    crate::deliveries::FailingDialect {
        ms: |col| col.to_string(),
        tenant: "d.tenant_id = coalesce(?, d.tenant_id)",
        since: "?",
        limit: "?",
        positional: true,
    }
);
