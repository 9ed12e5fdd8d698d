//! Replay and cancel.

use super::*;

#[tokio::test]
async fn replay_keeps_identity_takes_a_new_reservation_and_a_fresh_budget() {
    for env in envs().await {
        let mut req = request(env.tenant, "op-1");
        req.max_attempts = Some(1);
        let d = env.submit(req.clone()).await;
        let channel = Script::new([Outcome::terminal("bad", "refused")]);
        let worker = env.worker(channel.clone(), options("w1"));
        worker.run_once().await.unwrap();
        assert_eq!(env.get(d.id).await.state, DeliveryState::Failed);

        let replayed = env.herald.replay(env.tenant, d.id).await.unwrap();
        assert_eq!(
            (replayed.id, replayed.operation_key.as_str(), replayed.state),
            (d.id, "op-1", DeliveryState::Pending),
            "{}",
            env.name
        );
        assert_eq!((replayed.reservation_seq, replayed.attempts), (2, 1), "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 2, 0), "{}: reserved again", env.name);
        assert_eq!(worker.run_once().await.unwrap().sent, 1, "{}: a fresh attempt", env.name);
        let d2 = env.get(d.id).await;
        assert_eq!((d2.state, d2.attempts), (DeliveryState::Sent, 2), "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["terminal", "sent"], "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}", env.name);
        // The identity still deduplicates the original submit.
        let h = env.herald.clone();
        let again = env
            .herald
            .transaction(|tx| {
                let (h, req) = (h.clone(), req.clone());
                Box::pin(async move { h.submit(tx, &req).await })
            })
            .await
            .unwrap()
            .value;
        assert!(again.duplicate && again.delivery.id == d.id, "{}", env.name);

        // Only failed/cancelled deliveries replay; other tenants see nothing.
        assert!(matches!(
            env.herald.replay(env.tenant, d.id).await,
            Err(Error::WrongState { state: DeliveryState::Sent, .. })
        ));
        let other = env.herald.tenant_create("other").await.unwrap().id;
        assert!(matches!(env.herald.replay(other, d.id).await, Err(Error::NotFound)));
    }
}

#[tokio::test]
async fn cancel_releases_a_pending_delivery_and_nothing_else_cancels() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        let cancelled = env.herald.cancel(env.tenant, d.id).await.unwrap();
        assert_eq!(cancelled.state, DeliveryState::Cancelled, "{}", env.name);
        assert_eq!(env.quota().await, (100, 100, 0, 0), "{}", env.name);
        assert!(matches!(
            env.herald.cancel(env.tenant, d.id).await,
            Err(Error::WrongState { state: DeliveryState::Cancelled, .. })
        ));
        assert_eq!(env.worker(Script::new([]), options("w1")).run_once().await.unwrap().leased, 0);
        let other = env.herald.tenant_create("other").await.unwrap().id;
        assert!(matches!(env.herald.cancel(other, d.id).await, Err(Error::NotFound)));
        assert!(matches!(
            env.herald.cancel(env.tenant, herald::DeliveryId::new_v7()).await,
            Err(Error::NotFound)
        ));
    }
}
