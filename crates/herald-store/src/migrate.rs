//! Forward-only schema migrations, one numbered SQL file per change and per backend,
//! embedded in the binary. Applied by `herald migrate` and on every start.
//!
//! Bookkeeping lives in `herald_migrations` (not sqlx's default table name), so an
//! application that keeps its own sqlx migrations in the same database is not confused.
//! A database migrated by a newer herald is refused before anything is written. After the
//! migrations, under the same lock, the SQL API's routines whose text changed are run
//! again (`routines`).

use crate::error::StoreError;
use crate::mysql::dialect::Flavor;
use crate::store::{Backend, Store};
use sqlx::migrate::{MigrateError, Migration, MigrationType, Migrator};
use sqlx::{AssertSqlSafe, SqlSafeStr};
use std::borrow::Cow;

const TABLE: &str = "herald_migrations";
const VERSIONS: &str = "SELECT version FROM herald_migrations WHERE success ORDER BY version";

/// (version, description, SQL) per backend, in order.
const SQLITE: &[(i64, &str, &str)] = &[
    (1, "foundation", include_str!("../migrations/sqlite/0001_foundation.sql")),
    (2, "engine", include_str!("../migrations/sqlite/0002_engine.sql")),
    (3, "attempt on row", include_str!("../migrations/sqlite/0003_attempt_on_row.sql")),
    (4, "fingerprint v2", include_str!("../migrations/sqlite/0004_fingerprint_v2.sql")),
    (5, "operators", include_str!("../migrations/sqlite/0005_operators.sql")),
    (6, "striped accounts", include_str!("../migrations/sqlite/0006_striped_accounts.sql")),
    (7, "secrets", include_str!("../migrations/sqlite/0007_secrets.sql")),
    (8, "ui sessions", include_str!("../migrations/sqlite/0008_ui_sessions.sql")),
    (9, "audit", include_str!("../migrations/sqlite/0009_audit.sql")),
    (10, "holds", include_str!("../migrations/sqlite/0010_holds.sql")),
    (11, "viewers", include_str!("../migrations/sqlite/0011_viewers.sql")),
    (12, "lanes", include_str!("../migrations/sqlite/0012_lanes.sql")),
    (13, "traces", include_str!("../migrations/sqlite/0013_traces.sql")),
    (14, "wake targets", include_str!("../migrations/sqlite/0014_wake_targets.sql")),
];
const POSTGRES: &[(i64, &str, &str)] = &[
    (1, "foundation", include_str!("../migrations/postgres/0001_foundation.sql")),
    (2, "engine", include_str!("../migrations/postgres/0002_engine.sql")),
    (3, "attempt on row", include_str!("../migrations/postgres/0003_attempt_on_row.sql")),
    (4, "inline ms", include_str!("../migrations/postgres/0004_inline_ms.sql")),
    (5, "fingerprint v2", include_str!("../migrations/postgres/0005_fingerprint_v2.sql")),
    (6, "sql api", include_str!("../migrations/postgres/0006_sql_api.sql")),
    (7, "sql api fixes", include_str!("../migrations/postgres/0007_sql_api_fixes.sql")),
    (8, "sql submit lean", include_str!("../migrations/postgres/0008_sql_submit_lean.sql")),
    (9, "operators", include_str!("../migrations/postgres/0009_operators.sql")),
    (10, "routines", include_str!("../migrations/postgres/0010_routines.sql")),
    (11, "striped accounts", include_str!("../migrations/postgres/0011_striped_accounts.sql")),
    (12, "secrets", include_str!("../migrations/postgres/0012_secrets.sql")),
    (13, "reservation on row", include_str!("../migrations/postgres/0013_reservation_on_row.sql")),
    (14, "ui sessions", include_str!("../migrations/postgres/0014_ui_sessions.sql")),
    (15, "audit", include_str!("../migrations/postgres/0015_audit.sql")),
    (16, "holds", include_str!("../migrations/postgres/0016_holds.sql")),
    (17, "viewers", include_str!("../migrations/postgres/0017_viewers.sql")),
    (18, "lanes", include_str!("../migrations/postgres/0018_lanes.sql")),
    (19, "traces", include_str!("../migrations/postgres/0019_traces.sql")),
    (20, "settle on row", include_str!("../migrations/postgres/0020_settle_on_row.sql")),
    (21, "wake targets", include_str!("../migrations/postgres/0021_wake_targets.sql")),
    (22, "payload lz4", include_str!("../migrations/postgres/0022_payload_lz4.sql")),
];
/// MariaDB started at the other backends' current schema. DDL commits implicitly, so each
/// file is written to be run again from the top (`IF NOT EXISTS`): see `migrate_mysql`.
const MYSQL: &[(i64, &str, &str)] = &[
    (1, "schema", include_str!("../migrations/mysql/0001_schema.sql")),
    (2, "sql api", include_str!("../migrations/mysql/0002_sql_api.sql")),
    (3, "operators", include_str!("../migrations/mysql/0003_operators.sql")),
    (4, "routines", include_str!("../migrations/mysql/0004_routines.sql")),
    (5, "striped accounts", include_str!("../migrations/mysql/0005_striped_accounts.sql")),
    (6, "client fingerprint", include_str!("../migrations/mysql/0006_client_fingerprint.sql")),
    (7, "secrets", include_str!("../migrations/mysql/0007_secrets.sql")),
    (8, "ui sessions", include_str!("../migrations/mysql/0008_ui_sessions.sql")),
    (9, "audit", include_str!("../migrations/mysql/0009_audit.sql")),
    (10, "holds", include_str!("../migrations/mysql/0010_holds.sql")),
    (11, "viewers", include_str!("../migrations/mysql/0011_viewers.sql")),
    (12, "lanes", include_str!("../migrations/mysql/0012_lanes.sql")),
    (13, "traces", include_str!("../migrations/mysql/0013_traces.sql")),
    (14, "wake targets", include_str!("../migrations/mysql/0014_wake_targets.sql")),
    (15, "lazy fingerprint", include_str!("../migrations/mysql/0015_lazy_fingerprint.sql")),
];

