//! Transactions and savepoints as the store opens them: each transaction carries its wait
//! bound (and on PostgreSQL its isolation level); a savepoint rolled back undoes only its
//! own work, even after a failed statement, and the transaction goes on; an abandoned
//! transaction keeps nothing.

use super::*;
use herald_store::conn::{savepoint_begin, savepoint_release, savepoint_rollback};
use herald_store::deliveries::{Claim, NewDelivery, delivery_claim};
use herald_store::keys::{api_key_insert, api_key_lookup};
use herald_store::tx::IDLE_IN_TRANSACTION_MAX;
use herald_store::{
    AsConn, Backend, BeginOptions, ErrorClass, Isolation, Now, StoreError, StoreTx,
};
use std::time::Duration;

conformance!(
    a_transaction_carries_its_wait_bound_and_isolation,
    a_savepoint_rolled_back_undoes_only_its_work_and_the_transaction_goes_on,
    an_abandoned_transaction_keeps_nothing,
    a_transaction_left_idle_past_its_bound_is_ended_by_the_server,
);

async fn a_transaction_carries_its_wait_bound_and_isolation(db: &Db) {
    let options = BeginOptions {
        wait_max: Duration::from_millis(1_234),
        isolation: Isolation::Serializable,
        ..BeginOptions::default()
    };
    let mut tx = db.store.begin(&options).await.unwrap();
    assert!(tx.as_conn().in_transaction());
    match db.backend() {
        Backend::Sqlite => {
            let (busy,): (i64,) =
                raw_query_as!(tx.as_conn(), "PRAGMA busy_timeout", [], fetch_one).unwrap();
            assert_eq!(busy, 1_234);
        }
        Backend::MySql => {
            let (lock_wait, statement, idle): (i64, f64, i64) = raw_query_as!(
                tx.as_conn(),
                "SELECT CAST(@@innodb_lock_wait_timeout AS SIGNED), @@max_statement_time,
                     CAST(@@idle_transaction_timeout AS SIGNED)",
                [],
                fetch_one
            )
            .unwrap();
            assert_eq!((lock_wait, statement), (2, 1.234), "whole seconds up, and to the ms");
            // A transaction whose client goes silent is ended by the server soon after.
            assert_eq!(idle, IDLE_IN_TRANSACTION_MAX.as_secs() as i64);
            tx.commit().await.unwrap();
            // READ COMMITTED by default, not MariaDB's REPEATABLE READ: a second read sees
            // what another transaction committed after the first.
            let mut plain = db.tx().await;
            let count = "SELECT count(*) FROM tenants";
            let (before,): (i64,) = raw_query_as!(plain.as_conn(), count, [], fetch_one).unwrap();
            let other = uuid::Uuid::now_v7();
            let mut writer = db.tx().await;
            herald_store::tenants::tenant_insert(writer.as_conn(), other, "other", "s")
                .await
                .unwrap();
            writer.commit().await.unwrap();
            let (after,): (i64,) = raw_query_as!(plain.as_conn(), count, [], fetch_one).unwrap();
            assert_eq!(after, before + 1, "the default isolation is READ COMMITTED");
            plain.commit().await.unwrap();
            // A use outside a transaction runs under the server's bounds, not under what a
            // transaction left on the session (no reset on release: `Store::acquire`).
            // Every connection of the pool at once, so the ones just used are among them.
            let size = db.store.mysql_pool().map_or(0, |p| p.size());
            let mut held = Vec::new();
            for _ in 0..size {
                held.push(db.conn().await);
            }
            for conn in &mut held {
                let (lock_wait, statement): (i64, f64) = raw_query_as!(
                    conn.as_conn(),
                    "SELECT CAST(@@innodb_lock_wait_timeout AS SIGNED), @@max_statement_time",
                    [],
                    fetch_one
                )
                .unwrap();
                assert_eq!((lock_wait, statement), (50, 0.0), "the server's defaults");
            }
            return;
        }
        Backend::Postgres => {
            let settings = [
                ("transaction_isolation", "serializable"),
                ("statement_timeout", "1234ms"),
                ("idle_in_transaction_session_timeout", "2s"),
            ];
            for (setting, expected) in settings {
                let sql = format!("SELECT current_setting('{setting}')");
                let (value,): (String,) = raw_query_as!(tx.as_conn(), &sql, [], fetch_one).unwrap();
                assert_eq!(value, expected, "{setting}");
            }
            tx.commit().await.unwrap();
            let mut plain = db.tx().await;
            let sql = "SELECT current_setting('transaction_isolation')";
            let (value,): (String,) = raw_query_as!(plain.as_conn(), sql, [], fetch_one).unwrap();
            assert_eq!(value, "read committed", "the default isolation");
            plain.commit().await.unwrap();
            return;
        }
    }
    tx.commit().await.unwrap();
    assert!(!db.conn().await.as_conn().in_transaction(), "a pooled connection in a transaction");
}

