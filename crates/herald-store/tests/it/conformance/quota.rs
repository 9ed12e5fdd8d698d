//! The quota ledger: grants (locked, then applied, once per idempotency key), reservations
//! that end in exactly one commit or release, the balance CHECKs, and the account lock.
//! Reservations here belong to deliveries that hold none yet ([`unreserved`]): on
//! PostgreSQL a delivery's open reservation lives on its row.

use super::*;
use herald_store::quota::{
    GrantState, Settle, quota_accounts, quota_grant_apply, quota_grant_lock, quota_lock,
    quota_reserve, quota_reserved_by_tenant, quota_settle,
};
use herald_store::sqlx::types::Uuid;
use herald_store::{AsConn, Backend, Concurrency, ErrorClass, StoreError};
use std::sync::Arc;
use std::time::Duration;

conformance!(
    a_grant_creates_the_account_and_reads_what_its_key_granted,
    a_second_grant_under_one_key_is_refused,
    a_reservation_ends_in_one_commit_or_one_release,
    a_reserve_short_or_without_an_account_writes_nothing,
    a_second_reserve_of_one_reservation_is_refused_and_holds_nothing,
    a_second_final_movement_of_the_only_reservation_fails_on_the_unique_index,
    an_over_settlement_is_refused_and_journals_nothing,
    the_balance_checks_refuse_an_unbalanced_or_negative_account,
    quota_lock_holds_the_accounts_until_commit,
    accounts_are_listed_by_key_and_reserved_units_summed_per_tenant,
    concurrent_grants_under_one_key_apply_once,
);

/// Reserves `cost` for (`delivery`, `seq`) on (`tenant`, [`KEY`]), committed.
async fn reserve(db: &Db, tenant: Uuid, cost: i64, delivery: Uuid, seq: i32) -> bool {
    let mut tx = db.tx().await;
    let reserved = quota_reserve(tx.as_conn(), tenant, KEY, cost, delivery, seq, at(0)).await;
    tx.commit().await.unwrap();
    reserved.unwrap()
}

/// Settles (`delivery`, `seq`) of `cost` on (`tenant`, [`KEY`]), committed when it worked.
async fn settle(db: &Db, tenant: Uuid, cost: i64, delivery: Uuid, settle: Settle) {
    let mut tx = db.tx().await;
    quota_settle(tx.as_conn(), tenant, KEY, cost, delivery, 1, settle, at(0)).await.unwrap();
    tx.commit().await.unwrap();
}

/// Runs `step` in a transaction that the caller then commits anyway, as a caller that
/// ignored the error would; returns the error. (PostgreSQL turns that COMMIT into a
/// rollback; SQLite commits whatever did not fail.)
async fn refused_then_committed<F>(db: &Db, step: F) -> StoreError
where
    F: for<'c> FnOnce(herald_store::Conn<'c>) -> BoxFuture<'c, Result<(), StoreError>>,
{
    let mut tx = db.tx().await;
    let refused = step(tx.as_conn()).await.expect_err("the database accepted it");
    let _ = tx.commit().await;
    refused
}

async fn a_grant_creates_the_account_and_reads_what_its_key_granted(db: &Db) {
    let t = tenant(db, "acme").await;
    let mut tx = db.tx().await;
    let state = quota_grant_lock(tx.as_conn(), t, "sms", Some("grant-1"), at(0)).await.unwrap();
    assert_eq!(state, GrantState { granted: 0, amount_first: None });
    quota_grant_apply(tx.as_conn(), t, "sms", 40, Some("grant-1"), at(0)).await.unwrap();
    tx.commit().await.unwrap();

    let a = db.account(t, "sms").await.expect("the grant created the account");
    assert_eq!((a.granted, a.available, a.reserved, a.spent), (40, 40, 0, 0));
    let mut tx = db.tx().await;
    let again = quota_grant_lock(tx.as_conn(), t, "sms", Some("grant-1"), at(1)).await.unwrap();
    assert_eq!(again, GrantState { granted: 40, amount_first: Some(40) });
    let other = quota_grant_lock(tx.as_conn(), t, "sms", Some("grant-2"), at(1)).await.unwrap();
    assert_eq!(other, GrantState { granted: 40, amount_first: None });
    let keyless = quota_grant_lock(tx.as_conn(), t, "sms", None, at(1)).await.unwrap();
    assert_eq!(keyless, GrantState { granted: 40, amount_first: None });
    tx.commit().await.unwrap();
    let journal = journal_on(db.conn().await.as_conn(), t).await;
    let grants: Vec<Journal> = journal.into_iter().filter(|j| j.kind == "grant").collect();
    assert_eq!(
        grants,
        vec![Journal { kind: "grant".into(), amount: 40, delivery: None, seq: None }]
    );
}

