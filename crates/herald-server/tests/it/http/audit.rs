//! The audit log (issue 37, defect 7): every action of consequence on the API and the
//! dashboard leaves an entry — who (the admin, a tenant's key, nobody for a failed
//! sign-in), on which tenant, what, to what, how many, from where — and `GET /v1/audit`
//! reads it: the admin every tenant's, a tenant's key its own tenant's only.

use crate::common::*;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

async fn log(api: &Api, key: &str, query: &str) -> Vec<Value> {
    let v = api.send(get(format!("/v1/audit{query}")).bearer(key)).await.expect(StatusCode::OK);
    v["entries"].as_array().unwrap().clone()
}

fn summary(entries: &[Value]) -> Vec<(String, String)> {
    entries
        .iter()
        .map(|e| {
            (e["actor"].as_str().unwrap().to_string(), e["action"].as_str().unwrap().to_string())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn actions_are_logged_and_read_by_who_may_see_them() {
    for env in envs().await {
        let (b, api) = (env.backend, &env.api);
        let a = api.tenant("acme").await;
        let other = api.tenant("globex").await;
        api.grant(&a, "email", 10).await;
        let key = api
            .send(post(format!("/v1/tenants/{}/keys", a.id)).bearer(ADMIN_KEY))
            .await
            .expect(StatusCode::CREATED);
        let key_id = key["key_id"].as_str().unwrap().to_string();
        let revoke = req(Method::DELETE, format!("/v1/tenants/{}/keys/{key_id}", a.id));
        api.send(revoke.bearer(ADMIN_KEY)).await.expect(StatusCode::OK);
        let created = api.submit(&a.key, &email("audit-1")).await.expect(StatusCode::CREATED);
        let id = created["id"].as_str().unwrap().to_string();
        api.send(post(format!("/v1/deliveries/{id}/cancel")).bearer(&a.key))
            .await
            .expect(StatusCode::OK);
        let dry = json!({"state": "cancelled", "dry_run": true});
        api.send(post("/v1/deliveries/replay").bearer(&a.key).json(&dry))
            .await
            .expect(StatusCode::OK);
        let bulk = json!({"state": "cancelled"});
        api.send(post("/v1/deliveries/replay").bearer(&a.key).json(&bulk))
            .await
            .expect(StatusCode::OK);
        let wrong = format!("hk_{}_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", &a.key[3..19]);
        let failed = api.send(post("/ui/api/session").json(&json!({"key": wrong}))).await;
        failed.expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
        api.send(post("/ui/api/session").json(&json!({"key": a.key}))).await.expect(StatusCode::OK);

        let all = log(api, ADMIN_KEY, "").await;
        let expected = [
            ("tenant", "sign_in"),
            ("anonymous", "sign_in_failed"),
            ("tenant", "bulk_replay"),
            ("tenant", "cancel"),
            ("admin", "key_revoke"),
            ("admin", "key_create"),
            ("admin", "grant"),
            ("admin", "tenant_create"),
            ("admin", "tenant_create"),
        ];
        let expected: Vec<(String, String)> =
            expected.iter().map(|(x, y)| (x.to_string(), y.to_string())).collect();
        assert_eq!(summary(&all), expected, "{b}: {all:?}");
        let by_action = |action: &str| all.iter().find(|e| e["action"] == action).unwrap().clone();
        let cancel = by_action("cancel");
        assert_eq!(cancel["tenant"], a.id.as_str(), "{b}");
        assert_eq!(cancel["target"], id.as_str(), "{b}");
        assert_eq!(cancel["key_id"], &a.key[3..19], "{b}: the key that acted");
        assert!(cancel["at"].as_str().is_some_and(is_rfc3339), "{b}: {cancel}");
        assert_eq!(by_action("bulk_replay")["count"], 1, "{b}");
        let grant = by_action("grant");
        assert_eq!((grant["target"].clone(), grant["count"].clone()), (json!("email"), json!(10)));
        assert_eq!(by_action("key_revoke")["target"], key_id.as_str(), "{b}");
        let failed = by_action("sign_in_failed");
        assert_eq!(failed["key_id"], &a.key[3..19], "{b}: the key id it named");
        assert_eq!(failed["tenant"], Value::Null, "{b}");
        assert!(!format!("{all:?}").contains(&a.key), "{b}: no secret in the log");

        // A tenant's key reads its own tenant's entries only; the admin can page and filter.
        let own = log(api, &a.key, "").await;
        assert!(own.iter().all(|e| e["tenant"] == a.id.as_str()), "{b}: {own:?}");
        assert_eq!(own.len(), 7, "{b}: {own:?}");
        let r = api.send(get(format!("/v1/audit?tenant={}", other.id)).bearer(&a.key)).await;
        r.expect_error(StatusCode::NOT_FOUND, "not_found");
        let theirs = log(api, ADMIN_KEY, &format!("?tenant={}", other.id)).await;
        assert_eq!(summary(&theirs), [("admin".to_string(), "tenant_create".to_string())]);
        let page = log(api, ADMIN_KEY, &format!("?limit=2&before={}", all[1]["id"])).await;
        assert_eq!(summary(&page), expected[2..4].to_vec(), "{b}");
        for bad in ["?limit=0", "?limit=501", "?before=x", "?other=1"] {
            let r = api.send(get(format!("/v1/audit{bad}")).bearer(ADMIN_KEY)).await;
            assert_eq!(r.status, StatusCode::BAD_REQUEST, "{b}: {bad}");
        }
        let r = api.send(get("/v1/audit?tenant=nope").bearer(ADMIN_KEY)).await;
        r.expect_error(StatusCode::NOT_FOUND, "not_found");
        let r = api.send(get("/v1/audit").bearer("hk_nope")).await;
        r.expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
    }
}
