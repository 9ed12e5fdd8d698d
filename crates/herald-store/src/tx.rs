//! Beginning, committing and rolling back one transaction on either backend, with the
//! per-attempt wait bound the transaction runner needs.
//!
//! - PostgreSQL: `BEGIN ISOLATION LEVEL …; SET LOCAL statement_timeout …` in one round
//!   trip, so no statement inside the transaction — lock waits included, which
//!   `statement_timeout` counts too — outlives the caller's deadline; the session's own
//!   `idle_in_transaction_session_timeout` ([`IDLE_IN_TRANSACTION_MAX`]) ends a
//!   transaction whose client went silent before TCP would give up. (A separate
//!   `lock_timeout` would be one more statement per transaction for nothing: it could only
//!   fire at the same moment.)
//! - MariaDB/MySQL: `SET SESSION innodb_lock_wait_timeout = …, max_statement_time = …;
//!   SET TRANSACTION ISOLATION LEVEL …; BEGIN` in one round trip. InnoDB's lock wait
//!   takes whole seconds (at least 1), so `max_statement_time` (MariaDB, fractional
//!   seconds) bounds every statement, lock waits included, to the time left; both are the
//!   connection's, and stay on it after the transaction (the next BEGIN sets its own; a
//!   use outside a transaction puts the server's defaults back first: `Store::acquire`). MySQL has no `max_statement_time`: there the bound is the
//!   whole seconds of the lock wait (and the runner's own timer around each call).
//! - SQLite: this process's writer first (`Store::sqlite_writer`: the process's writes take
//!   turns in arrival order, so none waits in the busy handler for another of its own),
//!   then `PRAGMA busy_timeout = …; BEGIN IMMEDIATE`. IMMEDIATE takes the write lock at
//!   BEGIN, so writer contention is a *wait* at BEGIN (bounded by the busy timeout), before
//!   any of the caller's statements run, instead of an SQLITE_BUSY in the middle of the
//!   transaction (a deferred transaction that read first cannot wait its way into the
//!   write lock: SQLite answers BUSY_SNAPSHOT at once). The busy timeout is the
//!   connection's, not the transaction's: the pool restores the store's own when the
//!   connection comes back (`Store::connect`), so the bound does not leak into later uses.
//!
//! A PostgreSQL or MariaDB transaction owns its pooled connection and drives BEGIN, COMMIT
//! and ROLLBACK through sqlx's transaction manager, not a sqlx `Transaction`, so that a connection whose
//! transaction did not end cleanly — a statement dropped by a timeout, a COMMIT that
//! never answered, a broken socket — is *closed*, never handed back to the pool, where
//! sqlx would wait on it without a bound (its release ping) and a later caller would
//! inherit it.

use crate::conn::{AsConn, Conn};
use crate::error::StoreError;
use crate::store::{Backend, Store};
use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, Database, MySql, Postgres, SqlSafeStr, Sqlite, Transaction};
// Not re-exported by sqlx. Called directly, sqlx's transaction manager keeps the
// connection's transaction depth (which `in_transaction` reads) as a `Transaction` would.
use sqlx_core::transaction::TransactionManager;

use std::time::Duration;

/// The longest a transaction of herald's may sit idle between two of its statements before
/// the server ends it, and its session (PostgreSQL `idle_in_transaction_session_timeout`,
/// MariaDB `idle_transaction_timeout`, MySQL `wait_timeout`; whole seconds, MariaDB's unit).
/// herald's own transactions send each statement as soon as the last one answered, and a
/// runner closure holds database work only, so a transaction idle this long has a client
/// that went silent (a flow a firewall dropped, a process stopped): until the server ends
/// it, its row locks — an account stripe, a lease — make every other transaction that
/// needs them wait, and its session outlives herald's pool bound (issue 32: with this
/// bound at the wait bound plus 3 s, 13 s, MariaDB held 21–42 sessions for a pool of 18
/// under the fault proxy). When herald gives a transaction up at its deadline, the server
/// has already ended a silent one.
pub const IDLE_IN_TRANSACTION_MAX: Duration = Duration::from_secs(2);

/// The longest a ROLLBACK may take before its connection is given up (closed).
pub const ROLLBACK_TIMEOUT: Duration = Duration::from_secs(1);

/// Isolation level on PostgreSQL and MariaDB (whose own default, REPEATABLE READ, herald
/// does not use). SQLite transactions are always serializable (one writer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Isolation {
    /// The default: conditional single-statement updates keep hot rows correct without
    /// the retry storms of SERIALIZABLE.
    #[default]
    ReadCommitted,
    RepeatableRead,
    Serializable,
}

impl Isolation {
    fn sql(self) -> &'static str {
        match self {
            Isolation::ReadCommitted => "READ COMMITTED",
            Isolation::RepeatableRead => "REPEATABLE READ",
            Isolation::Serializable => "SERIALIZABLE",
        }
    }
}

