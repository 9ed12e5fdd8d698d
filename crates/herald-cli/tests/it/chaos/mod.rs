//! The fault-injection suite's shared parts (issue 20): a load of webhook submits that
//! resends under an unknown outcome, a receiver that logs every request (and can answer
//! slowly), and the checker that reads herald's API, its journal and the receiver's log
//! at the end of a scenario and says what was lost, duplicated or unexpected (the
//! Jepsen triple), whether the ledger holds, and how long recovery took.
//!
//! Scenarios run at small size by default (`.ci/run`); `HERALD_FAULTS_LONG=1`
//! (`scripts/faults-long`) runs the long form.

use crate::support::*;
use std::sync::atomic::{AtomicUsize, Ordering};

mod cluster;
mod database;
mod disk_full;
mod kill_loop;
mod receiver;

/// The long form was asked for.
pub fn long() -> bool {
    std::env::var("HERALD_FAULTS_LONG").is_ok_and(|v| v == "1" || v == "true")
}

/// A client's pause before it resends a submit that had no answer or a 503 (the behaviour
/// under test is a client that resends with the same operation key).
const RESEND_PAUSE: Duration = Duration::from_millis(50);
/// One submit is tried at most this often.
const SUBMIT_TRIES_MAX: usize = 400;

/// What the clients saw.
#[derive(Debug, Default, Clone)]
pub struct Statuses {
    pub by_status: BTreeMap<u16, usize>,
    /// Requests with no answer (the process was killed, or refused the connection).
    pub unanswered: usize,
    /// 503s without a `Retry-After` header (retry guidance).
    pub unguided_503: usize,
    /// When each submit was accepted (201 or 200).
    pub accepted_at: Vec<Instant>,
}

/// Per fault (each instant in `faults`), how long until the first of `events` after it:
/// a submit accepted again, a send arriving again. `None` where nothing came after it
/// (the work had ended). Returns the worst and the median of those that came.
fn recovery(faults: &[Instant], events: &[Instant]) -> Option<(Duration, Duration)> {
    let mut events = events.to_vec();
    events.sort();
    let mut gaps: Vec<Duration> =
        faults.iter().filter_map(|f| events.iter().find(|e| *e >= f).map(|e| *e - *f)).collect();
    gaps.sort();
    Some((*gaps.last()?, gaps[gaps.len() / 2]))
}

/// Submits operation `prefix-i` for `i` in `0..n` from `clients` tasks, each request to
/// one of `servers` (read at each try: a killed server's slot is replaced), resending
/// on 503 and on no answer until it is accepted (201, or 200 for the duplicate of a try
/// whose answer was lost). Returns the accepted delivery ids, and what the clients saw.
pub async fn submit_all(
    servers: Arc<Mutex<Vec<SocketAddr>>>,
    key: &str,
    to: &str,
    prefix: &str,
    n: usize,
    clients: usize,
) -> (BTreeSet<String>, Statuses) {
    let statuses = Arc::new(Mutex::new(Statuses::default()));
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let (servers, statuses, next) = (servers.clone(), statuses.clone(), next.clone());
        let (key, to, prefix) = (key.to_string(), to.to_string(), prefix.to_string());
        tasks.spawn(async move {
            let mut ids = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    return Ok::<_, String>(ids);
                }
                let body = json!({
                    "operation_key": format!("{prefix}-{i:06}"),
                    "channel": "webhook",
                    "to": to,
                    "payload": {"n": i},
                });
                ids.push(submit_until_accepted(&servers, &key, &body, i, &statuses).await?);
            }
        });
    }
    let mut ids = BTreeSet::new();
    while let Some(joined) = tasks.join_next().await {
        match joined.expect("client task") {
            Ok(batch) => ids.extend(batch),
            Err(e) => panic!("{e}"),
        }
    }
    let statuses = statuses.lock().unwrap().clone();
    (ids, statuses)
}

