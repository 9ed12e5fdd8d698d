//! A property test of the quota ledger and the delivery state machine.
//!
//! proptest generates sequences of operations over two or three tenants and one quota
//! key — grants, submits (new identities and repeats), worker passes whose channel says
//! sent / transient / terminal, leases taken by a worker that then vanishes, clock moves,
//! reconciler passes, replays and cancels — and runs each sequence on a fresh database
//! (SQLite always, PostgreSQL when `HERALD_TEST_POSTGRES_URL` is set), with a manual
//! clock.
//!
//! Before every step a small model predicts the step's result from the previous
//! snapshot (which submit is a duplicate, reused, short of quota or new; which replays and
//! cancels are allowed; how many rows a worker, a vanished worker or the reconciler
//! takes). After every step the tables are read with SQL and checked: balances against
//! the journal, each delivery's state against its current reservation, one final
//! movement per reservation, the attempts listed (rows written when an attempt ends, plus
//! the one a delivery row stands for) against the attempt counters, and the model's
//! delivery count and grants against the database. A failure prints the operations as
//! executed (with the deliveries they resolved to) and proptest's shrunk input.
//!
//! `PROPTEST_CASES=n` changes the number of cases; `HERALD_PROPERTY_TRACE=1` prints every
//! case's operations as executed (to see what the generator reaches).

use crate::common;
use crate::common::TestDb;
use herald::sqlx;
use herald::{
    Channel, Clock, Conn, DeliveryState, Error, Herald, Leased, Outcome, Reconciler,
    ReconcilerOptions, SubmitRequest, Uuid, Worker, WorkerOptions,
};
use herald_core::fair::{Busy, DueLane, Lane, allot};
use herald_store::deliveries::{Lease, deliveries_lease};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const QUOTA_KEY: &str = "email";
const CHANNEL: &str = "email";
const START_SECOND: i64 = 1_800_000_000;
/// The lease a vanished worker takes (the default worker lease, too).
const GHOST_LEASE: Duration = Duration::from_secs(60);

// ---- operations ----------------------------------------------------------------------

/// What the scripted channel answers during one worker pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Sent,
    Transient,
    Terminal,
}

#[derive(Debug, Clone)]
enum Op {
    /// `quota_grant(tenant, "email", amount, idempotency key "g{k}")`.
    Grant {
        tenant: usize,
        amount: i64,
        idempotency_key: Option<u8>,
    },
    /// Submit identity `op-{key}` (which may exist already, with other parameters), in a
    /// runner transaction or, when `alone`, with `submit_alone`.
    Submit {
        tenant: usize,
        key: u8,
        to: u8,
        cost: i64,
        max_attempts: u32,
        alone: bool,
    },
    /// Submit exactly the request of a known delivery again.
    Resubmit {
        pick: Index,
    },
    /// One `Worker::run_once` with `slots` slots; the channel answers `answer` to each send.
    Work {
        slots: usize,
        answer: Answer,
    },
    /// A worker leases up to `limit` due deliveries and vanishes.
    Ghost {
        limit: usize,
    },
    Advance {
        ms: u64,
    },
    Reconcile,
    /// Replay a known delivery (as another tenant when `other_tenant`).
    Replay {
        pick: Index,
        other_tenant: bool,
    },
    /// Cancel a known delivery (as another tenant when `other_tenant`).
    Cancel {
        pick: Index,
        other_tenant: bool,
    },
}

#[derive(Debug, Clone)]
struct Case {
    tenants: usize,
    ops: Vec<Op>,
}

fn op() -> impl Strategy<Value = Op> {
    let answer = prop_oneof![Just(Answer::Sent), Just(Answer::Transient), Just(Answer::Terminal)];
    prop_oneof![
        3 => (0..3usize, 1..=6i64, proptest::option::of(0..3u8)).prop_map(
            |(tenant, amount, idempotency_key)| Op::Grant { tenant, amount, idempotency_key }
        ),
        6 => (0..3usize, 0..6u8, 0..2u8, 0..=3i64, 1..=3u32, any::<bool>()).prop_map(
            |(tenant, key, to, cost, max_attempts, alone)| Op::Submit {
                tenant, key, to, cost, max_attempts, alone
            }
        ),
        1 => any::<Index>().prop_map(|pick| Op::Resubmit { pick }),
        5 => (1..=4usize, answer).prop_map(|(slots, answer)| Op::Work { slots, answer }),
        3 => (1..=3usize).prop_map(|limit| Op::Ghost { limit }),
        4 => (0..=120_000u64).prop_map(|ms| Op::Advance { ms }),
        3 => Just(Op::Reconcile),
        3 => (any::<Index>(), proptest::bool::weighted(0.15))
            .prop_map(|(pick, other_tenant)| Op::Replay { pick, other_tenant }),
        2 => (any::<Index>(), proptest::bool::weighted(0.15))
            .prop_map(|(pick, other_tenant)| Op::Cancel { pick, other_tenant }),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (2..=3usize, proptest::collection::vec(op(), 1..=40))
        .prop_map(|(tenants, ops)| Case { tenants, ops })
}

// ---- the scripted channel -------------------------------------------------------------

/// Answers each send with the next scripted outcome (`Sent` when the script is empty).
#[derive(Debug, Clone, Default)]
struct Scripted {
    script: Arc<Mutex<VecDeque<Outcome>>>,
    calls: Arc<AtomicUsize>,
}

impl Channel for Scripted {
    fn send<'a>(&'a self, _delivery: &'a Leased) -> herald::BoxFuture<'a, Outcome> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let outcome = self.script.lock().unwrap().pop_front().unwrap_or(Outcome::Sent);
        Box::pin(async move { outcome })
    }
}

