//! The phases of `herald bench` on each backend, in the order they run: on PostgreSQL a
//! floor pass, herald's library submits and its drain, the hot-tenant and repeated-key
//! submits, a second floor pass, the commit-to-start latency, then the HTTP phases; on
//! SQLite a library submit and drain against the same work hand-written.

use super::Args;
use super::harness::{
    Bench, DRAIN_TIMEOUT, bar, noop, peak_rss_kib, rate, spawn_clients, start, worker,
};
use super::http::{end_to_end_figures, webhook_channel};
use super::http_submit::http_submit_figures;
use super::latency::{Via, latency, latency_beside_backlog, latency_on, latency_php};
use super::report::{Figure, PeerMetric, PerDelivery, figure, per_delivery};
use super::sql_api::sql_api_rates;
use anyhow::{Context, Result, bail};
use herald::bench::Commit;
use herald::{DeliveryState, Herald};
use std::path::Path;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// The floor's rates of one pass, and the work per delivery of a counted pass.
#[derive(Debug, Clone, Copy)]
struct FloorPass {
    submit_in_tx: f64,
    submit_alone: f64,
    drain: f64,
    work_in_tx: Option<PerDelivery>,
    work_alone: Option<PerDelivery>,
    work_drain: Option<PerDelivery>,
}

/// One pass of the floor on emptied tables: N submits from C clients inside transactions
/// (skipped with `--drain-only`), N more as single statements, then a drain of those in
/// batches of 100. With `count`, the database's work in each is counted too (the first
/// pass: the counts do not drift, and each read waits for PostgreSQL's statistics).
async fn floor_pass(
    bench: &Bench,
    n: usize,
    pass: &str,
    in_tx: bool,
    count: bool,
) -> Result<FloorPass> {
    let (mut submit_in_tx, mut work_in_tx) = (0.0, None);
    if in_tx {
        bench.reset().await?;
        let b = bar(n, &format!("floor ({pass}): submit in a transaction"));
        let submit = bench.submit_floor(n, "floor", Commit::InTransaction, &b);
        let (elapsed, work) = bench.counted_if(count, submit).await?;
        (submit_in_tx, work_in_tx) = (rate(n, elapsed), per_delivery(work, n));
        b.finish();
    }
    bench.reset().await?;
    let b = bar(n, &format!("floor ({pass}): submit, one statement"));
    let submit = bench.submit_floor(n, "floor", Commit::Alone, &b);
    let (elapsed, work_alone) = bench.counted_if(count, submit).await?;
    let submit_alone = rate(n, elapsed);
    b.finish();
    bench.analyze().await?;
    let b = bar(n, &format!("floor ({pass}): drain (batches of 100)"));
    let ((drained, elapsed), work_drain) =
        bench.counted_if(count, bench.drain_floor(100, None, &b)).await?;
    b.finish();
    Ok(FloorPass {
        submit_in_tx,
        submit_alone,
        drain: rate(drained, elapsed),
        work_in_tx,
        work_alone: per_delivery(work_alone, n),
        work_drain: per_delivery(work_drain, drained),
    })
}

/// What a drain of pre-submitted deliveries measured.
struct Drained {
    n: usize,
    rate: f64,
    /// Deliveries per transaction of the worker (its leases and records).
    per_transaction: f64,
    /// The database's work per delivery over the timed drain.
    work: Option<PerDelivery>,
}

impl Drained {
    fn transactions_figure(&self, label: &str) -> Figure {
        let name = format!("{label}: deliveries per transaction");
        figure(name, self.per_transaction, "", None, self.n, None)
    }
}