async fn a_savepoint_rolled_back_undoes_only_its_work_and_the_transaction_goes_on(db: &Db) {
    let t = funded(db).await;
    let mut tx = db.tx().await;
    let kept = new_delivery(t, "kept");
    delivery_claim_on(&mut tx, &kept).await;

    savepoint_begin(tx.as_conn(), 1).await.unwrap();
    let undone = new_delivery(t, "undone");
    delivery_claim_on(&mut tx, &undone).await;
    api_key_insert(tx.as_conn(), "key-1", t, &[1; 32], Now::Database).await.unwrap();
    // A failed statement: on PostgreSQL only a savepoint makes the transaction usable again.
    let failed = api_key_insert(tx.as_conn(), "key-1", t, &[2; 32], Now::Database).await;
    assert!(failed.expect_err("a second key-1").is_unique_violation());
    savepoint_rollback(tx.as_conn(), 1).await.unwrap();

    savepoint_begin(tx.as_conn(), 1).await.unwrap();
    api_key_insert(tx.as_conn(), "key-2", t, &[3; 32], Now::Database).await.unwrap();
    savepoint_release(tx.as_conn(), 1).await.unwrap();
    tx.commit().await.unwrap();

    assert!(db.find(kept.id).await.is_some());
    assert!(db.find(undone.id).await.is_none(), "the savepoint's claim survived");
    let mut conn = db.conn().await;
    assert!(api_key_lookup(conn.as_conn(), "key-1").await.unwrap().is_none());
    assert!(api_key_lookup(conn.as_conn(), "key-2").await.unwrap().is_some());
    assert_eq!(db.balance(t).await, (GRANTED - 1, 1, 0), "the undone claim's reservation");
    assert_eq!(db.movements(t).await, vec![moved("reserve", 1, kept.id, 1)]);
}

async fn an_abandoned_transaction_keeps_nothing(db: &Db) {
    let t = funded(db).await;
    let new = new_delivery(t, "order-1");
    let mut tx = db.tx().await;
    delivery_claim_on(&mut tx, &new).await;
    tx.abandon();
    assert!(db.find(new.id).await.is_none());
    assert_eq!(db.balance(t).await, (GRANTED, 0, 0));
    // The pool goes on: the same claim again, committed.
    claimed(db, t, "order-1", at(0)).await;
}

/// The server ends a transaction of herald's idle between statements for longer than
/// `IDLE_IN_TRANSACTION_MAX`, and with it its locks: what frees an account stripe or a lease
/// whose client went silent. Its next statement finds the connection gone (a lost
/// connection, which the runner retries), and nothing of it was kept.
async fn a_transaction_left_idle_past_its_bound_is_ended_by_the_server(db: &Db) {
    if db.backend() == Backend::Sqlite {
        return; // one process's file: no server to end anything, no client to go silent
    }
    let t = funded(db).await;
    let new = new_delivery(t, "order-1");
    let mut tx = db.tx().await;
    delivery_claim_on(&mut tx, &new).await;
    // The server's own timer is under test: nothing to poll for.
    tokio::time::sleep(IDLE_IN_TRANSACTION_MAX + Duration::from_millis(700)).await;
    let after = raw_query_as!(tx.as_conn(), "SELECT count(*) FROM tenants", [], fetch_one);
    let error: StoreError = after.map(|(_,): (i64,)| ()).expect_err("ended by the server").into();
    assert_eq!(error.class(), ErrorClass::ConnectionLost, "{error}");
    tx.abandon();
    assert!(db.find(new.id).await.is_none());
    assert_eq!(db.balance(t).await, (GRANTED, 0, 0));
}

async fn delivery_claim_on(tx: &mut StoreTx, new: &NewDelivery<'_>) {
    let got = delivery_claim(tx.as_conn(), new, at(0), false).await.unwrap();
    assert!(matches!(got, Claim::Inserted { .. }), "{got:?}");
}
