//! Reads: one delivery (by id, scoped to a tenant or not, locked or not; by identity), its
//! attempts and its payload, a tenant's keyset pages and their filters, the selections bulk
//! operations page through, counts per channel and state, queue health.

use super::*;
use herald_core::DeliveryState;
use herald_store::deliveries::{
    AttemptEnd, AttemptRow, DeliveryRow, ListFilter, SelectFilter, StateChange, Transition,
    deliveries_count_by_channel, deliveries_count_by_state, deliveries_list, deliveries_select,
    delivery_attempts, delivery_by_identity, delivery_get, delivery_payload, oldest_due_age_ms,
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
    pages_start_from_an_inclusive_id,
    a_selection_filters_by_state_channel_and_id_range,
    a_selection_pages_ascending_after_an_exclusive_id,
    a_selection_by_error_code_reads_the_latest_attempt_only,
    counts_by_channel_and_state_of_one_tenant_or_all,
    a_payload_reads_back_as_submitted,
    oldest_due_age_and_counts_by_state_describe_the_queue,
    a_locked_read_holds_the_row_until_commit,
);

/// A page of `tenant`'s deliveries, as ids.
async fn page(db: &Db, filter: ListFilter<'_>) -> Vec<Uuid> {
    let rows = deliveries_list(db.conn().await.as_conn(), &filter).await.unwrap();
    assert!(
        filter.tenant.is_none_or(|t| rows.iter().all(|r| r.tenant_id == t)),
        "another tenant's row"
    );
    rows.into_iter().map(|r| r.id).collect()
}

fn all_of(tenant: Uuid) -> ListFilter<'static> {
    ListFilter {
        tenant: Some(tenant),
        state: None,
        channel: None,
        before: None,
        from: None,
        error_code: None,
        key_prefix: None,
        to_prefix: None,
        failed_since: None,
        limit: 100,
    }
}

/// A selection of `filter.tenant`'s deliveries.
async fn select(db: &Db, filter: SelectFilter<'_>) -> Vec<Uuid> {
    let rows = deliveries_select(db.conn().await.as_conn(), &filter).await.unwrap();
    rows.into_iter().map(|r| r.id).collect()
}

fn every_one_of(tenant: Uuid) -> SelectFilter<'static> {
    SelectFilter {
        tenant,
        state: None,
        channel: None,
        from: None,
        to: None,
        error_code: None,
        after: None,
        limit: 100,
    }
}

/// Claims `operation_key` of `tenant` on `channel`, due `due_ms` after `T0` (the lease
/// takes rows in due order); its id.
async fn claimed_on(
    db: &Db,
    tenant: Uuid,
    operation_key: &str,
    channel: &str,
    due_ms: i64,
) -> Uuid {
    let mut new = new_delivery(tenant, operation_key);
    new.channel = channel;
    new.send_at = Some(T0 + due_ms);
    let got = claim(db, &new, at(0)).await;
    assert!(matches!(got, herald_store::deliveries::Claim::Inserted { .. }), "{got:?}");
    new.id
}

/// Ends attempt `n` of `id` (leased by [`WORKER`]) with `outcome` and `error_code`,
/// moving the delivery to `state`.
async fn end_attempt(
    db: &Db,
    id: Uuid,
    n: i32,
    outcome: &str,
    error_code: &str,
    state: StateChange<'_>,
    now: i64,
) {
    let attempt = AttemptEnd {
        n,
        worker: WORKER,
        outcome,
        started_at: None,
        error_code: Some(error_code),
        error_message: None,
    };
    let t =
        Transition { id, state: Some(state), settle: None, attempt: Some(attempt), now: at(now) };
    apply(db, &t).await.unwrap();
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
    // Every tenant's, and the prefixes of the key and the recipient (byte for byte: a
    // prefix of another case or with a LIKE wildcard matches nothing).
    let every = ListFilter { tenant: None, ..all_of(acme) };
    assert_eq!(page(db, every).await, vec![theirs, webhook.id, e2, e1]);
    let keyed = |p| ListFilter { key_prefix: Some(p), ..every };
    assert_eq!(page(db, keyed("e")).await, vec![theirs, e2, e1]);
    assert_eq!(page(db, ListFilter { tenant: Some(acme), ..keyed("e") }).await, vec![e2, e1]);
    for nothing in ["E", "e%", "_1", "e1x"] {
        assert!(page(db, keyed(nothing)).await.is_empty(), "{nothing}");
    }
    let to = |p| ListFilter { to_prefix: Some(p), ..every };
    assert_eq!(page(db, to("a@example.")).await.len(), 4);
    assert!(page(db, to("A@")).await.is_empty());
}

