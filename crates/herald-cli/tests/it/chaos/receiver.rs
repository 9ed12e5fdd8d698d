//! Receiver faults: a webhook receiver written by hand on raw TCP that, by each
//! delivery's number, answers slower than the send timeout, storms 5xx, asks for a pause
//! with 429 and Retry-After, resets the connection after reading the body, or reads the
//! body and never answers — each on the first attempts only, then 200. Every delivery
//! must end `sent`, with exactly as many attempts as requests reached the receiver (no
//! send herald did not count, none it counted that did not happen), the pause asked for
//! kept, and the ledger exact.

use super::*;
use tokio::time::Instant as TokioInstant;

/// Deliveries per fault kind (six kinds: five faults and a healthy receiver).
fn per_kind() -> usize {
    if long() { 60 } else { 12 }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Answers 200 after longer than the send timeout (2 s in FAST), then at once.
    Slow,
    /// 503, 500, 502, then 200.
    Storm,
    /// 429 with `Retry-After: 2`, then 200.
    TooMany,
    /// Reads the request, then resets the connection (RST), then 200.
    Reset,
    /// Reads the request and never answers (until herald gives up), then 200.
    Silent,
    /// 200 at once.
    Healthy,
}

const KINDS: [Kind; 6] =
    [Kind::Slow, Kind::Storm, Kind::TooMany, Kind::Reset, Kind::Silent, Kind::Healthy];
/// The Retry-After the 429 asks for, in seconds.
const PAUSE_S: u64 = 2;
/// Longer than FAST's send timeout (2 s).
const SLOW: Duration = Duration::from_millis(3_000);

impl Kind {
    fn of(n: usize) -> Kind {
        KINDS[n % KINDS.len()]
    }

    /// Requests the receiver gets before it answers 200: herald's attempts.
    fn attempts(self) -> usize {
        match self {
            Kind::Storm => 4,
            Kind::Healthy => 1,
            _ => 2,
        }
    }
}

/// One request: its webhook-id, its delivery's number, when it arrived.
#[derive(Debug, Clone)]
struct Arrival {
    webhook_id: String,
    n: usize,
    at: TokioInstant,
    signed: bool,
}

#[derive(Default)]
struct Hostile {
    arrivals: Mutex<Vec<Arrival>>,
}

impl Hostile {
    async fn start() -> (SocketAddr, Arc<Hostile>, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the receiver");
        let addr = listener.local_addr().expect("receiver address");
        let state = Arc::new(Hostile::default());
        let task = tokio::spawn({
            let state = state.clone();
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    tokio::spawn(state.clone().serve(stream));
                }
            }
        });
        (addr, state, task)
    }

    /// One connection: requests until the peer closes or a fault ends it.
    async fn serve(self: Arc<Self>, mut stream: TcpStream) {
        let mut buf = Vec::new();
        loop {
            let Some((head, body)) = read_request(&mut stream, &mut buf).await else { return };
            let header = |name: &str| {
                head.lines().skip(1).find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_string())
                })
            };
            let n = serde_json::from_slice::<Value>(&body).ok().and_then(|v| v["n"].as_u64());
            let n = n.unwrap_or(u64::MAX) as usize;
            let arrival = Arrival {
                webhook_id: header("webhook-id").unwrap_or_default(),
                n,
                at: TokioInstant::now(),
                signed: header("webhook-signature").is_some_and(|s| s.starts_with("v1,")),
            };
            let nth = {
                let mut arrivals = self.arrivals.lock().unwrap();
                let nth = arrivals.iter().filter(|a| a.webhook_id == arrival.webhook_id).count();
                arrivals.push(arrival);
                nth
            };
            let kind = Kind::of(n);
            let answer = |status: &str, extra: &str| {
                format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n{extra}\r\n")
            };
            let reply = match (kind, nth) {
                (Kind::Slow, 0) => {
                    tokio::time::sleep(SLOW).await;
                    answer("200 OK", "")
                }
                (Kind::Storm, 0) => answer("503 Service Unavailable", ""),
                (Kind::Storm, 1) => answer("500 Internal Server Error", ""),
                (Kind::Storm, 2) => answer("502 Bad Gateway", ""),
                (Kind::TooMany, 0) => {
                    answer("429 Too Many Requests", &format!("retry-after: {PAUSE_S}\r\n"))
                }
                (Kind::Reset, 0) => {
                    // SO_LINGER 0: the close is an RST, as from a crashed proxy.
                    let _ = stream.set_zero_linger();
                    return;
                }
                (Kind::Silent, 0) => {
                    // Holds the connection open without a byte until herald hangs up.
                    let mut sink = [0u8; 1024];
                    while matches!(stream.read(&mut sink).await, Ok(k) if k > 0) {}
                    return;
                }
                _ => answer("200 OK", ""),
            };
            if stream.write_all(reply.as_bytes()).await.is_err() {
                return;
            }
        }
    }
}

/// Reads one HTTP/1.1 request with a content-length body; `None` at EOF or on an error.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).into_owned();
            let length = head
                .lines()
                .skip(1)
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.trim()
                        .eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0usize);
            let start = end + 4;
            while buf.len() < start + length {
                let mut chunk = [0u8; 8192];
                match stream.read(&mut chunk).await {
                    Ok(0) | Err(_) => return None,
                    Ok(k) => buf.extend_from_slice(&chunk[..k]),
                }
            }
            let body = buf[start..start + length].to_vec();
            buf.drain(..start + length);
            return Some((head, body));
        }
        let mut chunk = [0u8; 8192];
        match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(k) => buf.extend_from_slice(&chunk[..k]),
        }
    }
}

