//! `herald bench`: herald's speed on one PostgreSQL, as ratios to a hand-written SQL floor
//! measured in the same run with the same harness and concurrency, and against peer queues
//! run right after herald on the same database. Each of herald's phases runs in a fresh
//! schema of the given database (dropped at the end); the delivery tables are emptied
//! before each compared phase, so herald and its floor start from the same table sizes.
//!
//! # What is compared to what
//!
//! | figure | herald | floor (`herald_store::bench`) | peers (`--peers DIR`) |
//! |---|---|---|---|
//! | submit, library, submit_alone | C clients, one `Herald::submit_alone` each: on PostgreSQL one autocommitted statement | C clients, the floor's CTE (claim + payload + reservation + journal) as one autocommitted statement | `insert`: C callers, one job per call, each its own transaction, unique key |
//! | submit, library, in a transaction | C clients, one delivery per `Herald::transaction` (`BEGIN`, `submit`, `COMMIT`: a submit inside the caller's transaction) | C clients, the same CTE between `BEGIN` and `COMMIT` | — |
//! | submit, one tenant | `submit_alone`, every delivery on one quota row | the one-statement submit floor | — |
//! | submit, half the keys repeat | `submit_alone`, every key submitted twice | the one-statement submit floor | — |
//! | submit, HTTP API | C clients, keep-alive `POST /v1/deliveries` to the real router (API-key auth, validation, `submit_alone`) | the one-statement submit floor (no HTTP) | — |
//! | drain, no-op channel | a worker with `--workers` send slots, a channel that returns `Sent` | C clients, one CTE per 100 rows (lease with SKIP LOCKED + sent + ledger + journal) | `drain`: N jobs bulk-inserted untimed, a no-op handler, until all are completed in the DB |
//! | end-to-end, webhook | C clients `submit_alone` *while* a worker with the real webhook channel sends each delivery to a local HTTP receiver; time from the first submit to the N-th `sent` in the DB | the submit floor's C clients and the drain floor's C parts run at once, until all N are submitted and drained — the floor makes **no HTTP call** | `e2e`: C callers insert one job per transaction while the peer's worker drains them with a no-op handler, until all are completed (no HTTP call: this flatters the peer) |
//! | commit-to-start p50 / p99 | `submit_alone` at a fixed rate (200/s), an idle worker polling every second: time from COMMIT returned to the channel's `send` | — | `latency`: the peer's worker running, jobs inserted at a fixed rate, insert returned → handler start (procrastinate at 50/s, its drain saturates below 200/s) |
//!
//! | SQLite: submit, library / drain | the same phases on a fresh SQLite file (the default backend) | submit: `BEGIN IMMEDIATE`, claim + payload + reservation + journal row, `COMMIT`, from C clients; drain: one client, 100 rows marked sent per transaction, one account update per tenant, a journal row each | — |
//!
//! The PostgreSQL submit and drain floors run twice, before herald's submit and drain
//! phases and after them; a ratio uses the mean of the two passes (both are in the JSON as
//! `floor_passes`), so drift on a shared machine does not fall on one side only.
//!
//! Every timed drain of pre-submitted rows — herald's, the floor's, each peer's — starts
//! after an untimed `ANALYZE` of its tables, the statistics autovacuum would have given a
//! steady-state database (the bench fills tables within seconds; plans cached while they
//! were nearly empty would otherwise scan them whole). herald drains the N deliveries its
//! library submit phase made, as the floor drains its own N.
//!
//! Peer cells show the peer's figure and, in brackets, herald ÷ peer: above 1 herald is
//! faster for a rate; below 1 herald is quicker for a latency. The peers do less work per
//! job than herald (no quota ledger, no journal, no fenced completion; see
//! bench/peers/README.md), so a ratio is "herald against a queue that does less".
//!
//! Sizes: herald's phases use N deliveries (2,000 with `--quick`, 20,000 otherwise). The
//! peers use N too in a full run, except procrastinate (insert 2,000, drain and e2e 1,000,
//! latency 600 at 50/s) and the latency phase (3,000 at 200/s); `--quick` keeps the whole
//! run under three minutes with insert 1,000, drain and e2e 2,000, latency 600 at 200/s
//! (procrastinate: 500, 300, 300, 150 at 50/s). Every size is in the `--json` output.

use anyhow::{Context, Result, anyhow, bail};
use herald::channels::{WebhookChannel, WebhookOptions};
use herald::sqlx::{self, Connection};
use herald::{AsConn, Channel, Herald, Leased, Outcome, SubmitRequest, Worker, WorkerOptions};
use herald_store::bench::{bench_analyze, bench_reset, count_state, floor_drain, floor_submit};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// The default peer wrapper directory (`scripts/bench-peers` writes it), relative to the
/// current directory; used only if it exists.
const PEERS_DEFAULT: &str = "target/peers/bin";
/// The peers in the order they are run and shown; any other wrapper found runs after them.
const PEERS_KNOWN: &[&str] = &["river", "graphile-worker", "pg-boss", "procrastinate"];
/// Longest a peer phase may take before it is killed and reported as failed.
const PEER_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest any of herald's waits for a drain may take.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(600);

#[derive(clap::Args)]
pub struct Args {
    /// PostgreSQL to measure on (a fresh schema is created and dropped).
    #[arg(long, env = "HERALD_DB", default_value = "postgres://postgres@127.0.0.1:5432/test")]
    db: String,
    /// A short run (under three minutes, peers included).
    #[arg(long)]
    quick: bool,
    /// Concurrent clients for submits and the floor.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Send slots of the draining worker (2048: leases come in batches of up to 1,000 and
    /// outcomes are recorded up to 1,024 per transaction, so two batches can be in flight,
    /// one leasing while the other records — herald's best configuration for a no-op
    /// channel; 1024 slots with batches of 250 drained about a fifth slower).
    #[arg(long, default_value_t = 2048)]
    workers: usize,
    /// Tenants (100 by default, so no single quota row is the bottleneck).
    #[arg(long, default_value_t = 100)]
    tenants: usize,
    /// Also write every figure as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Directory of peer wrappers (`scripts/bench-peers`); default: target/peers/bin if it
    /// exists.
    #[arg(long, value_name = "DIR", conflicts_with = "no_peers")]
    peers: Option<PathBuf>,
    /// Do not run the peer queues.
    #[arg(long)]
    no_peers: bool,
    /// Deliveries per herald phase, overriding --quick's and the full run's (for tests).
    #[arg(long, hide = true)]
    n: Option<usize>,
    /// Only the floor, herald's library submit and its drain (for profiling the drain).
    #[arg(long, hide = true)]
    drain_only: bool,
    /// Only the end-to-end phase, floor and herald (for profiling it).
    #[arg(long, hide = true, conflicts_with = "drain_only")]
    e2e_only: bool,
}

