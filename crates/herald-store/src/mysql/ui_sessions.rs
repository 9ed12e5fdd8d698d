use super::sql;
use crate::error::StoreError;
use crate::ui_sessions::{UI_SESSION_COLS, UiSessionRow, UiSessionTuple, ui_session_row};
use sqlx::MySqlConnection;
use sqlx::types::Uuid;

pub(crate) async fn ui_session_insert(
    c: &mut MySqlConnection,
    row: &UiSessionRow,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO herald_ui_sessions (id, tenant_id, key_id, created_ms, seen_ms,
             expires_ms, address, agent)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
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
    c: &mut MySqlConnection,
    id: &str,
) -> Result<Option<UiSessionRow>, StoreError> {
    let q = format!("SELECT {UI_SESSION_COLS} FROM herald_ui_sessions WHERE id = ?");
    let row: Option<UiSessionTuple> = sqlx::query_as(sql(q)).bind(id).fetch_optional(c).await?;
    Ok(row.map(ui_session_row))
}

pub(crate) async fn ui_session_touch(
    c: &mut MySqlConnection,
    id: &str,
    seen_ms: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE herald_ui_sessions SET seen_ms = ?
         WHERE id = ? AND ended_ms IS NULL AND seen_ms < ?",
    )
    .bind(seen_ms)
    .bind(id)
    .bind(seen_ms)
    .execute(c)
    .await?;
    Ok(())
}

pub(crate) async fn ui_session_end(
    c: &mut MySqlConnection,
    id: &str,
    tenant: Option<Uuid>,
    ended_ms: i64,
    why: &str,
) -> Result<bool, StoreError> {
    let ended = sqlx::query(
        "UPDATE herald_ui_sessions SET ended_ms = ?, ended_why = ?
         WHERE id = ? AND ended_ms IS NULL AND (? IS NULL OR tenant_id = ?)",
    )
    .bind(ended_ms)
    .bind(why)
    .bind(id)
    .bind(tenant)
    .bind(tenant)
    .execute(c)
    .await?
    .rows_affected();
    Ok(ended == 1)
}

pub(crate) async fn ui_sessions_open(
    c: &mut MySqlConnection,
    tenant: Option<Uuid>,
    now_ms: i64,
    limit: i64,
) -> Result<Vec<UiSessionRow>, StoreError> {
    let q = format!(
        "SELECT {UI_SESSION_COLS} FROM herald_ui_sessions
         WHERE ended_ms IS NULL AND expires_ms > ? AND (? IS NULL OR tenant_id = ?)
         ORDER BY created_ms DESC, id LIMIT ?"
    );
    let rows: Vec<UiSessionTuple> = sqlx::query_as(sql(q))
        .bind(now_ms)
        .bind(tenant)
        .bind(tenant)
        .bind(limit)
        .fetch_all(c)
        .await?;
    Ok(rows.into_iter().map(ui_session_row).collect())
}

pub(crate) async fn ui_sessions_prune(
    c: &mut MySqlConnection,
    before_ms: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    Ok(sqlx::query("DELETE FROM herald_ui_sessions WHERE expires_ms < ? OR ended_ms < ? LIMIT ?")
        .bind(before_ms)
        .bind(before_ms)
        .bind(limit)
        .execute(c)
        .await?
        .rows_affected())
}
