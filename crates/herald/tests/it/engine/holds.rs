//! Holds (pause and resume, issue 37's incident console): a held scope's pending deliveries
//! wait without spending an attempt or their reservation, whether they were pending when
//! the hold was placed or entered the scope later; releasing makes them due again.

use super::*;
use herald::{HoldKind, HoldScope};

fn hook(tenant: herald::TenantId, key: &str, url: &str) -> SubmitRequest {
    SubmitRequest {
        quota_key: Some("email".into()),
        ..SubmitRequest::new(tenant, key, "webhook", url, serde_json::json!({"event": key}))
    }
}

fn webhooks(env: &Env, channel: Arc<Script>) -> Worker {
    let channel: Arc<dyn Channel> = channel;
    Worker::new(env.herald.clone(), options("w1"), [("webhook".to_string(), channel)]).unwrap()
}

fn destination(host: &str, tenant: Option<herald::TenantId>) -> HoldScope {
    HoldScope {
        kind: HoldKind::Destination,
        value: host.into(),
        tenant: tenant.map(|t| t.as_uuid()),
    }
}

#[tokio::test]
async fn a_held_destination_waits_unspent_and_resumes_across_tenants() {
    for env in envs().await {
        let n = env.name;
        let other = env.herald.tenant_create("other").await.unwrap().id;
        env.herald.quota_grant(other, "email", 100, None).await.unwrap();
        let failing = [
            env.submit(hook(env.tenant, "a-1", "https://Hooks.Failing.example/x")).await,
            env.submit(hook(env.tenant, "a-2", "https://hooks.failing.example:8443/y?z")).await,
            env.submit(hook(other, "b-1", "https://hooks.failing.example")).await,
        ];
        let fine = env.submit(hook(other, "b-2", "https://hooks.fine.example/x")).await;

        let scope = destination("hooks.failing.example", None);
        let report = env.herald.hold(&scope, "admin").await.unwrap();
        assert_eq!((report.changed, report.deliveries), (true, 3), "{n}");
        assert!(!env.herald.hold(&scope, "admin").await.unwrap().changed, "{n}: held already");
        assert_eq!(env.herald.holds(None).await.unwrap().len(), 1, "{n}");

        let script = Script::new([]);
        let worker = webhooks(&env, script.clone());
        let run = worker.run_once().await.unwrap();
        assert_eq!((run.leased, run.sent), (1, 1), "{n}: only the destination not held");
        assert_eq!(script.calls(), [(fine.id, 1)], "{n}");
        // Submitted after the hold: leased once, held in the lease's transaction, unsent.
        let late =
            env.submit(hook(env.tenant, "a-3", "https://user@hooks.failing.example/z")).await;
        let run = worker.run_once().await.unwrap();
        assert_eq!((run.leased, run.sent), (0, 0), "{n}: {run:?}");
        for d in failing.iter().chain([&late]) {
            let d = env.herald.delivery(d.tenant, d.id).await.unwrap();
            assert_eq!(
                (d.state, d.attempts, d.held),
                (DeliveryState::Pending, 0, true),
                "{n}: {}",
                d.operation_key
            );
        }
        assert_eq!(env.quota().await, (100, 97, 3, 0), "{n}: the reservations stay");
        env.clock.advance(Duration::from_secs(3600));
        assert_eq!(worker.run_once().await.unwrap().leased, 0, "{n}: still held an hour later");

        let report = env.herald.release_hold(&scope).await.unwrap();
        assert_eq!((report.changed, report.deliveries), (true, 4), "{n}");
        assert!(!env.herald.release_hold(&scope).await.unwrap().changed, "{n}: not held");
        let run = worker.run_once().await.unwrap();
        assert_eq!((run.leased, run.sent), (4, 4), "{n}: {run:?}");
        for d in failing.iter().chain([&late]) {
            let d = env.herald.delivery(d.tenant, d.id).await.unwrap();
            assert_eq!((d.state, d.attempts, d.held), (DeliveryState::Sent, 1, false), "{n}");
        }
    }
}

#[tokio::test]
async fn channel_tenant_and_narrowed_holds_cover_only_their_scope() {
    for env in envs().await {
        let n = env.name;
        let other = env.herald.tenant_create("other").await.unwrap().id;
        env.herald.quota_grant(other, "email", 100, None).await.unwrap();
        let url = "https://hooks.example/x";
        let mine = env.submit(hook(env.tenant, "mine", url)).await;
        let theirs = env.submit(hook(other, "theirs", url)).await;
        // Only this tenant's deliveries to the host.
        let narrowed = destination("hooks.example", Some(env.tenant));
        assert_eq!(env.herald.hold(&narrowed, "tenant").await.unwrap().deliveries, 1, "{n}");
        assert_eq!(env.herald.holds(Some(other)).await.unwrap(), [], "{n}: not the other's");
        assert_eq!(env.herald.holds(Some(env.tenant)).await.unwrap().len(), 1, "{n}");
        let script = Script::new([]);
        let worker = webhooks(&env, script.clone());
        assert_eq!(worker.run_once().await.unwrap().sent, 1, "{n}");
        assert_eq!(script.calls(), [(theirs.id, 1)], "{n}");
        env.herald.release_hold(&narrowed).await.unwrap();

        // A tenant hold and a channel hold; releasing one leaves the other holding.
        let tenant =
            HoldScope { kind: HoldKind::Tenant, value: env.tenant.to_string(), tenant: None };
        let channel = HoldScope { kind: HoldKind::Channel, value: "webhook".into(), tenant: None };
        env.herald.hold(&tenant, "admin").await.unwrap();
        env.herald.hold(&channel, "admin").await.unwrap();
        env.herald.release_hold(&tenant).await.unwrap();
        assert_eq!(worker.run_once().await.unwrap().sent, 0, "{n}: the channel still held");
        assert!(env.herald.delivery(mine.tenant, mine.id).await.unwrap().held, "{n}");
        env.herald.release_hold(&channel).await.unwrap();
        assert_eq!(worker.run_once().await.unwrap().sent, 1, "{n}");

        // Bad scopes change nothing.
        for bad in [
            HoldScope { kind: HoldKind::Destination, value: "a/b".into(), tenant: None },
            HoldScope { kind: HoldKind::Tenant, value: "not-a-uuid".into(), tenant: None },
            HoldScope {
                kind: HoldKind::Tenant,
                value: herald::TenantId::new_v7().to_string(),
                tenant: None,
            },
            HoldScope { kind: HoldKind::Channel, value: "web\u{202e}hook".into(), tenant: None },
        ] {
            assert!(env.herald.hold(&bad, "admin").await.is_err(), "{n}: {bad:?}");
        }
        assert_eq!(env.herald.holds(None).await.unwrap(), [], "{n}");
    }
}
