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
