//! The lease and what follows it: `deliveries_lease` (due, oldest first, by channel, at
//! most `limit`, never one row twice), the heartbeat, handing a lease back, and the leases
//! the reconciler and a worker look for.

use super::*;
use herald_core::DeliveryState;
use herald_store::deliveries::{
    Claim, ExpiredLease, Lease, deliveries_expired, deliveries_lease, deliveries_leased_by,
    delivery_attempts, delivery_claim, delivery_hand_back, delivery_lease_extend,
};
use herald_store::{AsConn, Backend, Concurrency, ErrorClass};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

conformance!(
    a_lease_takes_due_rows_oldest_first,
    a_lease_reads_the_stripe_each_reservation_sits_on,
    a_lease_takes_only_the_given_channels,
    a_lease_takes_at_most_limit_rows,
    a_leased_row_is_not_leased_again,
    concurrent_leases_never_take_one_row_twice,
    a_held_lease_hides_its_rows_and_the_limit_counts_free_rows,
    the_heartbeat_extends_only_the_holders_lease,
    only_the_holder_hands_a_lease_back_and_the_attempt_is_restored,
    expired_leases_are_listed_oldest_expiry_first,
    leased_by_lists_one_workers_live_leases,
    fixed_instants_and_leases_of_any_size_reuse_their_prepared_statements,
);

async fn a_lease_takes_due_rows_oldest_first(db: &Db) {
    let t = funded(db).await;
    let mut claimed = Vec::new();
    for (key, send_at) in [("a", 2_000), ("b", 1_000), ("c", 0), ("later", 3_600_000)] {
        let mut new = new_delivery(t, key);
        new.send_at = Some(T0 + send_at);
        claim(db, &new, at(0)).await;
        claimed.push(new.id);
    }
    let [a, b, c, later] = claimed[..] else { unreachable!() };

    let leased = lease(db, WORKER, 10, at(5_000)).await;
    assert_eq!(ids(&leased), vec![c, b, a]);
    for l in &leased {
        let d = &l.delivery;
        assert_eq!(l.payload, PAYLOAD);
        assert_eq!((d.state, d.attempts), (DeliveryState::Sending, 1));
        assert_eq!(d.lease_owner.as_deref(), Some(WORKER));
        assert_eq!(d.lease_until, Some(T0 + 5_000 + LEASE_MS));
        assert_eq!(d.attempt_worker.as_deref(), Some(WORKER));
        assert_eq!((d.attempt_started_at, d.updated_at), (Some(T0 + 5_000), T0 + 5_000));
        assert_eq!(&db.row(d.id).await, d, "the lease returned the row as it is now");
    }
    let row = db.row(later).await;
    assert_eq!((row.state, row.attempts, row.lease_owner), (DeliveryState::Pending, 0, None));
}

/// The recorder locks the stripes it settles as the lease read them, without looking them
/// up again: the lease must name the stripe of the reservation's `reserve` row, and none
/// for a delivery without a reservation.
async fn a_lease_reads_the_stripe_each_reservation_sits_on(db: &Db) {
    let t = tenant(db, "acme").await;
    // One unit per stripe (SQLite: its one stripe holds them all), so the second
    // reservation cannot sit where the first drained it.
    grant(db, t, KEY, herald_store::quota::QUOTA_STRIPES as i64).await;
    let (first, second) = (claimed(db, t, "a", at(0)).await, claimed(db, t, "b", at(1)).await);
    let mut free = new_delivery(t, "free");
    free.cost = 0;
    claim(db, &free, at(2)).await;

    let leased = lease(db, WORKER, 10, at(5_000)).await;
    let stripes: Vec<(uuid::Uuid, Option<i16>)> =
        leased.iter().map(|l| (l.delivery.id, l.stripe)).collect();
    let mut reserved = Vec::new();
    for id in [first, second] {
        let (stripe,): (i16,) = raw_query_as!(
            db.conn().await.as_conn(),
            "SELECT stripe FROM quota_journal WHERE delivery_id = $1 AND kind = 'reserve'",
            [id],
            fetch_one
        )
        .unwrap();
        reserved.push((id, Some(stripe)));
    }
    assert_eq!(stripes, vec![reserved[0], reserved[1], (free.id, None)]);
    if db.store.backend() != Backend::Sqlite {
        assert_ne!(reserved[0].1, reserved[1].1, "the second reservation took another stripe");
    }
}

