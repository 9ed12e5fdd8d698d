//! `delivery_claim`: a row under a unique identity, its payload and reservation 1 — or
//! nothing at all, and the caller's transaction still usable.

use super::*;
use herald_core::DeliveryState;
use herald_store::deliveries::{Claim, delivery_by_identity, delivery_claim};
use herald_store::notify::{WAKE_CHANNEL, wake_notify};
use herald_store::sqlx::postgres::{PgListener, PgNotification};
use herald_store::sqlx::types::Uuid;
use herald_store::{AsConn, Backend, Conn, Now};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

conformance!(
    a_claim_inserts_the_row_its_payload_and_reservation_1,
    a_duplicate_inserts_nothing,
    identity_is_tenant_operation_key_and_channel,
    an_unknown_tenant_is_refused_and_nothing_written,
    short_quota_writes_nothing,
    a_duplicate_on_short_quota_writes_nothing,
    cost_0_reserves_nothing,
    send_at_in_the_future_sets_next_attempt_at,
    a_claim_rolled_back_with_its_transaction_leaves_nothing,
    racing_claims_of_one_identity_insert_once,
    a_wake_up_is_sent_only_for_a_claim_that_commits,
    a_claim_runs_alone_where_it_is_one_statement,
    a_traceparent_is_kept_beside_the_payload_for_the_lease,
);

async fn a_claim_inserts_the_row_its_payload_and_reservation_1(db: &Db) {
    let t = funded(db).await;
    let mut new = new_delivery(t, "order-1");
    new.cost = 5;
    assert_eq!(
        claim(db, &new, at(0)).await,
        Claim::Inserted { created_at: T0, next_attempt_at: T0 }
    );

    let row = db.row(new.id).await;
    assert_eq!(
        (row.tenant_id, row.operation_key.as_str(), row.channel.as_str()),
        (t, "order-1", CHANNEL)
    );
    assert_eq!(row.recipient, "a@example.com");
    assert_eq!(row.fingerprint, b"fingerprint");
    assert_eq!((row.quota_key.as_str(), row.cost), (KEY, 5));
    assert_eq!(row.state, DeliveryState::Pending);
    assert_eq!((row.attempts, row.max_attempts, row.attempts_base), (0, 3, 0));
    assert_eq!(row.reservation_seq, 1);
    assert_eq!((row.created_at, row.updated_at, row.next_attempt_at), (T0, T0, T0));
    assert_eq!((row.lease_owner, row.lease_until, row.sent_at), (None, None, None));
    assert_eq!((row.attempt_worker, row.attempt_started_at, row.last_error), (None, None, None));

    let payload: (String,) = raw_query_as!(
        db.conn().await.as_conn(),
        "SELECT payload FROM delivery_payloads WHERE delivery_id = $1",
        [new.id],
        fetch_one
    )
    .unwrap();
    assert_eq!(payload.0, PAYLOAD);
    assert_eq!(db.balance(t).await, (GRANTED - 5, 5, 0));
    assert_eq!(db.movements(t).await, vec![moved("reserve", 5, new.id, 1)]);
}

/// Claimed one by one and, where the backend claims many in one statement, together: the
/// lease reads each traceparent back, and `None` where the submit had none.
async fn a_traceparent_is_kept_beside_the_payload_for_the_lease(db: &Db) {
    const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let t = funded(db).await;
    let mut traced = new_delivery(t, "traced");
    traced.traceparent = Some(TP);
    let plain = new_delivery(t, "plain");
    for new in [&traced, &plain] {
        assert!(matches!(claim(db, new, at(0)).await, Claim::Inserted { .. }));
    }
    let mut many_traced = new_delivery(t, "many-traced");
    many_traced.traceparent = Some(TP);
    let many_plain = new_delivery(t, "many-plain");
    let mut tx = db.tx().await;
    let many = herald_store::deliveries::deliveries_claim_many(
        tx.as_conn(),
        &[many_traced.clone(), many_plain.clone()],
        at(0),
        false,
    )
    .await
    .unwrap();
    tx.commit().await.unwrap();
    let mut expected = vec![(traced.id, Some(TP)), (plain.id, None)];
    if many.is_some() {
        expected.extend([(many_traced.id, Some(TP)), (many_plain.id, None)]);
    }
    let leased = lease(db, "w1", 10, at(SECOND_MS)).await;
    let mut got: Vec<(Uuid, Option<&str>)> =
        leased.iter().map(|r| (r.delivery.id, r.traceparent.as_deref())).collect();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
}

