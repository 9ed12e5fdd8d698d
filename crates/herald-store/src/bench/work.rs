//! The work a database did, read from its cumulative counters: what `herald bench` prints
//! per delivery beside each rate, since these counts do not move with the machine's noise
//! (issue 34). Server-wide (or database-wide) counters, so the bench reads them with
//! nothing else running; the difference of two reads is one phase's work.
//!
//! PostgreSQL: WAL bytes (`pg_current_wal_lsn`), WAL records and full-page images
//! (`pg_stat_wal`), rows inserted, updated and deleted and transactions
//! (`pg_stat_database`: kept when a table is dropped, so a peer that recreates its tables
//! does not make a count go backwards), HOT updates (`pg_stat_user_tables`, summed), and
//! top-level statements (`pg_stat_statements`, when the server preloads it; otherwise
//! none), and pages read (`blks_hit` + `blks_read`: every buffer a statement looked at).
//! A session reports its statistics to these views at the end of a transaction at
//! most once a second, and otherwise only after ten idle seconds: the caller waits a
//! second ([`Work::SETTLE`]), and [`postgres_flush`] then runs a statement on each idle
//! connection of the pool, whose end makes each session report what it has pending.
//!
//! MariaDB: the redo log's bytes (`Innodb_os_log_written`), rows written, updated and
//! deleted through the storage engines (`Handler_write`, `_update`, `_delete`: MariaDB
//! 10.11 has no `Innodb_rows_*`; an internal temporary table's rows count too),
//! statements sent by clients (`Questions`: each statement of a multi-statement query,
//! not those a procedure runs), pages read (`Innodb_buffer_pool_read_requests`: every
//! page InnoDB looked at, from memory or disk), and explicit COMMITs and ROLLBACKs (an
//! autocommitted statement is not counted). On both servers a statement is not a round trip: herald's
//! BEGIN sends its session settings with it in one query.

use crate::error::StoreError;
use sqlx::mysql::MySqlConnection;
use sqlx::postgres::PgConnection;

/// Cumulative counters at one moment, or (from [`Work::since`]) what happened between two
/// moments. `None`: the backend has no such counter, or it is not enabled on the server.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Work {
    /// WAL (PostgreSQL) or redo log (MariaDB) bytes written.
    pub log_bytes: i64,
    pub wal_records: Option<i64>,
    pub wal_full_pages: Option<i64>,
    pub rows_inserted: i64,
    pub rows_updated: i64,
    pub rows_hot_updated: Option<i64>,
    pub rows_deleted: i64,
    pub transactions: Option<i64>,
    pub statements: Option<i64>,
    /// Pages the server looked at (logical reads, cached or not): what an index scan that
    /// passes dead or delete-marked entries costs, which no row count shows.
    pub pages_read: Option<i64>,
    /// Entries `pg_stat_statements` has evicted so far (its `dealloc`): when it moved
    /// between two moments, the statements' sum lost counts and says nothing.
    pub statements_evicted: Option<i64>,
}

impl Work {
    /// How long PostgreSQL may take to show a finished transaction's statistics (a
    /// session reports them at most once a second, and within a second of going idle).
    pub const SETTLE: std::time::Duration = std::time::Duration::from_millis(1_100);

    /// What happened between `before` and `self`. A counter that went backwards (a peer
    /// dropped a table whose HOT updates were summed, or `pg_stat_statements` evicted
    /// entries) is `None`, never a negative count.
    pub fn since(&self, before: &Work) -> Work {
        let both = |a: Option<i64>, b: Option<i64>| match (a, b) {
            (Some(a), Some(b)) if a >= b => Some(a - b),
            _ => None,
        };
        Work {
            log_bytes: self.log_bytes - before.log_bytes,
            wal_records: both(self.wal_records, before.wal_records),
            wal_full_pages: both(self.wal_full_pages, before.wal_full_pages),
            rows_inserted: self.rows_inserted - before.rows_inserted,
            rows_updated: self.rows_updated - before.rows_updated,
            rows_hot_updated: both(self.rows_hot_updated, before.rows_hot_updated),
            rows_deleted: self.rows_deleted - before.rows_deleted,
            transactions: both(self.transactions, before.transactions),
            statements: match (self.statements_evicted, before.statements_evicted) {
                (Some(a), Some(b)) if a != b => None,
                _ => both(self.statements, before.statements),
            },
            statements_evicted: both(self.statements_evicted, before.statements_evicted),
            pages_read: both(self.pages_read, before.pages_read),
        }
    }
}