// ---- reading the tables ---------------------------------------------------------------

#[derive(Debug, Clone)]
struct AccountRow {
    tenant: Uuid,
    quota_key: String,
    stripe: i16,
    granted: i64,
    available: i64,
    reserved: i64,
    spent: i64,
}

#[derive(Debug, Clone)]
struct JournalRow {
    tenant: Uuid,
    quota_key: String,
    stripe: i16,
    kind: String,
    amount: i64,
    delivery: Option<Uuid>,
    seq: Option<i32>,
}

#[derive(Debug, Clone)]
struct DeliveryRow {
    id: Uuid,
    tenant: Uuid,
    state: String,
    quota_key: String,
    cost: i64,
    attempts: i32,
    attempts_base: i32,
    max_attempts: i32,
    seq: i32,
    next_attempt_at: i64,
    lease_until: Option<i64>,
    sent_at: Option<i64>,
}

impl DeliveryRow {
    fn state(&self) -> DeliveryState {
        self.state.parse().unwrap_or_else(|e| panic!("{e}"))
    }
}

#[derive(Debug, Clone, Default)]
struct Snapshot {
    accounts: Vec<AccountRow>,
    journal: Vec<JournalRow>,
    deliveries: Vec<DeliveryRow>,
    /// (delivery, n, outcome)
    attempts: Vec<(Uuid, i32, Option<String>)>,
    /// (delivery, reservation_seq)
    replays: Vec<(Uuid, i32)>,
    payloads: usize,
}

impl Snapshot {
    fn available(&self, tenant: Uuid) -> i64 {
        self.accounts
            .iter()
            .filter(|a| a.tenant == tenant && a.quota_key == QUOTA_KEY)
            .map(|a| a.available)
            .sum()
    }

    fn delivery(&self, id: Uuid) -> Option<&DeliveryRow> {
        self.deliveries.iter().find(|d| d.id == id)
    }
}

type AccountTuple = (Uuid, String, i16, i64, i64, i64, i64);
type JournalTuple = (Uuid, String, i16, String, i64, Option<Uuid>, Option<i32>);
type DeliveryTuple =
    (Uuid, Uuid, String, String, i64, i32, i32, i32, i32, i64, Option<i64>, Option<i64>);

const ACCOUNTS_SQL: &str = "SELECT tenant_id, quota_key, stripe, granted, \
     available, reserved, spent FROM quota_accounts";
const JOURNAL_SQL: &str = "SELECT tenant_id, quota_key, stripe, kind, amount, \
     delivery_id, reservation_seq FROM quota_journal";
/// Attempt rows, plus the attempt a delivery row stands for (in flight, or ended `sent`
/// under its own lease: neither has a row of its own).
const ATTEMPTS_SQL: &str = "SELECT delivery_id, n, outcome FROM delivery_attempts \
     UNION ALL \
     SELECT d.id, d.attempts, CASE WHEN d.state = 'sent' THEN 'sent' END FROM deliveries d \
     WHERE d.state IN ('sending', 'sent') AND d.attempt_worker IS NOT NULL \
       AND NOT EXISTS (SELECT 1 FROM delivery_attempts a \
                       WHERE a.delivery_id = d.id AND a.n = d.attempts)";
const REPLAYS_SQL: &str = "SELECT delivery_id, reservation_seq FROM delivery_replays";
const PAYLOADS_SQL: &str = "SELECT count(*) FROM delivery_payloads";
const SQLITE_DELIVERIES_SQL: &str = "SELECT id, tenant_id, state, quota_key, cost, attempts, \
     attempts_base, max_attempts, reservation_seq, next_attempt_at, lease_until, sent_at \
     FROM deliveries";
const PG_DELIVERIES_SQL: &str = "SELECT id, tenant_id, state, quota_key, cost, attempts, \
     attempts_base, max_attempts, reservation_seq, herald_ms(next_attempt_at), \
     herald_ms(lease_until), herald_ms(sent_at) FROM deliveries";

type Tables =
    (Vec<AccountTuple>, Vec<JournalTuple>, Vec<DeliveryTuple>, Vec<(Uuid, i32, Option<String>)>);

