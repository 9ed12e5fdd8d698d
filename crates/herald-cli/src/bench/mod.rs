//! `herald bench`: herald's speed on one PostgreSQL, as ratios to a hand-written SQL floor
//! measured in the same run with the same harness and concurrency, and against peer queues
//! run right after herald on the same database. Each of herald's phases runs in a fresh
//! schema of the given database (dropped at the end); the delivery tables are emptied
//! before each compared phase, so herald and its floor start from the same table sizes.
//!
//! # What is compared to what
//!
//! | figure | herald | floor (herald-store's `bench.rs`, run through `herald::bench`) | peers (`--peers DIR`) |
//! |---|---|---|---|
//! | submit, library, submit_alone | C clients, one `Herald::submit_alone` each: on PostgreSQL one autocommitted statement | C clients, the floor's CTE (claim + payload + reservation; on PostgreSQL the reservation is held on the delivery row, elsewhere a journal row too) as one autocommitted statement | `insert`: C callers, one job per call, each its own transaction, unique key |
//! | submit, library, in a transaction | C clients, one delivery per `Herald::transaction` (`BEGIN`, `submit`, `COMMIT`: a submit inside the caller's transaction) | C clients, the same CTE between `BEGIN` and `COMMIT` | — |
//! | submit, one tenant | `submit_alone`, every delivery on one quota row | the one-statement submit floor | — |
//! | submit, half the keys repeat | `submit_alone`, every key submitted twice | the one-statement submit floor | — |
//! | submit, library, 64 tasks | `submit_alone` from 64 tasks: the group commit's case (the submits per commit are reported) | the one-statement submit floor (C clients) | `insert` from 64 callers (a run of its own) |
//! | submit, HTTP API, 1 / 8 / 64 connections | keep-alive `POST /v1/deliveries` to the real router (API-key auth, validation, `submit_alone`, group-committed), closed loop; p50, p99 and the submits per commit of each | the one-statement submit floor (no HTTP) | — |
//! | submit, HTTP API, 64 connections, batched | the 64-connection figure | the batched floor: *k* submits per transaction, one COMMIT each (PostgreSQL: one statement for the *k* rows, payloads and account updates, the reservations held on the rows; MariaDB and SQLite: the floor's statements once per submit), from as many clients as herald has batches in flight (*k*: the submits per commit herald reached) | — |
//! | submit, HTTP API, open loop | requests sent when due at half and at twice the 64-connection rate, with `herald serve`'s admission control (`HERALD_QUEUE_WAIT`, 500 ms): p50 / p99 (and past capacity the slowest) from when each was due, the share answered 201 (the rest 503 `busy`) | — | — |
//! | submit, HTTP batch | `POST /v1/deliveries/batch`, 100 items per request, 8 connections | the one-statement submit floor | — |
//! | drain, no-op channel | a worker with `--workers` send slots, a channel that returns `Sent` | C clients, one CTE per 100 rows (lease with SKIP LOCKED + sent + ledger + journal) | `drain`: N jobs bulk-inserted untimed, a no-op handler, until all are completed in the DB |
//! | end-to-end, webhook | C clients `submit_alone` *while* a worker with the real webhook channel sends each delivery to a local HTTP receiver; time from the first submit to the N-th `sent` in the DB | the submit floor's C clients and the drain floor's C parts run at once, until all N are submitted and drained — the floor makes **no HTTP call** | `e2e`: C callers insert one job per transaction while the peer's worker drains them with a no-op handler, until all are completed (no HTTP call: this flatters the peer) |
//! | end-to-end, no-op | the same with a no-op channel (the peers' work: the figure they are compared with) | the same floor | as above |
//! | commit-to-start p50 / p99 | `submit_alone` at a fixed rate (200/s), an idle worker polling every second: time from COMMIT returned to the channel's `send` | — | `latency`: the peer's worker running, jobs inserted at a fixed rate, insert returned → handler start (procrastinate at 50/s, its drain saturates below 200/s) |
//!
//! | SQLite: submit, library / drain / HTTP | the same phases on a fresh SQLite file (the default backend) | submit: `BEGIN IMMEDIATE`, claim + payload + reservation + journal row, `COMMIT`, from C clients; drain: one client, 100 rows marked sent per transaction, one account update per tenant, a journal row each | — |
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
//! Beside the rates, the work the database did per delivery (issue 34: counts that do not
//! move with the machine's noise), read from its own counters before and after a phase
//! (`herald::bench::Work`): on PostgreSQL WAL bytes, WAL records and full-page images,
//! rows inserted, updated (HOT among them) and deleted, transactions, and top-level
//! statements when the server preloads `pg_stat_statements`; on MariaDB redo log bytes,
//! rows written through the engines (`Handler_*`), statements sent (`Questions`) and
//! explicit commits. Counted for herald's
//! and the first floor pass's submits (alone and in a transaction) and drain, for the
//! no-op end-to-end phase (submit and drain together) of herald and the floor, and for
//! each peer's insert and e2e phases (its drain phase's count would include its untimed
//! bulk insert). The counters are server-wide, and PostgreSQL shows a transaction's
//! statistics up to a second after it ends, so each read waits that long first: about
//! 2 s per counted phase.
//!
//! Sizes: herald's phases use N deliveries (2,000 with `--quick`, 20,000 otherwise). The
//! peers use N too in a full run, except procrastinate (insert 2,000, drain and e2e 1,000,
//! latency 600 at 50/s) and the latency phase (3,000 at 200/s); `--quick` keeps the whole
//! run under three minutes with insert 1,000, drain and e2e 2,000, latency 600 at 200/s
//! (procrastinate: 500, 300, 300, 150 at 50/s). Every size is in the `--json` output.
//!
//! # Where things are
//!
//! - `mod.rs`: the options and the run — the scratch schema, the order of the backends
//!   and the peers, the table and the JSON.
//! - [`harness`]: the clients, progress bars, worker and channel every phase shares;
//!   herald and its floor run through the same code.
//! - [`phases`]: the PostgreSQL phases (floor passes, submits, drain, latency) and the
//!   SQLite ones.
//! - [`http_submit`]: the HTTP API's submit phases (closed and open loop, the batch
//!   endpoint, the batched floor).
//! - [`http`]: the end-to-end phases and the local servers the HTTP phases use.
//! - [`peers`]: finding and running the peer wrappers.
//! - [`report`]: figures, their ratios to the floor and to the peers, and the table.
//!
//! No SQL here and no store types: every statement the bench runs, the floor's included,
//! is in herald-store's `bench.rs`, reached through `herald::bench`.

