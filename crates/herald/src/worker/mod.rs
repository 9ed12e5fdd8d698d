//! Workers: lease due deliveries (never more than the free send slots, only of the
//! channels this process has), send each through its channel with a timeout and a lease
//! heartbeat, and record the outcome fenced by (lease owner, attempt).
//!
//! Shutdown (SPEC guarantee 12): stop leasing, hand back leases whose send has not
//! started (no attempt spent), let started sends finish within the grace period, and leave
//! any still running to lease expiry — a started send is never released early.

mod leasing;

use crate::channel::{Channel, Leased, Outcome};
use crate::datagram::Hearing;
use crate::error::Error;
use crate::handle::Herald;
use crate::known_leases::{KnownLeases, LeaseKey};
use crate::lanes::{Lanes, Slot};
use crate::outcome::AttemptReport;
use crate::recorder::{Recorder, Recording};
use crate::rollup::Counted;
use crate::wake::Listener;
use crate::wake::{HOT_FOR, HOT_POLL_EVERY};
use herald_core::limits::LEASE_BATCH_MAX;
use herald_core::{Decision, Payload, Report};
use herald_store::deliveries::{LeasedRow, delivery_hand_back, delivery_lease_extend};
use herald_store::workers::worker_register;
use std::collections::BTreeMap;
use std::fmt;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

pub use crate::worker_options::{RELEASE_DEFAULT, WorkerOptions};

/// What one `run_once` did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunReport {
    pub leased: usize,
    pub sent: usize,
    pub retried: usize,
    pub failed: usize,
    /// Outcomes that no longer held the lease (fenced off, or recorded only on the attempt).
    pub stale: usize,
    /// Of those, `sent` reports for deliveries already failed or cancelled: the effect
    /// happened although herald had given up on it. Alert-worthy.
    pub late_sent: usize,
}

/// What a worker's transactions did since it was made: `leased / (lease_transactions +
/// record_transactions)` is its deliveries per transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WorkerStats {
    /// Lease statements' transactions.
    pub lease_transactions: u64,
    /// Transactions that recorded outcomes (a batch, or one outcome alone).
    pub record_transactions: u64,
    /// Deliveries leased.
    pub leased: u64,
    /// Of the lease transactions, the quick ones a wake-up started (one row of each lane
    /// with nothing in flight; not on SQLite): beside a lease in flight, and on PostgreSQL
    /// also while none is (one statement there).
    pub quick_leases: u64,
}

/// The counters behind [`WorkerStats`], shared with the recorder.
#[derive(Debug, Default)]
pub(crate) struct WorkerCounts {
    lease_transactions: AtomicU64,
    pub(crate) record_transactions: AtomicU64,
    leased: AtomicU64,
    quick_leases: AtomicU64,
}

/// A worker. Cheap to clone.
#[derive(Clone)]
pub struct Worker {
    inner: Arc<Inner>,
}

struct Inner {
    herald: Herald,
    options: WorkerOptions,
    channels: BTreeMap<String, Arc<dyn Channel>>,
    channel_names: Vec<String>,
    /// Where finished sends queue their outcomes; started with the first one.
    recorder: OnceLock<mpsc::UnboundedSender<Recording>>,
    counts: Arc<WorkerCounts>,
    /// Set once the worker's release is recorded (before its first lease).
    registered: tokio::sync::OnceCell<()>,
    /// What this worker has in flight per lane, and where its next lease looks.
    lanes: Arc<Lanes>,
    /// Whether a wake-up during a lease may start a quick one ([`Ask::quick`]).
    quick_leases: bool,
}

/// A lease in flight beside another.
type LeaseFuture<'a> =
    dyn std::future::Future<Output = Result<Vec<(LeasedRow, Slot)>, Error>> + Send + 'a;

impl fmt::Debug for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("options", &self.inner.options)
            .field("channels", &self.inner.channel_names)
            .finish()
    }
}

impl Worker {
    /// A worker for `channels` (name → adapter). It leases only deliveries of these.
    pub fn new(
        herald: Herald,
        options: WorkerOptions,
        channels: impl IntoIterator<Item = (String, Arc<dyn Channel>)>,
    ) -> Result<Worker, Error> {
        options.validate()?;
        crate::alerts::register(crate::alerts::FINGERPRINT_MISMATCH);
        crate::alerts::register(crate::destinations::ENDPOINT_DISABLED);
        let channels: BTreeMap<_, _> = channels.into_iter().collect();
        let channel_names = channels.keys().cloned().collect();
        let (recorder, counts) = (OnceLock::new(), Arc::default());
        let registered = tokio::sync::OnceCell::new();
        let lanes = Arc::default();
        // One writer at a time on SQLite: a second lease would only wait for the first.
        let quick_leases = herald.backend() != herald_store::Backend::Sqlite;
        let inner = Inner {
            herald,
            options,
            channels,
            channel_names,
            recorder,
            counts,
            registered,
            lanes,
            quick_leases,
        };
        Ok(Worker { inner: Arc::new(inner) })
    }

