//! Test backends: every conformance test runs against each of them. SQLite (a fresh file
//! in a temporary directory) always; PostgreSQL when `HERALD_TEST_POSTGRES_URL` is set and
//! MariaDB when `HERALD_TEST_MYSQL_URL` is — both *required* when `CI` is set, so CI can
//! never go green by skipping them. Each PostgreSQL test gets its own schema (via the
//! connection's search_path), each MariaDB test its own database, so tests run in
//! parallel without seeing each other's rows.

#![allow(dead_code)]

use herald::sqlx::{self, Connection};
use herald::{Backend, Herald, StoreOptions};

pub const POSTGRES_ENV: &str = "HERALD_TEST_POSTGRES_URL";
pub const MYSQL_ENV: &str = "HERALD_TEST_MYSQL_URL";

/// One database for one test.
#[derive(Debug)]
pub struct TestDb {
    pub backend: Backend,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    pg_cleanup: Option<(String, String)>,
    /// (server URL, database) of a MariaDB test.
    my_cleanup: Option<(String, String)>,
}

/// The PostgreSQL base URL, if tests should use PostgreSQL.
pub fn postgres_url() -> Option<String> {
    match std::env::var(POSTGRES_ENV) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but {POSTGRES_ENV} is not: PostgreSQL tests must run in CI")
        }
        _ => None,
    }
}

/// The MariaDB server URL, if tests should use MariaDB.
pub fn mysql_url() -> Option<String> {
    match std::env::var(MYSQL_ENV) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but {MYSQL_ENV} is not: MariaDB tests must run in CI")
        }
        _ => None,
    }
}

/// Every backend available to this run.
pub async fn backends() -> Vec<TestDb> {
    let mut dbs = vec![sqlite()];
    if let Some(base) = postgres_url() {
        dbs.push(postgres(&base).await);
    }
    if let Some(base) = mysql_url() {
        dbs.push(mysql(&base).await);
    }
    dbs
}

pub fn sqlite() -> TestDb {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    TestDb { backend: Backend::Sqlite, url, _dir: Some(dir), pg_cleanup: None, my_cleanup: None }
}

pub async fn postgres(base: &str) -> TestDb {
    let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
    let mut conn = sqlx::PgConnection::connect(base)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {base} is unreachable: {e}"));
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut conn)
        .await
        .expect("create schema");
    conn.close().await.ok();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    TestDb {
        backend: Backend::Postgres,
        url,
        _dir: None,
        pg_cleanup: Some((base.into(), schema)),
        my_cleanup: None,
    }
}

/// A fresh database `t_<uuid>` on the MariaDB server at `base`.
pub async fn mysql(base: &str) -> TestDb {
    let database = format!("t_{}", uuid::Uuid::now_v7().simple());
    let mut conn = sqlx::MySqlConnection::connect(base)
        .await
        .unwrap_or_else(|e| panic!("MariaDB at {base} is unreachable: {e}"));
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&mut conn)
        .await
        .expect("create database");
    conn.close().await.ok();
    let (head, _) = base.rsplit_once('/').expect("a MariaDB URL has a path");
    let url = format!("{head}/{database}");
    TestDb {
        backend: Backend::MySql,
        url,
        _dir: None,
        pg_cleanup: None,
        my_cleanup: Some((base.into(), database)),
    }
}

impl TestDb {
    pub fn name(&self) -> &'static str {
        self.backend.name()
    }

    /// A migrated herald on this database.
    pub async fn herald(&self) -> Herald {
        Herald::open_with(&self.url, &StoreOptions::default())
            .await
            .unwrap_or_else(|e| panic!("{}: open failed: {e}", self.name()))
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((base, database)) = self.my_cleanup.take() {
            let _ = std::thread::spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build()
                else {
                    return;
                };
                rt.block_on(async move {
                    if let Ok(mut conn) = sqlx::MySqlConnection::connect(&base).await {
                        let sql = format!("DROP DATABASE IF EXISTS {database}");
                        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
                        let _ = conn.close().await;
                    }
                });
            })
            .join();
        }
        let Some((base, schema)) = self.pg_cleanup.take() else { return };
        // Dropping runs outside any runtime we could borrow: use a small one of our own.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async move {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&base).await {
                    let sql = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
                    let _ = conn.close().await;
                }
            });
        })
        .join();
    }
}

