//! What the tests of `herald` as a real process share: child processes (`herald serve` and
//! one-shot commands), HTTP/1.1 by hand, a real webhook receiver that records every
//! request, a fresh database per test (`db.rs`: a PostgreSQL schema or a MariaDB
//! database), and for the documentation tests a
//! `herald serve` on a fresh SQLite file and the Python interpreter with the tests' PyPI
//! packages.
//!
//! Nothing here sleeps to wait for work: waits are on signals (a child's stderr line, the
//! receiver's channel of `webhook-id`s), each under a `tokio::time::timeout`. Every child
//! is SIGKILLed when its guard drops, so a failing test leaves none behind.

#![allow(dead_code, unused_imports, unreachable_pub)]

mod db;
pub use db::*;

pub use axum::body::Bytes;
pub use axum::extract::State;
pub use axum::http::{HeaderMap, StatusCode};
pub use herald::sqlx::{self, Connection, PgConnection};
pub use serde_json::{Value, json};
pub use std::collections::{BTreeMap, BTreeSet, HashMap};
pub use std::net::SocketAddr;
pub use std::path::{Path, PathBuf};
pub use std::process::{ExitStatus, Stdio};
pub use std::sync::{Arc, Mutex};
pub use std::time::{Duration, Instant};
pub use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
pub use tokio::net::{TcpListener, TcpStream};
pub use tokio::process::{Child, Command};
pub use tokio::sync::{mpsc, watch};

pub const BIN: &str = env!("CARGO_BIN_EXE_herald");
pub const POSTGRES_ENV: &str = "HERALD_TEST_POSTGRES_URL";
pub const MYSQL_ENV: &str = "HERALD_TEST_MYSQL_URL";
pub const ADMIN_KEY: &str = "test-admin-key-3b1f0c9e-7d5a21c48f60b39e2d71a4c8";
/// Short timings, so a SIGKILLed process's leases expire within seconds. No circuits:
/// the suites on these settings fault the database, the network and the processes
/// against receivers that fail on purpose, and count on every retry going out soon; a
/// lane's circuit (30 s before its first probe) has its own test, `circuits.rs`.
pub const FAST: [(&str, &str); 7] = [
    ("HERALD_LEASE", "8s"),
    ("HERALD_SEND_TIMEOUT", "2s"),
    ("HERALD_RECONCILE_EVERY", "1s"),
    ("HERALD_POLL_INTERVAL", "200ms"),
    ("HERALD_BACKOFF_BASE", "100ms"),
    ("HERALD_WORKERS", "8"),
    ("HERALD_CIRCUIT_FAILURES", "1000"),
];
/// `HERALD_WORKERS` above: the most sends a SIGKILL can interrupt in one process.
pub const SLOTS: usize = 8;
/// Start-up includes migrating a fresh database.
pub const STARTUP: Duration = Duration::from_secs(30);
/// One HTTP exchange with a server.
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(15);
/// A delivery submitted to a running server reaches the receiver within this.
pub const DELIVERY_BOUND: Duration = Duration::from_secs(20);

// ---------------------------------------------------------------------------------------
// Child processes