async fn a_second_grant_under_one_key_is_refused(db: &Db) {
    let t = tenant(db, "acme").await;
    for _ in 0..2 {
        // Grants without a key add up.
        let mut tx = db.tx().await;
        quota_grant_lock(tx.as_conn(), t, KEY, None, at(0)).await.unwrap();
        quota_grant_apply(tx.as_conn(), t, KEY, 10, None, at(0)).await.unwrap();
        tx.commit().await.unwrap();
    }
    let mut tx = db.tx().await;
    quota_grant_apply(tx.as_conn(), t, KEY, 30, Some("grant-1"), at(0)).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(db.balance(t).await, (50, 0, 0));

    let refused = refused_then_committed(db, |c| {
        Box::pin(quota_grant_apply(c, t, KEY, 30, Some("grant-1"), at(1)))
    })
    .await;
    assert!(refused.is_unique_violation(), "{refused:?}");
    assert_eq!(db.account(t, KEY).await.unwrap().granted, 50);
    let journal = journal_on(db.conn().await.as_conn(), t).await;
    let grants = journal.iter().filter(|j| j.kind == "grant");
    assert_eq!(grants.map(|j| j.amount).collect::<Vec<_>>(), vec![10, 10, 30]);
}

async fn a_reservation_ends_in_one_commit_or_one_release(db: &Db) {
    let t = funded(db).await;
    let (d1, d2) = (unreserved(db, t, KEY, 5).await, unreserved(db, t, KEY, 3).await);
    assert!(reserve(db, t, 5, d1, 1).await);
    assert_eq!(db.balance(t).await, (95, 5, 0));
    assert!(reserve(db, t, 3, d2, 1).await);
    assert_eq!(db.balance(t).await, (92, 8, 0));
    settle(db, t, 5, d1, Settle::Commit).await;
    assert_eq!(db.balance(t).await, (92, 3, 5));
    settle(db, t, 3, d2, Settle::Release).await;
    assert_eq!(db.balance(t).await, (95, 0, 5));
    assert_eq!(
        db.movements(t).await,
        vec![
            moved("reserve", 5, d1, 1),
            moved("reserve", 3, d2, 1),
            moved("commit", 5, d1, 1),
            moved("release", 3, d2, 1),
        ]
    );
    if db.backend() == Backend::Postgres {
        // Schema 20: each end is on its delivery's row, none a row of its own.
        for d in [d1, d2] {
            assert_eq!(db.count("quota_movements", "delivery_id", d).await, 0);
        }
    }
}

async fn a_reserve_short_or_without_an_account_writes_nothing(db: &Db) {
    let t = funded(db).await;
    let d = unreserved(db, t, KEY, GRANTED + 1).await;
    assert!(!reserve(db, t, GRANTED + 1, d, 1).await, "reserved past available");
    let mut tx = db.tx().await;
    let no_account = quota_reserve(tx.as_conn(), t, "sms", 1, d, 1, at(0)).await;
    assert!(!no_account.unwrap());
    tx.commit().await.unwrap();
    assert!(db.movements(t).await.is_empty());
    assert_eq!(db.balance(t).await, (GRANTED, 0, 0));
    assert!(db.account(t, "sms").await.is_none());

    let exact = unreserved(db, t, KEY, GRANTED).await;
    assert!(reserve(db, t, GRANTED, exact, 1).await, "all that is available");
    assert_eq!(db.balance(t).await, (0, GRANTED, 0));
}

