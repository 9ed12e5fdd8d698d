//! Small read-only probes of the database's own state, used by the demo and by tests that
//! provoke real contention (to know that a connection is really waiting on a lock before
//! making the next move, instead of sleeping and hoping).

use crate::conn::Conn;
use crate::error::StoreError;
use crate::store::Store;

/// The server's id of a connection: PostgreSQL's backend pid, MariaDB's connection id
/// (`None` on SQLite, which has no server).
pub async fn backend_pid(conn: Conn<'_>) -> Result<Option<i32>, StoreError> {
    match conn {
        Conn::Sqlite(_) => Ok(None),
        Conn::Postgres(c) => {
            Ok(Some(sqlx::query_scalar("SELECT pg_backend_pid()").fetch_one(c).await?))
        }
        Conn::MySql(c) => {
            let id: i64 =
                sqlx::query_scalar("SELECT CAST(CONNECTION_ID() AS SIGNED)").fetch_one(c).await?;
            Ok(i32::try_from(id).ok())
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

/// Ends the server's connection `pid` (see [`backend_pid`]), as an operator or a failing
/// network would: `pg_terminate_backend` on PostgreSQL, `KILL CONNECTION` on MariaDB.
pub async fn connection_terminate(store: &Store, pid: i32) -> Result<bool, StoreError> {
    if let Some(pool) = store.mysql_pool() {
        let kill = format!("KILL CONNECTION {pid}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(kill)).execute(pool).await?;
        return Ok(true);
    }
    let Some(pool) = store.postgres_pool() else { return Ok(false) };
    Ok(sqlx::query_scalar("SELECT pg_terminate_backend($1)").bind(pid).fetch_one(pool).await?)
}