    pub fn options(&self) -> &WorkerOptions {
        &self.inner.options
    }

    /// What this worker's transactions did so far.
    pub fn stats(&self) -> WorkerStats {
        let c = &self.inner.counts;
        WorkerStats {
            lease_transactions: c.lease_transactions.load(Ordering::Relaxed),
            record_transactions: c.record_transactions.load(Ordering::Relaxed),
            leased: c.leased.load(Ordering::Relaxed),
            quick_leases: c.quick_leases.load(Ordering::Relaxed),
        }
    }

    /// Leases up to the free slots (all of them, once), sends everything leased, and
    /// returns when every outcome is recorded. Tests drive this instead of sleeping.
    pub async fn run_once(&self) -> Result<RunReport, Error> {
        let leased = self.lease(self.inner.options.slots, false).await?;
        let mut report = RunReport { leased: leased.len(), ..RunReport::default() };
        let mut sends = JoinSet::new();
        for (row, slot) in leased {
            let inner = self.inner.clone();
            sends.spawn(async move {
                let _slot = slot;
                inner.execute(row).await
            });
        }
        while let Some(joined) = sends.join_next().await {
            match joined {
                Ok(Ok(decision)) => report.count(decision),
                Ok(Err(e)) => return Err(e),
                Err(e) => return Err(Error::app(format!("send task failed: {e}"))),
            }
        }
        Ok(report)
    }

