//! The `Herald` handle: one database's store, the engine's settings, its clock and its
//! wake-ups. Its methods live with what they do: the runner (`runner.rs`), submit
//! (`submit.rs`), recording outcomes (`outcome.rs`), tenants (`admin.rs`), keys
//! (`keys.rs`), grants, reads, replay and cancel (`manage.rs`), operator reads (`ops.rs`),
//! the shared settings (`settings.rs`).

use crate::clock::Clock;
use crate::error::Error;
use crate::wake::Wake;
use herald_store::{Backend, Store, StoreOptions};
use std::sync::Arc;

/// This process's engine options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineOptions {
    /// Attempts a delivery gets when the submit does not say (`HERALD_MAX_ATTEMPTS`) — on
    /// a database that has no shared settings yet: the first process to need them writes
    /// this, and from then on every process uses the database's (`settings.rs`).
    pub max_attempts: u32,
    /// Admission control of the group commit (`group.rs`): a submit still waiting for a
    /// lane after this long is answered [`Error::Busy`] with nothing written, and while the
    /// oldest waiting submit has waited half of it, new submits are refused at once. The
    /// library's default waits as long as a transaction's deadline; `herald serve` sheds
    /// sooner (`HERALD_QUEUE_WAIT`).
    pub queue_wait: std::time::Duration,
    /// When a lane's circuit opens, how it is probed, when it is disabled
    /// (`HERALD_CIRCUIT_FAILURES`, `HERALD_CIRCUIT_PROBE`, `HERALD_CIRCUIT_DISABLE_AFTER`).
    pub circuit: herald_core::fair::CircuitPolicy,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            max_attempts: herald_core::limits::DELIVERY_ATTEMPTS_DEFAULT,
            queue_wait: herald_core::limits::QUEUE_WAIT_DEFAULT,
            circuit: herald_core::fair::CircuitPolicy::default(),
        }
    }
}

/// herald's handle on one database: the store, the runner, the engine's settings and its
/// clock. Cheap to clone; clones share the pool and the wake-ups.
#[derive(Debug, Clone)]
pub struct Herald {
    pub(crate) store: Store,
    pub(crate) clock: Clock,
    pub(crate) options: EngineOptions,
    pub(crate) wake: Arc<Wake>,
    pub(crate) settings: Arc<crate::settings::Cached>,
    pub(crate) group: Arc<crate::group::Group>,
    /// Outcomes counted for the dashboard, not yet written (`rollup.rs`).
    pub(crate) rollup: Arc<crate::rollup::Rollup>,
    /// The dashboard's recent counts (`counts.rs`).
    pub(crate) counts: Arc<crate::counts::CountsCache>,
    /// The holds workers check leased rows against (`holds.rs`).
    pub(crate) holds: Arc<crate::holds::Fresh<Vec<herald_core::HoldScope>>>,
    /// The destination limits the lease applies (`destinations.rs`).
    pub(crate) limits: Arc<crate::holds::Fresh<Vec<herald_core::fair::Limit>>>,
}

impl Herald {
    /// Opens the database at `url` (a file path, `sqlite://…` or `postgres://…`), creating
    /// an SQLite file if needed, and migrates it.
    pub async fn open(url: &str) -> Result<Herald, Error> {
        Herald::open_with(url, &StoreOptions::default()).await
    }

    pub async fn open_with(url: &str, options: &StoreOptions) -> Result<Herald, Error> {
        Ok(Herald::from_store(Store::open(url, options).await?))
    }

    /// Wraps an already connected (and migrated) store.
    pub fn from_store(store: Store) -> Herald {
        let wake = Arc::new(Wake::new(&store));
        Herald {
            store,
            clock: Clock::database(),
            options: EngineOptions::default(),
            wake,
            settings: Arc::default(),
            group: Arc::default(),
            rollup: Arc::default(),
            counts: Arc::default(),
            holds: Arc::default(),
            limits: Arc::default(),
        }
    }

    /// The same handle with another clock (tests inject a manual one).
    pub fn with_clock(mut self, clock: Clock) -> Herald {
        self.clock = clock;
        self
    }

    /// The same handle with other engine settings.
    pub fn with_options(mut self, options: EngineOptions) -> Result<Herald, Error> {
        if !(1..=herald_core::limits::DELIVERY_ATTEMPTS_MAX).contains(&options.max_attempts) {
            return Err(Error::invalid(format!(
                "max_attempts must be between 1 and {}",
                herald_core::limits::DELIVERY_ATTEMPTS_MAX
            )));
        }
        let waits = herald_core::limits::QUEUE_WAIT_MIN..=herald_core::limits::QUEUE_WAIT_MAX;
        if !waits.contains(&options.queue_wait) {
            return Err(Error::invalid(format!(
                "queue_wait must be between {:?} and {:?}",
                waits.start(),
                waits.end()
            )));
        }
        self.options = options;
        Ok(self)
    }

    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    pub(crate) fn wake(&self) -> &Arc<Wake> {
        &self.wake
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    pub fn backend(&self) -> Backend {
        self.store.backend()
    }

    pub async fn close(&self) {
        self.store.close().await;
    }
}
