//! "Now" at the store boundary: which clock a statement reads. Production uses the
//! database's (PostgreSQL's `now()` or MariaDB's `NOW(3)`, one clock for every machine; SQLite runs on one
//! machine, so its "database clock" is the system clock read here); tests inject a fixed
//! instant from a manual clock.

use std::time::{SystemTime, UNIX_EPOCH};

/// Which clock decides "now" in a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Now {
    /// The database's clock.
    Database,
    /// A fixed instant, in Unix milliseconds (a test's manual clock).
    At(i64),
}

impl Now {
    /// The instant as SQLite stores it: the fixed one, else the system clock.
    pub(crate) fn sqlite_ms(self) -> i64 {
        match self {
            Now::Database => system_ms(),
            Now::At(ms) => ms,
        }
    }

    /// The parameter of PostgreSQL's `herald_now($n)`: NULL for `now()`.
    pub(crate) fn pg(self) -> Option<i64> {
        match self {
            Now::Database => None,
            Now::At(ms) => Some(ms),
        }
    }
}

/// The database's "now" on MariaDB/MySQL, in Unix milliseconds (BIGINT): constant within
/// a statement.
pub(crate) const MYSQL_NOW_MS: &str = "CAST(UNIX_TIMESTAMP(NOW(3)) * 1000 AS SIGNED)";

impl Now {
    /// The instant as MariaDB SQL: a placeholder for the fixed one (bound with
    /// `BindNow::bind_now` at each place it appears: placeholders are positional), else
    /// the server's clock. Never the fixed instant as a literal: every instant would make
    /// a new statement text, and once sqlx's per-connection cache of prepared statements
    /// is full each new text evicts one with a COM_STMT_CLOSE, a packet the server never
    /// answers, so the next request waits for a delayed ACK behind Nagle's algorithm
    /// (sqlx does not set TCP_NODELAY): about 40 ms per eviction, measured.
    pub(crate) fn mysql_sql(self) -> &'static str {
        match self {
            Now::Database => MYSQL_NOW_MS,
            Now::At(_) => "?",
        }
    }
}

/// The system clock in Unix milliseconds.
pub fn system_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// SQLite's "now": the injected time, else the system clock.
pub(crate) fn sqlite_now(now: Option<i64>) -> i64 {
    now.unwrap_or_else(system_ms)
}
