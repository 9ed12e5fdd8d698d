//! The SSRF guard.

use super::*;

#[tokio::test]
async fn private_targets_are_refused() {
    let v4 = Receiver::start().await;
    // The IPv6 loopback receiver, where the host has one (the target is refused before
    // any connection either way).
    let v6 = Receiver::start_on(IpAddr::V6(Ipv6Addr::LOCALHOST)).await.ok();
    let v6_port = v6.as_ref().map_or(v4.port(), Receiver::port);
    let p = v4.port();
    let targets = [
        format!("http://127.0.0.1:{p}/"),
        format!("http://[::1]:{v6_port}/"),
        "http://10.0.0.1/".to_string(),
        "http://169.254.169.254/latest/meta-data".to_string(),
        format!("http://localhost:{p}/"),
        // Spellings of loopback that a naive guard lets through.
        format!("http://[::ffff:127.0.0.1]:{p}/"),
        format!("http://0.0.0.0:{p}/"),
        format!("http://2130706433:{p}/"),
    ];
    for env in envs().await {
        let worker = env.worker(guarded());
        for (i, to) in targets.iter().enumerate() {
            let d = env.submit(&format!("op-{i}"), to, json!({"n": i})).await;
            let report = worker.run_once().await.unwrap();
            assert_eq!((report.leased, report.failed), (1, 1), "{}: {to}: {report:?}", env.name);
            let d = env.get(d.id).await;
            assert_eq!(d.state, DeliveryState::Failed, "{}: {to} must be refused", env.name);
            let attempts = env.outcomes(d.id).await;
            assert_eq!(
                attempts,
                [outcome("terminal", Some("target_refused"))],
                "{}: {to}",
                env.name
            );
            assert_eq!(env.quota().await, (100, 100, 0, 0), "{}: {to}: released", env.name);
        }
        assert!(v4.all_received().is_empty(), "{}: loopback got {:?}", env.name, v4.all_received());
        if let Some(v6) = &v6 {
            assert!(v6.all_received().is_empty(), "{}: [::1] got a request", env.name);
        }
    }
}

/// Reads what the tenant reads of a refused delivery: its `last_error` and the message of
/// its one attempt, after checking both say `target_refused`.
async fn refusal_messages(env: &Env, id: herald::DeliveryId, to: &str) -> [String; 2] {
    let d = env.get(id).await;
    assert_eq!(d.state, DeliveryState::Failed, "{}: {to} must be refused", env.name);
    assert_eq!(
        env.outcomes(id).await,
        [outcome("terminal", Some("target_refused"))],
        "{}: {to} is refused, not connected to",
        env.name
    );
    let attempt = env.attempts(id).await.pop().unwrap();
    [d.last_error.unwrap_or_default(), attempt.error_message.unwrap_or_default()]
}

#[tokio::test]
async fn a_refusal_names_the_host_and_the_rule_never_the_resolved_address() {
    // `localhost` resolves to 127.0.0.1 and/or ::1: a tenant must learn that the name is
    // refused and why, not what it resolves to (or it could map internal DNS).
    let receiver = Receiver::start().await;
    let to = format!("http://localhost:{}/", receiver.port());
    for env in envs().await {
        let worker = env.worker(guarded());
        let d = env.submit("op-name", &to, json!({})).await;
        assert_eq!(worker.run_once().await.unwrap().failed, 1, "{}", env.name);
        for message in refusal_messages(&env, d.id, &to).await {
            assert!(message.contains("localhost"), "{}: names the host: {message:?}", env.name);
            assert!(message.contains("loopback"), "{}: names the rule: {message:?}", env.name);
            for resolved in ["127.0.0.1", "::1"] {
                assert!(
                    !message.contains(resolved),
                    "{}: leaks the resolved {resolved}: {message:?}",
                    env.name
                );
            }
        }
        assert!(receiver.all_received().is_empty(), "{}: nothing was sent", env.name);
    }
}

