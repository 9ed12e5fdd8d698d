//! The delivery engine end to end on every backend (SPEC guarantees 3, 5, 6, 7, 10, 12,
//! 13): workers, outcomes, fencing, the reconciler, replay and cancel, shutdown and
//! wake-ups — with real connections and tasks, time moved by a manual clock.

use crate::common;
use herald::{
    AttemptReport, Channel, DeliveryState, Error, Leased, Now, Outcome, Reconciler,
    ReconcilerOptions, SubmitRequest, Worker, WorkerOptions,
};
use herald_core::{Decision, Report, RetryPolicy};
use herald_store::deliveries::{
    Lease, deliveries_lease, deliveries_sent_fenced, delivery_hand_back,
};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, mpsc};

use crate::common::START_S;

// ---- a scripted channel ---------------------------------------------------------------

/// Returns scripted outcomes (then `Sent`), records every call, and can hold sends until
/// released.
#[derive(Default)]
struct Script {
    outcomes: Mutex<VecDeque<Outcome>>,
    calls: Mutex<Vec<(herald::DeliveryId, u32)>>,
    hold: Mutex<Option<Arc<Notify>>>,
    entered: Mutex<Option<mpsc::UnboundedSender<herald::DeliveryId>>>,
    panic_next: Mutex<bool>,
}

impl Script {
    fn new(outcomes: impl IntoIterator<Item = Outcome>) -> Arc<Script> {
        Arc::new(Script {
            outcomes: Mutex::new(outcomes.into_iter().collect()),
            ..Script::default()
        })
    }
    fn calls(&self) -> Vec<(herald::DeliveryId, u32)> {
        self.calls.lock().unwrap().clone()
    }
    /// From now on, sends wait until the returned Notify releases them (one per permit).
    fn hold(&self) -> Arc<Notify> {
        let release = Arc::new(Notify::new());
        *self.hold.lock().unwrap() = Some(release.clone());
        release
    }
    /// From now on, every send that starts is reported on the receiver.
    fn watch(&self) -> mpsc::UnboundedReceiver<herald::DeliveryId> {
        let (tx, rx) = mpsc::unbounded_channel();
        *self.entered.lock().unwrap() = Some(tx);
        rx
    }
}

impl Channel for Script {
    fn send<'a>(&'a self, d: &'a Leased) -> herald::BoxFuture<'a, Outcome> {
        Box::pin(async move {
            self.calls.lock().unwrap().push((d.id, d.attempt));
            if let Some(entered) = self.entered.lock().unwrap().as_ref() {
                let _ = entered.send(d.id);
            }
            if std::mem::take(&mut *self.panic_next.lock().unwrap()) {
                panic!("the channel blew up");
            }
            let hold = self.hold.lock().unwrap().clone();
            if let Some(release) = hold {
                release.notified().await;
            }
            self.outcomes.lock().unwrap().pop_front().unwrap_or(Outcome::Sent)
        })
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
    common::envs("email").await.into_iter().map(Env).collect()
}

fn request(tenant: herald::TenantId, key: &str) -> SubmitRequest {
    let payload = serde_json::json!({"subject": "ready", "text": "your repair is ready"});
    SubmitRequest {
        cost: Some(2),
        ..SubmitRequest::new(tenant, key, "email", "a@example.com", payload)
    }
}

impl Env {
    async fn submit(&self, req: SubmitRequest) -> herald::Delivery {
        self.herald
            .submit_alone(&req)
            .await
            .unwrap_or_else(|e| panic!("{}: submit failed: {e:?}", self.name))
            .delivery
    }

    fn worker(&self, channel: Arc<Script>, options: WorkerOptions) -> Worker {
        let channel: Arc<dyn Channel> = channel;
        Worker::new(self.herald.clone(), options, [("email".to_string(), channel)]).unwrap()
    }

    async fn get(&self, id: herald::DeliveryId) -> herald::Delivery {
        self.herald.delivery(self.tenant, id).await.unwrap()
    }

    async fn quota(&self) -> (i64, i64, i64, i64) {
        let q = self.herald.quotas(self.tenant).await.unwrap();
        let a = q.iter().find(|a| a.quota_key == "email").unwrap();
        (a.granted, a.available, a.reserved, a.spent)
    }

    async fn outcomes(&self, id: herald::DeliveryId) -> Vec<String> {
        let attempts = self.herald.attempts(self.tenant, id).await.unwrap();
        attempts.into_iter().map(|a| a.outcome.unwrap_or_else(|| "running".into())).collect()
    }

    fn reconciler(&self) -> Reconciler {
        Reconciler::new(self.herald.clone(), ReconcilerOptions::default())
    }
}

fn options(id: &str) -> WorkerOptions {
    WorkerOptions { id: id.to_string(), ..WorkerOptions::default() }
}

// ---- outcomes ---------------------------------------------------------------------------

#[tokio::test]
async fn sent_commits_the_reservation() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        assert_eq!((d.state, d.attempts, d.reservation_seq), (DeliveryState::Pending, 0, 1));
        assert_eq!(env.quota().await, (100, 98, 2, 0), "{}: reserved at submit", env.name);
        let channel = Script::new([]);
        let report = env.worker(channel.clone(), options("w1")).run_once().await.unwrap();
        assert_eq!((report.leased, report.sent), (1, 1), "{}", env.name);
        let d = env.get(d.id).await;
        assert_eq!((d.state, d.attempts), (DeliveryState::Sent, 1), "{}", env.name);
        assert!(d.sent_at.is_some());
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: committed", env.name);
        assert_eq!(env.outcomes(d.id).await, ["sent"], "{}", env.name);
        assert_eq!(channel.calls(), [(d.id, 1)]);
        // Nothing left to do.
        assert_eq!(env.worker(channel, options("w1")).run_once().await.unwrap().leased, 0);
    }
}

