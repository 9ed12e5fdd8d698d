//! `deliveries_claim_many`: a batch claimed in a fixed number of statements answers each
//! delivery as `delivery_claim` would have, had they run one after another — and an
//! identity another transaction commits while the batch plans never costs a later member
//! its quota.

use super::*;
use herald_store::deliveries::{Claim, NewDelivery, deliveries_claim_many, delivery_claim};
use herald_store::sqlx::types::Uuid;
use herald_store::{AsConn, Backend, StoreError};

conformance!(
    a_batch_answers_each_member_as_claims_one_by_one_would,
    an_identity_committed_while_the_batch_plans_makes_it_run_again,
    a_batch_of_the_largest_payloads_is_claimed_whole,
);

/// One kind of answer, without its times.
fn kind(claim: &Claim) -> &'static str {
    match claim {
        Claim::Inserted { .. } => "inserted",
        Claim::Exists => "exists",
        Claim::UnknownTenant => "unknown tenant",
        Claim::QuotaShort => "short",
    }
}

/// Two tenants and the batch: every answer, an account that runs out mid-batch, and a
/// member that fits no single stripe (the grant is spread over the stripes, one or two
/// units each), so that its account is gathered; a key beyond ASCII.
async fn world(db: &Db, name: &str) -> (Uuid, Uuid) {
    let t = tenant(db, name).await;
    grant(db, t, KEY, GRANTED).await;
    let other = tenant(db, &format!("{name}-other")).await;
    grant(db, other, KEY, 3).await;
    claimed(db, t, "before-ü🙂", at(0)).await;
    (t, other)
}

fn batch<'a>(t: Uuid, other: Uuid, nobody: Uuid) -> Vec<NewDelivery<'a>> {
    let with = |tenant, key: &'a str, cost| NewDelivery { cost, ..new_delivery(tenant, key) };
    vec![
        with(t, "new-1", 1),
        with(t, "before-ü🙂", 1),
        with(other, "o-1", 2),
        with(t, "dear", 5),
        with(other, "o-2", 2),
        with(t, "new-1", 1),
        with(nobody, "x", 1),
        with(t, "free", 0),
        NewDelivery { quota_key: "sms", ..with(t, "no-account", 1) },
        with(t, "huge", GRANTED),
        with(other, "o-3", 1),
    ]
}

const KINDS: [&str; 11] = [
    "inserted",
    "exists",
    "inserted",
    "inserted",
    "short",
    "exists",
    "unknown tenant",
    "inserted",
    "short",
    "short",
    "inserted",
];

async fn a_batch_answers_each_member_as_claims_one_by_one_would(db: &Db) {
    let nobody = Uuid::now_v7();
    let (t, other) = world(db, "alone").await;
    let mut alone = Vec::new();
    for new in batch(t, other, nobody) {
        alone.push(kind(&claim(db, &new, at(0)).await));
    }
    assert_eq!(alone, KINDS, "one by one");

    let (bt, bother) = world(db, "together").await;
    let news = batch(bt, bother, nobody);
    let mut tx = db.tx().await;
    let Some(claims) = deliveries_claim_many(tx.as_conn(), &news, at(0), false).await.unwrap()
    else {
        assert_eq!(db.backend(), Backend::Sqlite, "claims one by one");
        return;
    };
    tx.commit().await.unwrap();
    assert_eq!(claims.iter().map(kind).collect::<Vec<_>>(), KINDS, "together");
    for (new, claim) in news.iter().zip(&claims) {
        if let Claim::Inserted { created_at, next_attempt_at } = claim {
            assert_eq!((*created_at, *next_attempt_at), (T0, T0), "{}", new.operation_key);
            let row = db.row(new.id).await;
            assert_eq!((row.tenant_id, row.cost, row.created_at), (new.tenant_id, new.cost, T0));
            assert_eq!(db.count("delivery_payloads", "delivery_id", new.id).await, 1);
        }
    }

    // The same ledger either way, and one reservation per delivery that costs.
    assert_eq!(db.balance(bt).await, db.balance(t).await);
    assert_eq!(db.balance(bother).await, db.balance(other).await);
    assert_eq!(db.balance(bt).await, (GRANTED - 7, 7, 0));
    let reserved = |tenant| {
        news.iter()
            .zip(&claims)
            .filter(|(n, c)| n.tenant_id == tenant && n.cost > 0 && kind(c) == "inserted")
            .map(|(n, _)| moved("reserve", n.cost, n.id, 1))
            .collect::<Vec<_>>()
    };
    for tenant in [bt, bother] {
        let mut got = db.movements(tenant).await;
        got.retain(|j| j.delivery.is_none_or(|d| news.iter().any(|n| n.id == d)));
        let mut expected = reserved(tenant);
        got.sort_by_key(|j| j.delivery);
        expected.sort_by_key(|j| j.delivery);
        assert_eq!(got, expected, "the journal");
    }
    assert!(db.account(bt, "sms").await.is_none(), "a batch created an account");
}

