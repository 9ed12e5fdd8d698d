//! Settings every herald process on one database shares, in the one row of
//! `herald_settings`: the defaults a submit resolves before its fingerprint, so two
//! processes configured differently still give one request one meaning.

use crate::conn::Conn;
use crate::error::StoreError;

/// The shared settings row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SettingsRow {
    /// Attempts a delivery gets when its submit does not say.
    pub max_attempts: i32,
}

/// The settings row; `None` before any process has written it.
pub async fn settings_get(conn: Conn<'_>) -> Result<Option<SettingsRow>, StoreError> {
    crate::per_backend!(conn, settings::settings_get())
}

/// Writes `seed` unless a row exists, and returns the row that is there afterwards (the
/// seed, or what another process wrote first).
pub async fn settings_init(conn: Conn<'_>, seed: SettingsRow) -> Result<SettingsRow, StoreError> {
    crate::per_backend!(conn, settings::settings_init(seed))
}

/// Writes the settings row, replacing what was there.
pub async fn settings_set(conn: Conn<'_>, row: SettingsRow) -> Result<(), StoreError> {
    crate::per_backend!(conn, settings::settings_set(row))
}

/// The secret `name` (32 bytes): the one some process made first, else `fresh`, kept.
pub async fn secret(conn: Conn<'_>, name: &str, fresh: [u8; 32]) -> Result<Vec<u8>, StoreError> {
    crate::per_backend!(conn, settings::secret(name, fresh))
}

/// Replaces the secret `name` with `fresh` (what was signed with the old one no longer
/// verifies).
pub async fn secret_replace(conn: Conn<'_>, name: &str, fresh: [u8; 32]) -> Result<(), StoreError> {
    crate::per_backend!(conn, settings::secret_replace(name, fresh))
}