#[tokio::test]
async fn transient_failures_back_off_keep_the_reservation_then_send() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        let channel = Script::new([
            Outcome::transient("http_503", "unavailable"),
            Outcome::Transient {
                retry_after: Some(Duration::from_secs(30)),
                code: "http_429".into(),
                message: "slow down".into(),
            },
        ]);
        let worker = env.worker(channel.clone(), options("w1"));
        assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}", env.name);
        let after_first = env.get(d.id).await;
        assert_eq!(after_first.state, DeliveryState::Pending, "{}", env.name);
        assert_eq!(after_first.last_error.as_deref(), Some("unavailable"));
        let wait = after_first
            .next_attempt_at
            .duration_since(jiff::Timestamp::from_second(START_S).unwrap());
        assert!(
            wait <= jiff::SignedDuration::from_secs(1),
            "{}: backoff ceiling 1 s, got {wait:?}",
            env.name
        );
        assert_eq!(env.quota().await, (100, 98, 2, 0), "{}: reservation kept", env.name);

        env.clock.advance(Duration::from_secs(1));
        assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}", env.name);
        // Retry-After 30 s is longer than the backoff: nothing is due before it.
        env.clock.advance(Duration::from_secs(29));
        assert_eq!(worker.run_once().await.unwrap().leased, 0, "{}: honours Retry-After", env.name);
        env.clock.advance(Duration::from_secs(2));
        assert_eq!(worker.run_once().await.unwrap().sent, 1, "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["transient", "transient", "sent"], "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}", env.name);
        let attempts: Vec<u32> = channel.calls().iter().map(|c| c.1).collect();
        assert_eq!(attempts, [1, 2, 3], "{}", env.name);
    }
}

#[tokio::test]
async fn a_retry_after_beyond_the_cap_is_capped() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        let channel = Script::new([Outcome::Transient {
            retry_after: Some(Duration::from_secs(86_400)),
            code: "http_429".into(),
            message: "tomorrow".into(),
        }]);
        let retry =
            RetryPolicy { retry_after_max: Duration::from_secs(3600), ..RetryPolicy::default() };
        let worker = env.worker(channel, WorkerOptions { retry, ..options("w1") });
        worker.run_once().await.unwrap();
        let wait = env.get(d.id).await.next_attempt_at.as_second() - START_S;
        assert_eq!(wait, 3600, "{}", env.name);
    }
}

#[tokio::test]
async fn terminal_and_exhausted_deliveries_fail_and_release() {
    for env in envs().await {
        let terminal = env.submit(request(env.tenant, "op-terminal")).await;
        let channel = Script::new([Outcome::terminal("http_410", "gone")]);
        env.worker(channel, options("w1")).run_once().await.unwrap();
        let d = env.get(terminal.id).await;
        assert_eq!((d.state, d.last_error.as_deref()), (DeliveryState::Failed, Some("gone")));
        assert_eq!(env.quota().await, (100, 100, 0, 0), "{}: released", env.name);
        assert_eq!(env.outcomes(d.id).await, ["terminal"]);

        let mut req = request(env.tenant, "op-exhausted");
        req.max_attempts = Some(2);
        let exhausted = env.submit(req).await;
        let channel = Script::new([Outcome::transient("e", "1"), Outcome::transient("e", "2")]);
        let worker = env.worker(channel, options("w1"));
        worker.run_once().await.unwrap();
        env.clock.advance(Duration::from_secs(5));
        assert_eq!(worker.run_once().await.unwrap().failed, 1, "{}", env.name);
        let d = env.get(exhausted.id).await;
        assert_eq!((d.state, d.attempts), (DeliveryState::Failed, 2), "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["transient", "transient"]);
        assert_eq!(env.quota().await, (100, 100, 0, 0), "{}: released", env.name);
    }
}

#[tokio::test]
async fn a_panicking_or_hung_channel_is_transient_and_the_worker_survives() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        let channel = Script::new([]);
        *channel.panic_next.lock().unwrap() = true;
        let worker = env.worker(channel.clone(), options("w1"));
        assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}", env.name);
        let attempts = env.herald.attempts(env.tenant, d.id).await.unwrap();
        assert_eq!(attempts[0].error_code.as_deref(), Some("panic"), "{}", env.name);

        env.clock.advance(Duration::from_secs(1));
        let _never = channel.hold();
        let mut entered = channel.watch();
        let quick = WorkerOptions { send_timeout: Duration::from_millis(200), ..options("w2") };
        let report = env.worker(channel.clone(), quick).run_once().await.unwrap();
        assert!(entered.try_recv().is_ok(), "{}: the send started", env.name);
        assert_eq!(report.retried, 1, "{}", env.name);
        let attempts = env.herald.attempts(env.tenant, d.id).await.unwrap();
        assert_eq!(attempts[1].error_code.as_deref(), Some("timeout"), "{}", env.name);
    }
}

