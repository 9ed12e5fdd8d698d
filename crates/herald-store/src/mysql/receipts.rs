use super::inserted;
use crate::clock::MYSQL_NOW_MS;
use crate::error::StoreError;
use sqlx::MySqlConnection;

pub(crate) async fn receipt_insert(
    c: &mut MySqlConnection,
    scope: &str,
    operation_id: &str,
) -> Result<bool, StoreError> {
    let q = format!(
        "INSERT INTO receipts (scope, operation_id, created_at) VALUES (?, ?, {MYSQL_NOW_MS})"
    );
    inserted(sqlx::query(super::sql(q)).bind(scope).bind(operation_id).execute(c).await)
}

pub(crate) async fn receipts_count(
    c: &mut MySqlConnection,
    scope: &str,
) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT COUNT(*) FROM receipts WHERE scope = ?")
        .bind(scope)
        .fetch_one(c)
        .await?)
}
