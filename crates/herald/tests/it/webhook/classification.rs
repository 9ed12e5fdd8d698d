//! Classification.

use super::*;

#[tokio::test]
async fn a_503_is_retried_with_the_same_webhook_id_then_sent() {
    let receiver = Receiver::start().await;
    for env in envs().await {
        let path = format!("/{}/hook", env.name);
        receiver.script(&path, [status(503), status(200)]);
        let d = env.submit("op-1", &receiver.url(&path), json!({"n": 1})).await;
        let worker = env.worker(loopback_allowed());

        let report = worker.run_once().await.unwrap();
        assert_eq!((report.leased, report.retried), (1, 1), "{}: {report:?}", env.name);
        let after = env.get(d.id).await;
        assert_eq!(after.state, DeliveryState::Pending, "{}", env.name);
        let wait = after.next_attempt_at.as_millisecond() - env.now_ms();
        assert!(
            (0..=1000).contains(&wait),
            "{}: first backoff within 1 s, got {wait} ms",
            env.name
        );
        assert_eq!(env.outcomes(d.id).await, [outcome("transient", Some("http_503"))]);
        assert_eq!(env.quota().await, (100, 99, 1, 0), "{}: reservation kept", env.name);

        env.advance_to_due(d.id).await;
        let report = worker.run_once().await.unwrap();
        assert_eq!(report.sent, 1, "{}: {report:?}", env.name);
        let d = env.get(d.id).await;
        assert_eq!(
            (d.state, d.attempts),
            (DeliveryState::Sent, 2),
            "{}: sent on attempt 2",
            env.name
        );
        assert_eq!(
            env.outcomes(d.id).await,
            [outcome("transient", Some("http_503")), outcome("sent", None)],
            "{}",
            env.name
        );
        assert_eq!(env.quota().await, (100, 99, 0, 1), "{}: committed once", env.name);

        let got = receiver.received(&path);
        assert_eq!(got.len(), 2, "{}", env.name);
        for r in &got {
            assert_eq!(header(r, "webhook-id"), d.id.to_string(), "{}: same webhook-id", env.name);
        }
        let verdicts = verify_all(&[(&env.secret, &got[0]), (&env.secret, &got[1])]);
        assert_eq!(verdicts, [None, None], "{}: both attempts verify", env.name);
    }
}

#[tokio::test]
async fn a_429_retry_after_is_honoured() {
    let receiver = Receiver::start().await;
    for env in envs().await {
        let path = format!("/{}/hook", env.name);
        receiver.script(&path, [Reply::Answer(429, vec![("retry-after", "2".into())])]);
        let d = env.submit("op-1", &receiver.url(&path), json!({"n": 1})).await;
        let worker = env.worker(loopback_allowed());
        assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}", env.name);

        let after = env.get(d.id).await;
        assert_eq!(after.state, DeliveryState::Pending, "{}", env.name);
        let wait = after.next_attempt_at.as_millisecond() - env.now_ms();
        assert!(wait >= 2000, "{}: Retry-After 2 s honoured, next attempt in {wait} ms", env.name);
        assert_eq!(env.outcomes(d.id).await, [outcome("transient", Some("http_429"))]);
        assert_eq!(env.quota().await, (100, 99, 1, 0), "{}: reservation kept", env.name);

        env.clock.advance(Duration::from_millis(1999));
        assert_eq!(worker.run_once().await.unwrap().leased, 0, "{}: not before 2 s", env.name);
        assert_eq!(receiver.received(&path).len(), 1, "{}", env.name);

        env.clock.advance(Duration::from_millis(1));
        assert_eq!(worker.run_once().await.unwrap().sent, 1, "{}: sent after 2 s", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Sent, "{}", env.name);
        assert_eq!(receiver.received(&path).len(), 2, "{}", env.name);
        assert_eq!(env.quota().await, (100, 99, 0, 1), "{}", env.name);
    }
}

#[tokio::test]
async fn refused_requests_are_terminal_and_release_the_quota() {
    let receiver = Receiver::start().await;
    for env in envs().await {
        let worker = env.worker(loopback_allowed());
        for code in [400u16, 410, 413, 415, 422] {
            let path = format!("/{}/{code}", env.name);
            receiver.script(&path, [status(code)]);
            let d = env.submit(&format!("op-{code}"), &receiver.url(&path), json!({"n": 1})).await;
            let report = worker.run_once().await.unwrap();
            assert_eq!((report.leased, report.failed), (1, 1), "{}: {code}: {report:?}", env.name);
            let d = env.get(d.id).await;
            assert_eq!(d.state, DeliveryState::Failed, "{}: {code} is terminal", env.name);
            let code_name = format!("http_{code}");
            assert_eq!(
                env.outcomes(d.id).await,
                [outcome("terminal", Some(&code_name))],
                "{}: {code}",
                env.name
            );
            assert_eq!(env.quota().await, (100, 100, 0, 0), "{}: {code}: released", env.name);
        }
        // Nothing is retried, however long one waits.
        env.clock.advance(Duration::from_secs(24 * 3600));
        assert_eq!(worker.run_once().await.unwrap().leased, 0, "{}", env.name);
        for code in [400u16, 410, 413, 415, 422] {
            let n = receiver.received(&format!("/{}/{code}", env.name)).len();
            assert_eq!(n, 1, "{}: {code} sent once", env.name);
        }
    }
}

