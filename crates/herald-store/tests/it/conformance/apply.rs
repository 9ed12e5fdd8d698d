//! Applying what the library decided: `delivery_apply` writes a [`Transition`] as given
//! (fencing is the caller's), `deliveries_sent_fenced` marks only fenced attempts and
//! commits each reservation once, and `lease_expired` judges a lease by the clock given.

use super::*;
use herald_core::DeliveryState;
use herald_core::limits::ERROR_MESSAGE_LEN_MAX;
use herald_store::deliveries::{
    AttemptEnd, AttemptRow, Settlement, StateChange, Transition, deliveries_sent_fenced,
    delivery_apply, delivery_attempts, delivery_hand_back, lease_expired,
};
use herald_store::quota::{Settle, quota_lock};
use herald_store::sqlx::types::Uuid;
use herald_store::{AsConn, Now, clock::system_ms};
use std::collections::HashSet;
use std::time::Duration;

conformance!(
    sent_fenced_marks_only_attempts_that_hold_their_lease,
    sent_fenced_leaves_a_row_already_sent_or_handed_back,
    sent_fenced_considers_only_the_first_pair_of_an_id,
    sent_fenced_commits_each_reservation_once_on_its_own_account,
    a_requeue_keeps_the_reservation_and_writes_the_attempt_row,
    a_failure_releases_the_reservation,
    a_send_under_its_own_lease_commits_and_the_row_stands_for_the_attempt,
    a_transition_for_a_stale_attempt_is_written_as_given,
    a_second_final_movement_is_refused_and_the_balance_is_unchanged,
    a_settlement_of_cost_0_moves_nothing,
    lease_expired_judges_by_the_clock_given,
    error_messages_are_cut_to_the_limit_at_a_character_boundary,
);

/// The final movement of `tenant`'s reservation `seq` of `cost` on [`KEY`].
fn settlement(tenant: Uuid, cost: i64, seq: i32, settle: Settle) -> Settlement<'static> {
    Settlement { tenant_id: tenant, quota_key: KEY, cost, reservation_seq: seq, settle }
}