/// The URL prints without its password.
impl std::fmt::Debug for Args {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Args")
            .field("db", &herald_core::redact_url(&self.db))
            .field("quick", &self.quick)
            .field("clients", &self.clients)
            .field("workers", &self.workers)
            .field("tenants", &self.tenants)
            .field("json", &self.json)
            .field("peers", &self.peers)
            .field("no_peers", &self.no_peers)
            .field("n", &self.n)
            .field("drain_only", &self.drain_only)
            .field("e2e_only", &self.e2e_only)
            .finish()
    }
}

/// How a figure compares to a peer's: which peer phase, and which of its numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PeerMetric {
    Insert,
    Drain,
    EndToEnd,
    LatencyP50,
    LatencyP99,
}

/// A peer's value for one figure.
#[derive(Debug, Clone, Default, serde::Serialize)]
struct PeerCell {
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<f64>,
    unit: &'static str,
    /// herald's value divided by the peer's.
    #[serde(skip_serializing_if = "Option::is_none")]
    herald_per_peer: Option<f64>,
    phase: &'static str,
    n: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_per_sec: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    config: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    seconds: Option<f64>,
    /// The phase's achieved rate (for latency: the insert rate actually reached).
    #[serde(skip_serializing_if = "Option::is_none")]
    per_sec: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed: Option<String>,
}

/// One measured figure.
#[derive(Debug, Clone, serde::Serialize)]
struct Figure {
    name: String,
    value: f64,
    unit: &'static str,
    floor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ratio_to_floor: Option<f64>,
    /// Deliveries (or operations) the figure was measured over.
    n: usize,
    /// The floor's passes when it ran more than once (`floor` is their mean).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    floor_passes: Vec<f64>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    peers: BTreeMap<String, PeerCell>,
    #[serde(skip)]
    compare: Option<PeerMetric>,
}

impl Figure {
    fn floor_passes(mut self, passes: &[f64]) -> Self {
        self.floor_passes = passes.to_vec();
        self
    }
}

fn figure(
    name: impl Into<String>,
    value: f64,
    unit: &'static str,
    floor: Option<f64>,
    n: usize,
    compare: Option<PeerMetric>,
) -> Figure {
    Figure {
        name: name.into(),
        value,
        unit,
        floor,
        ratio_to_floor: floor.map(|f| value / f),
        n,
        floor_passes: Vec::new(),
        peers: BTreeMap::new(),
        compare,
    }
}

struct Bench {
    herald: Herald,
    tenants: Vec<Uuid>,
    clients: usize,
}

/// How each single-delivery submit commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Commit {
    /// `BEGIN`, the submit, `COMMIT`: a submit inside the caller's transaction.
    InTransaction,
    /// One autocommitted statement: herald's `submit_alone`, the floor's CTE alone.
    Alone,
}

