//! The store conformance suite: one test source, run against every backend (River's
//! `riverdriver/drivertest`, BurntSushi's one corpus for every engine). Each concern's file
//! writes its tests once, as `async fn name(db: &Db)`, and lists them in [`conformance!`],
//! which generates `<concern>::<backend>::<name>` for every backend, so a failure names
//! both the contract and the backend that broke it.
//!
//! SQLite always runs (a fresh file in a temporary directory per test). PostgreSQL runs
//! when `HERALD_TEST_POSTGRES_URL` is set, each test in a schema of its own (dropped at the
//! end; `.ci/run` drops any a killed run left behind); MariaDB when `HERALD_TEST_MYSQL_URL`
//! is set, each test in a database of its own. Both are *required* when `CI` is set, so CI
//! cannot go green by skipping them. A new backend is one more line in
//! [`conformance!`], one arm in [`conformance_test!`]'s `@find`, and its case in
//! [`Db::open`].

use herald_core::redact_url;
use herald_store::sqlx::{self, Connection};
use herald_store::{Backend, BeginOptions, PooledConn, Store, StoreOptions, StoreTx};
use std::time::Duration;

mod fixture;

mod apply;
mod audit;
mod batch;
mod claim;
mod keys;
mod lanes;
mod lease;
mod manage;
mod migrate;
mod operators;
mod quota;
mod read;
mod receipts;
mod retention;
mod tenants;
mod tx;
mod wake;

pub use fixture::*;

/// Where the PostgreSQL server for the tests is (a base URL; each test adds its schema).
pub const POSTGRES_ENV: &str = "HERALD_TEST_POSTGRES_URL";
/// Where the MariaDB server for the tests is (a URL; each test creates a database of its
/// own on that server).
pub const MYSQL_ENV: &str = "HERALD_TEST_MYSQL_URL";

/// Generates every listed test once per backend: `mod sqlite { #[tokio::test] async fn
/// name() }`, `mod postgres { … }`, each calling the body `name(&Db)` of the enclosing
/// module. A backend is one more line here.
macro_rules! conformance {
    ($($test:ident),+ $(,)?) => {
        $crate::conformance::backend_tests!(sqlite Sqlite [$($test),+]);
        $crate::conformance::backend_tests!(postgres Postgres [$($test),+]);
        $crate::conformance::backend_tests!(mysql MySql [$($test),+]);
    };
}
pub(crate) use conformance;

/// One backend's module of tests.
macro_rules! backend_tests {
    ($module:ident $backend:ident [$($test:ident),+]) => {
        mod $module {
            $(
                // Two workers: the concurrency tests race real tasks.
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $test() {
                    let Some(db) =
                        $crate::conformance::Db::open(herald_store::Backend::$backend).await
                    else {
                        return;
                    };
                    super::$test(&db).await;
                }
            )+
        }
    };
}
pub(crate) use backend_tests;

/// One migrated database for one test, and the store open on it.
#[derive(Debug)]
pub struct Db {
    pub store: Store,
    /// The URL the store was opened with (a second `Store::open` reaches the same data).
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    /// Dropped after the store (fields drop in order): the test's PostgreSQL schema.
    _pg_schema: Option<PgSchema>,
    /// Likewise, the test's MariaDB database.
    _my_database: Option<MyDatabase>,
}

