use crate::error::StoreError;
use crate::settings::SettingsRow;
use sqlx::SqliteConnection;

pub(crate) async fn settings_get(
    c: &mut SqliteConnection,
) -> Result<Option<SettingsRow>, StoreError> {
    let max_attempts: Option<i32> =
        sqlx::query_scalar("SELECT max_attempts FROM herald_settings WHERE id = 1")
            .fetch_optional(c)
            .await?;
    Ok(max_attempts.map(|max_attempts| SettingsRow { max_attempts }))
}

pub(crate) async fn settings_init(
    c: &mut SqliteConnection,
    seed: SettingsRow,
) -> Result<SettingsRow, StoreError> {
    let max_attempts: i32 = sqlx::query_scalar(
        "INSERT INTO herald_settings (id, max_attempts) VALUES (1, ?1)
         ON CONFLICT (id) DO UPDATE SET max_attempts = herald_settings.max_attempts
         RETURNING max_attempts",
    )
    .bind(seed.max_attempts)
    .fetch_one(c)
    .await?;
    Ok(SettingsRow { max_attempts })
}

pub(crate) async fn settings_set(
    c: &mut SqliteConnection,
    row: SettingsRow,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO herald_settings (id, max_attempts) VALUES (1, ?1)
         ON CONFLICT (id) DO UPDATE SET max_attempts = excluded.max_attempts",
    )
    .bind(row.max_attempts)
    .execute(c)
    .await?;
    Ok(())
}

pub(crate) async fn secret(
    c: &mut SqliteConnection,
    name: &str,
    fresh: [u8; 32],
) -> Result<Vec<u8>, StoreError> {
    // Read first: the secret is read every few seconds and written once, and a write
    // would take SQLite's one writer lock each time.
    let kept: Option<Vec<u8>> =
        sqlx::query_scalar("SELECT secret FROM herald_secrets WHERE name = ?1")
            .bind(name)
            .fetch_optional(&mut *c)
            .await?;
    if let Some(kept) = kept {
        return Ok(kept);
    }
    Ok(sqlx::query_scalar(
        "INSERT INTO herald_secrets (name, secret, created_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (name) DO UPDATE SET name = herald_secrets.name
         RETURNING secret",
    )
    .bind(name)
    .bind(&fresh[..])
    .bind(crate::clock::sqlite_now(None))
    .fetch_one(c)
    .await?)
}

pub(crate) async fn secret_replace(
    c: &mut SqliteConnection,
    name: &str,
    fresh: [u8; 32],
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO herald_secrets (name, secret, created_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (name) DO UPDATE SET secret = excluded.secret,
             created_at = excluded.created_at",
    )
    .bind(name)
    .bind(&fresh[..])
    .bind(crate::clock::sqlite_now(None))
    .execute(c)
    .await?;
    Ok(())
}