fn rate(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64().max(1e-9)
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
fn bar(len: usize, phase: &str) -> ProgressBar {
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
fn spinner(what: &str) -> ProgressBar {
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
    fn request(&self, tenant: Uuid, key: String, to: &str) -> SubmitRequest {
        SubmitRequest::new(tenant, key, "webhook", to, json!({"event": "bench"}))
    }

    /// `n` operations split over the clients; returns the elapsed time.
    async fn clients<F, Fut>(&self, n: usize, bar: &ProgressBar, op: F) -> Result<Duration>
    where
        F: Fn(usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<()>> + Send,
    {
        let started = Instant::now();
        spawn_clients(self.clients, n, bar, op).await?;
        Ok(started.elapsed())
    }

    async fn submit_herald(
        &self,
        n: usize,
        prefix: &str,
        tenants: &[Uuid],
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
    async fn submit_herald_to(
        &self,
        n: usize,
        prefix: &str,
        tenants: &[Uuid],
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

    async fn submit_floor(
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
                let pool = herald.store().postgres_pool().context("the floor needs PostgreSQL")?;
                let id = Uuid::now_v7();
                match commit {
                    Commit::InTransaction => {
                        let mut tx = pool.begin().await?;
                        floor_submit(tx.as_conn(), id, tenant, &key).await?;
                        tx.commit().await?;
                    }
                    Commit::Alone => {
                        floor_submit(pool.acquire().await?.as_conn(), id, tenant, &key).await?;
                    }
                }
                Ok(())
            }
        })
        .await
    }

    /// Drains in batches of `batch` over C parts. With `until: None`, each part stops at
    /// its first empty batch (everything was submitted before); with `Some(n)`, the parts
    /// keep polling (1 ms apart when a batch comes back empty) until `n` rows were drained
    /// in all — submits are still arriving.
    async fn drain_floor(
        &self,
        batch: i64,
        until: Option<usize>,
        bar: &ProgressBar,
    ) -> Result<(usize, Duration)> {
        if until.is_none() {
            self.analyze().await?;
        }
        let done = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        let parts = self.clients as i64;
        for part in 0..parts {
            let (herald, done, bar) = (self.herald.clone(), done.clone(), bar.clone());
            tasks.spawn(async move {
                let pool =
                    herald.store().postgres_pool().context("the floor needs PostgreSQL")?.clone();
                loop {
                    if until.is_some_and(|n| done.load(Ordering::Relaxed) >= n) {
                        return Ok::<_, anyhow::Error>(());
                    }
                    // Each client drains its own share of the tenants (no deadlocks between
                    // batches); a concurrency error is still retried, like pgbench --max-tries.
                    let mut tx = pool.begin().await?;
                    let n = match floor_drain(tx.as_conn(), batch, part, parts).await {
                        Ok(n) => n,
                        Err(e) if matches!(e.class(), herald_store::ErrorClass::Concurrency(_)) => {
                            let _ = tx.rollback().await;
                            continue;
                        }
                        Err(e) => return Err(e.into()),
                    };
                    tx.commit().await?;
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
    async fn reset(&self) -> Result<()> {
        self.herald
            .transaction(|tx| Box::pin(async move { Ok(bench_reset(tx.conn()).await?) }))
            .await?;
        Ok(())
    }

    /// Fresh planner statistics before a timed drain of pre-submitted rows (see
    /// `bench_analyze`): the floor and herald each get them, untimed.
    async fn analyze(&self) -> Result<()> {
        self.herald
            .transaction(|tx| Box::pin(async move { Ok(bench_analyze(tx.conn()).await?) }))
            .await?;
        Ok(())
    }

    async fn count(&self, state: &'static str) -> Result<i64> {
        Ok(self
            .herald
            .transaction(|tx| Box::pin(async move { Ok(count_state(tx.conn(), state).await?) }))
            .await?
            .value)
    }
}

/// One single-delivery submit through the library, committed as `commit` says.
async fn submit_one(herald: &Herald, req: &SubmitRequest, commit: Commit) -> Result<Uuid> {
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
async fn spawn_clients<F, Fut>(clients: usize, n: usize, bar: &ProgressBar, op: F) -> Result<()>
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

/// A no-op channel that counts, and remembers when each send started.
struct Noop {
    sent: AtomicUsize,
    target: usize,
    done: tokio::sync::Notify,
    started: Mutex<HashMap<Uuid, Instant>>,
    bar: ProgressBar,
}

impl Channel for Noop {
    fn send<'a>(&'a self, d: &'a Leased) -> herald::BoxFuture<'a, Outcome> {
        Box::pin(async move {
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

fn noop(target: usize, bar: ProgressBar) -> Arc<Noop> {
    Arc::new(Noop {
        sent: AtomicUsize::new(0),
        target,
        done: tokio::sync::Notify::new(),
        started: Mutex::default(),
        bar,
    })
}

fn worker(
    herald: &Herald,
    channel: Arc<dyn Channel>,
    slots: usize,
    poll: Duration,
) -> Result<Worker> {
    let options = WorkerOptions { slots, poll_interval: poll, ..WorkerOptions::default() };
    Ok(Worker::new(herald.clone(), options, [("webhook".to_string(), channel)])?)
}

/// A running worker, stopped (and awaited) by `stop`.
struct Running {
    stop: herald::CancellationToken,
    task: tokio::task::JoinHandle<Result<(), herald::Error>>,
}

fn start(w: &Worker) -> Running {
    let stop = herald::CancellationToken::new();
    let task = tokio::spawn({
        let (w, stop) = (w.clone(), stop.clone());
        async move { w.run(stop).await }
    });
    Running { stop, task }
}

impl Running {
    async fn stop(self) -> Result<()> {
        self.stop.cancel();
        self.task.await??;
        Ok(())
    }
}

fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Where the peer wrappers are, if any should run.
fn peers_dir(args: &Args) -> Result<Option<PathBuf>> {
    if args.no_peers {
        return Ok(None);
    }
    match &args.peers {
        Some(dir) if dir.is_dir() => Ok(Some(dir.clone())),
        Some(dir) => bail!(
            "--peers {}: no such directory (build the wrappers with scripts/bench-peers)",
            dir.display()
        ),
        None if Path::new(PEERS_DEFAULT).is_dir() => Ok(Some(PathBuf::from(PEERS_DEFAULT))),
        None => {
            eprintln!(
                "note: no peers measured ({PEERS_DEFAULT} not found; build the wrappers with \
                 scripts/bench-peers, or pass --peers DIR or --no-peers)"
            );
            Ok(None)
        }
    }
}

/// The wrappers in `dir`: the known peers first, in their order, then any other.
fn peer_wrappers(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut others = Vec::new();
    let mut known = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if name.starts_with('.') || name.ends_with(".tmp") || !path.is_file() {
            continue;
        }
        match PEERS_KNOWN.iter().position(|k| *k == name) {
            Some(i) => known.push((i, name, path)),
            None => others.push((name, path)),
        }
    }
    known.sort_by_key(|(i, _, _)| *i);
    others.sort();
    Ok(known.into_iter().map(|(_, n, p)| (n, p)).chain(others).collect())
}

pub async fn run(args: Args) -> Result<()> {
    if !args.db.starts_with("postgres") {
        bail!("herald bench measures on PostgreSQL: pass --db postgres://…");
    }
    if args.tenants < 1 || args.clients < 1 || args.workers < 1 {
        bail!("--tenants, --clients and --workers must be at least 1");
    }
    if args.n.is_some_and(|n| n < 10) {
        bail!("--n must be at least 10");
    }
    WorkerOptions { slots: args.workers, ..WorkerOptions::default() }
        .validate()
        .context("--workers")?;
    let peers = peers_dir(&args)?;
    let n = args.n.unwrap_or(if args.quick { 2_000 } else { 20_000 });
    let mut admin =
        sqlx::PgConnection::connect(&args.db).await.context("connecting to PostgreSQL")?;
    let max_connections: i64 = sqlx::query_scalar::<_, String>("SHOW max_connections")
        .fetch_one(&mut admin)
        .await?
        .parse()
        .context("PostgreSQL's max_connections")?;
    // The end-to-end floor holds 2 × clients connections at once; herald's pool gets room
    // for that plus the worker, within what PostgreSQL allows (a few kept spare).
    let available = (max_connections - 10).max(1) as usize;
    if 2 * args.clients + 4 > available {
        bail!(
            "--clients {} needs about {} connections, PostgreSQL allows {max_connections} \
             (max_connections): use at most {} clients",
            args.clients,
            2 * args.clients + 4,
            available.saturating_sub(4) / 2
        );
    }
    let connections = (2 * args.clients + 24).min(available);
    let schema = format!("herald_bench_{}", Uuid::now_v7().simple());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut admin)
        .await?;
    let version: String = sqlx::query_scalar("SHOW server_version").fetch_one(&mut admin).await?;
    let result = measure(&args, n, &schema, connections, &version, peers.as_deref()).await;
    let dropped = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&mut admin)
        .await;
    let _ = admin.close().await;
    let mut figures = result?;
    dropped?;
    let mut peer_runs = Vec::new();
    if !args.drain_only && !args.e2e_only {
        figures.extend(sqlite_phases(&args, n).await?);
        if let Some(dir) = &peers {
            peer_runs = run_peers(&args, n, dir).await?;
            attach_peers(&mut figures, &peer_runs);
        }
    }
    print_table(&figures, &peer_runs);
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&figures)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The floor's rates of one pass.
#[derive(Debug, Clone, Copy)]
struct FloorPass {
    submit_in_tx: f64,
    submit_alone: f64,
    drain: f64,
}

/// One pass of the floor on emptied tables: N submits from C clients inside transactions
/// (skipped with `--drain-only`), N more as single statements, then a drain of those in
/// batches of 100.
async fn floor_pass(bench: &Bench, n: usize, pass: &str, in_tx: bool) -> Result<FloorPass> {
    let mut submit_in_tx = 0.0;
    if in_tx {
        bench.reset().await?;
        let b = bar(n, &format!("floor ({pass}): submit in a transaction"));
        submit_in_tx = rate(n, bench.submit_floor(n, "floor", Commit::InTransaction, &b).await?);
        b.finish();
    }
    bench.reset().await?;
    let b = bar(n, &format!("floor ({pass}): submit, one statement"));
    let submit_alone = rate(n, bench.submit_floor(n, "floor", Commit::Alone, &b).await?);
    b.finish();
    let b = bar(n, &format!("floor ({pass}): drain (batches of 100)"));
    let (drained, elapsed) = bench.drain_floor(100, None, &b).await?;
    b.finish();
    Ok(FloorPass { submit_in_tx, submit_alone, drain: rate(drained, elapsed) })
}

/// Drains every pending delivery with a no-op channel and `slots` send slots; returns how
/// many and the rate, timed until the last outcome is committed.
async fn drain_herald(bench: &Bench, slots: usize, label: &str) -> Result<(usize, f64)> {
    bench.analyze().await?;
    let pending = bench.count("pending").await? as usize;
    let b = bar(pending, label);
    let channel = noop(pending, b.clone());
    let w = worker(&bench.herald, channel.clone(), slots, Duration::from_millis(50))?;
    let started = Instant::now();
    let running = start(&w);
    tokio::time::timeout(DRAIN_TIMEOUT, channel.done.notified())
        .await
        .context("drain did not finish")?;
    // The channel has seen every send; the phase ends when the last outcome is committed.
    tokio::time::timeout(DRAIN_TIMEOUT, async {
        while (bench.count("sent").await? as usize) < pending {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        Ok::<_, anyhow::Error>(())
    })
    .await
    .context("drain: outcomes were not all recorded")??;
    let drain = rate(pending, started.elapsed());
    running.stop().await?;
    b.finish();
    Ok((pending, drain))
}

/// The SQLite default, where it applies: submit and drain through the library on a fresh
/// file, against the same work hand-written (SQLite has one writer at a time, so the floor
/// drains from one client; submits take `BEGIN IMMEDIATE`, as herald does).
async fn sqlite_phases(args: &Args, n: usize) -> Result<Vec<Figure>> {
    let dir = std::env::temp_dir().join(format!("herald-bench-{}", Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let result = async {
        let herald = Herald::open(&format!("sqlite://{}", dir.join("bench.db").display())).await?;
        let mut tenants = Vec::with_capacity(args.tenants);
        for i in 0..args.tenants {
            let t = herald.tenant_create(&format!("bench-{i}")).await?.id;
            herald.quota_grant(t, "webhook", 1_000_000_000, None).await?;
            tenants.push(t);
        }
        let bench =
            Bench { herald: herald.clone(), tenants: tenants.clone(), clients: args.clients };
        let pool = herald.store().sqlite_pool().context("a SQLite store")?.clone();

        let b = bar(n, "SQLite floor: submit");
        let started = Instant::now();
        let (floor_pool, floor_tenants) = (pool.clone(), tenants.clone());
        spawn_clients(args.clients, n, &b, move |i| {
            let (pool, tenant) = (floor_pool.clone(), floor_tenants[i % floor_tenants.len()]);
            async move {
                let mut c = pool.acquire().await?;
                sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *c).await?;
                let key = format!("floor-{i}");
                match floor_submit(c.as_conn(), Uuid::now_v7(), tenant, &key).await {
                    Ok(_) => sqlx::raw_sql("COMMIT").execute(&mut *c).await?,
                    Err(e) => {
                        sqlx::raw_sql("ROLLBACK").execute(&mut *c).await?;
                        return Err(e.into());
                    }
                };
                Ok(())
            }
        })
        .await?;
        let floor_submit_rate = rate(n, started.elapsed());
        b.finish();
        bench.analyze().await?;
        let b = bar(n, "SQLite floor: drain");
        let started = Instant::now();
        let mut c = pool.acquire().await?;
        let mut drained = 0;
        loop {
            sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *c).await?;
            let k = floor_drain(c.as_conn(), 100, 0, 1).await?;
            sqlx::raw_sql("COMMIT").execute(&mut *c).await?;
            if k == 0 {
                break;
            }
            drained += k as usize;
            b.inc(k);
        }
        drop(c);
        let floor_drain_rate = rate(drained, started.elapsed());
        b.finish();

        bench.reset().await?;
        let b = bar(n, "SQLite: submit, library");
        let submit =
            rate(n, bench.submit_herald(n, "lib", &tenants, false, Commit::Alone, &b).await?);
        b.finish();
        let label = format!("SQLite: drain, no-op channel, {} slots", args.workers);
        let (pending, drain) = drain_herald(&bench, args.workers, &label).await?;
        herald.close().await;
        Ok::<_, anyhow::Error>(vec![
            figure(
                "SQLite: submit, library, single-delivery transactions",
                submit,
                "/s",
                Some(floor_submit_rate),
                n,
                None,
            ),
            figure(label, drain, "/s", Some(floor_drain_rate), pending, None),
        ])
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The in-process HTTP receiver of the end-to-end phase: answers 200 and counts.
struct Receiver {
    hits: AtomicUsize,
    target: usize,
    done: tokio::sync::Notify,
    bar: ProgressBar,
}

async fn receive(axum::extract::State(r): axum::extract::State<Arc<Receiver>>) -> &'static str {
    r.bar.inc(1);
    if r.hits.fetch_add(1, Ordering::SeqCst) + 1 >= r.target {
        r.done.notify_one();
    }
    "ok"
}

/// Serves `router` on 127.0.0.1 on a free port until the returned token is cancelled.
async fn serve_local(
    router: axum::Router,
) -> Result<(std::net::SocketAddr, herald::CancellationToken, tokio::task::JoinHandle<()>)> {
    let listener =
        tokio::net::TcpListener::bind("127.0.0.1:0").await.context("binding 127.0.0.1")?;
    let addr = listener.local_addr()?;
    let stop = herald::CancellationToken::new();
    let task = tokio::spawn({
        let stop = stop.clone();
        async move {
            if let Err(e) = axum::serve(listener, router)
                .with_graceful_shutdown(async move { stop.cancelled().await })
                .await
            {
                eprintln!("bench: a local HTTP server failed: {e}");
            }
        }
    });
    Ok((addr, stop, task))
}

/// The HTTP API on 127.0.0.1 through the server loop `herald serve` uses (its limits,
/// timeouts and JSON head errors), so the HTTP phase measures what ships; room for one
/// connection per client.
async fn serve_api_local(
    router: axum::Router,
    clients: usize,
) -> Result<(std::net::SocketAddr, herald::CancellationToken, tokio::task::JoinHandle<()>)> {
    let listener =
        tokio::net::TcpListener::bind("127.0.0.1:0").await.context("binding 127.0.0.1")?;
    let addr = listener.local_addr()?;
    let stop = herald::CancellationToken::new();
    let options = herald_server::listen::HttpOptions {
        connections_max: clients.max(herald_server::listen::CONNECTIONS_MAX_DEFAULT),
        ..herald_server::listen::HttpOptions::default()
    };
    let task = tokio::spawn(herald_server::listen::serve(listener, router, options, stop.clone()));
    Ok((addr, stop, task))
}

async fn stop_local(stop: herald::CancellationToken, task: tokio::task::JoinHandle<()>) {
    stop.cancel();
    let abort = task.abort_handle();
    if tokio::time::timeout(Duration::from_secs(5), task).await.is_err() {
        abort.abort();
    }
}

async fn measure(
    args: &Args,
    n: usize,
    schema: &str,
    connections: usize,
    version: &str,
    peers: Option<&Path>,
) -> Result<Vec<Figure>> {
    let sep = if args.db.contains('?') { '&' } else { '?' };
    let url = format!("{}{sep}options=-c%20search_path%3D{schema}", args.db);
    let options = herald::StoreOptions {
        connections_max: connections as u32,
        ..herald::StoreOptions::default()
    };
    let herald = Herald::open_with(&url, &options).await?;
    // Open every connection of the pool before any clock starts: otherwise the first
    // phase (the floor) pays for connecting and herald's phases do not.
    if let Some(pool) = herald.store().postgres_pool() {
        let mut held = Vec::with_capacity(connections);
        for _ in 0..connections {
            held.push(pool.acquire().await.context("opening the pool's connections")?);
        }
    }
    let result = phases(args, n, &herald, version, peers).await;
    herald.close().await;
    result
}

async fn phases(
    args: &Args,
    n: usize,
    herald: &Herald,
    version: &str,
    peers: Option<&Path>,
) -> Result<Vec<Figure>> {
    let mut tenants = Vec::with_capacity(args.tenants);
    for i in 0..args.tenants {
        let t = herald.tenant_create(&format!("bench-{i}")).await?.id;
        herald.quota_grant(t, "webhook", 1_000_000_000, None).await?;
        tenants.push(t);
    }
    let bench = Bench { herald: herald.clone(), tenants: tenants.clone(), clients: args.clients };
    let mut figures = Vec::new();
    if args.e2e_only {
        return Ok(vec![end_to_end_figure(args, &bench, herald, n).await?]);
    }
    println!(
        "herald bench{}: PostgreSQL {version}, {} clients, {} send slots, {} tenants, \
         {n} deliveries per phase; peers: {}\n",
        if args.quick { " --quick" } else { "" },
        args.clients,
        args.workers,
        args.tenants,
        peers.map_or_else(|| "none".to_string(), |p| p.display().to_string()),
    );

    // The floor runs before herald's submit and drain phases and again after them; each
    // ratio uses the mean of the two passes, so drift on a shared machine (a checkpoint,
    // autovacuum) does not land on one side of the comparison only.
    let in_tx = !args.drain_only;
    let before = floor_pass(&bench, n, "before", in_tx).await?;

    // herald's submits through the library, then a drain of what they made: the same N,
    // on the same table size, as the floor's.
    let mut herald_in_tx = 0.0;
    if in_tx {
        bench.reset().await?;
        let b = bar(n, "submit, library, in a transaction");
        let elapsed =
            bench.submit_herald(n, "lib-tx", &tenants, false, Commit::InTransaction, &b).await?;
        herald_in_tx = rate(n, elapsed);
        b.finish();
    }
    bench.reset().await?;
    let b = bar(n, "submit, library, submit_alone");
    let herald_alone =
        rate(n, bench.submit_herald(n, "lib", &tenants, false, Commit::Alone, &b).await?);
    b.finish();
    let drain_label = format!("drain, no-op channel, {} slots", args.workers);
    let (pending, drain) = drain_herald(&bench, args.workers, &drain_label).await?;
    let hot_and_dup = if args.drain_only {
        None
    } else {
        let b = bar(n / 2, "submit, one tenant");
        let elapsed =
            bench.submit_herald(n / 2, "hot", &tenants[..1], false, Commit::Alone, &b).await?;
        let hot = rate(n / 2, elapsed);
        b.finish();
        let b = bar(n, "submit, half the keys repeat");
        let dup = rate(n, bench.submit_herald(n, "dup", &tenants, true, Commit::Alone, &b).await?);
        b.finish();
        Some((hot, dup))
    };

    let after = floor_pass(&bench, n, "after", in_tx).await?;
    let mean = |pick: fn(&FloorPass) -> f64| (pick(&before) + pick(&after)) / 2.0;
    let (floor_in_tx, floor_alone, floor_drain) =
        (mean(|p| p.submit_in_tx), mean(|p| p.submit_alone), mean(|p| p.drain));
    let in_tx_passes = [before.submit_in_tx, after.submit_in_tx];
    let alone_passes = [before.submit_alone, after.submit_alone];
    let drain_figure =
        figure(drain_label, drain, "/s", Some(floor_drain), pending, Some(PeerMetric::Drain))
            .floor_passes(&[before.drain, after.drain]);
    let vs_alone = |name: &str, value: f64, n: usize, compare: Option<PeerMetric>| {
        figure(name, value, "/s", Some(floor_alone), n, compare).floor_passes(&alone_passes)
    };
    let submit_figure = vs_alone(
        "submit, library, submit_alone (one statement)",
        herald_alone,
        n,
        Some(PeerMetric::Insert),
    );
    let Some((hot, dup)) = hot_and_dup else {
        return Ok(vec![submit_figure, drain_figure]);
    };
    figures.push(submit_figure);
    figures.push(
        figure(
            "submit, library, in a transaction (BEGIN, submit, COMMIT)",
            herald_in_tx,
            "/s",
            Some(floor_in_tx),
            n,
            None,
        )
        .floor_passes(&in_tx_passes),
    );
    figures.push(drain_figure);
    figures.push(vs_alone("submit, one tenant (hot quota row)", hot, n / 2, None));
    figures.push(vs_alone("submit, half the keys repeat", dup, n, None));

    bench.reset().await?; // the hot and duplicate submits' deliveries are never sent
    let (p50, p99, count) = latency(args, &bench, herald).await?;
    figures.push(figure(
        "commit-to-start p50 at 200/s",
        p50,
        "ms",
        None,
        count,
        Some(PeerMetric::LatencyP50),
    ));
    figures.push(figure(
        "commit-to-start p99 at 200/s",
        p99,
        "ms",
        None,
        count,
        Some(PeerMetric::LatencyP99),
    ));

    bench.reset().await?;
    let http = submit_http(&bench, herald, webhook_channel(herald)?, n).await?;
    figures.push(vs_alone("submit, HTTP API", http, n, None));
    figures.push(end_to_end_figure(args, &bench, herald, n).await?);

    if let Some(kib) = peak_rss_kib() {
        figures.push(figure("peak RSS of this process", kib as f64 / 1024.0, "MiB", None, 0, None));
    }
    Ok(figures)
}

/// The webhook channel the HTTP API and the end-to-end phase send through, allowed to reach
/// the local receiver.
fn webhook_channel(herald: &Herald) -> Result<Arc<dyn Channel>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(Arc::new(WebhookChannel::new(
        herald.clone(),
        WebhookOptions { allow_private_targets: true, ..WebhookOptions::default() },
    )?))
}

async fn end_to_end_figure(
    args: &Args,
    bench: &Bench,
    herald: &Herald,
    n: usize,
) -> Result<Figure> {
    let (herald_e2e, floor_e2e) =
        end_to_end(args, bench, herald, webhook_channel(herald)?, n).await?;
    Ok(figure(
        "end-to-end: submit + webhook drain",
        herald_e2e,
        "/s",
        Some(floor_e2e),
        n,
        Some(PeerMetric::EndToEnd),
    ))
}

/// Commit-to-start latency at a moderate fixed rate, the worker idle between submits.
/// Returns (p50 ms, p99 ms, deliveries).
async fn latency(args: &Args, bench: &Bench, herald: &Herald) -> Result<(f64, f64, usize)> {
    let per_second = 200usize;
    let count = if args.quick { 600 } else { 3_000 };
    let count = args.n.map_or(count, |n| count.min(n));
    let b = bar(count, "commit-to-start latency at 200/s");
    let channel = noop(count, ProgressBar::hidden());
    let w = worker(herald, channel.clone(), args.workers, Duration::from_secs(1))?;
    let running = start(&w);
    let committed: Arc<Mutex<HashMap<Uuid, Instant>>> = Arc::default();
    let mut ticker = tokio::time::interval(Duration::from_secs(1) / per_second as u32);
    let mut submits = tokio::task::JoinSet::new();
    let tenants = &bench.tenants;
    for i in 0..count {
        ticker.tick().await;
        let (h, committed, req, b) = (
            herald.clone(),
            committed.clone(),
            bench.request(tenants[i % tenants.len()], format!("lat-{i}"), "https://example.com/h"),
            b.clone(),
        );
        submits.spawn(async move {
            let id = submit_one(&h, &req, Commit::Alone).await?;
            if let Ok(mut c) = committed.lock() {
                c.insert(id, Instant::now());
            }
            b.inc(1);
            Ok::<_, anyhow::Error>(())
        });
    }
    while let Some(j) = submits.join_next().await {
        j??;
    }
    tokio::time::timeout(Duration::from_secs(60), channel.done.notified())
        .await
        .context("latency phase did not finish")?;
    running.stop().await?;
    b.finish();
    let mut latencies: Vec<f64> = {
        let committed = committed.lock().map_err(|_| anyhow!("poisoned"))?;
        let started = channel.started.lock().map_err(|_| anyhow!("poisoned"))?;
        committed
            .iter()
            .filter_map(|(id, at)| {
                started.get(id).map(|s| s.saturating_duration_since(*at).as_secs_f64() * 1000.0)
            })
            .collect()
    };
    latencies.sort_by(f64::total_cmp);
    Ok((percentile(&latencies, 0.5), percentile(&latencies, 0.99), count))
}

/// `POST /v1/deliveries` through the real router, served in-process on 127.0.0.1 by
/// axum, from C concurrent clients over keep-alive connections (one shared pool); each
/// tenant has its own API key, created through the admin API. Returns submits/s.
async fn submit_http(
    bench: &Bench,
    herald: &Herald,
    webhook: Arc<dyn Channel>,
    n: usize,
) -> Result<f64> {
    let admin_key = format!("bench-admin-{}", Uuid::now_v7().simple());
    let config = herald_server::serve::ServeConfig {
        listen: None,
        admin_key: Some(admin_key.clone()),
        metrics_token: None,
        metrics_per_tenant: false,
        http: herald_server::listen::HttpOptions::default(),
        worker: None,
        reconciler: None,
        retention: None,
        channels: vec![("webhook".to_string(), webhook)],
    };
    let router = herald_server::app(herald_server::serve::state(herald, &config));
    let (addr, stop, task) = serve_api_local(router, bench.clients).await?;
    let result = async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(bench.clients)
            .no_proxy()
            .build()
            .context("building the HTTP client")?;
        let base = format!("http://{addr}");
        let mut keys = Vec::with_capacity(bench.tenants.len());
        for t in &bench.tenants {
            let response = client
                .post(format!("{base}/v1/tenants/{t}/keys"))
                .bearer_auth(&admin_key)
                .send()
                .await
                .context("creating an API key")?;
            let status = response.status();
            let body = response.bytes().await?;
            if !status.is_success() {
                bail!("creating an API key: {status}: {}", String::from_utf8_lossy(&body));
            }
            let created: serde_json::Value = serde_json::from_slice(&body)?;
            let key = created["api_key"]
                .as_str()
                .ok_or_else(|| anyhow!("creating an API key: no api_key in the answer"))?;
            keys.push(format!("Bearer {key}"));
        }
        let (keys, url) = (Arc::new(keys), format!("{base}/v1/deliveries"));
        let b = bar(n, "submit, HTTP API");
        let started = Instant::now();
        spawn_clients(bench.clients, n, &b, move |i| {
            let (client, keys, url) = (client.clone(), keys.clone(), url.clone());
            async move {
                let body = json!({
                    "operation_key": format!("http-{i}"),
                    "channel": "webhook",
                    "to": "https://example.com/hooks",
                    "payload": {"event": "bench"},
                });
                let response = client
                    .post(url)
                    .header("authorization", &keys[i % keys.len()])
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .send()
                    .await
                    .context("POST /v1/deliveries")?;
                let status = response.status();
                let body = response.bytes().await?;
                if status != reqwest::StatusCode::CREATED {
                    bail!("POST /v1/deliveries: {status}: {}", String::from_utf8_lossy(&body));
                }
                Ok(())
            }
        })
        .await?;
        let elapsed = started.elapsed();
        b.finish();
        Ok(rate(n, elapsed))
    }
    .await;
    stop_local(stop, task).await;
    result
}

/// Submit and drain at once. herald: C clients submit through the library while a worker
/// with the real webhook channel sends every delivery to an in-process HTTP receiver on
/// 127.0.0.1 (answering 200); timed from the first submit until the database shows all N
/// `sent`. The floor: the submit floor's C clients and the drain floor's C parts run
/// concurrently, until all N are submitted and drained — the floor makes no HTTP call (it
/// is the database work only). Returns (herald /s, floor /s).
async fn end_to_end(
    args: &Args,
    bench: &Bench,
    herald: &Herald,
    webhook: Arc<dyn Channel>,
    n: usize,
) -> Result<(f64, f64)> {
    // The floor.
    bench.reset().await?;
    let b = bar(n, "floor: end-to-end (submit ∥ drain)");
    let started = Instant::now();
    let hidden = ProgressBar::hidden();
    let drain = bench.drain_floor(100, Some(n), &hidden);
    let submit = bench.submit_floor(n, "e2e-floor", Commit::Alone, &b);
    let (submitted, drained) = tokio::join!(submit, drain);
    submitted?;
    let (drained, _) = drained?;
    let floor = rate(drained, started.elapsed());
    b.finish();
    if drained != n {
        bail!("the end-to-end floor drained {drained} of {n}");
    }

    // herald.
    bench.reset().await?;
    let b = bar(n, "end-to-end: submit + webhook drain");
    let receiver = Arc::new(Receiver {
        hits: AtomicUsize::new(0),
        target: n,
        done: Default::default(),
        bar: b.clone(),
    });
    let router = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(receiver.clone());
    let (addr, stop, task) = serve_local(router).await?;
    let result = async {
        let w = worker(herald, webhook, args.workers, Duration::from_millis(50))?;
        let running = start(&w);
        let to = format!("http://{addr}/hook");
        let started = Instant::now();
        let outcome = async {
            bench
                .submit_herald_to(
                    n,
                    "e2e",
                    &bench.tenants,
                    false,
                    &to,
                    Commit::Alone,
                    &ProgressBar::hidden(),
                )
                .await?;
            tokio::time::timeout(DRAIN_TIMEOUT, receiver.done.notified())
                .await
                .context("the webhook receiver did not get every delivery")?;
            // Every request arrived; the N-th `sent` is recorded in the database a moment
            // later (outcomes are recorded in batches).
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let sent = bench.count("sent").await? as usize;
                if sent >= n {
                    return Ok::<_, anyhow::Error>((sent, started.elapsed()));
                }
                if Instant::now() > deadline {
                    bail!("only {sent} of {n} deliveries are sent after the receiver got them all");
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        .await;
        running.stop().await?;
        let (sent, elapsed) = outcome?;
        let sent_after = bench.count("sent").await? as usize;
        if sent != n || sent_after != n {
            bail!("end-to-end: {sent_after} deliveries sent in the database, expected {n}");
        }
        Ok(rate(n, elapsed))
    }
    .await;
    stop_local(stop, task).await;
    b.finish();
    Ok((result?, floor))
}

// ---------------------------------------------------------------------------------------
// Peers

/// One peer phase's JSON line (bench/peers/README.md, "The contract").
#[derive(Debug, Clone, serde::Deserialize)]
struct PeerLine {
    #[serde(default)]
    version: String,
    #[serde(default)]
    config: String,
    count: u64,
    seconds: f64,
    per_sec: f64,
    #[serde(default)]
    p50_ms: Option<f64>,
    #[serde(default)]
    p99_ms: Option<f64>,
}

/// The sizes one peer runs with.
#[derive(Debug, Clone, Copy)]
struct PeerSizes {
    insert: usize,
    drain: usize,
    e2e: usize,
    latency: usize,
    rate: u32,
}

fn peer_sizes(peer: &str, quick: bool, n: usize) -> PeerSizes {
    match (peer, quick) {
        ("procrastinate", true) => {
            PeerSizes { insert: 500, drain: 300, e2e: 300, latency: 150, rate: 50 }
        }
        ("procrastinate", false) => {
            PeerSizes { insert: 2_000, drain: 1_000, e2e: 1_000, latency: 600, rate: 50 }
        }
        (_, true) => PeerSizes { insert: 1_000, drain: 2_000, e2e: 2_000, latency: 600, rate: 200 },
        (_, false) => PeerSizes { insert: n, drain: n, e2e: n, latency: 3_000, rate: 200 },
    }
}

/// One peer's three phases.
#[derive(Debug)]
struct PeerRun {
    name: String,
    sizes: PeerSizes,
    insert: Result<PeerLine, String>,
    drain: Result<PeerLine, String>,
    e2e: Result<PeerLine, String>,
    latency: Result<PeerLine, String>,
}

async fn run_peers(args: &Args, n: usize, dir: &Path) -> Result<Vec<PeerRun>> {
    let mut runs = Vec::new();
    for (name, path) in peer_wrappers(dir)? {
        let sizes = peer_sizes(&name, args.quick, n);
        let phase = async |phase: &'static str, count: usize, rate: Option<u32>| {
            let s = spinner(&format!("peer {name}: {phase} {count}"));
            let result = run_peer(&path, &args.db, phase, count, args.clients, rate).await;
            match &result {
                Ok(_) => s.finish(),
                Err(e) => {
                    s.finish_with_message(format!("peer {name}: {phase} failed"));
                    eprintln!("peer {name}: {phase} failed: {e}");
                }
            }
            result
        };
        let insert = phase("insert", sizes.insert, None).await;
        let drain = phase("drain", sizes.drain, None).await;
        let e2e = phase("e2e", sizes.e2e, None).await;
        let latency = phase("latency", sizes.latency, Some(sizes.rate)).await;
        runs.push(PeerRun { name, sizes, insert, drain, e2e, latency });
    }
    Ok(runs)
}

/// Runs one peer phase; an error is one line, for stderr and the table.
async fn run_peer(
    path: &Path,
    db: &str,
    phase: &str,
    n: usize,
    clients: usize,
    rate: Option<u32>,
) -> Result<PeerLine, String> {
    let mut command = tokio::process::Command::new(path);
    command
        .args(["--db", db, "--phase", phase, "--n", &n.to_string()])
        .args(["--clients", &clients.to_string()])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    if let Some(rate) = rate {
        command.args(["--rate", &rate.to_string()]);
    }
    let child = command.spawn().map_err(|e| format!("cannot start {}: {e}", path.display()))?;
    let output = match tokio::time::timeout(PEER_TIMEOUT, child.wait_with_output()).await {
        Err(_) => return Err(format!("timed out after {} s", PEER_TIMEOUT.as_secs())),
        Ok(Err(e)) => return Err(format!("waiting for it: {e}")),
        Ok(Ok(output)) => output,
    };
    let last = |bytes: &[u8]| {
        String::from_utf8_lossy(bytes)
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
    };
    if !output.status.success() {
        return Err(last(&output.stderr).unwrap_or_else(|| format!("{}", output.status)));
    }
    let line = last(&output.stdout).ok_or_else(|| "no JSON line on stdout".to_string())?;
    let parsed: PeerLine =
        serde_json::from_str(&line).map_err(|e| format!("bad JSON ({e}): {line}"))?;
    if phase == "latency" && (parsed.p50_ms.is_none() || parsed.p99_ms.is_none()) {
        return Err(format!("no p50_ms/p99_ms in: {line}"));
    }
    Ok(parsed)
}

fn attach_peers(figures: &mut [Figure], peers: &[PeerRun]) {
    for f in figures.iter_mut() {
        let Some(metric) = f.compare else { continue };
        for p in peers {
            let (phase, result, n, rate) = match metric {
                PeerMetric::Insert => ("insert", &p.insert, p.sizes.insert, None),
                PeerMetric::Drain => ("drain", &p.drain, p.sizes.drain, None),
                PeerMetric::EndToEnd => ("e2e", &p.e2e, p.sizes.e2e, None),
                PeerMetric::LatencyP50 | PeerMetric::LatencyP99 => {
                    ("latency", &p.latency, p.sizes.latency, Some(p.sizes.rate))
                }
            };
            let mut cell =
                PeerCell { unit: f.unit, phase, n, rate_per_sec: rate, ..PeerCell::default() };
            match result {
                Ok(line) => {
                    let value = match metric {
                        PeerMetric::Insert | PeerMetric::Drain | PeerMetric::EndToEnd => {
                            Some(line.per_sec)
                        }
                        PeerMetric::LatencyP50 => line.p50_ms,
                        PeerMetric::LatencyP99 => line.p99_ms,
                    };
                    cell.value = value;
                    cell.herald_per_peer = value.filter(|v| *v > 0.0).map(|v| f.value / v);
                    cell.version = Some(line.version.clone());
                    cell.config = Some(line.config.clone());
                    cell.seconds = Some(line.seconds);
                    cell.per_sec = Some(line.per_sec);
                    cell.n = line.count as usize;
                }
                Err(e) => cell.failed = Some(e.clone()),
            }
            f.peers.insert(p.name.clone(), cell);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The table

fn number(value: f64, unit: &str) -> String {
    if !value.is_finite() {
        return "–".to_string();
    }
    match unit {
        "/s" => format!("{value:.0}/s"),
        u => format!("{value:.1} {u}"),
    }
}

fn peer_text(cell: &PeerCell) -> String {
    if let Some(e) = &cell.failed {
        let mut text = format!("failed: {e}");
        if text.chars().count() > 48 {
            text = text.chars().take(47).collect::<String>() + "…";
        }
        return text;
    }
    let Some(value) = cell.value else { return "–".to_string() };
    let mut text = number(value, cell.unit);
    if cell.unit == "ms"
        && let Some(rate) = cell.rate_per_sec.filter(|r| *r != 200)
    {
        text.push_str(&format!(" @{rate}/s"));
    }
    if let Some(r) = cell.herald_per_peer {
        text.push_str(&format!(" [{r:.2}]"));
    }
    text
}

fn print_table(figures: &[Figure], peers: &[PeerRun]) {
    let mut header: Vec<String> =
        ["figure", "herald", "floor", "ratio to floor"].iter().map(|s| s.to_string()).collect();
    header.extend(peers.iter().map(|p| p.name.clone()));
    let mut rows = vec![header];
    for f in figures {
        let mut row = vec![
            f.name.clone(),
            number(f.value, f.unit),
            f.floor.map(|v| number(v, f.unit)).unwrap_or_default(),
            f.ratio_to_floor.map(|r| format!("{r:.2}")).unwrap_or_default(),
        ];
        for p in peers {
            row.push(f.peers.get(&p.name).map(peer_text).unwrap_or_default());
        }
        rows.push(row);
    }
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|s| s.chars().count()).max().unwrap_or(0))
        .collect();
    let line = |row: &[String]| {
        row.iter()
            .enumerate()
            .map(|(c, cell)| {
                let w = widths.get(c).copied().unwrap_or(0);
                if c == 0 { format!("{cell:<w$}") } else { format!("{cell:>w$}") }
            })
            .collect::<Vec<_>>()
            .join(" | ")
    };
    for (i, row) in rows.iter().enumerate() {
        println!("{}", line(row));
        if i == 0 {
            println!("{}", widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("-|-"));
        }
    }
    println!(
        "\nfloor: submit = the claim's CTE as one statement (\"in a transaction\": between BEGIN and \
         COMMIT); drain = one CTE per 100 rows (PostgreSQL: the mean of a pass before herald's \
         submit and drain phases and one after); end-to-end = both at once, no HTTP call."
    );
    if !peers.is_empty() {
        println!(
            "peers: [herald ÷ peer] — above 1 herald is faster (rates), below 1 herald is \
             quicker (latencies). submit vs the peer's insert, drain vs the peer's drain \
             (jobs inserted before its clock starts), end-to-end vs the peer's e2e (insert \
             from C clients while its worker drains, no-op handler), latency vs the peer's \
             latency phase."
        );
        for p in peers {
            println!(
                "  {}: insert {}, drain {}, e2e {}, latency {} at {}/s",
                p.name, p.sizes.insert, p.sizes.drain, p.sizes.e2e, p.sizes.latency, p.sizes.rate
            );
        }
    }
}
