//! Goodput under connection faults (issue 32): 8 HTTP clients submit webhooks to one
//! `herald serve` whose database connections go through the fault proxy, resending on 503
//! and on no answer, while the proxy breaks no connection, one a second, or one every
//! 100 ms: resets, and in the long form every tenth a connection gone silent (the harder
//! fault: only a timeout ends it, on either side, and a statement in flight on it waits
//! out the runner's deadline, 10 s, which a 3 s phase cannot average away).
//! Accepted submits per second with faults ÷ without, measured in the same run (phases
//! interleaved, so a slower moment of the shared machine hits every condition
//! alike) and printed; a lost connection should cost a retry of the statements in flight,
//! not seconds of every client's time.
//!
//! A measurement, so it sleeps: each phase *is* a stretch of wall-clock time under one
//! condition. The short form (CI) asserts loose floors; the long form
//! (`HERALD_FAULTS_LONG=1`) runs longer phases, three rounds, and asserts the targets.

use super::{CLIENTS, through, upstream_of};
use crate::chaos::long;
use crate::support::*;
use herald_faults::FaultProxy;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The conditions, in the order each round runs them.
const CONDITIONS: [(&str, Option<Duration>); 3] = [
    ("no faults", None),
    ("a fault every 1 s", Some(Duration::from_secs(1))),
    ("a fault every 100 ms", Some(Duration::from_millis(100))),
];
/// Quota for every submit the clients can make in a run.
const QUOTA: i64 = 1_000_000;

/// Goodput with faults ÷ without, at one reset a second and at one every 100 ms.
struct Targets {
    every_second: f64,
    every_100ms: f64,
}

/// The targets, asserted by the long form.
const TARGETS: Targets = Targets { every_second: 0.8, every_100ms: 0.5 };
/// The short form's floors: two short phases on a shared 2-core machine are noisy, so
/// these sit below the targets.
const FLOORS: Targets = Targets { every_second: 0.6, every_100ms: 0.35 };

/// How long one condition is measured, per round; and the rounds.
fn phase() -> (Duration, usize) {
    if long() { (Duration::from_secs(5), 3) } else { (Duration::from_secs(3), 1) }
}
/// The start of each phase is not counted: the previous condition's tail (a retry in
/// flight, connections being reopened) would otherwise be charged to this one.
const SETTLE: Duration = Duration::from_millis(500);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn goodput_under_connection_faults() {
    let Some(base) = postgres_url() else {
        eprintln!("skipped: {POSTGRES_ENV} is not set");
        return;
    };
    goodput(&base, SharedDb::Postgres(PgSchema::create(&base).await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn on_mariadb_goodput_under_connection_faults() {
    let Some(base) = mysql_url() else {
        eprintln!("skipped: {MYSQL_ENV} is not set");
        return;
    };
    goodput(&base, SharedDb::MySql(MyDatabase::create(&base).await)).await;
}

async fn goodput(base: &str, shared: SharedDb) {
    let proxy = Arc::new(FaultProxy::start(upstream_of(base).await).await.expect("proxy"));
    let db = through(shared.url(), proxy.addr());
    let cwd = tempfile::tempdir().expect("tempdir");
    let receiver = Receiver::start(false).await;
    let env: Vec<(&str, &str)> =
        FAST.iter().copied().chain([("HERALD_BACKOFF_MAX", "1s")]).collect();
    let server = Proc::serve("serve", cwd.path(), &["--db", &db], &env).await;
    let (_tenant, key, _secret) = tenant_with_quota(&server, "goodput", QUOTA).await;

    let accepted = Arc::new(AtomicUsize::new(0));
    let running = Arc::new(AtomicBool::new(true));
    let statuses = Arc::new(Mutex::new(super::Statuses::default()));
    let next = Arc::new(AtomicUsize::new(0));
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        let (addr, key, to) = (server.addr, key.clone(), receiver.url("goodput"));
        let (accepted, running, statuses, next) =
            (accepted.clone(), running.clone(), statuses.clone(), next.clone());
        clients.spawn(async move {
            while running.load(Ordering::Relaxed) {
                let i = next.fetch_add(1, Ordering::Relaxed);
                super::submit_until_accepted(addr, &key, &to, i, &statuses).await?;
                accepted.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, String>(())
        });
    }

    let (measured, rounds) = phase();
    let mut totals = [0usize; CONDITIONS.len()];
    for _ in 0..rounds {
        for (c, (_, every)) in CONDITIONS.iter().enumerate() {
            let started = tokio::time::Instant::now();
            let counting_from = started + SETTLE;
            let until = counting_from + measured;
            let mut counted = false;
            let mut tick = every.map(tokio::time::interval);
            let mut faults = 0u64;
            loop {
                let now = tokio::time::Instant::now();
                if !counted && now >= counting_from {
                    accepted.store(0, Ordering::Relaxed);
                    counted = true;
                }
                if now >= until {
                    break;
                }
                let wake = if counted { until } else { counting_from };
                match &mut tick {
                    Some(tick) => {
                        tokio::select! {
                            _ = tick.tick() => {
                                faults += 1;
                                if long() {
                                    super::fault(&proxy, faults);
                                } else {
                                    proxy.reset_random();
                                }
                            }
                            () = tokio::time::sleep_until(wake) => {}
                        }
                    }
                    None => tokio::time::sleep_until(wake).await,
                }
            }
            totals[c] += accepted.swap(0, Ordering::Relaxed);
        }
    }
    running.store(false, Ordering::Relaxed);
    while let Some(joined) = clients.join_next().await {
        if let Err(e) = joined.expect("client task") {
            panic!("{e}; stderr:\n{}", server.stderr());
        }
    }
    let statuses = std::mem::take(&mut *statuses.lock().unwrap());
    assert!(
        !statuses.by_status.contains_key(&500),
        "a broken connection is 503 at worst, never 500: {statuses:?}"
    );

    let seconds = measured.as_secs_f64() * rounds as f64;
    let per_second: Vec<f64> = totals.iter().map(|&n| n as f64 / seconds).collect();
    let ratio = |c: usize| per_second[c] / per_second[0];
    eprintln!(
        "{} goodput ({rounds} × {measured:?} per condition, 8 clients, {} faults): \
         {:.0}/s without faults; {:.0}/s with {} (ratio {:.2}); {:.0}/s with {} (ratio {:.2}); \
         HTTP {:?}, {} unanswered, slowest {:?}",
        shared.name(),
        proxy.faults(),
        per_second[0],
        per_second[1],
        CONDITIONS[1].0,
        ratio(1),
        per_second[2],
        CONDITIONS[2].0,
        ratio(2),
        statuses.by_status,
        statuses.unanswered,
        statuses.slowest,
    );
    let expected = if long() { TARGETS } else { FLOORS };
    assert!(totals[0] > 0, "no submit accepted without faults; stderr:\n{}", server.stderr());
    assert!(
        ratio(1) >= expected.every_second && ratio(2) >= expected.every_100ms,
        "{}: goodput with faults ÷ without: {:.2} at {}, {:.2} at {}; expected at least \
         {} and {}",
        shared.name(),
        ratio(1),
        CONDITIONS[1].0,
        ratio(2),
        CONDITIONS[2].0,
        expected.every_second,
        expected.every_100ms,
    );
}
