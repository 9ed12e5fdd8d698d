//! Waking workers soon after a submit commits, without a NOTIFY per submit.
//!
//! In-process: a `Notify` that workers wait on next to their poll timer. Across processes
//! on PostgreSQL: at most one `NOTIFY` per `PG_NOTIFY_EVERY` per process, sent inside the
//! submitting transaction. Across processes elsewhere (MariaDB, SQLite: no NOTIFY): by
//! datagram (`datagram.rs`) — each running worker listens on a UDP port it registers as a
//! wake target, and a process that committed due work sends each target one datagram
//! after the commit, at most one round per `DATAGRAM_EVERY`. A woken worker then polls
//! quickly for a short while ("hot"), which catches the submits whose wake-up was
//! coalesced away and the ones that were still committing when the wake arrived. Polling
//! at `HERALD_POLL_INTERVAL` remains the fallback for everything else (a lost listener
//! connection or datagram included).

use crate::datagram::Datagrams;
use crate::handle::Herald;
use herald_store::Store;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// At most one cross-process NOTIFY per this interval per process.
pub const PG_NOTIFY_EVERY: Duration = Duration::from_millis(20);
/// After a wake, workers poll this often ...
pub const HOT_POLL_EVERY: Duration = Duration::from_millis(10);
/// ... for this long.
pub const HOT_FOR: Duration = Duration::from_millis(250);

#[derive(Debug)]
pub(crate) struct Wake {
    notify: Notify,
    started: Instant,
    /// Milliseconds since `started` of the last NOTIFY queued by this process.
    last_pg_notify_ms: AtomicI64,
    /// Wake-ups of other processes by datagram, where the database has no NOTIFY.
    datagrams: Option<Arc<Datagrams>>,
}

impl Wake {
    pub(crate) fn new(store: &Store) -> Wake {
        Wake {
            notify: Notify::new(),
            started: Instant::now(),
            last_pg_notify_ms: AtomicI64::new(-1_000_000),
            datagrams: (!store.backend().notifies_across_processes())
                .then(|| Arc::new(Datagrams::new(store.clone()))),
        }
    }

    /// Wakes this process's workers now, and other processes' by datagram where the
    /// database has no NOTIFY; they keep looking for a short while, so work that commits
    /// a moment later is found quickly too. Call it after the commit.
    pub(crate) fn soon(&self) {
        self.notify.notify_waiters();
        if let Some(d) = &self.datagrams {
            d.send();
        }
    }

    /// Wakes this process's workers only (a wake-up heard from another process).
    pub(crate) fn here(&self) {
        self.notify.notify_waiters();
    }

    /// The datagram side, where the database has no NOTIFY.
    pub(crate) fn datagrams(&self) -> Option<&Arc<Datagrams>> {
        self.datagrams.as_ref()
    }

    pub(crate) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.notify.notified()
    }

    /// Whether this submit should carry a NOTIFY (true at most once per interval).
    pub(crate) fn take_pg_notify(&self) -> bool {
        let now = self.started.elapsed().as_millis() as i64;
        let last = self.last_pg_notify_ms.load(Ordering::Relaxed);
        now - last >= PG_NOTIFY_EVERY.as_millis() as i64
            && self
                .last_pg_notify_ms
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    /// The NOTIFY taken with [`Wake::take_pg_notify`] was not sent (nothing was claimed):
    /// the next submit may send one.
    pub(crate) fn pg_notify_unused(&self) {
        self.last_pg_notify_ms.store(-1_000_000, Ordering::Relaxed);
    }
}

/// The longest setting up the LISTEN connection may take before the worker polls instead.
const LISTEN_TIMEOUT: Duration = Duration::from_secs(5);

/// LISTEN on PostgreSQL for cross-process wake-ups; absent on SQLite or after a lost
/// connection (polling covers both; a new listener is tried again later).
#[derive(Default)]
pub(crate) struct Listener {
    listener: Option<herald_store::notify::WakeListener>,
    retry_at: Option<Instant>,
}

impl Listener {
    pub(crate) async fn ensure(&mut self, herald: &Herald) {
        if self.listener.is_some() || self.retry_at.is_some_and(|at| Instant::now() < at) {
            return;
        }
        // Bounded: the worker loop awaits this, and a connection that went silent must not
        // stop it from leasing (polling does not need the listener).
        let listener = tokio::time::timeout(LISTEN_TIMEOUT, herald.store().wake_listener())
            .await
            .unwrap_or_else(|_| Err(herald_store::tx::timed_out("LISTEN").into()));
        match listener {
            Ok(None) => self.retry_at = Some(Instant::now() + Duration::from_secs(3600)),
            Ok(Some(l)) => self.listener = Some(l),
            Err(e) => {
                tracing::warn!(error = %e, "LISTEN failed; polling until it works");
                self.retry_at = Some(Instant::now() + Duration::from_secs(5));
            }
        }
    }

    /// The next notification; never resolves without a listener.
    pub(crate) async fn next(&mut self) {
        match &mut self.listener {
            None => std::future::pending().await,
            Some(l) => {
                if let Err(e) = l.recv().await {
                    tracing::warn!(error = %e, "lost the LISTEN connection; polling");
                    self.listener = None;
                    self.retry_at = Some(Instant::now() + Duration::from_secs(1));
                }
            }
        }
    }
}
