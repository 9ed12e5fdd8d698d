//! The harness of `herald bench`: C clients sharing N operations, progress bars, a worker
//! with a counting no-op channel. herald and its SQL floor run through the same code here,
//! with the same concurrency, so a ratio between them is about the work and not the
//! harness.

use anyhow::{Context, Result, bail};
use herald::bench::{Commit, Work};
use herald::{
    Channel, DeliveryState, Herald, Leased, Outcome, SubmitRequest, Worker, WorkerOptions,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Longest any of herald's waits for a drain may take.
pub(super) const DRAIN_TIMEOUT: Duration = Duration::from_secs(600);

/// What every phase of one backend shares: the library, its tenants, the clients.
pub(super) struct Bench {
    pub(super) herald: Herald,
    pub(super) tenants: Vec<herald::TenantId>,
    pub(super) clients: usize,
}

pub(super) fn rate(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64().max(1e-9)
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
pub(super) fn bar(len: usize, phase: &str) -> ProgressBar {
    let style = ProgressStyle::with_template(
        "{msg:<40} [{wide_bar}] {pos:>6}/{len:<6} {rate:>8} {elapsed:>4}",
    )
    .map(|s| {
        s.progress_chars("=> ").with_key(
            "rate",
            |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                let _ = write!(w, "{:.0}/s", state.per_sec());
            },
        )
    })
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    let bar = ProgressBar::with_draw_target(Some(len as u64), ProgressDrawTarget::stderr());
    bar.set_style(style);
    bar.set_message(phase.to_string());
    bar
}

/// A spinner on stderr for work whose progress cannot be counted (a peer's phase).
pub(super) fn spinner(what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{msg:<40} {spinner} {elapsed:>4}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    bar.set_message(what.to_string());
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

impl Bench {
    pub(super) fn request(&self, tenant: herald::TenantId, key: String, to: &str) -> SubmitRequest {
        SubmitRequest::new(tenant, key, "webhook", to, json!({"event": "bench"}))
    }

    /// `n` operations split over the clients; returns the elapsed time.
    pub(super) async fn clients<F, Fut>(
        &self,
        n: usize,
        bar: &ProgressBar,
        op: F,
    ) -> Result<Duration>
    where
        F: Fn(usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<()>> + Send,
    {
        let started = Instant::now();
        spawn_clients(self.clients, n, bar, op).await?;
        Ok(started.elapsed())
    }

    pub(super) async fn submit_herald(
        &self,
        n: usize,
        prefix: &str,
        tenants: &[herald::TenantId],
        repeat_half: bool,
        commit: Commit,
        bar: &ProgressBar,
    ) -> Result<Duration> {
        let started = Instant::now();
        let to = "https://example.com/hooks";
        self.submit_herald_to(n, prefix, tenants, repeat_half, to, commit, bar).await?;
        Ok(started.elapsed())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) async fn submit_herald_to(
        &self,
        n: usize,
        prefix: &str,
        tenants: &[herald::TenantId],
        repeat_half: bool,
        to: &str,
        commit: Commit,
        bar: &ProgressBar,
    ) -> Result<()> {
        let herald = self.herald.clone();
        let requests: Arc<Vec<SubmitRequest>> = Arc::new(
            (0..n)
                .map(|i| {
                    let k = if repeat_half { i / 2 } else { i };
                    self.request(tenants[k % tenants.len()], format!("{prefix}-{k}"), to)
                })
                .collect(),
        );
        self.clients(n, bar, move |i| {
            let (herald, requests) = (herald.clone(), requests.clone());
            async move {
                submit_one(&herald, &requests[i], commit).await?;
                Ok(())
            }
        })
        .await?;
        Ok(())
    }

    pub(super) async fn submit_floor(
        &self,
        n: usize,
        prefix: &str,
        commit: Commit,
        bar: &ProgressBar,
    ) -> Result<Duration> {
        let (herald, tenants, prefix) =
            (self.herald.clone(), self.tenants.clone(), prefix.to_string());
        self.clients(n, bar, move |i| {
            let (herald, tenant, key) =
                (herald.clone(), tenants[i % tenants.len()], format!("{prefix}-{i}"));
            async move {
                herald::bench::floor_submit(&herald, commit, tenant.as_uuid(), &key).await?;
                Ok(())
            }
        })
        .await
    }

    /// `n` submits through the SQL API (`herald_submit_v1`), one autocommitted statement
    /// each, spread over the tenants like the library's.
    pub(super) async fn submit_sql(
        &self,
        n: usize,
        prefix: &str,
        payload: &str,
        version: herald::bench::SqlSubmit,
        bar: &ProgressBar,
    ) -> Result<Duration> {
        let (herald, tenants, prefix, payload) =
            (self.herald.clone(), self.tenants.clone(), prefix.to_string(), payload.to_string());
        let payload = Arc::new(payload);
        self.clients(n, bar, move |i| {
            let (herald, tenant, key, payload) = (
                herald.clone(),
                tenants[i % tenants.len()],
                format!("{prefix}-{i}"),
                payload.clone(),
            );
            async move {
                herald::bench::sql_submit(&herald, tenant.as_uuid(), &key, &payload, version)
                    .await?;
                Ok(())
            }
        })
        .await
    }

    /// Drains in batches of `batch` over C parts. With `until: None`, each part stops at
    /// its first empty batch (everything was submitted before: the caller analyzes the
    /// tables first, untimed, as for herald's drain); with `Some(n)`, the parts
    /// keep polling (1 ms apart when a batch comes back empty) until `n` rows were drained
    /// in all — submits are still arriving.
    pub(super) async fn drain_floor(
        &self,
        batch: i64,
        until: Option<usize>,
        bar: &ProgressBar,
    ) -> Result<(usize, Duration)> {
        let done = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        let parts = self.clients as i64;
        for part in 0..parts {
            let (herald, done, bar) = (self.herald.clone(), done.clone(), bar.clone());
            tasks.spawn(async move {
                loop {
                    if until.is_some_and(|n| done.load(Ordering::Relaxed) >= n) {
                        return Ok::<_, anyhow::Error>(());
                    }
                    // Each client drains its own share of the tenants (no deadlocks between
                    // batches); a concurrency error is still retried, like pgbench --max-tries.
                    let Some(n) = herald::bench::floor_drain(&herald, batch, part, parts).await?
                    else {
                        continue;
                    };
                    if n == 0 {
                        if until.is_none() {
                            return Ok(());
                        }
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        continue;
                    }
                    done.fetch_add(n as usize, Ordering::Relaxed);
                    bar.inc(n);
                }
            });
        }
        let joined = tokio::time::timeout(DRAIN_TIMEOUT, async {
            while let Some(joined) = tasks.join_next().await {
                joined??;
            }
            Ok::<_, anyhow::Error>(())
        })
        .await;
        joined.context("the floor's drain did not finish")??;
        Ok((done.load(Ordering::Relaxed), started.elapsed()))
    }

    /// Empty delivery tables: each compared phase starts from the same sizes.
    pub(super) async fn reset(&self) -> Result<()> {
        Ok(herald::bench::reset(&self.herald).await?)
    }

    /// Fresh planner statistics before a timed drain of pre-submitted rows (see
    /// `herald::bench::analyze`): the floor and herald each get them, untimed.
    pub(super) async fn analyze(&self) -> Result<()> {
        Ok(herald::bench::analyze(&self.herald).await?)
    }

    /// The database's work counters (`herald::bench::Work`), read once PostgreSQL's
    /// statistics of what ran before have settled; `None` on SQLite.
    pub(super) async fn work(&self) -> Result<Option<Work>> {
        if self.herald.backend() == herald::Backend::Postgres {
            tokio::time::sleep(Work::SETTLE).await;
        }
        Ok(herald::bench::work(&self.herald).await?)
    }

    /// Runs `phase` between two reads of the work counters: its result, and the work the
    /// database did meanwhile (everything on the server: nothing else may run).
    pub(super) async fn counted<T>(
        &self,
        phase: impl Future<Output = Result<T>>,
    ) -> Result<(T, Option<Work>)> {
        self.counted_if(true, phase).await
    }

    /// [`Bench::counted`] when `count`, else `phase` alone (no work, no wait).
    pub(super) async fn counted_if<T>(
        &self,
        count: bool,
        phase: impl Future<Output = Result<T>>,
    ) -> Result<(T, Option<Work>)> {
        if !count {
            return Ok((phase.await?, None));
        }
        let before = self.work().await?;
        let value = phase.await?;
        let after = self.work().await?;
        Ok((value, before.zip(after).map(|(b, a)| a.since(&b))))
    }

    pub(super) async fn count(&self, state: DeliveryState) -> Result<i64> {
        Ok(herald::bench::count_state(&self.herald, state).await?)
    }

    /// The units reserved on the bench's accounts, each account's ledger identity checked
    /// (granted = available + reserved + spent).
    pub(super) async fn reserved_checked(&self, label: &str) -> Result<i64> {
        let mut reserved = 0;
        for tenant in &self.tenants {
            for a in self.herald.quotas(*tenant).await? {
                if a.granted != a.available + a.reserved + a.spent {
                    bail!("{label}: the ledger does not balance on {a:?}");
                }
                reserved += a.reserved;
            }
        }
        Ok(reserved)
    }
}

/// One single-delivery submit through the library, committed as `commit` says.
pub(super) async fn submit_one(
    herald: &Herald,
    req: &SubmitRequest,
    commit: Commit,
) -> Result<herald::DeliveryId> {
    let submitted = match commit {
        Commit::Alone => herald.submit_alone(req).await?,
        Commit::InTransaction => {
            herald
                .transaction(|tx| Box::pin(async move { herald.submit(tx, req).await }))
                .await?
                .value
        }
    };
    Ok(submitted.delivery.id)
}

/// `n` operations split over `clients` tasks, each op counted on `bar`.
pub(super) async fn spawn_clients<F, Fut>(
    clients: usize,
    n: usize,
    bar: &ProgressBar,
    op: F,
) -> Result<()>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<()>> + Send,
{
    let op = Arc::new(op);
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (op, next, bar) = (op.clone(), next.clone(), bar.clone());
        tasks.spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, anyhow::Error>(());
                }
                op(i).await?;
                bar.inc(1);
            }
        });
    }
    while let Some(joined) = tasks.join_next().await {
        joined??;
    }
    Ok(())
}

