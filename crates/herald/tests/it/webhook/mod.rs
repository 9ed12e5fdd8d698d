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

mod classification;
mod signatures;
mod ssrf;