/// The newest schema version this build knows.
pub fn schema_version_known(backend: Backend) -> i64 {
    files(backend).iter().map(|(v, _, _)| *v).max().unwrap_or(0)
}

fn files(backend: Backend) -> &'static [(i64, &'static str, &'static str)] {
    match backend {
        Backend::Sqlite => SQLITE,
        Backend::Postgres => POSTGRES,
        Backend::MySql => MYSQL,
    }
}

/// The migrations as this store's server runs them: the files as they are, but on MySQL
/// with MariaDB's names rewritten (`mysql::dialect`).
fn migrator(backend: Backend, flavor: Option<Flavor>) -> Migrator {
    let migrations = files(backend)
        .iter()
        .map(|(version, description, sql)| {
            let sql = match flavor.map(|f| f.migration_sql(sql)) {
                Some(Cow::Owned(rewritten)) => AssertSqlSafe(rewritten).into_sql_str(),
                _ => sql.into_sql_str(),
            };
            Migration::new(*version, Cow::Borrowed(*description), MigrationType::Simple, sql, false)
        })
        .collect::<Vec<_>>();
    Migrator {
        migrations: Cow::Owned(migrations),
        table_name: Cow::Borrowed(TABLE),
        // `Store::migrate` holds a lock of its own across the whole check and apply.
        locking: false,
        ..Migrator::DEFAULT
    }
}

/// What `migrate` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrateReport {
    /// Versions applied by this call, in order (empty: already current).
    pub applied: Vec<i64>,
    /// The schema version after the call.
    pub version: i64,
}

impl Store {
    /// Applies every migration this build has and the database lacks.
    ///
    /// Safe when several processes start on one database at once: the check and the apply
    /// run under one lock across processes, so the first applies and the others, waiting
    /// for it, find nothing left to do (and report nothing applied). On SQLite the lock is
    /// the write lock, taken by `BEGIN IMMEDIATE` (waiting up to the busy timeout), and
    /// every pending migration commits in that one transaction; on PostgreSQL it is a
    /// session advisory lock held by the migrating connection.
    pub async fn migrate(&self) -> Result<MigrateReport, StoreError> {
        let backend = self.backend();
        let flavor = self.mysql_flavor();
        let migrator = migrator(backend, flavor);
        let result = match (self.sqlite_pool(), self.postgres_pool(), self.mysql_pool()) {
            (Some(p), _, _) => migrate_sqlite(p, &migrator).await,
            (_, Some(p), _) => migrate_postgres(p, &migrator).await,
            (_, _, Some(p)) => migrate_mysql(p, flavor, &migrator).await,
            _ => Ok((Vec::new(), Vec::new())),
        };
        let (before, after) = match result {
            Ok(versions) => versions,
            Err(Failed::Database(e)) => return Err(StoreError::Database(e)),
            Err(Failed::Migrate(MigrateError::VersionMissing(found))) => {
                return Err(StoreError::SchemaNewer {
                    found,
                    known: schema_version_known(backend),
                });
            }
            Err(Failed::Migrate(source)) => {
                return Err(StoreError::Migrate { target: self.target().to_string(), source });
            }
        };
        let applied = after.iter().copied().filter(|v| !before.contains(v)).collect();
        Ok(MigrateReport { applied, version: after.iter().copied().max().unwrap_or(0) })
    }