#[tokio::test]
async fn embedded_ipv4_and_special_purpose_literals_are_refused_before_connecting() {
    // Each of these was connected to (outcome `connection`) by a guard that unwrapped only
    // `::ffff:0:0/96`; the message names the literal (the tenant wrote it) and the rule.
    let p = Receiver::start().await.port();
    let targets = [
        (format!("http://[64:ff9b::7f00:1]:{p}/"), "[64:ff9b::7f00:1]", "nat64 embedding loopback"),
        (format!("http://[2002:7f00:1::1]:{p}/"), "[2002:7f00:1::1]", "6to4 embedding loopback"),
        (format!("http://[::7f00:1]:{p}/"), "[::7f00:1]", "ipv4-compatible embedding loopback"),
        // Teredo: server 65.54.227.120, client 127.0.0.1 (stored inverted).
        (
            format!("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]:{p}/"),
            "[2001:0:4136:e378:8000:63bf:80ff:fffe]",
            "teredo embedding loopback",
        ),
        (format!("http://[fec0::1]:{p}/"), "[fec0::1]", "site-local"),
        (format!("http://[2001:db8::1]:{p}/"), "[2001:db8::1]", "documentation"),
        (format!("http://[3fff::1]:{p}/"), "[3fff::1]", "documentation"),
        (format!("http://192.0.0.1:{p}/"), "192.0.0.1", "ietf protocol assignments"),
        (format!("http://192.0.2.1:{p}/"), "192.0.2.1", "documentation"),
        (format!("http://192.88.99.1:{p}/"), "192.88.99.1", "deprecated 6to4 relay anycast"),
    ];
    for env in envs().await {
        let worker = env.worker(guarded());
        for (i, (to, host, rule)) in targets.iter().enumerate() {
            let d = env.submit(&format!("op-{i}"), to, json!({"n": i})).await;
            let report = worker.run_once().await.unwrap();
            assert_eq!((report.leased, report.failed), (1, 1), "{}: {to}: {report:?}", env.name);
            for message in refusal_messages(&env, d.id, to).await {
                assert!(message.contains(host), "{}: {to}: names {host}: {message:?}", env.name);
                assert!(message.contains(rule), "{}: {to}: names {rule}: {message:?}", env.name);
            }
            assert_eq!(env.quota().await, (100, 100, 0, 0), "{}: {to}: released", env.name);
        }
    }
}

#[tokio::test]
async fn private_targets_are_delivered_when_allowed() {
    let v4 = Receiver::start().await;
    let v6 = Receiver::start_on(IpAddr::V6(Ipv6Addr::LOCALHOST)).await.ok();
    for env in envs().await {
        let worker = env.worker(loopback_allowed());
        let mut targets = vec![
            (&v4, format!("http://127.0.0.1:{}/{}/ip", v4.port(), env.name)),
            (&v4, format!("http://localhost:{}/{}/name", v4.port(), env.name)),
        ];
        if let Some(v6) = &v6 {
            targets.push((v6, format!("http://[::1]:{}/{}/ip6", v6.port(), env.name)));
        }
        for (i, (receiver, to)) in targets.iter().enumerate() {
            let d = env.submit(&format!("op-{i}"), to, json!({"n": i})).await;
            let report = worker.run_once().await.unwrap();
            assert_eq!(report.sent, 1, "{}: {to}: {report:?}", env.name);
            assert_eq!(env.get(d.id).await.state, DeliveryState::Sent, "{}: {to}", env.name);
            let path = path_of(to);
            let got = receiver.received(&path);
            assert_eq!(got.len(), 1, "{}: {to}", env.name);
            assert_eq!(header(&got[0], "webhook-id"), d.id.to_string(), "{}", env.name);
        }
    }
}

fn path_of(url: &str) -> String {
    let rest = url.split_once("://").unwrap().1;
    rest.find('/').map_or("/".to_string(), |i| rest[i..].to_string())
}

#[tokio::test]
async fn a_non_http_target_is_terminal_and_refused_at_validation() {
    for env in envs().await {
        let worker = env.worker(guarded());
        let d = env.submit("op-ftp", "ftp://x", json!({})).await;
        assert_eq!(worker.run_once().await.unwrap().failed, 1, "{}", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Failed, "{}", env.name);
        assert_eq!(
            env.outcomes(d.id).await,
            [outcome("terminal", Some("invalid_url"))],
            "{}",
            env.name
        );
        assert_eq!(env.quota().await, (100, 100, 0, 0), "{}: released", env.name);
    }
    for bad in ["not a url", "ftp://x", "http://", "mailto:a@example.com"] {
        assert!(herald::channels::validate("webhook", bad, &json!({}).into()).is_err(), "{bad}");
    }
    for good in ["https://example.com/hook", "http://hooks.example.com:8080/a?b=c"] {
        assert_eq!(
            herald::channels::validate("webhook", good, &json!({"a": 1}).into()),
            Ok(()),
            "{good}"
        );
    }
}
