//! The peer queues `herald bench` compares with: each is a wrapper program of its own
//! (`scripts/bench-peers` builds them; bench/peers/README.md has their contract), started
//! with its command line — `--db`, `--phase`, `--n`, `--clients`, `--rate` — once per
//! phase, right after herald's phases, on the same database. Its last stdout line is one
//! JSON object; this module reads it and nothing else of the peer's.

use super::Args;
use super::harness::spinner;
use super::phases::WIDE;
use anyhow::{Context, Result, bail};
use herald::bench::Work;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default peer wrapper directory (`scripts/bench-peers` writes it), relative to the
/// current directory; used only if it exists.
const PEERS_DEFAULT: &str = "target/peers/bin";
/// The peers in the order they are run and shown; any other wrapper found runs after them.
const PEERS_KNOWN: &[&str] = &["river", "graphile-worker", "pg-boss", "procrastinate"];
/// Longest a peer phase may take before it is killed and reported as failed.
const PEER_TIMEOUT: Duration = Duration::from_secs(300);

/// Where the peer wrappers are, if any should run.
pub(super) fn peers_dir(args: &Args) -> Result<Option<PathBuf>> {
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

/// One peer phase's JSON line (bench/peers/README.md, "The contract").
#[derive(Debug, Clone, serde::Deserialize)]
pub(super) struct PeerLine {
    #[serde(default)]
    pub(super) version: String,
    #[serde(default)]
    pub(super) config: String,
    pub(super) count: u64,
    pub(super) seconds: f64,
    pub(super) per_sec: f64,
    #[serde(default)]
    pub(super) p50_ms: Option<f64>,
    #[serde(default)]
    pub(super) p99_ms: Option<f64>,
}

/// The sizes one peer runs with.
#[derive(Debug, Clone, Copy)]
pub(super) struct PeerSizes {
    pub(super) insert: usize,
    pub(super) drain: usize,
    pub(super) e2e: usize,
    pub(super) latency: usize,
    pub(super) rate: u32,
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
pub(super) struct PeerRun {
    pub(super) name: String,
    pub(super) sizes: PeerSizes,
    pub(super) insert: Result<PeerLine, String>,
    /// The insert phase again from [`WIDE`] callers.
    pub(super) insert_wide: Result<PeerLine, String>,
    pub(super) drain: Result<PeerLine, String>,
    pub(super) e2e: Result<PeerLine, String>,
    pub(super) latency: Result<PeerLine, String>,
    /// The database's work in the insert and e2e phases and the jobs it was done for
    /// (`None` if it could not be read): see [`counted_phase`].
    pub(super) insert_work: Option<(Work, usize)>,
    pub(super) e2e_work: Option<(Work, usize)>,
}

/// The server's work counters once PostgreSQL's statistics have settled; `None` (and a
/// note on stderr) when they cannot be read.
async fn work(server: &mut herald::bench::Server) -> Option<Work> {
    tokio::time::sleep(Work::SETTLE).await;
    match server.work().await {
        Ok(work) => Some(work),
        Err(e) => {
            eprintln!("note: the database's work counters could not be read: {e}");
            None
        }
    }
}

pub(super) async fn run_peers(args: &Args, n: usize, dir: &Path) -> Result<Vec<PeerRun>> {
    let mut runs = Vec::new();
    let mut server = herald::bench::Server::connect(&args.db).await?;
    for (name, path) in peer_wrappers(dir)? {
        let sizes = peer_sizes(&name, args.quick, n);
        let phase_with = async |phase: &'static str, count: usize, clients: usize, rate| {
            let s = spinner(&format!("peer {name}: {phase} {count}, {clients} clients"));
            let result = run_peer(&path, &args.db, phase, count, clients, rate).await;
            match &result {
                Ok(_) => s.finish(),
                Err(e) => {
                    s.finish_with_message(format!("peer {name}: {phase} failed"));
                    eprintln!("peer {name}: {phase} failed: {e}");
                }
            }
            result
        };
        let phase = async |phase: &'static str, count: usize, rate: Option<u32>| {
            phase_with(phase, count, args.clients, rate).await
        };
        let (insert, insert_work) =
            counted_phase(&mut server, sizes.insert, async |n| phase("insert", n, None).await)
                .await;
        // Inserts from as many callers as herald's 64-task submit (issue 34, point 5): the
        // comparison of the group commit's own case is then like for like.
        let insert_wide = phase_with("insert", sizes.insert, WIDE, None).await;
        let drain = phase("drain", sizes.drain, None).await;
        let (e2e, e2e_work) =
            counted_phase(&mut server, sizes.e2e, async |n| phase("e2e", n, None).await).await;
        let latency = phase("latency", sizes.latency, Some(sizes.rate)).await;
        runs.push(PeerRun {
            name,
            sizes,
            insert,
            insert_wide,
            drain,
            e2e,
            latency,
            insert_work,
            e2e_work,
        });
    }
    server.close().await;
    Ok(runs)
}

fn since(before: Option<Work>, after: Option<Work>) -> Option<Work> {
    Some(after?.since(&before?))
}

/// Runs a peer phase of `n` jobs (its result is the figure), then once more with half as
/// many, for the counts only: a peer's phase also drops its schema, runs its migrations
/// and drops the schema again (bench/peers/README.md), which the server's counters cannot
/// tell from its jobs' work, so the work per job is the difference of the two runs over
/// the difference of their jobs — the same setup in both cancels out.
async fn counted_phase(
    server: &mut herald::bench::Server,
    n: usize,
    phase: impl AsyncFn(usize) -> Result<PeerLine, String>,
) -> (Result<PeerLine, String>, Option<(Work, usize)>) {
    let before = work(server).await;
    let full = phase(n).await;
    let full_work = since(before, work(server).await);
    let half = n / 2;
    let before = work(server).await;
    let counted = phase(half).await.is_ok() && full.is_ok();
    let half_work = since(before, work(server).await);
    let per_jobs = match (full_work, half_work) {
        (Some(full), Some(half_work)) if counted => Some((full.since(&half_work), n - half)),
        _ => None,
    };
    (full, per_jobs)
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
