//! A borrowed connection on either backend. Store functions take a [`Conn`], so they work
//! on herald's own transactions and on an application's sqlx connection or transaction
//! alike (that is how a claim commits or rolls back with the caller's business change).

use crate::error::StoreError;
use crate::store::Backend;
use sqlx::mysql::MySqlConnection;
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgConnection;
use sqlx::sqlite::SqliteConnection;
use sqlx::{AssertSqlSafe, Connection, MySql, Postgres, Sqlite, Transaction};

/// A mutable borrow of one connection.
#[derive(Debug)]
pub enum Conn<'c> {
    Sqlite(&'c mut SqliteConnection),
    Postgres(&'c mut PgConnection),
    MySql(&'c mut MySqlConnection),
}

impl Conn<'_> {
    pub fn backend(&self) -> Backend {
        match self {
            Conn::Sqlite(_) => Backend::Sqlite,
            Conn::Postgres(_) => Backend::Postgres,
            Conn::MySql(_) => Backend::MySql,
        }
    }

    /// Whether the connection is inside a transaction (as far as the driver knows).
    pub fn in_transaction(&self) -> bool {
        match self {
            Conn::Sqlite(c) => c.is_in_transaction(),
            Conn::Postgres(c) => c.is_in_transaction(),
            Conn::MySql(c) => c.is_in_transaction(),
        }
    }

    /// A shorter borrow of the same connection.
    pub fn reborrow(&mut self) -> Conn<'_> {
        match self {
            Conn::Sqlite(c) => Conn::Sqlite(c),
            Conn::Postgres(c) => Conn::Postgres(c),
            Conn::MySql(c) => Conn::MySql(c),
        }
    }
}

/// Anything herald can run its statements on.
pub trait AsConn: Send {
    fn as_conn(&mut self) -> Conn<'_>;
}

impl AsConn for SqliteConnection {
    fn as_conn(&mut self) -> Conn<'_> {
        Conn::Sqlite(self)
    }
}

impl AsConn for PgConnection {
    fn as_conn(&mut self) -> Conn<'_> {
        Conn::Postgres(self)
    }
}

impl AsConn for MySqlConnection {
    fn as_conn(&mut self) -> Conn<'_> {
        Conn::MySql(self)
    }
}

impl AsConn for Transaction<'_, MySql> {
    fn as_conn(&mut self) -> Conn<'_> {
        Conn::MySql(self)
    }
}

impl AsConn for PoolConnection<MySql> {
    fn as_conn(&mut self) -> Conn<'_> {
        Conn::MySql(self)
    }
}

impl AsConn for Transaction<'_, Sqlite> {
    fn as_conn(&mut self) -> Conn<'_> {
        Conn::Sqlite(self)
    }
}

impl AsConn for Transaction<'_, Postgres> {
    fn as_conn(&mut self) -> Conn<'_> {
        Conn::Postgres(self)
    }
}

impl AsConn for PoolConnection<Sqlite> {
    fn as_conn(&mut self) -> Conn<'_> {
        Conn::Sqlite(self)
    }
}

impl AsConn for PoolConnection<Postgres> {
    fn as_conn(&mut self) -> Conn<'_> {
        Conn::Postgres(self)
    }
}

impl AsConn for Conn<'_> {
    fn as_conn(&mut self) -> Conn<'_> {
        self.reborrow()
    }
}

/// Savepoints are named by nesting depth, never by input.
fn savepoint_name(depth: u32) -> String {
    format!("herald_sp_{depth}")
}

async fn execute(conn: Conn<'_>, sql: String) -> Result<(), StoreError> {
    match conn {
        Conn::Sqlite(c) => sqlx::raw_sql(AssertSqlSafe(sql)).execute(c).await?.rows_affected(),
        Conn::Postgres(c) => sqlx::raw_sql(AssertSqlSafe(sql)).execute(c).await?.rows_affected(),
        Conn::MySql(c) => sqlx::raw_sql(AssertSqlSafe(sql)).execute(c).await?.rows_affected(),
    };
    Ok(())
}

/// `SAVEPOINT herald_sp_<depth>`.
pub async fn savepoint_begin(conn: Conn<'_>, depth: u32) -> Result<(), StoreError> {
    execute(conn, format!("SAVEPOINT {}", savepoint_name(depth))).await
}

/// `RELEASE SAVEPOINT`: keep the savepoint's work as part of the enclosing transaction.
pub async fn savepoint_release(conn: Conn<'_>, depth: u32) -> Result<(), StoreError> {
    execute(conn, format!("RELEASE SAVEPOINT {}", savepoint_name(depth))).await
}

/// `ROLLBACK TO` then `RELEASE`: undo the savepoint's work, keep the transaction usable.
pub async fn savepoint_rollback(conn: Conn<'_>, depth: u32) -> Result<(), StoreError> {
    let name = savepoint_name(depth);
    execute(conn, format!("ROLLBACK TO SAVEPOINT {name}; RELEASE SAVEPOINT {name}")).await
}
