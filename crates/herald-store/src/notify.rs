//! Cross-process wake-ups. On PostgreSQL: `NOTIFY herald_due` inside the submitting
//! transaction (delivered only if it commits), `LISTEN herald_due` in workers. PostgreSQL
//! serialises the commits of transactions that NOTIFY, so callers coalesce: at most one
//! NOTIFY per short interval per process, with workers polling briefly after each wake.
//!
//! Elsewhere (MariaDB, SQLite): wake targets, a row per running worker saying where it
//! hears datagrams (`herald_wake_targets`, MariaDB schema 14), which whoever commits new
//! due work reads and sends to after its commit (the library's `wake.rs`; the PHP package
//! through MariaDB's `wake_targets_v1`).

use crate::clock::Now;
use crate::conn::Conn;
use crate::error::StoreError;

/// How long a wake target counts as live after its worker last wrote it (the library
/// writes every 10 s; MariaDB's `wake_targets_v1` holds the same 30 s).
pub const WAKE_TARGET_FRESH_MS: i64 = 30_000;

/// Where one running worker hears wake-ups: `address` (`host:port`, as other processes
/// reach it) and the `token` a datagram must carry to be heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WakeTarget {
    pub worker: String,
    pub address: String,
    pub token: String,
}

impl From<(String, String, String)> for WakeTarget {
    fn from((worker, address, token): (String, String, String)) -> Self {
        WakeTarget { worker, address, token }
    }
}

/// Writes (or refreshes: `seen_at` = now) `target`'s row, and deletes the rows of workers
/// not seen for `forget_before_ms` (stopped without deleting theirs).
pub async fn wake_target_put(
    conn: Conn<'_>,
    target: &WakeTarget,
    now: Now,
    forget_before_ms: i64,
) -> Result<(), StoreError> {
    crate::per_backend!(conn, workers::wake_target_put(target, now, forget_before_ms))
}

/// Deletes `worker`'s row (it stops listening); nothing when there is none.
pub async fn wake_target_drop(conn: Conn<'_>, worker: &str) -> Result<(), StoreError> {
    crate::per_backend!(conn, workers::wake_target_drop(worker))
}

/// The targets seen within `fresh_within_ms` of now, by worker.
pub async fn wake_targets(
    conn: Conn<'_>,
    now: Now,
    fresh_within_ms: i64,
) -> Result<Vec<WakeTarget>, StoreError> {
    crate::per_backend!(conn, workers::wake_targets(now, fresh_within_ms))
}

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
