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

/// A connection that LISTENs for wake-ups from other processes (PostgreSQL).
#[derive(Debug)]
pub struct WakeListener(sqlx::postgres::PgListener);

impl WakeListener {
    /// Waits for the next wake-up. An error means the connection is lost; open another.
    pub async fn recv(&mut self) -> Result<(), StoreError> {
        loop {
            if self.0.try_recv().await?.is_some() {
                return Ok(());
            }
            // The connection was lost and sqlx has opened another (LISTEN included):
            // exempt it from the idle bound again.
            keep_idle(&mut self.0).await?;
        }
    }
}

impl crate::Store {
    /// A connection listening on [`WAKE_CHANNEL`], or `None` on a backend without
    /// cross-process notifications (SQLite, one process per file in practice).
    pub async fn wake_listener(&self) -> Result<Option<WakeListener>, StoreError> {
        let Some(pool) = self.postgres_pool() else { return Ok(None) };
        let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
        listener.listen(WAKE_CHANNEL).await?;
        keep_idle(&mut listener).await?;
        Ok(Some(WakeListener(listener)))
    }
}

/// A LISTEN session is idle by design, waiting for notifications: the one session the
/// server must not end for idling (`Store`'s `SESSION_IDLE_MAX`).
async fn keep_idle(listener: &mut sqlx::postgres::PgListener) -> Result<(), StoreError> {
    sqlx::raw_sql("SET idle_session_timeout = 0").execute(listener).await?;
    Ok(())
}