/// A running `herald serve`. Dropping it SIGKILLs the process (also when a test fails).
pub struct Proc {
    pub name: String,
    pub child: Child,
    pub addr: SocketAddr,
    pub stderr: Arc<Mutex<String>>,
    pub lines: mpsc::UnboundedReceiver<String>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// A `herald` command with none of the test runner's `HERALD_*` or `RUST_LOG` settings.
pub fn herald_command(cwd: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(cwd).stdin(Stdio::null()).kill_on_drop(true);
    for (key, _) in std::env::vars_os() {
        let k = key.to_string_lossy();
        if k.starts_with("HERALD_") || k == "RUST_LOG" {
            cmd.env_remove(&key);
        }
    }
    cmd
}

impl Proc {
    /// Starts `herald serve --listen 127.0.0.1:0 ARGS` in `cwd` with the admin key,
    /// private targets allowed and `env`, and waits for its "listening" line.
    pub async fn serve(name: &str, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Proc {
        let mut cmd = herald_command(cwd);
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("HERALD_ADMIN_KEY", ADMIN_KEY)
            .env("HERALD_ALLOW_PRIVATE_TARGETS", "true")
            .envs(env.iter().copied());
        Proc::spawn(name, cmd).await
    }

    /// Starts `cmd` (a `herald serve --listen 127.0.0.1:0 …`) with stdout discarded and
    /// stderr collected, and waits for its "listening" line.
    pub async fn spawn(name: &str, mut cmd: Command) -> Proc {
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{name}: spawn {BIN}: {e}"));
        let pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, lines) = mpsc::unbounded_channel();
        let all = stderr.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(pipe).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                {
                    let mut all = all.lock().unwrap();
                    all.push_str(&line);
                    all.push('\n');
                }
                let _ = tx.send(line);
            }
        });
        let mut proc = Proc {
            name: name.to_string(),
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            stderr,
            lines,
        };
        proc.addr = proc
            .wait_line(STARTUP, "`herald listening on http://…`", |line| {
                line.strip_prefix("herald listening on http://")?.trim().parse().ok()
            })
            .await;
        proc
    }

    /// Everything the process wrote to stderr so far.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits for the first stderr line `pick` accepts.
    pub async fn wait_line<T>(
        &mut self,
        within: Duration,
        what: &str,
        mut pick: impl FnMut(&str) -> Option<T>,
    ) -> T {
        let lines = &mut self.lines;
        let found = tokio::time::timeout(within, async {
            while let Some(line) = lines.recv().await {
                if let Some(value) = pick(&line) {
                    return Some(value);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(value)) => value,
            Ok(None) => {
                panic!("{}: stderr closed before {what}; stderr:\n{}", self.name, self.stderr())
            }
            Err(_) => {
                panic!("{}: no {what} within {within:?}; stderr:\n{}", self.name, self.stderr())
            }
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or_else(|| panic!("{}: already exited", self.name))
    }

    /// SIGTERM, through kill(1).
    pub fn sigterm(&self) {
        let status = std::process::Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill -TERM");
        assert!(status.success(), "{}: kill -TERM failed: {status}", self.name);
    }

    /// Waits for the process to exit.
    pub async fn exit_within(&mut self, within: Duration) -> ExitStatus {
        match tokio::time::timeout(within, self.child.wait()).await {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => panic!("{}: wait: {e}", self.name),
            Err(_) => {
                panic!("{}: still running {within:?} later; stderr:\n{}", self.name, self.stderr())
            }
        }
    }

    /// SIGTERM, then asserts exit code 0 within `within`.
    pub async fn stop(&mut self, within: Duration) -> Duration {
        let started = Instant::now();
        self.sigterm();
        let status = self.exit_within(within).await;
        assert_eq!(
            status.code(),
            Some(0),
            "{}: SIGTERM should end it with exit code 0, got {status}; stderr:\n{}",
            self.name,
            self.stderr()
        );
        started.elapsed()
    }
}

/// What one run of a short-lived `herald` command produced.
#[derive(Debug)]
pub struct Run {
    pub args: Vec<String>,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `herald ARGS` to completion in `cwd`.
pub async fn herald(cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = herald_command(cwd);
    cmd.args(args).envs(env.iter().copied());
    let out = tokio::time::timeout(Duration::from_secs(60), cmd.output())
        .await
        .unwrap_or_else(|_| panic!("herald {args:?} ran for a minute"))
        .unwrap_or_else(|e| panic!("herald {args:?}: {e}"));
    Run {
        args: args.iter().map(|a| a.to_string()).collect(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Asserts exit 0 and parses stdout as JSON.
pub fn json_out(run: &Run) -> Value {
    let args = &run.args;
    assert_eq!(run.code, Some(0), "herald {args:?}: expected exit 0\n{run:#?}");
    serde_json::from_str(run.stdout.trim())
        .unwrap_or_else(|e| panic!("herald {args:?}: stdout is not JSON ({e})\n{run:#?}"))
}

/// The failure contract: a non-zero exit, and stderr is one line starting with `error:`.
/// Returns what is wrong, if anything.
pub fn error_line_problem(run: &Run) -> Option<String> {
    let lines: Vec<&str> = run.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    let problem = if !matches!(run.code, Some(c) if c != 0) {
        "expected a non-zero exit"
    } else if run.stderr.contains("panicked") {
        "panicked"
    } else if lines.len() != 1 {
        "expected exactly one stderr line"
    } else if !lines[0].starts_with("error:") {
        "the stderr line must start with `error:`"
    } else {
        return None;
    };
    Some(format!("herald {:?}: {problem}\n{run:#?}", run.args))
}

// ---------------------------------------------------------------------------------------
// The documentation tests: a server as a newcomer starts it, the tests' Python

/// A running `herald serve` in a fresh directory of its own, on `herald.db` there, with
/// only the admin key set (private targets stay refused). Dropping it SIGKILLs the process,
/// then removes the directory.
pub struct Server {
    pub addr: SocketAddr,
    // Before `dir`: fields drop in order, so the process is killed before its directory goes.
    proc: Proc,
    pub dir: tempfile::TempDir,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

impl Server {
    /// `herald serve --listen 127.0.0.1:0` with this admin key, on `herald.db` in a fresh
    /// directory, with none of the test runner's `HERALD_*` settings; waits for its
    /// "listening" line.
    pub async fn start(admin_key: &str) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cmd = herald_command(dir.path());
        cmd.args(["serve", "--listen", "127.0.0.1:0"]).env("HERALD_ADMIN_KEY", admin_key);
        let proc = Proc::spawn("herald serve", cmd).await;
        Server { addr: proc.addr, proc, dir }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        self.proc.stderr()
    }
}

/// The virtualenv python of `scripts/test-deps` (`HERALD_TEST_PYTHON`) if it has every
/// module in `modules`. Without it the test is skipped with a printed reason, unless `CI`
/// is set: then it fails.
pub fn python_with(modules: &[&str]) -> Option<PathBuf> {
    let skip = |why: String| {
        assert!(std::env::var_os("CI").is_none(), "CI is set but {why}");
        eprintln!("skipped: {why} (export HERALD_TEST_PYTHON=$(scripts/test-deps))");
        None
    };
    let python = match std::env::var("HERALD_TEST_PYTHON") {
        Ok(p) if !p.trim().is_empty() => PathBuf::from(p),
        _ => return skip("HERALD_TEST_PYTHON is not set".into()),
    };
    let imports = format!("import {}", modules.join(", "));
    let ok = std::process::Command::new(&python)
        .args(["-c", &imports])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return skip(format!("{} cannot `{imports}`", python.display()));
    }
    Some(python)
}

/// The directory of the virtualenv's scripts (`schemathesis`, `ruff`, …).
pub fn bin_dir(python: &Path) -> PathBuf {
    python.parent().expect("python lives in a bin directory").to_path_buf()
}

/// Runs a command to its end within `bound`; returns (success, stdout + stderr).
pub async fn run(mut cmd: Command, bound: Duration) -> (bool, String) {
    cmd.stdin(Stdio::null()).kill_on_drop(true);
    let out = tokio::time::timeout(bound, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{cmd:?} did not finish within {bound:?}"))
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

// ---------------------------------------------------------------------------------------
// HTTP/1.1 by hand (one connection per request, `connection: close`)

#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: String,
    /// The `Retry-After` header, if any.
    pub retry_after: Option<String>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

pub async fn try_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<&Value>,
) -> Result<Reply, String> {
    let body = body.map(Value::to_string);
    try_request_text(addr, method, path, bearer, body.as_deref()).await
}

/// [`try_request`] with the body's JSON text exactly as given.
pub async fn try_request_text(
    addr: SocketAddr,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<&str>,
) -> Result<Reply, String> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
        let body = body.unwrap_or_default();
        let mut request =
            format!("{method} {path} HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n");
        if let Some(key) = bearer {
            request.push_str(&format!("authorization: Bearer {key}\r\n"));
        }
        if !body.is_empty() {
            request.push_str("content-type: application/json\r\n");
        }
        request.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
        stream.write_all(request.as_bytes()).await.map_err(|e| format!("write: {e}"))?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.map_err(|e| format!("read: {e}"))?;
        parse_reply(&raw)
    };
    tokio::time::timeout(HTTP_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("no answer within {HTTP_TIMEOUT:?}"))?
}

pub fn parse_reply(raw: &[u8]) -> Result<Reply, String> {
    let text = String::from_utf8_lossy(raw);
    let (head, body) =
        text.split_once("\r\n\r\n").ok_or_else(|| format!("incomplete answer: {text:?}"))?;
    let status = head
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status line in {head:?}"))?;
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_ascii_lowercase())
        })
    };
    let body = if header("transfer-encoding").is_some_and(|v| v.contains("chunked")) {
        dechunk(body)?
    } else {
        if let Some(length) = header("content-length").and_then(|v| v.parse::<usize>().ok())
            && body.len() != length
        {
            return Err(format!("truncated answer ({} of {length} bytes)", body.len()));
        }
        body.to_string()
    };
    Ok(Reply { status, body, retry_after: header("retry-after") })
}

