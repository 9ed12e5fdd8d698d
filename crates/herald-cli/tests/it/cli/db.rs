//! The CLI tests' databases: an SQLite file, a PostgreSQL schema or a MariaDB database per
//! test, with the few reads the tests make of each.

pub(super) use crate::support::postgres_url;
use herald::sqlx::sqlite::SqliteConnectOptions;
use herald::sqlx::{self, Connection, PgConnection, Row, SqliteConnection};
use std::path::{Path, PathBuf};

/// One empty database for one test: an SQLite file in its own directory, a fresh
/// PostgreSQL schema or a fresh MariaDB database (each dropped on drop).
pub(super) enum TestDb {
    Sqlite { _dir: tempfile::TempDir, path: PathBuf },
    Postgres { base: String, schema: String, url: String },
    MySql(crate::support::MyDatabase),
}

impl TestDb {
    pub(super) fn sqlite() -> TestDb {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("new.db");
        TestDb::Sqlite { _dir: dir, path }
    }

    pub(super) async fn postgres(base: &str) -> TestDb {
        let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
        let mut conn = PgConnection::connect(base)
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {base} is unreachable: {e}"));
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&mut conn)
            .await
            .expect("create schema");
        conn.close().await.ok();
        let sep = if base.contains('?') { '&' } else { '?' };
        let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
        TestDb::Postgres { base: base.to_string(), schema, url }
    }

    /// SQLite always; PostgreSQL and MariaDB too when they are configured.
    pub(super) async fn all() -> Vec<TestDb> {
        let mut dbs = vec![TestDb::sqlite()];
        if let Some(base) = postgres_url() {
            dbs.push(TestDb::postgres(&base).await);
        }
        if let Some(base) = crate::support::mysql_url() {
            dbs.push(TestDb::MySql(crate::support::MyDatabase::create(&base).await));
        }
        dbs
    }

    pub(super) fn name(&self) -> &'static str {
        match self {
            TestDb::Sqlite { .. } => "sqlite",
            TestDb::Postgres { .. } => "postgres",
            TestDb::MySql(_) => "mysql",
        }
    }

    /// The value to pass as `--db`.
    pub(super) fn url(&self) -> String {
        match self {
            TestDb::Sqlite { path, .. } => path.display().to_string(),
            TestDb::Postgres { url, .. } => url.clone(),
            TestDb::MySql(db) => db.url.clone(),
        }
    }

    /// Records version 999 in `herald_migrations`, as a newer herald would have.
    pub(super) async fn record_future_migration(&self) {
        const SQL: &str = "INSERT INTO herald_migrations \
                           (version, description, success, checksum, execution_time) \
                           VALUES (999, 'from a newer herald', TRUE, $1, 1)";
        let checksum = vec![0xa5_u8; 48];
        match self {
            TestDb::Sqlite { path, .. } => {
                let mut c = sqlite_open(path, false).await;
                sqlx::query(SQL).bind(checksum).execute(&mut c).await.expect(SQL);
                c.close().await.expect("close");
            }
            TestDb::Postgres { url, .. } => {
                let mut c = PgConnection::connect(url).await.expect("connect");
                sqlx::query(SQL).bind(checksum).execute(&mut c).await.expect(SQL);
                c.close().await.expect("close");
            }
            TestDb::MySql(db) => {
                let mut c = sqlx::MySqlConnection::connect(&db.url).await.expect("connect");
                let sql = SQL.replace("$1", "?");
                let q = sqlx::query(sqlx::AssertSqlSafe(sql));
                q.bind(checksum).execute(&mut c).await.expect(SQL);
                c.close().await.expect("close");
            }
        }
    }

    /// The tables in the database (in the test's schema on PostgreSQL), sorted.
    pub(super) async fn tables(&self) -> Vec<String> {
        match self {
            TestDb::Sqlite { path, .. } => sqlite_master(path).await,
            TestDb::Postgres { url, .. } => {
                let mut c = PgConnection::connect(url).await.expect("connect");
                let names = sqlx::query_scalar::<_, String>(
                    "SELECT table_name::text FROM information_schema.tables \
                     WHERE table_schema = current_schema() ORDER BY 1",
                )
                .fetch_all(&mut c)
                .await
                .expect("list tables");
                c.close().await.expect("close");
                names
            }
            TestDb::MySql(db) => {
                let mut c = sqlx::MySqlConnection::connect(&db.url).await.expect("connect");
                let names = sqlx::query_scalar::<_, String>(
                    "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
                     WHERE table_schema = DATABASE() ORDER BY 1",
                )
                .fetch_all(&mut c)
                .await
                .expect("list tables");
                c.close().await.expect("close");
                names
            }
        }
    }

    /// Every row of `herald_migrations`, every column, rendered as text.
    pub(super) async fn migration_rows(&self) -> Vec<String> {
        const SQLITE: &str = "SELECT version, description, CAST(installed_on AS TEXT), success, \
                              checksum, execution_time FROM herald_migrations ORDER BY version";
        const POSTGRES: &str = "SELECT version, description, installed_on::text, success, \
                                checksum, execution_time FROM herald_migrations ORDER BY version";
        const MYSQL: &str = "SELECT version, description, CAST(installed_on AS CHAR), success, \
                             checksum, execution_time FROM herald_migrations ORDER BY version";
        fn render(version: i64, d: String, at: String, ok: bool, sum: Vec<u8>, t: i64) -> String {
            format!("{version}|{d}|{at}|{ok}|{sum:02x?}|{t}")
        }
        match self {
            TestDb::Sqlite { path, .. } => {
                let mut c = sqlite_open(path, false).await;
                let rows = sqlx::query(SQLITE).fetch_all(&mut c).await.expect("migration rows");
                c.close().await.expect("close");
                rows.iter()
                    .map(|r| render(r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)))
                    .collect()
            }
            TestDb::Postgres { url, .. } => {
                let mut c = PgConnection::connect(url).await.expect("connect");
                let rows = sqlx::query(POSTGRES).fetch_all(&mut c).await.expect("migration rows");
                c.close().await.expect("close");
                rows.iter()
                    .map(|r| render(r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)))
                    .collect()
            }
            TestDb::MySql(db) => {
                let mut c = sqlx::MySqlConnection::connect(&db.url).await.expect("connect");
                let rows = sqlx::query(MYSQL).fetch_all(&mut c).await.expect("migration rows");
                c.close().await.expect("close");
                rows.iter()
                    .map(|r| render(r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5)))
                    .collect()
            }
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let TestDb::Postgres { base, schema, .. } = self else { return };
        let (base, schema) = (base.clone(), schema.clone());
        // Drop runs outside any runtime we could borrow: use a small one of our own.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async move {
                if let Ok(mut conn) = PgConnection::connect(&base).await {
                    let sql = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
                    let _ = conn.close().await;
                }
            });
        })
        .join();
    }
}

