//! Lanes (herald_core::fair): the destination every writer stores, the walk that finds
//! the lanes with due work (in order, from a cursor, each due count bounded), and the lease
//! that takes rows lane by lane — never one row twice, never a row of another lane, of
//! another channel, or not yet due.

use super::*;
use herald_core::fair::Lane;
use herald_core::fair::LaneHealth;
use herald_store::deliveries::{
    LaneFound, LanesDue, LeaseLanes, LeasedRow, NewDelivery, QuickLease, deliveries_lanes,
    deliveries_lease_lanes, deliveries_lease_quick,
};
use herald_store::destinations::{lane_health_put, lane_pause};
use herald_store::sqlx::types::Uuid;
use herald_store::{AsConn, Backend, ErrorClass};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

conformance!(
    the_stored_destination_is_destination_of,
    the_walk_finds_each_lane_once_in_order_with_its_due_rows,
    the_walk_starts_after_a_cursor_and_stops_at_lanes_max,
    the_walk_counts_only_the_channels_asked_for,
    a_lane_lease_takes_each_lanes_oldest_due_rows_up_to_its_take,
    concurrent_lane_leases_never_take_one_row_twice,
    a_quick_lease_takes_one_row_of_each_lane_that_may_send,
    concurrent_quick_leases_never_take_one_row_twice,
);

const CHANNELS: &[&str] = &[CHANNEL];

fn channels() -> Vec<String> {
    CHANNELS.iter().map(|c| c.to_string()).collect()
}

fn to<'a>(channel: &'a str, recipient: &'a str, tenant: Uuid, key: &'a str) -> NewDelivery<'a> {
    let mut new = new_delivery(tenant, key);
    new.channel = channel;
    new.recipient = recipient;
    new.cost = 0;
    new
}

/// Claims `n` deliveries of `tenant` to `recipient` (on [`CHANNEL`] unless a URL, then on
/// `webhook`), due at `T0 + i`.
async fn lane_rows(db: &Db, tenant: Uuid, recipient: &str, n: usize) -> Vec<Uuid> {
    let channel = if recipient.contains("://") { "webhook" } else { CHANNEL };
    let mut ids = Vec::new();
    for i in 0..n {
        let key = format!("{recipient}-{i}");
        let mut new = to(channel, recipient, tenant, &key);
        new.send_at = Some(T0 + i as i64);
        claim(db, &new, at(0)).await;
        ids.push(new.id);
    }
    ids
}

async fn walk(db: &Db, channels: &[String], after: Option<&Lane>, max: usize) -> Vec<LaneFound> {
    let mut tx = db.tx().await;
    let walk = LanesDue { channels, now: at(60_000), after, lanes_max: max, due_max: 3 };
    let found = deliveries_lanes(tx.as_conn(), &walk).await.unwrap();
    tx.commit().await.unwrap();
    found
}

async fn lease_lanes(
    db: &Db,
    worker: &str,
    channels: &[String],
    lanes: &[(Lane, usize)],
) -> Vec<LeasedRow> {
    let mut tx = db.tx().await;
    let lease = LeaseLanes {
        worker,
        channels,
        lanes,
        lease: Duration::from_millis(LEASE_MS as u64),
        now: at(60_000),
    };
    let leased = deliveries_lease_lanes(tx.as_conn(), &lease).await.unwrap();
    tx.commit().await.unwrap();
    leased
}

fn lane(tenant: Uuid, destination: &str) -> Lane {
    Lane { tenant, destination: destination.to_string() }
}

