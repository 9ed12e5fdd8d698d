//! The commit-to-start phases: a submit's commit to its send's start at a moderate rate,
//! with the worker in this process or another, submitting through the library or the SQL
//! API, and beside another tenant's backlog (issue 36's fairness figure).

use super::Args;
use super::harness::{Bench, bar, noop_of, percentile, spawn_clients, start, submit_one, worker};
use super::php::{PhpSession, PhpTarget};
use super::sql_api::SQL_PAYLOAD_SMALL;
use anyhow::{Context, Result, anyhow, bail};
use herald::Herald;
use herald::bench::Commit;
use indicatif::ProgressBar;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How the latency phase submits.
#[derive(Clone)]
pub(super) enum Via {
    Library,
    /// The SQL API called from here: no wake-up but the database's own (NOTIFY).
    Sql,
    /// The SQL API through the PHP package in a PHP process, which wakes the workers
    /// after its commit where the database cannot (MariaDB).
    Php(Arc<PhpSession>),
}

/// How long the latency phase's worker runs before the first submit (the peers' 1 s).
const LATENCY_SETTLE: Duration = Duration::from_secs(1);

/// Commit-to-start latency at a moderate fixed rate, the worker (on `worker_on`: the
/// bench's own Herald, or a second one standing for another process) idle between
/// submits. Returns (p50 ms, p99 ms, deliveries).
pub(super) async fn latency(
    args: &Args,
    bench: &Bench,
    worker_on: &Herald,
    label: &str,
) -> Result<(f64, f64, usize)> {
    latency_on(args, bench, worker_on, label, Via::Library).await
}

/// Issue 36's fairness figure: commit-to-start at 200/s of every tenant but the first,
/// while the first's backlog (100,000 deliveries; 20,000 with --quick) drains through the
/// same worker: only the submits committed before the backlog's last send started count.
/// Returns the figures and the backlog's size.
pub(super) async fn latency_beside_backlog(
    args: &Args,
    bench: &Bench,
) -> Result<(Measured, usize)> {
    let backlog = if args.quick { 20_000 } else { 100_000 };
    let backlog = args.n.map_or(backlog, |n| backlog.min(n * 10));
    let [first, others @ ..] = bench.tenants.as_slice() else {
        bail!("the backlog phase needs two tenants or more");
    };
    if others.is_empty() {
        bail!("the backlog phase needs two tenants or more");
    }
    let b = bar(backlog, "one tenant's backlog (untimed)");
    let (herald, first) = (bench.herald.clone(), *first);
    spawn_clients(bench.clients, backlog, &b, move |i| {
        let (h, req) = (herald.clone(), backlog_request(first, i));
        async move {
            submit_one(&h, &req, Commit::Alone).await?;
            Ok(())
        }
    })
    .await?;
    b.finish();
    let label = format!(", beside one tenant's backlog of {backlog}");
    let measured =
        latency_of(args, bench, &bench.herald, &label, Via::Library, others, true).await?;
    Ok((measured, backlog))
}

fn backlog_request(tenant: herald::TenantId, i: usize) -> herald::SubmitRequest {
    herald::SubmitRequest::new(
        tenant,
        format!("backlog-{i}"),
        "webhook",
        "https://backlog.example.com/h",
        serde_json::json!({"event": "backlog"}),
    )
}

/// [`latency`], submitting `via` the library or the SQL API (whose submits the worker
/// hears of only by the database's wake-up, NOTIFY, as from another process).
pub(super) async fn latency_on(
    args: &Args,
    bench: &Bench,
    worker_on: &Herald,
    label: &str,
    via: Via,
) -> Result<(f64, f64, usize)> {
    let m = latency_of(args, bench, worker_on, label, via, &bench.tenants, false).await?;
    Ok((m.p50, m.p99, m.n))
}

/// [`latency`] with the submits made by the PHP package in a PHP process (`url`: the
/// bench's database), the worker in this one: `None`, saying why, without PHP.
pub(super) async fn latency_php(
    args: &Args,
    bench: &Bench,
    url: &str,
) -> Result<Option<(f64, f64, usize)>> {
    let target = PhpTarget::of(url)?;
    if let Some(why) = target.missing().await {
        eprintln!("note: the PHP package's commit-to-start phase was skipped: {why}");
        return Ok(None);
    }
    let php = Arc::new(target.session().await.context("the PHP session")?);
    let via = Via::Php(php.clone());
    let m = latency_of(args, bench, &bench.herald, " (PHP package)", via, &bench.tenants, false)
        .await?;
    if let Some(php) = Arc::into_inner(php) {
        php.finish().await?;
    }
    Ok(Some((m.p50, m.p99, m.n)))
}

