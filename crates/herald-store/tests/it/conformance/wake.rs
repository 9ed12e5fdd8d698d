//! Wake targets (`herald_store::notify`): a worker's row is written and refreshed, read
//! while fresh, forgotten once stale, and deleted when the worker stops.

use super::*;
use herald_store::AsConn;
use herald_store::notify::{WakeTarget, wake_target_drop, wake_target_put, wake_targets};

conformance!(
    a_wake_target_is_read_while_fresh_and_refreshed_by_a_put,
    a_stale_wake_target_is_forgotten_by_the_next_put,
    a_dropped_wake_target_is_gone,
);

fn target(worker: &str, port: u16) -> WakeTarget {
    WakeTarget {
        worker: worker.to_string(),
        address: format!("127.0.0.1:{port}"),
        token: format!("token-of-{worker}"),
    }
}

async fn put(db: &Db, t: &WakeTarget, now: i64) {
    let mut tx = db.tx().await;
    wake_target_put(tx.as_conn(), t, at(now), 3_600_000).await.unwrap();
    tx.commit().await.unwrap();
}

async fn fresh(db: &Db, now: i64) -> Vec<WakeTarget> {
    wake_targets(db.conn().await.as_conn(), at(now), 30_000).await.unwrap()
}

async fn a_wake_target_is_read_while_fresh_and_refreshed_by_a_put(db: &Db) {
    let (a, b) = (target("worker-a", 4001), target("worker-b", 4002));
    put(db, &a, 0).await;
    put(db, &b, 10_000).await;
    assert_eq!(fresh(db, 20_000).await, vec![a.clone(), b.clone()]);
    assert_eq!(fresh(db, 35_000).await, vec![b.clone()], "a, seen 35 s ago, is stale");
    // A put again refreshes the row, and a new address or token replaces the old.
    let a2 = target("worker-a", 4011);
    put(db, &a2, 36_000).await;
    assert_eq!(fresh(db, 40_000).await, vec![a2, b]);
}

async fn a_stale_wake_target_is_forgotten_by_the_next_put(db: &Db) {
    let (a, b) = (target("worker-a", 4001), target("worker-b", 4002));
    put(db, &a, 0).await;
    put(db, &b, 3_600_001).await;
    let all = wake_targets(db.conn().await.as_conn(), at(3_600_001), i64::MAX / 4).await.unwrap();
    assert_eq!(all, vec![b], "a row not seen for an hour is deleted by another's put");
}

async fn a_dropped_wake_target_is_gone(db: &Db) {
    let (a, b) = (target("worker-a", 4001), target("worker-b", 4002));
    put(db, &a, 0).await;
    put(db, &b, 0).await;
    let mut tx = db.tx().await;
    wake_target_drop(tx.as_conn(), "worker-a").await.unwrap();
    wake_target_drop(tx.as_conn(), "worker-none").await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(fresh(db, 1_000).await, vec![b]);
}
