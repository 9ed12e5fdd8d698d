use super::{inserted, sql};
use crate::clock::MYSQL_NOW_MS;
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

pub(crate) async fn secret(
    c: &mut MySqlConnection,
    name: &str,
    fresh: [u8; 32],
) -> Result<Vec<u8>, StoreError> {
    // The row of whichever process came first stands (a duplicate is the answer); a
    // plain read then, as settings_init reads.
    inserted(
        sqlx::query(sql(format!(
            "INSERT INTO herald_secrets (name, secret, created_at) VALUES (?, ?, {MYSQL_NOW_MS})"
        )))
        .bind(name)
        .bind(&fresh[..])
        .execute(&mut *c)
        .await,
    )?;
    let kept: Option<Vec<u8>> =
        sqlx::query_scalar("SELECT secret FROM herald_secrets WHERE name = ?")
            .bind(name)
            .fetch_optional(&mut *c)
            .await?;
    Ok(kept.unwrap_or_else(|| fresh.to_vec()))
}

pub(crate) async fn secret_replace(
    c: &mut MySqlConnection,
    name: &str,
    fresh: [u8; 32],
) -> Result<(), StoreError> {
    sqlx::query(sql(format!(
        "INSERT INTO herald_secrets (name, secret, created_at) VALUES (?, ?, {MYSQL_NOW_MS})
         ON DUPLICATE KEY UPDATE secret = VALUES(secret), created_at = VALUES(created_at)"
    )))
    .bind(name)
    .bind(&fresh[..])
    .execute(c)
    .await?;
    Ok(())
}
