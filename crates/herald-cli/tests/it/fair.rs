//! Issue 36's scenario, as an operator meets it: `herald serve` with its defaults, tenant A
//! submits 64 webhooks to a receiver that answers after 2 s (or never, until the send
//! timeout), then tenant B submits 8 to a receiver that answers at once. Before lanes, A's
//! backlog held every send slot and B's deliveries arrived 15.7 s late (4 minutes with the
//! hanging receiver). Now each of B's must arrive within 1 s of its submit while A's drain.
//! On SQLite, PostgreSQL and MariaDB, real processes, real receivers.

use crate::support::*;

const A_DELIVERIES: usize = 64;
const B_DELIVERIES: usize = 8;
/// The acceptance bound: B's worst delivery after its submit.
const B_WORST: Duration = Duration::from_secs(1);

/// A receiver that answers every POST after `delay`, or never (`None`) while it lives.
struct SlowReceiver {
    addr: SocketAddr,
    started: Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SlowReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl SlowReceiver {
    async fn start(delay: Option<Duration>) -> SlowReceiver {
        let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the slow receiver");
        let addr = listener.local_addr().expect("slow receiver address");
        let count = started.clone();
        let app = axum::Router::new().route(
            "/hooks/{name}",
            axum::routing::post(move || {
                let count = count.clone();
                async move {
                    count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    match delay {
                        Some(delay) => tokio::time::sleep(delay).await,
                        None => std::future::pending::<()>().await,
                    }
                    StatusCode::OK
                }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        SlowReceiver { addr, started, task }
    }

    fn url(&self, name: &str) -> String {
        format!("http://{}/hooks/{name}", self.addr)
    }

    fn started(&self) -> usize {
        self.started.load(std::sync::atomic::Ordering::SeqCst)
    }
}

async fn submit(server: &Proc, key: &str, operation_key: &str, to: &str) -> String {
    let body = json!({"operation_key": operation_key, "channel": "webhook", "to": to,
                      "payload": {"n": operation_key}});
    let reply = call(server, "POST", "/v1/deliveries", Some(key), Some(&body)).await;
    let created = expect_status(&reply, 201, "POST /v1/deliveries");
    created["id"].as_str().expect("an id").to_string()
}

async fn one_slow_receiver_never_delays_another_tenant(db: SharedDb, delay: Option<Duration>) {
    let cwd = tempfile::tempdir().expect("tempdir");
    let slow = SlowReceiver::start(delay).await;
    let mut fast = Receiver::start(false).await;
    // Defaults unchanged: only the database (and the test's admin key) is given.
    let server = Proc::serve("serve", cwd.path(), &["--db", db.url()], &[]).await;
    let (_a, a_key, _) = tenant_with_quota(&server, "tenant-a", A_DELIVERIES as i64).await;
    let (_b, b_key, _) = tenant_with_quota(&server, "tenant-b", B_DELIVERIES as i64).await;

    for i in 0..A_DELIVERIES {
        submit(&server, &a_key, &format!("a-{i}"), &slow.url("a")).await;
    }
    let mut submitted_at = HashMap::new();
    for i in 0..B_DELIVERIES {
        let id = submit(&server, &b_key, &format!("b-{i}"), &fast.url("b")).await;
        submitted_at.insert(id, Instant::now());
    }
    let mut late = Vec::new();
    while late.len() < B_DELIVERIES {
        let hit = fast.next(Duration::from_secs(30), &server).await;
        let at = submitted_at
            .get(&hit.id)
            .unwrap_or_else(|| panic!("{}: a webhook-id no submit returned: {hit:?}", db.name()));
        late.push(at.elapsed());
    }
    let worst = late.iter().max().copied().unwrap_or_default();
    let a_started = slow.started();
    eprintln!(
        "{}: B's worst delivery {worst:?} after its submit; A's receiver had {a_started} of \
         {A_DELIVERIES} requests",
        db.name()
    );
    assert!(
        worst <= B_WORST,
        "{}: B's deliveries arrived up to {worst:?} after their submits ({late:?})",
        db.name()
    );
    assert!(
        a_started > 0 && a_started < A_DELIVERIES,
        "{}: A's backlog must still be draining ({a_started} of {A_DELIVERIES} started)",
        db.name()
    );
}

async fn answering_after_2s(db: SharedDb) {
    one_slow_receiver_never_delays_another_tenant(db, Some(Duration::from_secs(2))).await;
}

async fn hanging(db: SharedDb) {
    one_slow_receiver_never_delays_another_tenant(db, None).await;
}

on_every_backend! {
    a_receiver_answering_after_2s_never_delays_another_tenant => answering_after_2s;
    a_receiver_hanging_until_the_send_timeout_never_delays_another_tenant => hanging;
}
