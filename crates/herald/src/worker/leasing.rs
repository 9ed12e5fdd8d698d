//! The worker's leasing steps: a lease (full or quick, `lanes.rs`), the sends it starts,
//! and the leases handed back that this worker holds but never received.

use super::{OUTCOME_SETTLES_WITHIN, Worker};
use crate::error::Error;
use crate::known_leases::{KnownLeases, LeaseKey};
use crate::lanes::{Ask, Slot};
use herald_core::limits::{LEASE_BATCH_MAX, ORPHANS_BATCH_MAX};
use herald_store::deliveries::{LeasedRow, deliveries_leased_by, delivery_hand_back};
use std::sync::atomic::Ordering;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

impl Worker {
    /// Hands back the leases this worker holds in the database but never received (see
    /// `known_leases`): no send of theirs started, so no attempt is spent. Until that has
    /// worked once, it is tried again at the next turn of the loop.
    pub(super) async fn hand_back_orphans(&self, known: &mut KnownLeases) {
        let began = Instant::now();
        known.checking(began);
        let herald = &self.inner.herald;
        let (worker, now) = (self.inner.options.id.as_str(), herald.clock().now());
        let live = herald
            .transaction(|tx| {
                Box::pin(async move {
                    Ok(deliveries_leased_by(tx.conn(), worker, now, ORPHANS_BATCH_MAX).await?)
                })
            })
            .await;
        let live = match live {
            Ok(live) => live.value,
            Err(e) => return tracing::debug!(error = %e, "looking for orphaned leases failed"),
        };
        let orphans = known.orphans(&live);
        if orphans.is_empty() {
            if live.len() < ORPHANS_BATCH_MAX {
                known.cleared(began);
            }
            return;
        }
        let handed = herald
            .transaction(|tx| {
                let orphans = &orphans;
                Box::pin(async move {
                    let mut handed = 0;
                    for &(id, n) in orphans {
                        handed += usize::from(delivery_hand_back(tx.conn(), id, worker, n).await?);
                    }
                    Ok(handed)
                })
            })
            .await;
        match handed {
            Ok(handed) => {
                if handed.value > 0 {
                    tracing::info!(
                        handed_back = handed.value,
                        "leases whose lease statement's outcome was unknown were handed back"
                    );
                    herald.wake().soon();
                }
                if live.len() < ORPHANS_BATCH_MAX {
                    known.cleared(began);
                }
            }
            Err(e) => tracing::debug!(error = %e, "handing back orphaned leases failed"),
        }
    }

    /// Starts a send task for each leased row (after shutdown began: hands it back
    /// instead); notes a lease whose outcome is unknown. Returns how many it leased.
    pub(super) async fn start_sends(
        &self,
        leased: Result<Vec<(LeasedRow, Slot)>, Error>,
        shutdown: &CancellationToken,
        known: &mut KnownLeases,
        inflight: &mut JoinSet<(LeaseKey, bool)>,
    ) -> usize {
        let rows = match leased {
            Ok(rows) => rows,
            Err(e) => {
                if matches!(e, Error::CommitOutcomeUnknown { .. }) {
                    // The lease ran under the runner's default options: its COMMIT ends
                    // on the server within the statement bound, which the deadline caps,
                    // counted from no earlier than now.
                    known.outcome_unknown(Instant::now() + OUTCOME_SETTLES_WITHIN);
                }
                tracing::warn!(error = %e, "leasing failed; polling again");
                return 0;
            }
        };
        let leased = rows.len();
        for (row, slot) in rows {
            if shutdown.is_cancelled() {
                self.inner.hand_back(&row).await;
                continue;
            }
            let inner = self.inner.clone();
            let lease = (row.delivery.id, row.delivery.attempts);
            known.received(lease);
            inflight.spawn(async move {
                let _slot = slot;
                let recorded = inner.execute(row).await;
                if let Err(e) = &recorded {
                    tracing::warn!(error = %e, "recording an outcome failed; the lease will expire and the reconciler will retry");
                }
                (lease, recorded.is_ok())
            });
        }
        leased
    }

    /// Leases up to `wanted` rows, shared among the lanes with due work (`lanes.rs`);
    /// `quick`: see [`Ask::quick`].
    pub(super) async fn lease(
        &self,
        wanted: usize,
        quick: bool,
    ) -> Result<Vec<(LeasedRow, Slot)>, Error> {
        let inner = &self.inner;
        let wanted = wanted.min(LEASE_BATCH_MAX);
        if wanted == 0 || inner.channel_names.is_empty() {
            return Ok(Vec::new());
        }
        inner.registered.get_or_try_init(|| inner.register()).await?;
        let ask = Ask {
            worker: &inner.options.id,
            channels: &inner.channel_names,
            slots: inner.options.slots,
            wanted,
            lease: inner.options.lease,
            lane_take_max: inner.options.lane_take_max,
            circuit: inner.herald.options.circuit,
            quick,
        };
        let rows = inner.lanes.lease(&inner.herald, &ask).await?;
        inner.counts.lease_transactions.fetch_add(1, Ordering::Relaxed);
        if quick {
            inner.counts.quick_leases.fetch_add(1, Ordering::Relaxed);
        }
        inner.counts.leased.fetch_add(rows.len() as u64, Ordering::Relaxed);
        Ok(rows)
    }
}
