//! Reads: one delivery (by id, scoped to a tenant or not, locked or not; by identity), its
//! attempts, a tenant's keyset pages and their filters, queue health.

use super::*;
use herald_core::DeliveryState;
use herald_store::deliveries::{
    AttemptEnd, AttemptRow, DeliveryRow, ListFilter, StateChange, Transition,
    deliveries_count_by_state, deliveries_list, delivery_attempts, delivery_by_identity,
    delivery_get, oldest_due_age_ms,
};
use herald_store::sqlx::types::Uuid;
use herald_store::{AsConn, Backend, Concurrency, ErrorClass};
use std::time::Duration;

conformance!(
    a_delivery_is_read_by_id_within_its_tenant_only,
    a_delivery_is_read_by_its_identity,
    attempts_list_ended_attempts_and_the_one_in_flight,
    pages_are_newest_first_and_before_is_exclusive,
    pages_filter_by_tenant_state_and_channel,
    oldest_due_age_and_counts_by_state_describe_the_queue,
    a_locked_read_holds_the_row_until_commit,
);

/// A page of `tenant`'s deliveries, as ids.
async fn page(db: &Db, filter: ListFilter<'_>) -> Vec<Uuid> {
    let rows = deliveries_list(db.conn().await.as_conn(), &filter).await.unwrap();
    assert!(rows.iter().all(|r| r.tenant_id == filter.tenant), "another tenant's row");
    rows.into_iter().map(|r| r.id).collect()
}

fn all_of(tenant: Uuid) -> ListFilter<'static> {
    ListFilter { tenant, state: None, channel: None, before: None, limit: 100 }
}

async fn a_delivery_is_read_by_id_within_its_tenant_only(db: &Db) {
    let acme = funded(db).await;
    let globex = tenant(db, "globex").await;
    let id = claimed(db, acme, "order-1", at(0)).await;
    let mut conn = db.conn().await;
    let own = delivery_get(conn.as_conn(), Some(acme), id, false).await.unwrap();
    let own = own.expect("its tenant reads it");
    assert_eq!((own.id, own.tenant_id), (id, acme));
    let any = delivery_get(conn.as_conn(), None, id, false).await.unwrap();
    assert_eq!(any.as_ref(), Some(&own));
    assert_eq!(delivery_get(conn.as_conn(), Some(globex), id, false).await.unwrap(), None);
    assert_eq!(delivery_get(conn.as_conn(), None, Uuid::now_v7(), false).await.unwrap(), None);
}

async fn a_delivery_is_read_by_its_identity(db: &Db) {
    let acme = funded(db).await;
    let globex = tenant(db, "globex").await;
    let id = claimed(db, acme, "order-1", at(0)).await;
    let mut conn = db.conn().await;
    let found: Option<DeliveryRow> =
        delivery_by_identity(conn.as_conn(), acme, "order-1", CHANNEL).await.unwrap();
    assert_eq!(found, Some(db.row(id).await));
    let misses =
        [(acme, "order-2", CHANNEL), (acme, "order-1", "webhook"), (globex, "order-1", CHANNEL)];
    for (tenant, key, channel) in misses {
        let miss = delivery_by_identity(conn.as_conn(), tenant, key, channel).await.unwrap();
        assert!(miss.is_none(), "found ({key}, {channel})");
    }
}

async fn attempts_list_ended_attempts_and_the_one_in_flight(db: &Db) {
    let t = funded(db).await;
    let id = claimed(db, t, "order-1", at(0)).await;
    let attempts = || async { delivery_attempts(db.conn().await.as_conn(), id).await.unwrap() };
    assert!(attempts().await.is_empty());
    let in_flight = |n, worker: &str, started_at| AttemptRow {
        n,
        worker: worker.into(),
        started_at,
        finished_at: None,
        outcome: None,
        error_code: None,
        error_message: None,
    };

    lease(db, WORKER, 1, at(10)).await;
    assert_eq!(attempts().await, vec![in_flight(1, WORKER, T0 + 10)]);
    // The attempt's start, when the caller knows it (else its end is its start).
    let end = |n, worker, outcome, state, started_at, now| Transition {
        id,
        state: Some(state),
        settle: None,
        attempt: Some(AttemptEnd {
            n,
            worker,
            outcome,
            started_at,
            error_code: Some("E1"),
            error_message: None,
        }),
        now: at(now),
    };
    let requeue = StateChange::Pending { retry_in: Duration::ZERO, error: None };
    apply(db, &end(1, WORKER, "transient", requeue, None, 20)).await.unwrap();
    let first = AttemptRow {
        finished_at: Some(T0 + 20),
        outcome: Some("transient".into()),
        error_code: Some("E1".into()),
        ..in_flight(1, WORKER, T0 + 20)
    };
    assert_eq!(attempts().await, vec![first.clone()]);

    lease(db, "worker-2", 1, at(30)).await;
    assert_eq!(attempts().await, vec![first.clone(), in_flight(2, "worker-2", T0 + 30)]);
    let fail = StateChange::Failed { error: None };
    apply(db, &end(2, "worker-2", "terminal", fail, Some(T0 + 30), 40)).await.unwrap();
    let second = AttemptRow {
        finished_at: Some(T0 + 40),
        outcome: Some("terminal".into()),
        error_code: Some("E1".into()),
        ..in_flight(2, "worker-2", T0 + 30)
    };
    assert_eq!(attempts().await, vec![first, second]);
    assert!(delivery_attempts(db.conn().await.as_conn(), Uuid::now_v7()).await.unwrap().is_empty());
}

