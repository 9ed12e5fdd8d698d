use super::{DELIVERY_COLS, sql};
use crate::clock::Now;
use crate::deliveries::{
    AttemptRow, DeliveryRow, FINGERPRINT_NOT_COMPUTED, SelectFilter, attempt_row, delivery_row,
};
use crate::error::StoreError;
use sqlx::PgConnection;
use sqlx::types::Uuid;

pub(crate) async fn delivery_by_identity(
    c: &mut PgConnection,
    tenant: Uuid,
    operation_key: &str,
    channel: &str,
) -> Result<Option<DeliveryRow>, StoreError> {
    let q = format!(
        "SELECT {DELIVERY_COLS} FROM deliveries d
         WHERE tenant_id = $1 AND operation_key = $2 AND channel = $3"
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
        // (migration 8): version 2, computed from the row by the same SQL.
        let print: Option<Vec<u8>> = sqlx::query_scalar("SELECT herald_delivery_fingerprint($1)")
            .bind(row.id)
            .fetch_one(&mut *c)
            .await?;
        row.fingerprint = print.unwrap_or_default();
        row.fingerprint_version = herald_core::fingerprint::FINGERPRINT_VERSION;
    }
    Ok(Some(row))
}

pub(crate) async fn delivery_get(
    c: &mut PgConnection,
    tenant: Option<Uuid>,
    id: Uuid,
    lock: bool,
) -> Result<Option<DeliveryRow>, StoreError> {
    let lock = if lock { "FOR UPDATE" } else { "" };
    let q = format!(
        "SELECT {DELIVERY_COLS} FROM deliveries d
         WHERE id = $1 AND ($2::uuid IS NULL OR tenant_id = $2) {lock}"
    );
    Ok(match sqlx::query(sql(q)).bind(id).bind(tenant).fetch_optional(c).await? {
        Some(row) => Some(delivery_row!(row)),
        None => None,
    })
}

pub(crate) async fn delivery_attempts(
    c: &mut PgConnection,
    id: Uuid,
) -> Result<Vec<AttemptRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT n, worker, herald_ms(started_at) AS started_at,
             herald_ms(finished_at) AS finished_at, outcome, error_code, error_message
         FROM delivery_attempts WHERE delivery_id = $1
         UNION ALL
         SELECT d.attempts, d.attempt_worker, herald_ms(d.attempt_started_at),
             CASE WHEN d.state = 'sent' THEN herald_ms(d.sent_at) END,
             CASE WHEN d.state = 'sent' THEN 'sent' END, NULL, NULL
         FROM deliveries d WHERE d.id = $1 AND d.state IN ('sending', 'sent')
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
    sqlx::PgConnection,
    DELIVERY_COLS,
    crate::deliveries::ListDialect {
        ph: |n| format!("${n}"),
        time: |p| format!("herald_ts({p})"),
        starts_with: |col, p| format!("starts_with({col}, {})", p[0]),
        prefix_binds: 1,
    }
);

pub(crate) async fn oldest_due_age_ms(
    c: &mut PgConnection,
    now: Now,
) -> Result<Option<i64>, StoreError> {
    Ok(sqlx::query_scalar::<_, Option<i64>>(
        "SELECT herald_ms(herald_now($1)) - herald_ms(min(next_attempt_at)) FROM deliveries
         WHERE state = 'pending' AND next_attempt_at <= herald_now($1)",
    )
    .bind(now.pg())
    .fetch_one(c)
    .await?)
}

pub(crate) async fn deliveries_count_by_state(
    c: &mut PgConnection,
) -> Result<Vec<(String, i64)>, StoreError> {
    Ok(sqlx::query_as("SELECT state, count(*) FROM deliveries GROUP BY state").fetch_all(c).await?)
}

/// `low` and `high` are the filter's id bounds, inclusive (the contract computes them).
pub(crate) async fn deliveries_select(
    c: &mut PgConnection,
    f: &SelectFilter<'_>,
    low: Uuid,
    high: Uuid,
) -> Result<Vec<(Uuid, String, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT id, channel, recipient FROM deliveries d
         WHERE tenant_id = $1 AND id BETWEEN $2 AND $3
           AND ($4::text IS NULL OR state = $4) AND ($5::text IS NULL OR channel = $5)
           AND ($6::text IS NULL OR EXISTS (
               SELECT 1 FROM delivery_attempts a
               WHERE a.delivery_id = d.id AND a.n = d.attempts AND a.error_code = $6))
         ORDER BY id LIMIT $7",
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

/// Channels and states in byte order (`COLLATE "C"`), as the other backends order them.
pub(crate) async fn deliveries_count_by_channel(
    c: &mut PgConnection,
    tenant: Option<Uuid>,
) -> Result<Vec<(String, String, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT channel, state, count(*) FROM deliveries
         WHERE ($1::uuid IS NULL OR tenant_id = $1)
         GROUP BY channel, state ORDER BY channel COLLATE \"C\", state COLLATE \"C\"",
    )
    .bind(tenant)
    .fetch_all(c)
    .await?)
}

pub(crate) async fn delivery_payload(
    c: &mut PgConnection,
    id: Uuid,
) -> Result<Option<String>, StoreError> {
    Ok(sqlx::query_scalar("SELECT payload::text FROM delivery_payloads WHERE delivery_id = $1")
        .bind(id)
        .fetch_optional(c)
        .await?)
}

crate::deliveries::deliveries_failing_fn!(
    sqlx::PgConnection,
    crate::deliveries::FailingDialect {
        ms: |col| format!("herald_ms({col})"),
        tenant: "($1::uuid IS NULL OR d.tenant_id = $1)",
        since: "herald_ts($2)",
        limit: "$3",
        positional: false,
    }
);
