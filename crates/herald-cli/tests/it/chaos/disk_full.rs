//! A full disk under `herald serve` on SQLite, for real: the database file lives on a
//! small tmpfs of its own, and a filler file takes every byte left, so SQLite's writes fail
//! with SQLITE_FULL (13) from the kernel's ENOSPC. While it is full, every submit must be
//! refused clearly (503 `storage_full`, a JSON body naming the cause, `Retry-After`), never
//! a 500, and the process stays up, reads keep answering, nothing accepted is lost and
//! nothing is half-written (the ledger balances and every delivery row has its
//! reservation). Once the filler is removed, the operation keys that were refused are
//! created exactly once, new submits succeed, every accepted delivery reaches its receiver
//! (duplicates only for the sends that were in flight when the disk filled) and is
//! recorded sent, within a bound from the moment room returned.
//!
//! Mounting needs root (CAP_SYS_ADMIN): without it the test is skipped with a message,
//! unless `CI` is set, where it fails.

use crate::support::*;

/// The tmpfs: room for the migrated database and its WAL (about 200 KiB), then the filler.
const TMPFS_KB: u64 = 4096;
/// Submitted and delivered (and recorded sent) before the disk fills.
const BEFORE: usize = 4;
/// Sends in flight when the disk fills: the held receiver has them, taking every slot
/// their lane may hold (both receivers are on 127.0.0.1: one lane, herald_core::fair).
const HELD: usize = herald_core::fair::lane_cap(SLOTS);
/// Accepted before the disk fills, in the same lane, still waiting for it when it does.
const QUEUED: usize = 4;
/// Clients that keep submitting while the disk is full, each with keys of its own.
const CLIENTS: usize = 4;
const KEYS_PER_CLIENT: usize = 3;
/// Submitted once room has returned, besides the refused keys.
const AFTER: usize = 4;
/// How long the disk stays full: longer than a lease (8 s in FAST), so the held sends'
/// leases expire while it is full, the recorder gives an outcome it could not record up to
/// the reconciler, and the reconciler's and the workers' writes run into the full disk too.
const FULL_FOR: Duration = Duration::from_secs(10);
/// A client's pause between rounds of resubmits, shorter than the server's Retry-After, so
/// that submits keep arriving all the while.
const RESEND_PAUSE: Duration = Duration::from_millis(50);
/// From the moment room returns: every refused key created, every accepted delivery
/// received and recorded sent. The slowest path is a held send whose outcome the recorder
/// gave up on: its lease has expired by then, so the reconciler's next pass (every 1 s)
/// re-queues it, after a backoff (100 ms base) it is sent again and recorded; the other
/// outcomes wait out the recorder's pause (at most 1 s). A few seconds; the rest is margin
/// for a loaded machine.
const RECOVERY_BOUND: Duration = Duration::from_secs(10);
/// SIGTERM to exit: `HERALD_SHUTDOWN_GRACE` (10 s) plus closing the pool.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------------------
// The small disk

