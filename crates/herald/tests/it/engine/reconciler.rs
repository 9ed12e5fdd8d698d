//! The reconciler, fencing.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_send_is_reconciled_and_the_next_attempt_sends_the_same_id() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        let channel = Script::new([]);
        let _held = channel.hold();
        let mut entered = channel.watch();
        let doomed = env.worker(channel.clone(), options("doomed"));
        let task = tokio::spawn(async move { doomed.run_once().await });
        assert_eq!(entered.recv().await, Some(d.id), "{}", env.name);
        task.abort(); // the process "dies" mid-send
        assert!(task.await.unwrap_err().is_cancelled());
        assert_eq!(env.get(d.id).await.state, DeliveryState::Sending, "{}", env.name);

        // A live lease is not reclaimed.
        let reconciler = env.reconciler();
        assert_eq!(reconciler.run_once().await.unwrap().requeued, 0, "{}", env.name);
        env.clock.advance(Duration::from_secs(61));
        let report = reconciler.run_once().await.unwrap();
        assert_eq!((report.requeued, report.failed), (1, 0), "{}", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Pending, "{}", env.name);
        // A second reconciler pass (or a second reconciler) finds nothing more.
        assert_eq!(reconciler.run_once().await.unwrap().requeued, 0, "{}", env.name);

        env.clock.advance(Duration::from_secs(2));
        let survivor = Script::new([]);
        let report = env.worker(survivor.clone(), options("survivor")).run_once().await.unwrap();
        assert_eq!(report.sent, 1, "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["lost", "sent"], "{}", env.name);
        assert_eq!(channel.calls(), [(d.id, 1)], "{}", env.name);
        assert_eq!(survivor.calls(), [(d.id, 2)], "{}: same id, next attempt", env.name);
        let d = env.get(d.id).await;
        assert_eq!((d.state, d.attempts), (DeliveryState::Sent, 2), "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: charged once", env.name);
    }
}

#[tokio::test]
async fn lost_leases_exhaust_attempts_and_release() {
    for env in envs().await {
        let mut req = request(env.tenant, "op-1");
        req.max_attempts = Some(1);
        let d = env.submit(req).await;
        ghost_lease(&env, "ghost").await;
        env.clock.advance(Duration::from_secs(61));
        let report = env.reconciler().run_once().await.unwrap();
        assert_eq!((report.requeued, report.failed), (0, 1), "{}", env.name);
        let d = env.get(d.id).await;
        assert_eq!(d.state, DeliveryState::Failed, "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["lost"], "{}", env.name);
        assert_eq!(env.quota().await, (100, 100, 0, 0), "{}", env.name);
    }
}

/// An attempt's row is written when it ends; until then the attempt is read from the
/// lease, so it is listed (worker, start, no outcome) all the same.
#[tokio::test]
async fn an_attempt_in_flight_is_listed_and_keeps_its_start_when_it_ends() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        let leased_at = env.clock.now_ms().map(|ms| ms / 1000);
        assert_eq!(ghost_lease(&env, "w1").await, 1);
        let running = env.herald.attempts(env.tenant, d.id).await.unwrap();
        assert_eq!(running.len(), 1, "{}: {running:?}", env.name);
        let a = &running[0];
        assert_eq!((a.n, a.worker.as_str(), &a.outcome), (1, "w1", &None), "{}", env.name);
        assert_eq!(a.finished_at, None, "{}", env.name);
        if let Some(secs) = leased_at {
            assert_eq!(a.started_at.as_second(), secs, "{}: started when leased", env.name);
        }
        env.clock.advance(Duration::from_secs(61));
        env.reconciler().run_once().await.unwrap();
        let ended = env.herald.attempts(env.tenant, d.id).await.unwrap();
        assert_eq!(ended.len(), 1, "{}: {ended:?}", env.name);
        assert_eq!(ended[0].outcome.as_deref(), Some("lost"), "{}", env.name);
        assert_eq!(ended[0].started_at, a.started_at, "{}: the same start", env.name);
        assert!(ended[0].finished_at > Some(a.started_at), "{}: {ended:?}", env.name);
    }
}

/// Leases every due delivery as `worker`, which then vanishes.
pub(super) async fn ghost_lease(env: &Env, worker: &str) -> usize {
    let now = env.clock.now();
    let channels = ["email".to_string()];
    env.herald
        .transaction(|tx| {
            let channels = &channels;
            Box::pin(async move {
                let lease =
                    Lease { worker, channels, limit: 100, lease: Duration::from_secs(60), now };
                Ok(deliveries_lease(tx.conn(), &lease).await?.len())
            })
        })
        .await
        .unwrap()
        .value
}

/// Records `report` for attempt `n` of `worker`, as that worker would.
async fn finish(
    env: &Env,
    id: herald::DeliveryId,
    worker: &str,
    n: i32,
    report: Report,
) -> Option<Decision> {
    let report = AttemptReport {
        delivery: id,
        n,
        worker: worker.to_string(),
        tenant: env.tenant,
        quota_key: "email".to_string(),
        stripe: None,
        report,
        retry_after: None,
        jitter: 0.5,
        error_code: None,
        error_message: None,
    };
    env.herald.record_report(&report, &RetryPolicy::default()).await.unwrap()
}

