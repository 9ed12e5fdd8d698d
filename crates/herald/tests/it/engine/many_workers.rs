//! Many workers.

use super::reconciler::ghost_lease;
use super::*;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::SeqCst;

/// Counts sends per delivery id and reports each on a channel; sent, or — with
/// `terminal_every: Some(k)` — terminal for every k-th delivery by its key's number.
struct Counter {
    seen: Mutex<HashMap<herald::DeliveryId, u32>>,
    done: mpsc::UnboundedSender<herald::DeliveryId>,
    terminal_every: Option<usize>,
}

impl Channel for Counter {
    fn send<'a>(&'a self, d: &'a Leased) -> herald::BoxFuture<'a, Outcome> {
        Box::pin(async move {
            *self.seen.lock().unwrap().entry(d.id).or_default() += 1;
            let _ = self.done.send(d.id);
            let number =
                || -> usize { d.operation_key.rsplit('-').next().unwrap().parse().unwrap() };
            match self.terminal_every {
                Some(k) if number().is_multiple_of(k) => {
                    Outcome::terminal("rejected", "no such mailbox")
                }
                _ => Outcome::Sent,
            }
        })
    }
}

/// Submits `n` deliveries in transactions of 100.
async fn submit_many(
    herald: &herald::Herald,
    n: usize,
    req: impl Fn(usize) -> SubmitRequest + Sync,
) {
    let req = &req;
    for batch in 0..n.div_ceil(100) {
        let h = herald.clone();
        herald
            .transaction(|tx| {
                let h = h.clone();
                Box::pin(async move {
                    for i in batch * 100..((batch + 1) * 100).min(n) {
                        h.submit(tx, &req(i)).await?;
                    }
                    Ok(())
                })
            })
            .await
            .unwrap();
    }
}

