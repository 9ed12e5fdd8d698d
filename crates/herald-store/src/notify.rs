//! Cross-process wake-ups on PostgreSQL: `NOTIFY herald_due` inside the submitting
//! transaction (delivered only if it commits), `LISTEN herald_due` in workers. PostgreSQL
//! serialises the commits of transactions that NOTIFY, so callers coalesce: at most one
//! NOTIFY per short interval per process, with workers polling briefly after each wake.

use crate::conn::Conn;
use crate::error::StoreError;

/// The channel workers listen on.
pub const WAKE_CHANNEL: &str = "herald_due";

/// Queues a wake-up for when this transaction commits (no-op on SQLite).
pub async fn wake_notify(conn: Conn<'_>) -> Result<(), StoreError> {
    if let Conn::Postgres(c) = conn {
        sqlx::query("SELECT pg_notify($1, '')").bind(WAKE_CHANNEL).execute(c).await?;
    }
    Ok(())
}
