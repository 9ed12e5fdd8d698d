//! Signatures.

use super::*;

#[tokio::test]
async fn the_signature_verifies_with_the_standard_webhooks_library() {
    let receiver = Receiver::start().await;
    for env in envs().await {
        let path = format!("/{}/hook", env.name);
        let payload = json!({
            "type": "repair.ready",
            "data": {"ticket": 42, "note": "réparation prête ✓", "tags": ["a", "b"], "price": 12.5},
        });
        let d = env.submit("op-1", &receiver.url(&path), payload.clone()).await;
        assert_eq!(env.quota().await, (100, 99, 1, 0), "{}: reserved at submit", env.name);

        let report = env.worker(loopback_allowed()).run_once().await.unwrap();
        assert_eq!((report.leased, report.sent), (1, 1), "{}: {report:?}", env.name);
        let now_s = jiff::Timestamp::now().as_second();

        let got = receiver.received(&path);
        assert_eq!(got.len(), 1, "{}: one request", env.name);
        let r = &got[0];
        assert_eq!(r.method, "POST", "{}", env.name);
        assert_eq!(header(r, "webhook-id"), d.id.to_string(), "{}: webhook-id", env.name);
        let ts: i64 = header(r, "webhook-timestamp").parse().unwrap();
        assert!((now_s - ts).abs() <= 5, "{}: webhook-timestamp {ts} vs now {now_s}", env.name);
        assert!(
            header(r, "content-type").starts_with("application/json"),
            "{}: content-type {:?}",
            env.name,
            header(r, "content-type")
        );
        let body: serde_json::Value = serde_json::from_slice(&r.body)
            .unwrap_or_else(|e| panic!("{}: body is not JSON ({e})", env.name));
        assert_eq!(body, payload, "{}: body is the payload", env.name);
        assert_eq!(signature_count(r), 1, "{}: one secret, one signature", env.name);

        // The reference library accepts it with the tenant's secret…
        let other = herald::new_webhook_secret().unwrap();
        let mut tampered = r.clone();
        tampered.body = serde_json::to_vec(&json!({"type": "repair.ready", "data": {}})).unwrap();
        let mut wrong_id = r.clone();
        wrong_id.headers.insert("webhook-id".into(), Uuid::now_v7().to_string());
        let verdicts = verify_all(&[
            (&env.secret, r),
            (&other, r),
            (&env.secret, &tampered),
            (&env.secret, &wrong_id),
        ]);
        assert_eq!(
            verdicts[0], None,
            "{}: standardwebhooks must verify herald's signature",
            env.name
        );
        // …and is not a rubber stamp: another secret, another body or another id fail.
        assert!(verdicts[1].is_some(), "{}: another secret must not verify", env.name);
        assert!(verdicts[2].is_some(), "{}: a tampered body must not verify", env.name);
        assert!(verdicts[3].is_some(), "{}: another webhook-id must not verify", env.name);

        let d = env.get(d.id).await;
        assert_eq!((d.state, d.attempts), (DeliveryState::Sent, 1), "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, [outcome("sent", None)], "{}", env.name);
        assert_eq!(env.quota().await, (100, 99, 0, 1), "{}: committed", env.name);
    }
}

#[tokio::test]
async fn a_rotated_secret_signs_the_next_attempt() {
    let receiver = Receiver::start().await;
    for env in envs().await {
        let path = format!("/{}/hook", env.name);
        receiver.script(&path, [status(503), status(200)]);
        let d = env.submit("op-1", &receiver.url(&path), json!({"n": 1})).await;
        let worker = env.worker(loopback_allowed());
        assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}", env.name);

        let new_secret = herald::new_webhook_secret().unwrap();
        assert_ne!(new_secret, env.secret);
        let first = receiver.received(&path).pop().unwrap();
        assert_eq!(signature_count(&first), 1, "{}: before rotation", env.name);
        let verdicts = verify_all(&[(&env.secret, &first), (&new_secret, &first)]);
        assert_eq!(verdicts[0], None, "{}: attempt 1 is signed with the old secret", env.name);
        assert!(verdicts[1].is_some(), "{}: not yet with the new one", env.name);

        let (tenant, secret) = (env.tenant, new_secret.clone());
        let rotated = env
            .herald
            .transaction(|tx| {
                let secret = secret.clone();
                Box::pin(async move {
                    Ok(herald_store::tenants::tenant_rotate_secret(
                        tx.conn(),
                        tenant.as_uuid(),
                        &secret,
                    )
                    .await?)
                })
            })
            .await
            .unwrap()
            .value;
        assert!(rotated, "{}: the tenant exists", env.name);

        env.advance_to_due(d.id).await;
        assert_eq!(worker.run_once().await.unwrap().sent, 1, "{}", env.name);
        let got = receiver.received(&path);
        assert_eq!(got.len(), 2, "{}", env.name);
        let second = &got[1];
        assert_eq!(header(second, "webhook-id"), d.id.to_string(), "{}", env.name);
        assert_eq!(signature_count(second), 2, "{}: both secrets during rotation", env.name);
        let third = herald::new_webhook_secret().unwrap();
        let verdicts =
            verify_all(&[(&new_secret, second), (&env.secret, second), (&third, second)]);
        assert_eq!(
            verdicts[0], None,
            "{}: the next attempt verifies with the NEW secret",
            env.name
        );
        assert_eq!(verdicts[1], None, "{}: and still with the previous one", env.name);
        assert!(verdicts[2].is_some(), "{}: not with an unrelated secret", env.name);
    }
}