async fn snapshot(herald: &Herald) -> Result<Snapshot, Error> {
    let ((accounts, journal, deliveries, attempts), replays, payloads) = herald
        .transaction(|tx| {
            Box::pin(async move {
                let read: (Tables, Vec<(Uuid, i32)>, i64) = match tx.conn() {
                    Conn::Sqlite(c) => (
                        (
                            sqlx::query_as(ACCOUNTS_SQL).fetch_all(&mut *c).await?,
                            sqlx::query_as(JOURNAL_SQL).fetch_all(&mut *c).await?,
                            sqlx::query_as(SQLITE_DELIVERIES_SQL).fetch_all(&mut *c).await?,
                            sqlx::query_as(ATTEMPTS_SQL).fetch_all(&mut *c).await?,
                        ),
                        sqlx::query_as(REPLAYS_SQL).fetch_all(&mut *c).await?,
                        sqlx::query_scalar(PAYLOADS_SQL).fetch_one(&mut *c).await?,
                    ),
                    Conn::Postgres(c) => (
                        (
                            sqlx::query_as(ACCOUNTS_SQL).fetch_all(&mut *c).await?,
                            sqlx::query_as(JOURNAL_SQL).fetch_all(&mut *c).await?,
                            sqlx::query_as(PG_DELIVERIES_SQL).fetch_all(&mut *c).await?,
                            sqlx::query_as(ATTEMPTS_SQL).fetch_all(&mut *c).await?,
                        ),
                        sqlx::query_as(REPLAYS_SQL).fetch_all(&mut *c).await?,
                        sqlx::query_scalar(PAYLOADS_SQL).fetch_one(&mut *c).await?,
                    ),
                    Conn::MySql(c) => (
                        (
                            sqlx::query_as(ACCOUNTS_SQL).fetch_all(&mut *c).await?,
                            sqlx::query_as(JOURNAL_SQL).fetch_all(&mut *c).await?,
                            sqlx::query_as(SQLITE_DELIVERIES_SQL).fetch_all(&mut *c).await?,
                            sqlx::query_as(ATTEMPTS_SQL).fetch_all(&mut *c).await?,
                        ),
                        sqlx::query_as(REPLAYS_SQL).fetch_all(&mut *c).await?,
                        sqlx::query_scalar(PAYLOADS_SQL).fetch_one(&mut *c).await?,
                    ),
                };
                Ok(read)
            })
        })
        .await?
        .value;
    Ok(Snapshot {
        accounts: accounts
            .into_iter()
            .map(|(tenant, quota_key, stripe, granted, available, reserved, spent)| AccountRow {
                tenant,
                quota_key,
                stripe,
                granted,
                available,
                reserved,
                spent,
            })
            .collect(),
        journal: journal
            .into_iter()
            .map(|(tenant, quota_key, stripe, kind, amount, delivery, seq)| JournalRow {
                tenant,
                quota_key,
                stripe,
                kind,
                amount,
                delivery,
                seq,
            })
            .collect(),
        deliveries: deliveries
            .into_iter()
            .map(|t| DeliveryRow {
                id: t.0,
                tenant: t.1,
                state: t.2,
                quota_key: t.3,
                cost: t.4,
                attempts: t.5,
                attempts_base: t.6,
                max_attempts: t.7,
                seq: t.8,
                next_attempt_at: t.9,
                lease_until: t.10,
                sent_at: t.11,
            })
            .collect(),
        attempts,
        replays,
        payloads: usize::try_from(payloads).unwrap_or(usize::MAX),
    })
}

// ---- the model -------------------------------------------------------------------------

/// A claimed identity: the request's parameters and the delivery it created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Claimed {
    to: u8,
    cost: i64,
    max_attempts: u32,
    id: Uuid,
}

#[derive(Debug, Default)]
struct Model {
    tenants: Vec<Uuid>,
    granted: Vec<i64>,
    /// Per tenant: grant idempotency key number → the amount it granted.
    grant_keys: Vec<BTreeMap<u8, i64>>,
    /// Per tenant: operation key number → the claim.
    claims: Vec<BTreeMap<u8, Claimed>>,
    /// Every delivery created, in order: (tenant index, key).
    deliveries: Vec<(usize, u8)>,
}

impl Model {
    fn claim(&self, pick: &Index) -> Option<(usize, u8, Claimed)> {
        if self.deliveries.is_empty() {
            return None;
        }
        let (t, key) = self.deliveries[pick.index(self.deliveries.len())];
        Some((t, key, self.claims[t][&key]))
    }
}

fn request(tenant: Uuid, key: u8, to: u8, cost: i64, max_attempts: u32) -> SubmitRequest {
    SubmitRequest {
        tenant: tenant.into(),
        operation_key: format!("op-{key}"),
        channel: CHANNEL.into(),
        to: format!("user{to}@example.com"),
        payload: serde_json::json!({ "key": key, "text": "hello" }).into(),
        quota_key: None,
        cost: Some(cost),
        send_at: None,
        max_attempts: Some(max_attempts),
    }
}

