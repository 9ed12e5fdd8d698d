//! Grants, secret rotation, the system routes and the OpenAPI document.

use super::*;

/// Grants and webhook-secret rotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grants_and_secret_rotation() {
    for env in envs().await {
        let b = env.backend;
        let api = &env.api;
        let t = api.tenant("acme").await;
        let grant = |tenant: &str, quota_key: &str| {
            post(format!("/v1/tenants/{tenant}/quotas/{quota_key}/grant")).bearer(ADMIN_KEY)
        };
        for amount in [
            json!(0),
            json!(-1),
            json!(1.5),
            json!("5"),
            json!(null),
            json!(herald_core::limits::GRANT_MAX + 1),
        ] {
            api.send(grant(&t.id, "email").json(&json!({"amount": amount})))
                .await
                .expect_error(BAD, "invalid_request");
        }
        api.send(grant(&t.id, "email").json(&json!({}))).await.expect_error(BAD, "invalid_request");
        api.send(grant(&t.id, &"q".repeat(101)).json(&json!({"amount": 1})))
            .await
            .expect_error(BAD, "invalid_request");
        api.send(grant(&t.id, "email").header("idempotency-key", "").json(&json!({"amount": 1})))
            .await
            .expect_error(BAD, "invalid_request");
        api.send(
            grant(&t.id, "email")
                .header("idempotency-key", &"k".repeat(256))
                .json(&json!({"amount": 1})),
        )
        .await
        .expect_error(BAD, "invalid_request");
        assert!(api.quotas(&t.key).await.is_empty(), "{b}: refused grants opened nothing");

        let v = api
            .send(
                grant(&t.id, "email").header("idempotency-key", "g-1").json(&json!({"amount": 5})),
            )
            .await
            .expect(OK);
        assert_eq!(
            v,
            json!({"applied": true, "quota_key": "email", "granted": 5, "available": 5, "reserved": 0, "spent": 0}),
            "{b}: first grant"
        );
        let v = api
            .send(
                grant(&t.id, "email").header("idempotency-key", "g-1").json(&json!({"amount": 5})),
            )
            .await
            .expect(OK);
        assert_eq!(v["applied"], false, "{b}: retried grant: {v}");
        assert_eq!(v["granted"], 5, "{b}: retried grant counted once: {v}");
        let v = api
            .send(
                grant(&t.id, "email").header("idempotency-key", "g-2").json(&json!({"amount": 3})),
            )
            .await
            .expect(OK);
        assert_eq!(
            (v["applied"].clone(), v["granted"].clone()),
            (json!(true), json!(8)),
            "{b}: another key"
        );
        for _ in 0..2 {
            assert_eq!(
                api.grant(&t, "email", 1).await["applied"],
                true,
                "{b}: grants without a key add up"
            );
        }
        assert_eq!(api.quota(&t.key, "email").await, Some((10, 10, 0, 0)), "{b}: granted");
        let quotas = api.quotas(&t.key).await;
        let mut fields: Vec<_> = quotas[0].as_object().unwrap().keys().cloned().collect();
        fields.sort();
        assert_eq!(
            fields,
            ["available", "granted", "quota_key", "reserved", "spent"],
            "{b}: quota fields"
        );

        let random = uuid::Uuid::now_v7().to_string();
        for tenant in [random.as_str(), "nope"] {
            api.send(grant(tenant, "email").json(&json!({"amount": 1})))
                .await
                .expect_error(NOT_FOUND, "not_found");
            api.send(post(format!("/v1/tenants/{tenant}/webhook-secret/rotate")).bearer(ADMIN_KEY))
                .await
                .expect_error(NOT_FOUND, "not_found");
        }

        assert!(t.webhook_secret.starts_with("whsec_"), "{b}: secret {}", t.webhook_secret);
        let mut secrets = BTreeSet::from([t.webhook_secret.clone()]);
        for _ in 0..2 {
            let v = api
                .send(post(format!("/v1/tenants/{}/webhook-secret/rotate", t.id)).bearer(ADMIN_KEY))
                .await
                .expect(OK);
            assert_eq!(v.as_object().unwrap().len(), 1, "{b}: rotate answer {v}");
            let secret =
                v["webhook_secret"].as_str().unwrap_or_else(|| panic!("{b}: {v}")).to_string();
            assert!(secret.starts_with("whsec_") && secret.len() > 40, "{b}: secret {secret}");
            assert!(secrets.insert(secret), "{b}: a rotated secret must be new");
        }
        // Tenant names are unique; a new tenant gets a key and a secret of its own.
        api.send(post("/v1/tenants").bearer(ADMIN_KEY).json(&json!({"name": "acme"})))
            .await
            .expect_error(StatusCode::CONFLICT, "conflict");
        let u = api.tenant("umbrella").await;
        assert_ne!((u.id.as_str(), u.key.as_str()), (t.id.as_str(), t.key.as_str()), "{b}");
        assert_eq!(u.name, "umbrella", "{b}");
        assert!(!secrets.contains(&u.webhook_secret), "{b}: secrets are per tenant");
        assert!(uuid::Uuid::try_parse(&u.id).is_ok(), "{b}: tenant id {}", u.id);
    }
}