impl Db {
    /// A fresh database on `backend`, or `None` (with a note) when this run has no
    /// PostgreSQL. Panics when CI is set and the backend is not configured.
    pub async fn open(backend: Backend) -> Option<Db> {
        let (url, dir, pg_schema, my_database) = match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("tempdir");
                let url = format!("sqlite://{}", dir.path().join("herald.db").display());
                (url, Some(dir), None, None)
            }
            Backend::Postgres => {
                let schema = PgSchema::create(base_url(POSTGRES_ENV, "PostgreSQL")?).await;
                let sep = if schema.base.contains('?') { '&' } else { '?' };
                let url = format!("{}{sep}options=-c%20search_path%3D{}", schema.base, schema.name);
                (url, None, Some(schema), None)
            }
            Backend::MySql => {
                let database = MyDatabase::create(base_url(MYSQL_ENV, "MariaDB")?).await;
                (database.url(), None, None, Some(database))
            }
        };
        let store = Store::open(&url, &StoreOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{}: open failed: {e:?}", backend.name()));
        Some(Db { store, url, _dir: dir, _pg_schema: pg_schema, _my_database: my_database })
    }

    pub fn backend(&self) -> Backend {
        self.store.backend()
    }

    /// A transaction with the default options (READ COMMITTED, SQLite `BEGIN IMMEDIATE`).
    pub async fn tx(&self) -> StoreTx {
        self.store.begin(&BeginOptions::default()).await.expect("begin")
    }

    /// A transaction whose every wait (SQLite's BEGIN, PostgreSQL's lock waits) is bounded
    /// by `wait_max`: how a test shows that something holds a lock, without a sleep.
    pub async fn tx_waiting(
        &self,
        wait_max: Duration,
    ) -> Result<StoreTx, herald_store::StoreError> {
        self.store.begin(&BeginOptions { wait_max, ..BeginOptions::default() }).await
    }

    /// A pooled connection, outside any transaction.
    pub async fn conn(&self) -> PooledConn {
        self.store.acquire().await.expect("acquire")
    }
}

/// A schema `t_<uuid>` of one test, dropped with it (`.ci/run` sweeps up after killed runs).
#[derive(Debug)]
struct PgSchema {
    base: String,
    name: String,
}

impl PgSchema {
    async fn create(base: String) -> PgSchema {
        let name = format!("t_{}", uuid::Uuid::now_v7().simple());
        let mut conn = sqlx::PgConnection::connect(&base)
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {} is unreachable: {e}", redact_url(&base)));
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {name}")))
            .execute(&mut conn)
            .await
            .expect("create schema");
        conn.close().await.ok();
        PgSchema { base, name }
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let (base, name) = (self.base.clone(), self.name.clone());
        // Drop runs outside any runtime it could borrow (and perhaps while unwinding): a
        // small runtime of its own, on a thread of its own.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async move {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&base).await {
                    let sql = format!("DROP SCHEMA IF EXISTS {name} CASCADE");
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
                    let _ = conn.close().await;
                }
            });
        })
        .join();
    }
}

/// A database `t_<uuid>` of one test on the MariaDB server, dropped with it.
#[derive(Debug)]
struct MyDatabase {
    base: String,
    name: String,
}

impl MyDatabase {
    async fn create(base: String) -> MyDatabase {
        let name = format!("t_{}", uuid::Uuid::now_v7().simple());
        let mut conn = sqlx::MySqlConnection::connect(&base)
            .await
            .unwrap_or_else(|e| panic!("MariaDB at {} is unreachable: {e}", redact_url(&base)));
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .expect("create database");
        conn.close().await.ok();
        MyDatabase { base, name }
    }

    /// The base URL with this database in its path.
    fn url(&self) -> String {
        let (head, _) = self.base.rsplit_once('/').expect("a MariaDB URL has a path");
        format!("{head}/{}", self.name)
    }
}

impl Drop for MyDatabase {
    fn drop(&mut self) {
        let (base, name) = (self.base.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async move {
                if let Ok(mut conn) = sqlx::MySqlConnection::connect(&base).await {
                    let sql = format!("DROP DATABASE IF EXISTS {name}");
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
                    let _ = conn.close().await;
                }
            });
        })
        .join();
    }
}

/// A server's base URL from `env`; `None` (with a note) when unset outside CI.
fn base_url(env: &str, server: &str) -> Option<String> {
    match std::env::var(env) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but {env} is not: the {server} conformance tests must run in CI")
        }
        _ => {
            println!("note: {env} is not set; this {server} test did not run");
            None
        }
    }
}
