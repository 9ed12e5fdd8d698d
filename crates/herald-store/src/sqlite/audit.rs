use super::sql;
use crate::audit::{AUDIT_COLS, AuditRow, AuditTuple, audit_row};
use crate::error::StoreError;
use sqlx::SqliteConnection;
use sqlx::types::Uuid;

pub(crate) async fn audit_insert(
    c: &mut SqliteConnection,
    row: &AuditRow,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO herald_audit (at_ms, actor, key_id, tenant_id, action, target, count,
             address)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
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
    c: &mut SqliteConnection,
    tenant: Option<Uuid>,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<AuditRow>, StoreError> {
    let q = format!(
        "SELECT {AUDIT_COLS} FROM herald_audit
         WHERE (?1 IS NULL OR tenant_id = ?1) AND (?2 IS NULL OR id < ?2)
         ORDER BY id DESC LIMIT ?3"
    );
    let rows: Vec<AuditTuple> =
        sqlx::query_as(sql(q)).bind(tenant).bind(before).bind(limit).fetch_all(c).await?;
    Ok(rows.into_iter().map(audit_row).collect())
}

pub(crate) async fn audit_prune(
    c: &mut SqliteConnection,
    before_ms: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    Ok(sqlx::query(
        "DELETE FROM herald_audit WHERE id IN (
             SELECT id FROM herald_audit WHERE at_ms < ?1 ORDER BY at_ms LIMIT ?2)",
    )
    .bind(before_ms)
    .bind(limit)
    .execute(c)
    .await?
    .rows_affected())
}