/// /healthz, /readyz, /metrics (with and without a token) and /openapi.json; the OpenAPI
/// document lists exactly the routes the router serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn system_routes_and_the_openapi_document() {
    for env in envs().await {
        let b = env.backend;
        let api = &env.api;
        assert_eq!(api.send(get("/healthz")).await.expect(OK)["status"], "ok", "{b}: healthz");
        assert_eq!(api.send(get("/readyz")).await.expect(OK)["status"], "ready", "{b}: readyz");

        let t = api.tenant("acme").await;
        api.grant(&t, "email", 1).await;
        api.submit(&t.key, &email("m1")).await.expect(CREATED);
        api.submit(&t.key, &email("m1")).await.expect(OK);
        api.submit(&t.key, &email("m2"))
            .await
            .expect_error(StatusCode::PAYMENT_REQUIRED, "quota_exhausted");
        let m = api.send(get("/metrics")).await;
        assert_eq!(m.status, OK, "{b}: metrics {}", m.text());
        let ct = m.headers.get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("");
        assert!(ct.starts_with("text/plain"), "{b}: metrics content type {ct}");
        let text = m.text();
        for result in ["created", "duplicate", "quota_exhausted"] {
            assert!(
                text.lines().any(|l| l.starts_with("herald_submits_total")
                    && l.contains(&format!("result=\"{result}\""))),
                "{b}: herald_submits_total{{result={result:?}}} missing from:\n{text}"
            );
        }

        let guarded = env.api_with(&config(Some(ADMIN_KEY), Some("t")));
        for auth in [None, Some("Bearer wrong"), Some("Bearer "), Some("t"), Some("Bearer tt")] {
            let mut r = get("/metrics");
            if let Some(a) = auth {
                r = r.header_value(
                    axum::http::header::AUTHORIZATION,
                    HeaderValue::from_str(a).unwrap(),
                );
            }
            guarded.send(r).await.expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
        }
        let m = guarded.send(get("/metrics").bearer("t")).await;
        assert_eq!(m.status, OK, "{b}: metrics with the token: {}", m.text());
        assert!(m.text().contains("herald_submits_total"), "{b}: metrics with the token");
        // The token guards metrics only.
        guarded.send(get("/healthz")).await.expect(OK);

        let doc = api.send(get("/openapi.json")).await.expect(OK);
        assert!(
            doc["openapi"].as_str().is_some_and(|v| v.starts_with('3')),
            "{b}: OpenAPI 3: {}",
            doc["openapi"]
        );
        let mut documented = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap_or_else(|| panic!("{b}: no paths")) {
            for method in item.as_object().unwrap().keys() {
                if ["get", "post", "put", "patch", "delete", "head", "options", "trace"]
                    .contains(&method.as_str())
                {
                    documented.insert((method.to_uppercase(), path.clone()));
                }
            }
        }
        let expected: BTreeSet<(String, String)> =
            ROUTES.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
        assert_eq!(documented, expected, "{b}: the OpenAPI document and the routes differ");

        // The router serves every listed route (no fallback 404, no 405) and no other
        // method on those paths.
        let fill = |p: &str| {
            p.replace("{id}", &uuid::Uuid::now_v7().to_string())
                .replace("{tenant}", &t.id)
                .replace("{key_id}", "0123456789abcdef")
                .replace("{quota_key}", "email")
        };
        let paths: BTreeSet<&str> = ROUTES.iter().map(|(_, p)| *p).collect();
        for path in paths {
            for method in [Method::GET, Method::POST, Method::PUT, Method::PATCH, Method::DELETE] {
                let listed = ROUTES.contains(&(method.as_str(), path));
                let resp = api.send(req(method.clone(), fill(path))).await;
                if listed {
                    assert!(
                        ![NOT_FOUND, StatusCode::METHOD_NOT_ALLOWED].contains(&resp.status),
                        "{b}: {method} {path} is documented but not served: {} {}",
                        resp.status,
                        resp.text()
                    );
                } else {
                    resp.expect_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
                }
            }
        }
    }
}