/// A result, shortly, for the trace.
fn brief<T>(r: &Result<T, Error>, ok: impl FnOnce(&T) -> String) -> String {
    match r {
        Ok(v) => ok(v),
        Err(Error::QuotaExhausted { .. }) => "QuotaExhausted".into(),
        Err(Error::WrongState { state, .. }) => format!("WrongState({state})"),
        Err(Error::NotFound) => "NotFound".into(),
        Err(Error::IdempotencyKeyReused) => "IdempotencyKeyReused".into(),
        Err(Error::GrantKeyReused { amount_first, .. }) => {
            format!("GrantKeyReused({amount_first})")
        }
        Err(e) => format!("unexpected error: {e} ({e:?})"),
    }
}

fn short(id: Uuid) -> String {
    let s = id.simple().to_string();
    s[s.len() - 6..].to_string()
}

// ---- one case --------------------------------------------------------------------------

struct World {
    herald: Herald,
    clock: Clock,
    channel: Scripted,
    model: Model,
}

impl World {
    fn now(&self) -> i64 {
        self.clock.now_ms().expect("a manual clock")
    }

    fn tenant(&self, t: usize) -> (usize, Uuid) {
        let t = t % self.model.tenants.len();
        (t, self.model.tenants[t])
    }

    /// Runs one operation, checking its result against the prediction made from `before`.
    /// Returns a line for the trace.
    async fn step(&mut self, op: &Op, before: &Snapshot) -> Result<String, String> {
        let now = self.now();
        match *op {
            Op::Grant { tenant, amount, idempotency_key } => {
                let (t, tid) = self.tenant(tenant);
                let key = idempotency_key.map(|k| format!("g{k}"));
                // None: applied; Some(first): a repeat of a grant of `first` under this key,
                // which is `GrantKeyReused` unless `first == amount`.
                let first = idempotency_key.and_then(|k| self.model.grant_keys[t].get(&k).copied());
                let r =
                    self.herald.quota_grant(tid.into(), QUOTA_KEY, amount, key.as_deref()).await;
                let line = format!(
                    "grant t{t} {amount} key={key:?} -> {}",
                    brief(&r, |applied| format!("applied={applied}"))
                );
                match (&r, first) {
                    (Ok(true), None) => {
                        self.model.granted[t] += amount;
                        if let Some(k) = idempotency_key {
                            self.model.grant_keys[t].insert(k, amount);
                        }
                    }
                    (Ok(false), Some(first)) if first == amount => {}
                    (Err(Error::GrantKeyReused { amount_first, .. }), Some(first))
                        if first != amount && *amount_first == first => {}
                    _ => return Err(format!("{line}; expected a grant after {first:?}")),
                }
                Ok(line)
            }
            Op::Submit { tenant, key, to, cost, max_attempts, alone } => {
                let (t, tid) = self.tenant(tenant);
                let line = format!(
                    "submit{} t{t} op-{key} to={to} cost={cost} max_attempts={max_attempts}",
                    if alone { "_alone" } else { "" }
                );
                let req = request(tid, key, to, cost, max_attempts);
                let r = if alone {
                    self.herald.submit_alone(&req).await
                } else {
                    let (herald, req) = (&self.herald, &req);
                    herald
                        .transaction(|tx| Box::pin(async move { herald.submit(tx, req).await }))
                        .await
                        .map(|c| c.value)
                };
                self.submitted(t, tid, key, to, cost, max_attempts, before, line, r)
            }
            Op::Resubmit { pick } => {
                let Some((t, key, c)) = self.model.claim(&pick) else {
                    return Ok("resubmit: no delivery yet".into());
                };
                let tid = self.model.tenants[t];
                let line = format!("resubmit t{t} op-{key} (delivery {})", short(c.id));
                let req = request(tid, key, c.to, c.cost, c.max_attempts);
                let (herald, req) = (&self.herald, &req);
                let r = herald
                    .transaction(|tx| Box::pin(async move { herald.submit(tx, req).await }))
                    .await
                    .map(|c| c.value);
                self.submitted(t, tid, key, c.to, c.cost, c.max_attempts, before, line, r)
            }
            Op::Work { slots, answer } => {
                let due: Vec<&DeliveryRow> = before
                    .deliveries
                    .iter()
                    .filter(|d| d.state() == DeliveryState::Pending && d.next_attempt_at <= now)
                    .collect();
                // Shared among lanes as the worker does (herald_core::fair): each lane and
                // each tenant to its cap of the slots.
                let mut lanes: Vec<DueLane> = Vec::new();
                for d in &due {
                    // Every request is to an address on CHANNEL: one destination.
                    let destination = herald_core::destination_of(CHANNEL, "user@example.com");
                    let lane = Lane { tenant: d.tenant, destination };
                    match lanes.iter_mut().find(|l| l.lane == lane) {
                        Some(l) => l.due += 1,
                        None => lanes.push(DueLane { lane, due: 1, weight: 1, room: None }),
                    }
                }
                lanes.sort_by(|a, b| a.lane.cmp(&b.lane));
                let expect_leased: usize =
                    allot(slots, slots, &lanes, &Busy::default(), &mut [], None).iter().sum();
                let outcome = match answer {
                    Answer::Sent => Outcome::Sent,
                    Answer::Transient => Outcome::transient("busy", "try later"),
                    Answer::Terminal => Outcome::terminal("invalid", "no such mailbox"),
                };
                {
                    let mut script = self.channel.script.lock().unwrap();
                    script.clear();
                    script.extend(std::iter::repeat_n(outcome, slots));
                }
                self.channel.calls.store(0, Ordering::SeqCst);
                let worker = Worker::new(
                    self.herald.clone(),
                    WorkerOptions { slots, ..WorkerOptions::default() },
                    [(CHANNEL.to_string(), Arc::new(self.channel.clone()) as Arc<dyn Channel>)],
                )
                .map_err(|e| format!("Worker::new: {e}"))?;
                let r = worker.run_once().await;
                let line = format!(
                    "work slots={slots} answer={answer:?} (due {}) -> {}",
                    due.len(),
                    brief(&r, |r| format!("{r:?}"))
                );
                let report = r.map_err(|_| line.clone())?;
                let calls = self.channel.calls.load(Ordering::SeqCst);
                if report.leased != expect_leased || calls != report.leased {
                    return Err(format!(
                        "{line}; expected {expect_leased} leased, the channel was called {calls} times"
                    ));
                }
                let exhausted =
                    |d: &&&DeliveryRow| d.attempts + 1 - d.attempts_base >= d.max_attempts;
                let (sent, retried, failed) = match answer {
                    Answer::Sent => (report.leased, 0, 0),
                    Answer::Terminal => (0, 0, report.leased),
                    // Which rows were leased is only known when every due row was.
                    Answer::Transient if expect_leased == due.len() => {
                        let failed = due.iter().filter(exhausted).count();
                        (0, report.leased - failed, failed)
                    }
                    Answer::Transient => (0, report.retried, report.failed),
                };
                if (report.sent, report.retried, report.failed, report.stale)
                    != (sent, retried, failed, 0)
                {
                    return Err(format!(
                        "{line}; expected sent={sent} retried={retried} failed={failed} stale=0"
                    ));
                }
                Ok(line)
            }
            Op::Ghost { limit } => {
                let due = before
                    .deliveries
                    .iter()
                    .filter(|d| d.state() == DeliveryState::Pending && d.next_attempt_at <= now)
                    .count();
                let channels = vec![CHANNEL.to_string()];
                let channels = channels.as_slice();
                let r = self
                    .herald
                    .transaction(|tx| {
                        Box::pin(async move {
                            let lease = Lease {
                                worker: "ghost",
                                channels,
                                limit,
                                lease: GHOST_LEASE,
                                now: herald::Now::At(now),
                            };
                            Ok(deliveries_lease(tx.conn(), &lease).await?)
                        })
                    })
                    .await
                    .map(|c| c.value);
                let line = format!(
                    "ghost lease limit={limit} (due {due}) -> {}",
                    brief(&r, |rows| {
                        let ids: Vec<String> = rows.iter().map(|r| short(r.delivery.id)).collect();
                        format!("leased {ids:?}")
                    })
                );
                let rows = r.map_err(|_| line.clone())?;
                if rows.len() != due.min(limit) {
                    return Err(format!("{line}; expected {} leased", due.min(limit)));
                }
                Ok(line)
            }
            Op::Advance { ms } => {
                self.clock.advance(Duration::from_millis(ms));
                Ok(format!("advance {ms} ms"))
            }
            Op::Reconcile => {
                let expired: Vec<&DeliveryRow> = before
                    .deliveries
                    .iter()
                    .filter(|d| {
                        d.state() == DeliveryState::Sending
                            && d.lease_until.is_some_and(|until| until <= now)
                    })
                    .collect();
                let expect_failed = expired
                    .iter()
                    .filter(|d| d.attempts - d.attempts_base >= d.max_attempts)
                    .count();
                let expect_requeued = expired.len() - expect_failed;
                let r = Reconciler::new(self.herald.clone(), ReconcilerOptions::default())
                    .run_once()
                    .await;
                let line = format!(
                    "reconcile (expired {}) -> {}",
                    expired.len(),
                    brief(&r, |r| format!("requeued={} failed={}", r.requeued, r.failed))
                );
                let report = r.map_err(|_| line.clone())?;
                if (report.requeued, report.failed) != (expect_requeued, expect_failed) {
                    return Err(format!(
                        "{line}; expected requeued={expect_requeued} failed={expect_failed}"
                    ));
                }
                Ok(line)
            }
            Op::Replay { pick, other_tenant } => {
                let Some((t, key, c)) = self.model.claim(&pick) else {
                    return Ok("replay: no delivery yet".into());
                };
                let caller = if other_tenant { (t + 1) % self.model.tenants.len() } else { t };
                let row = before.delivery(c.id).ok_or("a known delivery is missing")?;
                let state = row.state();
                let expect = if caller != t {
                    "NotFound".to_string()
                } else if !state.can_replay() {
                    format!("WrongState({state})")
                } else if row.cost > 0 && before.available(row.tenant) < row.cost {
                    "QuotaExhausted".to_string()
                } else {
                    format!("pending seq={}", row.seq + 1)
                };
                let r = self.herald.replay(self.model.tenants[caller].into(), c.id.into()).await;
                let got = brief(&r, |d| format!("{} seq={}", d.state, d.reservation_seq));
                let line = format!(
                    "replay t{t} op-{key} ({} {state}, cost {}) as t{caller} -> {got}",
                    short(c.id),
                    row.cost
                );
                if got != expect {
                    return Err(format!("{line}; expected {expect}"));
                }
                Ok(line)
            }
            Op::Cancel { pick, other_tenant } => {
                let Some((t, key, c)) = self.model.claim(&pick) else {
                    return Ok("cancel: no delivery yet".into());
                };
                let caller = if other_tenant { (t + 1) % self.model.tenants.len() } else { t };
                let row = before.delivery(c.id).ok_or("a known delivery is missing")?;
                let state = row.state();
                let expect = if caller != t {
                    "NotFound".to_string()
                } else if !state.can_cancel() {
                    format!("WrongState({state})")
                } else {
                    "cancelled".to_string()
                };
                let r = self.herald.cancel(self.model.tenants[caller].into(), c.id.into()).await;
                let got = brief(&r, |d| d.state.to_string());
                let line =
                    format!("cancel t{t} op-{key} ({} {state}) as t{caller} -> {got}", short(c.id));
                if got != expect {
                    return Err(format!("{line}; expected {expect}"));
                }
                Ok(line)
            }
        }
    }