mod app;
mod harness;
mod http;
mod http_submit;
mod latency;
mod peers;
mod phases;
mod php;
mod report;
mod sql_api;

use anyhow::{Context, Result, bail};
use herald::{Herald, WorkerOptions};
use peers::{peers_dir, run_peers};
use phases::{phases, sqlite_phases};
use report::{Figure, attach_peers, print_table};
use std::path::{Path, PathBuf};

#[derive(clap::Args)]
pub struct Args {
    /// PostgreSQL or MariaDB to measure on (a fresh schema, or on MariaDB a fresh
    /// database, is created and dropped; the user needs the right to create one).
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
    /// Most rows one lease takes of one lane (the workers' `lane_take_max`).
    #[arg(long, default_value_t = herald::LANE_TAKE_MAX_DEFAULT)]
    lane_take_max: usize,
    /// The bench's workers listen for no wake-up datagrams (`--wake-listen off`): the
    /// ablation of the wake-ups across processes on MariaDB.
    #[arg(long, hide = true)]
    no_wake_datagrams: bool,
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
    /// Only the one-statement submit floor and the HTTP submit phases (for profiling them).
    #[arg(long, hide = true, conflicts_with_all = ["drain_only", "e2e_only"])]
    http_only: bool,
    /// Only the application-transaction phases: an application's transaction with a
    /// submit inside, against the same transaction without.
    #[arg(long, conflicts_with_all = ["drain_only", "e2e_only", "http_only"])]
    app_only: bool,
    /// Only the one-statement submit floor and the SQL API's submit phases (the Rust
    /// clients' and the PHP package's), for profiling them.
    #[arg(long, hide = true, conflicts_with_all = ["drain_only", "e2e_only", "http_only", "app_only"])]
    sql_only: bool,
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
            .field("lane_take_max", &self.lane_take_max)
            .field("e2e_only", &self.e2e_only)
            .field("http_only", &self.http_only)
            .field("app_only", &self.app_only)
            .field("sql_only", &self.sql_only)
            .field("no_wake_datagrams", &self.no_wake_datagrams)
            .finish()
    }
}

