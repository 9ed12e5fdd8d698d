//! Small read-only probes of the database's own state, used by the demo and by tests that
//! provoke real contention (to know that a connection is really waiting on a lock before
//! making the next move, instead of sleeping and hoping).

use crate::conn::Conn;
use crate::error::StoreError;
use crate::store::Store;

/// The server process id of a PostgreSQL connection (`None` on SQLite and MariaDB).
pub async fn backend_pid(conn: Conn<'_>) -> Result<Option<i32>, StoreError> {
    match conn {
        Conn::Sqlite(_) | Conn::MySql(_) => Ok(None),
        Conn::Postgres(c) => {
            Ok(Some(sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(c).await?))
        }
    }
}

/// Whether PostgreSQL backend `pid` is currently waiting for a lock.
pub async fn postgres_waiting_on_lock(store: &Store, pid: i32) -> Result<bool, StoreError> {
    let Some(pool) = store.postgres_pool() else { return Ok(false) };
    let waiting: Option<bool> =
        sqlx::query_scalar("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1")
            .bind(pid)
            .fetch_optional(pool)
            .await?
            .flatten();
    Ok(waiting.unwrap_or(false))
}

/// Ends PostgreSQL backend `pid` (as an operator or a failing network would).
pub async fn postgres_terminate(store: &Store, pid: i32) -> Result<bool, StoreError> {
    let Some(pool) = store.postgres_pool() else { return Ok(false) };
    Ok(sqlx::query_scalar("SELECT pg_terminate_backend($1)").bind(pid).fetch_one(pool).await?)
}
