//! Destination limits across processes (issue 36, point 2): three `herald serve` on one
//! database, a limit set through `POST /v1/limits`, a real receiver that measures what
//! reaches it — sends in flight at once never above `max_in_flight`, sends started never
//! above `per_second` (+5 %) beyond one bucket — and a 429 with Retry-After that pauses
//! only its lane, without spending an attempt on the deliveries that wait.

use crate::support::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A receiver that counts the requests in flight at once and stamps each arrival; it
/// answers after `delay`, and with a 429 `Retry-After: <s>` to the first `refuse` requests.
struct Meter {
    addr: SocketAddr,
    state: Arc<MeterState>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct MeterState {
    now: AtomicUsize,
    max: AtomicUsize,
    arrivals: Mutex<Vec<(Instant, String)>>,
    refuse: AtomicUsize,
}

impl Drop for Meter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Meter {
    async fn start(delay: Duration, refuse: usize, retry_after_s: u64) -> Meter {
        let state = Arc::new(MeterState::default());
        state.refuse.store(refuse, Ordering::SeqCst);
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the meter");
        let addr = listener.local_addr().expect("meter address");
        let shared = state.clone();
        let app = axum::Router::new().route(
            "/hooks/{name}",
            axum::routing::post(move |headers: HeaderMap| {
                let state = shared.clone();
                async move {
                    let id = headers
                        .get("webhook-id")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_string();
                    state.arrivals.lock().unwrap().push((Instant::now(), id));
                    let now = state.now.fetch_add(1, Ordering::SeqCst) + 1;
                    state.max.fetch_max(now, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                    state.now.fetch_sub(1, Ordering::SeqCst);
                    let refused = state
                        .refuse
                        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                        .is_ok();
                    if refused {
                        let retry = [("retry-after", retry_after_s.to_string())];
                        return (StatusCode::TOO_MANY_REQUESTS, retry).into_response();
                    }
                    StatusCode::OK.into_response()
                }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Meter { addr, state, task }
    }

    /// Its URL by `host` (`127.0.0.1` or `localhost`: two destinations, one receiver).
    fn url(&self, host: &str) -> String {
        format!("http://{host}:{}/hooks/h", self.addr.port())
    }

    fn arrivals(&self) -> Vec<(Instant, String)> {
        self.state.arrivals.lock().unwrap().clone()
    }

    /// Waits until `n` requests arrived (a bounded number of short waits).
    async fn wait_for(&self, n: usize, within: Duration, what: &str) {
        let deadline = Instant::now() + within;
        while self.arrivals().len() < n {
            assert!(Instant::now() < deadline, "{what}: {} of {n} requests", self.arrivals().len());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

use axum::response::IntoResponse;

/// Three `herald serve` on `db`, the first one's address for the API.
async fn three(db: &SharedDb, cwd: &Path) -> Vec<Proc> {
    let mut procs = Vec::new();
    for name in ["one", "two", "three"] {
        let dir = cwd.join(name);
        std::fs::create_dir_all(&dir).expect("a directory per process");
        procs.push(Proc::serve(name, &dir, &["--db", db.url()], &[]).await);
    }
    procs
}

async fn submit_many(server: &Proc, key: &str, prefix: &str, to: &str, n: usize) -> Vec<String> {
    let mut ids = Vec::new();
    for i in 0..n {
        let body = json!({"operation_key": format!("{prefix}-{i}"), "channel": "webhook",
                          "to": to, "payload": {"i": i}});
        let reply = call(server, "POST", "/v1/deliveries", Some(key), Some(&body)).await;
        let created = expect_status(&reply, 201, "POST /v1/deliveries");
        ids.push(created["id"].as_str().expect("an id").to_string());
    }
    ids
}

async fn set_limit(server: &Proc, limit: Value) {
    let reply = call(server, "POST", "/v1/limits", Some(ADMIN_KEY), Some(&limit)).await;
    expect_status(&reply, 200, "POST /v1/limits");
}

async fn limits_hold_across_three_processes(db: SharedDb) {
    const IN_FLIGHT: usize = 3;
    const PER_SECOND: f64 = 20.0;
    const DELIVERIES: usize = 60;
    let cwd = tempfile::tempdir().expect("tempdir");
    let slow = Meter::start(Duration::from_millis(150), 0, 0).await;
    let fast = Meter::start(Duration::ZERO, 0, 0).await;
    let procs = three(&db, cwd.path()).await;
    let (_t, key, _) = tenant_with_quota(&procs[0], "acme", 2 * DELIVERIES as i64).await;
    set_limit(&procs[0], json!({"destination": "127.0.0.1", "max_in_flight": IN_FLIGHT})).await;
    set_limit(&procs[1], json!({"destination": "localhost", "per_second": PER_SECOND})).await;
    for bad in [
        json!({"destination": "a b", "max_in_flight": 1}),
        json!({"destination": "x.test"}),
        json!({"destination": "x.test", "max_in_flight": 0}),
        json!({"destination": "x.test", "per_second": -1}),
        json!({"destination": "x.test", "per_second": 1, "tenant": "not-a-tenant"}),
    ] {
        let reply = call(&procs[2], "POST", "/v1/limits", Some(ADMIN_KEY), Some(&bad)).await;
        assert!(matches!(reply.status, 400 | 404), "{bad}: {} {}", reply.status, reply.body);
    }
    let reply = call(&procs[2], "GET", "/v1/limits", Some(ADMIN_KEY), None).await;
    let listed = expect_status(&reply, 200, "GET /v1/limits");
    assert_eq!(listed["limits"].as_array().map(Vec::len), Some(2), "{listed}");

    submit_many(&procs[0], &key, "slow", &slow.url("127.0.0.1"), DELIVERIES).await;
    submit_many(&procs[1], &key, "fast", &fast.url("localhost"), DELIVERIES).await;
    slow.wait_for(DELIVERIES, Duration::from_secs(60), "the in-flight limited receiver").await;
    fast.wait_for(DELIVERIES, Duration::from_secs(60), "the rate limited receiver").await;

    let workers = db
        .count("SELECT count(DISTINCT attempt_worker) FROM deliveries WHERE state = 'sent'", None)
        .await;
    assert!(workers >= 2, "{}: the sends of {workers} process(es) only", db.name());
    let max = slow.state.max.load(Ordering::SeqCst);
    assert!(max <= IN_FLIGHT, "{}: {max} sends in flight at once, limit {IN_FLIGHT}", db.name());
    // A token bucket's bound: no window of w seconds holds more than R·w (+5 %) plus one
    // bucket (one second's worth).
    let times: Vec<Instant> = fast.arrivals().into_iter().map(|(t, _)| t).collect();
    let bucket = PER_SECOND;
    let mut times = times;
    times.sort();
    let (mut worst, mut at) = (0.0f64, (0, 0));
    for i in 0..times.len() {
        for j in i..times.len() {
            let w = times[j].duration_since(times[i]).as_secs_f64();
            let excess = (j - i + 1) as f64 - (1.05 * PER_SECOND * w + bucket);
            if excess > worst {
                (worst, at) = (excess, (i, j));
            }
        }
    }
    let span = times.last().unwrap().duration_since(times[0]).as_secs_f64();
    let sustained = (times.len() as f64 - bucket) / span.max(f64::EPSILON);
    eprintln!(
        "{}: at most {max} in flight (limit {IN_FLIGHT}); {} sends in {span:.2} s, {sustained:.1}/s \
         after the first bucket (limit {PER_SECOND}/s); sent by {workers} processes",
        db.name(),
        times.len()
    );
    let gaps: Vec<u128> = times.windows(2).map(|w| w[1].duration_since(w[0]).as_millis()).collect();
    // Less than one send over: the times are the receiver's, where each send's own latency
    // (a few ms, not the same for all) moves its arrival off the instant its token was
    // taken; a bucket that let more through would be over by whole sends (seen once at
    // the edge: 23 sends in 133 ms against 22.8 allowed).
    assert!(
        worst < 1.0,
        "{}: sends {}..={} exceeded the rate by {worst:.1}; gaps in ms: {gaps:?}",
        db.name(),
        at.0,
        at.1
    );
    assert!(sustained <= PER_SECOND * 1.05, "{}: {sustained:.1}/s", db.name());
}

async fn a_retry_after_pauses_only_its_lane(db: SharedDb) {
    const RETRY_AFTER_S: u64 = 3;
    let cwd = tempfile::tempdir().expect("tempdir");
    // X answers the first request 429 with Retry-After; Y is another destination.
    let x = Meter::start(Duration::ZERO, 1, RETRY_AFTER_S).await;
    let y = Meter::start(Duration::ZERO, 0, 0).await;
    let server = Proc::serve("serve", cwd.path(), &["--db", db.url()], &[]).await;
    let (_a, a_key, _) = tenant_with_quota(&server, "tenant-a", 20).await;
    let (_b, b_key, _) = tenant_with_quota(&server, "tenant-b", 20).await;

    let first = submit_many(&server, &a_key, "a-x-first", &x.url("127.0.0.1"), 1).await;
    x.wait_for(1, Duration::from_secs(10), "the first request to X").await;
    // Let the 429 be recorded, and the lane paused, before the rest arrive.
    let path = format!("/v1/deliveries/{}", first[0]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let reply = call(&server, "GET", &path, Some(&a_key), None).await;
        let d = expect_status(&reply, 200, "GET the first delivery");
        if d["state"] == "pending" && d["attempts"] == 1 {
            break;
        }
        assert!(Instant::now() < deadline, "the 429 was never recorded: {d}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let paused_at = Instant::now();
    let waiting = submit_many(&server, &a_key, "a-x", &x.url("127.0.0.1"), 4).await;
    submit_many(&server, &a_key, "a-y", &y.url("localhost"), 4).await;
    submit_many(&server, &b_key, "b-x", &x.url("127.0.0.1"), 4).await;
    y.wait_for(4, Duration::from_secs(5), "tenant A's other destination").await;
    x.wait_for(1 + 4, Duration::from_secs(5), "tenant B's sends to the same host").await;
    let during = x.arrivals().len();
    assert!(
        paused_at.elapsed() < Duration::from_secs(RETRY_AFTER_S),
        "{}: the others must not wait for the pause",
        db.name()
    );
    for id in &waiting {
        let reply = call(&server, "GET", &format!("/v1/deliveries/{id}"), Some(&a_key), None).await;
        let d = expect_status(&reply, 200, "GET a waiting delivery");
        assert_eq!(
            (d["state"].as_str(), d["attempts"].as_i64()),
            (Some("pending"), Some(0)),
            "{}: a delivery of the paused lane spent an attempt: {d}",
            db.name()
        );
    }
    assert_eq!(during, 5, "{}: only the refused request and tenant B's reached X", db.name());
    // After the pause, the lane goes on: the 4 waiting and the retried first.
    x.wait_for(5 + 5, Duration::from_secs(RETRY_AFTER_S + 10), "the paused lane after its pause")
        .await;
    let resumed = x.arrivals().iter().skip(5).map(|(t, _)| *t).min().unwrap();
    eprintln!(
        "{}: the paused lane resumed {:?} after the pause began (Retry-After {RETRY_AFTER_S} s)",
        db.name(),
        resumed.duration_since(paused_at)
    );
}

on_every_backend! {
    in_flight_and_rate_limits_hold_across_three_processes => limits_hold_across_three_processes;
    a_retry_after_pauses_only_its_lane_and_spends_no_attempt => a_retry_after_pauses_only_its_lane;
}
