//! The kill loop: three `herald serve` processes on one database, one SIGKILLed every
//! second (every two in the long form) and restarted, while deliveries flow through all
//! three to a receiver that answers slowly enough for every kill to find sends in flight;
//! then one process stopped with SIGTERM mid-drain. Nothing accepted may be lost, a
//! duplicate is allowed only for a send in flight at a kill, and the ledger must balance.

use super::*;

/// Short form: deliveries, most kills. Long form: at least 10,000 deliveries.
fn size() -> (usize, usize, Duration) {
    if long() { (10_000, 40, Duration::from_secs(2)) } else { (1_200, 5, Duration::from_secs(1)) }
}

const PROCESSES: usize = 3;
const CLIENTS: usize = 8;
/// Each webhook is answered this long after it arrives: 3 processes × 8 slots drain about
/// 240 /s, so the short form's drain lasts about five seconds and each kill interrupts
/// sends.
const RECEIVER_DELAY: Duration = Duration::from_millis(100);
/// The kills stop once this share of the deliveries reached the receiver: later kills
/// would find little in flight.
const KILL_UNTIL_SHARE: f64 = 0.8;
/// Every delivery reaches the receiver within this of the last kill: a killed process's
/// leases expire (8 s in FAST), the reconciler (every 1 s) re-queues them, a backoff
/// (capped at 1 s here), and the drain of what is left.
const RECOVERY_BOUND: Duration = Duration::from_secs(40);
/// `HERALD_SHUTDOWN_GRACE` (10 s) plus closing the pool.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(15);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_loop_on_postgres_loses_nothing_and_duplicates_only_sends_in_flight() {
    let Some(base) = postgres_url() else {
        eprintln!("skipped: {POSTGRES_ENV} is not set");
        return;
    };
    kill_loop(SharedDb::Postgres(PgSchema::create(&base).await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_loop_on_mariadb_loses_nothing_and_duplicates_only_sends_in_flight() {
    let Some(base) = mysql_url() else {
        eprintln!("skipped: {MYSQL_ENV} is not set");
        return;
    };
    kill_loop(SharedDb::MySql(MyDatabase::create(&base).await)).await;
}

/// On one SQLite file: three processes, each with its own writer, meet in SQLite's busy
/// handler.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_loop_on_sqlite_loses_nothing_and_duplicates_only_sends_in_flight() {
    kill_loop(SharedDb::Sqlite(SqliteFile::create())).await;
}

async fn kill_loop(shared: SharedDb) {
    let (n, kills_max, kill_every) = size();
    let cwd = tempfile::tempdir().expect("tempdir");
    let receiver = LogReceiver::start(RECEIVER_DELAY).await;
    let env: Vec<(&str, &str)> =
        FAST.iter().copied().chain([("HERALD_BACKOFF_MAX", "1s")]).collect();
    let args = ["--db", shared.url()];
    let mut procs = Vec::with_capacity(PROCESSES);
    for i in 0..PROCESSES {
        procs.push(Proc::serve(&format!("serve-{i}"), cwd.path(), &args, &env).await);
    }
    let (_tenant, key, _secret) = tenant_with_quota(&procs[0], "kill-loop", n as i64).await;
    let servers = Arc::new(Mutex::new(procs.iter().map(|p| p.addr).collect::<Vec<_>>()));
    let started = Instant::now();
    let load = tokio::spawn({
        let (servers, key, to) = (servers.clone(), key.clone(), receiver.url("kill-loop"));
        async move { submit_all(servers, &key, &to, "kill", n, CLIENTS).await }
    });

    // The kill loop.
    let mut kills = 0;
    let mut last_kill = Instant::now();
    let mut killed_at = Vec::new();
    while kills < kills_max && (receiver.distinct() as f64) < KILL_UNTIL_SHARE * n as f64 {
        // The fault schedule, not a wait for work.
        tokio::time::sleep(kill_every).await;
        let slot = kills % PROCESSES;
        procs[slot].child.start_kill().expect("SIGKILL");
        procs[slot].child.wait().await.expect("reap the killed process");
        last_kill = Instant::now();
        killed_at.push(last_kill);
        kills += 1;
        let restarted =
            Proc::serve(&format!("serve-{slot}-after-kill-{kills}"), cwd.path(), &args, &env).await;
        servers.lock().unwrap()[slot] = restarted.addr;
        procs[slot] = restarted;
    }
    let (accepted, statuses) = load.await.expect("the submitting clients");
    assert!(kills >= 2, "the work ended before two kills: a kill loop needs slower sends");

    // SIGTERM mid-drain: the stopped process lets its started sends finish, hands back
    // the rest, and exits within the grace; the other two finish the work.
    let sigterm_at = receiver.distinct();
    let stopped_in = procs[0].stop(SHUTDOWN_BOUND).await;
    let survivor = procs[1].addr;

    let all_seen = receiver.until_all(&accepted, last_kill + RECOVERY_BOUND).await;
    if !all_seen {
        panic!(
            "{}: {} of {} deliveries reached the receiver within {RECOVERY_BOUND:?} of the \
             last kill; states {:?}; a survivor's stderr:\n{}",
            shared.name(),
            receiver.distinct(),
            accepted.len(),
            shared.states().await,
            procs[1].stderr()
        );
    }
    until_all_sent(&shared, n, shared.name()).await;
    // Recovered: every delivery recorded sent, counted from the last kill.
    let recovered_in = last_kill.elapsed();

    let log = receiver.log();
    let verdict = check(survivor, &key, &accepted, &shared, &log).await;
    eprintln!(
        "{} kill loop: {n} deliveries, {kills} SIGKILLs {kill_every:?} apart, a SIGTERM at \
         {sigterm_at} received (exit in {stopped_in:?}); {}; all sent {recovered_in:?} after \
         the last kill, {:?} in all",
        shared.name(),
        verdict.report(kills * SLOTS, &statuses, &killed_at, &log),
        started.elapsed(),
    );
    verdict.assert_clean(shared.name(), n, accepted.len(), kills * SLOTS, &statuses);
}
