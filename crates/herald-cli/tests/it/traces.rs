//! Traces (issue 36, point 4) with `herald serve --traces otlp` and a real OTLP receiver
//! (`tests/support/otlp_receiver.py`, on PyPI's opentelemetry-proto): a submit carrying a
//! W3C `traceparent` and each attempt of its delivery are one trace, in the right parents,
//! and each webhook carries its attempt's own `traceparent`. With traces off (the
//! default), no span is exported and no webhook carries one.

use crate::support::*;
use axum::response::IntoResponse;
use std::io::BufRead as _;
use tokio::sync::Notify;

/// The caller's trace and span, as a client would send them.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
/// The trace of the PHP HTTP client's case.
const PHP_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";

/// Waits, without polling, until `check` finds what it looks for in state that changes
/// only with a call of `arrived.notify_waiters()`, or panics naming `what`.
async fn until<T>(arrived: &Notify, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + DELIVERY_BOUND;
    loop {
        let notified = arrived.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if let Some(found) = check() {
            return found;
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return check().unwrap_or_else(|| panic!("{what}: not within {DELIVERY_BOUND:?}"));
        }
    }
}

/// The OTLP receiver: its port, and every span it decoded (one JSON object each).
struct Collector {
    child: std::process::Child,
    port: u16,
    spans: Arc<Mutex<Vec<Value>>>,
    arrived: Arc<Notify>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
    }
}

impl Collector {
    fn start() -> Option<Collector> {
        let python = python_with(&["opentelemetry.proto.collector.trace.v1.trace_service_pb2"])?;
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/otlp_receiver.py");
        let mut child = std::process::Command::new(python)
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the OTLP receiver");
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let port = lines.next().unwrap().unwrap().trim().parse().unwrap();
        let (spans, arrived): (Arc<Mutex<Vec<Value>>>, Arc<Notify>) = Default::default();
        let (all, signal) = (spans.clone(), arrived.clone());
        let reader = std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str(&line) {
                    all.lock().unwrap().push(v);
                    signal.notify_waiters();
                }
            }
        });
        Some(Collector { child, port, spans, arrived, reader: Some(reader) })
    }

    /// Every span it ever received: its stdin closed, it exits, and its output is read to
    /// the end.
    fn finish(mut self) -> Vec<Value> {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
        if let Some(reader) = self.reader.take() {
            reader.join().expect("the receiver's reader");
        }
        self.spans.lock().unwrap().clone()
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The spans named `name` in `trace`, once there are `n` of them.
    async fn wait(&self, trace: &str, name: &str, n: usize) -> Vec<Value> {
        let what = format!("{n} `{name}` spans of trace {trace}");
        until(&self.arrived, &what, || {
            let found: Vec<Value> = self
                .spans
                .lock()
                .unwrap()
                .iter()
                .filter(|s| s["trace_id"] == trace && s["name"] == name)
                .cloned()
                .collect();
            (found.len() >= n).then_some(found)
        })
        .await
    }
}

