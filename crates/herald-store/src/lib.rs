//! herald's storage: the only crate with SQL in it.
//!
//! One [`Store`] per database, behind one [`Backend`] boundary: an embedded SQLite file
//! (the default), PostgreSQL, or MariaDB (MySQL through the subset both share). Everything above this crate speaks in terms of the store's
//! functions and never writes SQL. A store function is a contract, documented once, whose
//! body hands the call to the module of the backend the connection is on
//! ([`per_backend!`]): `sqlite::*`, `postgres::*` and `mysql::*` hold the SQL, one module
//! per concern.
//! A backend is one more module tree and one more line in that macro; the compiler lists
//! every function it must provide.

/// The backend seam: `per_backend!(conn, module::function(args…))` calls
/// `crate::<backend>::module::function(connection, args…)` for the backend `conn` is on,
/// and awaits it. Every backend module provides every function a contract calls.
macro_rules! per_backend {
    ($conn:expr, $module:ident :: $f:ident ( $($arg:expr),* $(,)? )) => {
        match $conn {
            $crate::conn::Conn::Sqlite(c) => $crate::sqlite::$module::$f(c, $($arg),*).await,
            $crate::conn::Conn::Postgres(c) => $crate::postgres::$module::$f(c, $($arg),*).await,
            $crate::conn::Conn::MySql(c) => $crate::mysql::$module::$f(c, $($arg),*).await,
        }
    };
}
pub(crate) use per_backend;

pub mod audit;
pub mod bench;
pub mod clock;
pub mod conn;
pub mod deliveries;
pub mod demo;
pub mod destinations;
pub mod diag;
pub mod error;
pub mod holds;
pub mod keys;
pub mod migrate;
mod mysql;
pub mod notify;
mod postgres;
pub mod quota;
pub mod receipts;
pub mod rollup;
mod routines;
pub mod settings;
pub mod sql_api;
mod sqlite;
pub mod store;
pub mod tenants;
pub mod tx;
pub mod ui_sessions;
pub mod url;
pub mod workers;

pub use clock::Now;
pub use conn::{AsConn, Conn};
pub use error::{Concurrency, ErrorClass, StoreError};
pub use mysql::dialect::Flavor as MySqlFlavor;
pub use store::{Backend, PooledConn, Store, StoreOptions};
pub use tx::{BeginOptions, Isolation, SqliteLock, StoreTx};
pub use url::DbUrl;

/// The sqlx this crate is built on, re-exported so applications that pass their own
/// connections and transactions use the very same types.
pub use sqlx;