#[tokio::test]
async fn a_send_timeout_that_does_not_fit_in_the_lease_is_refused_at_start() {
    let herald = common::sqlite().herald().await;
    let bad = WorkerOptions {
        lease: Duration::from_secs(20),
        send_timeout: Duration::from_secs(30),
        ..WorkerOptions::default()
    };
    let result = Worker::new(herald, bad, []);
    match result {
        Err(Error::Invalid(message)) => {
            assert!(message.contains("shorter than the lease"), "{message}")
        }
        other => panic!("expected a clear error, got {other:?}"),
    }
}

#[tokio::test]
async fn workers_lease_only_the_channels_they_have() {
    for env in envs().await {
        let mut sms = request(env.tenant, "op-sms");
        sms.channel = "sms".into();
        sms.cost = Some(0);
        let d = env.submit(sms).await;
        let report = env.worker(Script::new([]), options("w1")).run_once().await.unwrap();
        assert_eq!(report.leased, 0, "{}", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Pending, "{}", env.name);
    }
}

// ---- nothing before commit, nothing lost after it ------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_leased_before_commit_or_after_rollback() {
    for env in envs().await {
        let worker = env.worker(Script::new([]), options("w1"));
        // Rolled back: never visible.
        let (h, tenant) = (env.herald.clone(), env.tenant);
        let rolled_back = env
            .herald
            .transaction(|tx| {
                let h = h.clone();
                Box::pin(async move {
                    h.submit(tx, &request(tenant, "op-rollback")).await?;
                    Err::<(), _>(Error::app("the business change failed"))
                })
            })
            .await;
        assert!(rolled_back.is_err());
        assert_eq!(worker.run_once().await.unwrap().leased, 0, "{}", env.name);

        // Open transaction: a worker (another connection) cannot see the claim yet.
        if env.herald.backend() == herald::Backend::Postgres {
            let pool = env.herald.store().postgres_pool().unwrap();
            let mut own = pool.begin().await.unwrap();
            env.herald.submit_in(&mut own, &request(env.tenant, "op-open")).await.unwrap();
            assert_eq!(worker.run_once().await.unwrap().leased, 0, "{}: before commit", env.name);
            own.commit().await.unwrap();
            assert_eq!(worker.run_once().await.unwrap().sent, 1, "{}: after commit", env.name);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_wakes_a_waiting_worker_without_waiting_for_the_poll() {
    for env in envs().await {
        let channel = Script::new([]);
        let mut entered = channel.watch();
        let slow_poll = WorkerOptions { poll_interval: Duration::from_secs(300), ..options("w1") };
        let worker = env.worker(channel.clone(), slow_poll);
        let stop = herald::CancellationToken::new();
        let running = tokio::spawn({
            let (worker, stop) = (worker.clone(), stop.clone());
            async move { worker.run(stop).await }
        });
        // Let the worker reach its idle wait (its first lease finds nothing).
        tokio::task::yield_now().await;
        let d = env.submit(request(env.tenant, "op-wake")).await;
        let woke = tokio::time::timeout(Duration::from_secs(5), entered.recv()).await;
        assert_eq!(
            woke.ok().flatten(),
            Some(d.id),
            "{}: woken long before the 300 s poll",
            env.name
        );
        stop.cancel();
        running.await.unwrap().unwrap();
    }
}

// ---- the reconciler, fencing -----------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_send_is_reconciled_and_the_next_attempt_sends_the_same_id() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        let channel = Script::new([]);
        let _held = channel.hold();
        let mut entered = channel.watch();
        let doomed = env.worker(channel.clone(), options("doomed"));
        let task = tokio::spawn(async move { doomed.run_once().await });
        assert_eq!(entered.recv().await, Some(d.id), "{}", env.name);
        task.abort(); // the process "dies" mid-send
        assert!(task.await.unwrap_err().is_cancelled());
        assert_eq!(env.get(d.id).await.state, DeliveryState::Sending, "{}", env.name);

        // A live lease is not reclaimed.
        let reconciler = env.reconciler();
        assert_eq!(reconciler.run_once().await.unwrap().requeued, 0, "{}", env.name);
        env.clock.advance(Duration::from_secs(61));
        let report = reconciler.run_once().await.unwrap();
        assert_eq!((report.requeued, report.failed), (1, 0), "{}", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Pending, "{}", env.name);
        // A second reconciler pass (or a second reconciler) finds nothing more.
        assert_eq!(reconciler.run_once().await.unwrap().requeued, 0, "{}", env.name);

        env.clock.advance(Duration::from_secs(2));
        let survivor = Script::new([]);
        let report = env.worker(survivor.clone(), options("survivor")).run_once().await.unwrap();
        assert_eq!(report.sent, 1, "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["lost", "sent"], "{}", env.name);
        assert_eq!(channel.calls(), [(d.id, 1)], "{}", env.name);
        assert_eq!(survivor.calls(), [(d.id, 2)], "{}: same id, next attempt", env.name);
        let d = env.get(d.id).await;
        assert_eq!((d.state, d.attempts), (DeliveryState::Sent, 2), "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: charged once", env.name);
    }
}

#[tokio::test]
async fn lost_leases_exhaust_attempts_and_release() {
    for env in envs().await {
        let mut req = request(env.tenant, "op-1");
        req.max_attempts = Some(1);
        let d = env.submit(req).await;
        ghost_lease(&env, "ghost").await;
        env.clock.advance(Duration::from_secs(61));
        let report = env.reconciler().run_once().await.unwrap();
        assert_eq!((report.requeued, report.failed), (0, 1), "{}", env.name);
        let d = env.get(d.id).await;
        assert_eq!(d.state, DeliveryState::Failed, "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["lost"], "{}", env.name);
        assert_eq!(env.quota().await, (100, 100, 0, 0), "{}", env.name);
    }
}

/// An attempt's row is written when it ends; until then the attempt is read from the
/// lease, so it is listed (worker, start, no outcome) all the same.
#[tokio::test]
async fn an_attempt_in_flight_is_listed_and_keeps_its_start_when_it_ends() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        let leased_at = env.clock.now_ms().map(|ms| ms / 1000);
        assert_eq!(ghost_lease(&env, "w1").await, 1);
        let running = env.herald.attempts(env.tenant, d.id).await.unwrap();
        assert_eq!(running.len(), 1, "{}: {running:?}", env.name);
        let a = &running[0];
        assert_eq!((a.n, a.worker.as_str(), &a.outcome), (1, "w1", &None), "{}", env.name);
        assert_eq!(a.finished_at, None, "{}", env.name);
        if let Some(secs) = leased_at {
            assert_eq!(a.started_at.as_second(), secs, "{}: started when leased", env.name);
        }
        env.clock.advance(Duration::from_secs(61));
        env.reconciler().run_once().await.unwrap();
        let ended = env.herald.attempts(env.tenant, d.id).await.unwrap();
        assert_eq!(ended.len(), 1, "{}: {ended:?}", env.name);
        assert_eq!(ended[0].outcome.as_deref(), Some("lost"), "{}", env.name);
        assert_eq!(ended[0].started_at, a.started_at, "{}: the same start", env.name);
        assert!(ended[0].finished_at > Some(a.started_at), "{}: {ended:?}", env.name);
    }
}