    /// Runs until `shutdown` is cancelled, then shuts down as described above.
    pub async fn run(&self, shutdown: CancellationToken) -> Result<(), Error> {
        let options = &self.inner.options;
        // Each send's task ends with its lease and whether its outcome was recorded.
        let mut inflight: JoinSet<(LeaseKey, bool)> = JoinSet::new();
        let mut known = KnownLeases::new(options.lease);
        let mut listener = Listener::default();
        let hearing = Hearing::start(
            &self.inner.herald,
            &options.id,
            options.wake_listen,
            options.wake_advertise.as_deref(),
        )
        .await?;
        let mut hot_until = Instant::now();
        // Below this many free slots, while sends are in flight, the worker waits (at most
        // LEASE_COOLDOWN) for more to finish: a busy worker takes fewer, larger leases instead
        // of a few rows per finished send. (No drain figure moved measurably either way on
        // the bench's machine; it bounds the lease statements per delivery.)
        let low_water = (options.slots.min(LEASE_BATCH_MAX) / 4).max(1);
        let mut last_lease = Instant::now();
        // Woken (a wake-up or a NOTIFY) since the last pass: see `quickly` below.
        let mut woken = false;
        loop {
            if shutdown.is_cancelled() {
                break;
            }
            let wake = self.inner.herald.wake().clone();
            let notified = wake.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            listener.ensure(&self.inner.herald).await;

            // Finished sends still sit in the set until joined: reap them all, or the
            // free-slot count lags and the worker leases one delivery at a time.
            while let Some(joined) = inflight.try_join_next() {
                settle(&mut known, joined);
            }
            if known.check_due(Instant::now()) {
                self.hand_back_orphans(&mut known).await;
            }
            let mut free = options.slots.saturating_sub(inflight.len());
            let cooling =
                free < low_water && !inflight.is_empty() && last_lease.elapsed() < LEASE_COOLDOWN;
            let (mut leased_count, mut asked) = (0, 0);
            // Where a quick lease is one statement, a wake-up while lanes share is served by
            // one at once (one row of each lane with nothing in flight here); the full lease
            // keeps its own pace (the hot poll, a send's end), so what arrives never waits
            // for a lease of another lane's backlog (docs/perf.md, issue 36).
            let quickly = std::mem::take(&mut woken)
                && self.inner.quick_leases
                && self.inner.herald.store().backend().leases_quickly()
                && self.inner.lanes.shared_recently();
            if quickly && free > 0 {
                let leased = self.lease(free, true).await;
                let started = self.start_sends(leased, &shutdown, &mut known, &mut inflight).await;
                free = free.saturating_sub(started);
            }
            let paced = quickly && last_lease.elapsed() < HOT_POLL_EVERY;
            if free > 0 && !cooling && !paced {
                last_lease = Instant::now();
                // While lanes share this worker, a lease leaves an eighth of the free slots
                // (at least one, of two or more) for quick leases: a wake-up while it is in
                // flight starts one, which takes one row of each lane with nothing in flight
                // here, so what arrives in a new lane does not wait out a lease of a backlog
                // (docs/perf.md, issue 36).
                let quick_on = self.inner.quick_leases && self.inner.lanes.shared_recently();
                let wanted = free.min(LEASE_BATCH_MAX);
                let keep = if quick_on && free >= 2 { free.div_ceil(8) } else { 0 };
                let wanted = wanted.min(free - keep);
                let mut room = free - wanted;
                asked = wanted;
                let lease = self.lease(wanted, false);
                tokio::pin!(lease);
                let mut quick: Option<Pin<Box<LeaseFuture<'_>>>> = None;
                let leased = loop {
                    tokio::select! {
                        leased = &mut lease => break leased,
                        _ = &mut notified, if quick_on && quick.is_none() && room > 0 => {
                            notified.set(wake.notified());
                            notified.as_mut().enable();
                            quick = Some(Box::pin(self.lease(room, true)));
                        }
                        leased = async {
                            match quick.as_mut() {
                                Some(q) => q.await,
                                None => std::future::pending().await,
                            }
                        }, if quick.is_some() => {
                            quick = None;
                            let n = self.start_sends(leased, &shutdown, &mut known, &mut inflight).await;
                            room = room.saturating_sub(n);
                        }
                    }
                };
                leased_count = self.start_sends(leased, &shutdown, &mut known, &mut inflight).await;
                if let Some(q) = quick {
                    self.start_sends(q.await, &shutdown, &mut known, &mut inflight).await;
                }
            }
            if leased_count > 0 {
                hot_until = Instant::now() + HOT_FOR;
                if leased_count == asked {
                    continue; // there may be more due right now
                }
            }
            let mut wait =
                if Instant::now() < hot_until { HOT_POLL_EVERY } else { options.poll_interval };
            if cooling {
                wait = wait.min(LEASE_COOLDOWN.saturating_sub(last_lease.elapsed()));
            }
            if let Some(at) = self.inner.lanes.wake_at() {
                // A paused lane, or an open circuit's probe, is due then.
                let soon = at.saturating_duration_since(std::time::Instant::now());
                wait = wait.min(soon.max(HOT_POLL_EVERY));
            }
            tokio::select! {
                _ = shutdown.cancelled() => break,
                Some(joined) = inflight.join_next(), if !inflight.is_empty() => {
                    settle(&mut known, joined);
                }
                _ = &mut notified => (hot_until, woken) = (Instant::now() + HOT_FOR, true),
                _ = listener.next() => (hot_until, woken) = (Instant::now() + HOT_FOR, true),
                _ = tokio::time::sleep(wait) => {}
            }
        }
        let running = inflight.len();
        let drained = tokio::time::timeout(options.shutdown_grace, async {
            while inflight.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                running = inflight.len(),
                of = running,
                "sends still running after the shutdown grace; their leases will expire and the reconciler will re-queue them"
            );
            inflight.abort_all();
        }
        if let Some(hearing) = hearing {
            hearing.stop().await;
        }
        Ok(())
    }
}

impl RunReport {
    fn count(&mut self, decision: Option<Decision>) {
        match decision {
            Some(Decision::MarkSent { stale: false }) => self.sent += 1,
            Some(Decision::Requeue { .. }) => self.retried += 1,
            Some(Decision::Fail { .. }) => self.failed += 1,
            Some(Decision::RecordLateSent) => {
                self.stale += 1;
                self.late_sent += 1;
            }
            _ => self.stale += 1,
        }
    }
}