/// A no-op channel that counts, and remembers when each send started (of the deliveries
/// whose operation key starts with `only`, when given: a phase's own among a backlog's).
pub(super) struct Noop {
    pub(super) only: Option<&'static str>,
    /// When the last send not counted (`only`) started, and how many such sends did.
    pub(super) other_last: Mutex<Option<Instant>>,
    pub(super) other_sent: AtomicUsize,
    pub(super) sent: AtomicUsize,
    pub(super) target: usize,
    pub(super) done: tokio::sync::Notify,
    pub(super) started: Mutex<HashMap<herald::DeliveryId, Instant>>,
    pub(super) bar: ProgressBar,
}

impl Channel for Noop {
    fn send<'a>(&'a self, d: &'a Leased) -> herald::BoxFuture<'a, Outcome> {
        Box::pin(async move {
            if self.only.is_some_and(|prefix| !d.operation_key.starts_with(prefix)) {
                if let Ok(mut last) = self.other_last.lock() {
                    *last = Some(Instant::now());
                }
                self.other_sent.fetch_add(1, Ordering::SeqCst);
                return Outcome::Sent;
            }
            if let Ok(mut started) = self.started.lock() {
                started.entry(d.id).or_insert_with(Instant::now);
            }
            self.bar.inc(1);
            if self.sent.fetch_add(1, Ordering::SeqCst) + 1 >= self.target {
                self.done.notify_one();
            }
            Outcome::Sent
        })
    }
}

