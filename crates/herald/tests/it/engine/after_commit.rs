//! Nothing before commit, nothing lost after it.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_leased_before_commit_or_after_rollback() {
    for env in envs().await {
        let worker = env.worker(Script::new([]), options("w1"));
        // Rolled back: never visible.
        let (h, tenant) = (env.herald.clone(), env.tenant);
        let rolled_back = env
            .herald
            .transaction(|tx| {
                let h = h.clone();
                Box::pin(async move {
                    h.submit(tx, &request(tenant, "op-rollback")).await?;
                    Err::<(), _>(Error::app("the business change failed"))
                })
            })
            .await;
        assert!(rolled_back.is_err());
        assert_eq!(worker.run_once().await.unwrap().leased, 0, "{}", env.name);

        // Open transaction: a worker (another connection) cannot see the claim yet.
        if env.herald.backend() == herald::Backend::Postgres {
            let pool = env.herald.store().postgres_pool().unwrap();
            let mut own = pool.begin().await.unwrap();
            env.herald.submit_in(&mut own, &request(env.tenant, "op-open")).await.unwrap();
            assert_eq!(worker.run_once().await.unwrap().leased, 0, "{}: before commit", env.name);
            own.commit().await.unwrap();
            assert_eq!(worker.run_once().await.unwrap().sent, 1, "{}: after commit", env.name);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_wakes_a_waiting_worker_without_waiting_for_the_poll() {
    for env in envs().await {
        let channel = Script::new([]);
        let mut entered = channel.watch();
        let slow_poll = WorkerOptions { poll_interval: Duration::from_secs(300), ..options("w1") };
        let worker = env.worker(channel.clone(), slow_poll);
        let stop = herald::CancellationToken::new();
        let running = tokio::spawn({
            let (worker, stop) = (worker.clone(), stop.clone());
            async move { worker.run(stop).await }
        });
        // Let the worker reach its idle wait (its first lease finds nothing).
        tokio::task::yield_now().await;
        let d = env.submit(request(env.tenant, "op-wake")).await;
        let woke = tokio::time::timeout(Duration::from_secs(5), entered.recv()).await;
        assert_eq!(
            woke.ok().flatten(),
            Some(d.id),
            "{}: woken long before the 300 s poll",
            env.name
        );
        stop.cancel();
        running.await.unwrap().unwrap();
    }
}

/// Another process's commit wakes an idle worker long before its poll: by NOTIFY on
/// PostgreSQL, by datagram elsewhere (the worker's wake target, `datagram.rs`). Two
/// handles with their own pools and wake-ups stand for the two processes. (With the
/// worker's `wake_listen: None` this fails on SQLite and MariaDB: checked by hand.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_in_another_process_wakes_an_idle_worker() {
    for db in common::backends().await {
        let (a, b) = (db.herald().await, db.herald().await);
        let tenant = a.tenant_create("acme").await.unwrap().id;
        let channel = Script::new([]);
        let mut entered = channel.watch();
        let slow_poll = WorkerOptions { poll_interval: Duration::from_secs(300), ..options("w-b") };
        let channel: Arc<dyn Channel> = channel;
        let worker = Worker::new(b.clone(), slow_poll, [("email".to_string(), channel)]).unwrap();
        let stop = herald::CancellationToken::new();
        let running = tokio::spawn({
            let stop = stop.clone();
            async move { worker.run(stop).await }
        });
        if b.backend() != herald::Backend::Postgres {
            wait_for_wake_target(&a, "w-b").await;
        }
        let submit = |key: &'static str| {
            let a = a.clone();
            async move {
                let req = SubmitRequest { cost: Some(0), ..request(tenant, key) };
                a.transaction(|tx| {
                    let (a, req) = (a.clone(), req.clone());
                    Box::pin(async move { Ok(a.submit(tx, &req).await?.delivery.id) })
                })
                .await
                .unwrap()
                .value
            }
        };
        // The first is found by the worker's first lease or by a wake-up; either way the
        // worker is idle after it.
        let first = submit("op-first").await;
        let got = tokio::time::timeout(Duration::from_secs(10), entered.recv()).await;
        assert_eq!(got.ok().flatten(), Some(first), "{}: the first delivery", db.name());
        // Past the quick polls that follow a lease (HOT_FOR, 250 ms): from here only a
        // wake-up finds new work before the 300 s poll. (The wait makes the check strict;
        // it cannot make it pass.)
        tokio::time::sleep(Duration::from_millis(400)).await;
        let second = submit("op-second").await;
        let got = tokio::time::timeout(Duration::from_secs(5), entered.recv()).await;
        assert_eq!(got.ok().flatten(), Some(second), "{}: woken by the other process", db.name());
        stop.cancel();
        running.await.unwrap().unwrap();
        let targets = wake_targets(&a).await;
        assert!(targets.is_empty(), "{}: a stopped worker's target is deleted", db.name());
    }
}

async fn wake_targets(herald: &herald::Herald) -> Vec<herald_store::notify::WakeTarget> {
    use herald_store::AsConn;
    let mut conn = herald.store().acquire().await.unwrap();
    herald_store::notify::wake_targets(conn.as_conn(), Now::Database, 30_000).await.unwrap()
}

/// Until `worker` has written its wake target (before its first lease).
async fn wait_for_wake_target(herald: &herald::Herald, worker: &str) {
    let written = tokio::time::timeout(Duration::from_secs(10), async {
        while !wake_targets(herald).await.iter().any(|t| t.worker == worker) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(written.is_ok(), "{worker} wrote no wake target");
}