/// Leases every due delivery as `worker`, which then vanishes.
async fn ghost_lease(env: &Env, worker: &str) -> usize {
    let now = env.clock.now();
    let channels = ["email".to_string()];
    env.herald
        .transaction(|tx| {
            let channels = &channels;
            Box::pin(async move {
                let lease =
                    Lease { worker, channels, limit: 100, lease: Duration::from_secs(60), now };
                Ok(deliveries_lease(tx.conn(), &lease).await?.len())
            })
        })
        .await
        .unwrap()
        .value
}

/// Records `report` for attempt `n` of `worker`, as that worker would.
async fn finish(
    env: &Env,
    id: herald::DeliveryId,
    worker: &str,
    n: i32,
    report: Report,
) -> Option<Decision> {
    let report = AttemptReport {
        delivery: id,
        n,
        worker: worker.to_string(),
        tenant: env.tenant,
        quota_key: "email".to_string(),
        report,
        retry_after: None,
        jitter: 0.5,
        error_code: None,
        error_message: None,
    };
    env.herald.record_report(&report, &RetryPolicy::default()).await.unwrap()
}

#[tokio::test]
async fn stale_outcomes_are_fenced_but_a_stale_sent_is_kept() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        assert_eq!(ghost_lease(&env, "w1").await, 1);
        env.clock.advance(Duration::from_secs(61));
        env.reconciler().run_once().await.unwrap();
        env.clock.advance(Duration::from_secs(2));
        assert_eq!(ghost_lease(&env, "w2").await, 1, "{}: attempt 2 leased by w2", env.name);
        let attempt_2_start = env.herald.attempts(env.tenant, d.id).await.unwrap()[1].started_at;
        env.clock.advance(Duration::from_secs(3));

        // w1 comes back from the dead with a terminal outcome: ignored.
        assert_eq!(finish(&env, d.id, "w1", 1, Report::Terminal).await, Some(Decision::Ignore));
        assert_eq!(env.get(d.id).await.state, DeliveryState::Sending, "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 2, 0), "{}: nothing released", env.name);
        // w1 says it did send after all: the effect happened, so the delivery is sent.
        assert_eq!(
            finish(&env, d.id, "w1", 1, Report::Sent).await,
            Some(Decision::MarkSent { stale: true })
        );
        assert_eq!(env.get(d.id).await.state, DeliveryState::Sent, "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: charged once", env.name);
        // The sent row is not taken for w2's attempt, which was cut short, not sent.
        assert_eq!(env.outcomes(d.id).await, ["sent"], "{}", env.name);
        // w2's own outcome afterwards changes nothing but its attempt row.
        assert_eq!(finish(&env, d.id, "w2", 2, Report::Transient).await, Some(Decision::Ignore));
        assert_eq!(
            finish(&env, d.id, "w2", 2, Report::Sent).await,
            Some(Decision::RecordSentAgain)
        );
        assert_eq!(env.outcomes(d.id).await, ["sent", "sent"], "{}", env.name);
        let attempts = env.herald.attempts(env.tenant, d.id).await.unwrap();
        assert_eq!(attempts[1].started_at, attempt_2_start, "{}: started when leased", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: still charged once", env.name);
    }
}

