//! The HTTP API's submit phases: `POST /v1/deliveries` through the real router and server
//! loop, served in-process on 127.0.0.1, at 1, 8 and 64 keep-alive connections (closed
//! loop: each connection sends its next request when the last is answered), then at a
//! fixed offered rate of half the 64-connection capacity (open loop: each request's
//! latency counts from when it was due, so a stall is not hidden by the requests it held
//! back) and of twice it (admission control at `herald serve`'s `HERALD_QUEUE_WAIT`:
//! every request answered, 201 or 503 `busy`, and how soon), then
//! `POST /v1/deliveries/batch`; 64 connections on one tenant (one account row
//! for every batch to lock), against the many-tenant figure; and the batched floor at the batch size the
//! group commit reached at 64 connections.
//!
//! Every phase checks its end state before its figure counts: every request answered 201
//! (or 201 per item; in the open loops 503 `busy` too), exactly as many pending deliveries
//! in the database as 201s, every account balanced (granted = available + reserved +
//! spent) and one unit reserved for each.

use super::harness::{Bench, bar, percentile, rate, spawn_clients};
use super::http::{serve_api_local, stop_local};
use super::report::{Figure, figure};
use anyhow::{Context, Result, anyhow, bail};
use herald::{Channel, DeliveryState, GroupCommitStats, Herald};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Items per `POST /v1/deliveries/batch` in the batch phase.
const BATCH_ITEMS: usize = 100;
/// Concurrent requests of the batch phase.
const BATCH_CONNECTIONS: usize = 8;
/// Open connections the server accepts: the open loop past capacity keeps about a queue
/// wait's worth of requests in flight, each on a connection of its own.
const OPEN_CONNECTIONS_MAX: usize = 4096;
/// The closed-loop connection counts.
const CONNECTIONS: [usize; 3] = [1, 8, 64];
/// The hot-tenant phase, whose "floor" is the 64-connection figure over many tenants.
const HOT_LABEL: &str =
    "submit, HTTP API, 64 connections, one tenant (against the many-tenant figure)";

/// What one closed- or open-loop phase measured.
struct Run {
    rate: f64,
    p50_ms: f64,
    p99_ms: f64,
    /// Submits per commit the group commit reached.
    per_commit: f64,
    n: usize,
    /// Of the `n`, answered 503 `busy` by admission control (open loops only).
    refused: usize,
    /// The slowest answer, in ms (open loops only).
    max_ms: f64,
}

impl Run {
    /// `label: p50` and `label: p99`, in ms.
    fn latency_figures(&self, label: &str) -> [Figure; 2] {
        [
            figure(format!("{label}: p50"), self.p50_ms, "ms", None, self.n, None),
            figure(format!("{label}: p99"), self.p99_ms, "ms", None, self.n, None),
        ]
    }

    /// The share of requests answered 201; admission control answered the rest 503 `busy`.
    fn created_figure(&self, label: &str) -> Figure {
        let share = (self.n - self.refused) as f64 / self.n.max(1) as f64;
        let name = format!("{label}: answered 201 (the rest 503 busy)");
        figure(name, share * 100.0, "%", None, self.n, None)
    }

    fn per_commit_figure(&self, label: &str) -> Figure {
        figure(format!("{label}: submits per commit"), self.per_commit, "", None, self.n, None)
    }

    /// A phase's figures from its requests' latencies (in any order) and the group
    /// commit's counters before and after it.
    fn new(
        n: usize,
        elapsed: Duration,
        mut ms: Vec<f64>,
        before: GroupCommitStats,
        after: GroupCommitStats,
    ) -> Run {
        ms.sort_by(f64::total_cmp);
        Run {
            rate: rate(n, elapsed),
            p50_ms: percentile(&ms, 0.50),
            p99_ms: percentile(&ms, 0.99),
            per_commit: after.submits_per_commit_since(&before),
            n,
            refused: 0,
            max_ms: ms.last().copied().unwrap_or(f64::NAN),
        }
    }
}