#[tokio::test]
async fn stale_outcomes_are_fenced_but_a_stale_sent_is_kept() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        assert_eq!(ghost_lease(&env, "w1").await, 1);
        env.clock.advance(Duration::from_secs(61));
        env.reconciler().run_once().await.unwrap();
        env.clock.advance(Duration::from_secs(2));
        assert_eq!(ghost_lease(&env, "w2").await, 1, "{}: attempt 2 leased by w2", env.name);
        let attempt_2_start = env.herald.attempts(env.tenant, d.id).await.unwrap()[1].started_at;
        env.clock.advance(Duration::from_secs(3));

        // w1 comes back from the dead with a terminal outcome: ignored.
        assert_eq!(finish(&env, d.id, "w1", 1, Report::Terminal).await, Some(Decision::Ignore));
        assert_eq!(env.get(d.id).await.state, DeliveryState::Sending, "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 2, 0), "{}: nothing released", env.name);
        // w1 says it did send after all: the effect happened, so the delivery is sent.
        assert_eq!(
            finish(&env, d.id, "w1", 1, Report::Sent).await,
            Some(Decision::MarkSent { stale: true })
        );
        assert_eq!(env.get(d.id).await.state, DeliveryState::Sent, "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: charged once", env.name);
        // The sent row is not taken for w2's attempt, which was cut short, not sent.
        assert_eq!(env.outcomes(d.id).await, ["sent"], "{}", env.name);
        // w2's own outcome afterwards changes nothing but its attempt row.
        assert_eq!(finish(&env, d.id, "w2", 2, Report::Transient).await, Some(Decision::Ignore));
        assert_eq!(
            finish(&env, d.id, "w2", 2, Report::Sent).await,
            Some(Decision::RecordSentAgain)
        );
        assert_eq!(env.outcomes(d.id).await, ["sent", "sent"], "{}", env.name);
        let attempts = env.herald.attempts(env.tenant, d.id).await.unwrap();
        assert_eq!(attempts[1].started_at, attempt_2_start, "{}: started when leased", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: still charged once", env.name);
    }
}

/// An attempt that ends `sent` under its own lease writes no attempt row (one insert fewer
/// per delivery on the hot path): it is listed from the delivery row, with its worker, its
/// start at the lease and its end at `sent_at`; a repeated `sent` from it changes nothing.
#[tokio::test]
async fn an_attempt_sent_under_its_own_lease_is_listed_from_the_delivery() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        assert_eq!(ghost_lease(&env, "w1").await, 1);
        let running = env.herald.attempts(env.tenant, d.id).await.unwrap();
        env.clock.advance(Duration::from_secs(5));
        assert_eq!(
            finish(&env, d.id, "w1", 1, Report::Sent).await,
            Some(Decision::MarkSent { stale: false })
        );
        let sent = env.herald.attempts(env.tenant, d.id).await.unwrap();
        assert_eq!(sent.len(), 1, "{}: {sent:?}", env.name);
        let a = &sent[0];
        assert_eq!((a.n, a.worker.as_str()), (1, "w1"), "{}", env.name);
        assert_eq!(a.outcome.as_deref(), Some("sent"), "{}", env.name);
        assert_eq!(a.started_at, running[0].started_at, "{}: started when leased", env.name);
        assert_eq!(a.finished_at, env.get(d.id).await.sent_at, "{}: ended when sent", env.name);
        if env.clock.now_ms().is_some() {
            let took = a.finished_at.map(|f| f.duration_since(a.started_at).as_secs());
            assert_eq!(took, Some(5), "{}: {a:?}", env.name);
        }

        env.clock.advance(Duration::from_secs(1));
        assert_eq!(
            finish(&env, d.id, "w1", 1, Report::Sent).await,
            Some(Decision::RecordSentAgain)
        );
        assert_eq!(env.herald.attempts(env.tenant, d.id).await.unwrap(), sent, "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: charged once", env.name);
    }
}

/// One recorder batch can hold a stale and a current attempt of one delivery (its lease
/// expired and the same worker leased it again): the set-based `sent` considers only an
/// id's first pair, so neither is mismarked; the other goes through `delivery_finish`.
#[tokio::test]
async fn a_batch_with_two_attempts_of_one_delivery_marks_neither_by_the_wrong_one() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        assert_eq!(ghost_lease(&env, "w1").await, 1);
        env.clock.advance(Duration::from_secs(61));
        env.reconciler().run_once().await.unwrap();
        env.clock.advance(Duration::from_secs(2));
        assert_eq!(ghost_lease(&env, "w1").await, 1, "{}: attempt 2, same worker", env.name);

        let now = env.clock.now();
        let batch = [(d.id.as_uuid(), 1), (d.id.as_uuid(), 2)];
        let marked = env
            .herald
            .transaction(|tx| {
                Box::pin(
                    async move { Ok(deliveries_sent_fenced(tx.conn(), "w1", &batch, now).await?) },
                )
            })
            .await
            .unwrap()
            .value;
        assert_eq!(marked, [], "{}: attempt 1 is stale, attempt 2 was not considered", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Sending, "{}", env.name);
        assert_eq!(
            finish(&env, d.id, "w1", 2, Report::Sent).await,
            Some(Decision::MarkSent { stale: false })
        );
        assert_eq!(env.outcomes(d.id).await, ["lost", "sent"], "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: charged once", env.name);
    }
}

#[tokio::test]
async fn a_late_sent_on_a_failed_delivery_is_recorded_not_applied() {
    for env in envs().await {
        let mut req = request(env.tenant, "op-1");
        req.max_attempts = Some(1);
        let d = env.submit(req).await;
        ghost_lease(&env, "w1").await;
        env.clock.advance(Duration::from_secs(61));
        assert_eq!(env.reconciler().run_once().await.unwrap().failed, 1);
        assert_eq!(finish(&env, d.id, "w1", 1, Report::Sent).await, Some(Decision::RecordLateSent));
        let d = env.get(d.id).await;
        assert_eq!(d.state, DeliveryState::Failed, "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["late_sent"], "{}", env.name);
        assert_eq!(env.quota().await, (100, 100, 0, 0), "{}: stays released", env.name);
    }
}
