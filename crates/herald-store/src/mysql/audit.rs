use super::sql;
use crate::audit::{AUDIT_COLS, AuditRow, AuditTuple, audit_row};
use crate::error::StoreError;
use sqlx::MySqlConnection;
use sqlx::types::Uuid;

pub(crate) async fn audit_insert(
    c: &mut MySqlConnection,
    row: &AuditRow,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO herald_audit (at_ms, actor, key_id, tenant_id, action, target, count,
             address)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(row.at_ms)
    .bind(&row.actor)
    .bind(&row.key_id)
    .bind(row.tenant_id)
    .bind(&row.action)
    .bind(&row.target)
    .bind(row.count)
    .bind(&row.address)
    .execute(c)
    .await?;
    Ok(())
}

pub(crate) async fn audit_list(
    c: &mut MySqlConnection,
    tenant: Option<Uuid>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<AuditRow>, StoreError> {
    let q = format!(
        "SELECT {AUDIT_COLS} FROM herald_audit
         WHERE (? IS NULL OR tenant_id = ?) AND (? IS NULL OR id < ?)
         ORDER BY id DESC LIMIT ?"
    );
    let rows: Vec<AuditTuple> = sqlx::query_as(sql(q))
        .bind(tenant)
        .bind(tenant)
        .bind(before)
        .bind(before)
        .bind(limit)
        .fetch_all(c)
        .await?;
    Ok(rows.into_iter().map(audit_row).collect())
}

pub(crate) async fn audit_prune(
    c: &mut MySqlConnection,
    before_ms: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    Ok(sqlx::query("DELETE FROM herald_audit WHERE at_ms < ? ORDER BY at_ms LIMIT ?")
        .bind(before_ms)
        .bind(limit)
        .execute(c)
        .await?
        .rows_affected())
}