/// The server and its clients' keys, shared by the phases.
#[derive(Clone)]
struct Api {
    base: String,
    keys: Arc<Vec<String>>,
}

/// Every HTTP submit figure, against `floor_alone` (the one-statement submit floor of
/// this backend) and the batched floor measured here. `lanes`: how many batches herald
/// has in flight at once on this backend (the batched floor runs as many clients).
pub(super) async fn http_submit_figures(
    bench: &Bench,
    herald: &Herald,
    webhook: Arc<dyn Channel>,
    n: usize,
    floor_alone: f64,
    prefix: &str,
) -> Result<Vec<Figure>> {
    let admin_key = format!("bench-admin-{}", Uuid::now_v7().simple());
    let config = herald_server::serve::ServeConfig {
        listen: None,
        admin_key: Some(admin_key.clone()),
        viewer_key: None,
        metrics_token: None,
        metrics_per_tenant: false,
        http: herald_server::listen::HttpOptions::default(),
        worker: None,
        reconciler: None,
        retention: None,
        channels: vec![("webhook".to_string(), webhook)],
    };
    // As `herald serve` runs it: admission control at its default queue wait.
    let herald = &herald.clone().with_options(herald::EngineOptions {
        queue_wait: herald_core::limits::SERVE_QUEUE_WAIT_DEFAULT,
        ..*herald.options()
    })?;
    let router = herald_server::app(herald_server::serve::state(herald, &config));
    let (addr, stop, task) = serve_api_local(router, OPEN_CONNECTIONS_MAX).await?;
    let result = async {
        let base = format!("http://{addr}");
        let api = Api { keys: Arc::new(api_keys(&base, &admin_key, bench).await?), base };
        let mut figures = Vec::new();
        let mut at_64 = None;
        for connections in CONNECTIONS {
            // One connection answers one at a time: a quarter of N says as much, sooner.
            let n = if connections == 1 { (n / 4).max(10) } else { n };
            let label = format!(
                "{prefix}submit, HTTP API, {connections} connection{}",
                if connections == 1 { "" } else { "s" }
            );
            let run = closed_loop(bench, herald, &api, connections, n, &label).await?;
            figures.push(figure(&label, run.rate, "/s", Some(floor_alone), run.n, None));
            figures.extend(run.latency_figures(&label));
            figures.push(run.per_commit_figure(&label));
            if connections == 64 {
                at_64 = Some(run);
            }
        }
        let at_64 = at_64.ok_or_else(|| anyhow!("the 64-connection phase did not run"))?;

        // One hot tenant: every request on one account, whose row each batch locks.
        let hot_api = Api { base: api.base.clone(), keys: Arc::new(api.keys[..1].to_vec()) };
        let label = format!("{prefix}{HOT_LABEL}");
        let hot = closed_loop(bench, herald, &hot_api, 64, n, &label).await?;
        figures.push(figure(&label, hot.rate, "/s", Some(at_64.rate), hot.n, None));
        figures.push(hot.per_commit_figure(&label));

        // The batched floor at the batch size herald reached, with as many clients as
        // herald had batches in flight.
        let size = at_64.per_commit.round().max(1.0) as usize;
        let lanes = herald.group_commit_lanes();
        let batched = batched_floor(bench, herald, n, size, lanes).await?;
        figures.push(figure(
            format!("{prefix}submit, HTTP API, 64 connections, against the batched floor ({size} per commit, {lanes} client(s))"),
            at_64.rate,
            "/s",
            Some(batched),
            at_64.n,
            None,
        ));

        // Open loop at half the 64-connection capacity, for about five seconds.
        let offered = at_64.rate / 2.0;
        let open_n = ((offered * 5.0) as usize).clamp(100, n);
        let label = format!("{prefix}submit, HTTP API, open loop at {offered:.0}/s (half capacity)");
        let run = open_loop(bench, herald, &api, offered, open_n, &label).await?;
        figures.extend(run.latency_figures(&label));
        figures.push(run.created_figure(&label));

        // Open loop at twice the capacity, for about three seconds: admission control
        // answers the excess 503 `busy`; every answer, either way, should come within 1 s.
        let offered = at_64.rate * 2.0;
        let over_n = ((offered * 3.0) as usize).clamp(200, 4 * n);
        let label = format!("{prefix}submit, HTTP API, open loop at {offered:.0}/s (twice capacity)");
        let run = super::harness::before_overload(open_loop(
            bench, herald, &api, offered, over_n, &label,
        ))
        .await?;
        figures.extend(run.latency_figures(&label));
        figures.push(figure(format!("{label}: slowest answer"), run.max_ms, "ms", None, run.n, None));
        figures.push(run.created_figure(&label));
        let accepted = (run.n - run.refused) as f64 / run.n as f64 * offered;
        figures.push(figure(
            format!("{label}: accepted (against the 64-connection capacity)"),
            accepted,
            "/s",
            Some(at_64.rate),
            run.n - run.refused,
            None,
        ));

        let label = format!(
            "{prefix}submit, HTTP batch ({BATCH_ITEMS} per request, {BATCH_CONNECTIONS} connections)"
        );
        let run = batch_endpoint_waiting(bench, herald, &config, &api, n, &label).await?;
        figures.push(figure(&label, run.rate, "/s", Some(floor_alone), run.n, None));
        figures.push(run.per_commit_figure(&label));
        Ok(figures)
    }
    .await;
    stop_local(stop, task).await;
    result
}

