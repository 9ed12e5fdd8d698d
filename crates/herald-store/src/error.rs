//! Store errors and their classification. Classification is by error *code* — SQLSTATE on
//! PostgreSQL, the primary result code on SQLite, the error number on MySQL — never by
//! message text, which changes with versions and locales.

use sqlx::error::DatabaseError;

/// An error from the store, with its cause kept as a source.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
    /// A batch claim ([`crate::deliveries::deliveries_claim_many`]) planned an identity
    /// as new that a concurrent transaction committed meanwhile, and a later submit of the
    /// batch was refused quota the planned one never took: the batch must run again (the
    /// caller's transaction rolled back), when the plan reads that identity as taken.
    #[error("a concurrent commit claimed an identity this batch planned to claim")]
    BatchRaced,
    /// This process's SQLite writer stayed taken longer than the caller could wait
    /// (`Store::sqlite_writer`): nothing was done.
    #[error("this process's SQLite writer was busy for {waited:?}: nothing was done")]
    WriterBusy { waited: std::time::Duration },
    #[error("cannot open database {target}")]
    Connect {
        target: String,
        #[source]
        source: sqlx::Error,
    },
    #[error(
        "database schema is at version {found}, newer than this herald understands (up to {known}); upgrade herald, nothing was changed"
    )]
    SchemaNewer { found: i64, known: i64 },
    #[error("cannot migrate database {target}")]
    Migrate {
        target: String,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    /// A tool beside the engine (the bench floor, the demo tables, diagnostics) that is
    /// not written for this backend yet.
    #[error("{what} is not available on {backend} yet")]
    NotOnBackend { what: &'static str, backend: &'static str },
    /// `herald sql grant` named a role (a user, on MariaDB) the server does not have.
    #[error("the database has no role (user) named {0:?}")]
    NoSuchRole(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The kinds of error after which re-running the whole transaction can succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// PostgreSQL 40001: the transaction conflicted with a concurrent one.
    SerializationFailure,
    /// PostgreSQL 40P01: chosen as the victim of a deadlock.
    Deadlock,
    /// SQLite BUSY (5, any extended code): another connection holds the lock.
    SqliteBusy,
    /// SQLite LOCKED (6, any extended code): a conflict inside one shared cache.
    SqliteLocked,
    /// MariaDB/MySQL 1213 (ER_LOCK_DEADLOCK): the whole transaction was rolled back.
    MysqlDeadlock,
    /// MariaDB/MySQL 1205 (ER_LOCK_WAIT_TIMEOUT): a lock wait ran out. Only the statement
    /// was rolled back; the runner rolls back the rest before it retries.
    MysqlLockWaitTimeout,
    /// MariaDB 1020 (ER_CHECKREAD) under `innodb_snapshot_isolation`: a row this
    /// transaction read was changed since; the whole transaction was rolled back.
    MysqlRecordChanged,
}

/// What an error means for the transaction runner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Roll back and run the whole closure again.
    Concurrency(Concurrency),
    /// A lock or statement wait ran out (PostgreSQL 55P03 / 57014). The runner sets these
    /// bounds to the time left before its deadline, so this usually means "deadline".
    WaitTimeout,
    /// The connection broke. Before COMMIT the transaction is gone with it (retry on a
    /// fresh connection); during COMMIT the outcome is unknown.
    ConnectionLost,
    /// The pool had no connection to give within its acquire timeout: herald is busier
    /// than its connections allow. Nothing was done; the caller may retry later.
    PoolExhausted,
    /// The database has no room to write: SQLite FULL (13), the disk (or the file system's
    /// quota) is full. SQLite rolled back the statement or, at COMMIT, the whole
    /// transaction, so nothing was done; the same work can succeed once room is made, but
    /// not by running it again at once.
    StorageFull,
    /// Anything else: propagate at once.
    Other,
}