    /// Versions recorded as applied (an error if the bookkeeping table does not exist).
    pub async fn schema_versions(&self) -> Result<Vec<i64>, StoreError> {
        let versions = match (self.sqlite_pool(), self.postgres_pool(), self.mysql_pool()) {
            (Some(p), _, _) => sqlx::query_scalar::<_, i64>(VERSIONS).fetch_all(p).await?,
            (_, Some(p), _) => sqlx::query_scalar::<_, i64>(VERSIONS).fetch_all(p).await?,
            (_, _, Some(p)) => sqlx::query_scalar::<_, i64>(VERSIONS).fetch_all(p).await?,
            _ => Vec::new(),
        };
        Ok(versions)
    }
}

/// Why a migration under the lock failed: the database (taking the lock, reading the
/// bookkeeping) or the migrator (a newer schema, a migration that failed).
enum Failed {
    Database(sqlx::Error),
    Migrate(MigrateError),
}

impl From<sqlx::Error> for Failed {
    fn from(e: sqlx::Error) -> Self {
        Failed::Database(e)
    }
}

/// The versions recorded before and after migrating, all in one `BEGIN IMMEDIATE`
/// transaction: a second process's BEGIN waits (its busy timeout) until the first has
/// committed, then reads the versions that one wrote. sqlx's migrator takes no lock on
/// SQLite, and runs each migration in a transaction of its own — inside this one, a
/// savepoint — so nothing commits until every pending migration has been applied.
async fn migrate_sqlite(
    pool: &sqlx::SqlitePool,
    migrator: &Migrator,
) -> Result<(Vec<i64>, Vec<i64>), Failed> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let exists: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1)",
    )
    .bind(TABLE)
    .fetch_one(&mut *tx)
    .await?;
    let before = if exists { versions_sqlite(&mut tx).await? } else { Vec::new() };
    // A failure drops `tx`, which rolls everything back.
    migrator.run_direct(None, &mut *tx, false).await.map_err(Failed::Migrate)?;
    let after = versions_sqlite(&mut tx).await?;
    tx.commit().await?;
    Ok((before, after))
}

/// The advisory lock key: "herald" in ASCII, a number no other application's lock is
/// likely to use. One key for the whole database: migrations of several herald schemas in
/// one database wait for each other, which costs nothing.
const POSTGRES_MIGRATE_LOCK: i64 = i64::from_be_bytes(*b"\0\0herald");

/// The versions recorded before and after migrating, under a session advisory lock on one
/// connection: a second process waits for the first to finish, then reads what it wrote.
/// (sqlx's migrator would take an advisory lock of its own, but only around its own work,
/// not around the versions read before it.) A connection whose migration failed is closed
/// rather than pooled, so the lock never outlives the failure.
async fn migrate_postgres(
    pool: &sqlx::PgPool,
    migrator: &Migrator,
) -> Result<(Vec<i64>, Vec<i64>), Failed> {
    let mut conn = pool.acquire().await?;
    let result = async {
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(POSTGRES_MIGRATE_LOCK)
            .execute(&mut *conn)
            .await?;
        create_schema_postgres(&mut conn).await?;
        let exists: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
            .bind(TABLE)
            .fetch_one(&mut *conn)
            .await?;
        let before = if exists { versions_postgres(&mut conn).await? } else { Vec::new() };
        migrator.run_direct(None, &mut *conn, false).await.map_err(Failed::Migrate)?;
        crate::routines::apply_postgres(&mut conn).await?;
        let after = versions_postgres(&mut conn).await?;
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(POSTGRES_MIGRATE_LOCK)
            .execute(&mut *conn)
            .await?;
        Ok((before, after))
    }
    .await;
    if result.is_err() {
        crate::tx::discard(conn);
    }
    result
}