/// Another transaction claims "k" on another account and has not committed; the batch
/// cannot see it, plans "k" as new and refuses "m" (its account has one unit, for "k").
/// Once that transaction commits, the batch must not answer "m" short: it fails whole,
/// writing nothing, as a concurrency conflict — and run again, answers "k" exists and
/// gives "m" the unit.
async fn an_identity_committed_while_the_batch_plans_makes_it_run_again(db: &Db) {
    if !db.backend().claims_in_batches() {
        return;
    }
    let t = tenant(db, "acme").await;
    grant(db, t, KEY, 1).await;
    grant(db, t, "other", 1).await;
    let first = NewDelivery { quota_key: "other", ..new_delivery(t, "k") };
    let mut holder = db.tx().await;
    let got = delivery_claim(holder.as_conn(), &first, at(0), false).await.unwrap();
    assert!(matches!(got, Claim::Inserted { .. }), "{got:?}");

    let store = db.store.clone();
    let (session, started) = tokio::sync::oneshot::channel();
    let batch = tokio::spawn(async move {
        let news = [new_delivery(t, "k"), new_delivery(t, "m")];
        let mut tx = store.begin(&Default::default()).await.unwrap();
        let _ = session.send(session_id(tx.as_conn()).await);
        let claimed = deliveries_claim_many(tx.as_conn(), &news, at(0), false).await;
        drop(tx);
        (claimed, news[0].id, news[1].id)
    });
    // Once the batch's insert waits on the holder's row (on MariaDB: runs, after the read),
    // the holder commits.
    let session = started.await.unwrap();
    match db.backend() {
        Backend::MySql => until_inserting(db, session).await,
        _ => wait_for_a_lock_wait(&db.store, session).await,
    }
    holder.commit().await.unwrap();
    let (claimed, k, m) = batch.await.unwrap();
    assert!(matches!(claimed, Err(StoreError::BatchRaced)), "{claimed:?}");
    assert!(db.find(k).await.is_none() && db.find(m).await.is_none());
    assert_eq!(db.balance(t).await, (1, 0, 0));

    let again = [new_delivery(t, "k"), new_delivery(t, "m")];
    let mut tx = db.tx().await;
    let claims = deliveries_claim_many(tx.as_conn(), &again, at(0), false).await.unwrap();
    tx.commit().await.unwrap();
    let kinds: Vec<_> = claims.unwrap().iter().map(kind).collect();
    assert_eq!(kinds, ["exists", "inserted"]);
    assert_eq!(db.balance(t).await, (0, 1, 0));
}

/// Waits (up to a bound) until MariaDB session `id` runs the batch's insert of deliveries.
/// Its wait on a duplicate key's lock was seen missing from INNODB_TRX (see the receipts'
/// racing test), and the pool's connections may all be taken: the process list, read on
/// a connection of its own.
async fn until_inserting(db: &Db, id: i64) {
    use herald_store::sqlx::{Connection, MySqlConnection};
    let mut c = MySqlConnection::connect(&db.url).await.unwrap();
    let start = std::time::Instant::now();
    loop {
        let running: i64 = herald_store::sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.processlist
             WHERE id = ? AND info LIKE 'INSERT INTO deliveries%'",
        )
        .bind(id)
        .fetch_one(&mut c)
        .await
        .unwrap();
        if running > 0 {
            return;
        }
        assert!(start.elapsed().as_secs() < 10, "session {id} never ran the batch's insert");
        tokio::task::yield_now().await;
    }
}

/// The group commit's largest batch (256) of payloads at the HTTP API's limit (64 KiB):
/// 16 MiB, MariaDB's default `max_allowed_packet`, which no one statement may carry.
async fn a_batch_of_the_largest_payloads_is_claimed_whole(db: &Db) {
    use herald_core::limits::GROUP_COMMIT_MAX;
    let t = funded(db).await;
    let payload = format!(r#"{{"text": "{}"}}"#, "x".repeat(64 * 1024 - 12));
    assert_eq!(payload.len(), 64 * 1024);
    let keys: Vec<String> = (0..GROUP_COMMIT_MAX).map(|i| format!("big-{i}")).collect();
    let news: Vec<NewDelivery<'_>> = keys
        .iter()
        .map(|k| NewDelivery { cost: 0, payload: &payload, ..new_delivery(t, k) })
        .collect();
    let mut tx = db.tx().await;
    let claims = deliveries_claim_many(tx.as_conn(), &news, at(0), false).await.unwrap();
    tx.commit().await.unwrap();
    let Some(claims) = claims else { return };
    assert!(claims.iter().all(|c| kind(c) == "inserted"), "{claims:?}");
    let mut conn = db.conn().await;
    let (stored,): (i64,) = raw_query_as!(
        conn.as_conn(),
        "SELECT count(*) FROM delivery_payloads p JOIN deliveries d ON d.id = p.delivery_id
         WHERE d.tenant_id = $1 AND length(p.payload) = 65536",
        [t],
        fetch_one
    )
    .unwrap();
    assert_eq!(stored, GROUP_COMMIT_MAX as i64);
}