/// An attempt that ends `sent` under its own lease writes no attempt row (one insert fewer
/// per delivery on the hot path): it is listed from the delivery row, with its worker, its
/// start at the lease and its end at `sent_at`; a repeated `sent` from it changes nothing.
#[tokio::test]
async fn an_attempt_sent_under_its_own_lease_is_listed_from_the_delivery() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        assert_eq!(ghost_lease(&env, "w1").await, 1);
        let running = env.herald.attempts(env.tenant, d.id).await.unwrap();
        env.clock.advance(Duration::from_secs(5));
        assert_eq!(
            finish(&env, d.id, "w1", 1, Report::Sent).await,
            Some(Decision::MarkSent { stale: false })
        );
        let sent = env.herald.attempts(env.tenant, d.id).await.unwrap();
        assert_eq!(sent.len(), 1, "{}: {sent:?}", env.name);
        let a = &sent[0];
        assert_eq!((a.n, a.worker.as_str()), (1, "w1"), "{}", env.name);
        assert_eq!(a.outcome.as_deref(), Some("sent"), "{}", env.name);
        assert_eq!(a.started_at, running[0].started_at, "{}: started when leased", env.name);
        assert_eq!(a.finished_at, env.get(d.id).await.sent_at, "{}: ended when sent", env.name);
        if env.clock.now_ms().is_some() {
            let took = a.finished_at.map(|f| f.duration_since(a.started_at).as_secs());
            assert_eq!(took, Some(5), "{}: {a:?}", env.name);
        }

        env.clock.advance(Duration::from_secs(1));
        assert_eq!(
            finish(&env, d.id, "w1", 1, Report::Sent).await,
            Some(Decision::RecordSentAgain)
        );
        assert_eq!(env.herald.attempts(env.tenant, d.id).await.unwrap(), sent, "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: charged once", env.name);
    }
}

/// One recorder batch can hold a stale and a current attempt of one delivery (its lease
/// expired and the same worker leased it again): the set-based `sent` considers only an
/// id's first pair, so neither is mismarked; the other goes through `delivery_finish`.
#[tokio::test]
async fn a_batch_with_two_attempts_of_one_delivery_marks_neither_by_the_wrong_one() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        assert_eq!(ghost_lease(&env, "w1").await, 1);
        env.clock.advance(Duration::from_secs(61));
        env.reconciler().run_once().await.unwrap();
        env.clock.advance(Duration::from_secs(2));
        assert_eq!(ghost_lease(&env, "w1").await, 1, "{}: attempt 2, same worker", env.name);

        let now = env.clock.now();
        let batch = [(d.id.as_uuid(), 1), (d.id.as_uuid(), 2)];
        let marked = env
            .herald
            .transaction(|tx| {
                Box::pin(
                    async move { Ok(deliveries_sent_fenced(tx.conn(), "w1", &batch, now).await?) },
                )
            })
            .await
            .unwrap()
            .value;
        assert_eq!(marked, [], "{}: attempt 1 is stale, attempt 2 was not considered", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Sending, "{}", env.name);
        assert_eq!(
            finish(&env, d.id, "w1", 2, Report::Sent).await,
            Some(Decision::MarkSent { stale: false })
        );
        assert_eq!(env.outcomes(d.id).await, ["lost", "sent"], "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: charged once", env.name);
    }
}