async fn pages_start_from_an_inclusive_id(db: &Db) {
    let t = funded(db).await;
    let mut newest_first = Vec::new();
    for i in 0..5 {
        newest_first.insert(0, claimed(db, t, &format!("order-{i}"), at(0)).await);
    }
    let from = |id: Uuid| ListFilter { from: Some(id), ..all_of(t) };
    assert_eq!(page(db, from(newest_first[2])).await, newest_first[0..3]);
    assert_eq!(page(db, from(newest_first[0])).await, newest_first[0..1]);
    assert_eq!(page(db, from(newest_first[4])).await, newest_first);
    // Between two bounds, and paged: `from` stays, `before` moves.
    let range = ListFilter { before: Some(newest_first[0]), limit: 2, ..from(newest_first[3]) };
    assert_eq!(page(db, range).await, newest_first[1..3]);
    let next = ListFilter { before: Some(newest_first[2]), ..range };
    assert_eq!(page(db, next).await, newest_first[3..4]);
    let past = ListFilter { before: Some(newest_first[3]), ..range };
    assert!(page(db, past).await.is_empty());
    // A bound newer than every row.
    assert!(page(db, from(Uuid::now_v7())).await.is_empty());
}

async fn a_selection_filters_by_state_channel_and_id_range(db: &Db) {
    let acme = funded(db).await;
    let globex = tenant(db, "globex").await;
    grant(db, globex, KEY, 10).await;
    let e0 = claimed_on(db, acme, "e0", CHANNEL, 0).await;
    let e1 = claimed_on(db, acme, "e1", CHANNEL, 1).await;
    let w = claimed_on(db, acme, "w", "webhook", 2).await;
    let e2 = claimed_on(db, acme, "e2", CHANNEL, 3).await;
    let e3 = claimed_on(db, acme, "e3", CHANNEL, 4).await;
    let theirs = claimed_on(db, globex, "e0", CHANNEL, 5).await;
    assert_eq!(ids(&lease(db, WORKER, 1, at(10)).await), vec![e0]);

    let all = every_one_of(acme);
    assert_eq!(select(db, all).await, vec![e0, e1, w, e2, e3], "ascending ids, one tenant");
    assert_eq!(select(db, every_one_of(globex)).await, vec![theirs]);
    assert!(select(db, every_one_of(Uuid::now_v7())).await.is_empty());

    let state = |state| SelectFilter { state: Some(state), ..all };
    assert_eq!(select(db, state(DeliveryState::Pending)).await, vec![e1, w, e2, e3]);
    assert_eq!(select(db, state(DeliveryState::Sending)).await, vec![e0]);
    assert!(select(db, state(DeliveryState::Sent)).await.is_empty());
    let channel = |channel| SelectFilter { channel: Some(channel), ..all };
    assert_eq!(select(db, channel("webhook")).await, vec![w]);
    assert_eq!(select(db, channel(CHANNEL)).await, vec![e0, e1, e2, e3]);
    assert!(select(db, channel("sms")).await.is_empty());
    let pending_email = SelectFilter { state: Some(DeliveryState::Pending), ..channel(CHANNEL) };
    assert_eq!(select(db, pending_email).await, vec![e1, e2, e3]);

    // `from` is inclusive, `to` exclusive.
    let range = |from, to| SelectFilter { from, to, ..all };
    assert_eq!(select(db, range(Some(e1), None)).await, vec![e1, w, e2, e3]);
    assert_eq!(select(db, range(None, Some(e2))).await, vec![e0, e1, w]);
    assert_eq!(select(db, range(Some(e1), Some(e2))).await, vec![e1, w]);
    assert_eq!(select(db, range(Some(w), Some(e2))).await, vec![w]);
    assert!(select(db, range(Some(e2), Some(e2))).await.is_empty());
    assert!(select(db, range(Some(e3), Some(e1))).await.is_empty());
    let pending_from_w = SelectFilter { from: Some(w), ..pending_email };
    assert_eq!(select(db, pending_from_w).await, vec![e2, e3]);
    assert_eq!(select(db, SelectFilter { limit: 2, ..all }).await, vec![e0, e1]);
    assert!(select(db, SelectFilter { limit: 0, ..all }).await.is_empty());
}