/// Drains every pending delivery with a no-op channel and `slots` send slots, timed until
/// the last outcome is committed. The figure stands only if every account balances
/// afterwards and the drain committed exactly one unit for each delivery.
async fn drain_herald(bench: &Bench, slots: usize, label: &str) -> Result<Drained> {
    bench.analyze().await?;
    let pending = bench.count(DeliveryState::Pending).await? as usize;
    let reserved = bench.reserved_checked(label).await?;
    let b = bar(pending, label);
    let channel = noop(pending, b.clone());
    let w = worker(&bench.herald, channel.clone(), slots, Duration::from_millis(50))?;
    let timed = async {
        let started = Instant::now();
        let running = start(&w);
        tokio::time::timeout(DRAIN_TIMEOUT, channel.done.notified())
            .await
            .context("drain did not finish")?;
        // The channel has seen every send; the phase ends when the last outcome is
        // committed.
        tokio::time::timeout(DRAIN_TIMEOUT, async {
            while (bench.count(DeliveryState::Sent).await? as usize) < pending {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            Ok::<_, anyhow::Error>(())
        })
        .await
        .context("drain: outcomes were not all recorded")??;
        let per_s = rate(pending, started.elapsed());
        running.stop().await?;
        Ok(per_s)
    };
    let (per_s, work) = bench.counted(timed).await?;
    b.finish();
    let committed = reserved - bench.reserved_checked(label).await?;
    if committed != pending as i64 {
        bail!("{label}: {committed} units committed for {pending} deliveries sent");
    }
    let stats = w.stats();
    let transactions = (stats.lease_transactions + stats.record_transactions).max(1);
    Ok(Drained {
        n: pending,
        rate: per_s,
        per_transaction: stats.leased as f64 / transactions as f64,
        work: per_delivery(work, pending),
    })
}

/// Fairness (issue 36): commit-to-start for every tenant but one, beside that one's
/// backlog; the comparison is `p99_alone`, the p99 without it, measured in this run. And
/// the backlog's drain meanwhile (one lane), against the drain floor (`floor_drain`).
async fn backlog_figures(
    args: &Args,
    bench: &Bench,
    p99_alone: f64,
    floor_drain: f64,
) -> Result<Vec<Figure>> {
    let (m, backlog) = latency_beside_backlog(args, bench).await?;
    let others = bench.tenants.len() - 1;
    let mut figures = vec![figure(
        format!(
            "commit-to-start p99 at 200/s of {others} tenants beside one tenant's backlog of \
             {backlog} (÷: the p99 without it)"
        ),
        m.p99,
        "ms",
        Some(p99_alone),
        m.n,
        None,
    )];
    // The phase ends when the others' deliveries are all sent, often before the backlog
    // is: the rate is of the backlog's sends that started by then (it once divided the
    // whole backlog by that time, and read about 6,665/s on every server).
    if let Some(took) = m.backlog_took.filter(|_| m.backlog_sent > 0) {
        figures.push(figure(
            format!(
                "drain of one tenant's backlog of {backlog} (one lane) beside them, its sends \
                 while they ran (÷: the many-tenant drain floor)"
            ),
            rate(m.backlog_sent, took),
            "/s",
            Some(floor_drain),
            m.backlog_sent,
            None,
        ));
    }
    Ok(figures)
}

/// The SQLite default, where it applies: submit and drain through the library on a fresh
/// file, against the same work hand-written (SQLite has one writer at a time, so the floor
/// drains from one client; submits take `BEGIN IMMEDIATE`, as herald does).
pub(super) async fn sqlite_phases(args: &Args, n: usize) -> Result<Vec<Figure>> {
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

        // The floor's submit is its own BEGIN IMMEDIATE transaction here (four statements:
        // SQLite has no writing CTEs).
        let b = bar(n, "SQLite floor: submit");
        let started = Instant::now();
        let (floor_herald, floor_tenants) = (herald.clone(), tenants.clone());
        spawn_clients(args.clients, n, &b, move |i| {
            let (herald, tenant) = (floor_herald.clone(), floor_tenants[i % floor_tenants.len()]);
            async move {
                let key = format!("floor-{i}");
                herald::bench::floor_submit(&herald, Commit::InTransaction, tenant.as_uuid(), &key)
                    .await?;
                Ok(())
            }
        })
        .await?;
        let floor_submit_rate = rate(n, started.elapsed());
        b.finish();
        bench.analyze().await?;
        let b = bar(n, "SQLite floor: drain");
        let started = Instant::now();
        let drained = herald::bench::floor_drain_one_client(&herald, 100, &|k| b.inc(k)).await?;
        let floor_drain_rate = rate(drained as usize, started.elapsed());
        b.finish();

        bench.reset().await?;
        let b = bar(n, "SQLite: submit, library");
        let submit =
            rate(n, bench.submit_herald(n, "lib", &tenants, false, Commit::Alone, &b).await?);
        b.finish();
        let label = format!("SQLite: drain, no-op channel, {} slots", args.workers);
        let drained = drain_herald(&bench, args.workers, &label).await?;
        let http = http_submit_figures(
            &bench,
            &herald,
            webhook_channel(&herald)?,
            n,
            floor_submit_rate,
            "SQLite: ",
        )
        .await;
        herald.close().await;
        let mut figures = vec![
            figure(
                "SQLite: submit, library, single-delivery transactions",
                submit,
                "/s",
                Some(floor_submit_rate),
                n,
                None,
            ),
            figure(&label, drained.rate, "/s", Some(floor_drain_rate), drained.n, None),
            drained.transactions_figure(&label),
        ];
        figures.extend(http?);
        Ok(figures)
    }
    .await;
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The one-statement submit floor, one pass: the yardstick of the profiling modes.
async fn floor_alone_once(bench: &Bench, n: usize) -> Result<f64> {
    bench.reset().await?;
    let b = bar(n, "floor: submit, one statement");
    let floor_alone = rate(n, bench.submit_floor(n, "floor", Commit::Alone, &b).await?);
    b.finish();
    Ok(floor_alone)
}

pub(super) async fn phases(
    args: &Args,
    n: usize,
    herald: &Herald,
    url: &str,
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
        return end_to_end_figures(args, &bench, herald, n).await;
    }
    if args.app_only {
        let role = herald::bench::session_role(herald).await?;
        herald.sql_grant(&role, None).await?;
        herald::bench::app_table_create(herald).await?;
        return super::app::app_transaction_figures(args, &bench, herald, n).await;
    }
    if args.sql_only {
        let floor_alone = floor_alone_once(&bench, n).await?;
        let rates = sql_api_rates(args, &bench, herald, url, n).await?;
        let vs = |(name, value, n): (String, f64, usize)| {
            figure(name, value, "/s", Some(floor_alone), n, None)
        };
        return Ok(rates.into_iter().map(vs).collect());
    }
    if args.http_only {
        let floor_alone = floor_alone_once(&bench, n).await?;
        return http_submit_figures(&bench, herald, webhook_channel(herald)?, n, floor_alone, "")
            .await;
    }
    println!(
        "herald bench{}: {version}, {} clients, {} send slots, {} tenants, \
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
    let before = floor_pass(&bench, n, "before", in_tx, true).await?;

    // herald's submits through the library, then a drain of what they made: the same N,
    // on the same table size, as the floor's.
    let (mut herald_in_tx, mut work_in_tx) = (0.0, None);
    if in_tx {
        bench.reset().await?;
        let b = bar(n, "submit, library, in a transaction");
        let submit = bench.submit_herald(n, "lib-tx", &tenants, false, Commit::InTransaction, &b);
        let (elapsed, work) = bench.counted(submit).await?;
        (herald_in_tx, work_in_tx) = (rate(n, elapsed), per_delivery(work, n));
        b.finish();
    }
    bench.reset().await?;
    let b = bar(n, "submit, library, submit_alone");
    let batches_before = herald.group_commit_stats();
    let submit = bench.submit_herald(n, "lib", &tenants, false, Commit::Alone, &b);
    let (elapsed, work_alone) = bench.counted(submit).await?;
    let herald_alone = rate(n, elapsed);
    let alone_per_commit = herald.group_commit_stats().submits_per_commit_since(&batches_before);
    b.finish();
    let drain_label = format!("drain, no-op channel, {} slots", args.workers);
    let drained = drain_herald(&bench, args.workers, &drain_label).await?;
    let wide = if args.drain_only {
        None
    } else {
        // The group commit's own case: many callers at once.
        bench.reset().await?;
        let wide = Bench { herald: herald.clone(), tenants: tenants.clone(), clients: WIDE };
        let b = bar(n, &format!("submit, library, submit_alone, {WIDE} tasks"));
        let before = herald.group_commit_stats();
        let value =
            rate(n, wide.submit_herald(n, "wide", &tenants, false, Commit::Alone, &b).await?);
        let per_commit = herald.group_commit_stats().submits_per_commit_since(&before);
        b.finish();
        Some((value, per_commit))
    };
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

    let after = floor_pass(&bench, n, "after", in_tx, false).await?;
    let mean = |pick: fn(&FloorPass) -> f64| (pick(&before) + pick(&after)) / 2.0;
    let (floor_in_tx, floor_alone, floor_drain) =
        (mean(|p| p.submit_in_tx), mean(|p| p.submit_alone), mean(|p| p.drain));
    let in_tx_passes = [before.submit_in_tx, after.submit_in_tx];
    let alone_passes = [before.submit_alone, after.submit_alone];
    let drain_transactions = drained.transactions_figure(&drain_label);
    let drain_figure = figure(
        drain_label,
        drained.rate,
        "/s",
        Some(floor_drain),
        drained.n,
        Some(PeerMetric::Drain),
    )
    .floor_passes(&[before.drain, after.drain])
    .work(drained.work, before.work_drain);
    let vs_alone = |name: &str, value: f64, n: usize, compare: Option<PeerMetric>| {
        figure(name, value, "/s", Some(floor_alone), n, compare).floor_passes(&alone_passes)
    };
    let submit_figure = vs_alone(
        "submit, library, submit_alone (one statement)",
        herald_alone,
        n,
        Some(PeerMetric::Insert),
    )
    .work(per_delivery(work_alone, n), before.work_alone);
    let Some((hot, dup)) = hot_and_dup else {
        // --drain-only: the drain, and what one lane's backlog costs the other tenants.
        let mut figures = vec![submit_figure, drain_figure, drain_transactions];
        bench.reset().await?;
        let (_, p99, _) = latency(args, &bench, herald, "").await?;
        figures.extend(backlog_figures(args, &bench, p99, floor_drain).await?);
        return Ok(figures);
    };
    figures.push(submit_figure);
    figures.push(figure(
        "submit, library, submit_alone: submits per commit",
        alone_per_commit,
        "",
        None,
        n,
        None,
    ));
    figures.push(
        figure(
            "submit, library, in a transaction (BEGIN, submit, COMMIT)",
            herald_in_tx,
            "/s",
            Some(floor_in_tx),
            n,
            None,
        )
        .floor_passes(&in_tx_passes)
        .work(work_in_tx, before.work_in_tx),
    );
    figures.push(drain_figure);
    figures.push(drain_transactions);
    if let Some((value, per_commit)) = wide {
        let name = format!("submit, library, submit_alone, {WIDE} tasks");
        figures.push(vs_alone(&name, value, n, Some(PeerMetric::InsertWide)));
        figures.push(figure(format!("{name}: submits per commit"), per_commit, "", None, n, None));
    }
    figures.push(vs_alone("submit, one tenant (hot quota row)", hot, n / 2, None));
    figures.push(vs_alone("submit, half the keys repeat", dup, n, None));

    bench.reset().await?; // the hot and duplicate submits' deliveries are never sent
    let (p50, p99, count) = latency(args, &bench, herald, "").await?;
    let p99_alone = p99;
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
    // The same with the worker in a second Herald on the same database: none of the
    // submitting process's in-process wake-ups reach it, only what crosses processes
    // (NOTIFY on PostgreSQL; a datagram to the worker's wake target on MariaDB and SQLite,
    // `datagram.rs`), and polling.
    bench.reset().await?;
    let second = Herald::open_with(url, &herald::StoreOptions::default()).await?;
    let measured = latency(args, &bench, &second, ", worker in a second Herald").await;
    second.close().await;
    let (p50, p99, count) = measured?;
    figures.push(figure(
        "commit-to-start p50 at 200/s, worker in a second process",
        p50,
        "ms",
        None,
        count,
        None,
    ));
    figures.push(figure(
        "commit-to-start p99 at 200/s, worker in a second process",
        p99,
        "ms",
        None,
        count,
        None,
    ));

    bench.reset().await?;
    figures.extend(backlog_figures(args, &bench, p99_alone, floor_drain).await?);
    bench.reset().await?;

    figures.extend(
        http_submit_figures(&bench, herald, webhook_channel(herald)?, n, floor_alone, "").await?,
    );

    if herald.backend() != herald::Backend::Sqlite {
        // The SQL API, as an application calls it: one autocommitted call per submit, on
        // the bench's own role (granted every tenant).
        for (name, value, n) in sql_api_rates(args, &bench, herald, url, n).await? {
            figures.push(vs_alone(&name, value, n, None));
        }
        // The application's own commits, with and without a submit inside (point 5 of
        // the SQL-API issue: its wake-up must not serialise them).
        herald::bench::app_table_create(herald).await?;
        let mut app_rates = Vec::new();
        for (label, with) in [("without", false), ("with", true)] {
            bench.reset().await?;
            let b = bar(n, &format!("application commits, {label} an SQL submit"));
            let (h, tenants) = (herald.clone(), bench.tenants.clone());
            let started = Instant::now();
            spawn_clients(args.clients, n, &b, move |i| {
                let (h, tenant) = (h.clone(), tenants[i % tenants.len()]);
                async move {
                    let order = format!("app-{label}-{i}");
                    let submit = with.then(|| (tenant.as_uuid(), 1));
                    let v1 = herald::bench::SqlSubmit::V1;
                    herald::bench::app_commit(&h, &order, submit, Duration::ZERO, v1).await?;
                    Ok(())
                }
            })
            .await?;
            app_rates.push(rate(n, started.elapsed()));
            b.finish();
        }
        figures.push(figure(
            "application commits with an SQL submit inside (vs. without)",
            app_rates[1],
            "/s",
            Some(app_rates[0]),
            n,
            None,
        ));
        figures.extend(super::app::app_transaction_figures(args, &bench, herald, n).await?);
        bench.reset().await?;
        let (p50, p99, count) = latency_on(args, &bench, herald, " (SQL API)", Via::Sql).await?;
        for (name, value) in [
            ("commit-to-start p50 at 200/s, SQL API submits", p50),
            ("commit-to-start p99 at 200/s, SQL API submits", p99),
        ] {
            figures.push(figure(name, value, "ms", None, count, None));
        }
        // The same through the PHP package, which wakes the workers after its commit where
        // the database cannot (MariaDB); the SQL calls above make no such wake-up.
        bench.reset().await?;
        if let Some((p50, p99, count)) = latency_php(args, &bench, url).await? {
            for (name, value) in [
                ("commit-to-start p50 at 200/s, SQL API submits through the PHP package", p50),
                ("commit-to-start p99 at 200/s, SQL API submits through the PHP package", p99),
            ] {
                figures.push(figure(name, value, "ms", None, count, None));
            }
        }
    }
    figures.extend(end_to_end_figures(args, &bench, herald, n).await?);

    if let Some(kib) = peak_rss_kib() {
        figures.push(figure("peak RSS of this process", kib as f64 / 1024.0, "MiB", None, 0, None));
    }
    let before = super::harness::PEAK_BEFORE_OVERLOAD.load(std::sync::atomic::Ordering::Relaxed);
    if before > 0 {
        let name = "peak RSS of this process before the twice-capacity open loop";
        figures.push(figure(name, before as f64 / 1024.0, "MiB", None, 0, None));
    }
    Ok(figures)
}

/// Tasks of the wide library submit phase (and of the HTTP phase's widest).
pub(super) const WIDE: usize = 64;