#[tokio::test]
async fn a_late_sent_on_a_failed_delivery_is_recorded_not_applied() {
    for env in envs().await {
        let mut req = request(env.tenant, "op-1");
        req.max_attempts = Some(1);
        let d = env.submit(req).await;
        ghost_lease(&env, "w1").await;
        env.clock.advance(Duration::from_secs(61));
        assert_eq!(env.reconciler().run_once().await.unwrap().failed, 1);
        assert_eq!(finish(&env, d.id, "w1", 1, Report::Sent).await, Some(Decision::RecordLateSent));
        let d = env.get(d.id).await;
        assert_eq!(d.state, DeliveryState::Failed, "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["late_sent"], "{}", env.name);
        assert_eq!(env.quota().await, (100, 100, 0, 0), "{}: stays released", env.name);
    }
}

// ---- replay and cancel ---------------------------------------------------------------------

#[tokio::test]
async fn replay_keeps_identity_takes_a_new_reservation_and_a_fresh_budget() {
    for env in envs().await {
        let mut req = request(env.tenant, "op-1");
        req.max_attempts = Some(1);
        let d = env.submit(req.clone()).await;
        let channel = Script::new([Outcome::terminal("bad", "refused")]);
        let worker = env.worker(channel.clone(), options("w1"));
        worker.run_once().await.unwrap();
        assert_eq!(env.get(d.id).await.state, DeliveryState::Failed);

        let replayed = env.herald.replay(env.tenant, d.id).await.unwrap();
        assert_eq!(
            (replayed.id, replayed.operation_key.as_str(), replayed.state),
            (d.id, "op-1", DeliveryState::Pending),
            "{}",
            env.name
        );
        assert_eq!((replayed.reservation_seq, replayed.attempts), (2, 1), "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 2, 0), "{}: reserved again", env.name);
        assert_eq!(worker.run_once().await.unwrap().sent, 1, "{}: a fresh attempt", env.name);
        let d2 = env.get(d.id).await;
        assert_eq!((d2.state, d2.attempts), (DeliveryState::Sent, 2), "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["terminal", "sent"], "{}", env.name);
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}", env.name);
        // The identity still deduplicates the original submit.
        let h = env.herald.clone();
        let again = env
            .herald
            .transaction(|tx| {
                let (h, req) = (h.clone(), req.clone());
                Box::pin(async move { h.submit(tx, &req).await })
            })
            .await
            .unwrap()
            .value;
        assert!(again.duplicate && again.delivery.id == d.id, "{}", env.name);

        // Only failed/cancelled deliveries replay; other tenants see nothing.
        assert!(matches!(
            env.herald.replay(env.tenant, d.id).await,
            Err(Error::WrongState { state: DeliveryState::Sent, .. })
        ));
        let other = env.herald.tenant_create("other").await.unwrap().id;
        assert!(matches!(env.herald.replay(other, d.id).await, Err(Error::NotFound)));
    }
}

#[tokio::test]
async fn cancel_releases_a_pending_delivery_and_nothing_else_cancels() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        let cancelled = env.herald.cancel(env.tenant, d.id).await.unwrap();
        assert_eq!(cancelled.state, DeliveryState::Cancelled, "{}", env.name);
        assert_eq!(env.quota().await, (100, 100, 0, 0), "{}", env.name);
        assert!(matches!(
            env.herald.cancel(env.tenant, d.id).await,
            Err(Error::WrongState { state: DeliveryState::Cancelled, .. })
        ));
        assert_eq!(env.worker(Script::new([]), options("w1")).run_once().await.unwrap().leased, 0);
        let other = env.herald.tenant_create("other").await.unwrap().id;
        assert!(matches!(env.herald.cancel(other, d.id).await, Err(Error::NotFound)));
        assert!(matches!(
            env.herald.cancel(env.tenant, herald::DeliveryId::new_v7()).await,
            Err(Error::NotFound)
        ));
    }
}

// ---- shutdown --------------------------------------------------------------------------