async fn a_second_reserve_of_one_reservation_is_refused_and_holds_nothing(db: &Db) {
    let t = funded(db).await;
    let d = unreserved(db, t, KEY, 5).await;
    assert!(reserve(db, t, 5, d, 1).await);
    // Refused by the journal's unique index where the reservation is a journal row; on
    // PostgreSQL, where it is the delivery row's, answered "not reserved" (the row holds
    // one already) — either way nothing moves, even when the caller commits anyway.
    let mut tx = db.tx().await;
    match quota_reserve(tx.as_conn(), t, KEY, 5, d, 1, at(1)).await {
        Ok(reserved) => assert!(!reserved, "reserved twice"),
        Err(refused) => assert!(refused.is_unique_violation(), "{refused:?}"),
    }
    let _ = tx.commit().await;
    assert_eq!(db.balance(t).await, (GRANTED - 5, 5, 0), "the refused reserve holds units");
    assert_eq!(db.movements(t).await, vec![moved("reserve", 5, d, 1)]);
}

async fn a_second_final_movement_of_the_only_reservation_fails_on_the_unique_index(db: &Db) {
    let t = funded(db).await;
    let d = unreserved(db, t, KEY, 5).await;
    assert!(reserve(db, t, 5, d, 1).await);
    settle(db, t, 5, d, Settle::Commit).await;
    for again in [Settle::Commit, Settle::Release] {
        let refused = refused_then_committed(db, |c| {
            Box::pin(quota_settle(c, t, KEY, 5, d, 1, again, at(1)))
        })
        .await;
        assert_eq!(db.balance(t).await, (GRANTED - 5, 0, 5), "{again:?}");
        assert!(refused.is_unique_violation(), "{again:?}: {refused:?}");
    }
    assert_eq!(db.movements(t).await, vec![moved("reserve", 5, d, 1), moved("commit", 5, d, 1)]);
}

async fn an_over_settlement_is_refused_and_journals_nothing(db: &Db) {
    let t = funded(db).await;
    let d = unreserved(db, t, KEY, 3).await;
    assert!(reserve(db, t, 3, d, 1).await);
    let refused = refused_then_committed(db, |c| {
        Box::pin(quota_settle(c, t, KEY, 5, d, 1, Settle::Commit, at(1)))
    })
    .await;
    assert!(!refused.is_unique_violation(), "refused by the balance CHECK: {refused:?}");
    assert_eq!(db.balance(t).await, (GRANTED - 3, 3, 0));
    assert_eq!(
        db.movements(t).await,
        vec![moved("reserve", 3, d, 1)],
        "a journal row of a refused move"
    );
}

/// The invariants money depends on are the database's, not the code's.
async fn the_balance_checks_refuse_an_unbalanced_or_negative_account(db: &Db) {
    let t = funded(db).await;
    let unbalancing = [
        "UPDATE quota_accounts SET available = available + 1 WHERE tenant_id = $1",
        "UPDATE quota_accounts SET spent = spent + 1, granted = granted - 1 WHERE tenant_id = $1",
        "UPDATE quota_accounts SET available = available - 101, granted = granted - 101 WHERE tenant_id = $1",
        "UPDATE quota_accounts SET reserved = -1, available = available + 1 WHERE tenant_id = $1",
    ];
    for sql in unbalancing {
        let mut conn = db.conn().await;
        let refused = raw_execute!(conn.as_conn(), sql, [t]);
        assert!(refused.is_err(), "accepted: {sql}");
        assert_eq!(db.balance(t).await, (GRANTED, 0, 0), "{sql}");
    }
    let mut conn = db.conn().await;
    let balanced = "UPDATE quota_accounts SET available = available - 1, spent = spent + 1 WHERE tenant_id = $1 AND stripe = 0";
    assert_eq!(raw_execute!(conn.as_conn(), balanced, [t]).unwrap(), 1);
    assert_eq!(db.balance(t).await, (GRANTED - 1, 0, 1));
}