/// Sets an account's granted (and available) total directly, on stripe 0 with the others
/// emptied, to reach the limits without millions of grants.
async fn set_granted(env: &Env, tenant: &str, quota_key: &str, granted: i64) {
    let tenant = uuid::Uuid::try_parse(tenant).unwrap();
    let store = env.herald.store();
    let done = match (store.sqlite_pool(), store.postgres_pool(), store.mysql_pool()) {
        (_, _, Some(pool)) => herald::sqlx::query(
            "UPDATE quota_accounts SET granted = IF(stripe = 0, ?, 0),
                 available = IF(stripe = 0, ?, 0)
             WHERE tenant_id = ? AND quota_key = ?",
        )
        .bind(granted)
        .bind(granted)
        .bind(tenant)
        .bind(quota_key)
        .execute(pool)
        .await
        .unwrap()
        .rows_affected(),
        (Some(pool), _, _) => herald::sqlx::query(
            "UPDATE quota_accounts SET granted = ?1, available = ?1
             WHERE tenant_id = ?2 AND quota_key = ?3 AND stripe = 0",
        )
        .bind(granted)
        .bind(tenant)
        .bind(quota_key)
        .execute(pool)
        .await
        .unwrap()
        .rows_affected(),
        (_, Some(pool), _) => herald::sqlx::query(
            "UPDATE quota_accounts SET granted = CASE WHEN stripe = 0 THEN $1 ELSE 0 END,
                 available = CASE WHEN stripe = 0 THEN $1 ELSE 0 END
             WHERE tenant_id = $2 AND quota_key = $3",
        )
        .bind(granted)
        .bind(tenant)
        .bind(quota_key)
        .execute(pool)
        .await
        .unwrap()
        .rows_affected(),
        _ => unreachable!("a store has a pool"),
    };
    assert!(done >= 1, "{}: set granted", env.backend);
}

