//! `herald bench`: herald's speed as ratios against the SQL floor measured in the same
//! run, on one PostgreSQL, with the same harness and concurrency. Each phase runs in a
//! fresh schema of the given database, dropped at the end.
//!
//! Not yet here (the benchmark issue is open): the HTTP-API submit, the end-to-end webhook
//! phase and the peer queues (River, graphile-worker, pg-boss).

use anyhow::{Context, Result, bail};
use herald::sqlx::{self, Connection};
use herald::{AsConn, Channel, Herald, Leased, Outcome, SubmitRequest, Worker, WorkerOptions};
use herald_store::bench::{bench_reset, count_state, floor_drain, floor_submit};
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// PostgreSQL to measure on (a fresh schema is created and dropped).
    #[arg(long, env = "HERALD_DB", default_value = "postgres://postgres@127.0.0.1:5432/test")]
    db: String,
    /// A short run (under a minute or two).
    #[arg(long)]
    quick: bool,
    /// Concurrent clients for submits and the floor.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Send slots of the draining worker.
    #[arg(long, default_value_t = 32)]
    workers: usize,
    /// Tenants (at least 100, so no single quota row is the bottleneck).
    #[arg(long, default_value_t = 100)]
    tenants: usize,
    /// Also write every figure as JSON to this file.
    #[arg(long)]
    json: Option<std::path::PathBuf>,
}

/// One measured figure.
#[derive(Debug, Clone, serde::Serialize)]
struct Figure {
    name: String,
    value: f64,
    unit: &'static str,
    floor: Option<f64>,
}

struct Bench {
    herald: Herald,
    tenants: Vec<Uuid>,
    clients: usize,
}

fn rate(n: usize, elapsed: Duration) -> f64 {
    n as f64 / elapsed.as_secs_f64().max(1e-9)
}

impl Bench {
    fn request(&self, tenant: Uuid, key: String) -> SubmitRequest {
        SubmitRequest::new(
            tenant,
            key,
            "webhook",
            "https://example.com/hooks",
            json!({"event": "bench"}),
        )
    }

    /// `n` operations split over the clients; returns the elapsed time.
    async fn clients<F, Fut>(&self, n: usize, op: F) -> Result<Duration>
    where
        F: Fn(usize) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<()>> + Send,
    {
        let op = Arc::new(op);
        let next = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for _ in 0..self.clients {
            let (op, next) = (op.clone(), next.clone());
            tasks.spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        return Ok::<_, anyhow::Error>(());
                    }
                    op(i).await?;
                }
            });
        }
        while let Some(joined) = tasks.join_next().await {
            joined??;
        }
        Ok(started.elapsed())
    }

    async fn submit_herald(
        &self,
        n: usize,
        prefix: &str,
        tenants: &[Uuid],
        repeat_half: bool,
    ) -> Result<Duration> {
        let (herald, tenants, prefix) = (self.herald.clone(), tenants.to_vec(), prefix.to_string());
        let requests: Arc<Vec<SubmitRequest>> = Arc::new(
            (0..n)
                .map(|i| {
                    let k = if repeat_half { i / 2 } else { i };
                    self.request(tenants[k % tenants.len()], format!("{prefix}-{k}"))
                })
                .collect(),
        );
        self.clients(n, move |i| {
            let (herald, requests) = (herald.clone(), requests.clone());
            async move {
                let h = herald.clone();
                herald
                    .transaction(|tx| {
                        let (h, r) = (&h, &requests[i]);
                        Box::pin(async move { h.submit(tx, r).await })
                    })
                    .await?;
                Ok(())
            }
        })
        .await
    }

    async fn submit_floor(&self, n: usize, prefix: &str) -> Result<Duration> {
        let (herald, tenants, prefix) =
            (self.herald.clone(), self.tenants.clone(), prefix.to_string());
        self.clients(n, move |i| {
            let (herald, tenant, key) =
                (herald.clone(), tenants[i % tenants.len()], format!("{prefix}-{i}"));
            async move {
                let pool = herald.store().postgres_pool().context("the floor needs PostgreSQL")?;
                let mut tx = pool.begin().await?;
                floor_submit(tx.as_conn(), Uuid::now_v7(), tenant, &key).await?;
                tx.commit().await?;
                Ok(())
            }
        })
        .await
    }

    async fn drain_floor(&self, batch: i64) -> Result<(usize, Duration)> {
        let done = Arc::new(AtomicUsize::new(0));
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        let parts = self.clients as i64;
        for part in 0..parts {
            let (herald, done) = (self.herald.clone(), done.clone());
            tasks.spawn(async move {
                let pool =
                    herald.store().postgres_pool().context("the floor needs PostgreSQL")?.clone();
                loop {
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
                        return Ok::<_, anyhow::Error>(());
                    }
                    done.fetch_add(n as usize, Ordering::Relaxed);
                }
            });
        }
        while let Some(joined) = tasks.join_next().await {
            joined??;
        }
        Ok((done.load(Ordering::Relaxed), started.elapsed()))
    }

    /// Empty delivery tables: each compared phase starts from the same sizes.
    async fn reset(&self) -> Result<()> {
        self.herald
            .transaction(|tx| Box::pin(async move { Ok(bench_reset(tx.conn()).await?) }))
            .await?;
        Ok(())
    }

    async fn pending(&self) -> Result<i64> {
        Ok(self
            .herald
            .transaction(|tx| Box::pin(async move { Ok(count_state(tx.conn(), "pending").await?) }))
            .await?
            .value)
    }
}