async fn a_selection_pages_ascending_after_an_exclusive_id(db: &Db) {
    let t = funded(db).await;
    let made = due(db, t, 5).await;
    let page = SelectFilter { limit: 2, ..every_one_of(t) };
    assert_eq!(select(db, page).await, made[0..2]);
    assert_eq!(select(db, SelectFilter { after: Some(made[1]), ..page }).await, made[2..4]);
    assert_eq!(select(db, SelectFilter { after: Some(made[3]), ..page }).await, made[4..5]);
    assert!(select(db, SelectFilter { after: Some(made[4]), ..page }).await.is_empty());

    // Paging to the end, as bulk replay does: every row once, in order.
    let (mut seen, mut after) = (Vec::new(), None);
    loop {
        let got = select(db, SelectFilter { after, ..page }).await;
        let Some(last) = got.last() else { break };
        after = Some(*last);
        seen.extend(got);
    }
    assert_eq!(seen, made);

    // With the range: the tighter lower bound wins, and `to` still ends it.
    let from_2 = SelectFilter { from: Some(made[2]), ..every_one_of(t) };
    assert_eq!(select(db, SelectFilter { after: Some(made[0]), ..from_2 }).await, made[2..5]);
    assert_eq!(select(db, SelectFilter { after: Some(made[2]), ..from_2 }).await, made[3..5]);
    let to_4 = SelectFilter { to: Some(made[4]), after: Some(made[2]), ..from_2 };
    assert_eq!(select(db, to_4).await, made[3..4]);
    let after_to = SelectFilter { after: Some(made[3]), ..to_4 };
    assert!(select(db, after_to).await.is_empty());
}

/// The latest attempt is the row whose `n` is the delivery's `attempts`: an earlier
/// attempt's code does not match, nor does an attempt in flight (it has no row yet).
async fn a_selection_by_error_code_reads_the_latest_attempt_only(db: &Db) {
    let t = funded(db).await;
    let [a, b, c, d] = due(db, t, 4).await.try_into().unwrap();
    assert_eq!(ids(&lease(db, WORKER, 4, at(10)).await), vec![a, b, c, d]);
    let retry = StateChange::Pending { retry_in: Duration::ZERO, error: None };
    let fail = StateChange::Failed { error: None };
    end_attempt(db, a, 1, "transient", "E1", retry, 20).await;
    end_attempt(db, b, 1, "transient", "E2", retry, 20).await;
    end_attempt(db, c, 1, "transient", "E2", retry, 20).await;
    end_attempt(db, d, 1, "terminal", "E1", fail, 20).await;
    let mut again = ids(&lease(db, WORKER, 3, at(30)).await);
    again.sort();
    assert_eq!(again, vec![a, b, c]);
    end_attempt(db, a, 2, "terminal", "E2", fail, 40).await;
    end_attempt(db, b, 2, "transient", "E1", retry, 40).await;
    // c's second attempt is in flight: its latest attempt has no code yet.

    let code = |code| SelectFilter { error_code: Some(code), ..every_one_of(t) };
    assert_eq!(select(db, code("E1")).await, vec![b, d], "a's E1 was its first attempt");
    assert_eq!(select(db, code("E2")).await, vec![a], "b's and c's E2 are not their latest");
    assert!(select(db, code("E3")).await.is_empty());
    let failed_e1 = SelectFilter { state: Some(DeliveryState::Failed), ..code("E1") };
    assert_eq!(select(db, failed_e1).await, vec![d]);
    let pending_e1 = SelectFilter { state: Some(DeliveryState::Pending), ..code("E1") };
    assert_eq!(select(db, pending_e1).await, vec![b]);
    assert_eq!(select(db, SelectFilter { after: Some(b), ..code("E1") }).await, vec![d]);
    assert_eq!(select(db, SelectFilter { to: Some(d), ..code("E1") }).await, vec![b]);
}

