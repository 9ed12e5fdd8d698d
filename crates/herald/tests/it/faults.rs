//! A lease statement whose COMMIT goes unanswered may have committed: its rows are then
//! `sending` under the worker, which never received them. The worker hands them back
//! (no attempt spent) and sends them, instead of leaving them to wait out the lease.
//! Provoked for real: a deferred trigger holds the lease's COMMIT on the server while the
//! fault proxy resets the worker's connections, so the COMMIT completes unheard.

use crate::common;
use herald::sqlx::{self, Connection, PgConnection};
use herald::{BoxFuture, Channel, Herald, Leased, Outcome, SubmitRequest, Worker, WorkerOptions};
use herald_faults::FaultProxy;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const DELIVERIES: usize = 3;
/// Far longer than the test's bound: a delivery sent within the bound was handed back,
/// not recovered by lease expiry (no reconciler runs here anyway).
const LEASE: Duration = Duration::from_secs(120);
const SENT_WITHIN: Duration = Duration::from_secs(20);
/// Reads of the database while waiting for the held COMMIT, or for the sends.
const READS_MAX: usize = 100_000;

/// Counts sends per delivery.
#[derive(Default)]
struct Counting(Mutex<BTreeMap<herald::DeliveryId, u32>>);

impl Channel for Counting {
    fn send<'a>(&'a self, d: &'a Leased) -> BoxFuture<'a, Outcome> {
        Box::pin(async move {
            *self.0.lock().unwrap().entry(d.id).or_default() += 1;
            Outcome::Sent
        })
    }
}

/// Reads the server's sessions until one is (`held`) or none is sleeping in the held
/// COMMIT's trigger.
async fn until_commit_held(conn: &mut PgConnection, held: bool, failure: &str) {
    for _ in 0..READS_MAX {
        let sleeping: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'",
        )
        .fetch_one(&mut *conn)
        .await
        .unwrap();
        if (sleeping > 0) == held {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("{failure}");
}

/// `host:port` of a `postgres://user@host:port/db` URL.
fn authority(url: &str) -> &str {
    let start = url.find('@').map_or_else(|| url.find("://").unwrap() + 3, |at| at + 1);
    let end = url[start..].find('/').map_or(url.len(), |e| start + e);
    &url[start..end]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_whose_commit_went_unanswered_is_handed_back_and_sent() {
    let Some(base) = common::postgres_url() else { return };
    let db = common::postgres(&base).await;
    let direct = db.herald().await;
    let tenant = direct.tenant_create("acme").await.unwrap().id;
    direct.quota_grant(tenant, "count", 10, None).await.unwrap();
    for i in 0..DELIVERIES {
        let request =
            SubmitRequest::new(tenant, format!("op-{i}"), "count", "x", serde_json::json!({}));
        direct.submit_alone(&request).await.unwrap();
    }
    // Once per transaction that leases, COMMIT waits two seconds on the server.
    let mut conn = PgConnection::connect(&db.url).await.unwrap();
    sqlx::raw_sql(
        "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
             IF current_setting('herald_test.slept', true) IS DISTINCT FROM '1' THEN
                 PERFORM set_config('herald_test.slept', '1', true);
                 PERFORM pg_sleep(2);
             END IF;
             RETURN NULL;
         END $$;
         CREATE CONSTRAINT TRIGGER slow_lease AFTER UPDATE ON deliveries
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW
             WHEN (NEW.state = 'sending') EXECUTE FUNCTION slow_commit();",
    )
    .execute(&mut conn)
    .await
    .unwrap();

    let upstream = tokio::net::lookup_host(authority(&base)).await.unwrap().next().unwrap();
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let url = db.url.replacen(authority(&base), &proxy.addr().to_string(), 1);
    let herald = Herald::open(&url).await.unwrap();
    let channel = Arc::new(Counting::default());
    let options = WorkerOptions {
        id: "w-orphans".into(),
        lease: LEASE,
        poll_interval: Duration::from_millis(100),
        ..WorkerOptions::default()
    };
    let channels = [("count".to_string(), channel.clone() as Arc<dyn Channel>)];
    let worker = Worker::new(herald.clone(), options, channels).unwrap();
    let stop = herald::CancellationToken::new();
    let running = tokio::spawn({
        let (worker, stop) = (worker.clone(), stop.clone());
        async move { worker.run(stop).await }
    });

    // The lease's COMMIT is being held: cut the worker off, so it never hears the answer.
    until_commit_held(&mut conn, true, "no lease reached its COMMIT").await;
    proxy.reset_all();
    // The COMMIT goes on for its two seconds on the server, and the worker, told its
    // connection broke, checks its leases meanwhile and finds none yet (nothing here
    // makes it wait: a DROP TRIGGER queued now would hold its read back until the COMMIT
    // ended, which once hid this race). Only then is the trigger dropped.
    until_commit_held(&mut conn, false, "the held COMMIT never ended").await;
    sqlx::raw_sql("DROP TRIGGER slow_lease ON deliveries").execute(&mut conn).await.unwrap();

    let started = Instant::now();
    let states = loop {
        let states: Vec<(String, i32)> =
            sqlx::query_as("SELECT state, attempts FROM deliveries ORDER BY id")
                .fetch_all(&mut conn)
                .await
                .unwrap();
        if states.iter().all(|(s, _)| s == "sent") || started.elapsed() > SENT_WITHIN {
            break states;
        }
        tokio::task::yield_now().await;
    };
    stop.cancel();
    running.await.unwrap().unwrap();
    assert!(
        states.iter().all(|(s, _)| s == "sent"),
        "still not sent {SENT_WITHIN:?} after the unanswered COMMIT (lease {LEASE:?}): {states:?}"
    );
    // The hand-back spent no attempt: each delivery was sent on its first, and once.
    assert!(states.iter().all(|(_, attempts)| *attempts == 1), "{states:?}");
    let sends = channel.0.lock().unwrap().clone();
    assert_eq!(sends.len(), DELIVERIES, "{sends:?}");
    assert!(sends.values().all(|n| *n == 1), "{sends:?}");
    let lost: i64 =
        sqlx::query_scalar("SELECT count(*) FROM delivery_attempts WHERE outcome = 'lost'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(lost, 0);
}
