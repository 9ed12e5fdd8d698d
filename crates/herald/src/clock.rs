//! Time, injected. Production uses the database's clock (`Clock::database()`): on
//! PostgreSQL the SQL says `now()`, so every machine judges leases and due times by one
//! clock and skew cannot reclaim a live lease. Tests use a manual clock they move by hand.

use jiff::Timestamp;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where "now" comes from.
#[derive(Clone, Default)]
pub struct Clock {
    manual: Option<Arc<Mutex<Timestamp>>>,
}

impl Clock {
    /// The database's clock (the system clock on SQLite, which is one machine).
    pub fn database() -> Clock {
        Clock { manual: None }
    }

    /// A clock that stands still until moved.
    pub fn manual(start: Timestamp) -> Clock {
        Clock { manual: Some(Arc::new(Mutex::new(start))) }
    }

    /// Moves a manual clock forward (no effect on the database clock).
    pub fn advance(&self, by: Duration) {
        if let Some(now) = &self.manual {
            let mut now = now.lock().unwrap_or_else(|e| e.into_inner());
            let by = jiff::SignedDuration::try_from(by).unwrap_or(jiff::SignedDuration::MAX);
            *now = now.checked_add(by).unwrap_or(Timestamp::MAX);
        }
    }

    /// Which clock the store reads "now" from: the database's, or this manual clock's
    /// reading.
    pub fn now(&self) -> herald_store::Now {
        self.now_ms().map_or(herald_store::Now::Database, herald_store::Now::At)
    }

    /// Unix milliseconds by this clock: a manual clock's reading, else this process's
    /// system clock (for what the library judges itself: dashboard sessions, audit times).
    pub fn wall_ms(&self) -> i64 {
        self.now_ms().unwrap_or_else(herald_store::clock::system_ms)
    }

    /// A manual clock's reading in Unix milliseconds; `None` for the database's clock.
    pub fn now_ms(&self) -> Option<i64> {
        self.manual
            .as_ref()
            .map(|now| now.lock().unwrap_or_else(|e| e.into_inner()).as_millisecond())
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.now_ms() {
            Some(ms) => write!(f, "Clock::manual({ms})"),
            None => f.write_str("Clock::database()"),
        }
    }
}