/// The batch phase on a server of its own whose submits wait up to the library's queue
/// wait: it measures what the endpoint takes, and 8 requests of 100 keep 800 submits
/// outstanding — on MariaDB about half a second of queue, where `herald serve`'s default
/// admission control would start answering 503 `busy`.
async fn batch_endpoint_waiting(
    bench: &Bench,
    herald: &Herald,
    config: &herald_server::serve::ServeConfig,
    api: &Api,
    n: usize,
    label: &str,
) -> Result<Run> {
    let waiting = herald.clone().with_options(herald::EngineOptions {
        queue_wait: herald_core::limits::QUEUE_WAIT_DEFAULT,
        ..*herald.options()
    })?;
    let router = herald_server::app(herald_server::serve::state(&waiting, config));
    let (addr, stop, task) = serve_api_local(router, BATCH_CONNECTIONS).await?;
    let api = Api { base: format!("http://{addr}"), keys: api.keys.clone() };
    let run = batch_endpoint(bench, &waiting, &api, n, label).await;
    stop_local(stop, task).await;
    run
}

/// One API key per tenant, created through the admin API.
async fn api_keys(base: &str, admin_key: &str, bench: &Bench) -> Result<Vec<String>> {
    let client = client(1)?;
    let mut keys = Vec::with_capacity(bench.tenants.len());
    for t in &bench.tenants {
        let response = client
            .post(format!("{base}/v1/tenants/{t}/keys"))
            .bearer_auth(admin_key)
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
    Ok(keys)
}

fn client(connections: usize) -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(connections)
        .no_proxy()
        .build()
        .context("building the HTTP client")
}

fn body(phase: &str, i: usize) -> serde_json::Value {
    json!({
        "operation_key": format!("{phase}-{i}"),
        "channel": "webhook",
        "to": "https://example.com/hooks",
        "payload": {"event": "bench"},
    })
}

/// `POST /v1/deliveries` of item `i`, which must answer 201.
async fn post_one(client: &reqwest::Client, api: &Api, phase: &str, i: usize) -> Result<()> {
    if !post_open(client, api, phase, i).await? {
        bail!("POST /v1/deliveries: 503 busy");
    }
    Ok(())
}