async fn a_lease_takes_only_the_given_channels(db: &Db) {
    let t = funded(db).await;
    let mut by_channel = Vec::new();
    for channel in ["email", "webhook", "sms"] {
        let mut new = new_delivery(t, channel);
        new.channel = channel;
        claim(db, &new, at(0)).await;
        by_channel.push(new.id);
    }
    let take = |channels: &'static [&'static str]| async move {
        let channels: Vec<String> = channels.iter().map(|c| c.to_string()).collect();
        let lease = Lease {
            worker: WORKER,
            channels: &channels,
            limit: 10,
            lease: Duration::from_secs(60),
            now: at(0),
        };
        let mut tx = db.tx().await;
        let leased = deliveries_lease(tx.as_conn(), &lease).await.unwrap();
        tx.commit().await.unwrap();
        ids(&leased).into_iter().collect::<HashSet<_>>()
    };
    assert!(take(&[]).await.is_empty());
    assert!(take(&["fax"]).await.is_empty());
    assert_eq!(take(&["webhook", "sms"]).await, HashSet::from([by_channel[1], by_channel[2]]));
    assert_eq!(take(&["email", "webhook", "sms"]).await, HashSet::from([by_channel[0]]));
}

async fn a_lease_takes_at_most_limit_rows(db: &Db) {
    let t = funded(db).await;
    let claimed = due(db, t, 5).await;
    assert!(lease(db, WORKER, 0, at(0)).await.is_empty(), "limit 0 leased");
    assert_eq!(ids(&lease(db, WORKER, 2, at(10)).await), claimed[0..2]);
    assert_eq!(ids(&lease(db, WORKER, 2, at(10)).await), claimed[2..4]);
    assert_eq!(ids(&lease(db, WORKER, 2, at(10)).await), claimed[4..5]);
    assert!(lease(db, WORKER, 2, at(10)).await.is_empty());
}

/// A `sending` row waits for the reconciler, even when its lease has run out.
async fn a_leased_row_is_not_leased_again(db: &Db) {
    let t = funded(db).await;
    let id = claimed(db, t, "order-1", at(0)).await;
    assert_eq!(ids(&lease(db, WORKER, 10, at(0)).await), vec![id]);
    assert!(lease(db, "worker-2", 10, at(1)).await.is_empty());
    assert!(lease(db, "worker-2", 10, at(10 * LEASE_MS)).await.is_empty());
    assert_eq!(db.row(id).await.attempts, 1);
}