/// How a SQLite transaction takes its lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SqliteLock {
    /// `BEGIN IMMEDIATE`: the write lock at BEGIN. What herald always uses.
    #[default]
    Immediate,
    /// `BEGIN` (deferred): what most frameworks do. Kept for the demo, which shows the
    /// mid-transaction SQLITE_BUSY it leads to.
    Deferred,
}

/// How to begin one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BeginOptions {
    pub isolation: Isolation,
    pub sqlite_lock: SqliteLock,
    /// The longest any single lock or statement wait in this transaction may take.
    pub wait_max: Duration,
    /// The longest the transaction may sit idle between statements before the server ends
    /// it: [`IDLE_IN_TRANSACTION_MAX`] unless it holds a lock on purpose while something
    /// else happens (the demo's other application). Whole seconds on MariaDB.
    pub idle_max: Duration,
}

impl Default for BeginOptions {
    fn default() -> Self {
        BeginOptions {
            isolation: Isolation::default(),
            sqlite_lock: SqliteLock::default(),
            wait_max: herald_core::limits::TX_DEADLINE_DEFAULT,
            idle_max: IDLE_IN_TRANSACTION_MAX,
        }
    }
}

/// An open transaction that owns its pooled connection.
#[derive(Debug)]
pub enum StoreTx {
    Sqlite(SqliteTx),
    Postgres(PooledTx<Postgres>),
    MySql(PooledTx<MySql>),
}

/// A SQLite transaction and, for a writing one (`BEGIN IMMEDIATE`), this process's writer
/// ([`Store::sqlite_writer`]), held until the transaction ends. The transaction is
/// declared first, so it is dropped (and rolled back) before the writer is let go.
#[derive(Debug)]
pub struct SqliteTx {
    tx: Transaction<'static, Sqlite>,
    _writer: Option<tokio::sync::OwnedMutexGuard<()>>,
}

/// A transaction on a pooled PostgreSQL or MariaDB connection. Dropped before COMMIT or
/// ROLLBACK succeeded, it closes the connection without a word to the server (which rolls
/// the transaction back when the socket goes) and frees its place in the pool at once,
/// instead of returning it to the pool.
#[derive(Debug)]
pub struct PooledTx<DB: Database> {
    /// `None` only while being dropped.
    conn: Option<PoolConnection<DB>>,
    /// BEGIN was sent and neither COMMIT nor ROLLBACK has succeeded since.
    open: bool,
}

impl<DB: Database> PooledTx<DB> {
    async fn begin(conn: PoolConnection<DB>, sql: String) -> Result<PooledTx<DB>, StoreError> {
        // Open from the start: a BEGIN cut short by a timeout leaves the connection
        // mid-protocol, and an error means it is not worth keeping either.
        let mut tx = PooledTx { conn: Some(conn), open: true };
        DB::TransactionManager::begin(tx.conn(), Some(AssertSqlSafe(sql).into_sql_str())).await?;
        Ok(tx)
    }

    async fn commit(mut self) -> Result<(), StoreError> {
        DB::TransactionManager::commit(self.conn()).await?;
        self.open = false;
        Ok(())
    }

    async fn rollback(mut self) -> Result<(), StoreError> {
        DB::TransactionManager::rollback(self.conn()).await?;
        self.open = false;
        Ok(())
    }

    #[allow(clippy::expect_used)] // only `drop` takes the connection out
    fn conn(&mut self) -> &mut DB::Connection {
        self.conn.as_deref_mut().expect("a PooledTx has its connection until it is dropped")
    }
}

impl<DB: Database> Drop for PooledTx<DB> {
    fn drop(&mut self) {
        if self.open
            && let Some(conn) = self.conn.take()
        {
            discard(conn);
        }
    }
}

/// Takes a connection out of the pool (its place is free at once) and drops it: the
/// socket is closed without a goodbye, so nothing waits on a server that stopped
/// answering. For connections whose state is unknown after a timeout or a broken wire.
pub fn discard<DB: sqlx::Database>(conn: PoolConnection<DB>) {
    drop(conn.detach());
}