async fn submit_until_accepted(
    servers: &Mutex<Vec<SocketAddr>>,
    key: &str,
    body: &Value,
    i: usize,
    statuses: &Mutex<Statuses>,
) -> Result<String, String> {
    for attempt in 0..SUBMIT_TRIES_MAX {
        let addr = {
            let servers = servers.lock().unwrap();
            servers[(i + attempt) % servers.len()]
        };
        let reply = try_request(addr, "POST", "/v1/deliveries", Some(key), Some(body)).await;
        {
            let mut s = statuses.lock().unwrap();
            match &reply {
                Ok(r) => {
                    *s.by_status.entry(r.status).or_default() += 1;
                    if r.status == 503 && r.retry_after.is_none() {
                        s.unguided_503 += 1;
                    }
                }
                Err(_) => s.unanswered += 1,
            }
        }
        match reply {
            Ok(r) if r.status == 200 || r.status == 201 => {
                statuses.lock().unwrap().accepted_at.push(Instant::now());
                return r.json()["id"]
                    .as_str()
                    .map(str::to_string)
                    .ok_or_else(|| format!("submit {i}: no id in {r:?}"));
            }
            Ok(r) if r.status == 503 => {}
            Ok(r) => return Err(format!("submit {i}: {r:?}")),
            Err(_) => {}
        }
        // The client's pause before resending (a fault schedule, not a wait for work).
        tokio::time::sleep(RESEND_PAUSE).await;
    }
    Err(format!("submit {i}: not accepted after {SUBMIT_TRIES_MAX} tries"))
}

// ---------------------------------------------------------------------------------------
// A logging receiver that can answer slowly

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Logged {
    pub webhook_id: String,
    pub signed: bool,
    pub at: Instant,
}

struct LogState {
    log: Mutex<Vec<Logged>>,
    seen: tokio::sync::watch::Sender<usize>,
    delay: Duration,
}

/// Answers 200 to every POST under `/hooks/`, `delay` after it arrived (so sends are in
/// flight when a process is killed), and logs each request's `webhook-id`.
pub struct LogReceiver {
    pub addr: SocketAddr,
    state: Arc<LogState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LogReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn log_hook(State(state): State<Arc<LogState>>, headers: HeaderMap) -> StatusCode {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_string);
    let logged = Logged {
        webhook_id: header("webhook-id").unwrap_or_default(),
        signed: header("webhook-signature").is_some_and(|s| s.starts_with("v1,")),
        at: Instant::now(),
    };
    let len = {
        let mut log = state.log.lock().unwrap();
        log.push(logged);
        log.len()
    };
    state.seen.send_replace(len);
    tokio::time::sleep(state.delay).await;
    StatusCode::OK
}

impl LogReceiver {
    pub async fn start(delay: Duration) -> LogReceiver {
        let (seen, _) = tokio::sync::watch::channel(0);
        let state = Arc::new(LogState { log: Mutex::new(Vec::new()), seen, delay });
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the receiver");
        let addr = listener.local_addr().expect("receiver address");
        let app = axum::Router::new()
            .route("/hooks/{name}", axum::routing::post(log_hook))
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        LogReceiver { addr, state, task }
    }

    pub fn url(&self, name: &str) -> String {
        format!("http://{}/hooks/{name}", self.addr)
    }

    pub fn log(&self) -> Vec<Logged> {
        self.state.log.lock().unwrap().clone()
    }

    /// How many distinct webhook-ids arrived so far.
    pub fn distinct(&self) -> usize {
        let log = self.state.log.lock().unwrap();
        log.iter().map(|l| l.webhook_id.as_str()).collect::<BTreeSet<_>>().len()
    }

