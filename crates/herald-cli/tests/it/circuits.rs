//! Endpoint health (issue 36, point 3) with `herald serve` and real receivers: a lane (a
//! tenant's sends to one destination) whose sends fail opens its circuit, its deliveries
//! wait — no attempt spent — while a probe now and then tries the receiver; a probe that
//! works closes it and the lane drains. A lane that fails for long is disabled, an operator
//! alert is raised and the tenant hears of it on its events webhook; enabling it sends what
//! waited. The ledger is exact at the end.

use crate::support::*;
use axum::response::IntoResponse;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// A receiver that answers 500 until made healthy, counting the requests it gets.
struct Flaky {
    addr: SocketAddr,
    healthy: Arc<AtomicBool>,
    requests: Arc<AtomicUsize>,
    bodies: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Flaky {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Flaky {
    async fn start(healthy: bool) -> Flaky {
        let healthy = Arc::new(AtomicBool::new(healthy));
        let requests = Arc::new(AtomicUsize::new(0));
        let bodies: Arc<Mutex<Vec<String>>> = Arc::default();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (h, r, b) = (healthy.clone(), requests.clone(), bodies.clone());
        let app = axum::Router::new().route(
            "/hooks/{name}",
            axum::routing::post(move |body: Bytes| {
                let (h, r, b) = (h.clone(), r.clone(), b.clone());
                async move {
                    r.fetch_add(1, Ordering::SeqCst);
                    b.lock().unwrap().push(String::from_utf8_lossy(&body).into_owned());
                    if h.load(Ordering::SeqCst) {
                        StatusCode::OK.into_response()
                    } else {
                        StatusCode::INTERNAL_SERVER_ERROR.into_response()
                    }
                }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Flaky { addr, healthy, requests, bodies, task }
    }

    fn url(&self, host: &str) -> String {
        format!("http://{host}:{}/hooks/h", self.addr.port())
    }

    fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    fn heal(&self) {
        self.healthy.store(true, Ordering::SeqCst);
    }
}

const DELIVERIES: usize = 10;

/// Short circuit settings, so the test sees each step in seconds.
const CIRCUIT: [(&str, &str); 4] = [
    ("HERALD_CIRCUIT_FAILURES", "3"),
    ("HERALD_CIRCUIT_PROBE", "400ms"),
    ("HERALD_CIRCUIT_DISABLE_AFTER", "3s"),
    ("HERALD_BACKOFF_BASE", "50ms"),
];

async fn submit_all(server: &Proc, key: &str, to: &str, prefix: &str) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..DELIVERIES {
        let body = json!({"operation_key": format!("{prefix}-{i}"), "channel": "webhook",
                          "to": to, "payload": {"i": i}});
        let reply = call(server, "POST", "/v1/deliveries", Some(key), Some(&body)).await;
        ids.push(expect_status(&reply, 201, "POST /v1/deliveries")["id"].as_str().unwrap().into());
    }
    ids
}

async fn circuit_of(server: &Proc, key: &str, destination: &str) -> Option<Value> {
    let reply = call(server, "GET", "/v1/circuits", Some(key), None).await;
    let list = expect_status(&reply, 200, "GET /v1/circuits");
    list["circuits"].as_array()?.iter().find(|c| c["destination"] == destination).cloned()
}

async fn until<F, Fut>(what: &str, within: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "{what}: not within {within:?}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

async fn attempts_total(server: &Proc, key: &str, ids: &[String]) -> (i64, usize) {
    let (mut attempts, mut sent) = (0, 0);
    for id in ids {
        let reply = call(server, "GET", &format!("/v1/deliveries/{id}"), Some(key), None).await;
        let d = expect_status(&reply, 200, "GET a delivery");
        attempts += d["attempts"].as_i64().unwrap_or(0);
        sent += usize::from(d["state"] == "sent");
    }
    (attempts, sent)
}

async fn circuits_open_probe_close_disable_and_enable(db: SharedDb) {
    let cwd = tempfile::tempdir().expect("tempdir");
    let recovers = Flaky::start(false).await;
    let dies = Flaky::start(false).await;
    let events = Flaky::start(true).await;
    let server = Proc::serve("serve", cwd.path(), &["--db", db.url()], &CIRCUIT).await;
    let (_a, a_key, _) = tenant_with_quota(&server, "tenant-a", DELIVERIES as i64).await;
    let (b, b_key, _) = tenant_with_quota(&server, "tenant-b", DELIVERIES as i64 + 1).await;
    let path = format!("/v1/tenants/{b}/events-url");
    let body = json!({"url": events.url("localhost")});
    let reply = call(&server, "PUT", &path, Some(ADMIN_KEY), Some(&body)).await;
    expect_status(&reply, 200, "PUT events-url");

    let a_ids = submit_all(&server, &a_key, &recovers.url("127.0.0.1"), "a").await;
    let b_ids = submit_all(&server, &b_key, &dies.url("127.0.0.1"), "b").await;

    // Three failures open each lane's circuit.
    until("A's circuit opens", Duration::from_secs(10), || async {
        circuit_of(&server, &a_key, "127.0.0.1").await.is_some_and(|c| c["circuit"] == "open")
    })
    .await;
    // While open, only probes reach the receiver, and only they spend attempts.
    let (before_requests, (before_attempts, _)) =
        (recovers.requests(), attempts_total(&server, &a_key, &a_ids).await);
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let probes = recovers.requests() - before_requests;
    let (after_attempts, _) = attempts_total(&server, &a_key, &a_ids).await;
    eprintln!("{}: {probes} probes in 1 s while open", db.name());
    assert!(
        (1..=3).contains(&probes),
        "{}: {probes} probes in 1 s (every 400 ms, then 800)",
        db.name()
    );
    // (A probe leased just before the first count reaches the receiver after it: one more.)
    let spent = (after_attempts - before_attempts) as usize;
    assert!(spent <= probes + 1, "{}: {spent} attempts spent, {probes} probes", db.name());

    // A probe that works closes the circuit, and the lane drains.
    recovers.heal();
    until("A's lane drains", Duration::from_secs(15), || async {
        attempts_total(&server, &a_key, &a_ids).await.1 == DELIVERIES
    })
    .await;
    assert!(circuit_of(&server, &a_key, "127.0.0.1").await.is_none(), "A's circuit is closed");

    // B's receiver never recovers: failing for 3 s disables the lane, alerts the operator
    // and tells tenant B.
    until("B's lane is disabled", Duration::from_secs(20), || async {
        circuit_of(&server, &b_key, "127.0.0.1").await.is_some_and(|c| c["circuit"] == "disabled")
    })
    .await;
    until("tenant B hears of it", Duration::from_secs(10), || async { events.requests() >= 1 })
        .await;
    let event: Value = serde_json::from_str(&events.bodies.lock().unwrap()[0]).unwrap();
    assert_eq!(event["type"], "endpoint.disabled", "{event}");
    assert_eq!(event["destination"], "127.0.0.1", "{event}");
    let metrics = call_text(&server, "GET", "/metrics", "", "").await;
    assert!(
        metrics.body.lines().any(|l| l.starts_with("herald_operator_alerts_total")
            && l.contains("endpoint_disabled")
            && !l.ends_with(" 0")),
        "{}: no endpoint_disabled alert in /metrics",
        db.name()
    );
    let disabled_requests = dies.requests();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(dies.requests(), disabled_requests, "{}: a disabled lane was sent to", db.name());

    // Enabled again, with the receiver well: what waited goes.
    dies.heal();
    let reply = call(
        &server,
        "POST",
        "/v1/circuits/enable",
        Some(&b_key),
        Some(&json!({"destination": "127.0.0.1"})),
    )
    .await;
    assert_eq!(expect_status(&reply, 200, "enable")["enabled"], true);
    until("B's lane drains", Duration::from_secs(15), || async {
        let (_, sent) = attempts_total(&server, &b_key, &b_ids).await;
        let failed = {
            let reply =
                call(&server, "GET", "/v1/deliveries?state=failed", Some(&b_key), None).await;
            expect_status(&reply, 200, "list failed")["deliveries"].as_array().map_or(0, Vec::len)
        };
        sent + failed == DELIVERIES
    })
    .await;
    // The ledger: every unit reserved was spent or released, none twice.
    for (key, n) in [(&a_key, DELIVERIES as i64), (&b_key, DELIVERIES as i64 + 1)] {
        let quota = webhook_quota(&server, key).await;
        let (granted, available, reserved, spent) = (
            quota["granted"].as_i64().unwrap(),
            quota["available"].as_i64().unwrap(),
            quota["reserved"].as_i64().unwrap(),
            quota["spent"].as_i64().unwrap(),
        );
        assert_eq!(granted, n, "{quota}");
        assert_eq!(reserved, 0, "{}: units left reserved: {quota}", db.name());
        assert_eq!(available + spent, granted, "{quota}");
    }
}

on_every_backend! {
    a_failing_lane_opens_probes_closes_and_a_disabled_one_is_enabled_again =>
        circuits_open_probe_close_disable_and_enable;
}
