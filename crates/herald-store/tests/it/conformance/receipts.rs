//! Receipts: one row per (scope, operation id), inserted once; a duplicate is an answer,
//! not an error, so the caller's transaction (on PostgreSQL especially) stays usable; a
//! racing insert waits for the first transaction and sees how it ended.

use super::*;
use herald_core::{OperationId, Scope};
use herald_store::receipts::{receipt_insert, receipts_count};
use herald_store::tenants::tenant_exists;
use herald_store::{AsConn, Backend};

conformance!(
    a_receipt_is_inserted_once_per_scope_and_operation,
    a_duplicate_leaves_the_transaction_usable,
    a_racing_insert_waits_for_the_first_and_sees_how_it_ended,
);

fn scope(s: &str) -> Scope {
    Scope::new(s).unwrap()
}

fn op(s: &str) -> OperationId {
    OperationId::new(s).unwrap()
}

async fn insert(db: &Db, scope: &Scope, op: &OperationId) -> bool {
    let mut tx = db.tx().await;
    let inserted = receipt_insert(tx.as_conn(), scope, op).await.unwrap();
    tx.commit().await.unwrap();
    inserted
}

async fn count(db: &Db, scope: &Scope) -> i64 {
    receipts_count(db.conn().await.as_conn(), scope).await.unwrap()
}

async fn a_receipt_is_inserted_once_per_scope_and_operation(db: &Db) {
    let (invoices, refunds) = (scope("invoices"), scope("refunds"));
    assert!(insert(db, &invoices, &op("evt-1")).await);
    assert!(!insert(db, &invoices, &op("evt-1")).await, "inserted twice");
    assert!(insert(db, &invoices, &op("evt-2")).await);
    assert!(insert(db, &refunds, &op("evt-1")).await, "another scope is another receipt");
    assert_eq!(count(db, &invoices).await, 2);
    assert_eq!(count(db, &refunds).await, 1);
    assert_eq!(count(db, &scope("payouts")).await, 0);
}

async fn a_duplicate_leaves_the_transaction_usable(db: &Db) {
    let invoices = scope("invoices");
    assert!(insert(db, &invoices, &op("evt-1")).await);
    let t = uuid::Uuid::now_v7();

    let mut tx = db.tx().await;
    assert!(!receipt_insert(tx.as_conn(), &invoices, &op("evt-1")).await.unwrap());
    assert!(receipt_insert(tx.as_conn(), &invoices, &op("evt-2")).await.unwrap());
    assert!(!receipt_insert(tx.as_conn(), &invoices, &op("evt-2")).await.unwrap());
    // Statements after the duplicates still run, and commit.
    assert_eq!(receipts_count(tx.as_conn(), &invoices).await.unwrap(), 2);
    let named = herald_store::tenants::tenant_insert(tx.as_conn(), t, "acme", "whsec_x").await;
    assert!(named.unwrap());
    tx.commit().await.unwrap();

    assert_eq!(count(db, &invoices).await, 2);
    assert!(tenant_exists(db.conn().await.as_conn(), t).await.unwrap(), "the commit was lost");
}

async fn a_racing_insert_waits_for_the_first_and_sees_how_it_ended(db: &Db) {
    let invoices = scope("invoices");
    for (id, first_commits) in [("evt-1", true), ("evt-2", false)] {
        let mut first = db.tx().await;
        assert!(receipt_insert(first.as_conn(), &invoices, &op(id)).await.unwrap());
        let (store, scope) = (db.store.clone(), invoices.clone());
        let (began, pid) = tokio::sync::oneshot::channel();
        let second = tokio::spawn(async move {
            let mut tx = store.begin(&Default::default()).await.unwrap();
            let _ = began.send(session_id(tx.as_conn()).await);
            let inserted = receipt_insert(tx.as_conn(), &scope, &op(id)).await.unwrap();
            tx.commit().await.unwrap();
            inserted
        });
        // PostgreSQL: the second transaction begins at once and waits on the unique index,
        // where pg_stat_activity shows it. MariaDB: it waits there too, but an INSERT's wait
        // on a duplicate key's lock was seen missing from INNODB_TRX for the whole wait (as
        // the submit's is: see the deadlock test), so it is given time instead. SQLite: it
        // waits at BEGIN for the writer's lock, where it cannot be watched.
        match db.backend() {
            Backend::Postgres => {
                let pid = pid.await.expect("the second transaction began");
                wait_for_a_lock_wait(&db.store, pid).await;
            }
            Backend::MySql => {
                let _ = pid.await.expect("the second transaction began");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Backend::Sqlite => {}
        }
        assert!(!second.is_finished(), "{id}: the second insert did not wait for the first");
        if first_commits {
            first.commit().await.unwrap();
        } else {
            first.rollback().await.unwrap();
        }
        let inserted = second.await.unwrap();
        assert_eq!(inserted, !first_commits, "{id}: the second insert's answer");
    }
    assert_eq!(count(db, &invoices).await, 2);
}
