use crate::error::StoreError;
use crate::settings::SettingsRow;
use sqlx::PgConnection;

pub(crate) async fn settings_get(c: &mut PgConnection) -> Result<Option<SettingsRow>, StoreError> {
    let max_attempts: Option<i32> =
        sqlx::query_scalar("SELECT max_attempts FROM herald_settings WHERE id = 1")
            .fetch_optional(c)
            .await?;
    Ok(max_attempts.map(|max_attempts| SettingsRow { max_attempts }))
}

pub(crate) async fn settings_init(
    c: &mut PgConnection,
    seed: SettingsRow,
) -> Result<SettingsRow, StoreError> {
    let max_attempts: i32 = sqlx::query_scalar(
        "INSERT INTO herald_settings (id, max_attempts) VALUES (1, $1)
         ON CONFLICT (id) DO UPDATE SET max_attempts = herald_settings.max_attempts
         RETURNING max_attempts",
    )
    .bind(seed.max_attempts)
    .fetch_one(c)
    .await?;
    Ok(SettingsRow { max_attempts })
}

pub(crate) async fn settings_set(c: &mut PgConnection, row: SettingsRow) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO herald_settings (id, max_attempts) VALUES (1, $1)
         ON CONFLICT (id) DO UPDATE SET max_attempts = excluded.max_attempts",
    )
    .bind(row.max_attempts)
    .execute(c)
    .await?;
    Ok(())
}

pub(crate) async fn secret(
    c: &mut PgConnection,
    name: &str,
    fresh: [u8; 32],
) -> Result<Vec<u8>, StoreError> {
    Ok(sqlx::query_scalar(
        "WITH i AS (INSERT INTO herald_secrets (name, secret) VALUES ($1, $2)
                    ON CONFLICT (name) DO NOTHING RETURNING secret)
         SELECT secret FROM i UNION ALL SELECT secret FROM herald_secrets WHERE name = $1
         LIMIT 1",
    )
    .bind(name)
    .bind(&fresh[..])
    .fetch_one(c)
    .await?)
}

pub(crate) async fn secret_replace(
    c: &mut PgConnection,
    name: &str,
    fresh: [u8; 32],
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO herald_secrets (name, secret) VALUES ($1, $2)
         ON CONFLICT (name) DO UPDATE SET secret = excluded.secret, created_at = now()",
    )
    .bind(name)
    .bind(&fresh[..])
    .execute(c)
    .await?;
    Ok(())
}
