//! SQL routines as files: each function or procedure of the SQL API has one home, a file
//! under `routines/<backend>/`, and `migrate` runs a file again whenever its text changes.
//!
//! A migration is history: once applied it never changes (sqlx checks its checksum), so
//! a routine redefined by migration after migration had its current text only in the last
//! one that touched it. Here a change to a routine is an edit of its file. Migrations run
//! first (they make the tables a routine reads), then every file whose SHA-256 differs from
//! the one `herald_routines` recorded for its name, each recorded as soon as it ran, all
//! under the migration lock. Every file is written to be run again (`CREATE OR REPLACE`).
//! A routine change that an older herald must not undo comes with a migration too (the
//! schema version), since a build refuses a database newer than itself before this runs.

use crate::mysql::dialect::Flavor;
use sha2::{Digest, Sha256};
use sqlx::{AssertSqlSafe, Row};

/// (name, SQL) per backend, in the order they run. SQLite has no routines.
const POSTGRES: &[(&str, &str)] = &[
    ("text", include_str!("../routines/postgres/text.sql")),
    ("quota", include_str!("../routines/postgres/quota.sql")),
    ("submit", include_str!("../routines/postgres/submit.sql")),
];
const MYSQL: &[(&str, &str)] = &[
    ("utf8", include_str!("../routines/mysql/utf8.sql")),
    ("text", include_str!("../routines/mysql/text.sql")),
    ("quota", include_str!("../routines/mysql/quota.sql")),
    ("submit", include_str!("../routines/mysql/submit.sql")),
    ("receipt", include_str!("../routines/mysql/receipt.sql")),
    ("wake", include_str!("../routines/mysql/wake.sql")),
];

fn checksum(sql: &str) -> Vec<u8> {
    Sha256::digest(sql.as_bytes()).to_vec()
}

/// Runs every PostgreSQL routine file whose text changed, on the migrating connection.
pub(crate) async fn apply_postgres(conn: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    let recorded: Vec<(String, Vec<u8>)> =
        sqlx::query("SELECT name, checksum FROM herald_routines")
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<_, sqlx::Error>>()?;
    for (name, sql) in POSTGRES {
        let sum = checksum(sql);
        if recorded.iter().any(|(n, s)| n == name && *s == sum) {
            continue;
        }
        // One transaction: the routine and its record change together.
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        sqlx::raw_sql(AssertSqlSafe(*sql)).execute(&mut *tx).await?;
        sqlx::query(
            "INSERT INTO herald_routines (name, checksum) VALUES ($1, $2)
             ON CONFLICT (name) DO UPDATE SET checksum = EXCLUDED.checksum, applied_at = now()",
        )
        .bind(*name)
        .bind(&sum)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        tracing::info!(routine = *name, "applied a routine's new text");
    }
    Ok(())
}

/// Runs every MariaDB routine file whose text (as this server runs it) changed. DDL
/// commits implicitly, so a routine is recorded after it ran: a process that dies in
/// between leaves it unrecorded, and the next migration runs it again.
pub(crate) async fn apply_mysql(
    conn: &mut sqlx::MySqlConnection,
    flavor: Flavor,
) -> Result<(), sqlx::Error> {
    let recorded: Vec<(String, Vec<u8>)> =
        sqlx::query("SELECT name, checksum FROM herald_routines")
            .fetch_all(&mut *conn)
            .await?
            .iter()
            .map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .collect::<Result<_, sqlx::Error>>()?;
    let mut applied = false;
    for (name, sql) in MYSQL {
        let sql = flavor.migration_sql(sql);
        let sum = checksum(&sql);
        if recorded.iter().any(|(n, s)| n == name && *s == sum) {
            continue;
        }
        applied = true;
        sqlx::raw_sql(AssertSqlSafe(sql.into_owned())).execute(&mut *conn).await?;
        sqlx::query(
            "INSERT INTO herald_routines (name, checksum) VALUES (?, ?)
             ON DUPLICATE KEY UPDATE checksum = VALUES(checksum), applied_at = CURRENT_TIMESTAMP(3)",
        )
        .bind(*name)
        .bind(&sum)
        .execute(&mut *conn)
        .await?;
        tracing::info!(routine = *name, "applied a routine's new text");
    }
    if applied && flavor == Flavor::MariaDb {
        crate::sql_api::mysql_grant_again(conn).await?;
    }
    Ok(())
}
