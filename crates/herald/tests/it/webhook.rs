//! The webhook channel end to end on every backend (SPEC "Channels" and guarantee 5): a
//! real HTTP receiver on loopback, Standard Webhooks signatures checked by the reference
//! Python library (`standardwebhooks`), status classification, Retry-After, timeouts,
//! redirects, secret rotation and the SSRF guard — time moved by a manual clock.

use crate::common;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::Response;
use base64::Engine as _;
use herald::channels::{WebhookChannel, WebhookOptions};
use herald::{Attempt, Channel, Delivery, DeliveryState, SubmitRequest, Worker, WorkerOptions};
use serde_json::json;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::Write as _;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use uuid::Uuid;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

// ---- Python (the independent verifier) -------------------------------------------------

fn support(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support").join(file)
}

/// Runs `standardwebhooks` on each (secret, received request); `None` means it verified.
fn verify_all(cases: &[(&str, &Received)]) -> Vec<Option<String>> {
    let input: Vec<_> = cases
        .iter()
        .map(|(secret, r)| json!({"secret": secret, "body": B64.encode(&r.body), "headers": r.headers}))
        .collect();
    let mut child = Command::new(common::python())
        .arg(support("verify_webhook.py"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the standardwebhooks verifier");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(serde_json::Value::Array(input).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "the verifier failed: {:?}", out.status);
    let verdicts: Vec<Option<String>> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(verdicts.len(), cases.len());
    verdicts
}

// ---- a real HTTP receiver -------------------------------------------------------------------

/// What the receiver answers to one request on a path.
#[derive(Debug, Clone)]
enum Reply {
    Answer(u16, Vec<(&'static str, String)>),
    /// Never answers (until the client gives up and the connection goes).
    Hang,
}

fn status(code: u16) -> Reply {
    Reply::Answer(code, Vec::new())
}

/// One request as the receiver got it: raw body, headers (lower-case names).
#[derive(Debug, Clone)]
struct Received {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

#[derive(Default)]
struct ReceiverState {
    /// Scripted replies per path; 200 once a path's script is used up.
    replies: Mutex<HashMap<String, VecDeque<Reply>>>,
    /// Recorded before the reply is sent: once a send returned, its request is here.
    received: Mutex<Vec<Received>>,
}

/// An axum server on a loopback port; stopped when dropped.
struct Receiver {
    addr: SocketAddr,
    state: Arc<ReceiverState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(
    State(state): State<Arc<ReceiverState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let headers = headers
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    state.received.lock().unwrap().push(Received {
        method: method.to_string(),
        path: path.clone(),
        headers,
        body: body.to_vec(),
    });
    let reply = state
        .replies
        .lock()
        .unwrap()
        .get_mut(&path)
        .and_then(VecDeque::pop_front)
        .unwrap_or(status(200));
    match reply {
        Reply::Hang => std::future::pending().await,
        Reply::Answer(code, headers) => {
            let mut response = Response::builder().status(code);
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response.body(Body::empty()).unwrap()
        }
    }
}

impl Receiver {
    async fn start() -> Receiver {
        Receiver::start_on(IpAddr::V4(Ipv4Addr::LOCALHOST)).await.expect("bind 127.0.0.1")
    }

    async fn start_on(ip: IpAddr) -> std::io::Result<Receiver> {
        let listener = tokio::net::TcpListener::bind((ip, 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(ReceiverState::default());
        let app = axum::Router::new().fallback(receive).with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Receiver { addr, state, task })
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:port/path` (IPv6 in brackets).
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn script(&self, path: &str, replies: impl IntoIterator<Item = Reply>) {
        self.state.replies.lock().unwrap().entry(path.to_string()).or_default().extend(replies);
    }

    fn received(&self, path: &str) -> Vec<Received> {
        self.state.received.lock().unwrap().iter().filter(|r| r.path == path).cloned().collect()
    }

    fn all_received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }
}

// ---- an environment per backend --------------------------------------------------------

/// A `common::Env` with this file's helpers: a type of its own, because the other test
/// modules of this binary add helpers of the same names to theirs.
#[derive(Debug)]
struct Env(common::Env);

impl std::ops::Deref for Env {
    type Target = common::Env;

    fn deref(&self) -> &common::Env {
        &self.0
    }
}

async fn envs() -> Vec<Env> {
    common::envs("webhook").await.into_iter().map(Env).collect()
}

fn loopback_allowed() -> WebhookOptions {
    WebhookOptions { allow_private_targets: true, timeout: Duration::from_secs(5) }
}

fn guarded() -> WebhookOptions {
    WebhookOptions { allow_private_targets: false, timeout: Duration::from_secs(5) }
}

impl Env {
    async fn submit(&self, key: &str, to: &str, payload: serde_json::Value) -> Delivery {
        let req = SubmitRequest::new(self.tenant, key, "webhook", to, payload);
        self.herald
            .submit_alone(&req)
            .await
            .unwrap_or_else(|e| panic!("{}: submit failed: {e:?}", self.name))
            .delivery
    }

    fn worker_with(&self, webhook: WebhookOptions, options: WorkerOptions) -> Worker {
        let channel = WebhookChannel::new(self.herald.clone(), webhook).unwrap();
        Worker::new(
            self.herald.clone(),
            options,
            [("webhook".to_string(), Arc::new(channel) as Arc<dyn Channel>)],
        )
        .unwrap()
    }

    fn worker(&self, webhook: WebhookOptions) -> Worker {
        self.worker_with(webhook, WorkerOptions { id: "w1".into(), ..WorkerOptions::default() })
    }

    async fn get(&self, id: herald::DeliveryId) -> Delivery {
        self.herald.delivery(self.tenant, id).await.unwrap()
    }

    async fn attempts(&self, id: herald::DeliveryId) -> Vec<Attempt> {
        self.herald.attempts(self.tenant, id).await.unwrap()
    }

    /// (outcome, error code) of each attempt, oldest first.
    async fn outcomes(&self, id: herald::DeliveryId) -> Vec<(String, Option<String>)> {
        self.attempts(id)
            .await
            .into_iter()
            .map(|a| (a.outcome.unwrap_or_else(|| "running".into()), a.error_code))
            .collect()
    }

    /// (granted, available, reserved, spent) on the "webhook" quota key.
    async fn quota(&self) -> (i64, i64, i64, i64) {
        let q = self.herald.quotas(self.tenant).await.unwrap();
        let a = q.iter().find(|a| a.quota_key == "webhook").unwrap();
        (a.granted, a.available, a.reserved, a.spent)
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms().unwrap()
    }

    /// Moves the manual clock to the delivery's next attempt.
    async fn advance_to_due(&self, id: herald::DeliveryId) {
        let d = self.get(id).await;
        assert_eq!(
            d.state,
            DeliveryState::Pending,
            "{}: only a pending delivery is due",
            self.name
        );
        let wait = d.next_attempt_at.as_millisecond() - self.now_ms();
        if wait > 0 {
            self.clock.advance(Duration::from_millis(wait as u64));
        }
    }
}

fn outcome(kind: &str, code: Option<&str>) -> (String, Option<String>) {
    (kind.to_string(), code.map(str::to_string))
}

fn header<'r>(r: &'r Received, name: &str) -> &'r str {
    r.headers.get(name).map(String::as_str).unwrap_or_else(|| panic!("no {name} header: {r:?}"))
}

fn signature_count(r: &Received) -> usize {
    header(r, "webhook-signature").split(' ').filter(|s| s.starts_with("v1,")).count()
}

// ---- signatures ---------------------------------------------------------------------------

#[tokio::test]
async fn the_signature_verifies_with_the_standard_webhooks_library() {
    let receiver = Receiver::start().await;
    for env in envs().await {
        let path = format!("/{}/hook", env.name);
        let payload = json!({
            "type": "repair.ready",
            "data": {"ticket": 42, "note": "réparation prête ✓", "tags": ["a", "b"], "price": 12.5},
        });
        let d = env.submit("op-1", &receiver.url(&path), payload.clone()).await;
        assert_eq!(env.quota().await, (100, 99, 1, 0), "{}: reserved at submit", env.name);

        let report = env.worker(loopback_allowed()).run_once().await.unwrap();
        assert_eq!((report.leased, report.sent), (1, 1), "{}: {report:?}", env.name);
        let now_s = jiff::Timestamp::now().as_second();

        let got = receiver.received(&path);
        assert_eq!(got.len(), 1, "{}: one request", env.name);
        let r = &got[0];
        assert_eq!(r.method, "POST", "{}", env.name);
        assert_eq!(header(r, "webhook-id"), d.id.to_string(), "{}: webhook-id", env.name);
        let ts: i64 = header(r, "webhook-timestamp").parse().unwrap();
        assert!((now_s - ts).abs() <= 5, "{}: webhook-timestamp {ts} vs now {now_s}", env.name);
        assert!(
            header(r, "content-type").starts_with("application/json"),
            "{}: content-type {:?}",
            env.name,
            header(r, "content-type")
        );
        let body: serde_json::Value = serde_json::from_slice(&r.body)
            .unwrap_or_else(|e| panic!("{}: body is not JSON ({e})", env.name));
        assert_eq!(body, payload, "{}: body is the payload", env.name);
        assert_eq!(signature_count(r), 1, "{}: one secret, one signature", env.name);

        // The reference library accepts it with the tenant's secret…
        let other = herald::new_webhook_secret().unwrap();
        let mut tampered = r.clone();
        tampered.body = serde_json::to_vec(&json!({"type": "repair.ready", "data": {}})).unwrap();
        let mut wrong_id = r.clone();
        wrong_id.headers.insert("webhook-id".into(), Uuid::now_v7().to_string());
        let verdicts = verify_all(&[
            (&env.secret, r),
            (&other, r),
            (&env.secret, &tampered),
            (&env.secret, &wrong_id),
        ]);
        assert_eq!(
            verdicts[0], None,
            "{}: standardwebhooks must verify herald's signature",
            env.name
        );
        // …and is not a rubber stamp: another secret, another body or another id fail.
        assert!(verdicts[1].is_some(), "{}: another secret must not verify", env.name);
        assert!(verdicts[2].is_some(), "{}: a tampered body must not verify", env.name);
        assert!(verdicts[3].is_some(), "{}: another webhook-id must not verify", env.name);

        let d = env.get(d.id).await;
        assert_eq!((d.state, d.attempts), (DeliveryState::Sent, 1), "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, [outcome("sent", None)], "{}", env.name);
        assert_eq!(env.quota().await, (100, 99, 0, 1), "{}: committed", env.name);
    }
}

#[tokio::test]
async fn a_rotated_secret_signs_the_next_attempt() {
    let receiver = Receiver::start().await;
    for env in envs().await {
        let path = format!("/{}/hook", env.name);
        receiver.script(&path, [status(503), status(200)]);
        let d = env.submit("op-1", &receiver.url(&path), json!({"n": 1})).await;
        let worker = env.worker(loopback_allowed());
        assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}", env.name);

        let new_secret = herald::new_webhook_secret().unwrap();
        assert_ne!(new_secret, env.secret);
        let first = receiver.received(&path).pop().unwrap();
        assert_eq!(signature_count(&first), 1, "{}: before rotation", env.name);
        let verdicts = verify_all(&[(&env.secret, &first), (&new_secret, &first)]);
        assert_eq!(verdicts[0], None, "{}: attempt 1 is signed with the old secret", env.name);
        assert!(verdicts[1].is_some(), "{}: not yet with the new one", env.name);

        let (tenant, secret) = (env.tenant, new_secret.clone());
        let rotated = env
            .herald
            .transaction(|tx| {
                let secret = secret.clone();
                Box::pin(async move {
                    Ok(herald_store::tenants::tenant_rotate_secret(
                        tx.conn(),
                        tenant.as_uuid(),
                        &secret,
                    )
                    .await?)
                })
            })
            .await
            .unwrap()
            .value;
        assert!(rotated, "{}: the tenant exists", env.name);

        env.advance_to_due(d.id).await;
        assert_eq!(worker.run_once().await.unwrap().sent, 1, "{}", env.name);
        let got = receiver.received(&path);
        assert_eq!(got.len(), 2, "{}", env.name);
        let second = &got[1];
        assert_eq!(header(second, "webhook-id"), d.id.to_string(), "{}", env.name);
        assert_eq!(signature_count(second), 2, "{}: both secrets during rotation", env.name);
        let third = herald::new_webhook_secret().unwrap();
        let verdicts =
            verify_all(&[(&new_secret, second), (&env.secret, second), (&third, second)]);
        assert_eq!(
            verdicts[0], None,
            "{}: the next attempt verifies with the NEW secret",
            env.name
        );
        assert_eq!(verdicts[1], None, "{}: and still with the previous one", env.name);
        assert!(verdicts[2].is_some(), "{}: not with an unrelated secret", env.name);
    }
}

// ---- classification --------------------------------------------------------------------

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

// ---- the SSRF guard -----------------------------------------------------------------------

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
        assert!(herald::channels::validate("webhook", bad, &json!({})).is_err(), "{bad}");
    }
    for good in ["https://example.com/hook", "http://hooks.example.com:8080/a?b=c"] {
        assert_eq!(herald::channels::validate("webhook", good, &json!({"a": 1})), Ok(()), "{good}");
    }
}
