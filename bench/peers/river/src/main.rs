//! River (the `riverqueue` crate) peer harness for `herald bench`.
//!
//! Usage: `herald-peer-river --db URL --phase insert|drain|latency|e2e --n N --clients C [--rate R]`
//!
//! Prints exactly one line of JSON on stdout on success; logs go to stderr. Uses only the
//! schema `herald_peer_river`, which it drops and re-creates (with River's own migrator) at the
//! start of every phase and drops again at the end. See `bench/peers/README.md`.

use std::num::NonZeroUsize;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use riverqueue::database::{PostgresDatabase, SchemaName};
use riverqueue::migrate::PostgresMigrator;
use riverqueue::serde_json::{self, json};
use riverqueue::sqlx::postgres::{PgPool, PgPoolOptions};
use riverqueue::{
    BoxError, Client, Event, EventKind, EventRecvError, InsertOpts, Job, JobArgs, JobEventKind,
    QueueConfig, SubscribeConfig, UniqueOpts, WorkContext, WorkOutcome, Workers,
};
use serde::{Deserialize, Serialize};

const PEER: &str = "river";
const SCHEMA: &str = "herald_peer_river";
/// The crate version pinned in Cargo.toml (`=0.5.0`).
const RIVER_VERSION: &str = "0.5.0";
/// River's own benchmark settings (`riverqueue bench`, and River Go's `river bench`):
/// 2,000 max workers, 2 ms fetch cooldown, 20 ms fetch poll interval.
const MAX_WORKERS: usize = 2_000;
const FETCH_COOLDOWN: Duration = Duration::from_millis(2);
const FETCH_POLL_INTERVAL: Duration = Duration::from_millis(20);
/// Connections of the worker client's pool.
const WORKER_POOL: u32 = 10;
/// Give up on a phase after this long.
const PHASE_TIMEOUT: Duration = Duration::from_secs(600);

/// The no-op job. Unique by its `key` argument alone (`unique(by_args)` with `key` selected): a
/// second insert with the same key returns the existing job instead of inserting another.
/// `seq` is the harness's index for latency bookkeeping and is not part of the unique key.
#[derive(Clone, Debug, Deserialize, JobArgs, Serialize)]
#[river(kind = "herald_peer_noop", unique(by_args))]
struct Noop {
    #[river(unique)]
    key: String,
    seq: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Insert,
    Drain,
    Latency,
    E2e,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Insert => "insert",
            Phase::Drain => "drain",
            Phase::Latency => "latency",
            Phase::E2e => "e2e",
        }
    }
}

struct Args {
    db: String,
    phase: Phase,
    n: usize,
    clients: usize,
    rate: f64,
}

fn parse_args() -> Result<Args, String> {
    let mut db = None;
    let mut phase = None;
    let mut n = None;
    let mut clients = 1usize;
    let mut rate = 100.0f64;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--db" => db = Some(value()?),
            "--phase" => {
                phase = Some(match value()?.as_str() {
                    "insert" => Phase::Insert,
                    "drain" => Phase::Drain,
                    "latency" => Phase::Latency,
                    "e2e" => Phase::E2e,
                    other => return Err(format!("unknown phase {other:?}")),
                })
            }
            "--n" => n = Some(value()?.parse::<usize>().map_err(|e| format!("--n: {e}"))?),
            "--clients" => {
                clients = value()?.parse::<usize>().map_err(|e| format!("--clients: {e}"))?
            }
            "--rate" => rate = value()?.parse::<f64>().map_err(|e| format!("--rate: {e}"))?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let args = Args {
        db: db.ok_or("--db is required")?,
        phase: phase.ok_or("--phase is required")?,
        n: n.ok_or("--n is required")?,
        clients: clients.max(1),
        rate,
    };
    if args.n == 0 {
        return Err("--n must be positive".into());
    }
    if !(args.rate > 0.0 && args.rate.is_finite()) {
        return Err("--rate must be positive".into());
    }
    Ok(args)
}

fn schema() -> SchemaName {
    SchemaName::new(SCHEMA).expect("valid schema name")
}