/// A tmpfs of `TMPFS_KB` mounted on a fresh temporary directory; unmounted when dropped
/// (lazily if a process still has files open there, as a SIGKILLed server may for a moment).
struct Tmpfs {
    dir: PathBuf,
    // After `dir`'s unmount (in `drop`) the directory itself goes with this.
    _parent: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` (with a message) when mounting is impossible here, unless `CI` is set.
    fn mount() -> Option<Tmpfs> {
        let parent = tempfile::tempdir().expect("tempdir");
        let dir = parent.path().join("disk");
        std::fs::create_dir(&dir).expect("create the mount point");
        let size = format!("size={TMPFS_KB}k");
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &size, "tmpfs"])
            .arg(&dir)
            .stdin(Stdio::null())
            .output();
        let why = match mounted {
            Ok(out) if out.status.success() => return Some(Tmpfs { dir, _parent: parent }),
            Ok(out) => format!(
                "`mount -t tmpfs` failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => format!("cannot run mount: {e}"),
        };
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but a tmpfs cannot be mounted (the disk-full test needs root): {why}"
        );
        eprintln!("skipped: a tmpfs cannot be mounted (run as root for a real full disk): {why}");
        None
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let umount = |lazy: bool| {
            let mut cmd = std::process::Command::new("umount");
            if lazy {
                cmd.arg("-l");
            }
            cmd.arg(&self.dir).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
        };
        if !umount(false) {
            umount(true);
        }
    }
}

/// Writes `path` until the file system has no byte left (ENOSPC at a one-byte write).
/// Returns the bytes written.
fn fill(path: &Path) -> u64 {
    use std::io::Write;
    let mut file = std::fs::File::create(path).expect("create the filler");
    let chunk = vec![0u8; 64 * 1024];
    let (mut size, mut written) = (chunk.len(), 0u64);
    loop {
        match file.write(&chunk[..size]) {
            Ok(0) => panic!("writing the filler wrote nothing, without an error"),
            Ok(n) => written += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::StorageFull => {
                if size == 1 {
                    return written;
                }
                size /= 2;
            }
            Err(e) => panic!("writing the filler: {e}"),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Submits, with the one header the refusal must carry

#[derive(Debug)]
struct Answer {
    status: u16,
    body: Value,
    retry_after: Option<String>,
}

impl Answer {
    fn id(&self) -> Option<String> {
        self.body["id"].as_str().map(str::to_string)
    }

    /// What is wrong with this answer as a refusal for a full disk, if anything.
    fn refusal_problem(&self) -> Option<String> {
        let error = &self.body["error"];
        let message = error["message"].as_str().unwrap_or_default();
        let problem = if self.status != 503 {
            "the status should be 503"
        } else if error["code"] != "storage_full" {
            "the error code should be storage_full"
        } else if !message.contains("disk is full") || !message.contains("nothing was changed") {
            "the message should say the disk is full"
        } else if !self
            .retry_after
            .as_deref()
            .is_some_and(|r| r.parse::<u32>().is_ok_and(|s| s > 0))
        {
            "a Retry-After of whole seconds should say when to retry"
        } else {
            return None;
        };
        Some(format!("{problem}: {self:?}"))
    }
}

fn submit_body(key: &str, to: &str) -> Value {
    json!({"operation_key": key, "channel": "webhook", "to": to, "payload": {"key": key}})
}

/// `POST /v1/deliveries` by hand, keeping `Retry-After`.
async fn submit(addr: SocketAddr, api_key: &str, body: &Value) -> Result<Answer, String> {
    let exchange = async {
        let body = body.to_string();
        let mut stream = TcpStream::connect(addr).await.map_err(|e| format!("connect: {e}"))?;
        let request = format!(
            "POST /v1/deliveries HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\
             authorization: Bearer {api_key}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes()).await.map_err(|e| format!("write: {e}"))?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await.map_err(|e| format!("read: {e}"))?;
        let reply = parse_reply(&raw)?;
        let text = String::from_utf8_lossy(&raw);
        let head = text.split_once("\r\n\r\n").map_or("", |(h, _)| h);
        let retry_after = head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case("retry-after").then(|| v.trim().to_string())
        });
        Ok(Answer { status: reply.status, body: reply.json(), retry_after })
    };
    tokio::time::timeout(HTTP_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("no answer within {HTTP_TIMEOUT:?}"))?
}

/// Submits `key` and requires a 201 (a new delivery); returns its id.
async fn submit_created(server: &Proc, api_key: &str, key: &str, to: &str) -> String {
    let answer = submit(server.addr, api_key, &submit_body(key, to))
        .await
        .unwrap_or_else(|e| panic!("submit {key}: {e}; stderr:\n{}", server.stderr()));
    assert_eq!(
        (answer.status, &answer.body["duplicate"]),
        (201, &json!(false)),
        "submit {key}: {answer:?}; stderr:\n{}",
        server.stderr()
    );
    answer.id().unwrap_or_else(|| panic!("submit {key}: no id in {answer:?}"))
}

/// What the clients saw while the disk was full.
#[derive(Debug, Default)]
struct WhileFull {
    refused: usize,
    /// Answers that were not a clear refusal (a 500, a 201, no answer …), with why.
    wrong: Vec<String>,
    slowest: Duration,
}

/// Client `c`: resubmits its keys, round after round, until `until`.
async fn refused_client(
    addr: SocketAddr,
    api_key: String,
    to: String,
    c: usize,
    until: Instant,
) -> WhileFull {
    let mut seen = WhileFull::default();
    while Instant::now() < until {
        for k in 0..KEYS_PER_CLIENT {
            let key = format!("full-{c}-{k}");
            let started = Instant::now();
            let answer = submit(addr, &api_key, &submit_body(&key, &to)).await;
            seen.slowest = seen.slowest.max(started.elapsed());
            match answer {
                Ok(a) => match a.refusal_problem() {
                    None => seen.refused += 1,
                    Some(problem) => seen.wrong.push(format!("{key}: {problem}")),
                },
                Err(e) => seen.wrong.push(format!("{key}: {e}")),
            }
        }
        // A client's pause before resending (the behaviour under test is a client that
        // resends), not a wait for work.
        tokio::time::sleep(RESEND_PAUSE).await;
    }
    seen
}

// ---------------------------------------------------------------------------------------
// Reads

/// Every delivery of the tenant: id → state.
async fn deliveries(server: &Proc, api_key: &str) -> BTreeMap<String, String> {
    let path = format!("/v1/deliveries?limit={}", 200);
    let reply = call(server, "GET", &path, Some(api_key), None).await;
    let list = expect_status(&reply, 200, &format!("GET {path}"));
    assert!(list["next_cursor"].is_null(), "GET {path}: more than one page: {list}");
    list["deliveries"]
        .as_array()
        .unwrap_or_else(|| panic!("GET {path}: {list}"))
        .iter()
        .map(|d| {
            let field = |k: &str| d[k].as_str().unwrap_or_else(|| panic!("GET {path}: {d}"));
            (field("id").to_string(), field("state").to_string())
        })
        .collect()
}

/// The webhook account, and that it balances: granted = available + reserved + spent, none
/// negative, and one unit reserved or spent per delivery row (cost 1 each), so no row is
/// without its reservation and no reservation without its row.
async fn balanced_quota(server: &Proc, api_key: &str, rows: usize, when: &str) -> Value {
    let quota = webhook_quota(server, api_key).await;
    let n = |k: &str| quota[k].as_i64().unwrap_or_else(|| panic!("{when}: no {k} in {quota}"));
    let (granted, available, reserved, spent) =
        (n("granted"), n("available"), n("reserved"), n("spent"));
    assert!(
        granted == available + reserved + spent && available >= 0 && reserved >= 0 && spent >= 0,
        "{when}: the ledger does not balance: {quota}"
    );
    assert_eq!(
        reserved + spent,
        rows as i64,
        "{when}: {rows} delivery rows but the ledger holds {quota}"
    );
    quota
}

/// Takes the receiver's hits in until `ids` have all arrived (counting every hit, repeats
/// included, in `hits`), or panics at `deadline`.
async fn receive_all(
    receiver: &mut Receiver,
    ids: &BTreeSet<String>,
    hits: &mut BTreeMap<String, usize>,
    deadline: Instant,
    server: &Proc,
    what: &str,
) {
    let received = tokio::time::timeout_at(deadline.into(), async {
        while !ids.iter().all(|id| hits.contains_key(id)) {
            let hit = receiver.hits.recv().await.expect("the receiver stopped");
            *hits.entry(hit.id).or_default() += 1;
        }
    })
    .await;
    if received.is_err() {
        let missing: Vec<&String> = ids.iter().filter(|id| !hits.contains_key(*id)).collect();
        panic!("{what}: {missing:?} never reached the receiver; stderr:\n{}", server.stderr());
    }
}

// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_disk_on_sqlite_is_refused_clearly_loses_nothing_and_recovers() {
    let started = Instant::now();
    let Some(disk) = Tmpfs::mount() else { return };
    let cwd = tempfile::tempdir().expect("tempdir");
    let db = format!("sqlite://{}", disk.dir.join("herald.db").display());
    let mut delivered = Receiver::start(false).await;
    let mut held = Receiver::start(true).await;
    let mut server = Proc::serve("serve", cwd.path(), &["--db", &db], &FAST).await;
    let (_tenant, key, _secret) = tenant_with_quota(&server, "disk", 1000).await;
    let mut hits: BTreeMap<String, usize> = BTreeMap::new();
    let mut held_hits: BTreeMap<String, usize> = BTreeMap::new();

    // 1. Room: submits are created and delivered, and recorded sent.
    let mut before = BTreeSet::new();
    for i in 0..BEFORE {
        before.insert(
            submit_created(&server, &key, &format!("before-{i}"), &delivered.url("a")).await,
        );
    }
    let deadline = Instant::now() + DELIVERY_BOUND;
    receive_all(&mut delivered, &before, &mut hits, deadline, &server, "before the disk filled")
        .await;
    let recorded = tokio::time::timeout(DELIVERY_BOUND, async {
        while webhook_quota(&server, &key).await["spent"] != BEFORE {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(
        recorded.is_ok(),
        "the first deliveries were not recorded sent; stderr:\n{}",
        server.stderr()
    );
    // Then every slot taken by a send the held receiver keeps open, and more accepted
    // behind them, waiting for a slot.
    let mut in_flight = BTreeSet::new();
    for i in 0..HELD {
        in_flight.insert(submit_created(&server, &key, &format!("held-{i}"), &held.url("b")).await);
    }
    receive_all(&mut held, &in_flight, &mut held_hits, deadline, &server, "the held sends").await;
    let mut queued = BTreeSet::new();
    for i in 0..QUEUED {
        queued.insert(
            submit_created(&server, &key, &format!("queued-{i}"), &delivered.url("a")).await,
        );
    }
    let accepted_before: BTreeSet<String> =
        before.iter().chain(&in_flight).chain(&queued).cloned().collect();

    // 2. The disk fills; the held sends are answered (their outcomes now have to be
    // recorded on a full disk), and clients submit for FULL_FOR.
    let filler = disk.dir.join("filler");
    let filled = fill(&filler);
    let full_at = Instant::now();
    held.release();
    let until = full_at + FULL_FOR;
    let mut clients = tokio::task::JoinSet::new();
    for c in 0..CLIENTS {
        let (addr, key, to) = (server.addr, key.clone(), delivered.url("a"));
        clients.spawn(refused_client(addr, key, to, c, until));
    }
    let mut full = WhileFull::default();
    while let Some(client) = clients.join_next().await {
        let client = client.expect("client task");
        full.refused += client.refused;
        full.wrong.extend(client.wrong);
        full.slowest = full.slowest.max(client.slowest);
    }
    assert!(
        full.wrong.is_empty(),
        "while the disk was full, {} submits were not refused clearly ({} were), e.g. {:#?}; \
         stderr:\n{}",
        full.wrong.len(),
        full.refused,
        &full.wrong[..full.wrong.len().min(5)],
        server.stderr()
    );
    assert!(full.refused >= CLIENTS * KEYS_PER_CLIENT, "{full:?}");
    // Still full: the process is up, reads answer, nothing accepted is lost, nothing
    // refused was written, and the ledger balances.
    assert!(
        matches!(server.child.try_wait(), Ok(None)),
        "the server exited on a full disk; stderr:\n{}",
        server.stderr()
    );
    let health = call(&server, "GET", "/healthz", None, None).await;
    expect_status(&health, 200, "GET /healthz on a full disk");
    let rows = deliveries(&server, &key).await;
    let row_ids: BTreeSet<String> = rows.keys().cloned().collect();
    assert_eq!(
        row_ids, accepted_before,
        "on a full disk the deliveries should be exactly those accepted before it filled"
    );
    // Writes fail for the workers too: the held sends were answered, but their outcomes
    // cannot be recorded (the recorder keeps trying, their slots stay taken), so nothing
    // after the first deliveries is sent yet.
    let sent_while_full: BTreeSet<String> =
        rows.iter().filter(|(_, state)| *state == "sent").map(|(id, _)| id.clone()).collect();
    assert_eq!(sent_while_full, before, "recorded sent while the disk was full: {rows:?}");
    let quota_full = balanced_quota(&server, &key, rows.len(), "on a full disk").await;
    let full_lasted = full_at.elapsed();

    // 3. Room returns.
    std::fs::remove_file(&filler).expect("remove the filler");
    let room_at = Instant::now();
    let recovery_deadline = room_at + RECOVERY_BOUND;
    // The refused keys, created now, exactly once; a client would resend on 503, so do so
    // (within the bound) and measure when the first is accepted.
    let mut refused_ids = BTreeSet::new();
    let mut first_accepted: Option<Duration> = None;
    let mut refused_after_room = 0;
    for c in 0..CLIENTS {
        for k in 0..KEYS_PER_CLIENT {
            let op = format!("full-{c}-{k}");
            let body = submit_body(&op, &delivered.url("a"));
            let answer = loop {
                let answer = submit(server.addr, &key, &body)
                    .await
                    .unwrap_or_else(|e| panic!("submit {op}: {e}; stderr:\n{}", server.stderr()));
                if answer.status != 503 || Instant::now() >= recovery_deadline {
                    break answer;
                }
                refused_after_room += 1;
                tokio::time::sleep(RESEND_PAUSE).await;
            };
            first_accepted.get_or_insert(room_at.elapsed());
            assert_eq!(
                (answer.status, &answer.body["duplicate"]),
                (201, &json!(false)),
                "{op}, refused while the disk was full, should now be created: {answer:?}; \
                 stderr:\n{}",
                server.stderr()
            );
            let id = answer.id().expect("an id");
            let again = submit(server.addr, &key, &body).await.expect("submit again");
            assert_eq!(
                (again.status, again.id(), &again.body["duplicate"]),
                (200, Some(id.clone()), &json!(true)),
                "{op} again: {again:?}"
            );
            refused_ids.insert(id);
        }
    }
    let mut after = BTreeSet::new();
    for i in 0..AFTER {
        after.insert(
            submit_created(&server, &key, &format!("after-{i}"), &delivered.url("a")).await,
        );
    }

    // Every accepted delivery reaches its receiver, and is recorded sent.
    let to_a: BTreeSet<String> =
        before.iter().chain(&queued).chain(&refused_ids).chain(&after).cloned().collect();
    let what = "after room returned";
    receive_all(&mut delivered, &to_a, &mut hits, recovery_deadline, &server, what).await;
    let all_received = room_at.elapsed();
    let accepted: BTreeSet<String> = to_a.iter().chain(&in_flight).cloned().collect();
    let settled = tokio::time::timeout_at(recovery_deadline.into(), async {
        loop {
            let rows = deliveries(&server, &key).await;
            if rows.len() == accepted.len() && rows.values().all(|s| s == "sent") {
                return rows;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    let rows = settled.unwrap_or_else(|_| {
        panic!(
            "not every delivery was recorded sent within {RECOVERY_BOUND:?} of room returning; \
             stderr:\n{}",
            server.stderr()
        )
    });
    let all_sent = room_at.elapsed();
    let row_ids: BTreeSet<String> = rows.keys().cloned().collect();
    assert_eq!(row_ids, accepted, "the deliveries are exactly the accepted ones");
    let n = accepted.len() as i64;
    let quota = balanced_quota(&server, &key, rows.len(), "after recovery").await;
    assert_eq!(
        quota,
        json!({
            "quota_key": "webhook", "granted": 1000, "available": 1000 - n, "reserved": 0,
            "spent": n
        }),
        "the ledger after recovery"
    );

    // At least once each; more than once only for a send in flight when the disk filled
    // (its outcome could not be recorded in time, so its lease expired and it was resent).
    let held_requests: BTreeMap<String, usize> =
        held.all().into_iter().fold(BTreeMap::new(), |mut m, hit| {
            *m.entry(hit.id).or_default() += 1;
            m
        });
    let a_requests: BTreeMap<String, usize> =
        delivered.all().into_iter().fold(BTreeMap::new(), |mut m, hit| {
            *m.entry(hit.id).or_default() += 1;
            m
        });
    let repeated_a: Vec<(&String, &usize)> = a_requests.iter().filter(|(_, n)| **n > 1).collect();
    assert!(repeated_a.is_empty(), "deliveries not in flight were sent twice: {repeated_a:?}");
    assert_eq!(
        held_requests.keys().cloned().collect::<BTreeSet<_>>(),
        in_flight,
        "the held receiver got exactly the held deliveries"
    );
    let repeats: usize = held_requests.values().map(|n| n - 1).sum();
    assert!(
        repeats <= HELD,
        "{repeats} repeated sends for {HELD} sends in flight: {held_requests:?}"
    );
    let log = server.stderr();
    assert!(!log.contains("panicked"), "stderr:\n{log}");
    // The operator is told why, too.
    let told = log.lines().filter(|l| l.contains("no room to write: its disk is full")).count();
    assert!(told > 0, "the log should name the full disk:\n{log}");

    let took = server.stop(SHUTDOWN_BOUND).await;
    let code_13 = log.lines().filter(|l| l.contains("(code: 13)")).count();
    eprintln!(
        "disk full: tmpfs {TMPFS_KB} KiB, filler {filled} bytes; full for {full_lasted:?}: \
         {} submits refused (503 storage_full), slowest {:?}; ledger then {quota_full}; \
         room returned: {refused_after_room} more refusals, first submit accepted after \
         {:?}, every delivery received after {all_received:?} and recorded sent after \
         {all_sent:?}; {} deliveries, {repeats} repeated sends of {HELD} in flight; \
         {told} refusals logged, {code_13} log lines with SQLite's code 13; SIGTERM to exit \
         {took:?}; total {:?}",
        full.refused,
        full.slowest,
        first_accepted.unwrap_or_default(),
        accepted.len(),
        started.elapsed()
    );
    drop(disk);
}
