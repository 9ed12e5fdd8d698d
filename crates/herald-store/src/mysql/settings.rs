use super::inserted;
use crate::error::StoreError;
use crate::settings::SettingsRow;
use sqlx::MySqlConnection;

pub(crate) async fn settings_get(
    c: &mut MySqlConnection,
) -> Result<Option<SettingsRow>, StoreError> {
    let max_attempts: Option<i32> =
        sqlx::query_scalar("SELECT max_attempts FROM herald_settings WHERE id = 1")
            .fetch_optional(c)
            .await?;
    Ok(max_attempts.map(|max_attempts| SettingsRow { max_attempts }))
}

pub(crate) async fn settings_init(
    c: &mut MySqlConnection,
    seed: SettingsRow,
) -> Result<SettingsRow, StoreError> {
    inserted(
        sqlx::query("INSERT INTO herald_settings (id, max_attempts) VALUES (1, ?)")
            .bind(seed.max_attempts)
            .execute(&mut *c)
            .await,
    )?;
    // A plain read, not a locking one: under `innodb_snapshot_isolation` a locking read of
    // a row committed after this transaction's snapshot fails (1020). Under REPEATABLE
    // READ the snapshot may predate the row another process just wrote; then this
    // process's seed stands until its next read of the settings.
    let max_attempts: Option<i32> =
        sqlx::query_scalar("SELECT max_attempts FROM herald_settings WHERE id = 1")
            .fetch_optional(c)
            .await?;
    Ok(SettingsRow { max_attempts: max_attempts.unwrap_or(seed.max_attempts) })
}

pub(crate) async fn settings_set(
    c: &mut MySqlConnection,
    row: SettingsRow,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO herald_settings (id, max_attempts) VALUES (1, ?)
         ON DUPLICATE KEY UPDATE max_attempts = VALUES(max_attempts)",
    )
    .bind(row.max_attempts)
    .execute(c)
    .await?;
    Ok(())
}