/// Aborts the wrapped task when dropped, so an abandoned send does not run on.
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Inner {
    /// Records which release this worker id runs; refuses an id recorded with another.
    async fn register(&self) -> Result<(), Error> {
        let (worker, release) = (self.options.id.as_str(), self.options.release.as_str());
        let now = self.herald.clock().now();
        let recorded = self
            .herald
            .transaction(|tx| {
                Box::pin(async move { Ok(worker_register(tx.conn(), worker, release, now).await?) })
            })
            .await?
            .value;
        match recorded {
            None => Ok(()),
            Some(other) => Err(Error::invalid(format!(
                "worker id {worker:?} is recorded as running release {other:?}, not {release:?}: \
                 a worker id names one process"
            ))),
        }
    }

    /// Sends one leased delivery and records its outcome, with every event it logs tagged
    /// by this delivery's span. The span instruments the future (entered on each poll,
    /// left at each await), so other tasks' events on this thread are never tagged with it.
    async fn execute(&self, row: LeasedRow) -> Result<Option<Decision>, Error> {
        let d = &row.delivery;
        let span = tracing::info_span!("attempt", delivery = %d.id, tenant = %d.tenant_id,
            operation_key = %d.operation_key, channel = %d.channel,
            destination = %row.destination, attempt = d.attempts);
        crate::traces::follow(&span, row.traceparent.as_deref());
        self.execute_in_span(row).instrument(span).await
    }

    async fn execute_in_span(&self, row: LeasedRow) -> Result<Option<Decision>, Error> {
        let d = &row.delivery;
        let n = d.attempts;
        let outcome = match self.channels.get(&d.channel) {
            None => Outcome::transient("channel_unavailable", "no adapter for this channel here"),
            Some(_) if !crate::client_fingerprint::holds(&row) => {
                crate::alerts::raise(crate::alerts::FINGERPRINT_MISMATCH);
                tracing::error!(
                    fingerprint_version = d.fingerprint_version,
                    "the fingerprint the client submitted is not that of the stored request; \
                     failing the delivery without sending it"
                );
                Outcome::terminal(
                    "fingerprint_mismatch",
                    "the fingerprint handed over with this delivery (submit_v2) is not the one \
                     herald computes from its stored request: a client forged or miscomputed \
                     it; nothing was sent",
                )
            }
            Some(channel) => {
                let payload = match serde_json::from_str::<serde_json::Value>(&row.payload) {
                    Ok(_) => Payload::from_text(row.payload.clone()),
                    // Stored by a submit as valid JSON; if it cannot be read back, sending
                    // something else in its place would be worse than failing.
                    Err(e) => {
                        return self
                            .finish(
                                row.delivery.clone(),
                                row.stripe,
                                Outcome::terminal(
                                    "payload_unreadable",
                                    format!("the stored payload is not readable JSON: {e}"),
                                ),
                            )
                            .await;
                    }
                };
                let leased = Leased {
                    id: d.id.into(),
                    tenant: d.tenant_id.into(),
                    operation_key: d.operation_key.clone(),
                    channel: d.channel.clone(),
                    to: d.recipient.clone(),
                    payload,
                    attempt: n.max(0) as u32,
                    traceparent: crate::traces::traceparent_of(&tracing::Span::current()),
                };
                let started = std::time::Instant::now();
                let outcome = self.send(channel.clone(), leased, d.id, n).await;
                metrics::histogram!("herald_send_seconds", "channel" => d.channel.clone())
                    .record(started.elapsed().as_secs_f64());
                let retry_after_max = self.options.retry.retry_after_max;
                crate::destinations::lane_outcome(
                    &self.herald,
                    &self.lanes,
                    &row,
                    &outcome,
                    retry_after_max,
                )
                .await;
                outcome
            }
        };
        crate::traces::outcome(&tracing::Span::current(), &outcome);
        self.finish(row.delivery, row.stripe, outcome).await
    }

    /// Records a send's outcome and counts it.
    async fn finish(
        &self,
        d: herald_store::deliveries::DeliveryRow,
        stripe: Option<i16>,
        outcome: Outcome,
    ) -> Result<Option<Decision>, Error> {
        let (report, retry_after, code, message) = match outcome {
            Outcome::Sent => (Report::Sent, None, None, None),
            Outcome::Transient { retry_after, code, message } => {
                (Report::Transient, retry_after, Some(code), Some(message))
            }
            Outcome::Terminal { code, message } => {
                (Report::Terminal, None, Some(code), Some(message))
            }
        };
        let (tenant, channel) = (herald_core::TenantId::from_uuid(d.tenant_id), d.channel);
        let report = AttemptReport {
            delivery: d.id.into(),
            n: d.attempts,
            worker: self.options.id.clone(),
            tenant: d.tenant_id.into(),
            quota_key: d.quota_key,
            stripe,
            report,
            retry_after,
            jitter: fastrand::f64(),
            error_code: code,
            error_message: message,
        };
        let decision = self.record(report).await?;
        let outcome_label = match decision.and_then(Decision::attempt_outcome) {
            Some(o) => o.as_str(),
            None => "stale_ignored",
        };
        metrics::counter!("herald_attempts_total", "outcome" => outcome_label).increment(1);
        if let Some(counted) = Counted::of(decision) {
            self.herald.count_outcome(tenant, &channel, counted);
        }
        if decision == Some(Decision::RecordLateSent) {
            tracing::warn!("late sent: the delivery had already failed or been cancelled");
        }
        tracing::debug!(?decision, "outcome recorded");
        Ok(decision)
    }

    /// Queues an outcome for the recorder and waits until it is committed: the send's
    /// slot stays taken until then, so a slow database slows leasing down.
    async fn record(&self, report: AttemptReport) -> Result<Option<Decision>, Error> {
        let queue = self.recorder.get_or_init(|| {
            let (queue, pending) = mpsc::unbounded_channel();
            let recorder = Recorder {
                herald: self.herald.clone(),
                worker: self.options.id.clone(),
                retry: self.options.retry,
                retry_for: self.options.lease,
                counts: self.counts.clone(),
            };
            tokio::spawn(recorder.run(pending));
            queue
        });
        let (reply, decision) = oneshot::channel();
        queue
            .send(Recording { report, reply })
            .map_err(|_| Error::app("the outcome recorder has stopped"))?;
        decision.await.map_err(|_| Error::app("the outcome recorder has stopped"))?
    }

    /// Runs the channel's send in its own task (a panic becomes a transient outcome),
    /// under the send timeout, extending the lease every third of its length meanwhile.
    async fn send(
        &self,
        channel: Arc<dyn Channel>,
        leased: Leased,
        id: uuid::Uuid,
        n: i32,
    ) -> Outcome {
        let mut task = AbortOnDrop(tokio::spawn(async move { channel.send(&leased).await }));
        let heartbeat = async {
            let every = self.options.heartbeat_every.unwrap_or(self.options.lease / 3);
            loop {
                tokio::time::sleep(every).await;
                let (worker, lease, now) =
                    (self.options.id.as_str(), self.options.lease, self.herald.clock().now());
                // Boxed: inline, this rarely-run transaction made every send's task ~11 KB,
                // copied at each spawn (a quarter of the worker's CPU in a no-op drain).
                let extended = Box::pin(self.herald.transaction(|tx| {
                    Box::pin(async move {
                        Ok(delivery_lease_extend(tx.conn(), id, worker, n, lease, now).await?)
                    })
                }))
                .await;
                if !matches!(extended, Ok(Committed { value: true, .. })) {
                    tracing::warn!("lease could not be extended; the outcome will be fenced");
                }
            }
        };
        tokio::select! {
            joined = tokio::time::timeout(self.options.send_timeout, &mut task.0) => match joined {
                Err(_elapsed) => Outcome::transient("timeout", "the send timed out"),
                Ok(Err(e)) if e.is_panic() => Outcome::transient("panic", "the channel panicked"),
                Ok(Err(_)) => Outcome::transient("cancelled", "the send was cancelled"),
                Ok(Ok(outcome)) => outcome,
            },
            () = heartbeat => Outcome::transient("heartbeat", "unreachable"),
        }
    }

    async fn hand_back(&self, row: &LeasedRow) {
        let (id, worker, n) = (row.delivery.id, self.options.id.as_str(), row.delivery.attempts);
        let result = self
            .herald
            .transaction(|tx| {
                Box::pin(async move { Ok(delivery_hand_back(tx.conn(), id, worker, n).await?) })
            })
            .await;
        if let Err(e) = result {
            tracing::warn!(delivery = %id, error = %e, "hand-back failed; the lease will expire");
        }
    }
}

use crate::runner::Committed;

/// Notes a finished send task's lease as ended (a task that panicked or was aborted
/// keeps its lease among the known ones: it is never taken for an orphan).
fn settle(known: &mut KnownLeases, joined: Result<(LeaseKey, bool), tokio::task::JoinError>) {
    if let Ok((lease, recorded)) = joined {
        known.ended(lease, recorded);
    }
}

/// Longest a busy worker with few free slots waits for more before leasing anyway.
const LEASE_COOLDOWN: Duration = Duration::from_millis(5);
/// A lease statement whose COMMIT went unanswered has ended on the server by this long
/// after the worker heard of it: the runner's default deadline caps its statement bound,
/// plus a second for the servers' rounding (InnoDB's lock wait takes whole seconds).
const OUTCOME_SETTLES_WITHIN: Duration =
    Duration::from_secs(herald_core::limits::TX_DEADLINE_DEFAULT.as_secs() + 1);