/// A no-op channel that counts, and remembers when each send started.
struct Noop {
    sent: AtomicUsize,
    target: usize,
    done: tokio::sync::Notify,
    started: Mutex<HashMap<Uuid, Instant>>,
}

impl Channel for Noop {
    fn send<'a>(&'a self, d: &'a Leased) -> herald::BoxFuture<'a, Outcome> {
        Box::pin(async move {
            if let Ok(mut started) = self.started.lock() {
                started.entry(d.id).or_insert_with(Instant::now);
            }
            if self.sent.fetch_add(1, Ordering::SeqCst) + 1 >= self.target {
                self.done.notify_one();
            }
            Outcome::Sent
        })
    }
}

fn noop(target: usize) -> Arc<Noop> {
    Arc::new(Noop {
        sent: AtomicUsize::new(0),
        target,
        done: tokio::sync::Notify::new(),
        started: Mutex::default(),
    })
}

fn worker(herald: &Herald, channel: Arc<Noop>, slots: usize, poll: Duration) -> Result<Worker> {
    let options = WorkerOptions { slots, poll_interval: poll, ..WorkerOptions::default() };
    let channel: Arc<dyn Channel> = channel;
    Ok(Worker::new(herald.clone(), options, [("webhook".to_string(), channel)])?)
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

pub async fn run(args: Args) -> Result<()> {
    if !args.db.starts_with("postgres") {
        bail!("herald bench measures on PostgreSQL: pass --db postgres://…");
    }
    if args.tenants < 1 || args.clients < 1 || args.workers < 1 {
        bail!("--tenants, --clients and --workers must be at least 1");
    }
    let n = if args.quick { 2_000 } else { 20_000 };
    let schema = format!("herald_bench_{}", Uuid::now_v7().simple());
    let mut admin =
        sqlx::PgConnection::connect(&args.db).await.context("connecting to PostgreSQL")?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut admin)
        .await?;
    let result = measure(&args, n, &schema).await;
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP SCHEMA {schema} CASCADE")))
        .execute(&mut admin)
        .await?;
    let figures = result?;
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&figures)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

fn say(figures: &mut Vec<Figure>, name: &str, value: f64, unit: &'static str, floor: Option<f64>) {
    let ratio =
        floor.map(|f| format!("{:>6.2} × floor ({f:.0} {unit})", value / f)).unwrap_or_default();
    println!("{name:<44} {value:>10.1} {unit:<6} {ratio}");
    figures.push(Figure { name: name.to_string(), value, unit, floor });
}