impl StoreError {
    pub fn class(&self) -> ErrorClass {
        match self {
            StoreError::Database(e) => classify(e),
            StoreError::Connect { .. } => ErrorClass::ConnectionLost,
            // What SQLite itself answers a second writer (SQLITE_BUSY): within one process
            // the writer is taken here before SQLite's lock is.
            StoreError::WriterBusy { .. } => ErrorClass::Concurrency(Concurrency::SqliteBusy),
            // What SERIALIZABLE would have said of the plan: a read it relied on changed.
            StoreError::BatchRaced => ErrorClass::Concurrency(Concurrency::SerializationFailure),
            _ => ErrorClass::Other,
        }
    }

    /// The driver's code for a database error (SQLSTATE, SQLite extended code), if any.
    pub fn code(&self) -> Option<String> {
        match self {
            StoreError::Database(sqlx::Error::Database(e)) => e.code().map(|c| c.into_owned()),
            _ => None,
        }
    }

    /// Whether this is a unique-constraint violation (on any backend).
    pub fn is_unique_violation(&self) -> bool {
        matches!(self, StoreError::Database(sqlx::Error::Database(e)) if e.is_unique_violation())
    }
}

/// Classifies a driver error.
pub fn classify(err: &sqlx::Error) -> ErrorClass {
    match err {
        sqlx::Error::Database(db) => classify_database(db.as_ref()),
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::PoolClosed => ErrorClass::ConnectionLost,
        sqlx::Error::PoolTimedOut => ErrorClass::PoolExhausted,
        _ => ErrorClass::Other,
    }
}

fn classify_database(db: &dyn DatabaseError) -> ErrorClass {
    let Some(code) = db.code() else { return ErrorClass::Other };
    if db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>().is_some() {
        return classify_postgres_sqlstate(&code);
    }
    if let Some(my) = db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>() {
        return classify_mysql_error_number(my.number());
    }
    if db.try_downcast_ref::<sqlx::sqlite::SqliteError>().is_some() {
        return match code.parse::<i32>() {
            Ok(n) => classify_sqlite_code(n),
            Err(_) => ErrorClass::Other,
        };
    }
    ErrorClass::Other
}

/// PostgreSQL SQLSTATE → class.
pub fn classify_postgres_sqlstate(sqlstate: &str) -> ErrorClass {
    match sqlstate {
        "40001" => ErrorClass::Concurrency(Concurrency::SerializationFailure),
        "40P01" => ErrorClass::Concurrency(Concurrency::Deadlock),
        // lock_not_available (lock_timeout), query_canceled (statement_timeout).
        "55P03" | "57014" => ErrorClass::WaitTimeout,
        // admin_shutdown, crash_shutdown, cannot_connect_now, and class 08 (connection).
        "57P01" | "57P02" | "57P03" => ErrorClass::ConnectionLost,
        // The server ended the session: idle in a transaction, or idle, for too long.
        "25P03" | "57P05" => ErrorClass::ConnectionLost,
        s if s.starts_with("08") => ErrorClass::ConnectionLost,
        _ => ErrorClass::Other,
    }
}

/// SQLite result code (extended or primary) → class. Extended codes carry the primary
/// code in their low byte (SQLITE_BUSY_SNAPSHOT = 517 = 5 | 2 << 8), so mask first.
pub fn classify_sqlite_code(code: i32) -> ErrorClass {
    const SQLITE_BUSY: i32 = 5;
    const SQLITE_LOCKED: i32 = 6;
    const SQLITE_FULL: i32 = 13;
    match code & 0xff {
        SQLITE_BUSY => ErrorClass::Concurrency(Concurrency::SqliteBusy),
        SQLITE_LOCKED => ErrorClass::Concurrency(Concurrency::SqliteLocked),
        SQLITE_FULL => ErrorClass::StorageFull,
        _ => ErrorClass::Other,
    }
}