async fn the_stored_destination_is_destination_of(db: &Db) {
    let t = tenant(db, "acme").await;
    let cases: &[(&str, &str)] = &[
        ("webhook", "https://Hooks.Example.com/a?b"),
        ("webhook", "http://hooks.example.com:8443"),
        ("webhook", "HTTPS://user:pw@hooks.example.com/x"),
        ("webhook", "https://[::1]:9000/x"),
        ("webhook", "https://a@b@c.d/x"),
        ("webhook", "https://h.x#frag"),
        ("webhook", "https://h.x?q=@a"),
        ("webhook", "https://h.x@"),
        ("webhook", "https://]x/"),
        ("webhook", "https://[a]@h/x"),
        ("webhook", "https://user@[::1]@h:1"),
        ("webhook", "https://:80/x"),
        ("webhook", "https://[::1/x"),
        ("webhook", "ftp://x.y/z"),
        ("webhook", "not a url"),
        ("email", "a@example.com"),
        ("sms", "+15550100"),
    ];
    let mut ids = Vec::new();
    for (i, (channel, recipient)) in cases.iter().enumerate() {
        let key = format!("k{i}");
        let new = to(channel, recipient, t, &key);
        claim(db, &new, at(0)).await;
        let stored = db.destination(new.id).await;
        assert_eq!(
            stored,
            herald_core::destination_of(channel, recipient),
            "{channel} {recipient}"
        );
        ids.push(new.id);
    }
    if db.backend() == Backend::Sqlite {
        // SQLite's claim writes the column; rows older than schema 12 got it from the
        // migration's own SQL, run here again over blanked rows.
        let mut conn = db.conn().await;
        raw_execute!(conn.as_conn(), "UPDATE deliveries SET destination = ''", []).unwrap();
        for statement in SQLITE_MIGRATION.split(';').map(str::trim) {
            let statement =
                statement.lines().filter(|l| !l.starts_with("--")).collect::<Vec<_>>().join("\n");
            if statement.starts_with("UPDATE deliveries SET destination") {
                raw_execute!(conn.as_conn(), &statement, []).unwrap();
            }
        }
        drop(conn);
        for (id, (channel, recipient)) in ids.iter().zip(cases) {
            let filled = db.destination(*id).await;
            assert_eq!(filled, herald_core::destination_of(channel, recipient), "{recipient}");
        }
    }
}

const SQLITE_MIGRATION: &str = include_str!("../../../migrations/sqlite/0012_lanes.sql");

async fn the_walk_finds_each_lane_once_in_order_with_its_due_rows(db: &Db) {
    let (a, b) = (tenant(db, "a").await, tenant(db, "b").await);
    lane_rows(db, a, "one@example.com", 5).await;
    lane_rows(db, b, "two@example.com", 1).await;
    // A lane whose only row is due later: visited, with nothing due.
    let mut later = to(CHANNEL, "three@example.com", b, "later");
    later.send_at = Some(T0 + 3_600_000);
    claim(db, &later, at(0)).await;

    let found = walk(db, &channels(), None, 10).await;
    // Every email goes to one destination (`smtp`), so a tenant's emails are one lane.
    // MariaDB does not count: a lane whose first row is due counts as due_max.
    let b_due = if db.backend() == Backend::MySql { 3 } else { 1 };
    let mut expected = vec![(lane(a, "smtp"), 3), (lane(b, "smtp"), b_due)];
    expected.sort();
    let got: Vec<(Lane, usize)> = found.iter().map(|f| (f.lane.clone(), f.due)).collect();
    assert_eq!(got, expected, "lanes in (tenant, destination) order, due counted up to due_max");
    assert!(found.iter().all(|f| f.weight == 1 && f.paused_until_ms.is_none()));
}

async fn the_walk_starts_after_a_cursor_and_stops_at_lanes_max(db: &Db) {
    let t = tenant(db, "acme").await;
    for host in ["https://a.test/h", "https://b.test/h", "https://c.test/h", "https://d.test/h"] {
        lane_rows(db, t, host, 1).await;
    }
    let hooks = vec!["webhook".to_string()];
    let all: Vec<String> =
        walk(db, &hooks, None, 10).await.into_iter().map(|f| f.lane.destination).collect();
    assert_eq!(all, ["a.test", "b.test", "c.test", "d.test"]);
    let first_two = walk(db, &hooks, None, 2).await;
    assert_eq!(first_two.len(), 2);
    let after = first_two[1].lane.clone();
    let rest: Vec<String> =
        walk(db, &hooks, Some(&after), 10).await.into_iter().map(|f| f.lane.destination).collect();
    assert_eq!(rest, ["c.test", "d.test"]);
    let other = tenant(db, "zz-later").await;
    lane_rows(db, other, "https://a.test/x", 1).await;
    let found = walk(db, &hooks, Some(&lane(t, "d.test")), 10).await;
    let next: Vec<&Lane> = found.iter().map(|f| &f.lane).collect();
    if other > t {
        assert_eq!(next, [&lane(other, "a.test")], "the walk goes on to the next tenant");
    } else {
        assert!(next.is_empty(), "nothing after the last lane: {next:?}");
    }
}

async fn the_walk_counts_only_the_channels_asked_for(db: &Db) {
    let t = tenant(db, "acme").await;
    lane_rows(db, t, "https://a.test/h", 2).await;
    let found = walk(db, &channels(), None, 10).await;
    assert_eq!(found.len(), 1);
    // MariaDB does not count by channel (the lease does): a due lane counts as due_max.
    let due = if db.backend() == Backend::MySql { 3 } else { 0 };
    assert_eq!((found[0].lane.destination.as_str(), found[0].due), ("a.test", due));
}