    /// Checks a submit's result against the model and records a new claim.
    #[allow(clippy::too_many_arguments)]
    fn submitted(
        &mut self,
        t: usize,
        tid: Uuid,
        key: u8,
        to: u8,
        cost: i64,
        max_attempts: u32,
        before: &Snapshot,
        line: String,
        r: Result<herald::Submitted, Error>,
    ) -> Result<String, String> {
        let got =
            brief(&r, |s| format!("{} duplicate={}", short(s.delivery.id.as_uuid()), s.duplicate));
        let line = format!("{line} -> {got}");
        let existing = self.model.claims[t].get(&key).copied();
        let expect = match existing {
            Some(c) if (c.to, c.cost, c.max_attempts) == (to, cost, max_attempts) => {
                format!("{} duplicate=true", short(c.id))
            }
            Some(_) => "IdempotencyKeyReused".to_string(),
            None if cost > 0 && before.available(tid) < cost => "QuotaExhausted".to_string(),
            None => "new".to_string(),
        };
        match (&r, existing) {
            (Ok(s), None) if expect == "new" => {
                if s.duplicate || s.delivery.state != DeliveryState::Pending {
                    return Err(format!("{line}; expected a new pending delivery"));
                }
                self.model.claims[t]
                    .insert(key, Claimed { to, cost, max_attempts, id: s.delivery.id.as_uuid() });
                self.model.deliveries.push((t, key));
            }
            (Ok(s), Some(c)) if got == expect && s.delivery.id.as_uuid() == c.id => {}
            (Err(_), _) if got == expect => {}
            _ => return Err(format!("{line}; expected {expect}")),
        }
        Ok(line)
    }
}

