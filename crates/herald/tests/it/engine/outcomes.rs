//! Outcomes.

use super::*;

#[tokio::test]
async fn sent_commits_the_reservation() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        assert_eq!((d.state, d.attempts, d.reservation_seq), (DeliveryState::Pending, 0, 1));
        assert_eq!(env.quota().await, (100, 98, 2, 0), "{}: reserved at submit", env.name);
        let channel = Script::new([]);
        let report = env.worker(channel.clone(), options("w1")).run_once().await.unwrap();
        assert_eq!((report.leased, report.sent), (1, 1), "{}", env.name);
        let d = env.get(d.id).await;
        assert_eq!((d.state, d.attempts), (DeliveryState::Sent, 1), "{}", env.name);
        assert!(d.sent_at.is_some());
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: committed", env.name);
        assert_eq!(env.outcomes(d.id).await, ["sent"], "{}", env.name);
        assert_eq!(channel.calls(), [(d.id, 1)]);
        // Nothing left to do.
        assert_eq!(env.worker(channel, options("w1")).run_once().await.unwrap().leased, 0);
    }
}

#[tokio::test]
async fn transient_failures_back_off_keep_the_reservation_then_send() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        let channel = Script::new([
            Outcome::transient("http_503", "unavailable"),
            Outcome::Transient {
                retry_after: Some(Duration::from_secs(30)),
                code: "http_429".into(),
                message: "slow down".into(),
            },
        ]);
        let worker = env.worker(channel.clone(), options("w1"));
        assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}", env.name);
        let after_first = env.get(d.id).await;
        assert_eq!(after_first.state, DeliveryState::Pending, "{}", env.name);
        assert_eq!(after_first.last_error.as_deref(), Some("unavailable"));
        let wait = after_first
            .next_attempt_at
            .duration_since(jiff::Timestamp::from_second(START_S).unwrap());
        assert!(
            wait <= jiff::SignedDuration::from_secs(1),
            "{}: backoff ceiling 1 s, got {wait:?}",
            env.name
        );
        assert_eq!(env.quota().await, (100, 98, 2, 0), "{}: reservation kept", env.name);

        env.clock.advance(Duration::from_secs(1));
        assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}", env.name);
        // Retry-After 30 s is longer than the backoff: nothing is due before it.
        env.clock.advance(Duration::from_secs(29));
        assert_eq!(worker.run_once().await.unwrap().leased, 0, "{}: honours Retry-After", env.name);
        env.clock.advance(Duration::from_secs(2));
        assert_eq!(worker.run_once().await.unwrap().sent, 1, "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["transient", "transient", "sent"], "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}", env.name);
        let attempts: Vec<u32> = channel.calls().iter().map(|c| c.1).collect();
        assert_eq!(attempts, [1, 2, 3], "{}", env.name);
    }
}

#[tokio::test]
async fn a_retry_after_beyond_the_cap_is_capped() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        let channel = Script::new([Outcome::Transient {
            retry_after: Some(Duration::from_secs(86_400)),
            code: "http_429".into(),
            message: "tomorrow".into(),
        }]);
        let retry =
            RetryPolicy { retry_after_max: Duration::from_secs(3600), ..RetryPolicy::default() };
        let worker = env.worker(channel, WorkerOptions { retry, ..options("w1") });
        worker.run_once().await.unwrap();
        let wait = env.get(d.id).await.next_attempt_at.as_second() - START_S;
        assert_eq!(wait, 3600, "{}", env.name);
    }
}

#[tokio::test]
async fn terminal_and_exhausted_deliveries_fail_and_release() {
    for env in envs().await {
        let terminal = env.submit(request(env.tenant, "op-terminal")).await;
        let channel = Script::new([Outcome::terminal("http_410", "gone")]);
        env.worker(channel, options("w1")).run_once().await.unwrap();
        let d = env.get(terminal.id).await;
        assert_eq!((d.state, d.last_error.as_deref()), (DeliveryState::Failed, Some("gone")));
        assert_eq!(env.quota().await, (100, 100, 0, 0), "{}: released", env.name);
        assert_eq!(env.outcomes(d.id).await, ["terminal"]);

        let mut req = request(env.tenant, "op-exhausted");
        req.max_attempts = Some(2);
        let exhausted = env.submit(req).await;
        let channel = Script::new([Outcome::transient("e", "1"), Outcome::transient("e", "2")]);
        let worker = env.worker(channel, options("w1"));
        worker.run_once().await.unwrap();
        env.clock.advance(Duration::from_secs(5));
        assert_eq!(worker.run_once().await.unwrap().failed, 1, "{}", env.name);
        let d = env.get(exhausted.id).await;
        assert_eq!((d.state, d.attempts), (DeliveryState::Failed, 2), "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["transient", "transient"]);
        assert_eq!(env.quota().await, (100, 100, 0, 0), "{}: released", env.name);
    }
}

#[tokio::test]
async fn a_panicking_or_hung_channel_is_transient_and_the_worker_survives() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        let channel = Script::new([]);
        *channel.panic_next.lock().unwrap() = true;
        let worker = env.worker(channel.clone(), options("w1"));
        assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}", env.name);
        let attempts = env.herald.attempts(env.tenant, d.id).await.unwrap();
        assert_eq!(attempts[0].error_code.as_deref(), Some("panic"), "{}", env.name);

        env.clock.advance(Duration::from_secs(1));
        let _never = channel.hold();
        let mut entered = channel.watch();
        let quick = WorkerOptions { send_timeout: Duration::from_millis(200), ..options("w2") };
        let report = env.worker(channel.clone(), quick).run_once().await.unwrap();
        assert!(entered.try_recv().is_ok(), "{}: the send started", env.name);
        assert_eq!(report.retried, 1, "{}", env.name);
        let attempts = env.herald.attempts(env.tenant, d.id).await.unwrap();
        assert_eq!(attempts[1].error_code.as_deref(), Some("timeout"), "{}", env.name);
    }
}

