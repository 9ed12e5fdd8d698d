use super::sql;
use crate::error::StoreError;
use crate::ui_sessions::{UI_SESSION_COLS, UiSessionRow, UiSessionTuple, ui_session_row};
use sqlx::SqliteConnection;
use sqlx::types::Uuid;

pub(crate) async fn ui_session_insert(
    c: &mut SqliteConnection,
    row: &UiSessionRow,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO herald_ui_sessions (id, tenant_id, key_id, created_ms, seen_ms,
             expires_ms, address, agent)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )
    .bind(&row.id)
    .bind(row.tenant_id)
    .bind(&row.key_id)
    .bind(row.created_ms)
    .bind(row.seen_ms)
    .bind(row.expires_ms)
    .bind(&row.address)
    .bind(&row.agent)
    .execute(c)
    .await?;
    Ok(())
}

pub(crate) async fn ui_session_get(
    c: &mut SqliteConnection,
    id: &str,
) -> Result<Option<UiSessionRow>, StoreError> {
    let q = format!("SELECT {UI_SESSION_COLS} FROM herald_ui_sessions WHERE id = ?1");
    let row: Option<UiSessionTuple> = sqlx::query_as(sql(q)).bind(id).fetch_optional(c).await?;
    Ok(row.map(ui_session_row))
}

pub(crate) async fn ui_session_touch(
    c: &mut SqliteConnection,
    id: &str,
    seen_ms: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE herald_ui_sessions SET seen_ms = ?2
         WHERE id = ?1 AND ended_ms IS NULL AND seen_ms < ?2",
    )
    .bind(id)
    .bind(seen_ms)
    .execute(c)
    .await?;
    Ok(())
}

pub(crate) async fn ui_session_end(
    c: &mut SqliteConnection,
    id: &str,
    tenant: Option<Uuid>,
    ended_ms: i64,
    why: &str,
) -> Result<bool, StoreError> {
    let ended = sqlx::query(
        "UPDATE herald_ui_sessions SET ended_ms = ?3, ended_why = ?4
         WHERE id = ?1 AND ended_ms IS NULL AND (?2 IS NULL OR tenant_id = ?2)",
    )
    .bind(id)
    .bind(tenant)
    .bind(ended_ms)
    .bind(why)
    .execute(c)
    .await?
    .rows_affected();
    Ok(ended == 1)
}

pub(crate) async fn ui_sessions_open(
    c: &mut SqliteConnection,
    tenant: Option<Uuid>,
    now_ms: i64,
    limit: i64,
) -> Result<Vec<UiSessionRow>, StoreError> {
    let q = format!(
        "SELECT {UI_SESSION_COLS} FROM herald_ui_sessions
         WHERE ended_ms IS NULL AND expires_ms > ?2 AND (?1 IS NULL OR tenant_id = ?1)
         ORDER BY created_ms DESC, id LIMIT ?3"
    );
    let rows: Vec<UiSessionTuple> =
        sqlx::query_as(sql(q)).bind(tenant).bind(now_ms).bind(limit).fetch_all(c).await?;
    Ok(rows.into_iter().map(ui_session_row).collect())
}

pub(crate) async fn ui_sessions_prune(
    c: &mut SqliteConnection,
    before_ms: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM herald_ui_sessions WHERE id IN (
             SELECT id FROM herald_ui_sessions
             WHERE expires_ms < ?1 OR ended_ms < ?1 LIMIT ?2)",
    )
    .bind(before_ms)
    .bind(limit)
    .execute(c)
    .await?
    .rows_affected())
}