/// A webhook receiver that answers 503 to the first request and 200 after, keeping each
/// request's `traceparent` header ("" when it had none).
struct Hooks {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
    arrived: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hooks {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Hooks {
    async fn start() -> Hooks {
        let (seen, arrived): (Arc<Mutex<Vec<String>>>, Arc<Notify>) = Default::default();
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("address");
        let (s, signal) = (seen.clone(), arrived.clone());
        let app = axum::Router::new().route(
            "/hooks/{name}",
            axum::routing::post(move |headers: HeaderMap| {
                let (s, signal) = (s.clone(), signal.clone());
                async move {
                    let tp = headers.get("traceparent").and_then(|v| v.to_str().ok());
                    let mut seen = s.lock().unwrap();
                    seen.push(tp.unwrap_or_default().to_string());
                    signal.notify_waiters();
                    if seen.len() == 1 {
                        StatusCode::SERVICE_UNAVAILABLE.into_response()
                    } else {
                        StatusCode::OK.into_response()
                    }
                }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Hooks { addr, seen, arrived, task }
    }

    fn url(&self) -> String {
        format!("http://{}/hooks/h", self.addr)
    }

    async fn wait(&self, n: usize) -> Vec<String> {
        until(&self.arrived, &format!("{n} webhooks"), || {
            let seen = self.seen.lock().unwrap().clone();
            (seen.len() >= n).then_some(seen)
        })
        .await
    }
}

/// `POST /v1/deliveries` with an optional `traceparent` header.
async fn submit(server: &Proc, key: &str, to: &str, op: &str, traceparent: Option<&str>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut request = reqwest::Client::new()
        .post(format!("http://{}/v1/deliveries", server.addr))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(
            json!({"operation_key": op, "channel": "webhook", "to": to, "payload": {}}).to_string(),
        );
    if let Some(tp) = traceparent {
        request = request.header("traceparent", tp);
    }
    let reply = request.send().await.expect("POST /v1/deliveries");
    assert_eq!(reply.status().as_u16(), 201, "{}", reply.text().await.unwrap_or_default());
}

fn only(spans: &[Value], what: &str) -> Value {
    assert_eq!(spans.len(), 1, "one {what}: {spans:?}");
    spans[0].clone()
}

async fn traced(db: SharedDb) {
    let Some(collector) = Collector::start() else { return };
    let cwd = tempfile::tempdir().expect("tempdir");
    let hooks = Hooks::start().await;
    let endpoint = collector.endpoint();
    let env = [
        ("HERALD_TRACES", "otlp"),
        ("HERALD_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ("HERALD_BACKOFF_BASE", "50ms"),
    ];
    let server = Proc::serve("serve", cwd.path(), &["--db", db.url()], &env).await;
    let (_, key, _) = tenant_with_quota(&server, "traced", 5).await;
    let caller = format!("00-{TRACE}-{CALLER_SPAN}-01");
    submit(&server, &key, &hooks.url(), "traced-1", Some(&caller)).await;

    // The request, under the caller's span; the submit under the request; each attempt
    // (one refused with 503, one sent) under the submit.
    let request = only(&collector.wait(TRACE, "POST /v1/deliveries", 1).await, "request");
    assert_eq!(request["parent_span_id"], CALLER_SPAN, "{request}");
    assert_eq!(request["service"], "herald", "{request}");
    assert_eq!(request["attributes"]["http.response.status_code"], "201", "{request}");
    let submitted = only(&collector.wait(TRACE, "submit", 1).await, "submit");
    assert_eq!(submitted["parent_span_id"], request["span_id"], "{submitted}");
    let mut attempts = collector.wait(TRACE, "attempt", 2).await;
    attempts.sort_by_key(|a| a["attributes"]["attempt"].as_str().unwrap_or("").to_string());
    for a in &attempts {
        assert_eq!(a["parent_span_id"], submitted["span_id"], "{}: {a}", db.name());
        assert_eq!(a["attributes"]["destination"], "127.0.0.1", "{a}");
    }
    assert_eq!(attempts[0]["attributes"]["herald.outcome"], "transient", "{}", attempts[0]);
    assert_eq!(attempts[0]["attributes"]["error.type"], "http_503", "{}", attempts[0]);
    assert_eq!(attempts[0]["status_code"], 2, "an error status: {}", attempts[0]);
    assert_eq!(attempts[1]["attributes"]["herald.outcome"], "sent", "{}", attempts[1]);
    eprintln!("{}: {request}\n{submitted}\n{attempts:#?}", db.name());

    // Each webhook carried its own attempt's span, so the receiver's work joins the trace.
    let seen = hooks.wait(2).await;
    for (tp, a) in seen.iter().zip(&attempts) {
        assert_eq!(tp, &format!("00-{TRACE}-{}-01", a["span_id"].as_str().unwrap()), "{seen:?}");
    }

    // Without a traceparent, a submit starts a trace of its own, and its attempt joins it.
    submit(&server, &key, &hooks.url(), "traced-2", None).await;
    let seen = hooks.wait(3).await;
    let own = herald_core::TraceParent::parse(&seen[2]).expect("a traceparent on the webhook");
    let trace = own.trace_hex();
    assert_ne!(trace, TRACE);
    let submitted = only(&collector.wait(&trace, "submit", 1).await, "submit");
    let attempt = only(&collector.wait(&trace, "attempt", 1).await, "attempt");
    assert_eq!(attempt["parent_span_id"], submitted["span_id"], "{attempt}");

    // The PHP package's HTTP client passes its caller's traceparent on the same way.
    let Some(php) = php() else { return };
    let caller = format!("00-{PHP_TRACE}-{CALLER_SPAN}-01");
    let autoload = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/php/autoload.php");
    let script = "require $argv[1]; $r = (new Herald\\Http\\HttpClient($argv[2], $argv[3]))
        ->submit(operationKey: 'traced-php', channel: 'webhook', to: $argv[4], payload: [],
            traceparent: $argv[5]); echo $r->status->name;";
    let url = format!("http://{}", server.addr);
    let out = std::process::Command::new(php)
        .args(["-r", script, "--", &autoload.display().to_string(), &url, &key, &hooks.url()])
        .arg(&caller)
        .output()
        .expect("php runs");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "Created", "{out:?}");
    let request = only(&collector.wait(PHP_TRACE, "POST /v1/deliveries", 1).await, "request");
    assert_eq!(request["parent_span_id"], CALLER_SPAN, "{request}");
    let seen = hooks.wait(4).await;
    assert!(seen[3].starts_with(&format!("00-{PHP_TRACE}-")), "{seen:?}");
}

/// `php` for the PHP client's case, or a skip (a failure under CI, which installs it).
fn php() -> Option<&'static str> {
    let runs =
        std::process::Command::new("php").arg("-v").output().is_ok_and(|o| o.status.success());
    if !runs {
        assert!(std::env::var_os("CI").is_none(), "CI is set but php does not run");
        eprintln!("skipped the PHP client's case: no php");
        return None;
    }
    Some("php")
}

on_every_backend! {
    one_trace_from_the_submit_through_each_attempt => traced;
}

/// Off by default: nothing exported, no header on the webhook.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_are_off_by_default() {
    let Some(collector) = Collector::start() else { return };
    let cwd = tempfile::tempdir().expect("tempdir");
    let hooks = Hooks::start().await;
    let endpoint = collector.endpoint();
    // The standard variable names a collector, but HERALD_TRACES is not set.
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()), ("HERALD_BACKOFF_BASE", "50ms")];
    let mut server = Proc::serve("serve", cwd.path(), &[], &env).await;
    let (_, key, _) = tenant_with_quota(&server, "untraced", 5).await;
    let caller = format!("00-{TRACE}-{CALLER_SPAN}-01");
    submit(&server, &key, &hooks.url(), "untraced-1", Some(&caller)).await;
    let seen = hooks.wait(2).await;
    assert_eq!(seen, ["", ""], "no traceparent on a webhook when traces are off");
    // Stopped, herald would have flushed every span it had batched; the receiver, read to
    // its end, holds all it ever got.
    server.stop(Duration::from_secs(15)).await;
    assert_eq!(collector.finish(), Vec::<Value>::new(), "spans exported while off");
}

/// A bad setting is one clear line and exit 1, before anything starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_traces_setting_is_refused() {
    let cwd = tempfile::tempdir().expect("tempdir");
    for (env, expected) in [
        (("HERALD_TRACES", "jaeger"), "HERALD_TRACES: \"jaeger\" is not off or otlp"),
        (("HERALD_OTLP_ENDPOINT", "localhost:4318"), "HERALD_OTLP_ENDPOINT"),
    ] {
        let mut cmd = herald_command(cwd.path());
        cmd.args(["serve", "--listen", "127.0.0.1:0"]).env(env.0, env.1);
        if env.0 != "HERALD_TRACES" {
            cmd.env("HERALD_TRACES", "otlp");
        }
        let (ok, out) = run(cmd, Duration::from_secs(20)).await;
        assert!(!ok, "{env:?} was accepted: {out}");
        assert!(out.contains(expected), "{env:?}: {out}");
        assert_eq!(out.trim().lines().count(), 1, "{env:?}: one line: {out}");
    }
}