async fn a_duplicate_inserts_nothing(db: &Db) {
    let t = funded(db).await;
    let first = claimed(db, t, "order-1", at(0)).await;
    let mut again = new_delivery(t, "order-1");
    again.payload = r#"{"to": "b@example.com"}"#;
    again.fingerprint = b"another request";
    assert_eq!(claim(db, &again, at(SECOND_MS)).await, Claim::Exists);

    assert!(db.find(again.id).await.is_none(), "a second row");
    assert_eq!(db.count("delivery_payloads", "delivery_id", again.id).await, 0);
    let row = db.row(first).await;
    assert_eq!((row.fingerprint.as_slice(), row.updated_at), (&b"fingerprint"[..], T0));
    assert_eq!(db.balance(t).await, (GRANTED - 1, 1, 0));
    assert_eq!(db.movements(t).await, vec![moved("reserve", 1, first, 1)]);
}

async fn identity_is_tenant_operation_key_and_channel(db: &Db) {
    let acme = funded(db).await;
    let other = tenant(db, "globex").await;
    grant(db, other, KEY, GRANTED).await;
    claimed(db, acme, "order-1", at(0)).await;

    let mut webhook = new_delivery(acme, "order-1");
    webhook.channel = "webhook";
    assert!(matches!(claim(db, &webhook, at(0)).await, Claim::Inserted { .. }));
    claimed(db, other, "order-1", at(0)).await;

    let mut conn = db.conn().await;
    let found = delivery_by_identity(conn.as_conn(), acme, "order-1", "webhook").await.unwrap();
    assert_eq!(found.map(|r| r.id), Some(webhook.id));
    assert_eq!(db.balance(acme).await, (GRANTED - 2, 2, 0));
    assert_eq!(db.balance(other).await, (GRANTED - 1, 1, 0));
}

async fn an_unknown_tenant_is_refused_and_nothing_written(db: &Db) {
    let known = funded(db).await;
    let nobody = Uuid::now_v7();
    let new = new_delivery(nobody, "order-1");
    assert_eq!(claim(db, &new, at(0)).await, Claim::UnknownTenant);
    let mut free = new_delivery(nobody, "order-2");
    free.cost = 0;
    assert_eq!(claim(db, &free, at(0)).await, Claim::UnknownTenant);

    assert!(db.find(new.id).await.is_none() && db.find(free.id).await.is_none());
    assert!(db.movements(nobody).await.is_empty());
    assert_eq!(db.balance(known).await, (GRANTED, 0, 0));
}

async fn short_quota_writes_nothing(db: &Db) {
    let t = funded(db).await;
    let mut dear = new_delivery(t, "order-1");
    dear.cost = GRANTED + 1;
    let mut no_account = new_delivery(t, "order-2");
    no_account.quota_key = "sms";
    for new in [&dear, &no_account] {
        // In the caller's transaction, which stays usable: it commits.
        let mut tx = db.tx().await;
        let got = delivery_claim(tx.as_conn(), new, at(0), false).await.unwrap();
        assert_eq!(got, Claim::QuotaShort, "{}", new.operation_key);
        tx.commit().await.unwrap();

        assert!(db.find(new.id).await.is_none(), "{}: a row", new.operation_key);
        let by_identity =
            delivery_by_identity(db.conn().await.as_conn(), t, new.operation_key, CHANNEL).await;
        assert!(by_identity.unwrap().is_none(), "{}: a row by identity", new.operation_key);
        assert_eq!(db.count("delivery_payloads", "delivery_id", new.id).await, 0);
    }
    assert!(db.movements(t).await.is_empty());
    assert_eq!(db.balance(t).await, (GRANTED, 0, 0));
    assert!(db.account(t, "sms").await.is_none(), "a claim created an account");
}

/// The account is looked at first on some backends: a duplicate on short quota may be
/// reported as either, and writes nothing either way.
async fn a_duplicate_on_short_quota_writes_nothing(db: &Db) {
    let t = tenant(db, "acme").await;
    grant(db, t, KEY, 1).await;
    let first = claimed(db, t, "order-1", at(0)).await;
    let again = new_delivery(t, "order-1");
    let got = claim(db, &again, at(0)).await;
    assert!(matches!(got, Claim::Exists | Claim::QuotaShort), "{got:?}");
    assert!(db.find(again.id).await.is_none());
    assert_eq!(db.balance(t).await, (0, 1, 0));
    assert_eq!(db.movements(t).await, vec![moved("reserve", 1, first, 1)]);
}

