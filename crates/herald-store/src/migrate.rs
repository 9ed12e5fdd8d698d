//! Forward-only schema migrations, one numbered SQL file per change and per backend,
//! embedded in the binary. Applied by `herald migrate` and on every start.
//!
//! Bookkeeping lives in `herald_migrations` (not sqlx's default table name), so an
//! application that keeps its own sqlx migrations in the same database is not confused.
//! A database migrated by a newer herald is refused before anything is written.

use crate::error::StoreError;
use crate::store::{Backend, Store};
use sqlx::SqlSafeStr;
use sqlx::migrate::{MigrateError, Migration, MigrationType, Migrator};
use std::borrow::Cow;

const TABLE: &str = "herald_migrations";

/// (version, description, SQL) per backend, in order.
const SQLITE: &[(i64, &str, &str)] = &[
    (1, "foundation", include_str!("../migrations/sqlite/0001_foundation.sql")),
    (2, "engine", include_str!("../migrations/sqlite/0002_engine.sql")),
    (3, "attempt on row", include_str!("../migrations/sqlite/0003_attempt_on_row.sql")),
];
const POSTGRES: &[(i64, &str, &str)] = &[
    (1, "foundation", include_str!("../migrations/postgres/0001_foundation.sql")),
    (2, "engine", include_str!("../migrations/postgres/0002_engine.sql")),
    (3, "attempt on row", include_str!("../migrations/postgres/0003_attempt_on_row.sql")),
    (4, "inline ms", include_str!("../migrations/postgres/0004_inline_ms.sql")),
];

/// The newest schema version this build knows.
pub fn schema_version_known(backend: Backend) -> i64 {
    files(backend).iter().map(|(v, _, _)| *v).max().unwrap_or(0)
}

fn files(backend: Backend) -> &'static [(i64, &'static str, &'static str)] {
    match backend {
        Backend::Sqlite => SQLITE,
        Backend::Postgres => POSTGRES,
    }
}

fn migrator(backend: Backend) -> Migrator {
    let migrations = files(backend)
        .iter()
        .map(|(version, description, sql)| {
            Migration::new(
                *version,
                Cow::Borrowed(*description),
                MigrationType::Simple,
                sql.into_sql_str(),
                false,
            )
        })
        .collect::<Vec<_>>();
    Migrator {
        migrations: Cow::Owned(migrations),
        table_name: Cow::Borrowed(TABLE),
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
    pub async fn migrate(&self) -> Result<MigrateReport, StoreError> {
        let backend = self.backend();
        let known = schema_version_known(backend);
        let before = self.schema_versions().await.unwrap_or_default();
        let result = match (self.sqlite_pool(), self.postgres_pool()) {
            (Some(p), _) => migrator(backend).run(p).await,
            (_, Some(p)) => migrator(backend).run(p).await,
            (None, None) => Ok(()),
        };
        match result {
            Ok(()) => {}
            Err(MigrateError::VersionMissing(found)) => {
                return Err(StoreError::SchemaNewer { found, known });
            }
            Err(source) => {
                return Err(StoreError::Migrate { target: self.target().to_string(), source });
            }
        }
        let after = self.schema_versions().await?;
        let applied = after.iter().copied().filter(|v| !before.contains(v)).collect();
        Ok(MigrateReport { applied, version: after.iter().copied().max().unwrap_or(0) })
    }

    /// Versions recorded as applied (an error if the bookkeeping table does not exist).
    pub async fn schema_versions(&self) -> Result<Vec<i64>, StoreError> {
        const SQL: &str = "SELECT version FROM herald_migrations WHERE success ORDER BY version";
        let versions = match (self.sqlite_pool(), self.postgres_pool()) {
            (Some(p), _) => sqlx::query_scalar::<_, i64>(SQL).fetch_all(p).await?,
            (_, Some(p)) => sqlx::query_scalar::<_, i64>(SQL).fetch_all(p).await?,
            (None, None) => Vec::new(),
        };
        Ok(versions)
    }
}
