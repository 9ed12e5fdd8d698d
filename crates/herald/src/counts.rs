//! Deliveries per (channel, state) for the dashboard, counted at most every
//! [`COUNTS_MAX_AGE`] per scope (all tenants, or one) and shared by every reader.
//!
//! A count reads every delivery of its scope: 0.4 s for one tenant's 1,000,000 on SQLite,
//! 0.6 s for the whole table (docs/perf.md). Keeping a count per state current on every
//! transition instead would put a hot row, or an index on `state`, on every delivery's
//! path for the sake of a page; so the page gets a recent count and says how old it is.
//! A fresh count is answered as is; an older one is answered at once while one task counts
//! again; only a scope's first read waits for its count.

use crate::error::Error;
use crate::handle::Herald;
use herald_core::{DeliveryState, TenantId};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How old a count may be before a read starts counting again.
pub const COUNTS_MAX_AGE: Duration = Duration::from_secs(10);

/// A scope not read for this long is forgotten (the map stays as small as the scopes
/// operators are looking at).
const FORGET_AFTER: Duration = Duration::from_secs(300);

type Counts = Arc<Vec<(String, DeliveryState, i64)>>;

/// Deliveries per (channel, state), and how long ago they were counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryCounts {
    pub counts: Vec<(String, DeliveryState, i64)>,
    pub age: Duration,
}

#[derive(Debug)]
struct Entry {
    counts: Counts,
    at: Instant,
    read_at: Instant,
    recounting: bool,
}

/// The counts of the scopes being read, shared by a handle's clones.
#[derive(Debug, Default)]
pub(crate) struct CountsCache {
    entries: Mutex<HashMap<Option<TenantId>, Entry>>,
}

/// What a read finds in the cache.
enum Found {
    Fresh(Counts, Duration),
    /// Stale: answer it, and this read is the one to count again.
    Stale(Counts, Duration, bool),
    Missing,
}

impl CountsCache {
    fn find(&self, scope: Option<TenantId>) -> Found {
        let Ok(mut entries) = self.entries.lock() else { return Found::Missing };
        let now = Instant::now();
        entries.retain(|_, e| now.duration_since(e.read_at) < FORGET_AFTER);
        let Some(e) = entries.get_mut(&scope) else { return Found::Missing };
        e.read_at = now;
        let age = now.duration_since(e.at);
        if age < COUNTS_MAX_AGE {
            return Found::Fresh(e.counts.clone(), age);
        }
        let recount = !e.recounting;
        e.recounting = true;
        Found::Stale(e.counts.clone(), age, recount)
    }

    fn store(&self, scope: Option<TenantId>, counts: Option<Counts>) {
        let Ok(mut entries) = self.entries.lock() else { return };
        let now = Instant::now();
        match counts {
            Some(counts) => {
                entries.insert(scope, Entry { counts, at: now, read_at: now, recounting: false });
            }
            // A recount that failed: the next read tries again.
            None => {
                if let Some(e) = entries.get_mut(&scope) {
                    e.recounting = false;
                }
            }
        }
    }
}

impl Herald {
    /// Deliveries per (channel, state), of one tenant or of all, counted at most
    /// [`COUNTS_MAX_AGE`] ago (see the module's note); `age` says how long ago.
    pub async fn delivery_counts_recent(
        &self,
        tenant: Option<TenantId>,
    ) -> Result<DeliveryCounts, Error> {
        let answer = |counts: Counts, age| DeliveryCounts { counts: counts.to_vec(), age };
        match self.counts.find(tenant) {
            Found::Fresh(counts, age) => Ok(answer(counts, age)),
            Found::Stale(counts, age, recount) => {
                if recount {
                    let herald = self.clone();
                    tokio::spawn(async move {
                        let counted = herald.delivery_counts(tenant).await.ok().map(Arc::new);
                        herald.counts.store(tenant, counted);
                    });
                }
                Ok(answer(counts, age))
            }
            Found::Missing => {
                let counts = Arc::new(self.delivery_counts(tenant).await?);
                self.counts.store(tenant, Some(counts.clone()));
                Ok(answer(counts, Duration::ZERO))
            }
        }
    }
}