#[tokio::test]
async fn a_hand_back_does_not_spend_an_attempt() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        ghost_lease(&env, "w1").await;
        let (id, handed) = (
            d.id,
            env.herald
                .transaction(|tx| {
                    Box::pin(async move {
                        Ok(delivery_hand_back(tx.conn(), d.id.as_uuid(), "w1", 1).await?)
                    })
                })
                .await
                .unwrap()
                .value,
        );
        assert!(handed, "{}", env.name);
        let d = env.get(id).await;
        assert_eq!((d.state, d.attempts), (DeliveryState::Pending, 0), "{}", env.name);
        assert!(env.outcomes(id).await.is_empty(), "{}: the attempt row is gone", env.name);
        assert_eq!(env.worker(Script::new([]), options("w2")).run_once().await.unwrap().sent, 1);
        assert_eq!(env.outcomes(id).await, ["sent"], "{}: attempt 1 again", env.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_a_started_send_finish_and_never_releases_one_early() {
    for env in envs().await {
        // Within the grace period: the started send finishes and is recorded.
        let d = env.submit(request(env.tenant, "op-finishes")).await;
        let channel = Script::new([]);
        let release = channel.hold();
        let mut entered = channel.watch();
        let worker = env.worker(channel.clone(), options("w1"));
        let stop = herald::CancellationToken::new();
        let running = tokio::spawn({
            let (worker, stop) = (worker.clone(), stop.clone());
            async move { worker.run(stop).await }
        });
        assert_eq!(entered.recv().await, Some(d.id));
        stop.cancel();
        release.notify_one();
        running.await.unwrap().unwrap();
        assert_eq!(env.get(d.id).await.state, DeliveryState::Sent, "{}", env.name);

        // Past the grace period: the send is abandoned, its lease left to expire.
        let d = env.submit(request(env.tenant, "op-hangs")).await;
        let _never = channel.hold();
        let short = WorkerOptions { shutdown_grace: Duration::from_millis(100), ..options("w2") };
        let worker = env.worker(channel.clone(), short);
        let stop = herald::CancellationToken::new();
        let running = tokio::spawn({
            let (worker, stop) = (worker.clone(), stop.clone());
            async move { worker.run(stop).await }
        });
        assert_eq!(entered.recv().await, Some(d.id));
        stop.cancel();
        running.await.unwrap().unwrap();
        let d = env.get(d.id).await;
        assert_eq!(
            (d.state, d.attempts),
            (DeliveryState::Sending, 1),
            "{}: not released early",
            env.name
        );
        env.clock.advance(Duration::from_secs(61));
        assert_eq!(env.reconciler().run_once().await.unwrap().requeued, 1, "{}", env.name);
    }
}

// ---- many workers --------------------------------------------------------------------------

/// Counts sends per delivery id and reports each on a channel; sent, or — with
/// `terminal_every: Some(k)` — terminal for every k-th delivery by its key's number.
struct Counter {
    seen: Mutex<HashMap<herald::DeliveryId, u32>>,
    done: mpsc::UnboundedSender<herald::DeliveryId>,
    terminal_every: Option<usize>,
}

impl Channel for Counter {
    fn send<'a>(&'a self, d: &'a Leased) -> herald::BoxFuture<'a, Outcome> {
        Box::pin(async move {
            *self.seen.lock().unwrap().entry(d.id).or_default() += 1;
            let _ = self.done.send(d.id);
            let number =
                || -> usize { d.operation_key.rsplit('-').next().unwrap().parse().unwrap() };
            match self.terminal_every {
                Some(k) if number().is_multiple_of(k) => {
                    Outcome::terminal("rejected", "no such mailbox")
                }
                _ => Outcome::Sent,
            }
        })
    }
}

/// Submits `n` deliveries in transactions of 100.
async fn submit_many(
    herald: &herald::Herald,
    n: usize,
    req: impl Fn(usize) -> SubmitRequest + Sync,
) {
    let req = &req;
    for batch in 0..n.div_ceil(100) {
        let h = herald.clone();
        herald
            .transaction(|tx| {
                let h = h.clone();
                Box::pin(async move {
                    for i in batch * 100..((batch + 1) * 100).min(n) {
                        h.submit(tx, &req(i)).await?;
                    }
                    Ok(())
                })
            })
            .await
            .unwrap();
    }
}

/// Runs a worker per engine until `n` sends have started, then shuts them down — which
/// waits for every started send's outcome to be recorded. `false` if the sends did not
/// all start in time.
async fn work_until_started(
    engines: [(&herald::Herald, &str); 2],
    channel: Arc<dyn Channel>,
    slots: usize,
    n: usize,
    started: &mut mpsc::UnboundedReceiver<herald::DeliveryId>,
) -> bool {
    let stop = herald::CancellationToken::new();
    let mut runs = Vec::new();
    for (engine, id) in engines {
        let options = WorkerOptions { id: id.into(), slots, ..WorkerOptions::default() };
        let channels = [("email".to_string(), channel.clone())];
        let worker = Worker::new(engine.clone(), options, channels).unwrap();
        let stop = stop.clone();
        runs.push(tokio::spawn(async move { worker.run(stop).await }));
    }
    let all = tokio::time::timeout(Duration::from_secs(120), async {
        for _ in 0..n {
            started.recv().await;
        }
    })
    .await;
    stop.cancel();
    for run in runs {
        run.await.unwrap().unwrap();
    }
    all.is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_on_separate_pools_send_each_of_1000_deliveries_exactly_once() {
    const N: usize = 1000;
    for db in common::backends().await {
        let a = db.herald().await;
        let b = db.herald().await; // a second engine: its own pool, its own wake-ups
        let tenant = a.tenant_create("acme").await.unwrap().id;
        submit_many(&a, N, |i| SubmitRequest {
            cost: Some(0),
            ..request(tenant, &format!("op-{i}"))
        })
        .await;
        let (done_tx, mut done) = mpsc::unbounded_channel();
        let counter =
            Arc::new(Counter { seen: Mutex::default(), done: done_tx, terminal_every: None });
        let engines = [(&a, "engine-a"), (&b, "engine-b")];
        let all = work_until_started(engines, counter.clone(), 16, N, &mut done).await;
        assert!(all, "{}: not all deliveries were sent in time", db.name());
        let seen = counter.seen.lock().unwrap();
        assert_eq!(seen.len(), N, "{}", db.name());
        assert!(seen.values().all(|&n| n == 1), "{}: a delivery was sent twice", db.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reconcilers_requeue_each_expired_lease_once() {
    for env in envs().await {
        for i in 0..20 {
            env.submit(request(env.tenant, &format!("op-{i}"))).await;
        }
        assert_eq!(ghost_lease(&env, "ghost").await, 20);
        env.clock.advance(Duration::from_secs(61));
        let passes: Vec<_> = (0..4)
            .map(|_| {
                let reconciler = env.reconciler();
                tokio::spawn(async move { reconciler.run_once().await.unwrap() })
            })
            .collect();
        let mut requeued = 0;
        for pass in passes {
            requeued += pass.await.unwrap().requeued;
        }
        assert_eq!(requeued, 20, "{}: each lease re-queued exactly once", env.name);
        assert_eq!(env.reconciler().run_once().await.unwrap().requeued, 0, "{}", env.name);
        // Everything re-queued is due within the first backoff ceiling (1 s).
        env.clock.advance(Duration::from_secs(2));
        let age = env.reconciler().run_once().await.unwrap().oldest_due_age;
        assert!(age.is_some_and(|a| a <= Duration::from_secs(2)), "{}: {age:?}", env.name);
    }
}

#[tokio::test]
async fn the_database_itself_refuses_a_second_final_movement_and_an_unbalanced_account() {
    use herald_store::quota::{Settle, quota_settle};
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-1")).await;
        env.worker(Script::new([]), options("w1")).run_once().await.unwrap();
        // Another delivery holds 2 units, so the balance CHECKs alone would let a second
        // release of op-1's 2 units through.
        env.submit(request(env.tenant, "op-2")).await;
        assert_eq!(env.quota().await, (100, 96, 2, 2));
        // A buggy caller releasing a reservation that was already committed: the unique
        // index on final movements refuses it, and the balances do not move.
        let tenant = env.tenant;
        let second = env
            .herald
            .transaction(|tx| {
                Box::pin(async move {
                    quota_settle(
                        tx.conn(),
                        tenant.as_uuid(),
                        "email",
                        2,
                        d.id.as_uuid(),
                        1,
                        Settle::Release,
                        Now::Database,
                    )
                    .await?;
                    Ok(())
                })
            })
            .await;
        assert!(
            matches!(&second, Err(Error::Store(e)) if e.is_unique_violation()),
            "{}: {second:?}",
            env.name
        );
        assert_eq!(env.quota().await, (100, 96, 2, 2), "{}", env.name);
        // Taking more than is available breaks the CHECK, whatever the code says.
        let overdraw = env
            .herald
            .transaction(|tx| {
                Box::pin(async move {
                    let sql = "UPDATE quota_accounts SET available = available - 1000, spent = spent + 1000";
                    match tx.conn() {
                        herald::Conn::Sqlite(c) => herald::sqlx::query(sql).execute(c).await.map(drop)?,
                        herald::Conn::Postgres(c) => herald::sqlx::query(sql).execute(c).await.map(drop)?,
                    }
                    Ok(())
                })
            })
            .await;
        assert!(overdraw.is_err(), "{}: the CHECK must refuse a negative balance", env.name);
        assert_eq!(env.quota().await, (100, 96, 2, 2), "{}", env.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_send_extends_its_lease_so_the_reconciler_leaves_it_alone() {
    for env in envs().await {
        let d = env.submit(request(env.tenant, "op-long")).await;
        let channel = Script::new([]);
        let release = channel.hold();
        let mut entered = channel.watch();
        let options =
            WorkerOptions { heartbeat_every: Some(Duration::from_millis(20)), ..options("w1") };
        let worker = env.worker(channel.clone(), options);
        let running = tokio::spawn(async move { worker.run_once().await });
        assert_eq!(entered.recv().await, Some(d.id), "{}", env.name);
        let first_lease = env.get(d.id).await;
        assert_eq!(first_lease.state, DeliveryState::Sending, "{}", env.name);
        let until = |env: &Env| {
            let id = d.id;
            let herald = env.herald.clone();
            async move {
                herald
                    .transaction(|tx| {
                        Box::pin(async move {
                            Ok(herald_store::deliveries::delivery_get(
                                tx.conn(),
                                None,
                                id.as_uuid(),
                                false,
                            )
                            .await?)
                        })
                    })
                    .await
                    .unwrap()
                    .value
                    .and_then(|r| r.lease_until)
                    .unwrap()
            }
        };
        let original = until(&env).await;
        // Time passes (past the original lease); the heartbeat must move the lease on.
        env.clock.advance(Duration::from_secs(50));
        let extended = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let now = until(&env).await;
                if now > original {
                    return now;
                }
                tokio::task::yield_now().await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{}: the heartbeat never extended the lease", env.name));
        assert_eq!(extended - original, 50_000, "{}: lease = now + lease length", env.name);
        env.clock.advance(Duration::from_secs(20)); // past the original expiry, within the new one
        assert_eq!(
            env.reconciler().run_once().await.unwrap().requeued,
            0,
            "{}: a live lease",
            env.name
        );
        release.notify_one();
        assert_eq!(running.await.unwrap().unwrap().sent, 1, "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, ["sent"], "{}", env.name);
    }
}

/// Outcomes are recorded in batches (each engine's recorder, one transaction per batch) by
/// two engines at once, every seventh terminal: every account must still balance to the delivery, with no
/// deadlock surfacing and nothing sent twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_outcomes_of_two_engines_keep_every_account_exact() {
    const N: usize = 1200;
    const TENANTS: usize = 24;
    for db in common::backends().await {
        let a = db.herald().await;
        let b = db.herald().await;
        let mut tenants = Vec::new();
        for t in 0..TENANTS {
            let id = a.tenant_create(&format!("t{t}")).await.unwrap().id;
            a.quota_grant(id, "email", 1_000, None).await.unwrap();
            tenants.push(id);
        }
        submit_many(&a, N, |i| SubmitRequest {
            cost: Some(3),
            ..request(tenants[i % TENANTS], &format!("op-{i}"))
        })
        .await;
        let (done_tx, mut done) = mpsc::unbounded_channel();
        let channel =
            Arc::new(Counter { seen: Mutex::default(), done: done_tx, terminal_every: Some(7) });
        // Shutting down waits for every started send's outcome, so the ledger is final.
        let engines = [(&a, "engine-a"), (&b, "engine-b")];
        let all = work_until_started(engines, channel.clone(), 200, N, &mut done).await;
        assert!(all, "{}: not all deliveries were sent in time", db.name());
        let seen = channel.seen.lock().unwrap().clone();
        assert_eq!(seen.len(), N, "{}", db.name());
        assert!(seen.values().all(|&n| n == 1), "{}: a delivery was sent twice", db.name());
        for (t, tenant) in tenants.iter().enumerate() {
            let keys = (0..N).filter(|i| i % TENANTS == t);
            let sent = keys.clone().filter(|i| i % 7 != 0).count() as i64;
            let q = &a.quotas(*tenant).await.unwrap()[0];
            assert_eq!(
                (q.available, q.reserved, q.spent),
                (1_000 - 3 * sent, 0, 3 * sent),
                "{}: tenant {t}",
                db.name()
            );
        }
    }
}
