//! `/v1/holds` on every backend: the admin holds a scope over every tenant or one, a
//! tenant's key holds its own deliveries only, held deliveries show `held` and wait
//! unsent, releasing sends them, bad scopes are 400 or 404 and change nothing, and every
//! change is in the audit log.

use super::*;

fn held(env_list: &[Value], key: &str) -> bool {
    env_list.iter().find(|d| d["operation_key"] == key).unwrap_or_else(|| panic!("no {key}"))["held"]
        .as_bool()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn holds_pause_what_they_name_for_whom_may_name_it() {
    for env in envs().await {
        let b = env.backend;
        let (t1, t2) = (env.api.tenant("one").await, env.api.tenant("two").await);
        for t in [&t1, &t2] {
            env.api.grant(t, "email", 10).await;
            env.api.submit(&t.key, &email("mail")).await.expect(CREATED);
        }
        let hold = |key: &str, body: Value| post("/v1/holds").bearer(key).json(&body);
        let release = |key: &str, body: Value| post("/v1/holds/release").bearer(key).json(&body);

        // The admin holds email for every tenant: both tenants' mail waits.
        let all = json!({"kind": "channel", "value": "email"});
        let v = env.api.send(hold(ADMIN_KEY, all.clone())).await.expect(OK);
        assert_eq!(v, json!({"changed": true, "deliveries": 2}), "{b}");
        assert_eq!(env.worker().run_once().await.unwrap().leased, 0, "{b}");
        for t in [&t1, &t2] {
            assert!(held(&env.api.list(&t.key, "").await, "mail"), "{b}");
        }
        // A tenant sees the hold over every tenant, and may not lift it.
        let v = env.api.send(get("/v1/holds").bearer(&t1.key)).await.expect(OK);
        assert_eq!(v["holds"][0]["kind"], "channel", "{b}: {v}");
        assert_eq!(v["holds"][0]["tenant"], Value::Null, "{b}: {v}");
        let v = env.api.send(release(&t1.key, all.clone())).await.expect(OK);
        assert_eq!(v["changed"], false, "{b}: a tenant's release is narrowed to itself");
        assert_eq!(env.worker().run_once().await.unwrap().leased, 0, "{b}: still held");
        let v = env.api.send(release(ADMIN_KEY, all)).await.expect(OK);
        assert_eq!(v, json!({"changed": true, "deliveries": 2}), "{b}");
        assert_eq!(env.worker().run_once().await.unwrap().sent, 2, "{b}");

        // A tenant holds its own: the other's mail goes on.
        for t in [&t1, &t2] {
            env.api.submit(&t.key, &email("mail-2")).await.expect(CREATED);
        }
        let mine = json!({"kind": "destination", "value": "smtp"});
        let v = env.api.send(hold(&t1.key, mine.clone())).await.expect(OK);
        assert_eq!(v, json!({"changed": true, "deliveries": 1}), "{b}");
        let v = env.api.send(get("/v1/holds").bearer(&t2.key)).await.expect(OK);
        assert_eq!(v, json!({"holds": []}), "{b}: the other tenant does not see it");
        let v = env.api.send(get("/v1/holds").bearer(ADMIN_KEY)).await.expect(OK);
        assert_eq!(v["holds"][0]["tenant"], t1.id, "{b}: {v}");
        assert!(v["holds"][0]["actor"].as_str().unwrap().starts_with("tenant:"), "{b}: {v}");
        assert_eq!(env.worker().run_once().await.unwrap().sent, 1, "{b}: the other's");
        assert!(held(&env.api.list(&t1.key, "").await, "mail-2"), "{b}");
        // Its own tenant hold; another tenant's is a 404.
        let own = json!({"kind": "tenant", "value": t1.id});
        env.api.send(hold(&t1.key, own)).await.expect(OK);
        let theirs = json!({"kind": "tenant", "value": t2.id});
        env.api.send(hold(&t1.key, theirs)).await.expect_error(NOT_FOUND, "not_found");
        let named = json!({"kind": "channel", "value": "email", "tenant": t2.id});
        env.api.send(hold(&t1.key, named)).await.expect_error(NOT_FOUND, "not_found");

        // Bad scopes change nothing.
        for bad in [
            json!({"kind": "host", "value": "x"}),
            json!({"kind": "destination", "value": "a/b"}),
            json!({"kind": "channel", "value": ""}),
            json!({"kind": "channel", "value": "email", "extra": 1}),
            json!({"kind": "channel"}),
        ] {
            env.api.send(hold(ADMIN_KEY, bad)).await.expect_error(BAD, "invalid_request");
        }
        let unknown = json!({"kind": "tenant", "value": uuid::Uuid::now_v7()});
        env.api.send(hold(ADMIN_KEY, unknown)).await.expect_error(NOT_FOUND, "not_found");
        env.api.send(get("/v1/holds")).await.expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
        let v = env.api.send(get("/v1/holds").bearer(ADMIN_KEY)).await.expect(OK);
        assert_eq!(v["holds"].as_array().unwrap().len(), 2, "{b}: {v}");

        // Every change is logged, with what it held.
        let log = env.api.send(get("/v1/audit").bearer(ADMIN_KEY)).await.expect(OK);
        let actions: Vec<&str> = log["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["action"].as_str().filter(|a| a.starts_with("hold")))
            .collect();
        assert_eq!(actions, ["hold", "hold", "hold_release", "hold"], "{b}: {log}");
    }
}