async fn cost_0_reserves_nothing(db: &Db) {
    let t = funded(db).await;
    let mut free = new_delivery(t, "order-1");
    free.cost = 0;
    let mut no_account = new_delivery(t, "order-2");
    (no_account.cost, no_account.quota_key) = (0, "sms");
    for new in [&free, &no_account] {
        assert!(matches!(claim(db, new, at(0)).await, Claim::Inserted { .. }));
        let row = db.row(new.id).await;
        assert_eq!((row.cost, row.reservation_seq, row.state), (0, 1, DeliveryState::Pending));
    }
    assert!(db.movements(t).await.is_empty(), "a journal row for cost 0");
    assert_eq!(db.balance(t).await, (GRANTED, 0, 0));
    assert!(db.account(t, "sms").await.is_none());
}

async fn send_at_in_the_future_sets_next_attempt_at(db: &Db) {
    let t = funded(db).await;
    let mut later = new_delivery(t, "order-1");
    later.send_at = Some(T0 + 3_600 * SECOND_MS);
    assert_eq!(
        claim(db, &later, at(0)).await,
        Claim::Inserted { created_at: T0, next_attempt_at: T0 + 3_600 * SECOND_MS }
    );
    let row = db.row(later.id).await;
    assert_eq!((row.created_at, row.next_attempt_at), (T0, T0 + 3_600 * SECOND_MS));
    assert!(lease(db, WORKER, 10, at(3_600 * SECOND_MS - 1)).await.is_empty(), "leased early");
    assert_eq!(ids(&lease(db, WORKER, 10, at(3_600 * SECOND_MS)).await), vec![later.id]);
}

async fn a_claim_rolled_back_with_its_transaction_leaves_nothing(db: &Db) {
    let t = funded(db).await;
    let new = new_delivery(t, "order-1");
    let mut tx = db.tx().await;
    let got = delivery_claim(tx.as_conn(), &new, at(0), false).await.unwrap();
    assert!(matches!(got, Claim::Inserted { .. }));
    tx.rollback().await.unwrap();

    assert!(db.find(new.id).await.is_none());
    assert!(db.movements(t).await.is_empty());
    assert_eq!(db.balance(t).await, (GRANTED, 0, 0));
    // The identity is free again.
    claimed(db, t, "order-1", at(0)).await;
}

/// Claims of one identity from many transactions at once: one row, one reservation.
async fn racing_claims_of_one_identity_insert_once(db: &Db) {
    const RACERS: usize = 6;
    let t = funded(db).await;
    let start = Arc::new(tokio::sync::Barrier::new(RACERS));
    let mut racers = Vec::new();
    for _ in 0..RACERS {
        let (store, start) = (db.store.clone(), start.clone());
        racers.push(tokio::spawn(async move {
            let new = new_delivery(t, "order-1");
            start.wait().await;
            let mut tx = store.begin(&Default::default()).await.unwrap();
            let got = delivery_claim(tx.as_conn(), &new, Now::At(T0), false).await.unwrap();
            tx.commit().await.unwrap();
            (new.id, got)
        }));
    }
    let mut inserted = Vec::new();
    for racer in racers {
        match racer.await.unwrap() {
            (id, Claim::Inserted { .. }) => inserted.push(id),
            (_, got) => assert_eq!(got, Claim::Exists),
        }
    }
    assert_eq!(inserted.len(), 1, "inserted by {inserted:?}");
    assert_eq!(db.balance(t).await, (GRANTED - 1, 1, 0));
    assert_eq!(db.movements(t).await, vec![moved("reserve", 1, inserted[0], 1)]);
}