fn unique_opts() -> InsertOpts {
    // Same as the derive's default; spelled out so the configuration is visible here.
    InsertOpts::default().with_unique(UniqueOpts::new().with_by_args(true))
}

fn job(seq: usize) -> Noop {
    Noop {
        key: format!("herald-peer-{seq}"),
        seq: seq as u64,
    }
}

async fn connect(url: &str, connections: u32) -> Result<PgPool, BoxError> {
    Ok(PgPoolOptions::new()
        .max_connections(connections)
        .min_connections(connections)
        .acquire_timeout(Duration::from_secs(30))
        .connect(url)
        .await?)
}

/// Opens every connection of the pool before timing starts.
async fn warm(pool: &PgPool, connections: u32) -> Result<(), BoxError> {
    let mut held = Vec::new();
    for _ in 0..connections {
        held.push(pool.acquire().await?);
    }
    Ok(())
}

async fn reset_schema(pool: &PgPool) -> Result<(), BoxError> {
    riverqueue::sqlx::query("DROP SCHEMA IF EXISTS herald_peer_river CASCADE")
        .execute(pool)
        .await?;
    riverqueue::sqlx::query("CREATE SCHEMA herald_peer_river")
        .execute(pool)
        .await?;
    PostgresMigrator::new(pool.clone())
        .with_schema(schema())
        .migrate_up()
        .await?;
    Ok(())
}

/// ANALYZE every table of the schema, untimed, before a drain of bulk-inserted jobs: the
/// same fresh statistics herald's drain and its floor get (`herald_store::bench::bench_analyze`).
async fn analyze_schema(pool: &PgPool) -> Result<(), BoxError> {
    riverqueue::sqlx::query(
        "DO $$DECLARE t record; BEGIN FOR t IN SELECT format('%I.%I', schemaname, tablename) AS name \
         FROM pg_tables WHERE schemaname = 'herald_peer_river' LOOP EXECUTE 'ANALYZE ' || t.name; \
         END LOOP; END$$",
    )
    .execute(pool)
    .await?;
    Ok(())
}

async fn drop_schema(pool: &PgPool) -> Result<(), BoxError> {
    riverqueue::sqlx::query("DROP SCHEMA IF EXISTS herald_peer_river CASCADE")
        .execute(pool)
        .await?;
    Ok(())
}

async fn count_jobs(pool: &PgPool, state: Option<&str>) -> Result<i64, BoxError> {
    // Literal SQL (sqlx rejects unaudited dynamic strings); the schema is SCHEMA.
    let (count,): (i64,) = riverqueue::sqlx::query_as(
        "SELECT count(*) FROM herald_peer_river.river_job WHERE $1::text IS NULL OR state::text = $1",
    )
        .bind(state)
        .fetch_one(pool)
        .await?;
    Ok(count)
}

fn worker_config() -> String {
    format!(
        "max_workers {MAX_WORKERS}, fetch_cooldown {}ms, fetch_poll_interval {}ms, \
         LISTEN/NOTIFY on, {WORKER_POOL}-connection pool, unique by_args(key)",
        FETCH_COOLDOWN.as_millis(),
        FETCH_POLL_INTERVAL.as_millis()
    )
}

/// Builds the worker client with River's benchmark configuration. `started` receives the
/// handler start time (nanoseconds since `base`) of each job by `seq`, when given.
fn worker_client(
    pool: PgPool,
    handled: Arc<AtomicUsize>,
    started: Option<(Instant, Arc<Vec<AtomicU64>>)>,
) -> Result<Client, BoxError> {
    let mut workers = Workers::new();
    workers.add_fn(move |_context: WorkContext, job: Job<Noop>| {
        let at = Instant::now();
        let handled = Arc::clone(&handled);
        let started = started.clone();
        async move {
            if let Some((base, slots)) = started {
                if let Some(slot) = slots.get(job.args.seq as usize) {
                    let nanos = at.duration_since(base).as_nanos() as u64;
                    let _ = slot.compare_exchange(0, nanos, Ordering::Relaxed, Ordering::Relaxed);
                }
            }
            handled.fetch_add(1, Ordering::Relaxed);
            Ok::<_, BoxError>(WorkOutcome::Complete)
        }
    })?;
    Ok(
        Client::builder(PostgresDatabase::new(pool).with_schema(schema()))
            .workers(workers)
            .fetch_cooldown(FETCH_COOLDOWN)
            .queue(
                riverqueue::QUEUE_DEFAULT,
                QueueConfig::new(MAX_WORKERS)
                    .with_fetch_cooldown(FETCH_COOLDOWN)
                    .with_fetch_poll_interval(FETCH_POLL_INTERVAL),
            )
            .build()?,
    )
}