async fn a_lane_lease_takes_each_lanes_oldest_due_rows_up_to_its_take(db: &Db) {
    let (a, b) = (tenant(db, "a").await, tenant(db, "b").await);
    let slow = lane_rows(db, a, "https://slow.test/h", 6).await;
    let fast = lane_rows(db, b, "https://fast.test/h", 2).await;
    let other = lane_rows(db, a, "https://other.test/h", 1).await;
    let hooks = vec!["webhook".to_string()];
    let want = [(lane(a, "slow.test"), 2), (lane(b, "fast.test"), 5), (lane(a, "nowhere"), 3)];
    let leased = lease_lanes(db, WORKER, &hooks, &want).await;
    let got: HashSet<Uuid> = leased.iter().map(|l| l.delivery.id).collect();
    let expected: HashSet<Uuid> = [slow[0], slow[1], fast[0], fast[1]].into_iter().collect();
    assert_eq!(got, expected, "each lane's oldest, at most its take; no other lane's rows");
    for l in &leased {
        assert_eq!(l.delivery.lease_owner.as_deref(), Some(WORKER));
        assert_eq!(
            l.destination,
            if l.delivery.tenant_id == a { "slow.test" } else { "fast.test" }
        );
        assert_eq!(l.payload, PAYLOAD);
    }
    assert!(db.row(other[0]).await.lease_owner.is_none());
    let again = lease_lanes(db, WORKER, &hooks, &want).await;
    assert_eq!(again.len(), 2, "the slow lane's next two; the fast lane is empty");
    assert!(lease_lanes(db, WORKER, &channels(), &want).await.is_empty(), "another channel");
}

async fn concurrent_lane_leases_never_take_one_row_twice(db: &Db) {
    const LEASERS: usize = 4;
    let (a, b) = (tenant(db, "a").await, tenant(db, "b").await);
    let mut claimed: HashSet<Uuid> =
        lane_rows(db, a, "https://x.test/h", 12).await.into_iter().collect();
    claimed.extend(lane_rows(db, b, "https://y.test/h", 12).await);
    let start = Arc::new(tokio::sync::Barrier::new(LEASERS));
    let mut leasers = Vec::new();
    for n in 0..LEASERS {
        let (store, start) = (db.store.clone(), start.clone());
        leasers.push(tokio::spawn(async move {
            start.wait().await;
            let worker = format!("worker-{n}");
            let hooks = vec!["webhook".to_string()];
            let want = [(lane(a, "x.test"), 4), (lane(b, "y.test"), 4)];
            loop {
                let mut tx = store.begin(&Default::default()).await.unwrap();
                let lease = LeaseLanes {
                    worker: &worker,
                    channels: &hooks,
                    lanes: &want,
                    lease: Duration::from_millis(LEASE_MS as u64),
                    now: at(60_000),
                };
                match deliveries_lease_lanes(tx.as_conn(), &lease).await {
                    Ok(leased) => {
                        tx.commit().await.unwrap();
                        return (worker, leased.iter().map(|l| l.delivery.id).collect::<Vec<_>>());
                    }
                    // MariaDB may answer a deadlock between leases racing over one index's
                    // entries; the worker's runner retries it, as here.
                    Err(e) if matches!(e.class(), ErrorClass::Concurrency(_)) => {
                        assert_eq!(store.backend(), Backend::MySql, "{e:?}");
                        let _ = tx.rollback().await;
                    }
                    Err(e) => panic!("{worker}: {e:?}"),
                }
            }
        }));
    }
    let mut seen = HashSet::new();
    for leaser in leasers {
        let (worker, leased) = leaser.await.unwrap();
        assert!(leased.len() <= 8, "{worker} leased {}", leased.len());
        for id in leased {
            assert!(seen.insert(id), "{id} leased twice");
        }
    }
    assert!(seen.is_subset(&claimed));
    if db.backend() != Backend::MySql {
        assert_eq!(seen, claimed, "four leases of 4 + 4 take all 24 rows");
    }
}

/// The wall clock the quick lease compares pauses with, in these tests.
const NOW_MS: i64 = T0 + 60_000;

/// One quick lease outside a transaction (as the worker runs it): `None` where the
/// backend has no such statement.
async fn lease_quick(
    store: &herald_store::Store,
    worker: &str,
    channels: &[String],
    busy: &[Lane],
    room: usize,
) -> Option<Vec<LeasedRow>> {
    let quick = QuickLease {
        worker,
        channels,
        busy,
        room,
        lanes_max: 100,
        open_after: 5,
        lease: Duration::from_millis(LEASE_MS as u64),
        now: at(60_000),
        now_ms: NOW_MS,
    };
    let mut conn = store.acquire().await.unwrap();
    deliveries_lease_quick(conn.as_conn(), &quick).await.unwrap()
}

