//! Guarantee 1: order of checks, and defaults before the fingerprint.

use super::*;

#[tokio::test]
async fn a_retry_of_a_successful_submit_is_a_duplicate_even_when_quota_has_run_out() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 1, None).await.unwrap();
        let a = request(tenant, "evt-a");
        let created = submit(&herald, &a).await;
        assert_eq!(kind(&created), "created", "{name}: {created:?}");
        let id = created.unwrap().delivery.id;
        for via in VIAS {
            let b = submit_via(&herald, &request(tenant, "evt-b"), via).await;
            assert_eq!(kind(&b), "quota exhausted", "{name} ({via:?}): {b:?}");

            let retry = submit_via(&herald, &a, via).await;
            assert_eq!(kind(&retry), "duplicate", "{name} ({via:?}): {retry:?}");
            assert_eq!(retry.unwrap().delivery.id, id, "{name} ({via:?})");
            // And a changed retry is a reuse, not a quota problem: reuse is checked first.
            let changed = SubmitRequest { payload: json!({"text": "changed"}).into(), ..a.clone() };
            let changed = submit_via(&herald, &changed, via).await;
            assert_eq!(kind(&changed), "reused", "{name} ({via:?}): {changed:?}");
        }
        assert_eq!(herald.quotas(tenant).await.unwrap(), [account(tenant, "email", [1, 0, 1, 0])]);
    }
}

#[tokio::test]
async fn defaults_are_applied_before_the_fingerprint() {
    for db in backends().await {
        let name = db.name();
        let herald = db.herald().await;
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 10, None).await.unwrap();
        let engine_default = herald.options().max_attempts;
        let spelled_out = |req: &SubmitRequest, max_attempts: u32| SubmitRequest {
            quota_key: Some(req.channel.clone()),
            cost: Some(1),
            max_attempts: Some(max_attempts),
            ..req.clone()
        };

        // Implicit first, then explicit; and the other way round.
        for (key, implicit_first) in [("welcome-1", true), ("welcome-2", false)] {
            let implicit = request(tenant, key);
            let explicit = spelled_out(&implicit, engine_default);
            let (first, second) =
                if implicit_first { (&implicit, &explicit) } else { (&explicit, &implicit) };
            let created = submit(&herald, first).await.unwrap();
            assert!(!created.duplicate, "{name}: {key}");
            let d = &created.delivery;
            assert_eq!(
                (d.quota_key.as_str(), d.cost, d.max_attempts),
                ("email", 1, engine_default),
                "{name}: {key}: the defaults"
            );
            let again = submit(&herald, second).await;
            assert_eq!(kind(&again), "duplicate", "{name}: {key}: {again:?}");
            assert_eq!(again.unwrap().delivery.id, created.delivery.id, "{name}: {key}");
        }

        // The default is the database's shared setting, whatever a handle's own options
        // say: the first handle wrote it, and a second one configured otherwise uses it.
        let three = db
            .herald()
            .await
            .with_options(EngineOptions { max_attempts: 3, ..EngineOptions::default() })
            .unwrap();
        let implicit = request(tenant, "welcome-3");
        let created = submit(&three, &implicit).await.unwrap();
        assert_eq!(created.delivery.max_attempts, engine_default, "{name}");
        let same = submit(&herald, &spelled_out(&implicit, engine_default)).await;
        assert_eq!(kind(&same), "duplicate", "{name}: {same:?}");
        let different = submit(&three, &spelled_out(&implicit, 3)).await;
        assert_eq!(kind(&different), "reused", "{name}: {different:?}");

        // An operator changes it: a submit that leaves it out now means the new value.
        three.settings_set(Settings { max_attempts: 3 }).await.unwrap();
        assert_eq!(herald.settings().await.unwrap(), Settings { max_attempts: 3 }, "{name}");
        let implicit = request(tenant, "welcome-4");
        let created = submit(&herald, &implicit).await.unwrap();
        assert_eq!(created.delivery.max_attempts, 3, "{name}");
        let same = submit(&three, &spelled_out(&implicit, 3)).await;
        assert_eq!(kind(&same), "duplicate", "{name}: {same:?}");
        let different = submit(&three, &spelled_out(&implicit, engine_default)).await;
        assert_eq!(kind(&different), "reused", "{name}: {different:?}");

        let reserves =
            count(&herald, "SELECT count(*) FROM quota_journal WHERE kind = 'reserve'", &[]).await;
        assert_eq!(reserves, 4, "{name}: one reservation per delivery");
        assert_eq!(herald.quotas(tenant).await.unwrap(), [account(tenant, "email", [10, 6, 4, 0])]);
    }
}