/// PostgreSQL, MariaDB: a reserve on a locked account waits (here, until the
/// transaction's bound).
/// SQLite: the writer's lock already holds every account.
async fn quota_lock_holds_the_accounts_until_commit(db: &Db) {
    let t = funded(db).await;
    let waiting = unreserved(db, t, KEY, 1).await;
    let mut holder = db.tx().await;
    quota_lock(holder.as_conn(), &[]).await.unwrap();
    let accounts = [(t, KEY.to_string()), (t, KEY.to_string()), (t, "missing".to_string())];
    quota_lock(holder.as_conn(), &accounts).await.unwrap();

    let wait_max = Duration::from_millis(300);
    match db.backend() {
        Backend::Postgres | Backend::MySql => {
            let mut other = db.tx_waiting(wait_max).await.unwrap();
            let waited = quota_reserve(other.as_conn(), t, KEY, 1, waiting, 1, at(0)).await;
            assert_eq!(
                waited.expect_err("reserved on a locked account").class(),
                ErrorClass::WaitTimeout
            );
            other.rollback().await.unwrap();
        }
        Backend::Sqlite => {
            let refused = db.tx_waiting(wait_max).await.expect_err("a second writer began");
            assert_eq!(refused.class(), ErrorClass::Concurrency(Concurrency::SqliteBusy));
        }
    }
    holder.commit().await.unwrap();
    assert!(
        reserve(db, t, 1, unreserved(db, t, KEY, 1).await, 1).await,
        "the lock outlived its transaction"
    );
}

async fn accounts_are_listed_by_key_and_reserved_units_summed_per_tenant(db: &Db) {
    let acme = funded(db).await;
    grant(db, acme, "a-sms", 10).await;
    let globex = tenant(db, "globex").await;
    grant(db, globex, KEY, 10).await;
    assert!(reserve(db, acme, 4, unreserved(db, acme, KEY, 4).await, 1).await);
    let two = unreserved(db, acme, "a-sms", 2).await;
    let mut tx = db.tx().await;
    assert!(quota_reserve(tx.as_conn(), acme, "a-sms", 2, two, 1, at(0)).await.unwrap());
    tx.commit().await.unwrap();

    let mut conn = db.conn().await;
    let listed = quota_accounts(conn.as_conn(), acme).await.unwrap();
    let keys: Vec<_> = listed.iter().map(|a| (a.quota_key.as_str(), a.reserved)).collect();
    assert_eq!(keys, vec![("a-sms", 2), (KEY, 4)]);
    assert!(listed.iter().all(|a| a.tenant_id == acme));
    let mut reserved = quota_reserved_by_tenant(conn.as_conn()).await.unwrap();
    reserved.sort();
    let mut expected = vec![(acme, 6), (globex, 0)];
    expected.sort();
    assert_eq!(reserved, expected);
}

/// Grants under one idempotency key from many transactions at once: the lock decides them
/// one after the other, so exactly one applies.
async fn concurrent_grants_under_one_key_apply_once(db: &Db) {
    const GRANTERS: usize = 4;
    let t = tenant(db, "acme").await;
    let start = Arc::new(tokio::sync::Barrier::new(GRANTERS));
    let mut granters = Vec::new();
    for _ in 0..GRANTERS {
        let (store, start) = (db.store.clone(), start.clone());
        granters.push(tokio::spawn(async move {
            start.wait().await;
            let mut tx = store.begin(&Default::default()).await.unwrap();
            let state =
                quota_grant_lock(tx.as_conn(), t, KEY, Some("grant-1"), at(0)).await.unwrap();
            let applies = state.amount_first.is_none();
            if applies {
                quota_grant_apply(tx.as_conn(), t, KEY, 25, Some("grant-1"), at(0)).await.unwrap();
            } else {
                assert_eq!(state, GrantState { granted: 25, amount_first: Some(25) });
            }
            tx.commit().await.unwrap();
            applies
        }));
    }
    let mut applied = 0;
    for granter in granters {
        applied += usize::from(granter.await.unwrap());
    }
    assert_eq!(applied, 1);
    assert_eq!(db.balance(t).await, (25, 0, 0));
}