/// Waits for `n` completion events (sent by River after the completion is persisted).
async fn wait_completed(events: &mut riverqueue::EventReceiver, n: usize) -> Result<(), BoxError> {
    let mut completed = 0usize;
    let deadline = tokio::time::Instant::now() + PHASE_TIMEOUT;
    while completed < n {
        match tokio::time::timeout_at(deadline, events.recv()).await {
            Err(_) => return Err(format!("timed out with {completed}/{n} jobs completed").into()),
            Ok(Ok(Event::Job(event))) if event.kind == JobEventKind::Completed => completed += 1,
            Ok(Ok(_)) => {}
            Ok(Err(EventRecvError::Lagged(missed))) => completed += missed as usize,
            Ok(Err(EventRecvError::Closed)) => return Err("event channel closed".into()),
            Ok(Err(other)) => return Err(other.into()),
        }
    }
    Ok(())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

async fn run(args: &Args) -> Result<serde_json::Value, BoxError> {
    let admin = connect(&args.db, 1).await?;
    reset_schema(&admin).await?;
    let result = match args.phase {
        Phase::Insert => phase_insert(args, &admin).await,
        Phase::Drain => phase_drain(args, &admin).await,
        Phase::Latency => phase_latency(args, &admin).await,
        Phase::E2e => phase_e2e(args, &admin).await,
    };
    let dropped = drop_schema(&admin).await;
    admin.close().await;
    let value = result?;
    dropped?;
    Ok(value)
}

async fn phase_insert(args: &Args, admin: &PgPool) -> Result<serde_json::Value, BoxError> {
    let n = args.n;
    let clients = args.clients;
    let pool = connect(&args.db, clients as u32).await?;
    warm(&pool, clients as u32).await?;
    let client = Client::builder(PostgresDatabase::new(pool.clone()).with_schema(schema())).build()?;
    let begin = Instant::now();
    let duplicates = insert_concurrently(&client, n, clients).await?;
    let seconds = begin.elapsed().as_secs_f64();
    pool.close().await;
    let rows = count_jobs(admin, None).await?;
    if rows != n as i64 || duplicates != 0 {
        return Err(format!("expected {n} rows, found {rows} ({duplicates} skipped as duplicates)").into());
    }
    Ok(json!({
        "peer": PEER, "version": RIVER_VERSION, "phase": "insert",
        "config": format!("Client::insert per job with UniqueOpts by_args (unique on `key`), {clients} clients over {clients} pooled connections"),
        "count": n, "seconds": round(seconds, 4), "per_sec": round(n as f64 / seconds, 1),
    }))
}

async fn bulk_insert(pool: &PgPool, n: usize) -> Result<(), BoxError> {
    let client = Client::builder(PostgresDatabase::new(pool.clone()).with_schema(schema())).build()?;
    let mut i = 0;
    while i < n {
        let end = (i + 1000).min(n);
        client
            .insert_many((i..end).map(|seq| {
                riverqueue::InsertManyItem::new(job(seq), unique_opts())
            }))
            .await?;
        i = end;
    }
    Ok(())
}

async fn phase_drain(args: &Args, admin: &PgPool) -> Result<serde_json::Value, BoxError> {
    let n = args.n;
    let loader = connect(&args.db, 2).await?;
    bulk_insert(&loader, n).await?;
    loader.close().await;
    let available = count_jobs(admin, Some("available")).await?;
    if available != n as i64 {
        return Err(format!("expected {n} available jobs after the bulk insert, found {available}").into());
    }
    analyze_schema(admin).await?;

    let pool = connect(&args.db, WORKER_POOL).await?;
    warm(&pool, WORKER_POOL).await?;
    let handled = Arc::new(AtomicUsize::new(0));
    let client = worker_client(pool.clone(), Arc::clone(&handled), None)?;
    let capacity = NonZeroUsize::new(n + 1024).expect("nonzero");
    let mut events = client.subscribe_config(
        SubscribeConfig::new([EventKind::JobCompleted])?.with_buffer_capacity(capacity),
    )?;
    let begin = Instant::now();
    let mut handle = client.start()?;
    let waited = wait_completed(&mut events, n).await;
    let seconds = begin.elapsed().as_secs_f64();
    handle.stop().await?;
    pool.close().await;
    waited?;
    let completed = count_jobs(admin, Some("completed")).await?;
    let handled = handled.load(Ordering::Relaxed);
    if completed != n as i64 || handled != n {
        return Err(format!("expected {n} completed jobs, found {completed} in the table and {handled} handled").into());
    }
    Ok(json!({
        "peer": PEER, "version": RIVER_VERSION, "phase": "drain",
        "config": worker_config(),
        "count": n, "seconds": round(seconds, 4), "per_sec": round(n as f64 / seconds, 1),
    }))
}

async fn phase_latency(args: &Args, admin: &PgPool) -> Result<serde_json::Value, BoxError> {
    let n = args.n;
    let base = Instant::now();
    let committed: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());
    let started: Arc<Vec<AtomicU64>> = Arc::new((0..n).map(|_| AtomicU64::new(0)).collect());

    let pool = connect(&args.db, WORKER_POOL).await?;
    warm(&pool, WORKER_POOL).await?;
    let handled = Arc::new(AtomicUsize::new(0));
    let client = worker_client(pool.clone(), Arc::clone(&handled), Some((base, Arc::clone(&started))))?;
    let capacity = NonZeroUsize::new(n + 1024).expect("nonzero");
    let mut events = client.subscribe_config(
        SubscribeConfig::new([EventKind::JobCompleted])?.with_buffer_capacity(capacity),
    )?;
    let mut handle = client.start()?;
    tokio::time::sleep(Duration::from_secs(1)).await;

    // A separate insert-only client and pool, like a producer process.
    let producers = args.clients.clamp(1, 64) as u32;
    let insert_pool = connect(&args.db, producers).await?;
    warm(&insert_pool, producers).await?;
    let inserter =
        Client::builder(PostgresDatabase::new(insert_pool.clone()).with_schema(schema())).build()?;
    let period = Duration::from_secs_f64(1.0 / args.rate);
    let first = tokio::time::Instant::now();
    let begin = Instant::now();
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        tokio::time::sleep_until(first + period.mul_f64(i as f64)).await;
        let inserter = inserter.clone();
        let committed = Arc::clone(&committed);
        tasks.push(tokio::spawn(async move {
            inserter.insert(job(i)).opts(unique_opts()).await?;
            committed[i].store(base.elapsed().as_nanos() as u64, Ordering::Relaxed);
            Ok::<_, riverqueue::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    let insert_seconds = begin.elapsed().as_secs_f64();
    let waited = wait_completed(&mut events, n).await;
    handle.stop().await?;
    pool.close().await;
    insert_pool.close().await;
    waited?;
    let completed = count_jobs(admin, Some("completed")).await?;
    if completed != n as i64 {
        return Err(format!("expected {n} completed jobs, found {completed}").into());
    }
    let mut latencies = Vec::with_capacity(n);
    for i in 0..n {
        let s = started[i].load(Ordering::Relaxed);
        let c = committed[i].load(Ordering::Relaxed);
        if s == 0 {
            return Err(format!("job {i} completed without a recorded start").into());
        }
        latencies.push((s.saturating_sub(c)) as f64 / 1e6);
    }
    latencies.sort_by(f64::total_cmp);
    Ok(json!({
        "peer": PEER, "version": RIVER_VERSION, "phase": "latency",
        "config": format!("{}; {producers} insert connections, target rate {}/s", worker_config(), args.rate),
        "count": n, "seconds": round(insert_seconds, 4), "per_sec": round(n as f64 / insert_seconds, 1),
        "p50_ms": round(percentile(&latencies, 50.0), 3),
        "p99_ms": round(percentile(&latencies, 99.0), 3),
    }))
}

/// Inserts `job(i)` for every i in 0..n from `clients` concurrent tasks (one `Client::insert`,
/// i.e. one transaction, per job, unique by key); returns how many were skipped as duplicates.
async fn insert_concurrently(client: &Client, n: usize, clients: usize) -> Result<usize, BoxError> {
    let next = Arc::new(AtomicUsize::new(0));
    let duplicates = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let client = client.clone();
        let next = Arc::clone(&next);
        let duplicates = Arc::clone(&duplicates);
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, riverqueue::Error>(());
                }
                let inserted = client.insert(job(i)).opts(unique_opts()).await?;
                if inserted.unique_skipped_as_duplicate {
                    duplicates.fetch_add(1, Ordering::Relaxed);
                }
            }
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(duplicates.load(Ordering::Relaxed))
}

/// End to end: the worker (drain's configuration) runs while C clients insert N jobs one per
/// call; timed from the first insert until all N completions are persisted.
async fn phase_e2e(args: &Args, admin: &PgPool) -> Result<serde_json::Value, BoxError> {
    let n = args.n;
    let clients = args.clients;
    let pool = connect(&args.db, WORKER_POOL).await?;
    warm(&pool, WORKER_POOL).await?;
    let handled = Arc::new(AtomicUsize::new(0));
    let client = worker_client(pool.clone(), Arc::clone(&handled), None)?;
    let capacity = NonZeroUsize::new(n + 1024).expect("nonzero");
    let mut events = client.subscribe_config(
        SubscribeConfig::new([EventKind::JobCompleted])?.with_buffer_capacity(capacity),
    )?;
    let mut handle = client.start()?;

    // A separate insert-only client over C connections, like producer processes.
    let insert_pool = connect(&args.db, clients as u32).await?;
    warm(&insert_pool, clients as u32).await?;
    let inserter =
        Client::builder(PostgresDatabase::new(insert_pool.clone()).with_schema(schema())).build()?;
    tokio::time::sleep(Duration::from_secs(1)).await; // let the worker settle (as in latency)

    let begin = Instant::now();
    let inserted = insert_concurrently(&inserter, n, clients).await;
    let waited = match inserted {
        Ok(0) => wait_completed(&mut events, n).await,
        Ok(duplicates) => Err(format!("{duplicates} inserts skipped as duplicates").into()),
        Err(error) => Err(error),
    };
    let seconds = begin.elapsed().as_secs_f64();
    handle.stop().await?;
    pool.close().await;
    insert_pool.close().await;
    waited?;
    let completed = count_jobs(admin, Some("completed")).await?;
    let rows = count_jobs(admin, None).await?;
    let handled = handled.load(Ordering::Relaxed);
    if completed != n as i64 || rows != n as i64 || handled != n {
        return Err(format!(
            "expected {n} completed jobs, found {completed} completed of {rows} in the table and {handled} handled"
        )
        .into());
    }
    Ok(json!({
        "peer": PEER, "version": RIVER_VERSION, "phase": "e2e",
        "config": format!("{}; Client::insert per job with UniqueOpts by_args (unique on `key`), {clients} clients over {clients} pooled connections", worker_config()),
        "count": n, "seconds": round(seconds, 4), "per_sec": round(n as f64 / seconds, 1),
    }))
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(message) => {
            eprintln!("river peer: {message}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("river peer: tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = runtime.block_on(run(&args));
    runtime.shutdown_timeout(Duration::from_secs(2));
    match outcome {
        Ok(value) => {
            println!("{value}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            let message = error.to_string().replace('\n', " ");
            eprintln!("river peer: {} phase failed: {message}", args.phase.name());
            ExitCode::FAILURE
        }
    }
}
