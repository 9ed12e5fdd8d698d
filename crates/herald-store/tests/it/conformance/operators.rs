//! What operators read beside the deliveries: which release each worker runs (recorded
//! once, never relabelled, also under a race), the per-minute rollup (an upsert that adds,
//! read summed over processes and tenants, pruned by minute), the tenants by name, and a
//! tenant's newest journal entries.

use super::*;
use herald_store::AsConn;
use herald_store::quota::{JournalRow, quota_journal_recent};
use herald_store::rollup::{RollupPoint, RollupRow, rollup_add, rollup_prune, rollup_read};
use herald_store::sqlx::types::Uuid;
use herald_store::tenants::tenants_list;
use herald_store::workers::{worker_register, worker_releases};
use std::sync::Arc;

conformance!(
    a_worker_is_registered_once_with_its_release,
    another_release_under_a_registered_id_is_refused_and_changes_nothing,
    releases_are_read_for_the_registered_workers_only,
    a_racing_register_waits_for_the_first_and_sees_how_it_ended,
    racing_registers_of_one_id_record_one_release,
    a_rollup_add_inserts_then_adds,
    a_rollup_read_sums_nodes_and_tenants_per_minute_and_channel,
    a_rollup_prune_deletes_the_minutes_before,
    tenants_are_listed_by_name,
    the_journal_reads_newest_first,
);

/// Registers in a transaction of its own, committed.
async fn register(db: &Db, worker: &str, release: &str, now: i64) -> Option<String> {
    let mut tx = db.tx().await;
    let recorded = worker_register(tx.as_conn(), worker, release, at(now)).await.unwrap();
    tx.commit().await.unwrap();
    recorded
}

/// (worker, release) of `workers`, sorted.
async fn releases(db: &Db, workers: &[&str]) -> Vec<(String, String)> {
    let mut found = worker_releases(db.conn().await.as_conn(), workers).await.unwrap();
    found.sort();
    found
}

fn pair(worker: &str, release: &str) -> (String, String) {
    (worker.to_string(), release.to_string())
}

/// When `worker` was recorded as started.
async fn started_at(db: &Db, worker: &str) -> i64 {
    let sql = "SELECT started_at FROM herald_workers WHERE worker = $1";
    let (at,): (i64,) = raw_query_as!(db.conn().await.as_conn(), sql, [worker], fetch_one).unwrap();
    at
}

async fn a_worker_is_registered_once_with_its_release(db: &Db) {
    assert_eq!(register(db, WORKER, "1.4.0", 0).await, None, "a new worker");
    assert_eq!(releases(db, &[WORKER]).await, vec![pair(WORKER, "1.4.0")]);
    assert_eq!(started_at(db, WORKER).await, T0);
    assert_eq!(register(db, WORKER, "1.4.0", 5_000).await, None, "the same release again");
    assert_eq!(releases(db, &[WORKER]).await, vec![pair(WORKER, "1.4.0")]);
    assert_eq!(started_at(db, WORKER).await, T0, "a register again changed the row");
}

async fn another_release_under_a_registered_id_is_refused_and_changes_nothing(db: &Db) {
    register(db, WORKER, "1.4.0", 0).await;
    let mut tx = db.tx().await;
    let refused = worker_register(tx.as_conn(), WORKER, "1.5.0", at(5_000)).await.unwrap();
    assert_eq!(refused.as_deref(), Some("1.4.0"), "the recorded release");
    // No statement failed: the transaction goes on, and commits.
    assert_eq!(worker_register(tx.as_conn(), "worker-2", "1.5.0", at(5_000)).await.unwrap(), None);
    tx.commit().await.unwrap();
    let both = releases(db, &[WORKER, "worker-2"]).await;
    assert_eq!(both, vec![pair(WORKER, "1.4.0"), pair("worker-2", "1.5.0")]);
    assert_eq!(started_at(db, WORKER).await, T0);
    assert_eq!(register(db, WORKER, "1.5.0", 6_000).await.as_deref(), Some("1.4.0"), "again");
}