pub async fn run(args: Args) -> Result<()> {
    if args.lane_take_max == 0 {
        bail!("--lane-take-max must be positive");
    }
    let _ = harness::LANE_TAKE_MAX.set(args.lane_take_max);
    let _ = harness::WAKE_DATAGRAMS.set(!args.no_wake_datagrams);
    let server_name = match herald::DbUrl::parse(&args.db) {
        Ok(herald::DbUrl::Postgres(_)) => "PostgreSQL",
        Ok(herald::DbUrl::MySql(_)) => "MariaDB",
        _ => bail!(
            "herald bench measures on a server: pass --db postgres://… or --db mariadb://… \
             (the SQLite phases run on a file of their own after PostgreSQL's)"
        ),
    };
    let mariadb = server_name == "MariaDB";
    if mariadb && args.peers.is_some() {
        bail!("--peers: the peer queues run on PostgreSQL only; pass --db postgres://…");
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
    let peers = if mariadb { None } else { peers_dir(&args)? };
    let n = args.n.unwrap_or(if args.quick { 2_000 } else { 20_000 });
    let mut server = herald::bench::Server::connect(&args.db)
        .await
        .with_context(|| format!("connecting to {server_name}"))?;
    let max_connections = server
        .connections_max()
        .await
        .with_context(|| format!("{server_name}'s max_connections"))?;
    // The end-to-end floor holds 2 × clients connections at once; herald's pool gets room
    // for that plus the worker, within what the server allows (a few kept spare).
    let available = (max_connections - 10).max(1) as usize;
    if 2 * args.clients + 4 > available {
        bail!(
            "--clients {} needs about {} connections, {server_name} allows {max_connections} \
             (max_connections): use at most {} clients",
            args.clients,
            2 * args.clients + 4,
            available.saturating_sub(4) / 2
        );
    }
    // ... and the application-transaction phases one connection per client, each held
    // for a whole transaction.
    let app_clients = app::APP_CLIENTS.iter().copied().max().unwrap_or(0);
    let connections = (2 * args.clients + 24).max(app_clients + 8).min(available);
    let schema = server.schema_create().await?;
    let version = format!("{server_name} {}", server.version().await?);
    let url = schema.url(&args.db);
    let result = measure(&args, n, &url, connections, &version, peers.as_deref()).await;
    let dropped = server.schema_drop(schema).await;
    server.close().await;
    let mut figures = result?;
    dropped?;
    let mut peer_runs = Vec::new();
    if !args.drain_only
        && !args.e2e_only
        && !args.http_only
        && !args.app_only
        && !args.sql_only
        && !mariadb
    {
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

async fn measure(
    args: &Args,
    n: usize,
    url: &str,
    connections: usize,
    version: &str,
    peers: Option<&Path>,
) -> Result<Vec<Figure>> {
    let options = herald::StoreOptions {
        connections_max: connections as u32,
        ..herald::StoreOptions::default()
    };
    let herald = Herald::open_with(url, &options).await?;
    // Open every connection of the pool before any clock starts: otherwise the first
    // phase (the floor) pays for connecting and herald's phases do not.
    herald::bench::pool_fill(&herald, connections)
        .await
        .context("opening the pool's connections")?;
    let result = phases(args, n, &herald, url, version, peers).await;
    herald.close().await;
    result
}