/// PostgreSQL: `notify` queues a `NOTIFY` that is delivered only if a claim was inserted
/// and its transaction commits (so is `wake_notify`'s). SQLite wakes its workers in
/// process: there `notify` changes nothing about the claim.
async fn a_wake_up_is_sent_only_for_a_claim_that_commits(db: &Db) {
    let t = tenant(db, "acme").await;
    grant(db, t, KEY, 2).await;
    claimed(db, t, "existing", at(0)).await;
    let Some(pool) = db.store.postgres_pool() else {
        let new = new_delivery(t, "order-1");
        let mut tx = db.tx().await;
        let got = delivery_claim(tx.as_conn(), &new, at(0), true).await.unwrap();
        assert!(matches!(got, Claim::Inserted { .. }), "{got:?}");
        tx.commit().await.unwrap();
        assert_eq!(db.row(new.id).await.id, new.id);
        return;
    };
    assert_eq!(db.backend(), Backend::Postgres);
    let mut listener = PgListener::connect_with(pool).await.unwrap();
    listener.listen(WAKE_CHANNEL).await.unwrap();
    // Other tests' processes may notify on the same channel: only our sessions count.
    let mut ours = HashSet::new();

    let rolled_back = new_delivery(t, "rolled-back");
    let mut tx = db.tx().await;
    ours.insert(backend_pid(tx.as_conn()).await);
    let got = delivery_claim(tx.as_conn(), &rolled_back, at(0), true).await.unwrap();
    assert!(matches!(got, Claim::Inserted { .. }), "{got:?}");
    wake_notify(tx.as_conn()).await.unwrap();
    tx.rollback().await.unwrap();

    let mut duplicate = new_delivery(t, "existing");
    duplicate.id = uuid::Uuid::now_v7();
    let mut short = new_delivery(t, "short");
    short.cost = 5;
    let mut tx = db.tx().await;
    ours.insert(backend_pid(tx.as_conn()).await);
    assert_eq!(delivery_claim(tx.as_conn(), &duplicate, at(0), true).await.unwrap(), Claim::Exists);
    assert_eq!(delivery_claim(tx.as_conn(), &short, at(0), true).await.unwrap(), Claim::QuotaShort);
    // A marker after what must not notify: notifications arrive in commit order.
    raw_execute!(tx.as_conn(), "SELECT pg_notify($1, 'marker')", [WAKE_CHANNEL]).unwrap();
    tx.commit().await.unwrap();

    let inserted = new_delivery(t, "inserted");
    let mut tx = db.tx().await;
    let claimer = backend_pid(tx.as_conn()).await;
    ours.insert(claimer);
    let got = delivery_claim(tx.as_conn(), &inserted, at(0), true).await.unwrap();
    assert!(matches!(got, Claim::Inserted { .. }), "{got:?}");
    tx.commit().await.unwrap();

    let first = next_of(&mut listener, &ours).await;
    assert_eq!(first.payload(), "marker", "a wake-up for a claim that did not commit");
    let second = next_of(&mut listener, &ours).await;
    assert_eq!((second.process_id(), second.payload()), (claimer as u32, ""));
}

async fn backend_pid(conn: Conn<'_>) -> i32 {
    let (pid,): (i32,) = raw_query_as!(conn, "SELECT pg_backend_pid()", [], fetch_one).unwrap();
    pid
}

/// The next notification from one of `ours`, within a bound.
async fn next_of(listener: &mut PgListener, ours: &HashSet<i32>) -> PgNotification {
    loop {
        let next = tokio::time::timeout(Duration::from_secs(10), listener.recv()).await;
        let notification = next.expect("no wake-up within 10 s").unwrap();
        if ours.contains(&(notification.process_id() as i32)) {
            return notification;
        }
    }
}

/// Where a claim is one statement (PostgreSQL) it may run autocommitted, with no
/// transaction around it, and still writes all of itself or nothing. SQLite's claim is
/// several statements and says so.
async fn a_claim_runs_alone_where_it_is_one_statement(db: &Db) {
    if !db.backend().claims_in_one_statement() {
        assert_ne!(db.backend(), Backend::Postgres);
        return;
    }
    let t = tenant(db, "acme").await;
    grant(db, t, KEY, 1).await;
    let mut conn = db.conn().await;
    assert!(!conn.as_conn().in_transaction());
    let alone = new_delivery(t, "order-1");
    let got = delivery_claim(conn.as_conn(), &alone, at(0), false).await.unwrap();
    assert!(matches!(got, Claim::Inserted { .. }), "{got:?}");
    let short = new_delivery(t, "order-2");
    assert_eq!(
        delivery_claim(conn.as_conn(), &short, at(0), false).await.unwrap(),
        Claim::QuotaShort
    );
    drop(conn);

    // Committed on its own: another connection sees the row and its reservation.
    assert_eq!(db.row(alone.id).await.state, DeliveryState::Pending);
    assert!(db.find(short.id).await.is_none());
    assert_eq!(db.balance(t).await, (0, 1, 0));
    assert_eq!(db.movements(t).await, vec![moved("reserve", 1, alone.id, 1)]);
}