/// The interpreter with the tests' PyPI packages (aiosmtpd, standardwebhooks):
/// `HERALD_TEST_PYTHON`, required in CI; locally `scripts/test-deps` installs them and
/// prints its path.
pub fn python() -> &'static str {
    use std::process::{Command, Stdio};
    static PYTHON: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PYTHON.get_or_init(|| {
        if let Ok(p) = std::env::var("HERALD_TEST_PYTHON")
            && !p.trim().is_empty()
        {
            return p;
        }
        if std::env::var_os("CI").is_some() {
            panic!(
                "CI is set but HERALD_TEST_PYTHON is not: run `export HERALD_TEST_PYTHON=$(scripts/test-deps)`"
            );
        }
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/test-deps");
        // Test processes run in parallel: one installs, the others wait for it.
        let lock = std::fs::File::create(std::env::temp_dir().join("herald-test-deps.lock"))
            .expect("test-deps lock file");
        lock.lock().expect("lock test-deps");
        let out = Command::new(&script)
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
        assert!(out.status.success(), "{} failed: {:?}", script.display(), out.status);
        String::from_utf8(out.stdout).expect("utf-8 path").trim().to_string()
    })
}

/// The manual clock's start in the engine tests (2027-01-15).
pub const START_S: i64 = 1_800_000_000;

/// One backend, ready for engine tests: herald on a manual clock, one tenant ("acme")
/// with 100 units granted on `quota_key`.
#[derive(Debug)]
pub struct Env {
    pub _db: TestDb,
    pub name: &'static str,
    pub herald: Herald,
    pub clock: herald::Clock,
    pub tenant: herald::TenantId,
    /// The `whsec_` secret `tenant_create` returned.
    pub secret: String,
}

/// An `Env` per backend of this run.
pub async fn envs(quota_key: &str) -> Vec<Env> {
    let mut envs = Vec::new();
    for db in backends().await {
        let clock = herald::Clock::manual(jiff::Timestamp::from_second(START_S).unwrap());
        let herald = db.herald().await.with_clock(clock.clone());
        let tenant = herald.tenant_create("acme").await.unwrap();
        herald.quota_grant(tenant.id, quota_key, 100, None).await.unwrap();
        envs.push(Env {
            name: db.name(),
            _db: db,
            herald,
            clock,
            tenant: tenant.id,
            secret: tenant.webhook_secret,
        });
    }
    envs
}

/// A channel that records the operation key of every send and answers `Sent`.
#[derive(Default)]
pub struct Sends(pub std::sync::Mutex<Vec<String>>);

impl herald::Channel for Sends {
    fn send<'a>(&'a self, d: &'a herald::Leased) -> herald::BoxFuture<'a, herald::Outcome> {
        Box::pin(async move {
            self.0.lock().unwrap().push(d.operation_key.clone());
            herald::Outcome::Sent
        })
    }
}

/// A traceparent case for the SQL API: (operation key, what the caller sets, what herald
/// keeps beside the payload).
pub type TraceCase = (&'static str, Option<String>, Option<String>);

/// The SQL API's traceparent cases every backend shares, then `own` (what a backend's
/// setting does between submits): kept as given, a later version kept by its first 55
/// characters, an upper-case one and a version 00 longer than 55 ignored.
pub fn traceparent_cases(own: TraceCase) -> Vec<TraceCase> {
    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_string();
    let later = format!("cc{}", &tp[2..]);
    vec![
        ("traced", Some(tp.clone()), Some(tp.clone())),
        own,
        ("later-version", Some(format!("{later}-what-comes-next")), Some(later)),
        ("upper-case", Some(tp.to_uppercase()), None),
        ("version-00-too-long", Some(format!("{tp}-x")), None),
    ]
}