pub fn dechunk(mut rest: &str) -> Result<String, String> {
    let mut out = String::new();
    loop {
        let (size, after) = rest.split_once("\r\n").ok_or("truncated chunk size")?;
        let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|_| format!("bad chunk size {size:?}"))?;
        if size == 0 {
            return Ok(out);
        }
        let chunk = after.get(..size).ok_or("truncated chunk")?;
        out.push_str(chunk);
        rest = after.get(size..).and_then(|r| r.strip_prefix("\r\n")).ok_or("bad chunk end")?;
    }
}

/// One request that must get an answer; panics with the server's stderr otherwise.
pub async fn call(
    server: &Proc,
    method: &str,
    path: &str,
    bearer: Option<&str>,
    body: Option<&Value>,
) -> Reply {
    try_request(server.addr, method, path, bearer, body).await.unwrap_or_else(|e| {
        panic!("{}: {method} {path}: {e}; stderr:\n{}", server.name, server.stderr())
    })
}

/// [`call`] with the body's JSON text exactly as given (serde_json would round numbers).
pub async fn call_text(server: &Proc, method: &str, path: &str, bearer: &str, body: &str) -> Reply {
    try_request_text(server.addr, method, path, Some(bearer), Some(body)).await.unwrap_or_else(
        |e| panic!("{}: {method} {path}: {e}; stderr:\n{}", server.name, server.stderr()),
    )
}

