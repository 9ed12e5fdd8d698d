//! The edges of the HTTP face over real TCP, against `serve::run` on a real listener:
//! deadlines for a request head, a body and a stalled answer, the size limits of a head
//! answered in JSON (also where hyper answers by itself), the connection cap, and a
//! shutdown that ends while a client holds a connection open mid-headers. The database
//! plays no part, so these run on SQLite only.

use crate::common;
use herald::{CancellationToken, Herald};
use herald_server::listen::HttpOptions;
use herald_server::serve::{ServeConfig, ServeError, run};
use serde_json::Value;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

/// Longest any answer or close may take here; far above every timeout the tests set.
const PATIENCE: Duration = Duration::from_secs(10);

/// A `herald serve` HTTP face on 127.0.0.1 with these HTTP options.
struct Server {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: JoinHandle<Result<(), ServeError>>,
    _dir: tempfile::TempDir,
}

async fn server(http: HttpOptions) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    let herald = Herald::open(&url).await.unwrap();
    let config = ServeConfig {
        listen: Some("127.0.0.1:0".parse().unwrap()),
        http,
        ..common::config(Some(common::ADMIN_KEY), None)
    };
    let shutdown = CancellationToken::new();
    let (ready, bound) = tokio::sync::oneshot::channel();
    let task = tokio::spawn(run(herald, config, shutdown.clone(), Some(ready)));
    let addr = tokio::time::timeout(PATIENCE, bound).await.unwrap().unwrap();
    Server { addr, shutdown, task, _dir: dir }
}

fn options(header_timeout: Duration) -> HttpOptions {
    HttpOptions { header_timeout, ..HttpOptions::default() }
}

/// One answer read off the wire: status, lower-case head and body.
#[derive(Debug)]
struct Answer {
    status: u16,
    head: String,
    body: Vec<u8>,
}

impl Answer {
    /// Asserts the status and the JSON error envelope with this code.
    fn expect_error(&self, status: u16, code: &str) {
        assert_eq!(self.status, status, "{self:?}");
        assert!(self.head.contains("content-type: application/json"), "{}", self.head);
        let v: Value = serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body))
        });
        assert_eq!(common::error_code("answer", &v), code, "{v}");
    }
}

/// Reads one answer (its head, then `content-length` bytes of body).
async fn answer(stream: &mut TcpStream) -> Answer {
    let mut buf = Vec::new();
    let read = async {
        loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length: "))
                    .map_or(0, |n| n.trim().parse::<usize>().unwrap());
                if buf.len() >= end + 4 + length {
                    let status = head[9..12].parse().unwrap();
                    let body = buf[end + 4..end + 4 + length].to_vec();
                    return Answer { status, head, body };
                }
            }
            let mut chunk = [0u8; 4096];
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the connection closed before a whole answer: {buf:?}");
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(PATIENCE, read).await.expect("no answer in time")
}

/// Waits for the server to close the connection (EOF or reset), ignoring what it sends.
async fn closed(stream: &mut TcpStream) {
    let wait = async {
        let mut chunk = [0u8; 4096];
        while let Ok(n) = stream.read(&mut chunk).await {
            if n == 0 {
                return;
            }
        }
    };
    tokio::time::timeout(PATIENCE, wait).await.expect("the connection stayed open");
}

async fn connect(addr: SocketAddr) -> TcpStream {
    TcpStream::connect(addr).await.unwrap()
}

async fn send(stream: &mut TcpStream, bytes: &[u8]) {
    stream.write_all(bytes).await.unwrap();
}

const HALF_A_HEAD: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: herald\r\nx-part";

