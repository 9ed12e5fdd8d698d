//! "Now" at the store boundary: Unix milliseconds, or `None` for the database's clock.
//! On PostgreSQL `None` becomes `now()` in SQL (one clock for every machine); SQLite runs
//! on one machine, so `None` is read from the system clock here.

use std::time::{SystemTime, UNIX_EPOCH};

/// The system clock in Unix milliseconds.
pub fn system_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// SQLite's "now": the injected time, else the system clock.
pub(crate) fn sqlite_now(now: Option<i64>) -> i64 {
    now.unwrap_or_else(system_ms)
}