async fn counts_by_channel_and_state_of_one_tenant_or_all(db: &Db) {
    let acme = funded(db).await;
    let globex = tenant(db, "globex").await;
    grant(db, globex, KEY, 10).await;
    let counts = |tenant| async move {
        deliveries_count_by_channel(db.conn().await.as_conn(), tenant).await.unwrap()
    };
    assert!(counts(None).await.is_empty());
    let e0 = claimed_on(db, acme, "e0", CHANNEL, 0).await;
    claimed_on(db, acme, "e1", CHANNEL, 1).await;
    claimed_on(db, acme, "e2", CHANNEL, 2).await;
    claimed_on(db, acme, "w", "webhook", 3).await;
    // Byte order: "SMS" sorts before "email" on every backend.
    claimed_on(db, acme, "s", "SMS", 4).await;
    claimed_on(db, globex, "e0", CHANNEL, 5).await;
    claimed_on(db, globex, "w", "webhook", 6).await;
    assert_eq!(ids(&lease(db, WORKER, 1, at(10)).await), vec![e0]);

    let row = |channel: &str, state, n| (channel.to_string(), state, n);
    use DeliveryState::{Pending, Sending};
    assert_eq!(
        counts(Some(acme)).await,
        vec![
            row("SMS", Pending, 1),
            row(CHANNEL, Pending, 2),
            row(CHANNEL, Sending, 1),
            row("webhook", Pending, 1)
        ]
    );
    assert_eq!(
        counts(Some(globex)).await,
        vec![row(CHANNEL, Pending, 1), row("webhook", Pending, 1)]
    );
    assert_eq!(
        counts(None).await,
        vec![
            row("SMS", Pending, 1),
            row(CHANNEL, Pending, 3),
            row(CHANNEL, Sending, 1),
            row("webhook", Pending, 2)
        ]
    );
    assert!(counts(Some(Uuid::now_v7())).await.is_empty());
}

async fn a_payload_reads_back_as_submitted(db: &Db) {
    let t = funded(db).await;
    let plain = claimed(db, t, "order-1", at(0)).await;
    // What a JSON type would rewrite: spacing, key order, a number's spelling, escapes.
    let exact = r#"{ "z": 1.50, "a": [1e2, "é"],  "z2": {} }"#;
    let mut new = new_delivery(t, "order-2");
    new.payload = exact;
    claim(db, &new, at(0)).await;
    let mut conn = db.conn().await;
    assert_eq!(delivery_payload(conn.as_conn(), plain).await.unwrap().as_deref(), Some(PAYLOAD));
    assert_eq!(delivery_payload(conn.as_conn(), new.id).await.unwrap().as_deref(), Some(exact));
    assert_eq!(delivery_payload(conn.as_conn(), Uuid::now_v7()).await.unwrap(), None);
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
