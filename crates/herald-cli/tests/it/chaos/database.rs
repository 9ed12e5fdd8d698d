//! Database faults on servers of the suite's own (cluster.rs): herald's backends
//! terminated (PostgreSQL) or connections killed (MariaDB), and the server crashed and
//! restarted mid-run; and on PostgreSQL latency, a stall and a failover —
//! a primary with a synchronous standby, the primary crashed mid-run, the standby
//! promoted, herald reaching it through the fault proxy. Nothing herald acknowledged may
//! be lost.

use super::cluster::{Cluster, Maria, maria_or_skip, pg_bin_or_skip};
use super::*;
use herald_faults::FaultProxy;

fn deliveries() -> usize {
    if long() { 10_000 } else { 1_200 }
}

const CLIENTS: usize = 8;
/// Sends take this long at the receiver: one process's 8 slots drain ~160 /s, so the
/// faults land while deliveries are being submitted and sent.
const RECEIVER_DELAY: Duration = Duration::from_millis(50);
/// Time between faults: the long form's faults span its drain of about a minute.
fn fault_every() -> Duration {
    if long() { Duration::from_secs(3) } else { Duration::from_millis(700) }
}
/// Every delivery is sent within this of the last fault: a lease whose COMMIT went
/// unanswered (the runner's deadline, the lease, the reconciler, a backoff), and the rest
/// of the drain, counted at a pessimistic 100 /s.
fn recovery_bound() -> Duration {
    Duration::from_secs(60 + deliveries() as u64 / 100)
}
/// Every submit is accepted within this of the last fault.
const LOAD_BOUND: Duration = Duration::from_secs(90);