    /// Waits until every id in `ids` was received at least once, at most until `by`;
    /// `false` if not.
    pub async fn until_all(&self, ids: &BTreeSet<String>, by: Instant) -> bool {
        let mut seen = self.state.seen.subscribe();
        let mut got = BTreeSet::new();
        let mut read = 0;
        loop {
            {
                let log = self.state.log.lock().unwrap();
                got.extend(log[read..].iter().map(|l| l.webhook_id.clone()));
                read = log.len();
            }
            if ids.is_subset(&got) {
                return true;
            }
            if tokio::time::timeout_at(by.into(), seen.changed()).await.is_err() {
                return false;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The checker

/// Reads of the delivery states while the recorders catch up with the receiver.
const STATE_READS_MAX: usize = 20_000;

/// Waits until all `n` deliveries are recorded `sent` (each request the receiver answered
/// is recorded right after): a bounded number of reads, each a round trip, no sleeps.
pub async fn until_all_sent(shared: &SharedDb, n: usize, what: &str) {
    let mut reads = 0;
    loop {
        reads += 1;
        let by_state = shared.states().await;
        if by_state.get("sent").copied() == Some(n as i64) && by_state.len() == 1 {
            return;
        }
        assert!(reads < STATE_READS_MAX, "{what}: not all recorded sent: {by_state:?}");
        tokio::task::yield_now().await;
    }
}

/// What a scenario ended with, as the checker read it.
#[derive(Debug)]
pub struct Verdict {
    /// Accepted deliveries that are not `sent` at the end, or missing from the API.
    pub lost: Vec<String>,
    /// Receiver requests beyond the first per delivery.
    pub duplicates: usize,
    /// Receiver requests whose webhook-id is no accepted delivery's, or unsigned.
    pub unexpected: usize,
    /// Deliveries that used more attempts than their budget.
    pub over_budget: usize,
    /// (granted, available, reserved, spent) through the API.
    pub quota: (i64, i64, i64, i64),
    /// The journal's sums by kind: (grant, reserve, commit, release).
    pub journal: (i64, i64, i64, i64),
}

impl Verdict {
    /// What every scenario asserts: `n` accepted, none lost, nothing unexpected, no
    /// delivery over its budget, at most `duplicates_max` duplicates, the ledger exact
    /// (each of the `n` charged once, one unit each), and the clients saw only 201, 200
    /// (a resent duplicate) or 503 with Retry-After.
    pub fn assert_clean(
        &self,
        what: &str,
        n: usize,
        accepted: usize,
        duplicates_max: usize,
        statuses: &Statuses,
    ) {
        assert_eq!(accepted, n, "{what}: one delivery per operation key");
        assert!(self.lost.is_empty(), "{what}: lost {:?}", self.lost);
        assert_eq!(self.unexpected, 0, "{what}: requests for no accepted delivery, or unsigned");
        assert_eq!(self.over_budget, 0, "{what}: a delivery over its attempt budget");
        assert!(
            self.duplicates <= duplicates_max,
            "{what}: {} duplicates, at most {duplicates_max} allowed (sends in flight at a fault)",
            self.duplicates
        );
        assert!(self.ledger_holds(), "{what}: the ledger: {self:?}");
        let n = n as i64;
        assert_eq!(self.quota, (n, 0, 0, n), "{what}: every delivery charged once");
        let unexpected_status = statuses.by_status.keys().any(|s| ![200, 201, 503].contains(s));
        assert!(!unexpected_status, "{what}: only 201, 200 or 503: {statuses:?}");
        assert_eq!(statuses.unguided_503, 0, "{what}: a 503 without Retry-After: {statuses:?}");
    }

    /// The checker's figures as one line: lost, duplicates against `duplicates_max`,
    /// unexpected, over budget, the ledger, what the clients saw, and after each fault
    /// (instants in `faults`) the worst and median time until a submit was accepted again
    /// and a send reached the receiver again (`log`).
    pub fn report(
        &self,
        duplicates_max: usize,
        statuses: &Statuses,
        faults: &[Instant],
        log: &[Logged],
    ) -> String {
        let sends: Vec<Instant> = log.iter().map(|l| l.at).collect();
        format!(
            "lost {}, duplicates {} (bound {duplicates_max}), unexpected {}, over budget {}; \
             quota {:?}, journal {:?}; HTTP {:?}, {} unanswered, {} 503 without Retry-After; \
             after each fault, (worst, median) until a submit was accepted {:?} and a send \
             arrived {:?}",
            self.lost.len(),
            self.duplicates,
            self.unexpected,
            self.over_budget,
            self.quota,
            self.journal,
            statuses.by_status,
            statuses.unanswered,
            statuses.unguided_503,
            recovery(faults, &statuses.accepted_at),
            recovery(faults, &sends),
        )
    }

    /// The ledger identity through the API, and the journal's sums equal to it.
    pub fn ledger_holds(&self) -> bool {
        let (granted, available, reserved, spent) = self.quota;
        let (grant, reserve, commit, release) = self.journal;
        granted == available + reserved + spent
            && grant == granted
            && commit == spent
            && reserve - commit - release == reserved
    }
}

/// Reads every delivery of the tenant through `GET /v1/deliveries`, the account through
/// `GET /v1/quotas`, the journal's sums from the database and the receiver's log.
pub async fn check(
    server: SocketAddr,
    key: &str,
    accepted: &BTreeSet<String>,
    db: &SharedDb,
    log: &[Logged],
) -> Verdict {
    let mut deliveries = BTreeMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            None => "/v1/deliveries?limit=200".to_string(),
            Some(c) => format!("/v1/deliveries?limit=200&cursor={c}"),
        };
        let page = try_request(server, "GET", &path, Some(key), None).await.expect("list");
        assert_eq!(page.status, 200, "GET {path}: {page:?}");
        let page = page.json();
        for d in page["deliveries"].as_array().expect("deliveries") {
            let id = d["id"].as_str().expect("id").to_string();
            deliveries.insert(id, d.clone());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    let lost: Vec<String> = accepted
        .iter()
        .filter(|id| deliveries.get(*id).is_none_or(|d| d["state"] != "sent"))
        .cloned()
        .collect();
    let over_budget =
        deliveries.values().filter(|d| d["attempts"].as_u64() > d["max_attempts"].as_u64()).count();
    let mut per_id: BTreeMap<&str, usize> = BTreeMap::new();
    let mut unexpected = 0;
    for l in log {
        if !l.signed || !accepted.contains(&l.webhook_id) {
            unexpected += 1;
        } else {
            *per_id.entry(&l.webhook_id).or_default() += 1;
        }
    }
    let duplicates = per_id.values().map(|n| n - 1).sum();

    let reply = try_request(server, "GET", "/v1/quotas", Some(key), None).await.expect("quotas");
    let quotas = reply.json();
    let account = quotas["quotas"]
        .as_array()
        .and_then(|qs| qs.iter().find(|q| q["quota_key"] == "webhook"))
        .cloned()
        .unwrap_or(Value::Null);
    let field = |k: &str| account[k].as_i64().unwrap_or(-1);
    let quota = (field("granted"), field("available"), field("reserved"), field("spent"));
    let sum = |kind: &'static str| async move {
        let sql = match db {
            SharedDb::Postgres(_) => {
                "SELECT coalesce(sum(amount), 0)::bigint FROM quota_journal WHERE kind = $1"
            }
            SharedDb::MySql(_) => {
                "SELECT CAST(coalesce(sum(amount), 0) AS SIGNED) FROM quota_journal WHERE kind = $1"
            }
            SharedDb::Sqlite(_) => {
                "SELECT coalesce(sum(amount), 0) FROM quota_journal WHERE kind = $1"
            }
        };
        db.count(sql, Some(kind)).await
    };
    let journal =
        (sum("grant").await, sum("reserve").await, sum("commit").await, sum("release").await);
    Verdict { lost, duplicates, unexpected, over_budget, quota, journal }
}