/// A latency phase's figures (ms), how many it measured, and — beside a backlog — how many
/// of the backlog's sends started before the phase's worker stopped (when its own
/// deliveries were all sent), and how long after the worker's start the last of them did.
pub(super) struct Measured {
    pub(super) p50: f64,
    pub(super) p99: f64,
    pub(super) n: usize,
    pub(super) backlog_sent: usize,
    pub(super) backlog_took: Option<Duration>,
}

/// The phase itself, for `tenants`; `beside_backlog`: another tenant's backlog is
/// pending, the worker starts at once, and only what was committed before the backlog's
/// last send started is measured.
async fn latency_of(
    args: &Args,
    bench: &Bench,
    worker_on: &Herald,
    label: &str,
    via: Via,
    tenants: &[herald::TenantId],
    beside_backlog: bool,
) -> Result<Measured> {
    let herald = &bench.herald;
    let per_second = 200usize;
    let count = if args.quick { 600 } else { 3_000 };
    let count = args.n.map_or(count, |n| count.min(n));
    let b = bar(count, &format!("commit-to-start latency at 200/s{label}"));
    let channel = noop_of(count, ProgressBar::hidden(), Some("lat-"));
    let w = worker(worker_on, channel.clone(), args.workers, Duration::from_secs(1))?;
    let running = start(&w);
    let began = Instant::now();
    // The worker settles first, as every peer's does (bench/peers/README.md, "latency"):
    // a steady-state figure, not the first second of a worker whose LISTEN connection is
    // still being set up. Beside a backlog, it would drain much of it meanwhile.
    if !beside_backlog {
        tokio::time::sleep(LATENCY_SETTLE).await;
    }
    let committed: Arc<Mutex<HashMap<herald::DeliveryId, Instant>>> = Arc::default();
    let mut ticker = tokio::time::interval(Duration::from_secs(1) / per_second as u32);
    let mut submits = tokio::task::JoinSet::new();
    for i in 0..count {
        ticker.tick().await;
        let (h, committed, req, b, via) = (
            herald.clone(),
            committed.clone(),
            bench.request(tenants[i % tenants.len()], format!("lat-{i}"), "https://example.com/h"),
            b.clone(),
            via.clone(),
        );
        submits.spawn(async move {
            let id = match via {
                Via::Library => submit_one(&h, &req, Commit::Alone).await?,
                Via::Sql => {
                    let id = herald::bench::sql_submit(
                        &h,
                        req.tenant.as_uuid(),
                        &req.operation_key,
                        SQL_PAYLOAD_SMALL,
                        herald::bench::SqlSubmit::V1,
                    )
                    .await?;
                    herald::DeliveryId::from(
                        id.ok_or_else(|| anyhow!("an SQL submit was not created"))?,
                    )
                }
                Via::Php(php) => php.submit(&req.operation_key, req.tenant).await?,
            };
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
    let backlog_until = channel.other_last.lock().map_err(|_| anyhow!("poisoned"))?.to_owned();

    let mut latencies: Vec<f64> = {
        let committed = committed.lock().map_err(|_| anyhow!("poisoned"))?;
        let started = channel.started.lock().map_err(|_| anyhow!("poisoned"))?;
        committed
            .iter()
            .filter(|(_, at)| !beside_backlog || backlog_until.is_some_and(|until| **at < until))
            .filter_map(|(id, at)| {
                started.get(id).map(|s| s.saturating_duration_since(*at).as_secs_f64() * 1000.0)
            })
            .collect()
    };
    if latencies.is_empty() {
        bail!("latency phase{label}: nothing committed to measure");
    }
    latencies.sort_by(f64::total_cmp);
    Ok(Measured {
        p50: percentile(&latencies, 0.5),
        p99: percentile(&latencies, 0.99),
        n: latencies.len(),
        backlog_sent: channel.other_sent.load(std::sync::atomic::Ordering::SeqCst),
        backlog_took: backlog_until.map(|until| until.saturating_duration_since(began)),
    })
}