/// Asserts the status and returns the JSON body; the failure shows what the server said.
pub fn expect_status(reply: &Reply, status: u16, what: &str) -> Value {
    assert_eq!(reply.status, status, "{what}: the server answered {reply:#?}");
    let json = reply.json();
    assert!(!json.is_null(), "{what}: the answer is not JSON: {reply:#?}");
    json
}

// ---------------------------------------------------------------------------------------
// The webhook receiver: a real HTTP server that records every request

#[derive(Debug, Clone)]
pub struct Hit {
    pub id: String,
    pub timestamp: Option<String>,
    pub signature: Option<String>,
    pub body: String,
}

pub struct ReceiverState {
    pub tx: mpsc::UnboundedSender<Hit>,
    pub all: Mutex<Vec<Hit>>,
    pub released: watch::Receiver<bool>,
}

/// Answers 200 to every POST under `/hooks/`; when held, only once released.
pub struct Receiver {
    pub addr: SocketAddr,
    pub hits: mpsc::UnboundedReceiver<Hit>,
    pub state: Arc<ReceiverState>,
    pub release: watch::Sender<bool>,
    pub task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.release.send(true);
        self.task.abort();
    }
}

pub async fn hook(
    State(state): State<Arc<ReceiverState>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let hit = Hit {
        id: header("webhook-id").unwrap_or_default(),
        timestamp: header("webhook-timestamp"),
        signature: header("webhook-signature"),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    state.all.lock().unwrap().push(hit.clone());
    let _ = state.tx.send(hit);
    let mut released = state.released.clone();
    let _ = released.wait_for(|r| *r).await;
    StatusCode::OK
}

impl Receiver {
    pub async fn start(hold: bool) -> Receiver {
        let (release, released) = watch::channel(!hold);
        let (tx, hits) = mpsc::unbounded_channel();
        let state = Arc::new(ReceiverState { tx, all: Mutex::new(Vec::new()), released });
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the receiver");
        let addr = listener.local_addr().expect("receiver address");
        let app = axum::Router::new()
            .route("/hooks/{name}", axum::routing::post(hook))
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { addr, hits, state, release, task }
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://{}/hooks/{name}", self.addr)
    }

    /// The next request, or a panic naming `server`'s stderr.
    pub async fn next(&mut self, within: Duration, server: &Proc) -> Hit {
        match tokio::time::timeout(within, self.hits.recv()).await {
            Ok(Some(hit)) => hit,
            Ok(None) => panic!("the receiver stopped"),
            Err(_) => panic!(
                "no webhook within {within:?}; {}'s stderr:\n{}",
                server.name,
                server.stderr()
            ),
        }
    }

    /// Every request received so far.
    pub fn all(&self) -> Vec<Hit> {
        self.state.all.lock().unwrap().clone()
    }

    /// Lets held requests (and all later ones) answer.
    pub fn release(&self) {
        self.release.send(true).expect("release the receiver");
    }
}

// ---------------------------------------------------------------------------------------
// Shared steps

/// Creates a tenant through the admin API and grants it `amount` webhook units.
/// Returns (tenant id, API key, webhook secret).
pub async fn tenant_with_quota(server: &Proc, name: &str, amount: i64) -> (String, String, String) {
    let reply =
        call(server, "POST", "/v1/tenants", Some(ADMIN_KEY), Some(&json!({"name": name}))).await;
    let tenant = expect_status(&reply, 201, "POST /v1/tenants");
    let field = |k: &str| {
        tenant[k]
            .as_str()
            .unwrap_or_else(|| panic!("POST /v1/tenants: no {k} in {tenant}"))
            .to_string()
    };
    let (id, key, secret) = (field("id"), field("api_key"), field("webhook_secret"));
    assert_eq!(tenant["name"], name, "POST /v1/tenants: {tenant}");
    assert!(secret.starts_with("whsec_"), "POST /v1/tenants: webhook_secret {secret:?}");
    let path = format!("/v1/tenants/{id}/quotas/webhook/grant");
    let reply =
        call(server, "POST", &path, Some(ADMIN_KEY), Some(&json!({"amount": amount}))).await;
    let granted = expect_status(&reply, 200, &format!("POST {path}"));
    assert_eq!(granted["applied"], true, "POST {path}: {granted}");
    assert_eq!(granted["granted"], amount, "POST {path}: {granted}");
    assert_eq!(granted["available"], amount, "POST {path}: {granted}");
    (id, key, secret)
}

/// The tenant's `webhook` account through `GET /v1/quotas`.
pub async fn webhook_quota(server: &Proc, key: &str) -> Value {
    let reply = call(server, "GET", "/v1/quotas", Some(key), None).await;
    let quotas = expect_status(&reply, 200, "GET /v1/quotas");
    quotas["quotas"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["quota_key"] == "webhook"))
        .cloned()
        .unwrap_or_else(|| panic!("GET /v1/quotas: no webhook account in {quotas}"))
}

// ---------------------------------------------------------------------------------------
// One test body on every backend

/// `name => body;` generates `mod sqlite`, `mod postgres` and `mod mariadb`, each with a
/// test `name` that runs `body(SharedDb)` on a fresh database of its backend (PostgreSQL
/// and MariaDB skip when their URL is unset, and fail when CI is set without it).
macro_rules! on_every_backend {
    ($($name:ident => $body:ident;)+) => {
        mod sqlite {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    $body(SharedDb::Sqlite(SqliteFile::create())).await;
                }
            )+
        }
        mod postgres {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(base) = postgres_url() else {
                        return eprintln!("skipped: {POSTGRES_ENV} is not set");
                    };
                    $body(SharedDb::Postgres(PgSchema::create(&base).await)).await;
                }
            )+
        }
        mod mariadb {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(base) = mysql_url() else {
                        return eprintln!("skipped: {MYSQL_ENV} is not set");
                    };
                    $body(SharedDb::MySql(MyDatabase::create(&base).await)).await;
                }
            )+
        }
    };
}
pub(crate) use on_every_backend;