async fn measure(args: &Args, n: usize, schema: &str) -> Result<Vec<Figure>> {
    let sep = if args.db.contains('?') { '&' } else { '?' };
    let url = format!("{}{sep}options=-c%20search_path%3D{schema}", args.db);
    let options = herald::StoreOptions {
        connections_max: (args.clients + args.workers + 10) as u32,
        ..herald::StoreOptions::default()
    };
    let herald = Herald::open_with(&url, &options).await?;
    let mut tenants = Vec::with_capacity(args.tenants);
    for i in 0..args.tenants {
        let t = herald.tenant_create(&format!("bench-{i}")).await?.id;
        herald.quota_grant(t, "webhook", 1_000_000_000, None).await?;
        tenants.push(t);
    }
    let bench = Bench { herald: herald.clone(), tenants: tenants.clone(), clients: args.clients };
    let mut figures = Vec::new();
    println!(
        "herald bench{}: PostgreSQL, {} clients, {} send slots, {} tenants, {n} deliveries per phase\n",
        if args.quick { " --quick" } else { "" },
        args.clients,
        args.workers,
        args.tenants
    );

    bench.reset().await?;
    let floor_submit = rate(n, bench.submit_floor(n, "floor").await?);
    let (drained, elapsed) = bench.drain_floor(100).await?;
    let floor_drain = rate(drained, elapsed);
    bench.reset().await?;
    let herald_submit = rate(n, bench.submit_herald(n, "lib", &tenants, false).await?);
    say(
        &mut figures,
        "submit, library, single-delivery transactions",
        herald_submit,
        "/s",
        Some(floor_submit),
    );
    let hot = rate(n / 2, bench.submit_herald(n / 2, "hot", &tenants[..1], false).await?);
    say(&mut figures, "submit, one tenant (hot quota row)", hot, "/s", Some(floor_submit));
    let dup = rate(n, bench.submit_herald(n, "dup", &tenants, true).await?);
    say(&mut figures, "submit, half the keys repeat", dup, "/s", Some(floor_submit));

    // Drain everything herald submitted above.
    let pending = bench.pending().await? as usize;
    let channel = noop(pending);
    let w = worker(&herald, channel.clone(), args.workers, Duration::from_millis(50))?;
    let stop = herald::CancellationToken::new();
    let started = Instant::now();
    let running = tokio::spawn({
        let (w, stop) = (w.clone(), stop.clone());
        async move { w.run(stop).await }
    });
    tokio::time::timeout(Duration::from_secs(600), channel.done.notified())
        .await
        .context("drain did not finish")?;
    let drain = rate(pending, started.elapsed());
    stop.cancel();
    running.await??;
    say(
        &mut figures,
        "drain, no-op channel (lease+complete+ledger)",
        drain,
        "/s",
        Some(floor_drain),
    );

    // Commit-to-start latency at a moderate fixed rate, the worker idle between submits.
    let per_second = 200usize;
    let count = if args.quick { 600 } else { 3_000 };
    let channel = noop(count);
    let w = worker(&herald, channel.clone(), args.workers, Duration::from_secs(1))?;
    let stop = herald::CancellationToken::new();
    let running = tokio::spawn({
        let (w, stop) = (w.clone(), stop.clone());
        async move { w.run(stop).await }
    });
    let committed: Arc<Mutex<HashMap<Uuid, Instant>>> = Arc::default();
    let mut ticker = tokio::time::interval(Duration::from_secs(1) / per_second as u32);
    let mut submits = tokio::task::JoinSet::new();
    for i in 0..count {
        ticker.tick().await;
        let (h, committed, req) = (
            herald.clone(),
            committed.clone(),
            bench.request(tenants[i % tenants.len()], format!("lat-{i}")),
        );
        submits.spawn(async move {
            let hh = h.clone();
            let done = h
                .transaction(|tx| {
                    let (hh, req) = (&hh, &req);
                    Box::pin(async move { hh.submit(tx, req).await })
                })
                .await?;
            if let Ok(mut c) = committed.lock() {
                c.insert(done.value.delivery.id, Instant::now());
            }
            Ok::<_, anyhow::Error>(())
        });
    }
    while let Some(j) = submits.join_next().await {
        j??;
    }
    tokio::time::timeout(Duration::from_secs(60), channel.done.notified())
        .await
        .context("latency phase did not finish")?;
    stop.cancel();
    running.await??;
    let mut latencies: Vec<f64> = {
        let committed = committed.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        let started = channel.started.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        committed
            .iter()
            .filter_map(|(id, at)| {
                started.get(id).map(|s| s.saturating_duration_since(*at).as_secs_f64() * 1000.0)
            })
            .collect()
    };
    latencies.sort_by(f64::total_cmp);
    say(
        &mut figures,
        &format!("commit-to-start p50 at {per_second}/s"),
        percentile(&latencies, 0.5),
        "ms",
        None,
    );
    say(
        &mut figures,
        &format!("commit-to-start p99 at {per_second}/s"),
        percentile(&latencies, 0.99),
        "ms",
        None,
    );
    if let Some(kib) = peak_rss_kib() {
        say(&mut figures, "peak RSS of this process", kib as f64 / 1024.0, "MiB", None);
    }
    println!(
        "\nfloor: submit {floor_submit:.0}/s (one statement per transaction), drain {floor_drain:.0}/s (batches of 100)"
    );
    herald.close().await;
    Ok(figures)
}
