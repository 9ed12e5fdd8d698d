//! Guarantee 4: the ledger never drifts.

use super::*;

/// A channel that always answers the same.
struct Fixed(Outcome);

impl Channel for Fixed {
    fn send<'a>(&'a self, _delivery: &'a Leased) -> herald::BoxFuture<'a, Outcome> {
        Box::pin(async move { self.0.clone() })
    }
}

/// Every account's balance identity, and the journal adding up to every balance.
async fn check_ledger(herald: &Herald, tenants: &[herald::TenantId], at: &str) {
    for &tenant in tenants {
        for a in herald.quotas(tenant).await.unwrap() {
            let at = format!("{at}: {}/{}", a.tenant_id, a.quota_key);
            assert!(a.available >= 0 && a.reserved >= 0 && a.spent >= 0, "{at}: {a:?}");
            assert_eq!(a.granted, a.available + a.reserved + a.spent, "{at}: {a:?}");
            let mut sums = Vec::new();
            for kind in ["grant", "reserve", "commit", "release"] {
                let sql = "SELECT CAST(coalesce(sum(amount), 0) AS BIGINT) FROM quota_journal
                           WHERE tenant_id = $1 AND quota_key = $2 AND kind = $3";
                sums.push(
                    count(herald, sql, &[Id(tenant.into()), Text(&a.quota_key), Text(kind)]).await,
                );
            }
            let [grants, reserves, commits, releases] = sums[..] else { unreachable!() };
            assert_eq!(grants, a.granted, "{at}: grants = granted");
            assert_eq!(reserves - commits - releases, a.reserved, "{at}: open reservations");
            assert_eq!(commits, a.spent, "{at}: commits = spent");
            assert_eq!(grants - reserves + releases, a.available, "{at}: available");
        }
    }
    let unmatched = count(
        herald,
        "SELECT count(*) FROM quota_journal f WHERE f.kind IN ('commit', 'release')
         AND NOT EXISTS (SELECT 1 FROM quota_journal r WHERE r.kind = 'reserve'
             AND r.delivery_id = f.delivery_id AND r.reservation_seq = f.reservation_seq)",
        &[],
    )
    .await;
    assert_eq!(unmatched, 0, "{at}: every final movement ends a reservation");
}

