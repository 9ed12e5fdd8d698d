//! Guarantee 1: one claim per identity.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_concurrent_submits_from_four_pools_claim_and_reserve_once() {
    const CALLS: usize = 64;
    for db in backends().await {
        let name = db.name();
        let mut heralds = Vec::new();
        for _ in 0..4 {
            heralds.push(db.herald().await);
        }
        let herald = heralds[0].clone();
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 100, None).await.unwrap();
        let req = SubmitRequest { cost: Some(3), ..request(tenant, "order-17-shipped") };

        let start = Arc::new(Barrier::new(CALLS));
        let tasks: Vec<_> = (0..CALLS)
            .map(|i| {
                let (herald, req, start) = (heralds[i % 4].clone(), req.clone(), start.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    // Both paths race for the same identity: they lock the quota row and
                    // the identity in opposite orders, so a deadlock can be provoked and
                    // must be retried away.
                    submit_via(&herald, &req, VIAS[i % 2]).await
                })
            })
            .collect();
        let mut results = Vec::new();
        for task in tasks {
            let result = task.await.unwrap();
            results.push(result.unwrap_or_else(|e| panic!("{name}: a submit failed: {e:?}")));
        }

        let created = results.iter().filter(|s| !s.duplicate).count();
        assert_eq!(created, 1, "{name}: exactly one submit creates");
        assert_eq!(results.len() - created, CALLS - 1, "{name}: all others are duplicates");
        let id = results[0].delivery.id;
        assert!(results.iter().all(|s| s.delivery.id == id), "{name}: one delivery id for all");

        let rows = count(
            &herald,
            "SELECT count(*) FROM deliveries WHERE tenant_id = $1",
            &[Id(tenant.into())],
        )
        .await;
        assert_eq!(rows, 1, "{name}: one delivery row");
        let payloads = count(&herald, "SELECT count(*) FROM delivery_payloads", &[]).await;
        assert_eq!(payloads, 1, "{name}: one payload row");
        let reserves = count(
            &herald,
            "SELECT count(*) FROM quota_journal WHERE tenant_id = $1 AND kind = 'reserve'",
            &[Id(tenant.into())],
        )
        .await;
        assert_eq!(reserves, 1, "{name}: one reserve journal row");
        let of_the_delivery = count(
            &herald,
            "SELECT count(*) FROM quota_journal WHERE delivery_id = $1 AND reservation_seq = 1",
            &[Id(id.into())],
        )
        .await;
        assert_eq!(of_the_delivery, 1, "{name}: the reserve belongs to the delivery");
        assert_eq!(
            herald.quotas(tenant).await.unwrap(),
            [account(tenant, "email", [100, 97, 3, 0])],
            "{name}: reserved == cost, once"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_submits_of_distinct_identities_never_overspend_a_hot_account() {
    const CALLS: usize = 32;
    const GRANTED: i64 = 20;
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let other = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", GRANTED, None).await.unwrap();

        let start = Arc::new(Barrier::new(CALLS));
        let tasks: Vec<_> = (0..CALLS)
            .map(|i| {
                let herald = if i % 2 == 0 { herald.clone() } else { other.clone() };
                let (req, start) = (request(tenant, &format!("evt-{i}")), start.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    kind(&submit_via(&herald, &req, VIAS[(i / 2) % 2]).await)
                })
            })
            .collect();
        let mut kinds = Vec::new();
        for task in tasks {
            kinds.push(task.await.unwrap());
        }
        let created = kinds.iter().filter(|k| **k == "created").count();
        let exhausted = kinds.iter().filter(|k| **k == "quota exhausted").count();
        assert_eq!(
            (created, exhausted),
            (GRANTED as usize, CALLS - GRANTED as usize),
            "{name}: {kinds:?}"
        );
        assert_eq!(
            herald.quotas(tenant).await.unwrap(),
            [account(tenant, "email", [GRANTED, 0, GRANTED, 0])],
            "{name}"
        );
        let rows = count(&herald, "SELECT count(*) FROM deliveries", &[]).await;
        assert_eq!(rows, GRANTED, "{name}: a delivery per reservation, none unbudgeted");
        let reserves =
            count(&herald, "SELECT count(*) FROM quota_journal WHERE kind = 'reserve'", &[]).await;
        assert_eq!(reserves, GRANTED, "{name}");
    }
}