/// `POST /v1/deliveries` of item `i`: created (201), or refused by admission control (503
/// `busy`, with Retry-After); anything else is an error.
async fn post_open(client: &reqwest::Client, api: &Api, phase: &str, i: usize) -> Result<bool> {
    let response = client
        .post(format!("{}/v1/deliveries", api.base))
        .header("authorization", &api.keys[i % api.keys.len()])
        .header("content-type", "application/json")
        .body(body(phase, i).to_string())
        .send()
        .await
        .context("POST /v1/deliveries")?;
    let status = response.status();
    let retry_after = response.headers().contains_key(reqwest::header::RETRY_AFTER);
    let answer = response.bytes().await?;
    match status {
        reqwest::StatusCode::CREATED => Ok(true),
        reqwest::StatusCode::SERVICE_UNAVAILABLE
            if retry_after && answer.windows(6).any(|w| w == b"\"busy\"") =>
        {
            Ok(false)
        }
        _ => bail!("POST /v1/deliveries: {status}: {}", String::from_utf8_lossy(&answer)),
    }
}

/// The phase's figure stands only if the database holds exactly `n` pending deliveries,
/// every account balances, and the phase reserved exactly one unit for each (`reserved`:
/// what [`Bench::reserved_checked`] said before it).
async fn verify(bench: &Bench, n: usize, label: &str, reserved: i64) -> Result<()> {
    let pending = bench.count(DeliveryState::Pending).await? as usize;
    if pending != n {
        bail!("{label}: {pending} pending deliveries in the database after {n} submits");
    }
    let taken = bench.reserved_checked(label).await? - reserved;
    if taken != n as i64 {
        bail!("{label}: {taken} units reserved for {n} submits");
    }
    Ok(())
}

async fn closed_loop(
    bench: &Bench,
    herald: &Herald,
    api: &Api,
    connections: usize,
    n: usize,
    label: &str,
) -> Result<Run> {
    bench.reset().await?;
    let reserved = bench.reserved_checked(label).await?;
    let client = client(connections)?;
    let phase = format!("http-{connections}");
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(n)));
    let b = bar(n, label);
    let before = herald.group_commit_stats();
    let started = Instant::now();
    let (api, recorded) = (api.clone(), latencies.clone());
    spawn_clients(connections, n, &b, move |i| {
        let (client, phase, recorded, api) =
            (client.clone(), phase.clone(), recorded.clone(), api.clone());
        async move {
            let sent = Instant::now();
            post_one(&client, &api, &phase, i).await?;
            if let Ok(mut l) = recorded.lock() {
                l.push(sent.elapsed().as_secs_f64() * 1000.0);
            }
            Ok(())
        }
    })
    .await?;
    let (elapsed, after) = (started.elapsed(), herald.group_commit_stats());
    b.finish();
    verify(bench, n, label, reserved).await?;
    let ms = latencies.lock().map(|l| l.clone()).unwrap_or_default();
    Ok(Run::new(n, elapsed, ms, before, after))
}

/// `n` requests offered at `per_second`, each sent when due (on a connection of its own
/// when every open one is busy); latency from when it was due to its answer, 201 or 503
/// `busy` (admission control), counted apart.
async fn open_loop(
    bench: &Bench,
    herald: &Herald,
    api: &Api,
    per_second: f64,
    n: usize,
    label: &str,
) -> Result<Run> {
    bench.reset().await?;
    let reserved = bench.reserved_checked(label).await?;
    let client = client(OPEN_CONNECTIONS_MAX)?;
    let b = bar(n, label);
    let before = herald.group_commit_stats();
    let start = tokio::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let due = start + Duration::from_secs_f64(i as f64 / per_second.max(1.0));
        tokio::time::sleep_until(due).await;
        let (client, b) = (client.clone(), b.clone());
        let api = api.clone();
        tasks.spawn(async move {
            let created = post_open(&client, &api, "http-open", i).await?;
            b.inc(1);
            let ms = (tokio::time::Instant::now() - due).as_secs_f64() * 1000.0;
            Ok::<_, anyhow::Error>((created, ms))
        });
    }
    let (mut ms, mut refused) = (Vec::with_capacity(n), 0);
    while let Some(joined) = tasks.join_next().await {
        let (created, answered) = joined??;
        refused += usize::from(!created);
        ms.push(answered);
    }
    let (elapsed, after) = (start.elapsed(), herald.group_commit_stats());
    b.finish();
    verify(bench, n - refused, label, reserved).await?;
    Ok(Run { refused, ..Run::new(n, elapsed, ms, before, after) })
}