/// Makes every idle connection of `pool` report its pending statistics: one statement on
/// each, at least [`Work::SETTLE`] after its last report (the caller waited that long).
pub(super) async fn postgres_flush(pool: &sqlx::PgPool) -> Result<(), StoreError> {
    let mut held = Vec::new();
    while let Some(conn) = pool.try_acquire() {
        held.push(conn);
    }
    for conn in &mut held {
        sqlx::query("SELECT 1").execute(&mut **conn).await?;
    }
    Ok(())
}

type PgCounters =
    (i64, Option<i64>, Option<i64>, i64, i64, Option<i64>, i64, Option<i64>, Option<i64>);

pub(super) async fn postgres(c: &mut PgConnection) -> Result<Work, StoreError> {
    let (log_bytes, wal_records, wal_full_pages, ins, upd, hot, del, transactions, pages): PgCounters =
        sqlx::query_as(
            "SELECT CAST(pg_current_wal_lsn() - '0/0' AS bigint),
                    (SELECT wal_records FROM pg_stat_wal),
                    (SELECT wal_fpi FROM pg_stat_wal),
                    d.tup_inserted, d.tup_updated,
                    (SELECT CAST(sum(t.n_tup_hot_upd) AS bigint) FROM pg_stat_user_tables t),
                    d.tup_deleted, d.xact_commit + d.xact_rollback, d.blks_hit + d.blks_read
               FROM pg_stat_database d WHERE d.datname = current_database()",
        )
        .fetch_one(&mut *c)
        .await?;
    let (statements, statements_evicted) = postgres_statements(c).await?;
    Ok(Work {
        log_bytes,
        wal_records,
        wal_full_pages,
        rows_inserted: ins,
        rows_updated: upd,
        rows_hot_updated: hot,
        rows_deleted: del,
        transactions,
        statements,
        statements_evicted,
        pages_read: pages,
    })
}

/// Top-level statements run on this database so far, if `pg_stat_statements` is preloaded.
/// Its view is read in whichever schema the extension was created in; where it was not,
/// it is created (in the first schema of the search path: the bench's scratch schema, so
/// it goes with it) if the role may.
async fn postgres_statements(
    c: &mut PgConnection,
) -> Result<(Option<i64>, Option<i64>), StoreError> {
    let preloaded: bool = sqlx::query_scalar(
        "SELECT current_setting('shared_preload_libraries') ~ '(^|[ ,])pg_stat_statements($|[ ,])'",
    )
    .fetch_one(&mut *c)
    .await?;
    if !preloaded {
        return Ok((None, None));
    }
    let schema = "SELECT quote_ident(n.nspname) FROM pg_extension e
                    JOIN pg_namespace n ON n.oid = e.extnamespace
                   WHERE e.extname = 'pg_stat_statements'";
    let mut found: Option<String> = sqlx::query_scalar(schema).fetch_optional(&mut *c).await?;
    if found.is_none() {
        let created = sqlx::raw_sql("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            .execute(&mut *c)
            .await;
        if created.is_err() {
            return Ok((None, None));
        }
        found = sqlx::query_scalar(schema).fetch_optional(&mut *c).await?;
    }
    let Some(schema) = found else { return Ok((None, None)) };
    // The schema's name comes quoted by the server (quote_ident).
    let q = format!(
        "SELECT CAST(coalesce(sum(s.calls), 0) AS bigint) FROM {schema}.pg_stat_statements s
          WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
    );
    let calls = sqlx::query_scalar(sqlx::AssertSqlSafe(q)).fetch_one(&mut *c).await?;
    // PostgreSQL 14 and later say how many entries were evicted to make room.
    let q = format!("SELECT dealloc FROM {schema}.pg_stat_statements_info");
    let evicted = sqlx::query_scalar(sqlx::AssertSqlSafe(q)).fetch_optional(&mut *c).await;
    Ok((calls, evicted.ok().flatten()))
}

pub(super) async fn mysql(c: &mut MySqlConnection) -> Result<Work, StoreError> {
    let status: Vec<(String, String)> = sqlx::query_as(
        "SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_os_log_written', 'Handler_write',
             'Handler_update', 'Handler_delete', 'Questions', 'Com_commit', 'Com_rollback',
             'Innodb_buffer_pool_read_requests')",
    )
    .fetch_all(&mut *c)
    .await?;
    let get = |name: &str| -> i64 {
        status
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0)
    };
    Ok(Work {
        log_bytes: get("Innodb_os_log_written"),
        wal_records: None,
        wal_full_pages: None,
        rows_inserted: get("Handler_write"),
        rows_updated: get("Handler_update"),
        rows_hot_updated: None,
        rows_deleted: get("Handler_delete"),
        transactions: Some(get("Com_commit") + get("Com_rollback")),
        statements: Some(get("Questions")),
        statements_evicted: None,
        pages_read: Some(get("Innodb_buffer_pool_read_requests")),
    })
}