impl Store {
    /// Takes a connection from the pool and begins a transaction on it.
    pub async fn begin(&self, options: &BeginOptions) -> Result<StoreTx, StoreError> {
        // PostgreSQL treats 0 as "no timeout", so the smallest bound is 1 ms.
        let wait_ms = options.wait_max.as_millis().clamp(1, i32::MAX as u128);
        if let Some(pool) = self.sqlite_pool() {
            let begin = match options.sqlite_lock {
                SqliteLock::Immediate => "BEGIN IMMEDIATE",
                SqliteLock::Deferred => "BEGIN",
            };
            // A writing transaction first waits its turn among this process's writes; then
            // SQLite's busy handler only ever waits for another process.
            let writer = match options.sqlite_lock {
                SqliteLock::Immediate => Some(self.sqlite_writer(options.wait_max).await?),
                SqliteLock::Deferred => None,
            };
            let sql = format!("PRAGMA busy_timeout = {wait_ms}; {begin}");
            let tx = pool.begin_with(AssertSqlSafe(sql)).await?;
            return Ok(StoreTx::Sqlite(SqliteTx { tx, _writer: writer }));
        }
        if let Some(pool) = self.postgres_pool() {
            // The server ends the transaction itself if its client goes silent (a dropped
            // flow sends no FIN, and TCP keepalive takes hours): otherwise its row locks —
            // a lease whose COMMIT never arrived, say — would hide those rows from every
            // `SKIP LOCKED` lease until the connection is finally torn down.
            // (`idle_in_transaction_session_timeout` is the session's own, set when it
            // opened: `IDLE_IN_TRANSACTION_MAX`, which an aborted transaction cannot revert;
            // only a transaction that asks for another bound sets its own.)
            let mut sql = format!(
                "BEGIN ISOLATION LEVEL {}; SET LOCAL statement_timeout = '{wait_ms}ms'",
                options.isolation.sql()
            );
            if options.idle_max != IDLE_IN_TRANSACTION_MAX {
                let idle_ms = options.idle_max.as_millis().clamp(1, i32::MAX as u128);
                sql.push_str(&format!(
                    "; SET LOCAL idle_in_transaction_session_timeout = '{idle_ms}ms'"
                ));
            }
            let conn = pool.acquire().await?;
            return Ok(StoreTx::Postgres(PooledTx::begin(conn, sql).await?));
        }
        if let (Some(pool), Some(flavor)) = (self.mysql_pool(), self.mysql_flavor()) {
            // InnoDB's lock wait takes whole seconds; MariaDB's statement bound takes
            // fractions, and also covers metadata-lock waits (`lock_wait_timeout`, a year
            // by default), so no wait outlives the caller's deadline by more than its
            // rounding (MySQL's bounds: `mysql::dialect`). The session values stay after
            // the transaction: see `Store::acquire`.
            let sql = flavor.begin_sql(wait_ms, options.idle_max, options.isolation.sql());
            let conn = pool.acquire().await?;
            return Ok(StoreTx::MySql(PooledTx::begin(conn, sql).await?));
        }
        Err(StoreError::InvalidUrl("store has no pool".into()))
    }
}

impl StoreTx {
    pub fn backend(&self) -> Backend {
        match self {
            StoreTx::Sqlite(_) => Backend::Sqlite,
            StoreTx::Postgres(_) => Backend::Postgres,
            StoreTx::MySql(_) => Backend::MySql,
        }
    }

    pub async fn commit(self) -> Result<(), StoreError> {
        match self {
            StoreTx::Sqlite(t) => t.tx.commit().await?,
            StoreTx::Postgres(t) => t.commit().await?,
            StoreTx::MySql(t) => t.commit().await?,
        }
        Ok(())
    }

    /// Rolls back within [`ROLLBACK_TIMEOUT`]; a connection that cannot is closed.
    pub async fn rollback(self) -> Result<(), StoreError> {
        match self {
            StoreTx::Sqlite(t) => t.tx.rollback().await?,
            StoreTx::Postgres(t) => bounded_rollback(t).await?,
            StoreTx::MySql(t) => bounded_rollback(t).await?,
        }
        Ok(())
    }

    /// Gives the transaction up without a round trip: on PostgreSQL and MariaDB its
    /// connection is closed and the server rolls back; on SQLite (no network to wait on) sqlx rolls back
    /// when the connection is next used.
    pub fn abandon(self) {
        drop(self);
    }
}

impl AsConn for StoreTx {
    fn as_conn(&mut self) -> Conn<'_> {
        match self {
            StoreTx::Sqlite(t) => Conn::Sqlite(&mut t.tx),
            StoreTx::Postgres(t) => Conn::Postgres(t.conn()),
            StoreTx::MySql(t) => Conn::MySql(t.conn()),
        }
    }
}

/// ROLLBACK within [`ROLLBACK_TIMEOUT`]; a connection that cannot is closed (dropped).
async fn bounded_rollback<DB: Database>(t: PooledTx<DB>) -> Result<(), StoreError> {
    match tokio::time::timeout(ROLLBACK_TIMEOUT, t.rollback()).await {
        Ok(result) => result,
        Err(_elapsed) => Err(StoreError::Database(timed_out("ROLLBACK"))),
    }
}

/// An I/O timeout as the driver would report it, so it classifies as a lost connection.
pub fn timed_out(what: &str) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!("{what} got no answer in time"),
    ))
}