/// Attempt `n` of [`WORKER`] ending with `outcome`, leased at `started`.
fn ended(n: i32, outcome: &'static str, started: i64) -> AttemptEnd<'static> {
    AttemptEnd {
        n,
        worker: WORKER,
        outcome,
        started_at: Some(started),
        error_code: None,
        error_message: None,
    }
}

/// `deliveries_sent_fenced` for `worker` in a transaction of its own, the accounts locked
/// first as the contract asks; what it marked, as a set.
async fn sent_fenced(
    db: &Db,
    worker: &str,
    attempts: &[(Uuid, i32)],
    now: Now,
) -> HashSet<(Uuid, i32)> {
    let mut accounts = Vec::new();
    for (id, _) in attempts {
        let row = db.row(*id).await;
        accounts.push((row.tenant_id, row.quota_key));
    }
    let mut tx = db.tx().await;
    quota_lock(tx.as_conn(), &accounts).await.unwrap();
    let marked = deliveries_sent_fenced(tx.as_conn(), worker, attempts, now).await.unwrap();
    tx.commit().await.unwrap();
    let set: HashSet<_> = marked.iter().copied().collect();
    assert_eq!(set.len(), marked.len(), "marked twice: {marked:?}");
    set
}

async fn attempts(db: &Db, id: Uuid) -> Vec<AttemptRow> {
    delivery_attempts(db.conn().await.as_conn(), id).await.unwrap()
}

/// The commit rows of the journal, as a set of (delivery, seq, amount).
async fn commits(db: &Db, tenant: Uuid) -> HashSet<(Uuid, i32, i64)> {
    let movements = db.movements(tenant).await.into_iter().filter(|j| j.kind == "commit");
    movements.map(|j| (j.delivery.unwrap(), j.seq.unwrap(), j.amount)).collect()
}

async fn sent_fenced_marks_only_attempts_that_hold_their_lease(db: &Db) {
    let t = funded(db).await;
    let [a, b, c, d] = due(db, t, 4).await[..] else { unreachable!() };
    lease(db, WORKER, 3, at(10)).await;
    lease(db, "worker-2", 1, at(10)).await;
    let batch = [(a, 1), (b, 2), (d, 1), (c, 1)];
    assert_eq!(sent_fenced(db, WORKER, &batch, at(20)).await, HashSet::from([(a, 1), (c, 1)]));

    for id in [a, c] {
        let row = db.row(id).await;
        assert_eq!(
            (row.state, row.sent_at, row.updated_at),
            (DeliveryState::Sent, Some(T0 + 20), T0 + 20)
        );
        assert_eq!((row.lease_owner, row.lease_until, row.last_error), (None, None, None));
        assert_eq!((row.attempts, row.attempt_worker.as_deref()), (1, Some(WORKER)));
        assert_eq!(db.count("delivery_attempts", "delivery_id", id).await, 0, "an attempt row");
        let listed = attempts(db, id).await;
        assert_eq!(
            listed,
            vec![AttemptRow {
                n: 1,
                worker: WORKER.into(),
                started_at: T0 + 10,
                finished_at: Some(T0 + 20),
                outcome: Some("sent".into()),
                error_code: None,
                error_message: None,
            }]
        );
    }
    let (b_row, d_row) = (db.row(b).await, db.row(d).await);
    assert_eq!((b_row.state, b_row.lease_owner.as_deref()), (DeliveryState::Sending, Some(WORKER)));
    assert_eq!(
        (d_row.state, d_row.lease_owner.as_deref()),
        (DeliveryState::Sending, Some("worker-2"))
    );
    assert_eq!(commits(db, t).await, HashSet::from([(a, 1, 1), (c, 1, 1)]));
    assert_eq!(db.balance(t).await, (GRANTED - 4, 2, 2));
}

async fn sent_fenced_leaves_a_row_already_sent_or_handed_back(db: &Db) {
    let t = funded(db).await;
    let [a, b] = due(db, t, 2).await[..] else { unreachable!() };
    lease(db, WORKER, 2, at(10)).await;
    assert_eq!(sent_fenced(db, WORKER, &[(a, 1)], at(20)).await, HashSet::from([(a, 1)]));
    let mut tx = db.tx().await;
    assert!(delivery_hand_back(tx.as_conn(), b, WORKER, 1).await.unwrap());
    tx.commit().await.unwrap();

    assert!(sent_fenced(db, WORKER, &[(a, 1), (b, 1)], at(30)).await.is_empty());
    assert_eq!(db.row(a).await.sent_at, Some(T0 + 20), "sent again");
    assert_eq!(db.row(b).await.state, DeliveryState::Pending);
    assert_eq!(commits(db, t).await, HashSet::from([(a, 1, 1)]));
    assert_eq!(db.balance(t).await, (GRANTED - 2, 1, 1));
}

/// A worker can hold a stale and a new attempt of one delivery: the first pair decides.
async fn sent_fenced_considers_only_the_first_pair_of_an_id(db: &Db) {
    let t = funded(db).await;
    let [a, b] = due(db, t, 2).await[..] else { unreachable!() };
    lease(db, WORKER, 2, at(10)).await;
    let batch = [(a, 2), (a, 1), (b, 1), (b, 1)];
    assert_eq!(sent_fenced(db, WORKER, &batch, at(20)).await, HashSet::from([(b, 1)]));
    assert_eq!(db.row(a).await.state, DeliveryState::Sending);
    assert_eq!(commits(db, t).await, HashSet::from([(b, 1, 1)]), "one commit row for b");
    assert_eq!(db.balance(t).await, (GRANTED - 2, 1, 1));
}

async fn sent_fenced_commits_each_reservation_once_on_its_own_account(db: &Db) {
    let acme = funded(db).await;
    grant(db, acme, "sms", 10).await;
    let globex = tenant(db, "globex").await;
    grant(db, globex, KEY, 10).await;
    let mut claimed = Vec::new();
    for (tenant, key, quota_key, cost) in [
        (acme, "e1", KEY, 2),
        (acme, "e2", KEY, 2),
        (acme, "s1", "sms", 3),
        (globex, "g1", KEY, 1),
        (acme, "free", KEY, 0),
    ] {
        let mut new = new_delivery(tenant, key);
        (new.quota_key, new.cost) = (quota_key, cost);
        claim(db, &new, at(0)).await;
        claimed.push((new.id, 1));
    }
    assert_eq!(lease(db, WORKER, 10, at(10)).await.len(), 5);
    let marked = sent_fenced(db, WORKER, &claimed, at(20)).await;
    assert_eq!(marked, claimed.iter().copied().collect::<HashSet<_>>());

    assert_eq!(db.balance(acme).await, (GRANTED - 4, 0, 4));
    let sms = db.account(acme, "sms").await.unwrap();
    assert_eq!((sms.available, sms.reserved, sms.spent), (7, 0, 3));
    assert_eq!(db.balance(globex).await, (9, 0, 1));
    let [e1, e2, s1, g1, free] = claimed.iter().map(|(id, _)| *id).collect::<Vec<_>>()[..] else {
        unreachable!()
    };
    assert_eq!(commits(db, acme).await, HashSet::from([(e1, 1, 2), (e2, 1, 2), (s1, 1, 3)]));
    assert_eq!(commits(db, globex).await, HashSet::from([(g1, 1, 1)]));
    assert_eq!(db.row(free).await.state, DeliveryState::Sent);
}

async fn a_requeue_keeps_the_reservation_and_writes_the_attempt_row(db: &Db) {
    let t = funded(db).await;
    let id = claimed(db, t, "order-1", at(0)).await;
    lease(db, WORKER, 1, at(10)).await;
    let requeue = Transition {
        id,
        state: Some(StateChange::Pending {
            retry_in: Duration::from_secs(30),
            error: Some("smtp 451"),
        }),
        settle: None,
        attempt: Some(AttemptEnd {
            error_code: Some("451"),
            error_message: Some("try again later"),
            ..ended(1, "transient", T0 + 10)
        }),
        now: at(20),
    };
    apply(db, &requeue).await.unwrap();

    let row = db.row(id).await;
    assert_eq!(
        (row.state, row.attempts, row.next_attempt_at),
        (DeliveryState::Pending, 1, T0 + 30_020)
    );
    assert_eq!((row.lease_owner, row.lease_until, row.attempt_worker), (None, None, None));
    assert_eq!((row.last_error.as_deref(), row.updated_at), (Some("smtp 451"), T0 + 20));
    assert_eq!(row.attempt_started_at, Some(T0 + 10), "the attempt's start is kept");
    let listed = attempts(db, id).await;
    let expected = AttemptRow {
        n: 1,
        worker: WORKER.into(),
        started_at: T0 + 10,
        finished_at: Some(T0 + 20),
        outcome: Some("transient".into()),
        error_code: Some("451".into()),
        error_message: Some("try again later".into()),
    };
    assert_eq!(listed, vec![expected]);
    assert_eq!(db.balance(t).await, (GRANTED - 1, 1, 0));
    assert_eq!(db.movements(t).await, vec![moved("reserve", 1, id, 1)]);
}

async fn a_failure_releases_the_reservation(db: &Db) {
    let t = funded(db).await;
    let id = claimed(db, t, "order-1", at(0)).await;
    lease(db, WORKER, 1, at(10)).await;
    let fail = Transition {
        id,
        state: Some(StateChange::Failed { error: Some("mailbox unknown") }),
        settle: Some(settlement(t, 1, 1, Settle::Release)),
        attempt: Some(ended(1, "terminal", T0 + 10)),
        now: at(20),
    };
    apply(db, &fail).await.unwrap();

    let row = db.row(id).await;
    assert_eq!(
        (row.state, row.last_error.as_deref()),
        (DeliveryState::Failed, Some("mailbox unknown"))
    );
    assert_eq!((row.lease_owner, row.attempt_worker, row.sent_at), (None, None, None));
    assert_eq!(attempts(db, id).await[0].outcome.as_deref(), Some("terminal"));
    assert_eq!(db.balance(t).await, (GRANTED, 0, 0));
    assert_eq!(db.movements(t).await, vec![moved("reserve", 1, id, 1), moved("release", 1, id, 1)]);
}

async fn a_send_under_its_own_lease_commits_and_the_row_stands_for_the_attempt(db: &Db) {
    let t = funded(db).await;
    let id = claimed(db, t, "order-1", at(0)).await;
    lease(db, WORKER, 1, at(10)).await;
    let transient = Transition {
        id,
        state: Some(StateChange::Pending { retry_in: Duration::ZERO, error: Some("busy") }),
        settle: None,
        attempt: Some(ended(1, "transient", T0 + 10)),
        now: at(20),
    };
    apply(db, &transient).await.unwrap();
    lease(db, WORKER, 1, at(30)).await;
    let sent = Transition {
        id,
        state: Some(StateChange::Sent { own_attempt: true }),
        settle: Some(settlement(t, 1, 1, Settle::Commit)),
        attempt: None,
        now: at(40),
    };
    apply(db, &sent).await.unwrap();

    let row = db.row(id).await;
    assert_eq!((row.state, row.attempts, row.sent_at), (DeliveryState::Sent, 2, Some(T0 + 40)));
    assert_eq!((row.last_error, row.attempt_worker.as_deref()), (None, Some(WORKER)));
    let listed = attempts(db, id).await;
    let outcomes: Vec<_> =
        listed.iter().map(|a| (a.n, a.outcome.as_deref(), a.finished_at)).collect();
    assert_eq!(
        outcomes,
        vec![(1, Some("transient"), Some(T0 + 20)), (2, Some("sent"), Some(T0 + 40))]
    );
    assert_eq!(listed[1].started_at, T0 + 30);
    assert_eq!(db.count("delivery_attempts", "delivery_id", id).await, 1);
    assert_eq!(db.balance(t).await, (GRANTED - 1, 0, 1));
    assert_eq!(db.movements(t).await, vec![moved("reserve", 1, id, 1), moved("commit", 1, id, 1)]);
}

/// The store judges nothing: a `sent` from attempt 1, reported after attempt 2 of another
/// worker took the lease, is written exactly as the caller decided it.
async fn a_transition_for_a_stale_attempt_is_written_as_given(db: &Db) {
    let t = funded(db).await;
    let id = claimed(db, t, "order-1", at(0)).await;
    lease(db, WORKER, 1, at(10)).await;
    let lost = Transition {
        id,
        state: Some(StateChange::Pending {
            retry_in: Duration::ZERO,
            error: Some("lease expired"),
        }),
        settle: None,
        attempt: Some(ended(1, "lost", T0 + 10)),
        now: at(LEASE_MS + 10),
    };
    apply(db, &lost).await.unwrap();
    lease(db, "worker-2", 1, at(LEASE_MS + 20)).await;

    let stale = Transition {
        id,
        state: Some(StateChange::Sent { own_attempt: false }),
        settle: Some(settlement(t, 1, 1, Settle::Commit)),
        attempt: Some(AttemptEnd { started_at: None, ..ended(1, "sent", 0) }),
        now: at(LEASE_MS + 30),
    };
    apply(db, &stale).await.unwrap();
    let row = db.row(id).await;
    assert_eq!((row.state, row.sent_at), (DeliveryState::Sent, Some(T0 + LEASE_MS + 30)));
    assert_eq!((row.lease_owner, row.attempt_worker), (None, None), "attempt 2 is not sent");
    let listed = attempts(db, id).await;
    let outcomes: Vec<_> =
        listed.iter().map(|a| (a.n, a.outcome.as_deref(), a.started_at)).collect();
    assert_eq!(
        outcomes,
        vec![(1, Some("sent"), T0 + 10)],
        "attempt 1's row is updated, its start kept"
    );
    assert_eq!(db.balance(t).await, (GRANTED - 1, 0, 1));
}

/// Whatever the caller decided, the journal's unique index refuses a second final movement
/// (another reservation stays open, so no balance CHECK could refuse it first); a caller
/// that commits anyway keeps no second movement.
async fn a_second_final_movement_is_refused_and_the_balance_is_unchanged(db: &Db) {
    let t = funded(db).await;
    let id = claimed(db, t, "order-1", at(0)).await;
    let open = claimed(db, t, "order-2", at(0)).await;
    let cancel = Transition {
        id,
        state: Some(StateChange::Cancelled),
        settle: Some(settlement(t, 1, 1, Settle::Release)),
        attempt: None,
        now: at(10),
    };
    apply(db, &cancel).await.unwrap();
    for settle in [Settle::Commit, Settle::Release] {
        let again = Transition { state: None, settle: Some(settlement(t, 1, 1, settle)), ..cancel };
        let mut tx = db.tx().await;
        let refused = delivery_apply(tx.as_conn(), &again).await.expect_err("a second movement");
        assert!(refused.is_unique_violation(), "{settle:?}: {refused:?}");
        // PostgreSQL turns this COMMIT into a rollback; SQLite commits what did not fail.
        let _ = tx.commit().await;
        assert_eq!(db.balance(t).await, (GRANTED - 1, 1, 0), "{settle:?}");
    }
    let expected =
        vec![moved("reserve", 1, id, 1), moved("reserve", 1, open, 1), moved("release", 1, id, 1)];
    assert_eq!(db.movements(t).await, expected);
}

async fn a_settlement_of_cost_0_moves_nothing(db: &Db) {
    let t = funded(db).await;
    let mut free = new_delivery(t, "order-1");
    (free.cost, free.quota_key) = (0, "no-such-account");
    claim(db, &free, at(0)).await;
    let cancel = Transition {
        id: free.id,
        state: Some(StateChange::Cancelled),
        settle: Some(Settlement {
            quota_key: "no-such-account",
            ..settlement(t, 0, 1, Settle::Release)
        }),
        attempt: None,
        now: at(10),
    };
    apply(db, &cancel).await.unwrap();
    assert_eq!(db.row(free.id).await.state, DeliveryState::Cancelled);
    assert!(db.movements(t).await.is_empty());
    assert_eq!(db.balance(t).await, (GRANTED, 0, 0));
}

async fn lease_expired_judges_by_the_clock_given(db: &Db) {
    let t = funded(db).await;
    // Leased long ago, and leased just now, by the system clock.
    let past = 1_700_000_000_000;
    let mut old = new_delivery(t, "old");
    old.send_at = Some(past);
    claim(db, &old, Now::At(past)).await;
    lease(db, WORKER, 1, Now::At(past)).await;
    let live = claimed(db, t, "live", Now::At(system_ms())).await;
    lease(db, WORKER, 1, Now::At(system_ms())).await;

    let mut conn = db.conn().await;
    let until = past + LEASE_MS;
    let cases = [
        (None, Now::At(until), false),
        (Some(until), Now::At(until - 1), false),
        (Some(until), Now::At(until), true),
        (Some(until), Now::At(until + 1), true),
    ];
    for (lease_until, now, expected) in cases {
        let got = lease_expired(conn.as_conn(), old.id, lease_until, now).await.unwrap();
        assert_eq!(got, expected, "lease until {lease_until:?} at {now:?}");
    }
    let old_until = db.row(old.id).await.lease_until;
    let live_until = db.row(live).await.lease_until;
    assert_eq!(old_until, Some(until));
    assert!(lease_expired(conn.as_conn(), old.id, old_until, Now::Database).await.unwrap());
    assert!(!lease_expired(conn.as_conn(), live, live_until, Now::Database).await.unwrap());
}

async fn error_messages_are_cut_to_the_limit_at_a_character_boundary(db: &Db) {
    let t = funded(db).await;
    let id = claimed(db, t, "order-1", at(0)).await;
    lease(db, WORKER, 1, at(10)).await;
    // One byte, then two-byte characters: the limit falls inside one.
    let long = format!("x{}", "é".repeat(ERROR_MESSAGE_LEN_MAX));
    let cut = &long[..ERROR_MESSAGE_LEN_MAX - 1];
    let requeue = Transition {
        id,
        state: Some(StateChange::Pending { retry_in: Duration::ZERO, error: Some(&long) }),
        settle: None,
        attempt: Some(AttemptEnd { error_message: Some(&long), ..ended(1, "transient", T0 + 10) }),
        now: at(20),
    };
    apply(db, &requeue).await.unwrap();
    assert_eq!(db.row(id).await.last_error.as_deref(), Some(cut));
    assert_eq!(attempts(db, id).await[0].error_message.as_deref(), Some(cut));
}
