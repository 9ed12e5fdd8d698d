//! The store-level defects of issue 14, each as the race or the comparison that shows it:
//! one lock order on every submit path (an application's own transaction never deadlocks
//! against an autocommitted submit of the same identity), a submit racing retention
//! answers what it did (never 404), and the set-based fenced `sent` writes exactly what
//! `decide` and a transition write for the same report.

use crate::common::{Env, backends, envs};
use herald::sqlx;
use herald::{
    AttemptReport, Decision, DeliveryState, Error, Herald, Report, Retention, RetentionOptions,
    RetryPolicy, SubmitRequest, Submitted,
};
use herald_store::deliveries::{Lease, deliveries_lease, deliveries_sent_fenced};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Barrier;

fn request(tenant: herald::TenantId, operation_key: &str) -> SubmitRequest {
    SubmitRequest::new(tenant, operation_key, "email", "ada@example.com", json!({"n": 1}))
}

/// `submit_in` inside the application's own sqlx transaction, committed.
async fn submit_in_own_tx(herald: &Herald, req: &SubmitRequest) -> Result<Submitted, Error> {
    let store = herald.store();
    if let Some(pool) = store.postgres_pool() {
        let mut tx = pool.begin().await.map_err(|e| Error::Store(e.into()))?;
        let submitted = herald.submit_in(&mut tx, req).await?;
        tx.commit().await.map_err(|e| Error::Store(e.into()))?;
        return Ok(submitted);
    }
    if let Some(pool) = store.mysql_pool() {
        // The application's retry loop for MariaDB's 1020: with `innodb_snapshot_isolation`
        // on, the claim's search for a free stripe (a plain read) takes the transaction's
        // snapshot when the application made no read before it, and a claim that then
        // meets the identity another committed since gets 1020, a concurrency error
        // (README, "MariaDB"). With it off (10.11's default) this never loops.
        for attempt in 1.. {
            let mut tx = pool.begin().await.map_err(|e| Error::Store(e.into()))?;
            match herald.submit_in(&mut tx, req).await {
                Err(Error::Store(e)) if attempt < 5 && format!("{e:?}").contains("1020") => {
                    let _ = tx.rollback().await;
                    continue;
                }
                answer => {
                    let submitted = answer?;
                    tx.commit().await.map_err(|e| Error::Store(e.into()))?;
                    return Ok(submitted);
                }
            }
        }
    }
    let pool = store.sqlite_pool().expect("a SQLite, PostgreSQL or MariaDB store");
    // SQLite's own transactions take the write lock late (BEGIN DEFERRED); herald's runner
    // would wait for it, an application's transaction gets BUSY instead. Not the point
    // here: take it at BEGIN.
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(|e| Error::Store(e.into()))?;
    let submitted = herald.submit_in(&mut tx, req).await?;
    tx.commit().await.map_err(|e| Error::Store(e.into()))?;
    Ok(submitted)
}

/// Before the fix the transactional claim locked the identity and then the quota account,
/// the autocommitted one the account and then the identity: racing on one identity they
/// deadlocked, and PostgreSQL aborted the application's transaction (herald cannot retry
/// a transaction it does not own). Now both lock the account first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submits_of_one_identity_in_an_application_transaction_and_alone_never_deadlock() {
    const ROUNDS: usize = 30;
    const PER_PATH: usize = 4;
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 10_000, None).await.unwrap();
        // The shared settings exist, as every herald process writes them at start: on a
        // database without them, the first submits race to write the row, and under
        // MariaDB's snapshot isolation an application's REPEATABLE READ transaction that
        // loses that race gets 1020 once (a concurrency error, for its retry loop).
        herald.settings().await.unwrap();
        for round in 0..ROUNDS {
            let req = request(tenant, &format!("order-{round}"));
            let start = Arc::new(Barrier::new(2 * PER_PATH));
            let tasks: Vec<_> = (0..2 * PER_PATH)
                .map(|i| {
                    let (herald, req, start) = (herald.clone(), req.clone(), start.clone());
                    tokio::spawn(async move {
                        start.wait().await;
                        if i % 2 == 0 {
                            submit_in_own_tx(&herald, &req).await
                        } else {
                            herald.submit_alone(&req).await
                        }
                    })
                })
                .collect();
            let mut created = 0;
            for task in tasks {
                match task.await.unwrap() {
                    Ok(s) => created += usize::from(!s.duplicate),
                    Err(e) => panic!("{name}: round {round}: a submit failed: {e:?}"),
                }
            }
            assert_eq!(created, 1, "{name}: round {round}: one submit creates");
        }
        let account = &herald.quotas(tenant).await.unwrap()[0];
        assert_eq!(account.reserved, ROUNDS as i64, "{name}: one reservation per identity");
    }
}

/// Retention may delete the row a claim ran into before the submit reads it back. The
/// submit then claims again and answers what that claim did — never 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_racing_retention_answers_created_or_duplicate_never_not_found() {
    const RACE_FOR: Duration = Duration::from_secs(3);
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 1_000_000, None).await.unwrap();
        let req = request(tenant, "order-1");
        // Keep nothing: a final delivery is pruned as soon as retention runs.
        let retention = Retention::new(
            herald.clone(),
            RetentionOptions { keep: Duration::ZERO, ..RetentionOptions::keep(Duration::ZERO) },
        );
        let until = tokio::time::Instant::now() + RACE_FOR;
        let pruner = tokio::spawn(async move {
            let mut pruned = 0;
            while tokio::time::Instant::now() < until {
                pruned += retention.run_once().await.unwrap().deliveries;
            }
            pruned
        });
        let (h, r) = (herald.clone(), req.clone());
        let canceller = tokio::spawn(async move {
            // Makes each new delivery final, so retention can take it.
            while tokio::time::Instant::now() < until {
                if let Ok(s) = h.submit_alone(&r).await {
                    let _ = h.cancel(s.delivery.tenant, s.delivery.id).await;
                }
            }
        });
        let mut answers = 0;
        while tokio::time::Instant::now() < until {
            match herald.submit_alone(&req).await {
                Ok(s) => {
                    assert_eq!(s.delivery.operation_key, "order-1", "{name}");
                    answers += 1;
                }
                Err(e) => panic!("{name}: a submit racing retention answered {e:?}"),
            }
        }
        canceller.await.unwrap();
        let pruned = pruner.await.unwrap();
        assert!(answers > 0 && pruned > 0, "{name}: {answers} submits, {pruned} pruned");
    }
}