/// Leasers in transactions of their own, started together: every row is leased once.
async fn concurrent_leases_never_take_one_row_twice(db: &Db) {
    const ROWS: usize = 20;
    const LEASERS: usize = 4;
    const LIMIT: usize = 8;
    let t = funded(db).await;
    let claimed = due(db, t, ROWS).await;
    let start = Arc::new(tokio::sync::Barrier::new(LEASERS));
    let mut leasers = Vec::new();
    for n in 0..LEASERS {
        let (store, start) = (db.store.clone(), start.clone());
        leasers.push(tokio::spawn(async move {
            start.wait().await;
            let worker = format!("worker-{n}");
            // MariaDB may answer a deadlock (1213) between leases racing over the due
            // index's entries: a concurrency error, which the worker's runner retries, as
            // here. Never a row taken twice.
            loop {
                let mut tx = store.begin(&Default::default()).await.unwrap();
                match lease_on(tx.as_conn(), &worker, LIMIT, at(1_000)).await {
                    Ok(leased) => {
                        tx.commit().await.unwrap();
                        return (worker, ids(&leased));
                    }
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
        assert!(leased.len() <= LIMIT, "{worker} leased {}", leased.len());
        for id in leased {
            assert!(seen.insert(id), "{id} leased twice");
            assert_eq!(db.row(id).await.lease_owner.as_deref(), Some(worker.as_str()));
        }
    }
    if db.backend() == Backend::MySql {
        // A leaser rolled back by a deadlock gave its rows back after the others had
        // skipped them: they are still due, and the next lease takes them — once.
        for id in ids(&lease(db, "worker-late", ROWS, at(1_000)).await) {
            assert!(seen.insert(id), "{id} leased twice");
        }
    }
    assert_eq!(seen, claimed.into_iter().collect::<HashSet<_>>(), "not every row was leased");
}

/// PostgreSQL: rows another open transaction leased are skipped (`SKIP LOCKED`), without
/// waiting, and do not use up the limit. SQLite: the second writer cannot begin until the
/// first commits, and then sees the rows leased.
async fn a_held_lease_hides_its_rows_and_the_limit_counts_free_rows(db: &Db) {
    let t = funded(db).await;
    let claimed = due(db, t, 6).await;
    let mut held = db.tx().await;
    let first = lease_on(held.as_conn(), WORKER, 2, at(1_000)).await.unwrap();
    assert_eq!(ids(&first), claimed[0..2]);

    let mut held = Some(held);
    let mut second = match db.backend() {
        // A lease that waited for the held rows would run into this bound and fail.
        Backend::Postgres | Backend::MySql => db.tx_waiting(Duration::from_secs(5)).await.unwrap(),
        Backend::Sqlite => {
            let wait_max = Duration::from_millis(300);
            let refused = db.tx_waiting(wait_max).await.expect_err("a second writer began");
            assert_eq!(refused.class(), ErrorClass::Concurrency(Concurrency::SqliteBusy));
            held.take().unwrap().commit().await.unwrap();
            db.tx().await
        }
    };
    let other = lease_on(second.as_conn(), "worker-2", 3, at(1_000)).await.unwrap();
    assert_eq!(ids(&other), claimed[2..5], "a leased row was taken again, or counted");
    second.commit().await.unwrap();
    if let Some(held) = held {
        held.commit().await.unwrap();
    }
    assert_eq!(ids(&lease(db, "worker-3", 10, at(1_000)).await), claimed[5..6]);
}

async fn the_heartbeat_extends_only_the_holders_lease(db: &Db) {
    let t = funded(db).await;
    let id = claimed(db, t, "order-1", at(0)).await;
    lease(db, WORKER, 1, at(0)).await;
    let extend = |worker: &'static str, n: i32, now: i64| async move {
        let mut tx = db.tx().await;
        let extended =
            delivery_lease_extend(tx.as_conn(), id, worker, n, Duration::from_secs(120), at(now))
                .await
                .unwrap();
        tx.commit().await.unwrap();
        extended
    };
    assert!(!extend("worker-2", 1, 10_000).await, "another worker extended the lease");
    assert!(!extend(WORKER, 2, 10_000).await, "another attempt extended the lease");
    assert_eq!(db.row(id).await.lease_until, Some(T0 + LEASE_MS));

    assert!(extend(WORKER, 1, 10_000).await);
    let row = db.row(id).await;
    assert_eq!((row.state, row.lease_until), (DeliveryState::Sending, Some(T0 + 130_000)));

    let mut tx = db.tx().await;
    assert!(delivery_hand_back(tx.as_conn(), id, WORKER, 1).await.unwrap());
    tx.commit().await.unwrap();
    assert!(!extend(WORKER, 1, 20_000).await, "a lease handed back was extended");
    assert_eq!(db.row(id).await.lease_until, None);
}

async fn only_the_holder_hands_a_lease_back_and_the_attempt_is_restored(db: &Db) {
    let t = funded(db).await;
    let id = claimed(db, t, "order-1", at(0)).await;
    lease(db, WORKER, 1, at(0)).await;
    let hand_back = |worker: &'static str, n: i32| async move {
        let mut tx = db.tx().await;
        let handed = delivery_hand_back(tx.as_conn(), id, worker, n).await.unwrap();
        tx.commit().await.unwrap();
        handed
    };
    assert!(!hand_back("worker-2", 1).await);
    assert!(!hand_back(WORKER, 2).await);
    assert_eq!(db.row(id).await.state, DeliveryState::Sending);

    assert!(hand_back(WORKER, 1).await);
    let row = db.row(id).await;
    assert_eq!((row.state, row.attempts), (DeliveryState::Pending, 0));
    assert_eq!((row.lease_owner, row.lease_until), (None, None));
    assert_eq!((row.attempt_worker, row.attempt_started_at), (None, None));
    assert!(delivery_attempts(db.conn().await.as_conn(), id).await.unwrap().is_empty());
    assert_eq!(db.balance(t).await, (GRANTED - 1, 1, 0), "the reservation is kept");
    assert_eq!(db.movements(t).await, vec![moved("reserve", 1, id, 1)]);
    assert!(!hand_back(WORKER, 1).await, "handed back twice");

    let again = lease(db, "worker-2", 1, at(1_000)).await;
    assert_eq!((again[0].delivery.id, again[0].delivery.attempts), (id, 1));
}

async fn expired_leases_are_listed_oldest_expiry_first(db: &Db) {
    let acme = funded(db).await;
    let globex = tenant(db, "globex").await;
    grant(db, globex, "sms", 10).await;
    let (x, y) = (claimed(db, acme, "x", at(0)).await, claimed(db, acme, "y", at(1)).await);
    let mut z = new_delivery(globex, "z");
    (z.quota_key, z.send_at) = ("sms", Some(T0 + 2));
    claim(db, &z, at(0)).await;
    claimed(db, acme, "pending", at(3_600_000)).await;
    // Leased in due order, each at its own time: x until +90 s, y +70 s, z +80 s.
    assert_eq!(ids(&lease(db, "wx", 1, at(30_000)).await), vec![x]);
    assert_eq!(ids(&lease(db, "wy", 1, at(10_000)).await), vec![y]);
    assert_eq!(ids(&lease(db, "wz", 1, at(20_000)).await), vec![z.id]);

    let expired = |now: i64, limit: usize| async move {
        let mut conn = db.conn().await;
        deliveries_expired(conn.as_conn(), at(now), limit).await.unwrap()
    };
    assert!(expired(69_999, 10).await.is_empty());
    let ids = |found: Vec<ExpiredLease>| found.into_iter().map(|e| e.id).collect::<Vec<_>>();
    assert_eq!(ids(expired(70_000, 10).await), vec![y], "lease_until <= now is expired");
    assert_eq!(ids(expired(85_000, 10).await), vec![y, z.id]);
    assert_eq!(ids(expired(10 * LEASE_MS, 2).await), vec![y, z.id], "limit");
    let all = expired(10 * LEASE_MS, 10).await;
    assert_eq!(ids(all.clone()), vec![y, z.id, x]);
    let z_expired = &all[1];
    assert_eq!((z_expired.lease_owner.as_str(), z_expired.attempts), ("wz", 1));
    assert_eq!((z_expired.tenant_id, z_expired.quota_key.as_str()), (globex, "sms"));
    assert_eq!((all[0].tenant_id, all[0].quota_key.as_str()), (acme, KEY));
}

async fn leased_by_lists_one_workers_live_leases(db: &Db) {
    let t = funded(db).await;
    let claimed = due(db, t, 3).await;
    lease(db, "w1", 2, at(10)).await;
    lease(db, "w2", 1, at(10)).await;
    let leased_by = |worker: &'static str, now: i64, limit: usize| async move {
        let mut conn = db.conn().await;
        let mut found = deliveries_leased_by(conn.as_conn(), worker, at(now), limit).await.unwrap();
        found.sort();
        found
    };
    let mut w1 = vec![(claimed[0], 1), (claimed[1], 1)];
    w1.sort();
    assert_eq!(leased_by("w1", 1_000, 10).await, w1);
    assert_eq!(leased_by("w2", 1_000, 10).await, vec![(claimed[2], 1)]);
    assert!(leased_by("w3", 1_000, 10).await.is_empty());
    assert_eq!(leased_by("w1", 1_000, 1).await.len(), 1, "limit");
    assert!(leased_by("w1", LEASE_MS + 10, 10).await.is_empty(), "an expired lease is live");

    let mut tx = db.tx().await;
    let extend = Duration::from_secs(60);
    assert!(
        delivery_lease_extend(tx.as_conn(), claimed[1], "w1", 1, extend, at(30_000)).await.unwrap()
    );
    tx.commit().await.unwrap();
    assert_eq!(leased_by("w1", LEASE_MS + 10, 10).await, vec![(claimed[1], 1)]);
}

/// MariaDB: claims at 300 different instants and leases of every size from 1 to 24, all
/// on one connection, never evict a prepared statement from its cache. An eviction sends
/// COM_STMT_CLOSE, which the server never answers, and the next request then waits for a
/// delayed ACK behind Nagle (~40 ms each; herald bench saw submits fall from 1,633/s to
/// 90/s when every instant made a new statement text). A statement text per instant or
/// per list length would evict here hundreds of times.
async fn fixed_instants_and_leases_of_any_size_reuse_their_prepared_statements(db: &Db) {
    if db.store.backend() != Backend::MySql {
        return; // COM_STMT_CLOSE is MariaDB's; the other backends have no such cliff
    }
    let t = tenant(db, "acme").await;
    grant(db, t, KEY, 1_000).await;
    let keys: Vec<String> = (0..300).map(|i| format!("k-{i}")).collect();
    let mut tx = db.tx().await;
    for (i, key) in keys.iter().enumerate() {
        let new = new_delivery(t, key);
        let got = delivery_claim(tx.as_conn(), &new, at(i as i64), false).await.unwrap();
        assert!(matches!(got, Claim::Inserted { .. }), "{key}: {got:?}");
    }
    let mut leased = 0;
    for size in 1..=24 {
        let rows = lease_on(tx.as_conn(), WORKER, size, at(1_000 + size as i64)).await.unwrap();
        assert_eq!(rows.len(), size);
        leased += rows.len();
    }
    assert_eq!(leased, 300);
    let closed: (String, String) =
        raw_query_as!(tx.as_conn(), "SHOW SESSION STATUS LIKE 'Com_stmt_close'", [], fetch_one)
            .unwrap();
    assert_eq!(closed.1, "0", "prepared statements evicted from the connection's cache");
    tx.rollback().await.unwrap();
}