/// `n` submits as `POST /v1/deliveries/batch` of [`BATCH_ITEMS`] each, from
/// [`BATCH_CONNECTIONS`] connections; every item must answer 201.
async fn batch_endpoint(
    bench: &Bench,
    herald: &Herald,
    api: &Api,
    n: usize,
    label: &str,
) -> Result<Run> {
    bench.reset().await?;
    let reserved = bench.reserved_checked(label).await?;
    let requests = n.div_ceil(BATCH_ITEMS);
    let client = client(BATCH_CONNECTIONS)?;
    let b = bar(n, label);
    let before = herald.group_commit_stats();
    let started = Instant::now();
    let (api_base, keys) = (api.base.clone(), api.keys.clone());
    let counted = b.clone();
    spawn_clients(BATCH_CONNECTIONS, requests, &indicatif::ProgressBar::hidden(), move |r| {
        let (client, keys, api_base, counted) =
            (client.clone(), keys.clone(), api_base.clone(), counted.clone());
        async move {
            let items: Vec<_> = (r * BATCH_ITEMS..((r + 1) * BATCH_ITEMS).min(n))
                .map(|i| body("http-batch", i))
                .collect();
            let count = items.len();
            let response = client
                .post(format!("{api_base}/v1/deliveries/batch"))
                .header("authorization", &keys[r % keys.len()])
                .header("content-type", "application/json")
                .body(json!({ "deliveries": items }).to_string())
                .send()
                .await
                .context("POST /v1/deliveries/batch")?;
            let status = response.status();
            let answer: serde_json::Value = serde_json::from_slice(&response.bytes().await?)?;
            let created = answer["results"]
                .as_array()
                .map_or(0, |r| r.iter().filter(|item| item["status"] == 201).count());
            if status != reqwest::StatusCode::OK || created != count {
                bail!(
                    "POST /v1/deliveries/batch: {status}, {created} of {count} created: {answer}"
                );
            }
            counted.inc(count as u64);
            Ok(())
        }
    })
    .await?;
    let (elapsed, after) = (started.elapsed(), herald.group_commit_stats());
    b.finish();
    verify(bench, n, label, reserved).await?;
    Ok(Run::new(n, elapsed, Vec::new(), before, after))
}

/// The batched submit floor: `n` floor submits in transactions of `size`, from `clients`
/// clients. Returns submits/s.
async fn batched_floor(
    bench: &Bench,
    herald: &Herald,
    n: usize,
    size: usize,
    clients: usize,
) -> Result<f64> {
    bench.reset().await?;
    let reserved = bench.reserved_checked("the batched floor").await?;
    let b = bar(n, &format!("floor: submit, {size} per commit"));
    let batches = n.div_ceil(size);
    let (h, tenants, counted) = (herald.clone(), bench.tenants.clone(), b.clone());
    let started = Instant::now();
    spawn_clients(clients, batches, &indicatif::ProgressBar::hidden(), move |k| {
        let (h, tenants, counted) = (h.clone(), tenants.clone(), counted.clone());
        async move {
            let mut items: Vec<_> = (k * size..((k + 1) * size).min(n))
                .map(|i| (tenants[i % tenants.len()].as_uuid(), format!("floor-batch-{i}")))
                .collect();
            // Accounts in one order in every transaction, as herald's batch locks them:
            // two clients then never wait on each other in a circle.
            items.sort();
            let claimed = herald::bench::floor_submit_batch(&h, &items).await?;
            if claimed != items.len() {
                bail!("the batched floor claimed {claimed} of {}", items.len());
            }
            counted.inc(claimed as u64);
            Ok(())
        }
    })
    .await?;
    let floor = rate(n, started.elapsed());
    b.finish();
    verify(bench, n, "the batched floor", reserved).await?;
    Ok(floor)
}