#[tokio::test]
async fn a_repeat_with_another_request_is_refused_and_changes_nothing() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        let other_tenant = herald.tenant_create("globex").await.unwrap().id;
        for t in [tenant, other_tenant] {
            herald.quota_grant(t, "email", 100, None).await.unwrap();
            herald.quota_grant(t, "sms", 100, None).await.unwrap();
        }
        let base =
            SubmitRequest { cost: Some(2), max_attempts: Some(5), ..request(tenant, "inv-9") };
        let first = submit(&herald, &base).await.unwrap();
        assert!(!first.duplicate, "{name}");

        let before = totals(&herald, &[tenant, other_tenant]).await;
        let stored_before = stored(&herald, first.delivery.id).await;
        let later = Timestamp::now() + SignedDuration::from_hours(1);
        let cases = [
            (
                "another payload",
                SubmitRequest {
                    payload: json!({"subject": "receipt", "text": "thanks for your order!"}).into(),
                    ..base.clone()
                },
            ),
            (
                "a payload with one more field",
                SubmitRequest {
                    payload:
                        json!({"subject": "receipt", "text": "thanks for your order", "html": ""})
                            .into(),
                    ..base.clone()
                },
            ),
            ("another cost", SubmitRequest { cost: Some(3), ..base.clone() }),
            ("the default cost instead of 2", SubmitRequest { cost: None, ..base.clone() }),
            ("another max_attempts", SubmitRequest { max_attempts: Some(6), ..base.clone() }),
            (
                "the default max_attempts instead of 5",
                SubmitRequest { max_attempts: None, ..base.clone() },
            ),
            ("another recipient", SubmitRequest { to: "bob@example.com".into(), ..base.clone() }),
            ("another quota key", SubmitRequest { quota_key: Some("sms".into()), ..base.clone() }),
            ("a send_at", SubmitRequest { send_at: Some(later), ..base.clone() }),
        ];
        for ((what, req), via) in cases.iter().flat_map(|c| VIAS.map(|v| (c, v))) {
            let result = submit_via(&herald, req, via).await;
            assert_eq!(kind(&result), "reused", "{name}: {what} ({via:?}): {result:?}");
            assert_eq!(totals(&herald, &[tenant, other_tenant]).await, before, "{name}: {what}");
            assert_eq!(stored(&herald, first.delivery.id).await, stored_before, "{name}: {what}");
            let now = herald.delivery(tenant, first.delivery.id).await.unwrap();
            assert_eq!(now, first.delivery, "{name}: {what}: the row is untouched");
        }

        // Refused inside the application's own transaction too, which stays usable.
        create_orders_table(&herald).await;
        let reused = own_tx!(herald, commit, |own| {
            exec(own.as_conn(), &insert_order(1, "before")).await.unwrap();
            let result = herald.submit_in(&mut own, &cases[0].1).await;
            exec(own.as_conn(), &insert_order(2, "after")).await.unwrap();
            result
        });
        assert_eq!(kind(&reused), "reused", "{name}: {reused:?}");
        assert_eq!(order_notes(&herald).await, ["before", "after"], "{name}");
        assert_eq!(totals(&herald, &[tenant, other_tenant]).await, before, "{name}");

        // The same meaning written differently is a duplicate, not a reuse.
        let reordered = herald::Payload::from_text(
            r#"{ "text": "thanks for your order", "subject": "receipt" }"#,
        );
        let again = submit(&herald, &SubmitRequest { payload: reordered, ..base.clone() }).await;
        assert_eq!(kind(&again), "duplicate", "{name}: {again:?}");
        assert_eq!(again.unwrap().delivery, first.delivery, "{name}");

        // The identity is (tenant, operation_key, channel): change any part and it is new.
        let sms = SubmitRequest { channel: "sms".into(), ..base.clone() };
        let elsewhere = SubmitRequest { tenant: other_tenant, ..base.clone() };
        for (what, req) in [("another channel", sms), ("another tenant", elsewhere)] {
            let result = submit(&herald, &req).await;
            assert_eq!(kind(&result), "created", "{name}: {what}: {result:?}");
            assert_ne!(result.unwrap().delivery.id, first.delivery.id, "{name}: {what}");
        }
    }
}