/// Creates herald's schema when the connection's `search_path` names one that does not
/// exist yet (`?options=-c search_path=herald` on a fresh database), so that `herald
/// migrate` works as the README gives it; PostgreSQL would otherwise answer "no schema has
/// been selected to create in". The schema is the path's first entry (`$user` is the
/// session's user), created by the migrating role, which then owns it.
async fn create_schema_postgres(conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    let current: Option<String> =
        sqlx::query_scalar("SELECT current_schema()").fetch_one(&mut *conn).await?;
    if current.is_some() {
        return Ok(());
    }
    // The first entry as PostgreSQL reads it: parse_ident takes a quoted name whole.
    let created: Option<String> = sqlx::query_scalar(
        "SELECT s.name FROM (
             SELECT CASE WHEN first = '\"$user\"' OR first = '$user' THEN session_user::text
                         ELSE (parse_ident(first))[1] END AS name
               FROM (SELECT btrim(split_part(current_setting('search_path'), ',', 1)) AS first) f
              WHERE first <> ''
         ) s",
    )
    .fetch_optional(&mut *conn)
    .await?
    .flatten();
    let Some(name) = created else { return Ok(()) };
    let sql: String =
        sqlx::query_scalar("SELECT format('CREATE SCHEMA IF NOT EXISTS %I', $1::text)")
            .bind(&name)
            .fetch_one(&mut *conn)
            .await?;
    sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut *conn).await?;
    tracing::info!(schema = %name, "created herald's schema (the search_path's first entry)");
    Ok(())
}

/// The sql_mode migrations run in (both servers know these modes): strict, and nothing
/// that changes how a routine's text reads (no ANSI_QUOTES, no NO_BACKSLASH_ESCAPES, no
/// PIPES_AS_CONCAT, which sqlx adds to every connection).
const MIGRATION_SQL_MODE: &str = "SET SESSION sql_mode = 'STRICT_TRANS_TABLES,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'";

/// The versions recorded before and after migrating, under a named lock (`GET_LOCK`, held
/// by this one connection; the server frees it if the connection dies) so that a second
/// process waits for the first, then reads what it wrote. The lock is per database: one
/// name per herald database on the server.
///
/// DDL commits implicitly, so a migration is not one transaction: sqlx records it as
/// failed (`success = FALSE`) before running it and as done after. A process that died in
/// between leaves that row behind, and sqlx refuses to go on ("dirty"); every MariaDB
/// migration is written to be run again from its top, so the row is removed and the
/// migration run again, to its end — never skipped.
async fn migrate_mysql(
    pool: &sqlx::MySqlPool,
    flavor: Option<Flavor>,
    migrator: &Migrator,
) -> Result<(Vec<i64>, Vec<i64>), Failed> {
    let flavor = flavor.unwrap_or(Flavor::MariaDb);
    let mut conn = pool.acquire().await?;
    let result = async {
        // The server's session defaults (a transaction of herald's may have left its bounds
        // on this connection), no statement bound while a migration runs, and one sql_mode
        // whatever the server's default: a routine keeps the mode it was created with.
        sqlx::raw_sql(flavor.session_defaults()).execute(&mut *conn).await?;
        sqlx::raw_sql(flavor.unbounded_statements()).execute(&mut *conn).await?;
        sqlx::raw_sql(MIGRATION_SQL_MODE).execute(&mut *conn).await?;
        let locked: Option<i64> =
            sqlx::query_scalar("SELECT GET_LOCK(CONCAT('herald_migrate:', DATABASE()), 31536000)")
                .fetch_one(&mut *conn)
                .await?;
        if locked != Some(1) {
            return Err(Failed::Database(crate::tx::timed_out("the migration lock")));
        }
        let tables: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.tables
             WHERE table_schema = DATABASE() AND table_name = ?",
        )
        .bind(TABLE)
        .fetch_one(&mut *conn)
        .await?;
        let before = if tables > 0 { versions_mysql(&mut conn).await? } else { Vec::new() };
        let mut ran = migrator.run_direct(None, &mut *conn, false).await;
        if let Err(MigrateError::Dirty(version)) = ran {
            tracing::warn!(version, "finishing a migration a process left half-applied");
            sqlx::query("DELETE FROM herald_migrations WHERE version = ? AND NOT success")
                .bind(version)
                .execute(&mut *conn)
                .await?;
            ran = migrator.run_direct(None, &mut *conn, false).await;
        }
        ran.map_err(Failed::Migrate)?;
        crate::routines::apply_mysql(&mut conn, flavor).await?;
        let after = versions_mysql(&mut conn).await?;
        sqlx::query("SELECT RELEASE_LOCK(CONCAT('herald_migrate:', DATABASE()))")
            .execute(&mut *conn)
            .await?;
        Ok((before, after))
    }
    .await;
    // Never back to the pool: its session has the migration's sql_mode, not sqlx's.
    crate::tx::discard(conn);
    result
}

async fn versions_mysql(conn: &mut sqlx::MySqlConnection) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(VERSIONS).fetch_all(conn).await
}

async fn versions_sqlite(conn: &mut sqlx::SqliteConnection) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(VERSIONS).fetch_all(conn).await
}

async fn versions_postgres(conn: &mut sqlx::PgConnection) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(VERSIONS).fetch_all(conn).await
}