// ---- the invariants --------------------------------------------------------------------

fn check(snap: &Snapshot, model: &Model) -> Result<(), String> {
    // Per stripe: balanced, non-negative, equal to its journal (moves between stripes
    // included); per account, the sums, equal to the account's journal without moves.
    for a in &snap.accounts {
        let who = format!("account ({}, {}) stripe {}", short(a.tenant), a.quota_key, a.stripe);
        if a.granted != a.available + a.reserved + a.spent {
            return Err(format!("{who} unbalanced: {a:?}"));
        }
        if a.granted < 0 || a.available < 0 || a.reserved < 0 || a.spent < 0 {
            return Err(format!("{who} negative: {a:?}"));
        }
        let sum = |kind: &str| -> i64 {
            snap.journal
                .iter()
                .filter(|j| {
                    j.tenant == a.tenant
                        && j.quota_key == a.quota_key
                        && j.stripe == a.stripe
                        && j.kind == kind
                })
                .map(|j| j.amount)
                .sum()
        };
        let (grant, reserve, commit, release) =
            (sum("grant"), sum("reserve"), sum("commit"), sum("release"));
        let moved = sum("move_in") - sum("move_out");
        if grant + moved != a.granted
            || reserve - commit - release != a.reserved
            || commit != a.spent
        {
            return Err(format!(
                "{who} disagrees with its journal: {a:?}; journal grant={grant} moved={moved} \
                 reserve={reserve} commit={commit} release={release}"
            ));
        }
    }
    let mut per_account: BTreeMap<(Uuid, &str), (i64, i64)> = BTreeMap::new();
    for a in &snap.accounts {
        per_account.entry((a.tenant, a.quota_key.as_str())).or_default().0 += a.granted;
    }
    for j in &snap.journal {
        if !snap
            .accounts
            .iter()
            .any(|a| a.tenant == j.tenant && a.quota_key == j.quota_key && a.stripe == j.stripe)
        {
            return Err(format!("journal row without its stripe: {j:?}"));
        }
        if j.kind == "grant" {
            per_account.entry((j.tenant, j.quota_key.as_str())).or_default().1 += j.amount;
        }
    }
    for ((tenant, key), (granted, journal)) in per_account {
        if granted != journal {
            return Err(format!(
                "account ({}, {key}) granted {granted}, its grants {journal}",
                short(tenant)
            ));
        }
    }

    // Every (delivery, reservation) has one reserve at most and at most one final movement.
    let mut per_reservation: BTreeMap<(Uuid, i32), (usize, usize, usize)> = BTreeMap::new();
    let movements = ["reserve", "commit", "release"];
    for j in snap.journal.iter().filter(|j| movements.contains(&j.kind.as_str())) {
        let (Some(d), Some(seq)) = (j.delivery, j.seq) else {
            return Err(format!("a movement without its reservation: {j:?}"));
        };
        let e = per_reservation.entry((d, seq)).or_default();
        match j.kind.as_str() {
            "reserve" => e.0 += 1,
            "commit" => e.1 += 1,
            "release" => e.2 += 1,
            other => return Err(format!("unknown journal kind {other}")),
        }
    }
    for ((d, seq), (reserve, commit, release)) in &per_reservation {
        if *reserve != 1 || commit + release > 1 {
            return Err(format!(
                "reservation ({}, {seq}): {reserve} reserve, {commit} commit, {release} release",
                short(*d)
            ));
        }
    }

    // Each delivery against its reservations, attempts and replays.
    for d in &snap.deliveries {
        let who = format!("delivery {} ({}, seq {}, cost {})", short(d.id), d.state, d.seq, d.cost);
        let state = d.state();
        let movements: Vec<&JournalRow> =
            snap.journal.iter().filter(|j| j.delivery == Some(d.id)).collect();
        if d.cost == 0 {
            if !movements.is_empty() {
                return Err(format!("{who}: a free delivery has journal rows {movements:?}"));
            }
        } else {
            for j in &movements {
                if j.amount != d.cost || j.tenant != d.tenant || j.quota_key != d.quota_key {
                    return Err(format!("{who}: a movement of another amount or account {j:?}"));
                }
                if j.seq.is_none_or(|s| s < 1 || s > d.seq) {
                    return Err(format!("{who}: a movement of an unknown reservation {j:?}"));
                }
            }
            for seq in 1..=d.seq {
                let (reserve, commit, release) =
                    per_reservation.get(&(d.id, seq)).copied().unwrap_or_default();
                let expect = if seq < d.seq {
                    (1, 0, 1) // replayed from failed or cancelled: released
                } else {
                    match state {
                        DeliveryState::Pending | DeliveryState::Sending => (1, 0, 0),
                        DeliveryState::Sent => (1, 1, 0),
                        DeliveryState::Failed | DeliveryState::Cancelled => (1, 0, 1),
                    }
                };
                if (reserve, commit, release) != expect {
                    return Err(format!(
                        "{who}: reservation {seq} has reserve/commit/release \
                         {:?}, expected {expect:?}",
                        (reserve, commit, release)
                    ));
                }
            }
        }

        let mut ns: Vec<(i32, Option<&str>)> =
            snap.attempts.iter().filter(|a| a.0 == d.id).map(|a| (a.1, a.2.as_deref())).collect();
        ns.sort_unstable();
        let numbers: Vec<i32> = ns.iter().map(|a| a.0).collect();
        // Every attempt is listed once; only a `sending` delivery's current one has no
        // outcome yet.
        if numbers != (1..=d.attempts).collect::<Vec<_>>() {
            return Err(format!(
                "{who}: attempts = {} ({state:?}) but attempts listed {numbers:?}",
                d.attempts
            ));
        }
        for &(n, outcome) in &ns {
            let in_flight = state == DeliveryState::Sending && n == d.attempts;
            if outcome.is_none() != in_flight {
                return Err(format!("{who}: attempt {n} has outcome {outcome:?} ({state:?})"));
            }
        }
        if let Some(&(n, outcome)) = ns.last() {
            let fits = match state {
                DeliveryState::Sent => outcome == Some("sent"),
                DeliveryState::Failed => {
                    matches!(outcome, Some("transient" | "terminal" | "lost"))
                        && n > d.attempts_base
                }
                _ => true,
            };
            if !fits {
                return Err(format!("{who}: last attempt {n} has outcome {outcome:?}"));
            }
        } else if matches!(state, DeliveryState::Sent | DeliveryState::Failed) {
            return Err(format!("{who}: final without any attempt"));
        }
        let used = d.attempts - d.attempts_base;
        let budget_ok = match state {
            DeliveryState::Pending => (0..d.max_attempts).contains(&used),
            DeliveryState::Sending => (1..=d.max_attempts).contains(&used),
            _ => (0..=d.max_attempts).contains(&used),
        };
        if !budget_ok {
            return Err(format!(
                "{who}: attempts {} base {} max {}",
                d.attempts, d.attempts_base, d.max_attempts
            ));
        }
        if (state == DeliveryState::Sending) != d.lease_until.is_some() {
            return Err(format!("{who}: lease_until {:?}", d.lease_until));
        }
        if (state == DeliveryState::Sent) != d.sent_at.is_some() {
            return Err(format!("{who}: sent_at {:?}", d.sent_at));
        }
        let mut replays: Vec<i32> =
            snap.replays.iter().filter(|r| r.0 == d.id).map(|r| r.1).collect();
        replays.sort_unstable();
        if replays != (2..=d.seq).collect::<Vec<_>>() {
            return Err(format!("{who}: replay rows {replays:?}"));
        }
    }
    for (d, seq) in per_reservation.keys() {
        if snap.delivery(*d).is_none() {
            return Err(format!(
                "reservation ({}, {seq}) of a delivery that does not exist",
                short(*d)
            ));
        }
    }

    // The model.
    if snap.deliveries.len() != model.deliveries.len() || snap.payloads != snap.deliveries.len() {
        return Err(format!(
            "{} deliveries and {} payloads in the database, {} in the model",
            snap.deliveries.len(),
            snap.payloads,
            model.deliveries.len()
        ));
    }
    for (t, &tenant) in model.tenants.iter().enumerate() {
        let rows = snap.deliveries.iter().filter(|d| d.tenant == tenant).count();
        let modelled = model.deliveries.iter().filter(|(mt, _)| *mt == t).count();
        let granted: i64 =
            snap.accounts.iter().filter(|a| a.tenant == tenant).map(|a| a.granted).sum();
        if rows != modelled || granted != model.granted[t] {
            return Err(format!(
                "tenant t{t}: {rows} deliveries and {granted} granted in the database, \
                 {modelled} and {} in the model",
                model.granted[t]
            ));
        }
    }
    Ok(())
}

