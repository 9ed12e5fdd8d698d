//! The databases the process tests share between `herald` processes: one fresh
//! PostgreSQL schema or MariaDB database per test, dropped at the end, and the few reads
//! the tests make of them.

use super::*;

// ---------------------------------------------------------------------------------------
// PostgreSQL: one fresh schema per test, dropped at the end

/// The PostgreSQL base URL, if set (required when `CI` is set).
pub fn postgres_url() -> Option<String> {
    match std::env::var(POSTGRES_ENV) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but {POSTGRES_ENV} is not: PostgreSQL tests must run in CI")
        }
        _ => None,
    }
}

/// The MariaDB server URL, if set (required when `CI` is set).
pub fn mysql_url() -> Option<String> {
    match std::env::var(MYSQL_ENV) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but {MYSQL_ENV} is not: MariaDB tests must run in CI")
        }
        _ => None,
    }
}

/// A database `t_<uuid>` on the MariaDB server, dropped with the value.
pub struct MyDatabase {
    pub base: String,
    pub name: String,
    /// `--db` for herald.
    pub url: String,
}

impl MyDatabase {
    pub async fn create(base: &str) -> MyDatabase {
        let name = format!("t_{}", uuid::Uuid::now_v7().simple());
        let mut conn = sqlx::MySqlConnection::connect(base)
            .await
            .unwrap_or_else(|e| panic!("MariaDB at {base} is unreachable: {e}"));
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .expect("create database");
        conn.close().await.ok();
        let (head, _) = base.rsplit_once('/').expect("a MariaDB URL has a path");
        MyDatabase { base: base.to_string(), url: format!("{head}/{name}"), name }
    }
}

impl MyDatabase {
    /// Runs `sql` (any number of statements) on this database.
    pub async fn execute(&self, sql: &str) {
        let mut conn = sqlx::MySqlConnection::connect(&self.url).await.expect("connect");
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        conn.close().await.ok();
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

/// A database several `herald` processes share: a PostgreSQL schema, a MariaDB
/// database or a SQLite file, with the few reads the process tests make of it.
pub enum SharedDb {
    Postgres(PgSchema),
    MySql(MyDatabase),
    Sqlite(SqliteFile),
}

/// A fresh SQLite file in a directory of its own, removed with the value.
pub struct SqliteFile {
    pub dir: tempfile::TempDir,
    /// `--db` for herald.
    pub url: String,
}

impl SqliteFile {
    pub fn create() -> SqliteFile {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("herald.db").display());
        SqliteFile { dir, url }
    }

    async fn connect(&self) -> sqlx::SqliteConnection {
        sqlx::SqliteConnection::connect(&self.url).await.expect("open the SQLite file")
    }
}

impl SharedDb {
    pub fn url(&self) -> &str {
        match self {
            SharedDb::Postgres(s) => &s.url,
            SharedDb::MySql(d) => &d.url,
            SharedDb::Sqlite(f) => &f.url,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            SharedDb::Postgres(_) => "PostgreSQL",
            SharedDb::MySql(_) => "MariaDB",
            SharedDb::Sqlite(_) => "SQLite",
        }
    }

    /// One count, `sql` with `$1` bound to `arg` if given, on a fresh connection.
    pub async fn count(&self, sql: &str, arg: Option<&str>) -> i64 {
        match self {
            SharedDb::Postgres(s) => {
                let mut conn = s.connect().await;
                let mut q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.to_string()));
                if let Some(arg) = arg {
                    q = q.bind(arg.to_string());
                }
                let n = q.fetch_one(&mut conn).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
                conn.close().await.ok();
                n
            }
            SharedDb::MySql(d) => {
                let mut conn = sqlx::MySqlConnection::connect(&d.url).await.expect("connect");
                let sql = sql.replace("$1", "?");
                let mut q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.clone()));
                if let Some(arg) = arg {
                    q = q.bind(arg.to_string());
                }
                let n = q.fetch_one(&mut conn).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
                conn.close().await.ok();
                n
            }
            SharedDb::Sqlite(f) => {
                let mut conn = f.connect().await;
                let sql = sql.replace("$1", "?");
                let mut q = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql.clone()));
                if let Some(arg) = arg {
                    q = q.bind(arg.to_string());
                }
                let n = q.fetch_one(&mut conn).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
                conn.close().await.ok();
                n
            }
        }
    }

    /// Deliveries per state.
    pub async fn states(&self) -> BTreeMap<String, i64> {
        match self {
            SharedDb::Postgres(s) => {
                let mut conn = s.connect().await;
                let by_state = states(&mut conn).await;
                conn.close().await.ok();
                by_state
            }
            SharedDb::MySql(d) => {
                let mut conn = sqlx::MySqlConnection::connect(&d.url).await.expect("connect");
                let by_state = sqlx::query_as::<_, (String, i64)>(
                    "SELECT state, count(*) FROM deliveries GROUP BY state",
                )
                .fetch_all(&mut conn)
                .await
                .expect("count deliveries by state")
                .into_iter()
                .collect();
                conn.close().await.ok();
                by_state
            }
            SharedDb::Sqlite(f) => {
                let mut conn = f.connect().await;
                let by_state = sqlx::query_as::<_, (String, i64)>(
                    "SELECT state, count(*) FROM deliveries GROUP BY state",
                )
                .fetch_all(&mut conn)
                .await
                .expect("count deliveries by state")
                .into_iter()
                .collect();
                conn.close().await.ok();
                by_state
            }
        }
    }
}

pub struct PgSchema {
    pub base: String,
    pub schema: String,
    /// `--db` for herald: the base URL with `search_path` set to the schema.
    pub url: String,
}

impl PgSchema {
    pub async fn create(base: &str) -> PgSchema {
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
        PgSchema { base: base.to_string(), schema, url }
    }

    pub async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url).await.expect("connect to the test schema")
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        let (base, schema) = (self.base.clone(), self.schema.clone());
        // Drop cannot await: a small runtime of its own, on a thread of its own.
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

/// Deliveries per state, in the database.
pub async fn states(conn: &mut PgConnection) -> BTreeMap<String, i64> {
    sqlx::query_as::<_, (String, i64)>("SELECT state, count(*) FROM deliveries GROUP BY state")
        .fetch_all(conn)
        .await
        .expect("count deliveries by state")
        .into_iter()
        .collect()
}
