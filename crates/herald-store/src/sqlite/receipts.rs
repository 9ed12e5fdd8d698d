use crate::error::StoreError;
use sqlx::SqliteConnection;

pub(crate) async fn receipt_insert(
    c: &mut SqliteConnection,
    scope: &str,
    operation_id: &str,
) -> Result<bool, StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO receipts (scope, operation_id) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
    )
    .bind(scope)
    .bind(operation_id)
    .execute(c)
    .await?
    .rows_affected();
    Ok(inserted == 1)
}

pub(crate) async fn receipts_count(
    c: &mut SqliteConnection,
    scope: &str,
) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT count(*) FROM receipts WHERE scope = ?1")
        .bind(scope)
        .fetch_one(c)
        .await?)
}
