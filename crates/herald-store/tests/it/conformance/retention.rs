//! `retention_prune`: final deliveries (with their payloads, attempts and replays) and
//! receipts older than `keep` by the clock given go, in batches of at most `limit`; the
//! journal stays.

use super::*;
use herald_core::{OperationId, Scope};
use herald_store::clock::system_ms;
use herald_store::deliveries::{
    AttemptEnd, Pruned, Settlement, StateChange, Transition, delivery_replay_apply, retention_prune,
};
use herald_store::quota::{Settle, quota_reserve};
use herald_store::receipts::{receipt_insert, receipts_count};
use herald_store::sqlx::types::Uuid;
use herald_store::{AsConn, Now};
use std::time::Duration;

conformance!(
    only_final_deliveries_older_than_keep_are_pruned,
    payloads_attempts_and_replays_go_with_their_delivery_and_the_journal_stays,
    a_batch_prunes_at_most_limit_of_each,
    receipts_older_than_keep_go,
);

const DAY: Duration = Duration::from_secs(24 * 3_600);
const DAY_MS: i64 = 24 * 3_600 * SECOND_MS;

async fn prune(db: &Db, keep: Duration, now: Now, limit: usize) -> Pruned {
    let mut tx = db.tx().await;
    let pruned = retention_prune(tx.as_conn(), keep, now, limit).await.unwrap();
    tx.commit().await.unwrap();
    pruned
}

/// A claim, leased and ended in `state` at `T0 + now` (the only pending delivery then).
async fn leased_then(
    db: &Db,
    tenant: Uuid,
    key: &str,
    state: StateChange<'static>,
    now: i64,
) -> Uuid {
    let id = claimed(db, tenant, key, at(0)).await;
    assert_eq!(ids(&lease(db, WORKER, 1, at(now)).await), vec![id]);
    let settle = match state {
        StateChange::Sent { .. } => Settle::Commit,
        _ => Settle::Release,
    };
    let end = Transition {
        id,
        state: Some(state),
        settle: Some(settlement(tenant, 1, settle)),
        attempt: Some(AttemptEnd {
            n: 1,
            worker: WORKER,
            outcome: if settle == Settle::Commit { "sent" } else { "terminal" },
            started_at: Some(T0 + now),
            error_code: None,
            error_message: None,
        }),
        now: at(now),
    };
    apply(db, &end).await.unwrap();
    id
}

fn settlement(tenant: Uuid, seq: i32, settle: Settle) -> Settlement<'static> {
    Settlement { tenant_id: tenant, quota_key: KEY, cost: 1, reservation_seq: seq, settle }
}

async fn cancelled(db: &Db, tenant: Uuid, key: &str, now: i64) -> Uuid {
    let id = claimed(db, tenant, key, at(0)).await;
    let cancel = Transition {
        id,
        state: Some(StateChange::Cancelled),
        settle: Some(settlement(tenant, 1, Settle::Release)),
        attempt: None,
        now: at(now),
    };
    apply(db, &cancel).await.unwrap();
    id
}

async fn only_final_deliveries_older_than_keep_are_pruned(db: &Db) {
    let t = funded(db).await;
    let sent = StateChange::Sent { own_attempt: false };
    let old_sent = leased_then(db, t, "old-sent", sent, 0).await;
    let old_failed = leased_then(db, t, "old-failed", StateChange::Failed { error: None }, 0).await;
    let old_cancelled = cancelled(db, t, "old-cancelled", 0).await;
    let at_cutoff = leased_then(db, t, "at-cutoff", sent, 1_000).await;
    let recent = leased_then(db, t, "recent", sent, 2 * DAY_MS).await;
    let sending = claimed(db, t, "sending", at(0)).await;
    lease(db, WORKER, 1, at(0)).await;
    let pending = claimed(db, t, "pending", at(0)).await;

    assert_eq!(prune(db, DAY, at(0), 100).await, Pruned::default(), "pruned by another clock");
    assert_eq!(prune(db, DAY, at(DAY_MS), 100).await, Pruned::default(), "kept for less than keep");
    let pruned = prune(db, DAY, at(DAY_MS + 1_000), 100).await;
    assert_eq!(pruned, Pruned { deliveries: 3, receipts: 0 });
    for gone in [old_sent, old_failed, old_cancelled] {
        assert!(db.find(gone).await.is_none(), "{gone} was kept");
    }
    for kept in [at_cutoff, recent, sending, pending] {
        assert!(db.find(kept).await.is_some(), "{kept} was pruned");
    }
    let late = prune(db, DAY, at(100 * DAY_MS), 100).await;
    assert_eq!(late.deliveries, 2, "only the final ones, however old");
    assert!(db.find(sending).await.is_some() && db.find(pending).await.is_some());
}