fn env() -> Vec<(&'static str, &'static str)> {
    FAST.iter().copied().chain([("HERALD_BACKOFF_MAX", "1s")]).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_crashed_and_restarted_server_and_terminated_backends_lose_nothing() {
    let Some(bin) = pg_bin_or_skip() else {
        eprintln!("skipped: no PostgreSQL binaries to start a server of the suite's own");
        return;
    };
    let cluster = Cluster::primary(&bin, "").await;
    let shared = SharedDb::Postgres(PgSchema::create(&cluster.url()).await);
    crash_and_cut(Own::Postgres(&cluster), &shared).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_mariadb_a_crashed_and_restarted_server_and_killed_connections_lose_nothing() {
    let Some(()) = maria_or_skip() else {
        eprintln!("skipped: no MariaDB binaries to start a server of the suite's own");
        return;
    };
    let mut server = Maria::start_new().await;
    let shared = SharedDb::MySql(MyDatabase::create(&server.url()).await);
    crash_and_cut(Own::MariaDb(&mut server), &shared).await;
}

/// A database server of the suite's own.
enum Own<'a> {
    Postgres(&'a Cluster),
    MariaDb(&'a mut Maria),
}

impl Own<'_> {
    async fn crash_and_restart(&mut self) {
        match self {
            Own::Postgres(c) => {
                c.crash().await;
                c.start().await;
            }
            Own::MariaDb(m) => {
                m.crash().await;
                m.start().await;
            }
        }
    }

    /// Ends every herald connection from the server's side; says how many.
    async fn cut_connections(&self) -> String {
        match self {
            Own::Postgres(c) => format!("{} backends terminated", c.terminate_backends().await),
            Own::MariaDb(m) => format!("{} connections killed", m.kill_connections().await),
        }
    }
}

/// While the deliveries flow: herald's connections cut every `fault_every()`, and once,
/// in the middle, the server crashed and restarted.
async fn crash_and_cut(mut server: Own<'_>, shared: &SharedDb) {
    let rounds = if long() { 20 } else { 6 };
    let mut faults = Vec::new();
    let mut run = Run::start(shared).await;
    for round in 0..rounds {
        // The fault schedule, not a wait for work.
        tokio::time::sleep(fault_every()).await;
        if round == rounds / 2 {
            server.crash_and_restart().await;
            faults.push("crash and restart".to_string());
        } else {
            faults.push(server.cut_connections().await);
        }
        run.faulted_at.push(Instant::now());
    }
    run.finish(shared, &format!("restarts: {faults:?}"), rounds).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failover_to_a_synchronous_standby_loses_nothing_acknowledged() {
    let Some(bin) = pg_bin_or_skip() else {
        eprintln!("skipped: no PostgreSQL binaries to start a server of the suite's own");
        return;
    };
    // An acknowledged commit is on both: the primary waits for the standby's flush.
    let primary =
        Cluster::primary(&bin, "synchronous_standby_names = '*'\nsynchronous_commit = on").await;
    let standby = Cluster::standby_of(&primary).await;
    let sync = "SELECT count(*)::text FROM pg_stat_replication WHERE sync_state = 'sync'";
    let by = Instant::now() + Duration::from_secs(30);
    while primary.scalar(sync).await != "1" {
        assert!(Instant::now() < by, "the standby did not become synchronous");
        // Polls the server's own view; it has no signal to wait on.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let proxy = FaultProxy::start(primary.addr()).await.expect("start the proxy");
    let through = format!("postgres://postgres@{}/postgres", proxy.addr());
    let shared = SharedDb::Postgres(PgSchema::create(&through).await);
    let mut run = Run::start(&shared).await;
    // Mid-run: latency on every byte, then the link stalled for a second and a half (every
    // connection waits, none is closed), then the primary is lost, the standby promoted,
    // the proxy moved to it.
    tokio::time::sleep(fault_every()).await;
    proxy.set_latency(Duration::from_millis(3));
    tokio::time::sleep(fault_every()).await;
    proxy.stall();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    proxy.resume();
    proxy.set_latency(Duration::ZERO);
    tokio::time::sleep(fault_every()).await;
    primary.crash().await;
    let failover = Instant::now();
    standby.promote().await;
    proxy.set_upstream(standby.addr());
    proxy.reset_all();
    run.faulted_at.push(Instant::now());
    let note = format!(
        "latency, a stall, then a failover (the promoted standby serving {:?} after the crash)",
        failover.elapsed()
    );
    run.finish(&shared, &note, 3).await;
}

/// One scenario's process, receiver and load.
struct Run {
    _cwd: tempfile::TempDir,
    server: Proc,
    receiver: LogReceiver,
    key: String,
    load: tokio::task::JoinHandle<(BTreeSet<String>, Statuses)>,
    started: Instant,
    /// When each fault was over (the server back, the backends killed, the proxy moved).
    faulted_at: Vec<Instant>,
}

impl Run {
    async fn start(shared: &SharedDb) -> Run {
        let cwd = tempfile::tempdir().expect("tempdir");
        let receiver = LogReceiver::start(RECEIVER_DELAY).await;
        let server = Proc::serve("serve", cwd.path(), &["--db", shared.url()], &env()).await;
        let n = deliveries();
        let (_tenant, key, _secret) = tenant_with_quota(&server, "database", n as i64).await;
        let servers = Arc::new(Mutex::new(vec![server.addr]));
        let load = tokio::spawn({
            let (key, to) = (key.clone(), receiver.url("database"));
            async move { submit_all(servers, &key, &to, "db", n, CLIENTS).await }
        });
        Run {
            _cwd: cwd,
            server,
            receiver,
            key,
            load,
            started: Instant::now(),
            faulted_at: Vec::new(),
        }
    }

    /// After the last of `faults` faults: waits for the load and the recovery, then checks.
    async fn finish(self, shared: &SharedDb, what: &str, faults: usize) {
        let last_fault = Instant::now();
        let n = deliveries();
        let load = tokio::time::timeout(LOAD_BOUND, self.load).await;
        let Ok(load) = load else {
            panic!(
                "{what}: the submits were not all accepted within {LOAD_BOUND:?}; stderr:\n{}",
                self.server.stderr()
            );
        };
        let (accepted, statuses) = load.expect("the submitting clients");
        let all_seen = self.receiver.until_all(&accepted, last_fault + recovery_bound()).await;
        assert!(
            all_seen,
            "{what}: {} of {} deliveries reached the receiver within {:?} of the \
             last fault; stderr:\n{}",
            self.receiver.distinct(),
            accepted.len(),
            recovery_bound(),
            self.server.stderr()
        );
        until_all_sent(shared, n, what).await;
        let recovered_in = last_fault.elapsed();
        let log = self.receiver.log();
        let verdict = check(self.server.addr, &self.key, &accepted, shared, &log).await;
        eprintln!(
            "{} {what}: {n} deliveries; {}; all sent {recovered_in:?} after the last fault, \
             {:?} in all",
            shared.name(),
            verdict.report(faults * SLOTS, &statuses, &self.faulted_at, &log),
            self.started.elapsed(),
        );
        verdict.assert_clean(what, n, accepted.len(), faults * SLOTS, &statuses);
    }
}
