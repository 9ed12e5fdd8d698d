//! The end-to-end phases of `herald bench`, where a worker's webhook channel sends every
//! delivery to a local receiver while clients submit, and the local servers every HTTP
//! phase uses (`http_submit.rs` has the HTTP API's submit phases).

use super::Args;
use super::harness::{Bench, DRAIN_TIMEOUT, bar, rate, start, worker};
use super::report::{Figure, PeerMetric, figure, per_delivery};
use anyhow::{Context, Result, bail};
use herald::bench::{Commit, Work};
use herald::channels::{WebhookChannel, WebhookOptions};
use herald::{Channel, DeliveryState, Herald};
use indicatif::ProgressBar;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The webhook channel the HTTP API and the end-to-end phase send through, allowed to reach
/// the local receiver.
pub(super) fn webhook_channel(herald: &Herald) -> Result<Arc<dyn Channel>> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Ok(Arc::new(WebhookChannel::new(
        herald.clone(),
        WebhookOptions { allow_private_targets: true, ..WebhookOptions::default() },
    )?))
}

pub(super) async fn end_to_end_figures(
    args: &Args,
    bench: &Bench,
    herald: &Herald,
    n: usize,
) -> Result<Vec<Figure>> {
    let (herald_e2e, (floor_e2e, floor_work)) =
        end_to_end(args, bench, herald, webhook_channel(herald)?, n).await?;
    let (noop_e2e, noop_work) = end_to_end_noop(args, bench, herald, n).await?;
    Ok(vec![
        figure("end-to-end: submit + webhook drain", herald_e2e, "/s", Some(floor_e2e), n, None),
        // The peers' own work (a no-op handler): the figure they are compared with, and
        // the one whose work per delivery (submit and drain) is counted.
        figure(
            "end-to-end: submit + no-op drain",
            noop_e2e,
            "/s",
            Some(floor_e2e),
            n,
            Some(PeerMetric::EndToEnd),
        )
        .work(per_delivery(noop_work, n), per_delivery(floor_work, n)),
    ])
}

/// C clients `submit_alone` while a worker drains with a no-op channel: from the first
/// submit to the N-th `sent` in the database, every delivery's send seen once. The rate,
/// and the database's work over the phase.
async fn end_to_end_noop(
    args: &Args,
    bench: &Bench,
    herald: &Herald,
    n: usize,
) -> Result<(f64, Option<Work>)> {
    bench.reset().await?;
    let b = bar(n, "end-to-end: submit + no-op drain");
    let channel = super::harness::noop(n, b.clone());
    let w = worker(herald, channel.clone(), args.workers, Duration::from_millis(50))?;
    let timed = async {
        let running = start(&w);
        let started = Instant::now();
        let outcome = submit_until_sent(
            bench,
            n,
            "e2e-noop",
            "https://example.com/h",
            &channel.done,
            "the no-op channel",
        )
        .await;
        running.stop().await?;
        outcome.map(|()| started.elapsed())
    };
    let counted = bench.counted(timed).await;
    b.finish();
    let (elapsed, work) = counted?;
    let seen = channel.sent.load(Ordering::SeqCst);
    let sent = bench.count(DeliveryState::Sent).await? as usize;
    if seen != n || sent != n {
        bail!("end-to-end, no-op: {seen} sends seen and {sent} sent in the database, expected {n}");
    }
    Ok((rate(n, elapsed), work))
}

/// Submits `n` deliveries to `to` from the bench's clients (`submit_alone`), waits until
/// `done` says `seen_by` saw every send, then until the database shows all `n` `sent`
/// (outcomes are recorded a moment later, in batches).
async fn submit_until_sent(
    bench: &Bench,
    n: usize,
    phase: &str,
    to: &str,
    done: &tokio::sync::Notify,
    seen_by: &str,
) -> Result<()> {
    bench
        .submit_herald_to(
            n,
            phase,
            &bench.tenants,
            false,
            to,
            Commit::Alone,
            &ProgressBar::hidden(),
        )
        .await?;
    tokio::time::timeout(DRAIN_TIMEOUT, done.notified())
        .await
        .with_context(|| format!("{seen_by} did not see every delivery"))?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let sent = bench.count(DeliveryState::Sent).await? as usize;
        if sent >= n {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {sent} of {n} deliveries are sent after {seen_by} saw them all");
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
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
) -> Result<(f64, (f64, Option<Work>))> {
    // The floor.
    bench.reset().await?;
    let b = bar(n, "floor: end-to-end (submit ∥ drain)");
    let hidden = ProgressBar::hidden();
    let timed = async {
        let started = Instant::now();
        let drain = bench.drain_floor(100, Some(n), &hidden);
        let submit = bench.submit_floor(n, "e2e-floor", Commit::Alone, &b);
        let (submitted, drained) = tokio::join!(submit, drain);
        submitted?;
        let (drained, _) = drained?;
        Ok((drained, rate(drained, started.elapsed())))
    };
    let ((drained, floor), floor_work) = bench.counted(timed).await?;
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
        let outcome =
            submit_until_sent(bench, n, "e2e", &to, &receiver.done, "the webhook receiver").await;
        running.stop().await?;
        let elapsed = outcome.map(|()| started.elapsed())?;
        let sent_after = bench.count(DeliveryState::Sent).await? as usize;
        if sent_after != n {
            bail!("end-to-end: {sent_after} deliveries sent in the database, expected {n}");
        }
        Ok(rate(n, elapsed))
    }
    .await;
    stop_local(stop, task).await;
    b.finish();
    Ok((result?, (floor, floor_work)))
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
    let listener = herald_server::listen::bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .context("binding 127.0.0.1")?;
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
pub(super) async fn serve_api_local(
    router: axum::Router,
    clients: usize,
) -> Result<(std::net::SocketAddr, herald::CancellationToken, tokio::task::JoinHandle<()>)> {
    let listener = herald_server::listen::bind(std::net::SocketAddr::from(([127, 0, 0, 1], 0)))
        .context("binding 127.0.0.1")?;
    let addr = listener.local_addr()?;
    let stop = herald::CancellationToken::new();
    let options = herald_server::listen::HttpOptions {
        connections_max: clients.max(herald_server::listen::CONNECTIONS_MAX_DEFAULT),
        ..herald_server::listen::HttpOptions::default()
    };
    let task = tokio::spawn(herald_server::listen::serve(listener, router, options, stop.clone()));
    Ok((addr, stop, task))
}

pub(super) async fn stop_local(stop: herald::CancellationToken, task: tokio::task::JoinHandle<()>) {
    stop.cancel();
    let abort = task.abort_handle();
    if tokio::time::timeout(Duration::from_secs(5), task).await.is_err() {
        abort.abort();
    }
}