/// Every delivery reaches its final state within this: the slowest path is a send
/// timeout (2 s), a backoff (capped at 1 s), then the 429's pause, with margin; and the
/// slow and silent receivers hold 8 slots for 2-3 s per delivery of theirs.
fn settle_bound() -> Duration {
    Duration::from_secs(60 + per_kind() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn receiver_faults_on_sqlite_each_end_sent_with_every_attempt_counted() {
    receiver_faults(SharedDb::Sqlite(SqliteFile::create())).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn receiver_faults_on_postgres_each_end_sent_with_every_attempt_counted() {
    let Some(base) = postgres_url() else {
        eprintln!("skipped: {POSTGRES_ENV} is not set");
        return;
    };
    receiver_faults(SharedDb::Postgres(PgSchema::create(&base).await)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn receiver_faults_on_mariadb_each_end_sent_with_every_attempt_counted() {
    let Some(base) = mysql_url() else {
        eprintln!("skipped: {MYSQL_ENV} is not set");
        return;
    };
    receiver_faults(SharedDb::MySql(MyDatabase::create(&base).await)).await;
}

async fn receiver_faults(shared: SharedDb) {
    let n = per_kind() * KINDS.len();
    let (addr, hostile, task) = Hostile::start().await;
    let cwd = tempfile::tempdir().expect("tempdir");
    let env: Vec<(&str, &str)> =
        FAST.iter().copied().chain([("HERALD_BACKOFF_MAX", "1s")]).collect();
    let server = Proc::serve("serve", cwd.path(), &["--db", shared.url()], &env).await;
    let (_tenant, key, _secret) = tenant_with_quota(&server, "receiver-faults", n as i64).await;
    let started = Instant::now();
    let servers = Arc::new(Mutex::new(vec![server.addr]));
    let to = format!("http://{addr}/hooks/faults");
    let (accepted, statuses) = submit_all(servers, &key, &to, "rcv", n, 4).await;
    assert_eq!(accepted.len(), n, "one delivery per operation key");

    // Settled: every delivery final, a bounded number of reads, no sleeps.
    let by = Instant::now() + settle_bound();
    loop {
        let by_state = shared.states().await;
        if by_state.get("sent").copied() == Some(n as i64) && by_state.len() == 1 {
            break;
        }
        assert!(
            Instant::now() < by,
            "{}: not all sent within {:?}: {by_state:?}; stderr:\n{}",
            shared.name(),
            settle_bound(),
            server.stderr()
        );
        tokio::task::yield_now().await;
    }
    let settled_in = started.elapsed();
    task.abort();
    let arrivals = hostile.arrivals.lock().unwrap().clone();
    let log: Vec<Logged> = arrivals
        .iter()
        .map(|a| Logged { webhook_id: a.webhook_id.clone(), signed: a.signed, at: a.at.into_std() })
        .collect();
    let verdict = check(server.addr, &key, &accepted, &shared, &log).await;

    // Per delivery: the requests the receiver got are the attempts herald counted, and
    // a 429's pause was kept.
    let mut by_id: BTreeMap<&str, Vec<&Arrival>> = BTreeMap::new();
    for a in &arrivals {
        by_id.entry(&a.webhook_id).or_default().push(a);
    }
    let mut paused = Vec::new();
    for (id, hits) in &by_id {
        let kind = Kind::of(hits[0].n);
        assert_eq!(hits.len(), kind.attempts(), "{id} ({kind:?}): requests {hits:?}");
        let reply =
            try_request(server.addr, "GET", &format!("/v1/deliveries/{id}"), Some(&key), None)
                .await
                .expect("GET a delivery");
        assert_eq!(reply.json()["attempts"], kind.attempts(), "{id} ({kind:?}): {}", reply.body);
        if kind == Kind::TooMany {
            let pause = hits[1].at - hits[0].at;
            assert!(pause >= Duration::from_secs(PAUSE_S), "{id}: retried after {pause:?}");
            paused.push(pause);
        }
    }
    eprintln!(
        "{} receiver faults: {n} deliveries ({} per kind), {} requests; lost {}, \
         duplicates {} (the faults' own), unexpected {}, over budget {}; 429 pauses {:?} to \
         {:?}; quota {:?}; HTTP {:?}; all sent in {settled_in:?}",
        shared.name(),
        per_kind(),
        arrivals.len(),
        verdict.lost.len(),
        verdict.duplicates,
        verdict.unexpected,
        verdict.over_budget,
        paused.iter().min(),
        paused.iter().max(),
        verdict.quota,
        statuses.by_status,
    );
    assert!(verdict.lost.is_empty(), "lost: {:?}", verdict.lost);
    assert_eq!(verdict.unexpected, 0, "requests for no accepted delivery, or unsigned");
    assert_eq!(verdict.over_budget, 0);
    let expected: usize = (0..n).map(|i| Kind::of(i).attempts() - 1).sum();
    assert_eq!(verdict.duplicates, expected, "one request per counted attempt");
    assert!(verdict.ledger_holds(), "the ledger: {verdict:?}");
    let n = n as i64;
    assert_eq!(verdict.quota, (n, 0, 0, n), "each delivery charged once, however often tried");
}