pub(super) fn noop(target: usize, bar: ProgressBar) -> Arc<Noop> {
    noop_of(target, bar, None)
}

/// [`noop`] counting only the deliveries whose operation key starts with `only`.
pub(super) fn noop_of(target: usize, bar: ProgressBar, only: Option<&'static str>) -> Arc<Noop> {
    Arc::new(Noop {
        only,
        other_last: Mutex::default(),
        other_sent: AtomicUsize::new(0),
        sent: AtomicUsize::new(0),
        target,
        done: tokio::sync::Notify::new(),
        started: Mutex::default(),
        bar,
    })
}

/// The run's `--lane-take-max`, for every worker the phases make.
pub(super) static LANE_TAKE_MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
/// Whether the bench's workers listen for wake-up datagrams (`--no-wake-datagrams`).
pub(super) static WAKE_DATAGRAMS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

pub(super) fn worker(
    herald: &Herald,
    channel: Arc<dyn Channel>,
    slots: usize,
    poll: Duration,
) -> Result<Worker> {
    let lane_take_max = LANE_TAKE_MAX.get().copied().unwrap_or(herald::LANE_TAKE_MAX_DEFAULT);
    let wake_listen =
        WAKE_DATAGRAMS.get().copied().unwrap_or(true).then_some(herald::WAKE_LISTEN_DEFAULT);
    let options = WorkerOptions {
        slots,
        poll_interval: poll,
        lane_take_max,
        wake_listen,
        ..WorkerOptions::default()
    };
    Ok(Worker::new(herald.clone(), options, [("webhook".to_string(), channel)])?)
}

/// A running worker, stopped (and awaited) by `stop`.
pub(super) struct Running {
    stop: herald::CancellationToken,
    task: tokio::task::JoinHandle<Result<(), herald::Error>>,
}

pub(super) fn start(w: &Worker) -> Running {
    let stop = herald::CancellationToken::new();
    let task = tokio::spawn({
        let (w, stop) = (w.clone(), stop.clone());
        async move { w.run(stop).await }
    });
    Running { stop, task }
}

impl Running {
    pub(super) async fn stop(self) -> Result<()> {
        self.stop.cancel();
        self.task.await??;
        Ok(())
    }
}

/// The peak resident size [`before_overload`] saw, in KiB (0 until it ran).
pub(super) static PEAK_BEFORE_OVERLOAD: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(0);

/// Runs `phase` after noting the process's peak resident size so far: the open loop past
/// capacity keeps thousands of connections of its own client in this process, which then
/// hold most of its memory (and glibc keeps it after), so the figure that measures herald
/// is the one from before.
pub(super) async fn before_overload<T>(phase: impl std::future::Future<Output = T>) -> T {
    if let Some(kib) = peak_rss_kib() {
        PEAK_BEFORE_OVERLOAD.fetch_max(kib, std::sync::atomic::Ordering::Relaxed);
    }
    phase.await
}

pub(super) fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}
