//! End-to-end tests of `herald serve` as real processes: the newcomer's HTTP path on the
//! default SQLite file, two servers on one PostgreSQL with one of them SIGKILLed mid-run,
//! a graceful SIGTERM with a send in flight, admission control answering 503 `busy` early,
//! and the operator CLI.
//!
//! Nothing here sleeps to wait for work: the tests wait on signals (a child's stderr line,
//! the webhook receiver's channel of `webhook-id`s), each under a `tokio::time::timeout`.
//! Every child is SIGKILLed when its guard drops, so a failing test leaves none behind.

use crate::support::*;
// ---------------------------------------------------------------------------------------
// 1. The newcomer's path on the default SQLite file

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn newcomer_path_on_the_default_sqlite_file() {
    let started = Instant::now();
    let cwd = tempfile::tempdir().expect("tempdir");
    let mut receiver = Receiver::start(false).await;
    let mut server = Proc::serve("serve", cwd.path(), &[], &FAST).await;
    assert!(
        cwd.path().join("herald.db").exists(),
        "`herald serve` without --db should create herald.db in its working directory"
    );

    let (_tenant, key, _secret) = tenant_with_quota(&server, "acme", 10).await;

    let payload = json!({"order": 1001, "status": "shipped"});
    let submit = json!({
        "operation_key": "order-1001-shipped",
        "channel": "webhook",
        "to": receiver.url("orders"),
        "payload": payload,
    });
    let reply = call(&server, "POST", "/v1/deliveries", Some(&key), Some(&submit)).await;
    let created = expect_status(&reply, 201, "POST /v1/deliveries");
    assert_eq!(created["duplicate"], false, "POST /v1/deliveries: {created}");
    let id = created["id"].as_str().unwrap_or_else(|| panic!("no id in {created}")).to_string();

    let hit = receiver.next(DELIVERY_BOUND, &server).await;
    assert_eq!(hit.id, id, "webhook-id must be the delivery id: {hit:?}");
    let body: Value = serde_json::from_str(&hit.body).unwrap_or(Value::Null);
    assert_eq!(body, payload, "the webhook body must be the payload: {hit:?}");
    assert!(hit.signature.as_deref().is_some_and(|s| s.starts_with("v1,")), "{hit:?}");
    assert!(hit.timestamp.as_deref().is_some_and(|t| t.parse::<i64>().is_ok()), "{hit:?}");

    // The receiver has answered 200; the outcome is recorded right after. A bounded
    // number of GETs, no sleeps.
    const GETS_MAX: usize = 2000;
    let path = format!("/v1/deliveries/{id}");
    let mut gets = 0;
    let delivery = loop {
        gets += 1;
        let reply = call(&server, "GET", &path, Some(&key), None).await;
        let delivery = expect_status(&reply, 200, &format!("GET {path}"));
        if delivery["state"] == "sent" || gets == GETS_MAX {
            break delivery;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(
        delivery["state"],
        "sent",
        "GET {path}: still not sent after {gets} GETs: {delivery}; stderr:\n{}",
        server.stderr()
    );
    assert_eq!(delivery["attempts"], 1, "GET {path}: {delivery}");
    assert!(delivery["sent_at"].is_string(), "GET {path}: {delivery}");

    let attempts_path = format!("/v1/deliveries/{id}/attempts");
    let reply = call(&server, "GET", &attempts_path, Some(&key), None).await;
    let attempts = expect_status(&reply, 200, &format!("GET {attempts_path}"));
    assert_eq!(attempts["attempts"].as_array().map(Vec::len), Some(1), "{attempts}");
    assert_eq!(attempts["attempts"][0]["outcome"], "sent", "{attempts}");

    // The newcomer's retry of the same submit returns the same delivery.
    let reply = call(&server, "POST", "/v1/deliveries", Some(&key), Some(&submit)).await;
    let again = expect_status(&reply, 200, "POST /v1/deliveries (retry)");
    assert_eq!((&again["id"], &again["duplicate"]), (&created["id"], &json!(true)), "{again}");

    let quota = webhook_quota(&server, &key).await;
    assert_eq!(
        quota,
        json!({"quota_key": "webhook", "granted": 10, "available": 9, "reserved": 0, "spent": 1}),
        "GET /v1/quotas"
    );
    let stop = server.stop(Duration::from_secs(20)).await;
    assert_eq!(receiver.all().len(), 1, "one delivery, one request: {:?}", receiver.all());
    eprintln!(
        "newcomer path: sent after {gets} GET(s); SIGTERM to exit {stop:?}; total {:?}",
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------
// Admission control: with the database's writes held by another session, a submit
// arriving while the oldest queued one has waited half of HERALD_QUEUE_WAIT is answered
// 503 `busy` at once, a queued one when its wait runs out; nothing of either is written.

/// `name value` of an unlabelled series in a `/metrics` answer.
fn series(metrics: &str, name: &str) -> Option<f64> {
    metrics.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Polls `/metrics` until the group commit holds `running` submits in a transaction and
/// `waiting` in its queue.
async fn until_group(server: &Proc, running: f64, waiting: f64) {
    const POLLS_MAX: usize = 2000;
    for _ in 0..POLLS_MAX {
        let metrics = call(server, "GET", "/metrics", None, None).await.body;
        let now = (
            series(&metrics, "herald_submits_running"),
            series(&metrics, "herald_submits_waiting"),
        );
        if now == (Some(running), Some(waiting)) {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("never {running} running and {waiting} waiting; stderr:\n{}", server.stderr());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_server_answers_busy_early_and_writes_nothing() {
    const WAIT: Duration = Duration::from_millis(400);
    let cwd = tempfile::tempdir().expect("tempdir");
    let env: Vec<_> = FAST.iter().copied().chain([("HERALD_QUEUE_WAIT", "400ms")]).collect();
    let server = Proc::serve("serve", cwd.path(), &[], &env).await;
    let (_tenant, key, _secret) = tenant_with_quota(&server, "acme", 10).await;
    let submit = |n: &str| json!({"operation_key": n, "channel": "webhook", "to": "https://example.com/h", "payload": {}});
    let post = |n: &str| {
        let (addr, key, body) = (server.addr, key.clone(), submit(n));
        tokio::spawn(async move {
            try_request(addr, "POST", "/v1/deliveries", Some(&key), Some(&body)).await
        })
    };
    // The shared settings and the key cache are written and warmed by a first submit.
    expect_status(&post("first").await.unwrap().unwrap(), 201, "the first submit");

    let db = format!("sqlite://{}", cwd.path().join("herald.db").display());
    let mut holder = sqlx::SqliteConnection::connect(&db).await.expect("connect");
    sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut holder).await.expect("hold the writes");
    let running = post("running");
    until_group(&server, 1.0, 0.0).await;
    let (queued_at, queued) = (Instant::now(), post("queued"));
    until_group(&server, 1.0, 1.0).await;

    // The time passing is what is under test: no signal stands for it.
    tokio::time::sleep(WAIT / 2).await;
    let arrived = Instant::now();
    let refused = post("refused").await.unwrap().unwrap();
    let answered = arrived.elapsed();
    let body = expect_status(&refused, 503, "a submit while the queue is full");
    assert_eq!(body["error"]["code"], "busy", "{body}");
    assert_eq!(refused.retry_after.as_deref(), Some("1"), "{refused:?}");
    assert!(answered < WAIT / 2, "refused after {answered:?}");
    assert!(!queued.is_finished(), "the queued submit was answered first");

    let timed_out = queued.await.unwrap().unwrap();
    let body = expect_status(&timed_out, 503, "a submit queued past HERALD_QUEUE_WAIT");
    assert_eq!(body["error"]["code"], "busy", "{body}");
    assert!(queued_at.elapsed() >= WAIT, "answered after {:?}", queued_at.elapsed());
    let metrics = call(&server, "GET", "/metrics", None, None).await.body;
    assert!(metrics.contains(r#"herald_submits_total{result="busy"} 2"#), "{metrics}");

    // Writes let go: the running one commits, the refused ones left nothing behind.
    sqlx::raw_sql("ROLLBACK").execute(&mut holder).await.expect("let go");
    expect_status(&running.await.unwrap().unwrap(), 201, "the running submit");
    for n in ["queued", "refused"] {
        let again = expect_status(&post(n).await.unwrap().unwrap(), 201, n);
        assert_eq!(again["duplicate"], false, "{n}: {again}");
    }
}

// ---------------------------------------------------------------------------------------
// 2. Two servers on one PostgreSQL; one is SIGKILLed mid-run

const DELIVERIES: usize = 1000;
const KILL_AFTER: usize = 200;
const KILL_LATEST: usize = 400;
const SUBMIT_CONCURRENCY: usize = 32;

/// Submits delivery `i` to its server (alternating), or to the other one when that
/// server cannot answer (it may have been killed; the operation key makes the retry safe).
/// Returns (delivery id, whether it fell back).
async fn submit_one(
    servers: [SocketAddr; 2],
    key: &str,
    to: &str,
    i: usize,
) -> Result<(String, bool), String> {
    let body = json!({
        "operation_key": format!("op-{i:04}"),
        "channel": "webhook",
        "to": to,
        "payload": {"n": i},
    });
    let mut errors = Vec::new();
    for k in 0..2 {
        let addr = servers[(i + k) % 2];
        match try_request(addr, "POST", "/v1/deliveries", Some(key), Some(&body)).await {
            // A fallback may find the first attempt committed: 200, the same delivery.
            Ok(r) if r.status == 201 || (k == 1 && r.status == 200) => {
                let id = r.json()["id"].as_str().map(str::to_string);
                return id.map(|id| (id, k == 1)).ok_or_else(|| format!("submit {i}: {r:?}"));
            }
            Ok(r) => return Err(format!("submit {i} to {addr}: {r:?}")),
            Err(e) => errors.push(format!("{addr}: {e}")),
        }
    }
    Err(format!("submit {i}: no server answered: {errors:?}"))
}

/// Submits every delivery, `SUBMIT_CONCURRENCY` at a time. Returns (ids in order, fallbacks).
async fn submit_all(
    servers: [SocketAddr; 2],
    key: String,
    to: String,
) -> Result<(Vec<String>, usize), String> {
    let mut ids = vec![String::new(); DELIVERIES];
    let mut fallbacks = 0;
    let indices: Vec<usize> = (0..DELIVERIES).collect();
    for batch in indices.chunks(SUBMIT_CONCURRENCY) {
        let mut set = tokio::task::JoinSet::new();
        for &i in batch {
            let (key, to) = (key.clone(), to.clone());
            set.spawn(async move { (i, submit_one(servers, &key, &to, i).await) });
        }
        while let Some(joined) = set.join_next().await {
            let (i, result) = joined.map_err(|e| format!("submit task: {e}"))?;
            let (id, fell_back) = result?;
            ids[i] = id;
            fallbacks += usize::from(fell_back);
        }
    }
    Ok((ids, fallbacks))
}

/// Live leases held by the `herald` process `pid` (its worker id is `w<pid>-…`).
async fn leases_held(db: &SharedDb, pid: u32) -> i64 {
    let sql = "SELECT count(*) FROM deliveries WHERE state = 'sending' AND lease_owner LIKE $1";
    db.count(sql, Some(&format!("w{pid}-%"))).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_on_postgres_finish_the_work_of_a_sigkilled_one() {
    let Some(base) = postgres_url() else {
        eprintln!("skipped: {POSTGRES_ENV} is not set");
        return;
    };
    two_servers_finish_the_work_of_a_sigkilled_one(SharedDb::Postgres(
        PgSchema::create(&base).await,
    ))
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_on_mariadb_finish_the_work_of_a_sigkilled_one() {
    let Some(base) = mysql_url() else {
        eprintln!("skipped: {MYSQL_ENV} is not set");
        return;
    };
    two_servers_finish_the_work_of_a_sigkilled_one(SharedDb::MySql(
        MyDatabase::create(&base).await,
    ))
    .await;
}

async fn two_servers_finish_the_work_of_a_sigkilled_one(db: SharedDb) {
    let started = Instant::now();
    let (cwd_a, cwd_b) =
        (tempfile::tempdir().expect("tempdir"), tempfile::tempdir().expect("tempdir"));
    let mut receiver = Receiver::start(false).await;
    let mut env = FAST.to_vec();
    env.push(("HERALD_SHUTDOWN_GRACE", "5s"));
    let db_args = ["--db", db.url()];
    let mut a = Proc::serve("A", cwd_a.path(), &db_args, &env).await;
    let mut b = Proc::serve("B", cwd_b.path(), &db_args, &env).await;

    let (_tenant, key, _secret) = tenant_with_quota(&a, "acme", DELIVERIES as i64).await;
    let submit_started = Instant::now();
    let mut submitting =
        Some(tokio::spawn(submit_all([a.addr, b.addr], key.clone(), receiver.url("load"))));
    let mut submitted = None;

    // Count webhook-ids as they arrive. After KILL_AFTER distinct ones, SIGKILL A as soon
    // as the database shows it holding a lease (so the survivor has work to reclaim), or
    // at KILL_LATEST regardless.
    let a_pid = a.pid();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut killed: Option<(Duration, usize, i64)> = None;
    let run = tokio::time::timeout(Duration::from_secs(90), async {
        while seen.len() < DELIVERIES || submitting.is_some() {
            tokio::select! {
                hit = receiver.hits.recv() => {
                    let hit = hit.expect("the receiver stopped");
                    *seen.entry(hit.id).or_default() += 1;
                    if killed.is_none() && seen.len() >= KILL_AFTER {
                        let held = leases_held(&db, a_pid).await;
                        if held > 0 || seen.len() >= KILL_LATEST {
                            a.child.kill().await.expect("SIGKILL A");
                            killed = Some((started.elapsed(), seen.len(), held));
                        }
                    }
                }
                joined = async { submitting.as_mut().expect("guarded").await },
                    if submitting.is_some() =>
                {
                    submitting = None;
                    let (ids, fallbacks) =
                        joined.expect("the submit task panicked").unwrap_or_else(|e| {
                            panic!("submitting failed: {e}; B's stderr:\n{}", b.stderr())
                        });
                    submitted = Some((ids, fallbacks, submit_started.elapsed()));
                }
            }
        }
    })
    .await;
    assert!(
        run.is_ok(),
        "within 90 s: {} of {DELIVERIES} distinct webhook-ids received, submitting done: {}, \
         A killed at {killed:?}; A's stderr:\n{}\nB's stderr:\n{}",
        seen.len(),
        submitted.is_some(),
        a.stderr(),
        b.stderr()
    );
    let all_received = started.elapsed();
    let (killed_at, distinct_at_kill, held_at_kill) = killed.expect("A was killed");
    let (ids, fallbacks, submit_took) = submitted.expect("submitted");
    let submitted_ids: BTreeSet<&String> = ids.iter().collect();
    assert_eq!(submitted_ids.len(), DELIVERIES, "every submit created its own delivery");
    let received_ids: BTreeSet<&String> = seen.keys().collect();
    assert_eq!(received_ids, submitted_ids, "the receiver got exactly the submitted deliveries");

    // A send interrupted after the receiver answered is re-sent once its lease expires;
    // take those duplicates in until the database says every delivery is sent.
    let settle = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let by_state = db.states().await;
            if by_state.get("sent") == Some(&(DELIVERIES as i64)) {
                return by_state;
            }
            if let Ok(hit) =
                tokio::time::timeout(Duration::from_millis(250), receiver.hits.recv()).await
            {
                *seen.entry(hit.expect("the receiver stopped").id).or_default() += 1;
            }
        }
    })
    .await;
    let by_state = match settle {
        Ok(by_state) => by_state,
        Err(_) => panic!(
            "not every delivery is sent in the database a minute later: {:?}; B's stderr:\n{}",
            db.states().await,
            b.stderr()
        ),
    };
    assert_eq!(by_state, BTreeMap::from([("sent".to_string(), DELIVERIES as i64)]));
    while let Ok(hit) = receiver.hits.try_recv() {
        *seen.entry(hit.id).or_default() += 1;
    }
    let lost =
        db.count("SELECT count(*) FROM delivery_attempts WHERE outcome = 'lost'", None).await;

    assert!(lost <= SLOTS as i64, "{lost} lost attempts from one process with {SLOTS} slots");
    let duplicated: Vec<(&String, &usize)> = seen.iter().filter(|(_, n)| **n > 1).collect();
    let duplicates: usize = duplicated.iter().map(|(_, n)| **n - 1).sum();
    assert!(
        duplicates <= SLOTS,
        "{duplicates} duplicate requests after one SIGKILL, more than the killed process's \
         {SLOTS} send slots: {duplicated:?}"
    );

    // Through the survivor's API: every delivery, sent.
    let mut listed: BTreeMap<String, String> = BTreeMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let path = match &cursor {
            None => "/v1/deliveries?limit=200".to_string(),
            Some(c) => format!("/v1/deliveries?limit=200&cursor={c}"),
        };
        let reply = call(&b, "GET", &path, Some(&key), None).await;
        let page = expect_status(&reply, 200, &format!("B: GET {path}"));
        for d in page["deliveries"].as_array().unwrap_or_else(|| panic!("{page}")) {
            let id = d["id"].as_str().unwrap_or_else(|| panic!("{d}")).to_string();
            listed.insert(id, d["state"].as_str().unwrap_or("?").to_string());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
        assert!(listed.len() <= DELIVERIES, "B: the listing does not end: {} rows", listed.len());
    }
    assert_eq!(listed.keys().collect::<BTreeSet<_>>(), submitted_ids, "B: GET /v1/deliveries");
    let not_sent: Vec<_> = listed.iter().filter(|(_, s)| *s != "sent").collect();
    assert!(not_sent.is_empty(), "B: deliveries not sent: {not_sent:?}");
    let quota = webhook_quota(&b, &key).await;
    let n = DELIVERIES as i64;
    assert_eq!(
        quota,
        json!({"quota_key": "webhook", "granted": n, "available": 0, "reserved": 0, "spent": n}),
        "B: GET /v1/quotas: each delivery is charged once, however often it was sent"
    );

    let stop = b.stop(Duration::from_secs(15)).await;
    eprintln!(
        "two servers on {}: {DELIVERIES} submitted in {submit_took:?} ({fallbacks} fell \
         back to B); A SIGKILLed at {killed_at:?} after {distinct_at_kill} distinct ids, holding \
         {held_at_kill} lease(s); all received at {all_received:?}; {duplicates} duplicate request(s) {duplicated:?}; {lost} \
         lost attempt(s) reclaimed; B stopped in {stop:?}; total {:?}",
        db.name(),
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------
// 3. SIGTERM with a send in flight

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_started_send_finish_and_exits_zero() {
    let started = Instant::now();
    let cwd = tempfile::tempdir().expect("tempdir");
    let db_path = cwd.path().join("herald.db").display().to_string();
    let mut receiver = Receiver::start(true).await;
    let env = [
        ("HERALD_LEASE", "30s"),
        ("HERALD_SEND_TIMEOUT", "20s"),
        ("HERALD_SHUTDOWN_GRACE", "15s"),
        ("HERALD_POLL_INTERVAL", "200ms"),
        ("RUST_LOG", "info,sqlx=warn"),
    ];
    let mut server = Proc::serve("serve", cwd.path(), &["--db", &db_path], &env).await;
    let (_tenant, key, _secret) = tenant_with_quota(&server, "acme", 1).await;
    let submit = json!({
        "operation_key": "invoice-7-paid",
        "channel": "webhook",
        "to": receiver.url("invoices"),
        "payload": {"invoice": 7},
    });
    let reply = call(&server, "POST", "/v1/deliveries", Some(&key), Some(&submit)).await;
    let created = expect_status(&reply, 201, "POST /v1/deliveries");
    let id = created["id"].as_str().unwrap_or_else(|| panic!("no id in {created}")).to_string();

    let hit = receiver.next(DELIVERY_BOUND, &server).await;
    assert_eq!(hit.id, id, "{hit:?}");
    server.sigterm();
    server
        .wait_line(Duration::from_secs(10), "`shutting down` log line", |l| {
            l.contains("shutting down").then_some(())
        })
        .await;
    let early = server.child.try_wait().expect("try_wait");
    assert!(
        early.is_none(),
        "exited ({early:?}) while a started send was still running; stderr:\n{}",
        server.stderr()
    );
    let released_at = Instant::now();
    receiver.release();
    let status = server.exit_within(Duration::from_secs(30)).await;
    let exit_after_release = released_at.elapsed();
    assert_eq!(status.code(), Some(0), "exit status {status}; stderr:\n{}", server.stderr());

    let run =
        herald(cwd.path(), &["deliveries", "--db", &db_path, "show", &id, "--json"], &[]).await;
    let delivery = json_out(&run);
    assert_eq!(delivery["state"], "sent", "after shutdown: {delivery}");
    assert_eq!(delivery["attempts"], 1, "after shutdown: {delivery}");
    let hits = receiver.all();
    assert_eq!(hits.len(), 1, "the send must not be repeated: {hits:?}");
    eprintln!(
        "graceful shutdown: exit 0 {exit_after_release:?} after the receiver answered; total {:?}",
        started.elapsed()
    );
}

// ---------------------------------------------------------------------------------------
// 4. The operator CLI on SQLite

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_cli_path_on_sqlite() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let dir = cwd.path();
    let tenant = json_out(&herald(dir, &["tenant", "create", "acme", "--json"], &[]).await);
    let field = |k: &str| {
        tenant[k]
            .as_str()
            .unwrap_or_else(|| panic!("tenant create: no {k} in {tenant}"))
            .to_string()
    };
    let (id, api_key, secret) = (field("id"), field("api_key"), field("webhook_secret"));
    assert_eq!(tenant["name"], "acme", "{tenant}");
    assert!(uuid::Uuid::try_parse(&id).is_ok(), "tenant id {id:?}");
    assert!(secret.starts_with("whsec_"), "webhook_secret {secret:?}");

    for round in 1..=2 {
        let args = ["quota", "grant", &id, "webhook", "5", "--idempotency-key", "g1"];
        let run = herald(dir, &args, &[]).await;
        assert_eq!(run.code, Some(0), "grant round {round}: {run:#?}");
    }
    let shown = json_out(&herald(dir, &["quota", "show", &id, "--json"], &[]).await);
    assert_eq!(
        shown,
        json!({"quotas": [{"quota_key": "webhook", "granted": 5, "available": 5, "reserved": 0, "spent": 0}]}),
        "a grant retried under one idempotency key counts once"
    );

    let created = json_out(&herald(dir, &["key", "create", &id, "--json"], &[]).await);
    let key_id = created["key_id"].as_str().unwrap_or_else(|| panic!("{created}")).to_string();
    let second_key = created["api_key"].as_str().unwrap_or_else(|| panic!("{created}")).to_string();
    assert!(second_key.contains(&key_id), "the key carries its public id: {created}");
    assert_ne!(second_key, api_key, "{created}");
    let run = herald(dir, &["key", "revoke", &id, &key_id], &[]).await;
    assert_eq!(run.code, Some(0), "{run:#?}");
    assert!(run.stdout.contains(&key_id), "{run:#?}");
    let unknown = herald(dir, &["key", "revoke", &id, "no-such-key"], &[]).await;
    if let Some(problem) = error_line_problem(&unknown) {
        panic!("revoking an unknown key: {problem}");
    }

    let list = json_out(&herald(dir, &["deliveries", "list", &id, "--json"], &[]).await);
    assert_eq!(list, json!({"deliveries": []}));

    // A server on the same file: the first key works, the revoked one does not.
    let mut server = Proc::serve("serve", dir, &[], &FAST).await;
    let reply = call(&server, "GET", "/v1/quotas", Some(&api_key), None).await;
    let quotas = expect_status(&reply, 200, "GET /v1/quotas with the tenant's key");
    assert_eq!(quotas["quotas"][0]["granted"], 5, "{quotas}");
    let reply = call(&server, "GET", "/v1/quotas", Some(&second_key), None).await;
    let refused = expect_status(&reply, 401, "GET /v1/quotas with the revoked key");
    assert!(refused["error"]["code"].is_string(), "{refused}");
    server.stop(Duration::from_secs(20)).await;

    // Bad input that clap accepts: one `error:` line and a non-zero exit.
    let run = herald(dir, &["quota", "grant", "not-a-uuid", "webhook", "5"], &[]).await;
    if let Some(problem) = error_line_problem(&run) {
        panic!("{problem}");
    }
    assert!(run.stderr.contains("not-a-uuid"), "{run:#?}");
    let after = json_out(&herald(dir, &["quota", "show", &id, "--json"], &[]).await);
    assert_eq!(after, shown, "a refused grant changes nothing");
    // Settings are checked before the database is opened: nothing is created.
    let cases: [(&[&str], (&str, &str), &str); 10] = [
        (&["serve", "--lease", "10s", "--send-timeout", "30s"], ("HERALD_WORKERS", "8"), "lease"),
        (&["serve"], ("HERALD_LEASE", "abc"), "HERALD_LEASE"),
        (&["serve"], ("HERALD_QUEUE_WAIT", "5ms"), "HERALD_QUEUE_WAIT"),
        (&["serve"], ("HERALD_QUEUE_WAIT", "2m"), "HERALD_QUEUE_WAIT"),
        (&["serve"], ("HERALD_ALLOWED_HOSTS", "a host"), "HERALD_ALLOWED_HOSTS"),
        (&["serve"], ("HERALD_PUBLIC_URL", "ftp://x.example"), "HERALD_PUBLIC_URL"),
        (&["serve"], ("HERALD_WAKE_LISTEN", "localhost"), "HERALD_WAKE_LISTEN"),
        (&["serve"], ("HERALD_WAKE_LISTEN", "0.0.0.0:7070"), "HERALD_WAKE_ADVERTISE"),
        (
            &["serve", "--wake-listen", "off"],
            ("HERALD_WAKE_ADVERTISE", "h:1"),
            "HERALD_WAKE_LISTEN",
        ),
        (&["serve"], ("HERALD_WAKE_ADVERTISE", "no-port"), "HERALD_WAKE_ADVERTISE"),
    ];
    for (args, env, needle) in cases {
        let scratch = tempfile::tempdir().expect("tempdir");
        let run = herald(scratch.path(), args, &[env]).await;
        if let Some(problem) = error_line_problem(&run) {
            panic!("{env:?}: {problem}");
        }
        assert!(run.stderr.contains(needle), "expected {needle:?} in {run:#?}");
        let left: Vec<_> = std::fs::read_dir(scratch.path()).expect("read_dir").collect();
        assert!(left.is_empty(), "{args:?} {env:?}: created files: {left:?}");
    }
}

/// README: "Every error is one line on stderr and exit code 1" — also for an amount that
/// looks like a flag.
#[tokio::test]
async fn negative_grant_amount_is_one_error_line() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let tenant = json_out(&herald(cwd.path(), &["tenant", "create", "acme", "--json"], &[]).await);
    let id = tenant["id"].as_str().unwrap_or_else(|| panic!("{tenant}")).to_string();
    let run = herald(cwd.path(), &["quota", "grant", &id, "webhook", "-1"], &[]).await;
    if let Some(problem) = error_line_problem(&run) {
        panic!("quota grant … -1: {problem}");
    }
    assert_eq!(run.code, Some(1), "{run:#?}");
    let shown = json_out(&herald(cwd.path(), &["quota", "show", &id, "--json"], &[]).await);
    assert_eq!(shown, json!({"quotas": []}), "a refused grant changes nothing");
}

/// `--db` (and `--json`) after the subcommand, as with `herald serve --db …`.
#[tokio::test]
async fn db_flag_is_accepted_after_the_operator_subcommand() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let db = cwd.path().join("ops.db").display().to_string();
    let tenant = json_out(
        &herald(cwd.path(), &["tenant", "--db", &db, "create", "acme", "--json"], &[]).await,
    );
    let id = tenant["id"].as_str().unwrap_or_else(|| panic!("{tenant}")).to_string();
    let run = herald(cwd.path(), &["quota", "show", &id, "--json", "--db", &db], &[]).await;
    assert_eq!(json_out(&run), json!({"quotas": []}), "{run:#?}");
    let run = herald(cwd.path(), &["deliveries", "list", &id, "--json", "--db", &db], &[]).await;
    assert_eq!(json_out(&run), json!({"deliveries": []}), "{run:#?}");
}

/// A secret on the command line is in `ps` for every user of the machine: herald says so
/// (issue 37) and still starts; in the environment it says nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_on_the_command_line_is_warned_about() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let mut flagged = Proc::serve("serve", cwd.path(), &["--admin-key", ADMIN_KEY], &FAST).await;
    flagged.stop(Duration::from_secs(20)).await;
    let said = flagged.stderr();
    assert!(said.contains("visible to every user") && said.contains("--admin-key"), "{said}");
    assert!(!said.contains(ADMIN_KEY), "the key itself is never logged: {said}");
    let mut quiet = Proc::serve("serve", cwd.path(), &[], &FAST).await;
    quiet.stop(Duration::from_secs(20)).await;
    assert!(!quiet.stderr().contains("visible to every user"), "{}", quiet.stderr());
}

/// Guessing keys from one address (issue 37, defect 2): a real listener knows the client's
/// address, so after 10 failed keys in a minute — bearer keys and sign-ins alike, whatever
/// they look like — that address gets 429 with Retry-After; each failure is logged without
/// the key and counted in /metrics.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_keys_from_one_address_are_limited_logged_and_counted() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let server = Proc::serve("serve", cwd.path(), &[], &FAST).await;
    let guess = "not-the-admin-key-0123456789abcdefghijklmnopq";
    for i in 0..10 {
        let r = if i % 2 == 0 {
            try_request(server.addr, "GET", "/v1/quotas", Some(guess), None).await
        } else {
            let body = json!({"key": guess});
            try_request(server.addr, "POST", "/ui/api/session", None, Some(&body)).await
        };
        assert_eq!(r.expect("an answer").status, 401, "guess {i}");
    }
    let limited = try_request(server.addr, "GET", "/v1/quotas", Some(ADMIN_KEY), None).await;
    let limited = limited.expect("an answer");
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert!(limited.retry_after.is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s >= 1)));
    let metrics = try_request(server.addr, "GET", "/metrics", None, None).await.unwrap();
    let line = metrics.body.lines().find(|l| l.starts_with("herald_auth_failures_total"));
    assert!(line.is_some(), "{}", metrics.body);
    let log = server.stderr();
    assert!(log.matches("authentication failed").count() >= 10, "{log}");
    assert!(!log.contains(guess), "a failed key is never logged: {log}");
}