async fn pages_are_newest_first_and_before_is_exclusive(db: &Db) {
    let t = funded(db).await;
    let mut made = Vec::new();
    for i in 0..5 {
        made.push(claimed(db, t, &format!("order-{i}"), at(0)).await);
    }
    // UUIDv7: id order is creation order; pages follow the ids.
    let mut newest_first = made.clone();
    newest_first.sort_by(|a, b| b.cmp(a));
    assert_eq!(newest_first, made.iter().rev().copied().collect::<Vec<_>>());

    let first = ListFilter { limit: 2, ..all_of(t) };
    assert_eq!(page(db, first).await, newest_first[0..2]);
    let second = ListFilter { before: Some(newest_first[1]), ..first };
    assert_eq!(page(db, second).await, newest_first[2..4]);
    let third = ListFilter { before: Some(newest_first[3]), ..first };
    assert_eq!(page(db, third).await, newest_first[4..5]);
    assert!(page(db, ListFilter { before: Some(newest_first[4]), ..first }).await.is_empty());
    assert!(page(db, ListFilter { limit: 0, ..all_of(t) }).await.is_empty());
    assert_eq!(page(db, all_of(t)).await, newest_first);
}

async fn pages_filter_by_tenant_state_and_channel(db: &Db) {
    let acme = funded(db).await;
    let globex = tenant(db, "globex").await;
    grant(db, globex, KEY, 10).await;
    let e1 = claimed(db, acme, "e1", at(0)).await;
    let e2 = claimed(db, acme, "e2", at(0)).await;
    assert_eq!(ids(&lease(db, WORKER, 1, at(0)).await), vec![e1]);
    let mut webhook = new_delivery(acme, "w1");
    webhook.channel = "webhook";
    claim(db, &webhook, at(0)).await;
    let theirs = claimed(db, globex, "e1", at(0)).await;

    let filter = |state, channel| ListFilter { state, channel, ..all_of(acme) };
    assert_eq!(page(db, filter(None, None)).await, vec![webhook.id, e2, e1]);
    assert_eq!(page(db, filter(Some(DeliveryState::Pending), None)).await, vec![webhook.id, e2]);
    assert_eq!(page(db, filter(Some(DeliveryState::Sending), None)).await, vec![e1]);
    assert_eq!(page(db, filter(None, Some(CHANNEL))).await, vec![e2, e1]);
    let pending_email = filter(Some(DeliveryState::Pending), Some(CHANNEL));
    assert_eq!(page(db, pending_email).await, vec![e2]);
    assert!(page(db, filter(Some(DeliveryState::Sent), None)).await.is_empty());
    assert!(page(db, filter(None, Some("sms"))).await.is_empty());
    assert_eq!(page(db, all_of(globex)).await, vec![theirs]);
}

async fn oldest_due_age_and_counts_by_state_describe_the_queue(db: &Db) {
    let t = funded(db).await;
    let age =
        |now| async move { oldest_due_age_ms(db.conn().await.as_conn(), at(now)).await.unwrap() };
    assert_eq!(age(0).await, None);
    let leased = claimed(db, t, "leased", at(0)).await;
    assert_eq!(ids(&lease(db, WORKER, 1, at(0)).await), vec![leased]);
    for (key, due) in [("due-1", 5_000), ("due-2", 10_000), ("later", 3_600_000)] {
        let mut new = new_delivery(t, key);
        new.send_at = Some(T0 + due);
        claim(db, &new, at(0)).await;
    }
    assert_eq!(age(4_999).await, None, "nothing pending is due yet");
    assert_eq!(age(60_000).await, Some(55_000), "the oldest due pending row");

    let mut counts = deliveries_count_by_state(db.conn().await.as_conn()).await.unwrap();
    counts.sort_by_key(|(state, _)| state.as_str());
    assert_eq!(counts, vec![(DeliveryState::Pending, 3), (DeliveryState::Sending, 1)]);
}

/// `delivery_get(…, lock: true)` holds the row for the rest of the transaction: on
/// PostgreSQL a second locked read waits (here, until its transaction's bound) while a
/// plain read does not; on SQLite the writer's lock already holds the database.
async fn a_locked_read_holds_the_row_until_commit(db: &Db) {
    let t = funded(db).await;
    let id = claimed(db, t, "order-1", at(0)).await;
    let mut holder = db.tx().await;
    assert!(delivery_get(holder.as_conn(), Some(t), id, true).await.unwrap().is_some());

    let wait_max = Duration::from_millis(300);
    match db.backend() {
        Backend::Postgres | Backend::MySql => {
            let mut other = db.tx_waiting(wait_max).await.unwrap();
            assert!(delivery_get(other.as_conn(), Some(t), id, false).await.unwrap().is_some());
            let waited = delivery_get(other.as_conn(), Some(t), id, true).await;
            assert_eq!(waited.expect_err("read a locked row").class(), ErrorClass::WaitTimeout);
            other.rollback().await.unwrap();
        }
        Backend::Sqlite => {
            let refused = db.tx_waiting(wait_max).await.expect_err("a second writer began");
            assert_eq!(refused.class(), ErrorClass::Concurrency(Concurrency::SqliteBusy));
        }
    }
    holder.commit().await.unwrap();
    let mut after = db.tx_waiting(wait_max).await.unwrap();
    assert!(delivery_get(after.as_conn(), Some(t), id, true).await.unwrap().is_some());
    after.commit().await.unwrap();
}
