//! Beginning, committing and rolling back one transaction on either backend, with the
//! per-attempt wait bound the transaction runner needs.
//!
//! - PostgreSQL: `BEGIN ISOLATION LEVEL …; SET LOCAL statement_timeout …` in one round
//!   trip, so no statement inside the transaction — lock waits included, which
//!   `statement_timeout` counts too — outlives the caller's deadline. (A separate
//!   `lock_timeout` would be one more statement per transaction for nothing: it could only
//!   fire at the same moment.)
//! - SQLite: `PRAGMA busy_timeout = …; BEGIN IMMEDIATE`. IMMEDIATE takes the write lock at
//!   BEGIN, so writer contention is a *wait* at BEGIN (bounded by the busy timeout), before
//!   any of the caller's statements run, instead of an SQLITE_BUSY in the middle of the
//!   transaction (a deferred transaction that read first cannot wait its way into the
//!   write lock: SQLite answers BUSY_SNAPSHOT at once).

use crate::conn::{AsConn, Conn};
use crate::error::StoreError;
use crate::store::{Backend, Store};
use sqlx::{AssertSqlSafe, Postgres, Sqlite, Transaction};
use std::time::Duration;

/// Isolation level on PostgreSQL. SQLite transactions are always serializable (one writer).
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
}

impl Default for BeginOptions {
    fn default() -> Self {
        BeginOptions {
            isolation: Isolation::default(),
            sqlite_lock: SqliteLock::default(),
            wait_max: herald_core::limits::TX_DEADLINE_DEFAULT,
        }
    }
}

/// An open transaction that owns its pooled connection.
#[derive(Debug)]
pub enum StoreTx {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
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
            let sql = format!("PRAGMA busy_timeout = {wait_ms}; {begin}");
            return Ok(StoreTx::Sqlite(pool.begin_with(AssertSqlSafe(sql)).await?));
        }
        if let Some(pool) = self.postgres_pool() {
            let sql = format!(
                "BEGIN ISOLATION LEVEL {}; SET LOCAL statement_timeout = '{wait_ms}ms'",
                options.isolation.sql()
            );
            return Ok(StoreTx::Postgres(pool.begin_with(AssertSqlSafe(sql)).await?));
        }
        Err(StoreError::InvalidUrl("store has no pool".into()))
    }
}

impl StoreTx {
    pub fn backend(&self) -> Backend {
        match self {
            StoreTx::Sqlite(_) => Backend::Sqlite,
            StoreTx::Postgres(_) => Backend::Postgres,
        }
    }

    pub async fn commit(self) -> Result<(), StoreError> {
        match self {
            StoreTx::Sqlite(t) => t.commit().await?,
            StoreTx::Postgres(t) => t.commit().await?,
        }
        Ok(())
    }

    pub async fn rollback(self) -> Result<(), StoreError> {
        match self {
            StoreTx::Sqlite(t) => t.rollback().await?,
            StoreTx::Postgres(t) => t.rollback().await?,
        }
        Ok(())
    }
}

impl AsConn for StoreTx {
    fn as_conn(&mut self) -> Conn<'_> {
        match self {
            StoreTx::Sqlite(t) => Conn::Sqlite(t),
            StoreTx::Postgres(t) => Conn::Postgres(t),
        }
    }
}