/// Runs a worker per engine until `n` sends have started, then shuts them down — which
/// waits for every started send's outcome to be recorded. `false` if the sends did not
/// all start in time.
async fn work_until_started(
    engines: [(&herald::Herald, &str); 2],
    channel: Arc<dyn Channel>,
    slots: usize,
    n: usize,
    started: &mut mpsc::UnboundedReceiver<herald::DeliveryId>,
) -> bool {
    let stop = herald::CancellationToken::new();
    let mut runs = Vec::new();
    for (engine, id) in engines {
        let options = WorkerOptions { id: id.into(), slots, ..WorkerOptions::default() };
        let channels = [("email".to_string(), channel.clone())];
        let worker = Worker::new(engine.clone(), options, channels).unwrap();
        let stop = stop.clone();
        runs.push(tokio::spawn(async move { worker.run(stop).await }));
    }
    let all = tokio::time::timeout(Duration::from_secs(120), async {
        for _ in 0..n {
            started.recv().await;
        }
    })
    .await;
    stop.cancel();
    for run in runs {
        run.await.unwrap().unwrap();
    }
    all.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_on_separate_pools_send_each_of_1000_deliveries_exactly_once() {
    const N: usize = 1000;
    for db in common::backends().await {
        let a = db.herald().await;
        let b = db.herald().await; // a second engine: its own pool, its own wake-ups
        let tenant = a.tenant_create("acme").await.unwrap().id;
        submit_many(&a, N, |i| SubmitRequest {
            cost: Some(0),
            ..request(tenant, &format!("op-{i}"))
        })
        .await;
        let (done_tx, mut done) = mpsc::unbounded_channel();
        let counter =
            Arc::new(Counter { seen: Mutex::default(), done: done_tx, terminal_every: None });
        let engines = [(&a, "engine-a"), (&b, "engine-b")];
        let all = work_until_started(engines, counter.clone(), 16, N, &mut done).await;
        assert!(all, "{}: not all deliveries were sent in time", db.name());
        let seen = counter.seen.lock().unwrap();
        assert_eq!(seen.len(), N, "{}", db.name());
        assert!(seen.values().all(|&n| n == 1), "{}: a delivery was sent twice", db.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reconcilers_requeue_each_expired_lease_once() {
    for env in envs().await {
        for i in 0..20 {
            env.submit(request(env.tenant, &format!("op-{i}"))).await;
        }
        assert_eq!(ghost_lease(&env, "ghost").await, 20);
        env.clock.advance(Duration::from_secs(61));
        let passes: Vec<_> = (0..4)
            .map(|_| {
                let reconciler = env.reconciler();
                tokio::spawn(async move { reconciler.run_once().await.unwrap() })
            })
            .collect();
        let mut requeued = 0;
        for pass in passes {
            requeued += pass.await.unwrap().requeued;
        }
        assert_eq!(requeued, 20, "{}: each lease re-queued exactly once", env.name);
        assert_eq!(env.reconciler().run_once().await.unwrap().requeued, 0, "{}", env.name);
        // Everything re-queued is due within the first backoff ceiling (1 s).
        env.clock.advance(Duration::from_secs(2));
        let age = env.reconciler().run_once().await.unwrap().oldest_due_age;
        assert!(age.is_some_and(|a| a <= Duration::from_secs(2)), "{}: {age:?}", env.name);
    }
}

#[tokio::test]
async fn the_database_itself_refuses_a_second_final_movement_and_an_unbalanced_account() {
    use herald_store::quota::{Settle, quota_settle};
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        env.worker(Script::new([]), options("w1")).run_once().await.unwrap();
        // Another delivery holds 2 units, so the balance CHECKs alone would let a second
        // release of op-1's 2 units through.
        env.submit(request(env.tenant, "op-2")).await;
        assert_eq!(env.quota().await, (100, 96, 2, 2));
        // A buggy caller releasing a reservation that was already committed: the unique
        // index on final movements refuses it, and the balances do not move.
        let tenant = env.tenant;
        let second = env
            .herald
            .transaction(|tx| {
                Box::pin(async move {
                    quota_settle(
                        tx.conn(),
                        tenant.as_uuid(),
                        "email",
                        2,
                        d.id.as_uuid(),
                        1,
                        Settle::Release,
                        Now::Database,
                    )
                    .await?;
                    Ok(())
                })
            })
            .await;
        assert!(
            matches!(&second, Err(Error::Store(e)) if e.is_unique_violation()),
            "{}: {second:?}",
            env.name
        );
        assert_eq!(env.quota().await, (100, 96, 2, 2), "{}", env.name);
        // Taking more than is available breaks the CHECK, whatever the code says.
        let overdraw = env
            .herald
            .transaction(|tx| {
                Box::pin(async move {
                    let sql = "UPDATE quota_accounts SET available = available - 1000, spent = spent + 1000";
                    match tx.conn() {
                        herald::Conn::Sqlite(c) => herald::sqlx::query(sql).execute(c).await.map(drop)?,
                        herald::Conn::Postgres(c) => herald::sqlx::query(sql).execute(c).await.map(drop)?,
                        herald::Conn::MySql(c) => herald::sqlx::query(sql).execute(c).await.map(drop)?,
                    }
                    Ok(())
                })
            })
            .await;
        assert!(overdraw.is_err(), "{}: the CHECK must refuse a negative balance", env.name);
        assert_eq!(env.quota().await, (100, 96, 2, 2), "{}", env.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_send_extends_its_lease_so_the_reconciler_leaves_it_alone() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-long")).await;
        let channel = Script::new([]);
        let release = channel.hold();
        let mut entered = channel.watch();
        let options =
            WorkerOptions { heartbeat_every: Some(Duration::from_millis(20)), ..options("w1") };
        let worker = env.worker(channel.clone(), options);
        let running = tokio::spawn(async move { worker.run_once().await });
        assert_eq!(entered.recv().await, Some(d.id), "{}", env.name);
        let first_lease = env.get(d.id).await;
        assert_eq!(first_lease.state, DeliveryState::Sending, "{}", env.name);
        let until = |env: &Env| {
            let id = d.id;
            let herald = env.herald.clone();
            async move {
                herald
                    .transaction(|tx| {
                        Box::pin(async move {
                            Ok(herald_store::deliveries::delivery_get(
                                tx.conn(),
                                None,
                                id.as_uuid(),
                                false,
                            )
                            .await?)
                        })
                    })
                    .await
                    .unwrap()
                    .value
                    .and_then(|r| r.lease_until)
                    .unwrap()
            }
        };
        let original = until(&env).await;
        // Time passes (past the original lease); the heartbeat must move the lease on.
        env.clock.advance(Duration::from_secs(50));
        let extended = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let now = until(&env).await;
                if now > original {
                    return now;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{}: the heartbeat never extended the lease", env.name));
        assert_eq!(extended - original, 50_000, "{}: lease = now + lease length", env.name);
        env.clock.advance(Duration::from_secs(20)); // past the original expiry, within the new one
        assert_eq!(
            env.reconciler().run_once().await.unwrap().requeued,
            0,
            "{}: a live lease",
            env.name
        );
        release.notify_one();
        assert_eq!(running.await.unwrap().unwrap().sent, 1, "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["sent"], "{}", env.name);
    }
}

/// Outcomes are recorded in batches (each engine's recorder, one transaction per batch) by
/// two engines at once, every seventh terminal: every account must still balance to the delivery, with no
/// deadlock surfacing and nothing sent twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_outcomes_of_two_engines_keep_every_account_exact() {
    const N: usize = 1200;
    const TENANTS: usize = 24;
    for db in common::backends().await {
        let a = db.herald().await;
        let b = db.herald().await;
        let mut tenants = Vec::new();
        for t in 0..TENANTS {
            let id = a.tenant_create(&format!("t{t}")).await.unwrap().id;
            a.quota_grant(id, "email", 1_000, None).await.unwrap();
            tenants.push(id);
        }
        submit_many(&a, N, |i| SubmitRequest {
            cost: Some(3),
            ..request(tenants[i % TENANTS], &format!("op-{i}"))
        })
        .await;
        let (done_tx, mut done) = mpsc::unbounded_channel();
        let channel =
            Arc::new(Counter { seen: Mutex::default(), done: done_tx, terminal_every: Some(7) });
        // Shutting down waits for every started send's outcome, so the ledger is final.
        let engines = [(&a, "engine-a"), (&b, "engine-b")];
        let all = work_until_started(engines, channel.clone(), 200, N, &mut done).await;
        assert!(all, "{}: not all deliveries were sent in time", db.name());
        let seen = channel.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), N, "{}", db.name());
        assert!(seen.values().all(|&n| n == 1), "{}: a delivery was sent twice", db.name());
        for (t, tenant) in tenants.iter().enumerate() {
            let keys = (0..N).filter(|i| i % TENANTS == t);
            let sent = keys.clone().filter(|i| i % 7 != 0).count() as i64;
            let q = &a.quotas(*tenant).await.unwrap()[0];
            assert_eq!(
                (q.available, q.reserved, q.spent),
                (1_000 - 3 * sent, 0, 3 * sent),
                "{}: tenant {t}",
                db.name()
            );
        }
    }
}

/// Counts sends per delivery and the most in flight at once, and reports each send.
struct InFlight {
    seen: Mutex<HashMap<herald::DeliveryId, u32>>,
    now: AtomicUsize,
    most: AtomicUsize,
    done: mpsc::UnboundedSender<herald::DeliveryId>,
}

impl Channel for InFlight {
    fn send<'a>(&'a self, d: &'a Leased) -> herald::BoxFuture<'a, Outcome> {
        Box::pin(async move {
            *self.seen.lock().unwrap().entry(d.id).or_default() += 1;
            let now = self.now.fetch_add(1, SeqCst) + 1;
            self.most.fetch_max(now, SeqCst);
            tokio::task::yield_now().await; // let other sends overlap this one
            self.now.fetch_sub(1, SeqCst);
            let _ = self.done.send(d.id);
            Outcome::Sent
        })
    }
}

/// One tenant's backlog drains while other tenants submit one at a time: on PostgreSQL
/// and MariaDB a wake-up during a lease starts a quick lease of the new lanes beside it.
/// With both in flight the worker never sends more at once than its slots, sends each
/// delivery once, and every account ends exact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quick_leases_beside_a_backlog_keep_to_the_slots_and_send_each_once() {
    const BACKLOG: usize = 400;
    const SLOTS: usize = 16;
    const OTHERS_MOST: usize = 400;
    for db in common::backends().await {
        let herald = db.herald().await;
        let mut tenants = Vec::new();
        for t in 0..9 {
            let id = herald.tenant_create(&format!("t{t}")).await.unwrap().id;
            herald.quota_grant(id, "email", 10_000, None).await.unwrap();
            tenants.push(id);
        }
        submit_many(&herald, BACKLOG, |i| request(tenants[0], &format!("b-{i}"))).await;
        let (done_tx, mut done) = mpsc::unbounded_channel();
        let channel = Arc::new(InFlight {
            seen: Mutex::default(),
            now: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
            done: done_tx,
        });
        let options =
            WorkerOptions { id: "w-quick".into(), slots: SLOTS, ..WorkerOptions::default() };
        let channels = [("email".to_string(), channel.clone() as Arc<dyn Channel>)];
        let worker = Worker::new(herald.clone(), options, channels).unwrap();
        let stop = herald::CancellationToken::new();
        let run = tokio::spawn({
            let (worker, stop) = (worker.clone(), stop.clone());
            async move { worker.run(stop).await }
        });
        // Others submit one at a time, each waking the worker after its commit, until a
        // quick lease has run (SQLite runs none: one writer) or the backlog is through.
        let quick_expected = herald.backend() != herald::Backend::Sqlite;
        let mut others = 0;
        let mut sent = 0;
        while others < OTHERS_MOST {
            let tenant = tenants[1 + others % 8];
            herald.submit_alone(&request(tenant, &format!("o-{others}"))).await.unwrap();
            others += 1;
            while done.try_recv().is_ok() {
                sent += 1;
            }
            if (quick_expected && worker.stats().quick_leases > 0) || sent >= BACKLOG {
                break;
            }
        }
        let all = tokio::time::timeout(Duration::from_secs(120), async {
            while sent < BACKLOG + others {
                done.recv().await;
                sent += 1;
            }
        })
        .await;
        stop.cancel();
        run.await.unwrap().unwrap();
        let name = db.name();
        assert!(all.is_ok(), "{name}: {sent} of {} sent in time", BACKLOG + others);
        let stats = worker.stats();
        assert!(
            !quick_expected || stats.quick_leases > 0,
            "{name}: no quick lease in {others} submits beside the backlog"
        );
        let seen = channel.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), BACKLOG + others, "{name}");
        assert!(seen.values().all(|&n| n == 1), "{name}: a delivery was sent twice");
        let most = channel.most.load(SeqCst);
        assert!(most <= SLOTS, "{name}: {most} sends at once with {SLOTS} slots");
        for (t, tenant) in tenants.iter().enumerate() {
            let n = if t == 0 { BACKLOG } else { (0..others).filter(|i| 1 + i % 8 == t).count() };
            let q = &herald.quotas(*tenant).await.unwrap()[0];
            let spent = 2 * n as i64;
            assert_eq!(
                (q.available, q.reserved, q.spent),
                (10_000 - spent, 0, spent),
                "{name}: t{t}"
            );
        }
    }
}