async fn payloads_attempts_and_replays_go_with_their_delivery_and_the_journal_stays(db: &Db) {
    let t = funded(db).await;
    let failed = StateChange::Failed { error: Some("bounced") };
    let id = leased_then(db, t, "order-1", failed, 10).await;
    // Replayed, and failed again: two attempt rows, one replay record, four movements.
    let mut tx = db.tx().await;
    assert!(quota_reserve(tx.as_conn(), t, KEY, 1, id, 2, at(20)).await.unwrap());
    delivery_replay_apply(tx.as_conn(), id, 2, at(20)).await.unwrap();
    tx.commit().await.unwrap();
    lease(db, WORKER, 1, at(30)).await;
    let fail_again = Transition {
        id,
        state: Some(failed),
        settle: Some(settlement(t, 2, Settle::Release)),
        attempt: Some(AttemptEnd {
            n: 2,
            worker: WORKER,
            outcome: "terminal",
            started_at: Some(T0 + 30),
            error_code: None,
            error_message: None,
        }),
        now: at(40),
    };
    apply(db, &fail_again).await.unwrap();
    let related = [("delivery_payloads", 1), ("delivery_attempts", 2), ("delivery_replays", 1)];
    for (table, n) in related {
        assert_eq!(db.count(table, "delivery_id", id).await, n, "{table} before");
    }
    let journal = db.movements(t).await;
    assert_eq!(journal.len(), 4);
    // PostgreSQL (schema 20): the current reservation's end is on the delivery row, the
    // replayed one's was written out as a final row by the replay.
    let final_rows = || db.count("quota_movements", "delivery_id", id);
    if db.backend() == Backend::Postgres {
        assert_eq!(final_rows().await, 1, "the first release, written out by the replay");
    }

    assert_eq!(prune(db, DAY, at(DAY_MS + 1_000), 100).await.deliveries, 1);
    assert!(db.find(id).await.is_none());
    for (table, _) in related {
        assert_eq!(db.count(table, "delivery_id", id).await, 0, "{table} after");
    }
    assert_eq!(db.movements(t).await, journal, "the journal is the account's history");
    if db.backend() == Backend::Postgres {
        assert_eq!(final_rows().await, 2, "the second release, written out by retention");
    }
    assert_eq!(db.balance(t).await, (GRANTED, 0, 0));
}

async fn a_batch_prunes_at_most_limit_of_each(db: &Db) {
    let t = funded(db).await;
    let scope = Scope::new("invoices").unwrap();
    let mut tx = db.tx().await;
    for i in 0..5 {
        let op = OperationId::new(format!("op-{i}")).unwrap();
        assert!(receipt_insert(tx.as_conn(), &scope, &op).await.unwrap());
    }
    tx.commit().await.unwrap();
    for i in 0..5 {
        cancelled(db, t, &format!("order-{i}"), 0).await;
    }
    // Receipts were written by the real clock, before `T0`: a day after `T0` both are old.
    let now = at(DAY_MS);
    let keep = Duration::from_secs(3_600);
    let batches = [
        prune(db, keep, now, 2).await,
        prune(db, keep, now, 2).await,
        prune(db, keep, now, 2).await,
        prune(db, keep, now, 2).await,
    ];
    let sizes: Vec<_> = batches.iter().map(|p| (p.deliveries, p.receipts)).collect();
    assert_eq!(sizes, vec![(2, 2), (2, 2), (1, 1), (0, 0)]);
    assert_eq!(receipts_count(db.conn().await.as_conn(), &scope).await.unwrap(), 0);
}

/// Receipts carry the time they were written (the database's clock): judged by the `now`
/// given, they go once `keep` has passed.
async fn receipts_older_than_keep_go(db: &Db) {
    let scope = Scope::new("invoices").unwrap();
    let mut tx = db.tx().await;
    for op in ["op-1", "op-2"] {
        let op = OperationId::new(op).unwrap();
        assert!(receipt_insert(tx.as_conn(), &scope, &op).await.unwrap());
    }
    tx.commit().await.unwrap();
    let hour = Duration::from_secs(3_600);
    let written = system_ms();

    assert_eq!(prune(db, hour, Now::At(written), 100).await.receipts, 0);
    assert_eq!(prune(db, hour, Now::Database, 100).await.receipts, 0);
    assert_eq!(prune(db, Duration::MAX, Now::At(written + 1_000 * DAY_MS), 100).await.receipts, 0);
    assert_eq!(receipts_count(db.conn().await.as_conn(), &scope).await.unwrap(), 2);
    let two_hours = 2 * 3_600 * SECOND_MS;
    assert_eq!(prune(db, hour, Now::At(written + two_hours), 100).await.receipts, 2);
    assert_eq!(receipts_count(db.conn().await.as_conn(), &scope).await.unwrap(), 0);
}