/// A grant past the account's limit (or i64's) is a 409 and a grant key reused with
/// another amount a 422, like a delivery's; neither changes the account or the journal.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn grants_past_the_limit_and_reused_grant_keys_change_nothing() {
    use herald_core::limits::{GRANT_MAX, QUOTA_GRANTED_MAX};
    for env in envs().await {
        let b = env.backend;
        let api = &env.api;
        let t = api.tenant("acme").await;
        let grant = |quota_key: &str, key: Option<&str>, amount: Value| {
            let mut r = post(format!("/v1/tenants/{}/quotas/{quota_key}/grant", t.id));
            if let Some(k) = key {
                r = r.header("idempotency-key", k);
            }
            r.bearer(ADMIN_KEY).json(&json!({"amount": amount}))
        };

        // The same key: the same amount is the first grant's answer, another is a 422.
        let first = api.send(grant("email", Some("g-1"), json!(5))).await.expect(OK);
        assert_eq!((first["applied"].clone(), first["granted"].clone()), (json!(true), json!(5)));
        for amount in [7, 4, GRANT_MAX] {
            let r = api.send(grant("email", Some("g-1"), json!(amount))).await;
            r.expect_error(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
            let message = r.json()["error"]["message"].as_str().unwrap().to_string();
            assert!(message.contains("already granted 5"), "{b}: {message}");
        }
        assert_eq!(api.quota(&t.key, "email").await, Some((5, 5, 0, 0)), "{b}: reuse changed");
        let again = api.send(grant("email", Some("g-1"), json!(5))).await.expect(OK);
        assert_eq!(again["applied"], false, "{b}: {again}");
        assert_eq!(again["granted"], 5, "{b}: {again}");
        // A key belongs to its account: on another quota key it is a grant of its own.
        let sms = api.send(grant("sms", Some("g-1"), json!(7))).await.expect(OK);
        assert_eq!((sms["applied"].clone(), sms["granted"].clone()), (json!(true), json!(7)));

        // Up to the limit exactly, then not one unit more, with a key or without.
        set_granted(&env, &t.id, "email", QUOTA_GRANTED_MAX - 10).await;
        let v = api.send(grant("email", None, json!(10))).await.expect(OK);
        assert_eq!(v["granted"], QUOTA_GRANTED_MAX, "{b}: to the limit: {v}");
        for key in [None, Some("past")] {
            let r = api.send(grant("email", key, json!(1))).await;
            r.expect_error(StatusCode::CONFLICT, "conflict");
            let message = r.json()["error"]["message"].as_str().unwrap().to_string();
            assert!(message.contains(&QUOTA_GRANTED_MAX.to_string()), "{b}: {message}");
        }
        assert_eq!(
            api.quota(&t.key, "email").await,
            Some((QUOTA_GRANTED_MAX, QUOTA_GRANTED_MAX, 0, 0)),
            "{b}: a refused grant changed the account"
        );
        // Where i64 itself would overflow: still a 409, never a 500.
        set_granted(&env, &t.id, "email", i64::MAX - 1).await;
        api.send(grant("email", None, json!(GRANT_MAX)))
            .await
            .expect_error(StatusCode::CONFLICT, "conflict");
        assert_eq!(api.quota(&t.key, "email").await, Some((i64::MAX - 1, i64::MAX - 1, 0, 0)));
        // The refused grant under "past" left no journal row: once there is room, that
        // key grants any amount.
        set_granted(&env, &t.id, "email", 0).await;
        let v = api.send(grant("email", Some("past"), json!(3))).await.expect(OK);
        assert_eq!((v["applied"].clone(), v["granted"].clone()), (json!(true), json!(3)), "{b}");
    }
}

/// JSON Schema's `integer` is any number without a fractional part: `2120.0` and `1e3`
/// are integers like `2120`, a fraction is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn integral_numbers_written_as_floats_are_integers() {
    for env in envs().await {
        let b = env.backend;
        let api = &env.api;
        let t = api.tenant("acme").await;
        let grant = |amount: Value| {
            post(format!("/v1/tenants/{}/quotas/email/grant", t.id))
                .bearer(ADMIN_KEY)
                .json(&json!({"amount": amount}))
        };
        // serde_json reads these as floats.
        let v = api.send(grant(serde_json::from_str("2120.0").unwrap())).await.expect(OK);
        assert_eq!(v["granted"], 2120, "{b}: {v}");
        let v = api.send(grant(serde_json::from_str("1e3").unwrap())).await.expect(OK);
        assert_eq!(v["granted"], 3120, "{b}: {v}");
        for amount in ["1.5", "1e300", "-0.5"] {
            api.send(grant(serde_json::from_str(amount).unwrap()))
                .await
                .expect_error(BAD, "invalid_request");
        }
        let mut body = email("floats");
        body["cost"] = serde_json::from_str("2.0").unwrap();
        body["max_attempts"] = serde_json::from_str("3.0").unwrap();
        let v = api.submit(&t.key, &body).await.expect(CREATED);
        assert_eq!((v["cost"].clone(), v["max_attempts"].clone()), (json!(2), json!(3)), "{b}");
        for (field, value) in [("cost", "0.5"), ("max_attempts", "2.5"), ("max_attempts", "1e10")] {
            let mut body = email("fractions");
            body[field] = serde_json::from_str(value).unwrap();
            api.submit(&t.key, &body).await.expect_error(BAD, "invalid_request");
        }
        let count = |max: &str| {
            let max: Value = serde_json::from_str(max).unwrap();
            post("/v1/deliveries/cancel").bearer(&t.key).json(&json!({"max": max, "dry_run": true}))
        };
        let v = api.send(count("353.0")).await.expect(OK);
        assert_eq!(v["matched"], 1, "{b}: {v}");
        api.send(count("0.5")).await.expect_error(BAD, "invalid_request");
    }
}