async fn releases_are_read_for_the_registered_workers_only(db: &Db) {
    assert!(releases(db, &[]).await.is_empty());
    assert!(releases(db, &[WORKER]).await.is_empty());
    register(db, "w-1", "r1", 0).await;
    register(db, "w-2", "r2", 0).await;
    register(db, "w-3", "r1", 0).await;
    assert!(releases(db, &[]).await.is_empty());
    assert!(releases(db, &["w-9"]).await.is_empty());
    assert_eq!(releases(db, &["w-2"]).await, vec![pair("w-2", "r2")]);
    // Three names (an IN list padded to four on MariaDB): each found once.
    let three = releases(db, &["w-3", "w-9", "w-1"]).await;
    assert_eq!(three, vec![pair("w-1", "r1"), pair("w-3", "r1")]);
    let all = releases(db, &["w-1", "w-2", "w-3", "w-4", "w-5"]).await;
    assert_eq!(all, vec![pair("w-1", "r1"), pair("w-2", "r2"), pair("w-3", "r1")]);
    // Names are compared byte for byte.
    assert!(releases(db, &["W-1", "w-1 "]).await.is_empty());
}

/// A second register of one id waits for the first's transaction: after its commit it
/// finds the first's release; after its rollback it inserts its own.
async fn a_racing_register_waits_for_the_first_and_sees_how_it_ended(db: &Db) {
    for (worker, first_commits) in [("worker-a", true), ("worker-b", false)] {
        let mut first = db.tx().await;
        assert_eq!(worker_register(first.as_conn(), worker, "1.4.0", at(0)).await.unwrap(), None);
        let store = db.store.clone();
        let (began, session) = tokio::sync::oneshot::channel();
        let second = tokio::spawn(async move {
            let mut tx = store.begin(&Default::default()).await.unwrap();
            let _ = began.send(session_id(tx.as_conn()).await);
            let recorded = worker_register(tx.as_conn(), worker, "1.5.0", at(10)).await.unwrap();
            tx.commit().await.unwrap();
            recorded
        });
        // PostgreSQL: the second waits on the primary key, where pg_stat_activity shows
        // it. MariaDB: it waits there too, but with innodb_snapshot_isolation on that wait
        // was seen missing from INNODB_TRX for its whole length, so it is given time (as in
        // the receipts and deadlock tests). SQLite: it waits at BEGIN.
        match db.backend() {
            herald_store::Backend::Postgres => {
                let session = session.await.expect("the second transaction began");
                wait_for_a_lock_wait(&db.store, session).await;
            }
            herald_store::Backend::MySql => {
                let _ = session.await.expect("the second transaction began");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            herald_store::Backend::Sqlite => {}
        }
        assert!(!second.is_finished(), "{worker}: the second register did not wait");
        if first_commits {
            first.commit().await.unwrap();
        } else {
            first.rollback().await.unwrap();
        }
        let recorded = second.await.unwrap();
        let (answer, release) =
            if first_commits { (Some("1.4.0".to_string()), "1.4.0") } else { (None, "1.5.0") };
        assert_eq!(recorded, answer, "{worker}: the second register's answer");
        assert_eq!(releases(db, &[worker]).await, vec![pair(worker, release)]);
    }
}

/// Registers of one id from many transactions at once, with two releases: one row, and
/// every register answers by it.
async fn racing_registers_of_one_id_record_one_release(db: &Db) {
    const RACERS: usize = 6;
    let start = Arc::new(tokio::sync::Barrier::new(RACERS));
    let mut racers = Vec::new();
    for i in 0..RACERS {
        let (store, start) = (db.store.clone(), start.clone());
        racers.push(tokio::spawn(async move {
            let release = if i % 2 == 0 { "1.4.0" } else { "1.5.0" };
            start.wait().await;
            let mut tx = store.begin(&Default::default()).await.unwrap();
            let recorded = worker_register(tx.as_conn(), WORKER, release, at(0)).await.unwrap();
            tx.commit().await.unwrap();
            (release, recorded)
        }));
    }
    let mut answers = Vec::new();
    for racer in racers {
        answers.push(racer.await.unwrap());
    }
    let found = releases(db, &[WORKER]).await;
    assert_eq!(found.len(), 1, "{found:?}");
    let recorded = found[0].1.clone();
    for (release, answer) in answers {
        let expected = (release != recorded).then(|| recorded.clone());
        assert_eq!(answer, expected, "a register of {release} with {recorded} recorded");
    }
}

const MINUTE_MS: i64 = 60 * SECOND_MS;

fn counts(minute: i64, tenant: Uuid, channel: &str, n: [i64; 4]) -> RollupRow {
    let [sent, retried, failed, lost] = n;
    RollupRow { minute, tenant_id: tenant, channel: channel.into(), sent, retried, failed, lost }
}

fn point(minute: i64, channel: &str, n: [i64; 4]) -> RollupPoint {
    let [sent, retried, failed, lost] = n;
    RollupPoint { minute, channel: channel.into(), sent, retried, failed, lost }
}

/// Adds in a transaction of its own, committed.
async fn add(db: &Db, node: &str, rows: &[RollupRow]) {
    let mut tx = db.tx().await;
    rollup_add(tx.as_conn(), node, rows).await.unwrap();
    tx.commit().await.unwrap();
}

async fn read(db: &Db, tenant: Option<Uuid>, since: i64) -> Vec<RollupPoint> {
    rollup_read(db.conn().await.as_conn(), tenant, since).await.unwrap()
}

async fn a_rollup_add_inserts_then_adds(db: &Db) {
    let t = Uuid::now_v7();
    let m0 = T0;
    add(db, "node-a", &[]).await;
    assert!(read(db, None, 0).await.is_empty());
    add(db, "node-a", &[counts(m0, t, CHANNEL, [3, 2, 1, 0])]).await;
    assert_eq!(read(db, Some(t), m0).await, vec![point(m0, CHANNEL, [3, 2, 1, 0])]);
    add(db, "node-a", &[counts(m0, t, CHANNEL, [1, 0, 4, 7])]).await;
    assert_eq!(read(db, Some(t), m0).await, vec![point(m0, CHANNEL, [4, 2, 5, 7])], "added");
    // Rows repeating a key in one flush add up too.
    let twice = [counts(m0, t, CHANNEL, [1, 1, 1, 1]), counts(m0, t, CHANNEL, [10, 0, 0, 0])];
    add(db, "node-a", &twice).await;
    assert_eq!(read(db, Some(t), m0).await, vec![point(m0, CHANNEL, [15, 3, 6, 8])]);
    // In the caller's transaction: a rollback takes the flush back.
    let mut tx = db.tx().await;
    rollup_add(tx.as_conn(), "node-a", &[counts(m0, t, CHANNEL, [100, 0, 0, 0])]).await.unwrap();
    tx.rollback().await.unwrap();
    assert_eq!(read(db, Some(t), m0).await, vec![point(m0, CHANNEL, [15, 3, 6, 8])]);
    let (n,): (i64,) = raw_query_as!(
        db.conn().await.as_conn(),
        "SELECT count(*) FROM herald_rollup WHERE node = $1",
        ["node-a"],
        fetch_one
    )
    .unwrap();
    assert_eq!(n, 1, "one row per (minute, tenant, channel, node)");
}

async fn a_rollup_read_sums_nodes_and_tenants_per_minute_and_channel(db: &Db) {
    let (acme, globex) = (Uuid::now_v7(), Uuid::now_v7());
    let (m0, m1, m2) = (T0, T0 + MINUTE_MS, T0 + 2 * MINUTE_MS);
    add(
        db,
        "node-a",
        &[
            counts(m0, acme, CHANNEL, [1, 0, 0, 0]),
            counts(m0, acme, "webhook", [0, 1, 0, 0]),
            counts(m1, acme, CHANNEL, [5, 0, 0, 1]),
        ],
    )
    .await;
    add(
        db,
        "node-b",
        &[
            counts(m0, acme, CHANNEL, [2, 3, 0, 0]),
            // Byte order: "SMS" sorts before "email" on every backend.
            counts(m0, acme, "SMS", [0, 0, 1, 0]),
            counts(m2, globex, CHANNEL, [9, 0, 0, 0]),
        ],
    )
    .await;
    add(db, "node-c", &[counts(m0, globex, CHANNEL, [10, 10, 10, 10])]).await;

    let acme_from_m0 = vec![
        point(m0, "SMS", [0, 0, 1, 0]),
        point(m0, CHANNEL, [3, 3, 0, 0]),
        point(m0, "webhook", [0, 1, 0, 0]),
        point(m1, CHANNEL, [5, 0, 0, 1]),
    ];
    assert_eq!(read(db, Some(acme), m0).await, acme_from_m0, "one tenant, summed over nodes");
    assert_eq!(read(db, Some(acme), 0).await, acme_from_m0);
    assert_eq!(read(db, Some(acme), m1).await, vec![point(m1, CHANNEL, [5, 0, 0, 1])]);
    assert!(read(db, Some(acme), m2).await.is_empty());
    assert_eq!(
        read(db, None, m0).await,
        vec![
            point(m0, "SMS", [0, 0, 1, 0]),
            point(m0, CHANNEL, [13, 13, 10, 10]),
            point(m0, "webhook", [0, 1, 0, 0]),
            point(m1, CHANNEL, [5, 0, 0, 1]),
            point(m2, CHANNEL, [9, 0, 0, 0]),
        ],
        "every tenant, summed over nodes and tenants"
    );
    assert_eq!(read(db, Some(globex), m1).await, vec![point(m2, CHANNEL, [9, 0, 0, 0])]);
    assert!(read(db, Some(Uuid::now_v7()), 0).await.is_empty());
}

async fn a_rollup_prune_deletes_the_minutes_before(db: &Db) {
    let t = Uuid::now_v7();
    let (m0, m1, m2) = (T0, T0 + MINUTE_MS, T0 + 2 * MINUTE_MS);
    add(
        db,
        "node-a",
        &[counts(m0, t, CHANNEL, [1, 0, 0, 0]), counts(m1, t, CHANNEL, [2, 0, 0, 0])],
    )
    .await;
    add(
        db,
        "node-b",
        &[counts(m0, t, CHANNEL, [1, 0, 0, 0]), counts(m2, t, CHANNEL, [3, 0, 0, 0])],
    )
    .await;
    let prune = |before| async move {
        let mut tx = db.tx().await;
        let pruned = rollup_prune(tx.as_conn(), before).await.unwrap();
        tx.commit().await.unwrap();
        pruned
    };
    assert_eq!(prune(m0).await, 0, "nothing before the first minute");
    assert_eq!(prune(m1).await, 2, "both nodes' rows of m0");
    let left = vec![point(m1, CHANNEL, [2, 0, 0, 0]), point(m2, CHANNEL, [3, 0, 0, 0])];
    assert_eq!(read(db, None, 0).await, left, "m1 (the bound) is kept");
    assert_eq!(prune(m1).await, 0);
    assert_eq!(prune(m2 + MINUTE_MS).await, 2);
    assert!(read(db, None, 0).await.is_empty());
}

async fn tenants_are_listed_by_name(db: &Db) {
    let list = |limit| async move { tenants_list(db.conn().await.as_conn(), limit).await.unwrap() };
    assert!(list(10).await.is_empty());
    let globex = tenant(db, "globex").await;
    let acme = tenant(db, "acme").await;
    // Byte order: an upper-case name sorts before every lower-case one on every backend.
    let zeta = tenant(db, "Zeta").await;
    let named = |id: Uuid, name: &str| (id, name.to_string());
    let all = vec![named(zeta, "Zeta"), named(acme, "acme"), named(globex, "globex")];
    assert_eq!(list(10).await, all);
    assert_eq!(list(3).await, all);
    assert_eq!(list(2).await, all[0..2]);
    assert!(list(0).await.is_empty());
}

async fn the_journal_reads_newest_first(db: &Db) {
    let t = funded(db).await;
    let globex = tenant(db, "globex").await;
    grant(db, globex, KEY, 10).await;
    let first = claimed(db, t, "order-1", at(5)).await;
    // A second account between the first's entries: the accounts' entries are merged in
    // the order they were written, whichever account they are on.
    grant(db, t, "other", 3).await;
    let second = claimed(db, t, "order-2", at(7)).await;
    claimed(db, globex, "order-1", at(8)).await;
    let recent = |tenant, limit| async move {
        quota_journal_recent(db.conn().await.as_conn(), tenant, limit).await.unwrap()
    };
    let entry = |at_ms, kind: &str, amount, delivery: Option<Uuid>| JournalRow {
        at: T0 + at_ms,
        quota_key: KEY.into(),
        kind: kind.into(),
        amount,
        delivery_id: delivery,
        reservation_seq: delivery.map(|_| 1),
    };
    let other = JournalRow { quota_key: "other".into(), ..entry(0, "grant", 3, None) };
    let all = vec![
        entry(7, "reserve", 1, Some(second)),
        other,
        entry(5, "reserve", 1, Some(first)),
        entry(0, "grant", GRANTED, None),
    ];
    assert_eq!(recent(t, 10).await, all);
    assert_eq!(recent(t, 4).await, all);
    assert_eq!(recent(t, 3).await, all[0..3]);
    assert_eq!(recent(t, 2).await, all[0..2]);
    assert_eq!(recent(t, 1).await, all[0..1]);
    assert!(recent(t, 0).await.is_empty());
    assert_eq!(recent(globex, 1).await.len(), 1);
    assert!(recent(Uuid::now_v7(), 10).await.is_empty());
}