async fn run_case(db: &TestDb, case: &Case) -> Result<(), String> {
    let start = jiff::Timestamp::from_second(START_SECOND).expect("a valid time");
    let clock = Clock::manual(start);
    let herald = db.herald().await.with_clock(clock.clone());
    let result = run_ops(&herald, clock, case).await;
    herald.close().await;
    result
}

async fn run_ops(herald: &Herald, clock: Clock, case: &Case) -> Result<(), String> {
    let mut model = Model::default();
    for t in 0..case.tenants {
        let tenant = herald.tenant_create(&format!("t{t}")).await.map_err(|e| e.to_string())?;
        model.tenants.push(tenant.id.as_uuid());
        model.granted.push(0);
        model.grant_keys.push(BTreeMap::new());
        model.claims.push(BTreeMap::new());
    }
    let mut world = World { herald: herald.clone(), clock, channel: Scripted::default(), model };
    let mut before = snapshot(herald).await.map_err(|e| format!("snapshot: {e}"))?;
    check(&before, &world.model)?;
    let mut trace = String::new();
    for (i, op) in case.ops.iter().enumerate() {
        let result = match world.step(op, &before).await {
            Ok(line) => {
                let _ = writeln!(trace, "  {i:>2}: {line}");
                match snapshot(herald).await {
                    Ok(after) => check(&after, &world.model).map(|()| after),
                    Err(e) => Err(format!("snapshot: {e}")),
                }
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(after) => before = after,
            Err(e) => {
                return Err(format!("step {i} ({op:?}): {e}\noperations as executed:\n{trace}"));
            }
        }
    }
    if std::env::var_os("HERALD_PROPERTY_TRACE").is_some() {
        eprintln!("case ({} tenants):\n{trace}", case.tenants);
    }
    Ok(())
}

// ---- running it ------------------------------------------------------------------------

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// Runs the property `cases` times (or `PROPTEST_CASES`), each case on a fresh database.
fn check_property(
    backend: &str,
    cases: u32,
    fresh_db: impl Fn(&tokio::runtime::Runtime) -> TestDb,
) {
    let rt = runtime();
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(cases);
    let config = Config {
        cases,
        // Others edit this tree concurrently: no regression files are written.
        failure_persistence: None,
        max_shrink_iters: 2_000,
        max_shrink_time: 180_000,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let started = Instant::now();
    let result = runner.run(&case(), |case| {
        let db = fresh_db(&rt);
        let result = rt.block_on(run_case(&db, &case));
        drop(db);
        result.map_err(TestCaseError::fail)
    });
    match result {
        Ok(()) => eprintln!("{backend}: {cases} cases passed in {:?}", started.elapsed()),
        Err(TestError::Fail(reason, minimal)) => {
            panic!("{backend}: the property failed: {reason}\nminimal input: {minimal:#?}")
        }
        Err(TestError::Abort(reason)) => panic!("{backend}: aborted: {reason}"),
    }
}

#[test]
fn ledger_and_state_machine_sqlite() {
    check_property("sqlite", 48, |_| common::sqlite());
}

#[test]
fn ledger_and_state_machine_postgres() {
    let Some(base) = common::postgres_url() else {
        eprintln!("{} is not set: skipping PostgreSQL", common::POSTGRES_ENV);
        return;
    };
    check_property("postgres", 16, |rt| rt.block_on(common::postgres(&base)));
}