async fn a_quick_lease_takes_one_row_of_each_lane_that_may_send(db: &Db) {
    let hooks = vec!["webhook".to_string()];
    if !db.backend().leases_quickly() {
        assert!(lease_quick(&db.store, WORKER, &hooks, &[], 10).await.is_none());
        return;
    }
    let t = tenant(db, "acme").await;
    let open = lane_rows(db, t, "https://open.test/h", 3).await;
    let failing = lane_rows(db, t, "https://failing.test/h", 1).await;
    lane_rows(db, t, "https://busy.test/h", 2).await;
    lane_rows(db, t, "https://paused.test/h", 1).await;
    lane_rows(db, t, "https://circuit.test/h", 1).await;
    lane_rows(db, t, "https://disabled.test/h", 1).await;
    let mut later = to("webhook", "https://later.test/h", t, "later");
    later.send_at = Some(T0 + 3_600_000);
    claim(db, &later, at(0)).await;
    lane_rows(db, t, "mail@example.com", 1).await; // another channel
    {
        let mut tx = db.tx().await;
        lane_pause(tx.as_conn(), t, "paused.test", NOW_MS + 1_000, NOW_MS).await.unwrap();
        let health = |failures, disabled_ms| LaneHealth {
            until_ms: NOW_MS - 1,
            failures,
            failing_since_ms: Some(T0),
            disabled_ms,
            ..LaneHealth::default()
        };
        // Failing, but below the circuit's threshold: it still sends.
        lane_health_put(tx.as_conn(), t, "failing.test", &health(4, None), NOW_MS).await.unwrap();
        lane_health_put(tx.as_conn(), t, "circuit.test", &health(5, None), NOW_MS).await.unwrap();
        lane_health_put(tx.as_conn(), t, "disabled.test", &health(9, Some(T0)), NOW_MS)
            .await
            .unwrap();
        tx.commit().await.unwrap();
    }
    let busy = [lane(t, "busy.test")];
    let leased = lease_quick(&db.store, WORKER, &hooks, &busy, 10).await.unwrap();
    let got: HashSet<Uuid> = leased.iter().map(|l| l.delivery.id).collect();
    let expected: HashSet<Uuid> = [open[0], failing[0]].into_iter().collect();
    assert_eq!(got, expected, "one row, the oldest, of each lane that may send and is not busy");
    for l in &leased {
        assert_eq!(l.delivery.lease_owner.as_deref(), Some(WORKER));
        assert_eq!(l.delivery.attempts, 1);
        assert_eq!(l.payload, PAYLOAD);
        let row = db.row(l.delivery.id).await;
        assert_eq!((row.state, row.attempts), (l.delivery.state, 1), "committed on its own");
    }
    let one = lease_quick(&db.store, WORKER, &hooks, &busy, 1).await.unwrap();
    assert_eq!(one.len(), 1, "at most the room");
    assert_eq!(one[0].delivery.id, open[1], "the open lane's next row");
    assert!(lease_quick(&db.store, WORKER, &hooks, &busy, 0).await.unwrap().is_empty());
}

async fn concurrent_quick_leases_never_take_one_row_twice(db: &Db) {
    const LEASERS: usize = 4;
    if !db.backend().leases_quickly() {
        return; // the first test checks that there is no such statement here
    }
    let mut claimed = HashSet::new();
    for (i, host) in ["a", "b", "c", "d", "e", "f"].iter().enumerate() {
        let t = tenant(db, &format!("t{i}")).await;
        claimed.extend(lane_rows(db, t, &format!("https://{host}.test/h"), 3).await);
    }
    let start = Arc::new(tokio::sync::Barrier::new(LEASERS));
    let mut leasers = Vec::new();
    for n in 0..LEASERS {
        let (store, start) = (db.store.clone(), start.clone());
        leasers.push(tokio::spawn(async move {
            start.wait().await;
            let worker = format!("worker-{n}");
            let hooks = vec!["webhook".to_string()];
            let mut leased = Vec::new();
            loop {
                let got = lease_quick(&store, &worker, &hooks, &[], 100).await.unwrap();
                if got.is_empty() {
                    return leased;
                }
                leased.extend(got.into_iter().map(|l| l.delivery.id));
            }
        }));
    }
    let mut seen = HashSet::new();
    for leaser in leasers {
        for id in leaser.await.unwrap() {
            assert!(seen.insert(id), "{id} leased twice");
        }
    }
    assert_eq!(seen, claimed, "every row leased once, none twice");
}