pub(super) async fn journal_of(herald: &Herald, id: herald::DeliveryId) -> Vec<String> {
    let sql = "SELECT kind || ':' || CAST(reservation_seq AS TEXT) || ':' || CAST(amount AS TEXT)
               FROM quota_journal WHERE delivery_id = $1 ORDER BY id";
    let store = herald.store();
    match (store.sqlite_pool(), store.postgres_pool(), store.mysql_pool()) {
        (Some(pool), _, _) => sqlx::query_scalar(AssertSqlSafe(sql.replace('$', "?")))
            .bind(id.as_uuid())
            .fetch_all(pool)
            .await
            .unwrap(),
        (_, Some(pool), _) => {
            sqlx::query_scalar(sql).bind(id.as_uuid()).fetch_all(pool).await.unwrap()
        }
        (_, _, Some(pool)) => {
            let sql = sql.replace("AS TEXT)", "AS CHAR)").replace("$1", "?");
            sqlx::query_scalar(AssertSqlSafe(sql)).bind(id.as_uuid()).fetch_all(pool).await.unwrap()
        }
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn the_ledger_balances_after_every_operation_on_two_tenants() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let (a, b) = (
            herald.tenant_create("north").await.unwrap().id,
            herald.tenant_create("south").await.unwrap().id,
        );
        let tenants = [a, b];
        let later = Timestamp::now() + SignedDuration::from_hours(1);
        let step = |s: &str| format!("{name}: after {s}");

        assert!(herald.quota_grant(a, "email", 10, Some("g-1")).await.unwrap(), "{name}");
        assert!(!herald.quota_grant(a, "email", 10, Some("g-1")).await.unwrap(), "{name}");
        herald.quota_grant(a, "sms", 4, None).await.unwrap();
        herald.quota_grant(b, "email", 5, None).await.unwrap();
        check_ledger(&herald, &tenants, &step("grants")).await;

        let mut ids = std::collections::HashMap::new();
        let submits = [
            ("a-e1", a, "email", 2, None, "created"),
            ("a-e2", a, "email", 3, Some(later), "created"),
            ("a-s1", a, "sms", 1, None, "created"),
            ("a-f0", a, "email", 0, Some(later), "created"),
            ("a-e3", a, "email", 6, None, "quota exhausted"),
            ("b-e1", b, "email", 1, Some(later), "created"),
            ("b-e2", b, "email", 2, None, "created"),
        ];
        for (key, tenant, channel, cost, send_at, expected) in submits {
            let req = SubmitRequest {
                channel: channel.into(),
                cost: Some(cost),
                send_at,
                ..request(tenant, key)
            };
            let result = submit(&herald, &req).await;
            assert_eq!(kind(&result), expected, "{name}: {key}: {result:?}");
            if let Ok(s) = result {
                ids.insert(key, s.delivery.id);
            }
            check_ledger(&herald, &tenants, &step(key)).await;
        }

        // Send what is due: email is sent (commit), sms fails terminally (release).
        let email: Arc<dyn Channel> = Arc::new(Fixed(Outcome::Sent));
        let sms: Arc<dyn Channel> = Arc::new(Fixed(Outcome::terminal("unknown_number", "no")));
        let worker = Worker::new(
            herald.clone(),
            WorkerOptions::default(),
            [("email".to_string(), email), ("sms".to_string(), sms)],
        )
        .unwrap();
        let report = worker.run_once().await.unwrap();
        assert_eq!((report.leased, report.sent, report.failed), (3, 2, 1), "{name}: {report:?}");
        check_ledger(&herald, &tenants, &step("the first worker run")).await;

        // Cancel a pending delivery: its reservation is released.
        let e2 = ids["a-e2"];
        let cancelled = herald.cancel(a, e2).await.unwrap();
        assert_eq!(cancelled.state, DeliveryState::Cancelled, "{name}");
        check_ledger(&herald, &tenants, &step("cancel")).await;

        // What is not allowed, and another tenant's delivery.
        let wrong = [
            ("cancel twice", herald.cancel(a, e2).await, "cancelled", "cancel"),
            ("cancel a sent one", herald.cancel(a, ids["a-e1"]).await, "sent", "cancel"),
            ("replay a pending one", herald.replay(b, ids["b-e1"]).await, "pending", "replay"),
            ("replay a sent one", herald.replay(a, ids["a-e1"]).await, "sent", "replay"),
        ];
        for (what, result, state, operation) in wrong {
            match result {
                Err(Error::WrongState { state: s, operation: o }) => {
                    assert_eq!((s.to_string().as_str(), o), (state, operation), "{name}: {what}")
                }
                other => panic!("{name}: {what}: expected WrongState, got {other:?}"),
            }
        }
        let b1 = ids["b-e1"];
        assert!(matches!(herald.cancel(a, b1).await, Err(Error::NotFound)), "{name}");
        assert!(matches!(herald.replay(a, b1).await, Err(Error::NotFound)), "{name}");
        assert!(matches!(herald.delivery(a, b1).await, Err(Error::NotFound)), "{name}");
        assert_eq!(herald.delivery(b, b1).await.unwrap().state, DeliveryState::Pending, "{name}");
        check_ledger(&herald, &tenants, &step("refused operations")).await;

        // Replay the cancelled one: same row, reservation 2.
        let replayed = herald.replay(a, e2).await.unwrap();
        assert_eq!(
            (replayed.id, replayed.state, replayed.reservation_seq),
            (e2, DeliveryState::Pending, 2),
            "{name}"
        );
        assert_eq!(journal_of(&herald, e2).await, ["reserve:1:3", "release:1:3", "reserve:2:3"]);
        check_ledger(&herald, &tenants, &step("replaying the cancelled one")).await;

        // Replay the failed one, and cancel the free one (no journal rows at all).
        let s1 = herald.replay(a, ids["a-s1"]).await.unwrap();
        assert_eq!((s1.id, s1.reservation_seq), (ids["a-s1"], 2), "{name}");
        check_ledger(&herald, &tenants, &step("replaying the failed one")).await;
        herald.cancel(a, ids["a-f0"]).await.unwrap();
        assert!(journal_of(&herald, ids["a-f0"]).await.is_empty(), "{name}: cost 0");
        check_ledger(&herald, &tenants, &step("cancelling the free one")).await;

        // The replays are due now: e2 is sent, s1 fails again.
        let report = worker.run_once().await.unwrap();
        assert_eq!((report.leased, report.sent, report.failed), (2, 1, 1), "{name}: {report:?}");
        check_ledger(&herald, &tenants, &step("the second worker run")).await;
        assert_eq!(
            journal_of(&herald, e2).await,
            ["reserve:1:3", "release:1:3", "reserve:2:3", "commit:2:3"],
            "{name}"
        );
        assert_eq!(
            journal_of(&herald, ids["a-s1"]).await,
            ["reserve:1:1", "release:1:1", "reserve:2:1", "release:2:1"],
            "{name}"
        );

        assert_eq!(
            herald.quotas(a).await.unwrap(),
            [account(a, "email", [10, 5, 0, 5]), account(a, "sms", [4, 4, 0, 0])],
            "{name}"
        );
        assert_eq!(herald.quotas(b).await.unwrap(), [account(b, "email", [5, 2, 1, 2])], "{name}");
    }
}