pub(super) async fn sqlite_open(path: &Path, create: bool) -> SqliteConnection {
    let options = SqliteConnectOptions::new().filename(path).create_if_missing(create);
    SqliteConnection::connect_with(&options)
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// `SELECT name FROM sqlite_master`, sorted.
pub(super) async fn sqlite_master(path: &Path) -> Vec<String> {
    let mut c = sqlite_open(path, false).await;
    let names = sqlx::query_scalar::<_, String>("SELECT name FROM sqlite_master ORDER BY name")
        .fetch_all(&mut c)
        .await
        .expect("read sqlite_master");
    c.close().await.expect("close");
    names
}

/// Sets the `email` account's granted and available totals, on stripe 0, the others emptied
/// (the limit is 9,008 grants away otherwise).
pub(super) async fn set_granted(db: &TestDb, tenant: &str, granted: i64) {
    let tenant = uuid::Uuid::try_parse(tenant).unwrap();
    match db {
        TestDb::Sqlite { path, .. } => {
            let mut conn = sqlite_open(path, false).await;
            sqlx::query(
                "UPDATE quota_accounts SET granted = ?1, available = ?1 WHERE tenant_id = ?2 AND stripe = 0",
            )
            .bind(granted)
            .bind(tenant)
            .execute(&mut conn)
            .await
            .unwrap();
        }
        TestDb::Postgres { url, .. } => {
            let mut conn = PgConnection::connect(url).await.unwrap();
            sqlx::query(
                "UPDATE quota_accounts SET granted = CASE WHEN stripe = 0 THEN $1 ELSE 0 END,
                     available = CASE WHEN stripe = 0 THEN $1 ELSE 0 END WHERE tenant_id = $2",
            )
            .bind(granted)
            .bind(tenant)
            .execute(&mut conn)
            .await
            .unwrap();
        }
        TestDb::MySql(db) => {
            let mut conn = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
            sqlx::query(
                "UPDATE quota_accounts SET granted = IF(stripe = 0, ?, 0),
                     available = IF(stripe = 0, ?, 0) WHERE tenant_id = ?",
            )
            .bind(granted)
            .bind(granted)
            .bind(tenant)
            .execute(&mut conn)
            .await
            .unwrap();
        }
    }
}
