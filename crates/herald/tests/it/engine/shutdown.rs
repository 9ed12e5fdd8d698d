//! Shutdown.

use super::reconciler::ghost_lease;
use super::*;

#[tokio::test]
async fn a_hand_back_does_not_spend_an_attempt() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        ghost_lease(&env, "w1").await;
        let (id, handed) = (
            d.id,
            env.herald
                .transaction(|tx| {
                    Box::pin(async move {
                        Ok(delivery_hand_back(tx.conn(), d.id.as_uuid(), "w1", 1).await?)
                    })
                })
                .await
                .unwrap()
                .value,
        );
        assert!(handed, "{}", env.name);
        let d = env.get(id).await;
        assert_eq!((d.state, d.attempts), (DeliveryState::Pending, 0), "{}", env.name);
        assert!(env.outcomes(id).await.is_empty(), "{}: the attempt row is gone", env.name);
        assert_eq!(env.worker(Script::new([]), options("w2")).run_once().await.unwrap().sent, 1);
        assert_eq!(env.outcomes(id).await, ["sent"], "{}: attempt 1 again", env.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_a_started_send_finish_and_never_releases_one_early() {
    for env in envs().await {
        // Within the grace period: the started send finishes and is recorded.
        let d = env.submit(request(env.tenant, "op-finishes")).await;
        let channel = Script::new([]);
        let release = channel.hold();
        let mut entered = channel.watch();
        let worker = env.worker(channel.clone(), options("w1"));
        let stop = herald::CancellationToken::new();
        let running = tokio::spawn({
            let (worker, stop) = (worker.clone(), stop.clone());
            async move { worker.run(stop).await }
        });
        assert_eq!(entered.recv().await, Some(d.id));
        stop.cancel();
        release.notify_one();
        running.await.unwrap().unwrap();
        assert_eq!(env.get(d.id).await.state, DeliveryState::Sent, "{}", env.name);

        // Past the grace period: the send is abandoned, its lease left to expire.
        let d = env.submit(request(env.tenant, "op-hangs")).await;
        let _never = channel.hold();
        let short = WorkerOptions { shutdown_grace: Duration::from_millis(100), ..options("w2") };
        let worker = env.worker(channel.clone(), short);
        let stop = herald::CancellationToken::new();
        let running = tokio::spawn({
            let (worker, stop) = (worker.clone(), stop.clone());
            async move { worker.run(stop).await }
        });
        assert_eq!(entered.recv().await, Some(d.id));
        stop.cancel();
        running.await.unwrap().unwrap();
        let d = env.get(d.id).await;
        assert_eq!(
            (d.state, d.attempts),
            (DeliveryState::Sending, 1),
            "{}: not released early",
            env.name
        );
        env.clock.advance(Duration::from_secs(61));
        assert_eq!(env.reconciler().run_once().await.unwrap().requeued, 1, "{}", env.name);
    }
}