#[tokio::test]
async fn a_404_is_transient() {
    let receiver = Receiver::start().await;
    for env in envs().await {
        let path = format!("/{}/hook", env.name);
        receiver.script(&path, [status(404), status(200)]);
        let d = env.submit("op-1", &receiver.url(&path), json!({"n": 1})).await;
        let worker = env.worker(loopback_allowed());
        assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Pending, "{}", env.name);
        assert_eq!(env.quota().await, (100, 99, 1, 0), "{}", env.name);
        env.advance_to_due(d.id).await;
        assert_eq!(worker.run_once().await.unwrap().sent, 1, "{}", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Sent, "{}", env.name);
        assert_eq!(
            env.outcomes(d.id).await,
            [outcome("transient", Some("http_404")), outcome("sent", None)],
            "{}",
            env.name
        );
        assert_eq!(env.quota().await, (100, 99, 0, 1), "{}", env.name);
    }
}

#[tokio::test]
async fn a_hung_receiver_times_out_as_transient_then_is_sent() {
    let receiver = Receiver::start().await;
    for env in envs().await {
        // The client's timeout (300 ms) ends the request first; the worker's (500 ms)
        // is the backstop.
        let path = format!("/{}/hook", env.name);
        receiver.script(&path, [Reply::Hang, status(200)]);
        let d = env.submit("op-1", &receiver.url(&path), json!({"n": 1})).await;
        let quick =
            WebhookOptions { allow_private_targets: true, timeout: Duration::from_millis(300) };
        let options = WorkerOptions {
            id: "w1".into(),
            send_timeout: Duration::from_millis(500),
            ..WorkerOptions::default()
        };
        let worker = env.worker_with(quick, options);
        let started = std::time::Instant::now();
        assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}", env.name);
        assert!(started.elapsed() < Duration::from_secs(5), "{}: the timeout held", env.name);
        assert_eq!(receiver.received(&path).len(), 1, "{}: the request arrived", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Pending, "{}", env.name);
        assert_eq!(
            env.outcomes(d.id).await,
            [outcome("transient", Some("timeout"))],
            "{}",
            env.name
        );
        assert_eq!(env.quota().await, (100, 99, 1, 0), "{}: reservation kept", env.name);

        env.advance_to_due(d.id).await;
        assert_eq!(worker.run_once().await.unwrap().sent, 1, "{}: it answers now", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Sent, "{}", env.name);
        assert_eq!(env.quota().await, (100, 99, 0, 1), "{}", env.name);

        // A worker send timeout shorter than the client's also ends a hung request.
        let path = format!("/{}/slow", env.name);
        receiver.script(&path, [Reply::Hang]);
        let d = env.submit("op-2", &receiver.url(&path), json!({"n": 2})).await;
        let options = WorkerOptions {
            id: "w2".into(),
            send_timeout: Duration::from_millis(300),
            ..WorkerOptions::default()
        };
        let worker = env.worker_with(loopback_allowed(), options);
        assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}", env.name);
        assert_eq!(
            env.outcomes(d.id).await,
            [outcome("transient", Some("timeout"))],
            "{}",
            env.name
        );
    }
}

#[tokio::test]
async fn redirects_are_not_followed() {
    let receiver = Receiver::start().await;
    for env in envs().await {
        let worker = env.worker(loopback_allowed());
        for code in [302u16, 307] {
            let (path, target) =
                (format!("/{}/{code}/hook", env.name), format!("/{}/{code}/target", env.name));
            receiver
                .script(&path, [Reply::Answer(code, vec![("location", receiver.url(&target))])]);
            let d = env.submit(&format!("op-{code}"), &receiver.url(&path), json!({"n": 1})).await;
            assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}: {code}", env.name);
            let code_name = format!("http_{code}");
            assert_eq!(
                env.outcomes(d.id).await,
                [outcome("transient", Some(&code_name))],
                "{}: {code}",
                env.name
            );
            assert_eq!(env.get(d.id).await.state, DeliveryState::Pending, "{}", env.name);
            assert_eq!(receiver.received(&path).len(), 1, "{}: {code}", env.name);
            assert!(
                receiver.received(&target).is_empty(),
                "{}: {code}: the redirect target must receive nothing",
                env.name
            );
        }
    }
}