#[tokio::test]
async fn a_client_that_stops_mid_headers_is_closed_within_the_header_timeout() {
    let timeout = Duration::from_millis(300);
    let s = server(options(timeout)).await;

    let mut stalled = connect(s.addr).await;
    let started = Instant::now();
    send(&mut stalled, HALF_A_HEAD).await;
    closed(&mut stalled).await;
    let waited = started.elapsed();
    assert!(waited >= timeout - Duration::from_millis(50), "closed too early: {waited:?}");

    // A kept-alive connection that sends no next request is closed the same way.
    let mut idle = connect(s.addr).await;
    send(&mut idle, b"GET /healthz HTTP/1.1\r\nhost: herald\r\n\r\n").await;
    assert_eq!(answer(&mut idle).await.status, 200);
    closed(&mut idle).await;

    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_uri_too_long_is_a_json_414_whoever_answers() {
    let s = server(HttpOptions::default()).await;
    // Over herald's limit: the router's layer answers. Over 64 KiB: hyper answers by
    // itself, and the answer is rewritten.
    for len in [herald_server::listen::URI_BYTES_MAX + 1, 64 * 1024 + 1] {
        let mut c = connect(s.addr).await;
        let path = format!("/healthz?{}", "a".repeat(len - "/healthz?".len()));
        send(&mut c, format!("GET {path} HTTP/1.1\r\nhost: herald\r\n\r\n").as_bytes()).await;
        answer(&mut c).await.expect_error(414, "uri_too_long");
    }
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn too_many_or_too_large_header_fields_and_malformed_heads_are_json() {
    let s = server(HttpOptions::default()).await;
    let head = |fields: usize, value_len: usize| {
        let mut h = String::from("GET /healthz HTTP/1.1\r\nhost: herald\r\n");
        for i in 1..fields {
            h.push_str(&format!("x-field-{i}: {}\r\n", "v".repeat(value_len)));
        }
        h.push_str("\r\n");
        h.into_bytes()
    };
    // 100 fields (with host) are fine, and the connection is kept for the next request.
    let mut c = connect(s.addr).await;
    send(&mut c, &head(herald_server::listen::HEADERS_MAX, 1)).await;
    assert_eq!(answer(&mut c).await.status, 200);
    // The 101st on the same connection: after an answer, not only on a fresh connection.
    send(&mut c, &head(herald_server::listen::HEADERS_MAX + 1, 1)).await;
    answer(&mut c).await.expect_error(431, "headers_too_large");
    closed(&mut c).await;

    let mut c = connect(s.addr).await;
    send(&mut c, &head(40, 4096)).await;
    answer(&mut c).await.expect_error(431, "headers_too_large");

    for malformed in
        [&b"GET /healthz HTTP/1.1\r\nno colon here\r\n\r\n"[..], b"\x01\x02 / HTTP/1.1\r\n\r\n"]
    {
        let mut c = connect(s.addr).await;
        send(&mut c, malformed).await;
        answer(&mut c).await.expect_error(400, "invalid_request");
    }
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_body_that_stops_arriving_is_a_json_408() {
    let s =
        server(HttpOptions { body_timeout: Duration::from_millis(300), ..HttpOptions::default() })
            .await;
    let mut c = connect(s.addr).await;
    let head = format!(
        "POST /v1/tenants HTTP/1.1\r\nhost: herald\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: 100\r\n\r\n{{\"name\":",
        common::ADMIN_KEY
    );
    send(&mut c, head.as_bytes()).await;
    answer(&mut c).await.expect_error(408, "request_timeout");
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_client_that_reads_no_answers_is_closed_after_the_write_stall_timeout() {
    const REQUESTS: usize = 10_000;
    let stall = Duration::from_millis(300);
    let s = server(HttpOptions { write_stall_timeout: stall, ..HttpOptions::default() }).await;
    let mut one = connect(s.addr).await;
    send(&mut one, b"GET /openapi.json HTTP/1.1\r\nhost: herald\r\n\r\n").await;
    let answer_bytes = {
        let a = answer(&mut one).await;
        a.head.len() + 4 + a.body.len()
    };
    // Far more answers than the socket buffers of both ends hold.
    assert!(REQUESTS * answer_bytes > 64 << 20, "answers of {answer_bytes} bytes are too small");
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut greedy = socket.connect(s.addr).await.unwrap();
    let requests = b"GET /openapi.json HTTP/1.1\r\nhost: herald\r\n\r\n".repeat(REQUESTS);
    // The requests fit in the buffers; the answers do not. Then the client reads nothing
    // for several stall timeouts: that is the behaviour under test, not a wait for work.
    send(&mut greedy, &requests).await;
    tokio::time::sleep(stall * 5).await;
    let mut received = 0usize;
    let drain = async {
        let mut chunk = vec![0u8; 1 << 16];
        loop {
            match greedy.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received += n,
            }
        }
    };
    tokio::time::timeout(PATIENCE, drain).await.expect("the stalled connection stayed open");
    assert!(
        received < REQUESTS * answer_bytes / 2,
        "{received} bytes: the answers kept coming to a client that read nothing"
    );
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn with_the_connection_limit_reached_the_next_waits_until_one_closes() {
    const LIMIT: usize = 2;
    let s = server(HttpOptions {
        connections_max: LIMIT,
        // The last held connection stays mid-headers; shutdown drops it after this.
        shutdown_grace: Duration::from_millis(100),
        ..options(Duration::from_secs(60))
    })
    .await;
    let mut held = Vec::new();
    for _ in 0..LIMIT {
        let mut c = connect(s.addr).await;
        send(&mut c, HALF_A_HEAD).await;
        held.push(c);
    }
    // Proof that both are accepted and served (not just in the backlog): a whole request
    // on a third connection is answered only after one of them closes. The kernel
    // completes the third's handshake, but herald does not accept it while full.
    let mut next = connect(s.addr).await;
    send(&mut next, b"GET /healthz HTTP/1.1\r\nhost: herald\r\n\r\n").await;
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(500), next.read(&mut byte)).await;
    assert!(early.is_err(), "the connection over the limit was answered: {early:?}");
    drop(held.pop());
    assert_eq!(answer(&mut next).await.status, 200);
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn at_the_connection_limit_idle_connections_give_their_places_up() {
    const LIMIT: usize = 2;
    const GET: &[u8] = b"GET /healthz HTTP/1.1\r\nhost: herald\r\n\r\n";
    let s =
        server(HttpOptions { connections_max: LIMIT, ..options(Duration::from_secs(60)) }).await;
    // One place held by a connection kept alive after its answer (a client's idle pool),
    // the other by a client sending its first request.
    let mut idle = connect(s.addr).await;
    send(&mut idle, GET).await;
    assert_eq!(answer(&mut idle).await.status, 200);
    let mut sending = connect(s.addr).await;
    send(&mut sending, HALF_A_HEAD).await;
    // A third is answered now, not after the 60 s header timeout: the idle one gave its
    // place up (after IDLE_GIVE_UP); the one mid-request kept its own.
    let started = Instant::now();
    let mut next = connect(s.addr).await;
    send(&mut next, GET).await;
    let answered = answer(&mut next).await;
    assert_eq!(answered.status, 200);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    closed(&mut idle).await;
    // While the limit holds, an answer says the connection closes after it, and it does.
    assert!(answered.head.contains("connection: close"), "{}", answered.head);
    closed(&mut next).await;
    send(&mut sending, b": 1\r\n\r\n").await;
    assert_eq!(answer(&mut sending).await.status, 200);
    s.shutdown.cancel();
    s.task.await.unwrap().unwrap();
}

#[tokio::test]
async fn shutdown_finishes_answers_in_progress_and_ends_despite_a_client_mid_headers() {
    let grace = Duration::from_millis(500);
    let s = server(HttpOptions { shutdown_grace: grace, ..options(Duration::from_secs(60)) }).await;
    let mut stalled = connect(s.addr).await;
    send(&mut stalled, HALF_A_HEAD).await;
    // A request in progress: its head is in, its body is not.
    let mut in_progress = connect(s.addr).await;
    let body = br#"{"name":"acme"}"#;
    let head = format!(
        "POST /v1/tenants HTTP/1.1\r\nhost: herald\r\nauthorization: Bearer {}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n",
        common::ADMIN_KEY,
        body.len()
    );
    send(&mut in_progress, head.as_bytes()).await;
    // Both connections are being served before the shutdown starts.
    let mut probe = connect(s.addr).await;
    send(&mut probe, b"GET /healthz HTTP/1.1\r\nhost: herald\r\nconnection: close\r\n\r\n").await;
    assert_eq!(answer(&mut probe).await.status, 200);

    let started = Instant::now();
    s.shutdown.cancel();
    send(&mut in_progress, body).await;
    let created = answer(&mut in_progress).await;
    assert_eq!(created.status, 201, "{created:?}");
    closed(&mut in_progress).await;
    tokio::time::timeout(PATIENCE, s.task).await.expect("run did not end").unwrap().unwrap();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "shutdown took {took:?}");
    closed(&mut stalled).await;
    // Nothing listens any more.
    assert!(TcpStream::connect(s.addr).await.is_err(), "still accepting after shutdown");
}