#[tokio::test]
async fn a_send_timeout_that_does_not_fit_in_the_lease_is_refused_at_start() {
    let herald = common::sqlite().herald().await;
    let bad = WorkerOptions {
        lease: Duration::from_secs(20),
        send_timeout: Duration::from_secs(30),
        ..WorkerOptions::default()
    };
    let result = Worker::new(herald, bad, []);
    match result {
        Err(Error::Invalid(message)) => {
            assert!(message.message.contains("shorter than the lease"), "{message}")
        }
        other => panic!("expected a clear error, got {other:?}"),
    }
}

#[tokio::test]
async fn workers_lease_only_the_channels_they_have() {
    for env in envs().await {
        let mut sms = request(env.tenant, "op-sms");
        sms.channel = "sms".into();
        sms.cost = Some(0);
        let d = env.submit(sms).await;
        let report = env.worker(Script::new([]), options("w1")).run_once().await.unwrap();
        assert_eq!(report.leased, 0, "{}", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Pending, "{}", env.name);
    }
}

/// A row whose fingerprint the client handed over (version 3, `submit_v2`) is checked
/// against the stored request before each send: an honest one is sent; a forged one is
/// never sent, fails at once with `fingerprint_mismatch`, and gives its reservation back.
#[tokio::test]
async fn a_client_fingerprint_is_checked_before_the_send_and_a_forged_one_never_sent() {
    for env in envs().await {
        let honest = env.submit(request(env.tenant, "op-honest")).await;
        let forged = env.submit(request(env.tenant, "op-forged")).await;
        let forge = match env.herald.store().backend() {
            herald_store::Backend::Postgres => "'\\x00ff'::bytea",
            _ => "X'00ff'",
        };
        let sql = format!(
            "UPDATE deliveries SET fingerprint_version = 3 WHERE operation_key = 'op-honest';
             UPDATE deliveries SET fingerprint_version = 3, fingerprint = {forge}
              WHERE operation_key = 'op-forged'"
        );
        env.herald
            .transaction(|tx| {
                let sql = sql.clone();
                Box::pin(async move {
                    use herald::sqlx::raw_sql;
                    let sql = herald::sqlx::AssertSqlSafe(sql);
                    match tx.conn() {
                        herald::Conn::Sqlite(c) => raw_sql(sql).execute(c).await.map(drop)?,
                        herald::Conn::Postgres(c) => raw_sql(sql).execute(c).await.map(drop)?,
                        herald::Conn::MySql(c) => raw_sql(sql).execute(c).await.map(drop)?,
                    }
                    Ok(())
                })
            })
            .await
            .unwrap();

        let channel = Script::new([]);
        let report = env.worker(channel.clone(), options("w1")).run_once().await.unwrap();
        assert_eq!((report.leased, report.sent, report.failed), (2, 1, 1), "{}", env.name);
        assert_eq!(channel.calls(), [(honest.id, 1)], "{}: only the honest one", env.name);
        let d = env.get(forged.id).await;
        assert_eq!(d.state, DeliveryState::Failed, "{}", env.name);
        assert!(
            d.last_error.as_deref().is_some_and(|e| e.contains("forged or miscomputed")),
            "{}: {:?}",
            env.name,
            d.last_error
        );
        let attempts = env.herald.attempts(env.tenant, forged.id).await.unwrap();
        assert_eq!(attempts[0].error_code.as_deref(), Some("fingerprint_mismatch"));
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: the forged one released", env.name);
        // A repeat of the honest request is a duplicate: version 3 compares as version 2.
        let again = env.herald.submit_alone(&request(env.tenant, "op-honest")).await.unwrap();
        assert!(again.duplicate, "{}", env.name);
    }
}