/// MariaDB/MySQL error number → class. 1205 is a lock wait that ran out
/// (`innodb_lock_wait_timeout`, which the runner sets to its time left, in whole seconds);
/// it is retryable, but each attempt is bounded by the runner's remaining time, or five
/// attempts would become minutes. 1969 is MariaDB's `max_statement_time` (the runner's
/// wait bound, to the millisecond), 3024 MySQL's `max_execution_time`, and 1317 a
/// statement interrupted (KILL QUERY). A lost connection
/// is an I/O error of the driver, or 1927 (the connection was killed).
pub fn classify_mysql_error_number(number: u16) -> ErrorClass {
    match number {
        1213 => ErrorClass::Concurrency(Concurrency::MysqlDeadlock),
        1205 => ErrorClass::Concurrency(Concurrency::MysqlLockWaitTimeout),
        1020 => ErrorClass::Concurrency(Concurrency::MysqlRecordChanged),
        1969 | 3024 | 1317 => ErrorClass::WaitTimeout,
        1927 | 1053 => ErrorClass::ConnectionLost,
        _ => ErrorClass::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_classify() {
        use Concurrency::*;
        let pg = [
            ("40001", ErrorClass::Concurrency(SerializationFailure)),
            ("40P01", ErrorClass::Concurrency(Deadlock)),
            ("55P03", ErrorClass::WaitTimeout),
            ("57014", ErrorClass::WaitTimeout),
            ("57P01", ErrorClass::ConnectionLost),
            ("08006", ErrorClass::ConnectionLost),
            ("25P03", ErrorClass::ConnectionLost),
            ("23505", ErrorClass::Other),
            ("40002", ErrorClass::Other),
        ];
        for (code, expect) in pg {
            assert_eq!(classify_postgres_sqlstate(code), expect, "sqlstate {code}");
        }
        let sqlite = [
            (5, ErrorClass::Concurrency(SqliteBusy)),
            (517, ErrorClass::Concurrency(SqliteBusy)), // BUSY_SNAPSHOT
            (261, ErrorClass::Concurrency(SqliteBusy)), // BUSY_RECOVERY
            (6, ErrorClass::Concurrency(SqliteLocked)),
            (262, ErrorClass::Concurrency(SqliteLocked)), // LOCKED_SHAREDCACHE
            (2067, ErrorClass::Other),                    // CONSTRAINT_UNIQUE
            (8, ErrorClass::Other),                       // READONLY
            (13, ErrorClass::StorageFull),                // FULL
            (10, ErrorClass::Other),                      // IOERR
        ];
        for (code, expect) in sqlite {
            assert_eq!(classify_sqlite_code(code), expect, "sqlite code {code}");
        }
        assert_eq!(classify_mysql_error_number(1213), ErrorClass::Concurrency(MysqlDeadlock));
        assert_eq!(
            classify_mysql_error_number(1205),
            ErrorClass::Concurrency(MysqlLockWaitTimeout)
        );
        assert_eq!(classify_mysql_error_number(1020), ErrorClass::Concurrency(MysqlRecordChanged));
        assert_eq!(classify_mysql_error_number(1969), ErrorClass::WaitTimeout);
        assert_eq!(classify_mysql_error_number(1927), ErrorClass::ConnectionLost);
        assert_eq!(classify_mysql_error_number(1062), ErrorClass::Other);
    }

    /// A real SQLITE_FULL, as the driver reports it: an in-memory database capped at a few
    /// pages (`max_page_count`) answers an insert past them as a full disk would.
    #[tokio::test]
    #[allow(clippy::expect_used)] // a test whose setup fails fails
    async fn a_full_sqlite_database_is_storage_full() {
        use sqlx::Connection;
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:").await.expect("open");
        sqlx::raw_sql("CREATE TABLE t (x BLOB); PRAGMA max_page_count = 8")
            .execute(&mut conn)
            .await
            .expect("create a capped table");
        let full = sqlx::query("INSERT INTO t VALUES (zeroblob(65536))")
            .execute(&mut conn)
            .await
            .expect_err("an insert past max_page_count");
        let full = StoreError::Database(full);
        assert_eq!((full.class(), full.code().as_deref()), (ErrorClass::StorageFull, Some("13")));
    }
}
