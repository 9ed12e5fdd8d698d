//! A tenant's management of its deliveries: replay (`delivery_replay_apply` under the
//! reservation the caller took, `seq + 1`) and cancel (a [`Transition`] to `cancelled`
//! that releases the reservation). Whether either is allowed is the library's call.

use super::*;
use herald_core::DeliveryState;
use herald_store::deliveries::{
    AttemptEnd, Settlement, StateChange, Transition, delivery_attempts, delivery_replay_apply,
};
use herald_store::quota::{Settle, quota_reserve, quota_settle};
use herald_store::sqlx::types::Uuid;
use herald_store::{AsConn, Now};

conformance!(
    a_replay_requeues_a_failed_delivery_under_the_next_reservation,
    after_a_replay_only_the_new_reservation_can_end,
    a_cancelled_delivery_replays_with_its_attempts_unspent,
    a_cancel_is_a_transition_that_releases_the_reservation,
);

const COST: i64 = 2;

/// A claim of [`COST`] that ended in `failed` at `T0 + 20` (leased at `T0 + 10`, released).
async fn failed(db: &Db, tenant: Uuid) -> Uuid {
    let mut new = new_delivery(tenant, "order-1");
    new.cost = COST;
    claim(db, &new, at(0)).await;
    assert_eq!(ids(&lease(db, WORKER, 1, at(10)).await), vec![new.id]);
    let fail = Transition {
        id: new.id,
        state: Some(StateChange::Failed { error: Some("bounced") }),
        settle: Some(release(tenant, 1)),
        attempt: Some(AttemptEnd {
            n: 1,
            worker: WORKER,
            outcome: "terminal",
            started_at: Some(T0 + 10),
            error_code: None,
            error_message: None,
        }),
        now: at(20),
    };
    apply(db, &fail).await.unwrap();
    new.id
}

fn release(tenant: Uuid, seq: i32) -> Settlement<'static> {
    Settlement {
        tenant_id: tenant,
        quota_key: KEY,
        cost: COST,
        reservation_seq: seq,
        settle: Settle::Release,
    }
}

/// Replays `id` as the library does: reserve `seq`, then apply, in one transaction.
async fn replay(db: &Db, tenant: Uuid, id: Uuid, seq: i32, now: Now) {
    let mut tx = db.tx().await;
    assert!(quota_reserve(tx.as_conn(), tenant, KEY, COST, id, seq, now).await.unwrap());
    delivery_replay_apply(tx.as_conn(), id, seq, now).await.unwrap();
    tx.commit().await.unwrap();
}

async fn a_replay_requeues_a_failed_delivery_under_the_next_reservation(db: &Db) {
    let t = funded(db).await;
    let id = failed(db, t).await;
    replay(db, t, id, 2, at(30)).await;

    let row = db.row(id).await;
    assert_eq!((row.state, row.reservation_seq), (DeliveryState::Pending, 2));
    assert_eq!((row.attempts, row.attempts_base), (1, 1), "a fresh budget, attempts counted on");
    assert_eq!((row.next_attempt_at, row.updated_at), (T0 + 30, T0 + 30));
    assert_eq!((row.last_error, row.sent_at, row.lease_owner), (None, None, None));
    let replays: Vec<(Uuid, i32)> = raw_query_as!(
        db.conn().await.as_conn(),
        "SELECT delivery_id, reservation_seq FROM delivery_replays WHERE delivery_id = $1",
        [id],
        fetch_all
    )
    .unwrap();
    assert_eq!(replays, vec![(id, 2)]);
    assert_eq!(db.balance(t).await, (GRANTED - COST, COST, 0));
    let expected = vec![
        moved("reserve", COST, id, 1),
        moved("release", COST, id, 1),
        moved("reserve", COST, id, 2),
    ];
    assert_eq!(db.movements(t).await, expected);

    let again = lease(db, WORKER, 1, at(40)).await;
    assert_eq!((again[0].delivery.id, again[0].delivery.attempts), (id, 2));
    let listed = delivery_attempts(db.conn().await.as_conn(), id).await.unwrap();
    let listed: Vec<_> = listed.iter().map(|a| (a.n, a.outcome.as_deref())).collect();
    assert_eq!(listed, vec![(1, Some("terminal")), (2, None)]);
}

async fn after_a_replay_only_the_new_reservation_can_end(db: &Db) {
    let t = funded(db).await;
    let id = failed(db, t).await;
    replay(db, t, id, 2, at(30)).await;
    for settle in [Settle::Commit, Settle::Release] {
        let mut tx = db.tx().await;
        let ended = quota_settle(tx.as_conn(), t, KEY, COST, id, 1, settle, at(40)).await;
        assert!(ended.expect_err("reservation 1 ended twice").is_unique_violation());
        tx.rollback().await.unwrap();
    }
    let mut tx = db.tx().await;
    quota_settle(tx.as_conn(), t, KEY, COST, id, 2, Settle::Commit, at(40)).await.unwrap();
    tx.commit().await.unwrap();
    assert_eq!(db.balance(t).await, (GRANTED - COST, 0, COST));
    assert_eq!(db.movements(t).await.last(), Some(&moved("commit", COST, id, 2)));
}

async fn a_cancelled_delivery_replays_with_its_attempts_unspent(db: &Db) {
    let t = funded(db).await;
    let mut new = new_delivery(t, "order-1");
    new.cost = COST;
    claim(db, &new, at(0)).await;
    let cancel = Transition {
        id: new.id,
        state: Some(StateChange::Cancelled),
        settle: Some(release(t, 1)),
        attempt: None,
        now: at(10),
    };
    apply(db, &cancel).await.unwrap();
    replay(db, t, new.id, 2, at(20)).await;
    let row = db.row(new.id).await;
    assert_eq!((row.state, row.reservation_seq), (DeliveryState::Pending, 2));
    assert_eq!((row.attempts, row.attempts_base, row.next_attempt_at), (0, 0, T0 + 20));
    assert_eq!(db.balance(t).await, (GRANTED - COST, COST, 0));
}

async fn a_cancel_is_a_transition_that_releases_the_reservation(db: &Db) {
    let t = funded(db).await;
    let mut new = new_delivery(t, "order-1");
    new.cost = COST;
    claim(db, &new, at(0)).await;
    let cancel = Transition {
        id: new.id,
        state: Some(StateChange::Cancelled),
        settle: Some(release(t, 1)),
        attempt: None,
        now: at(10),
    };
    apply(db, &cancel).await.unwrap();

    let row = db.row(new.id).await;
    assert_eq!(
        (row.state, row.updated_at, row.reservation_seq),
        (DeliveryState::Cancelled, T0 + 10, 1)
    );
    assert_eq!((row.lease_owner, row.lease_until, row.sent_at), (None, None, None));
    assert_eq!(db.balance(t).await, (GRANTED, 0, 0));
    let expected = vec![moved("reserve", COST, new.id, 1), moved("release", COST, new.id, 1)];
    assert_eq!(db.movements(t).await, expected);
    assert!(lease(db, WORKER, 10, at(20)).await.is_empty(), "a cancelled delivery was leased");
}