/// Leases every due delivery as `worker`.
async fn lease_all(env: &Env, worker: &str) -> usize {
    let now = env.clock.now();
    let channels = ["email".to_string()];
    let lease =
        Lease { worker, channels: &channels, limit: 100, lease: Duration::from_secs(60), now };
    let lease = &lease;
    env.herald
        .transaction(|tx| {
            Box::pin(async move { Ok(deliveries_lease(tx.conn(), lease).await?.len()) })
        })
        .await
        .unwrap()
        .value
}

/// What a delivery looks like from outside, without its identity.
async fn seen(
    env: &Env,
    id: herald::DeliveryId,
) -> (DeliveryState, Option<jiff::Timestamp>, String) {
    let d = env.herald.delivery(env.tenant, id).await.unwrap();
    let attempts = env.herald.attempts(env.tenant, id).await.unwrap();
    let attempts: Vec<String> = attempts
        .iter()
        .map(|a| {
            format!("{} {} {:?} {:?} {:?}", a.n, a.worker, a.outcome, a.started_at, a.finished_at)
        })
        .collect();
    (d.state, d.sent_at, format!("{:?} {:?}", d.last_error, attempts))
}

/// The fast path handles one case, a fenced `sent`: it must leave the delivery, its
/// attempts and the ledger exactly as `decide` and the transition it yields do.
#[tokio::test]
async fn the_set_based_fenced_sent_writes_what_decide_and_a_transition_write() {
    for env in envs("email").await {
        let name = env.name;
        for cost in [0, 3] {
            let quotas_before = env.herald.quotas(env.tenant).await.unwrap();
            let mut twins = Vec::new();
            for path in ["fast", "decided"] {
                let mut req = request(env.tenant, &format!("{path}-{cost}"));
                req.cost = Some(cost);
                twins.push(env.herald.submit_alone(&req).await.unwrap().delivery.id);
            }
            assert_eq!(lease_all(&env, "w1").await, 2, "{name}");
            env.clock.advance(Duration::from_secs(2));
            let now = env.clock.now();
            let fast = [(twins[0].as_uuid(), 1)];
            let marked = env
                .herald
                .transaction(|tx| {
                    Box::pin(async move {
                        Ok(deliveries_sent_fenced(tx.conn(), "w1", &fast, now).await?)
                    })
                })
                .await
                .unwrap()
                .value;
            assert_eq!(marked, fast, "{name}: the fenced attempt is marked");
            let report = AttemptReport {
                delivery: twins[1],
                n: 1,
                worker: "w1".into(),
                tenant: env.tenant,
                quota_key: "email".into(),
                stripe: None,
                report: Report::Sent,
                retry_after: None,
                jitter: 0.5,
                error_code: None,
                error_message: None,
            };
            let decided = env.herald.record_report(&report, &RetryPolicy::default()).await;
            assert_eq!(decided.unwrap(), Some(Decision::MarkSent { stale: false }), "{name}");
            let (fast, decided) = (seen(&env, twins[0]).await, seen(&env, twins[1]).await);
            assert_eq!(fast.0, DeliveryState::Sent, "{name}");
            assert_eq!(fast, decided, "{name}: cost {cost}: the same delivery and attempts");
            let after = &env.herald.quotas(env.tenant).await.unwrap()[0];
            let before = &quotas_before[0];
            assert_eq!(
                (after.available, after.reserved, after.spent),
                (before.available - 2 * cost, before.reserved, before.spent + 2 * cost),
                "{name}: cost {cost}: both charged once"
            );
            let journal = journal_kinds(&env.herald, &twins).await;
            let expected: Vec<&str> = if cost == 0 { vec![] } else { vec!["commit", "reserve"] };
            assert_eq!(journal[0], expected, "{name}: the fast path's journal");
            assert_eq!(journal[0], journal[1], "{name}: cost {cost}: the same journal rows");
        }
    }
}

/// Each delivery's journal kinds, sorted.
async fn journal_kinds(herald: &Herald, ids: &[herald::DeliveryId]) -> Vec<Vec<String>> {
    let mut all = Vec::new();
    for id in ids {
        let store = herald.store();
        let mut kinds: Vec<String> = if let Some(pool) = store.postgres_pool() {
            sqlx::query_scalar("SELECT kind FROM quota_journal WHERE delivery_id = $1")
                .bind(id.as_uuid())
                .fetch_all(pool)
                .await
                .unwrap()
        } else if let Some(pool) = store.mysql_pool() {
            sqlx::query_scalar("SELECT kind FROM quota_journal WHERE delivery_id = ?")
                .bind(id.as_uuid())
                .fetch_all(pool)
                .await
                .unwrap()
        } else {
            let pool = store.sqlite_pool().unwrap();
            sqlx::query_scalar("SELECT kind FROM quota_journal WHERE delivery_id = ?1")
                .bind(id.as_uuid())
                .fetch_all(pool)
                .await
                .unwrap()
        };
        kinds.sort();
        all.push(kinds);
    }
    all
}
