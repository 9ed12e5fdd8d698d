//! herald's storage: the only crate with SQL in it.
//!
//! One [`Store`] per database, behind one [`Backend`] boundary: an embedded SQLite file
//! (the default) or PostgreSQL. Everything above this crate speaks in terms of the store's
//! functions and never writes SQL; everything in it is written twice, once per backend,
//! next to each other, so a difference between the backends is visible in one screen.

pub mod bench;
pub mod clock;
pub mod conn;
pub mod deliveries;
pub mod demo;
pub mod diag;
pub mod error;
pub mod keys;
pub mod migrate;
pub mod notify;
pub mod quota;
pub mod receipts;
pub mod store;
pub mod tenants;
pub mod tx;
pub mod url;

pub use conn::{AsConn, Conn};
pub use error::{Concurrency, ErrorClass, StoreError};
pub use store::{Backend, PooledConn, Store, StoreOptions};
pub use tx::{BeginOptions, Isolation, SqliteLock, StoreTx};
pub use url::DbUrl;

/// The sqlx this crate is built on, re-exported so applications that pass their own
/// connections and transactions use the very same types.
pub use sqlx;
