use super::{DELIVERY_COLS, sql};
use crate::clock::Now;
use crate::deliveries::{AttemptRow, DeliveryRow, SelectFilter, attempt_row, delivery_row};
use crate::error::StoreError;
use sqlx::SqliteConnection;
use sqlx::types::Uuid;

pub(crate) async fn delivery_by_identity(
    c: &mut SqliteConnection,
    tenant: Uuid,
    operation_key: &str,
    channel: &str,
) -> Result<Option<DeliveryRow>, StoreError> {
    let q = format!(
        "SELECT {DELIVERY_COLS} FROM deliveries
         WHERE tenant_id = ?1 AND operation_key = ?2 AND channel = ?3"
    );
    let row = sqlx::query(sql(q))
        .bind(tenant)
        .bind(operation_key)
        .bind(channel)
        .fetch_optional(c)
        .await?;
    Ok(match row {
        Some(row) => Some(delivery_row!(row)),
        None => None,
    })
}

pub(crate) async fn delivery_get(
    c: &mut SqliteConnection,
    tenant: Option<Uuid>,
    id: Uuid,
    _lock: bool,
) -> Result<Option<DeliveryRow>, StoreError> {
    let q = format!(
        "SELECT {DELIVERY_COLS} FROM deliveries WHERE id = ?1 AND (?2 IS NULL OR tenant_id = ?2)"
    );
    Ok(match sqlx::query(sql(q)).bind(id).bind(tenant).fetch_optional(c).await? {
        Some(row) => Some(delivery_row!(row)),
        None => None,
    })
}

pub(crate) async fn delivery_attempts(
    c: &mut SqliteConnection,
    id: Uuid,
) -> Result<Vec<AttemptRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT n, worker, started_at, finished_at, outcome, error_code, error_message
         FROM delivery_attempts WHERE delivery_id = ?1
         UNION ALL
         SELECT d.attempts, d.attempt_worker, d.attempt_started_at,
             CASE WHEN d.state = 'sent' THEN d.sent_at END,
             CASE WHEN d.state = 'sent' THEN 'sent' END, NULL, NULL
         FROM deliveries d WHERE d.id = ?1 AND d.state IN ('sending', 'sent')
           AND d.attempt_worker IS NOT NULL AND d.attempt_started_at IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM delivery_attempts a
                           WHERE a.delivery_id = d.id AND a.n = d.attempts)
         ORDER BY n",
    )
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
    sqlx::SqliteConnection,
    DELIVERY_COLS,
    crate::deliveries::ListDialect {
        ph: |n| format!("?{n}"),
        time: |p| p,
        starts_with: |col, p| format!("substr({col}, 1, length({})) = {}", p[0], p[0]),
        prefix_binds: 1,
    }
);

pub(crate) async fn oldest_due_age_ms(
    c: &mut SqliteConnection,
    now: Now,
) -> Result<Option<i64>, StoreError> {
    Ok(sqlx::query_scalar::<_, Option<i64>>(
        "SELECT ?1 - min(next_attempt_at) FROM deliveries
         WHERE state = 'pending' AND next_attempt_at <= ?1",
    )
    .bind(now.sqlite_ms())
    .fetch_one(c)
    .await?)
}

pub(crate) async fn deliveries_count_by_state(
    c: &mut SqliteConnection,
) -> Result<Vec<(String, i64)>, StoreError> {
    Ok(sqlx::query_as("SELECT state, count(*) FROM deliveries GROUP BY state").fetch_all(c).await?)
}

/// `low` and `high` are the filter's id bounds, inclusive (the contract computes them).
pub(crate) async fn deliveries_select(
    c: &mut SqliteConnection,
    f: &SelectFilter<'_>,
    low: Uuid,
    high: Uuid,
) -> Result<Vec<(Uuid, String, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, channel, recipient FROM deliveries d
         WHERE tenant_id = ?1 AND id BETWEEN ?2 AND ?3
           AND (?4 IS NULL OR state = ?4) AND (?5 IS NULL OR channel = ?5)
           AND (?6 IS NULL OR EXISTS (
               SELECT 1 FROM delivery_attempts a
               WHERE a.delivery_id = d.id AND a.n = d.attempts AND a.error_code = ?6))
         ORDER BY id LIMIT ?7",
    )
    .bind(f.tenant)
    .bind(low)
    .bind(high)
    .bind(f.state.map(|s| s.as_str()))
    .bind(f.channel)
    .bind(f.error_code)
    .bind(f.limit as i64)
    .fetch_all(c)
    .await?)
}

pub(crate) async fn deliveries_count_by_channel(
    c: &mut SqliteConnection,
    tenant: Option<Uuid>,
) -> Result<Vec<(String, String, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT channel, state, count(*) FROM deliveries WHERE (?1 IS NULL OR tenant_id = ?1)
         GROUP BY channel, state ORDER BY channel, state",
    )
    .bind(tenant)
    .fetch_all(c)
    .await?)
}

pub(crate) async fn delivery_payload(
    c: &mut SqliteConnection,
    id: Uuid,
) -> Result<Option<String>, StoreError> {
    Ok(sqlx::query_scalar("SELECT payload FROM delivery_payloads WHERE delivery_id = ?1")
        .bind(id)
        .fetch_optional(c)
        .await?)
}

crate::deliveries::deliveries_failing_fn!(
    sqlx::SqliteConnection,
    crate::deliveries::FailingDialect {
        ms: |col| col.to_string(),
        tenant: "(?1 IS NULL OR d.tenant_id = ?1)",
        since: "?2",
        limit: "?3",
        positional: false,
    }
);
