//! The HTTP API through the real router (SPEC.md "HTTP API", guarantees 1, 2, 10, 11) on
//! every backend: every route, every error code, JSON errors for bad input, tenant walls.

use crate::common::*;
use axum::http::{HeaderValue, Method, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeSet;

const BAD: StatusCode = StatusCode::BAD_REQUEST;
const OK: StatusCode = StatusCode::OK;
const CREATED: StatusCode = StatusCode::CREATED;
const NOT_FOUND: StatusCode = StatusCode::NOT_FOUND;

/// Every route the router serves, as (method, OpenAPI path). The OpenAPI document must
/// list exactly these, and the router must answer each of them.
const ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/deliveries"),
    ("GET", "/v1/deliveries"),
    ("GET", "/v1/deliveries/{id}"),
    ("GET", "/v1/deliveries/{id}/attempts"),
    ("POST", "/v1/deliveries/{id}/replay"),
    ("POST", "/v1/deliveries/{id}/cancel"),
    ("GET", "/v1/quotas"),
    ("POST", "/v1/tenants"),
    ("POST", "/v1/tenants/{tenant}/keys"),
    ("DELETE", "/v1/tenants/{tenant}/keys/{key_id}"),
    ("POST", "/v1/tenants/{tenant}/webhook-secret/rotate"),
    ("POST", "/v1/tenants/{tenant}/quotas/{quota_key}/grant"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
];

/// (what, Idempotency-Key header, body, status, error code or `None` for a duplicate).
type KeyCase = (&'static str, Option<&'static str>, Value, StatusCode, Option<&'static str>);

/// (what, content type, body, status, error code).
type BodyCase<N> = (N, Option<&'static str>, Vec<u8>, StatusCode, &'static str);

fn id_of(v: &Value) -> String {
    v["id"].as_str().unwrap_or_else(|| panic!("no id in {v}")).to_string()
}

fn ids(list: &[Value]) -> Vec<String> {
    list.iter().map(id_of).collect()
}

/// Guarantee 1 over HTTP: 64 concurrent submits under one Idempotency-Key create one
/// delivery and one reservation; every answer names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 8)]
async fn concurrent_submits_of_one_idempotency_key_claim_once() {
    const N: usize = 64;
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        env.api.grant(&t, "email", 10).await;
        let body = json!({"channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "t"}});
        let mut tasks = Vec::new();
        for _ in 0..N {
            let (api, key, body) = (env.api.clone(), t.key.clone(), body.clone());
            tasks.push(tokio::spawn(async move {
                api.send(
                    post("/v1/deliveries")
                        .bearer(&key)
                        .header("idempotency-key", "order-42")
                        .json(&body),
                )
                .await
            }));
        }
        let mut created = 0;
        let mut duplicates = 0;
        let mut seen = BTreeSet::new();
        for task in tasks {
            let r = task.await.unwrap();
            let v = r.json();
            match r.status {
                CREATED => {
                    created += 1;
                    assert_eq!(v["duplicate"], false, "{b}: the 201 says duplicate: {v}");
                }
                OK => {
                    duplicates += 1;
                    assert_eq!(v["duplicate"], true, "{b}: a 200 says not duplicate: {v}");
                }
                other => panic!("{b}: concurrent submit answered {other}: {v}"),
            }
            assert_delivery(b, &v, true);
            assert_eq!(v["operation_key"], "order-42", "{b}: the header stands for operation_key");
            seen.insert(id_of(&v));
        }
        assert_eq!((created, duplicates), (1, N - 1), "{b}: one 201 and the rest 200");
        assert_eq!(seen.len(), 1, "{b}: every answer names the same delivery: {seen:?}");
        let listed = env.api.list(&t.key, "").await;
        assert_eq!(ids(&listed), seen.into_iter().collect::<Vec<_>>(), "{b}: one row");
        assert_eq!(
            env.api.quota(&t.key, "email").await,
            Some((10, 9, 1, 0)),
            "{b}: one reservation"
        );
    }
}

/// Guarantee 1: a repeat with another fingerprint is 422 and changes nothing; the header
/// and the body key must agree; the fingerprint is taken after defaults; a retry of a
/// submit that succeeded returns it even when quota has run out since.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reused_keys_and_conflicting_keys() {
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        env.api.grant(&t, "email", 1).await;
        let first = env
            .api
            .send(post("/v1/deliveries").bearer(&t.key).header("idempotency-key", "k1").json(
                &json!({
                    "channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}
                }),
            ))
            .await
            .expect(CREATED);
        let id = id_of(&first);

        let cases: &[KeyCase] = &[
            (
                "another payload under the header key",
                Some("k1"),
                json!({"channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "two"}}),
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("idempotency_key_reused"),
            ),
            (
                "another recipient under the body key",
                None,
                json!({"operation_key": "k1", "channel": "email", "to": "bob@example.com", "payload": {"subject": "s", "text": "one"}}),
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("idempotency_key_reused"),
            ),
            (
                "another cost under the key",
                Some("k1"),
                json!({"channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}, "cost": 0}),
                StatusCode::UNPROCESSABLE_ENTITY,
                Some("idempotency_key_reused"),
            ),
            (
                "body key and a different header key",
                Some("k2"),
                json!({"operation_key": "k1", "channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}}),
                BAD,
                Some("invalid_request"),
            ),
            (
                "no key at all",
                None,
                json!({"channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}}),
                BAD,
                Some("invalid_request"),
            ),
            (
                "an empty header key",
                Some(""),
                json!({"channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}}),
                BAD,
                Some("invalid_request"),
            ),
            (
                "the same key in header and body: a duplicate",
                Some("k1"),
                json!({"operation_key": "k1", "channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}}),
                OK,
                None,
            ),
            (
                "explicit defaults have the same fingerprint (quota exhausted since: still 200)",
                Some("k1"),
                json!({"channel": "email", "to": "ada@example.com", "payload": {"subject": "s", "text": "one"}, "quota_key": "email", "cost": 1, "max_attempts": 8}),
                OK,
                None,
            ),
        ];
        for (name, header, body, status, code) in cases {
            let mut r = post("/v1/deliveries").bearer(&t.key);
            if let Some(h) = header {
                r = r.header("idempotency-key", h);
            }
            let resp = env.api.send(r.json(body)).await;
            let what = format!("{b}: {name}");
            match code {
                Some(code) => {
                    assert_eq!(resp.status, *status, "{what}: {}", resp.text());
                    assert_eq!(error_code(&what, &resp.json()), *code, "{what}");
                }
                None => {
                    let v = resp.expect(*status);
                    assert_delivery(&what, &v, true);
                    assert_eq!(id_of(&v), id, "{what}: the same delivery");
                    assert_eq!(v["duplicate"], true, "{what}");
                }
            }
        }
        let now = env.api.send(get(format!("/v1/deliveries/{id}")).bearer(&t.key)).await.expect(OK);
        assert_delivery(b, &now, false);
        assert_eq!(now["to"], "ada@example.com", "{b}: a rejected reuse changed nothing");
        assert_eq!(now["cost"], 1, "{b}: a rejected reuse changed nothing");
        assert_eq!(env.api.list(&t.key, "").await.len(), 1, "{b}: nothing else was created");
        assert_eq!(
            env.api.quota(&t.key, "email").await,
            Some((1, 0, 1, 0)),
            "{b}: one reservation"
        );
    }
}

/// Guarantee 2 over HTTP: no quota, no row, no movement.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exhausted_quota_is_402_and_leaves_nothing() {
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        // No account at all: 402, and still no account.
        env.api
            .submit(&t.key, &email("no-account"))
            .await
            .expect_error(StatusCode::PAYMENT_REQUIRED, "quota_exhausted");
        assert!(env.api.quotas(&t.key).await.is_empty(), "{b}: a refused submit opened no account");
        // cost 0 needs no account.
        let mut free = email("free");
        free["cost"] = json!(0);
        let v = env.api.submit(&t.key, &free).await.expect(CREATED);
        assert_eq!(v["cost"], 0, "{b}: free delivery");
        assert!(env.api.quotas(&t.key).await.is_empty(), "{b}: cost 0 reserves nothing");

        env.api.grant(&t, "email", 2).await;
        let mut big = email("too-big");
        big["cost"] = json!(3);
        env.api
            .submit(&t.key, &big)
            .await
            .expect_error(StatusCode::PAYMENT_REQUIRED, "quota_exhausted");
        env.api.submit(&t.key, &email("a")).await.expect(CREATED);
        env.api.submit(&t.key, &email("b")).await.expect(CREATED);
        let before = env.api.quotas(&t.key).await;
        env.api
            .submit(&t.key, &email("c"))
            .await
            .expect_error(StatusCode::PAYMENT_REQUIRED, "quota_exhausted");
        let mut other_key = email("d");
        other_key["quota_key"] = json!("premium");
        env.api
            .submit(&t.key, &other_key)
            .await
            .expect_error(StatusCode::PAYMENT_REQUIRED, "quota_exhausted");
        assert_eq!(env.api.quotas(&t.key).await, before, "{b}: refused submits moved no quota");
        assert_eq!(env.api.quota(&t.key, "email").await, Some((2, 0, 2, 0)), "{b}: ledger");
        let keys: BTreeSet<String> = env
            .api
            .list(&t.key, "")
            .await
            .iter()
            .map(|d| d["operation_key"].as_str().unwrap().to_string())
            .collect();
        let expected: BTreeSet<String> = ["free", "a", "b"].map(String::from).into();
        assert_eq!(keys, expected, "{b}: no row for refused submits");
        // The refused key is still free: after a grant it is a 201, not a duplicate.
        env.api.grant(&t, "email", 1).await;
        env.api.submit(&t.key, &email("c")).await.expect(CREATED);
    }
}

/// Guarantee 11: another tenant's delivery is a 404 on every route, never a 403, and the
/// attempt changes nothing; malformed and unknown ids are 404 too.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tenants_are_walled_off() {
    for env in envs().await {
        let b = env.backend;
        let alice = env.api.tenant("alice").await;
        let bob = env.api.tenant("bob").await;
        env.api.grant(&alice, "email", 5).await;
        env.api.grant(&bob, "sms", 5).await;
        let id = id_of(&env.api.submit(&alice.key, &email("a1")).await.expect(CREATED));
        let random = uuid::Uuid::now_v7().to_string();
        for target in [
            id.as_str(),
            "not-a-uuid",
            "123",
            random.as_str(),
            "00000000-0000-0000-0000-000000000000",
        ] {
            for (method, suffix) in [
                (Method::GET, ""),
                (Method::GET, "/attempts"),
                (Method::POST, "/replay"),
                (Method::POST, "/cancel"),
            ] {
                let uri = format!("/v1/deliveries/{target}{suffix}");
                env.api
                    .send(req(method.clone(), &uri).bearer(&bob.key))
                    .await
                    .expect_error(NOT_FOUND, "not_found");
                if target != id {
                    env.api
                        .send(req(method, &uri).bearer(&alice.key))
                        .await
                        .expect_error(NOT_FOUND, "not_found");
                }
            }
        }
        assert!(env.api.list(&bob.key, "").await.is_empty(), "{b}: bob lists none of alice's");
        let bob_quotas = env.api.quotas(&bob.key).await;
        assert_eq!(bob_quotas.len(), 1, "{b}: bob sees only his own account: {bob_quotas:?}");
        assert_eq!(bob_quotas[0]["quota_key"], "sms", "{b}");
        let v =
            env.api.send(get(format!("/v1/deliveries/{id}")).bearer(&alice.key)).await.expect(OK);
        assert_eq!(v["state"], "pending", "{b}: bob's cancel did nothing");
        assert_eq!(v["tenant"], alice.id.as_str(), "{b}: tenant field");
        let attempts = env
            .api
            .send(get(format!("/v1/deliveries/{id}/attempts")).bearer(&alice.key))
            .await
            .expect(OK);
        assert_eq!(attempts, json!({"attempts": []}), "{b}: no attempts yet");
        // The same operation key in another tenant is another delivery.
        env.api.grant(&bob, "email", 1).await;
        let theirs = env.api.submit(&bob.key, &email("a1")).await.expect(CREATED);
        assert_ne!(id_of(&theirs), id, "{b}: identities are per tenant");
    }
}

/// Authentication and authorisation on every route that needs them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn keys_authenticate_and_admin_routes_need_the_admin_key() {
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        let other = env.api.tenant("other").await;
        env.api.grant(&t, "email", 5).await;
        let id = id_of(&env.api.submit(&t.key, &email("x")).await.expect(CREATED));
        let key_id = &t.key[3..19];
        assert!(
            t.key.starts_with("hk_") && t.key.as_bytes()[19] == b'_',
            "{b}: key shape {}",
            t.key
        );

        let tenant_routes = |id: &str| {
            vec![
                post("/v1/deliveries").json(&email("y")),
                get("/v1/deliveries"),
                get(format!("/v1/deliveries/{id}")),
                get(format!("/v1/deliveries/{id}/attempts")),
                post(format!("/v1/deliveries/{id}/replay")),
                post(format!("/v1/deliveries/{id}/cancel")),
                get("/v1/quotas"),
            ]
        };
        let admin_routes = |tenant: &str, key_id: &str| {
            vec![
                post("/v1/tenants").json(&json!({"name": "new"})),
                post(format!("/v1/tenants/{tenant}/keys")),
                req(Method::DELETE, format!("/v1/tenants/{tenant}/keys/{key_id}")),
                post(format!("/v1/tenants/{tenant}/webhook-secret/rotate")),
                post(format!("/v1/tenants/{tenant}/quotas/email/grant"))
                    .json(&json!({"amount": 1})),
            ]
        };
        let wrong_secret = format!("hk_{key_id}_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
        let unknown_id =
            "hk_0123456789abcdef_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA".to_string();
        let bad_auth: Vec<(&str, Option<String>)> = vec![
            ("no header", None),
            ("wrong secret", Some(format!("Bearer {wrong_secret}"))),
            ("unknown key id", Some(format!("Bearer {unknown_id}"))),
            ("garbage", Some("Bearer nope".into())),
            ("empty bearer", Some("Bearer ".into())),
            ("basic auth", Some("Basic YWRtaW46c2VjcmV0".into())),
            ("key without scheme", Some(t.key.clone())),
            ("admin key on tenant routes", Some(format!("Bearer {ADMIN_KEY}"))),
        ];
        for (name, auth) in &bad_auth {
            for r in tenant_routes(&id) {
                let r = match auth {
                    Some(a) => r.header_value(
                        axum::http::header::AUTHORIZATION,
                        HeaderValue::from_str(a).unwrap(),
                    ),
                    None => r,
                };
                let resp = env.api.send(r).await;
                assert_eq!(resp.status, StatusCode::UNAUTHORIZED, "{b}: {name}: {}", resp.what);
                assert_eq!(error_code(&resp.what, &resp.json()), "unauthorized", "{b}: {name}");
            }
            if *name == "admin key on tenant routes" {
                continue;
            }
            for r in admin_routes(&t.id, key_id) {
                let r = match auth {
                    Some(a) => r.header_value(
                        axum::http::header::AUTHORIZATION,
                        HeaderValue::from_str(a).unwrap(),
                    ),
                    None => r,
                };
                env.api.send(r).await.expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
            }
        }
        // A tenant key is authenticated but not an admin: 403 everywhere admin.
        for r in admin_routes(&t.id, key_id) {
            env.api.send(r.bearer(&t.key)).await.expect_error(StatusCode::FORBIDDEN, "forbidden");
        }
        assert_eq!(
            env.api.quota(&t.key, "email").await,
            Some((5, 4, 1, 0)),
            "{b}: 401/403 grants did nothing"
        );

        // Without a configured admin key, admin routes are closed (401 or 403, JSON).
        let closed = env.api_with(&config(None, None));
        for auth in [Some(ADMIN_KEY), Some(t.key.as_str()), Some(""), None] {
            for r in admin_routes(&t.id, key_id) {
                let r = match auth {
                    Some(a) => r.bearer(a),
                    None => r,
                };
                let resp = closed.send(r).await;
                assert!(
                    [StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN].contains(&resp.status),
                    "{b}: admin route without an admin key: {} {}",
                    resp.what,
                    resp.status
                );
                error_code(&resp.what, &resp.json());
            }
        }
        // An empty configured admin key must not open the admin routes to `Bearer `.
        let empty = env.api_with(&config(Some(""), None));
        let resp =
            empty.send(post("/v1/tenants").bearer("").json(&json!({"name": "sneaky"}))).await;
        assert!(
            [StatusCode::UNAUTHORIZED, StatusCode::FORBIDDEN].contains(&resp.status),
            "{b}: empty admin key: {}",
            resp.status
        );

        // A new key works next to the old one; revoking it leaves the old one working.
        let created = env
            .api
            .send(post(format!("/v1/tenants/{}/keys", t.id)).bearer(ADMIN_KEY))
            .await
            .expect(CREATED);
        let mut fields: Vec<_> = created.as_object().unwrap().keys().cloned().collect();
        fields.sort();
        assert_eq!(fields, ["api_key", "key_id"], "{b}: key created {created}");
        let new_key = created["api_key"].as_str().unwrap().to_string();
        let new_id = created["key_id"].as_str().unwrap().to_string();
        assert_eq!(&new_key[3..19], new_id, "{b}: key id is inside the key");
        assert_ne!(new_key, t.key, "{b}: a new key");
        env.api.send(get(format!("/v1/deliveries/{id}")).bearer(&new_key)).await.expect(OK);
        env.api.send(get(format!("/v1/deliveries/{id}")).bearer(&t.key)).await.expect(OK);
        // Revoking under the wrong tenant is a 404 and revokes nothing.
        env.api
            .send(
                req(Method::DELETE, format!("/v1/tenants/{}/keys/{new_id}", other.id))
                    .bearer(ADMIN_KEY),
            )
            .await
            .expect_error(NOT_FOUND, "not_found");
        env.api.send(get("/v1/quotas").bearer(&new_key)).await.expect(OK);
        for bad in ["0123456789abcdef", "nope", &"a".repeat(300)] {
            env.api
                .send(
                    req(Method::DELETE, format!("/v1/tenants/{}/keys/{bad}", t.id))
                        .bearer(ADMIN_KEY),
                )
                .await
                .expect_error(NOT_FOUND, "not_found");
        }
        env.api
            .send(
                req(Method::DELETE, format!("/v1/tenants/{}/keys/{new_id}", t.id))
                    .bearer(ADMIN_KEY),
            )
            .await
            .expect(OK);
        for r in tenant_routes(&id) {
            env.api
                .send(r.bearer(&new_key))
                .await
                .expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
        }
        env.api.send(get(format!("/v1/deliveries/{id}")).bearer(&t.key)).await.expect(OK);
        // Revoking the original key shuts it out too.
        env.api
            .send(
                req(Method::DELETE, format!("/v1/tenants/{}/keys/{key_id}", t.id))
                    .bearer(ADMIN_KEY),
            )
            .await
            .expect(OK);
        env.api
            .send(get("/v1/quotas").bearer(&t.key))
            .await
            .expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
        // Keys for unknown or malformed tenants.
        let random = uuid::Uuid::now_v7();
        for tenant in [random.to_string(), "nope".into()] {
            env.api
                .send(post(format!("/v1/tenants/{tenant}/keys")).bearer(ADMIN_KEY))
                .await
                .expect_error(NOT_FOUND, "not_found");
            env.api
                .send(
                    req(Method::DELETE, format!("/v1/tenants/{tenant}/keys/{key_id}"))
                        .bearer(ADMIN_KEY),
                )
                .await
                .expect_error(NOT_FOUND, "not_found");
        }
    }
}

/// Bad input is always a JSON 4xx with the code SPEC names; never plain text, never 5xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_is_a_json_4xx() {
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        env.api.grant(&t, "email", 100).await;
        let ok = serde_json::to_vec(&email("ok")).unwrap();
        let big_payload = "x".repeat(herald_core::limits::PAYLOAD_BYTES_MAX + 10);
        let oversized_body = format!(
            r#"{{"operation_key":"big","channel":"email","to":"a@b.c","payload":{{"subject":"s","text":"{}"}}}}"#,
            "x".repeat(herald_server::BODY_BYTES_MAX + 1)
        );
        let with = |extra: Value| {
            let mut v = email("case");
            for (k, x) in extra.as_object().unwrap() {
                if x.is_null() && k != "payload" {
                    v.as_object_mut().unwrap().remove(k);
                } else {
                    v[k] = x.clone();
                }
            }
            serde_json::to_vec(&v).unwrap()
        };
        // (name, content type, body, status, code)
        let json_ct = Some("application/json");
        let cases: Vec<BodyCase<&str>> = vec![
            ("malformed JSON", json_ct, b"{\"operation_key\": ".to_vec(), BAD, "invalid_request"),
            ("not JSON at all", json_ct, b"hello".to_vec(), BAD, "invalid_request"),
            ("empty body", json_ct, Vec::new(), BAD, "invalid_request"),
            ("JSON null", json_ct, b"null".to_vec(), BAD, "invalid_request"),
            ("JSON array", json_ct, b"[]".to_vec(), BAD, "invalid_request"),
            ("trailing garbage", json_ct, [ok.clone(), b"}".to_vec()].concat(), BAD, "invalid_request"),
            ("missing content type", None, ok.clone(), BAD, "invalid_request"),
            ("text/plain", Some("text/plain"), ok.clone(), BAD, "invalid_request"),
            ("form content type", Some("application/x-www-form-urlencoded"), ok.clone(), BAD, "invalid_request"),
            ("wrong type: channel", json_ct, with(json!({"channel": 5})), BAD, "invalid_request"),
            ("wrong type: cost", json_ct, with(json!({"cost": "1"})), BAD, "invalid_request"),
            ("wrong type: cost float", json_ct, with(json!({"cost": 1.5})), BAD, "invalid_request"),
            ("wrong type: max_attempts", json_ct, with(json!({"max_attempts": -1})), BAD, "invalid_request"),
            ("wrong type: to", json_ct, with(json!({"to": ["a@b.c"]})), BAD, "invalid_request"),
            ("unknown field", json_ct, with(json!({"priority": 1})), BAD, "invalid_request"),
            ("missing channel", json_ct, with(json!({"channel": null})), BAD, "invalid_request"),
            ("missing to", json_ct, with(json!({"to": null})), BAD, "invalid_request"),
            ("missing payload", json_ct, br#"{"operation_key":"np","channel":"email","to":"a@b.c"}"#.to_vec(), BAD, "invalid_request"),
            ("empty to", json_ct, with(json!({"to": ""})), BAD, "invalid_request"),
            ("control character in to", json_ct, with(json!({"to": "a\nb"})), BAD, "invalid_request"),
            ("empty operation_key", json_ct, with(json!({"operation_key": ""})), BAD, "invalid_request"),
            ("operation_key too long", json_ct, with(json!({"operation_key": "k".repeat(256)})), BAD, "invalid_request"),
            ("negative cost", json_ct, with(json!({"cost": -1})), BAD, "invalid_request"),
            ("cost over COST_MAX", json_ct, with(json!({"cost": herald_core::limits::COST_MAX + 1})), BAD, "invalid_request"),
            ("cost over i64", json_ct, br#"{"operation_key":"c","channel":"email","to":"a@b.c","payload":{},"cost":99999999999999999999}"#.to_vec(), BAD, "invalid_request"),
            ("max_attempts 0", json_ct, with(json!({"max_attempts": 0})), BAD, "invalid_request"),
            ("max_attempts 101", json_ct, with(json!({"max_attempts": 101})), BAD, "invalid_request"),
            ("empty quota_key", json_ct, with(json!({"quota_key": ""})), BAD, "invalid_request"),
            ("bad send_at", json_ct, with(json!({"send_at": "tomorrow"})), BAD, "invalid_request"),
            ("send_at without offset", json_ct, with(json!({"send_at": "2030-01-02T03:04:05"})), BAD, "invalid_request"),
            ("send_at as a number", json_ct, with(json!({"send_at": 1_700_000_000})), BAD, "invalid_request"),
            ("unknown channel", json_ct, with(json!({"channel": "pigeon"})), BAD, "invalid_request"),
            ("payload over 64 KiB, body under the limit", json_ct, with(json!({"payload": {"subject": "s", "text": big_payload}})), BAD, "invalid_request"),
            ("body over the limit", json_ct, oversized_body.into_bytes(), StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
        ];
        for (name, ct, body, status, code) in cases {
            let r = post("/v1/deliveries").bearer(&t.key);
            let r = match ct {
                Some(ct) => r.raw(ct, body),
                None => r.untyped(body),
            };
            let resp = env.api.send(r).await;
            assert_eq!(resp.status, status, "{b}: submit with {name}: {}", resp.text());
            assert_eq!(error_code(&format!("{b}: {name}"), &resp.json()), code, "{b}: {name}");
        }
        assert!(env.api.list(&t.key, "").await.is_empty(), "{b}: no bad input created a delivery");
        assert_eq!(
            env.api.quota(&t.key, "email").await,
            Some((100, 100, 0, 0)),
            "{b}: and reserved nothing"
        );
        // Authentication comes before validation: a bad body without a key is a 401.
        env.api
            .send(post("/v1/deliveries").raw("application/json", b"{".to_vec()))
            .await
            .expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
        // A future send_at is honoured (and accepted with an offset).
        let mut later = email("later");
        later["send_at"] = json!("2030-01-02T04:04:05+01:00");
        let v = env.api.submit(&t.key, &later).await.expect(CREATED);
        let due: jiff::Timestamp = v["next_attempt_at"].as_str().unwrap().parse().unwrap();
        assert_eq!(due, "2030-01-02T03:04:05Z".parse::<jiff::Timestamp>().unwrap(), "{b}: send_at");
        // A non-ASCII Idempotency-Key.
        env.api
            .send(
                post("/v1/deliveries")
                    .bearer(&t.key)
                    .header_value(
                        axum::http::header::HeaderName::from_static("idempotency-key"),
                        HeaderValue::from_bytes(b"caf\xe9").unwrap(),
                    )
                    .json(&json!({"channel": "email", "to": "a@b.c", "payload": {"subject": "s", "text": "t"}})),
            )
            .await
            .expect_error(BAD, "invalid_request");

        // Listing: query parameters.
        let first = env.api.send(get("/v1/deliveries?limit=1").bearer(&t.key)).await.expect(OK);
        let list_cursor = first["next_cursor"].as_str().map(String::from);
        env.api.submit(&t.key, &email("second")).await.expect(CREATED);
        let page = env.api.send(get("/v1/deliveries?limit=1").bearer(&t.key)).await.expect(OK);
        let cursor = page["next_cursor"]
            .as_str()
            .unwrap_or_else(|| panic!("{b}: a cursor: {page}"))
            .to_string();
        assert!(list_cursor.is_none(), "{b}: one delivery, one page");
        let long = "A".repeat(100);
        let queries: Vec<(String, &str)> = vec![
            ("limit=0".into(), "limit 0"),
            ("limit=201".into(), "limit over PAGE_MAX"),
            ("limit=abc".into(), "limit not a number"),
            ("limit=-1".into(), "negative limit"),
            ("limit=".into(), "empty limit"),
            ("limit=1&limit=2".into(), "repeated limit"),
            ("order=asc".into(), "unknown parameter"),
            ("state=bogus".into(), "unknown state"),
            ("cursor=!!!".into(), "bad cursor"),
            ("cursor=AAAA".into(), "short cursor"),
            (format!("cursor={long}"), "long cursor"),
            (format!("cursor={cursor}&state=pending"), "cursor from other filters (state)"),
            (format!("cursor={cursor}&channel=email"), "cursor from other filters (channel)"),
        ];
        for (query, name) in queries {
            let resp = env.api.send(get(format!("/v1/deliveries?{query}")).bearer(&t.key)).await;
            assert_eq!(resp.status, BAD, "{b}: list with {name} ({query}): {}", resp.text());
            assert_eq!(error_code(&resp.what, &resp.json()), "invalid_request", "{b}: {name}");
        }
        env.api
            .send(get(format!("/v1/deliveries?cursor={cursor}&limit=1")).bearer(&t.key))
            .await
            .expect(OK);

        // Admin bodies.
        let admin_cases: Vec<BodyCase<String>> = vec![
            ("/v1/tenants".into(), json_ct, b"{".to_vec(), BAD, "invalid_request"),
            ("/v1/tenants".into(), json_ct, br#"{"name": 5}"#.to_vec(), BAD, "invalid_request"),
            ("/v1/tenants".into(), json_ct, br#"{}"#.to_vec(), BAD, "invalid_request"),
            ("/v1/tenants".into(), json_ct, br#"{"name": ""}"#.to_vec(), BAD, "invalid_request"),
            (
                "/v1/tenants".into(),
                json_ct,
                br#"{"name": "a\nb"}"#.to_vec(),
                BAD,
                "invalid_request",
            ),
            (
                "/v1/tenants".into(),
                json_ct,
                br#"{"name": "x", "plan": "gold"}"#.to_vec(),
                BAD,
                "invalid_request",
            ),
            ("/v1/tenants".into(), None, br#"{"name": "x"}"#.to_vec(), BAD, "invalid_request"),
            (
                "/v1/tenants".into(),
                Some("text/plain"),
                br#"{"name": "x"}"#.to_vec(),
                BAD,
                "invalid_request",
            ),
            (
                "/v1/tenants".into(),
                json_ct,
                br#"{"name": "acme"}"#.to_vec(),
                StatusCode::CONFLICT,
                "conflict",
            ),
            (
                "/v1/tenants".into(),
                json_ct,
                format!(r#"{{"name": "{}"}}"#, "n".repeat(herald_server::BODY_BYTES_MAX))
                    .into_bytes(),
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
            ),
            (
                format!("/v1/tenants/{}/quotas/email/grant", t.id),
                None,
                br#"{"amount": 1}"#.to_vec(),
                BAD,
                "invalid_request",
            ),
            (
                format!("/v1/tenants/{}/quotas/email/grant", t.id),
                json_ct,
                br#"{"amount": 1, "x": 1}"#.to_vec(),
                BAD,
                "invalid_request",
            ),
        ];
        for (uri, ct, body, status, code) in admin_cases {
            let r = post(&uri).bearer(ADMIN_KEY);
            let r = match ct {
                Some(ct) => r.raw(ct, body),
                None => r.untyped(body),
            };
            let resp = env.api.send(r).await;
            assert_eq!(resp.status, status, "{b}: {uri} {ct:?}: {}", resp.text());
            assert_eq!(error_code(&resp.what, &resp.json()), code, "{b}: {uri}");
        }

        // Unknown routes and wrong methods: JSON too.
        for uri in
            ["/", "/v1", "/v1/nope", "/v2/deliveries", "/v1/deliveries/x/y/z", "/v1/tenants/x"]
        {
            env.api.send(get(uri).bearer(&t.key)).await.expect_error(NOT_FOUND, "not_found");
        }
        for (method, uri) in [
            (Method::PUT, "/v1/deliveries"),
            (Method::DELETE, "/v1/deliveries"),
            (Method::DELETE, "/v1/deliveries/abc"),
            (Method::GET, "/v1/deliveries/abc/replay"),
            (Method::GET, "/v1/deliveries/abc/cancel"),
            (Method::POST, "/v1/quotas"),
            (Method::GET, "/v1/tenants"),
            (Method::POST, "/healthz"),
            (Method::PATCH, "/metrics"),
        ] {
            env.api
                .send(req(method, uri).bearer(&t.key))
                .await
                .expect_error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
        }
    }
}

/// Input that is valid JSON and valid HTTP but awkward for a database: never a 5xx.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn awkward_values_are_never_a_5xx() {
    let mut failures = Vec::new();
    for env in envs().await {
        let t = env.api.tenant("acme").await;
        env.api.grant(&t, "email", 100).await;
        let mut nul_payload = email("nul-payload");
        nul_payload["payload"] = json!({"subject": "s", "text": "a\u{0}b"});
        let mut ancient = email("ancient");
        ancient["send_at"] = json!("-009999-01-03T00:00:00Z");
        let mut far = email("far");
        far["send_at"] = json!("9999-12-30T00:00:00Z");
        let tenant = &t.id;
        let requests = vec![
            ("NUL inside a payload string", post("/v1/deliveries").bearer(&t.key).json(&nul_payload)),
            ("send_at in year -9999", post("/v1/deliveries").bearer(&t.key).json(&ancient)),
            ("send_at in year 9999", post("/v1/deliveries").bearer(&t.key).json(&far)),
            ("NUL in a channel filter", get("/v1/deliveries?channel=%00").bearer(&t.key)),
            ("NUL in a state filter", get("/v1/deliveries?state=%00").bearer(&t.key)),
            ("invalid UTF-8 in a channel filter", get("/v1/deliveries?channel=%FF").bearer(&t.key)),
            ("NUL in a delivery id", get("/v1/deliveries/%00").bearer(&t.key)),
            (
                "NUL in a grant's quota key",
                post(format!("/v1/tenants/{tenant}/quotas/%00/grant")).bearer(ADMIN_KEY).json(&json!({"amount": 1})),
            ),
            (
                "newline in a grant's quota key",
                post(format!("/v1/tenants/{tenant}/quotas/a%0Ab/grant")).bearer(ADMIN_KEY).json(&json!({"amount": 1})),
            ),
            ("NUL in a key id to revoke", req(Method::DELETE, format!("/v1/tenants/{tenant}/keys/%00")).bearer(ADMIN_KEY)),
            ("NUL in a tenant name", post("/v1/tenants").bearer(ADMIN_KEY).json(&json!({"name": "a\u{0}b"}))),
            (
                "a lone surrogate in JSON",
                post("/v1/deliveries").bearer(&t.key).raw(
                    "application/json",
                    br#"{"operation_key":"\ud800","channel":"email","to":"a@b.c","payload":{"subject":"s","text":"t"}}"#.to_vec(),
                ),
            ),
        ];
        for (name, r) in requests {
            let resp = env.api.send(r).await;
            if resp.status.is_server_error() {
                failures.push(format!("{name}: {} → {} {}", resp.what, resp.status, resp.text()));
            } else if !resp.status.is_success() {
                error_code(&resp.what, &resp.json());
            }
        }
        // And the server still works.
        env.api.submit(&t.key, &email("after")).await.expect(CREATED);
    }
    assert!(failures.is_empty(), "awkward input answered 5xx:\n{}", failures.join("\n"));
}

/// Percent-encoded bytes that are not UTF-8 in a path or query: the framework's own
/// rejection must still be JSON (a malformed id is a 404, a bad query a 400).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn undecodable_paths_and_queries_answer_json() {
    let mut failures = Vec::new();
    for env in envs().await {
        let t = env.api.tenant("acme").await;
        let tenant = &t.id;
        let key = t.key.as_str();
        let requests = vec![
            (NOT_FOUND, "not_found", get("/v1/deliveries/%FF").bearer(key)),
            (NOT_FOUND, "not_found", get("/v1/deliveries/%FF/attempts").bearer(key)),
            (NOT_FOUND, "not_found", post("/v1/deliveries/%FF/replay").bearer(key)),
            (NOT_FOUND, "not_found", post("/v1/deliveries/%FF/cancel").bearer(key)),
            (NOT_FOUND, "not_found", post("/v1/tenants/%FF/keys").bearer(ADMIN_KEY)),
            (
                NOT_FOUND,
                "not_found",
                req(Method::DELETE, format!("/v1/tenants/{tenant}/keys/%FF")).bearer(ADMIN_KEY),
            ),
            (
                NOT_FOUND,
                "not_found",
                post("/v1/tenants/%FF/webhook-secret/rotate").bearer(ADMIN_KEY),
            ),
            (
                NOT_FOUND,
                "not_found",
                post("/v1/tenants/%FF/quotas/email/grant")
                    .bearer(ADMIN_KEY)
                    .json(&json!({"amount": 1})),
            ),
            (
                NOT_FOUND,
                "not_found",
                post(format!("/v1/tenants/{tenant}/quotas/%FF/grant"))
                    .bearer(ADMIN_KEY)
                    .json(&json!({"amount": 1})),
            ),
        ];
        for (status, code, r) in requests {
            let resp = env.api.send(r).await;
            let json = resp
                .headers
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .is_some_and(|c| c.starts_with("application/json"));
            let code_seen = if json {
                serde_json::from_slice::<Value>(&resp.body).ok().map(|v| error_code(&resp.what, &v))
            } else {
                None
            };
            if resp.status != status || code_seen.as_deref() != Some(code) {
                failures.push(format!(
                    "{}: expected {status} JSON {code:?}, got {} {:?}: {}",
                    resp.what,
                    resp.status,
                    resp.headers.get("content-type"),
                    resp.text()
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "framework rejections that are not SPEC's JSON:\n{}",
        failures.join("\n")
    );
}

/// Listing: newest first, keyset pages that cover everything once, filters, cursors bound
/// to their filters.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn listing_is_newest_first_paginated_and_filtered() {
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        env.api.grant(&t, "email", 100).await;
        env.api.grant(&t, "sms", 100).await;
        let mut submitted = Vec::new(); // oldest first
        let sms = |k: &str| json!({"operation_key": k, "channel": "sms", "to": "+15550100", "payload": {"text": "x"}});
        for k in ["e0", "e1", "e2"] {
            submitted.push(id_of(&env.api.submit(&t.key, &email(k)).await.expect(CREATED)));
        }
        for k in ["s0", "s1"] {
            submitted.push(id_of(&env.api.submit(&t.key, &sms(k)).await.expect(CREATED)));
        }
        let report = env.worker().run_once().await.unwrap();
        assert_eq!((report.sent, report.failed), (3, 2), "{b}: worker {report:?}");
        for k in ["e3", "e4", "e5", "e6"] {
            submitted.push(id_of(&env.api.submit(&t.key, &email(k)).await.expect(CREATED)));
        }
        let cancelled = submitted[5].clone();
        env.api
            .send(post(format!("/v1/deliveries/{cancelled}/cancel")).bearer(&t.key))
            .await
            .expect(OK);
        let newest_first: Vec<String> = submitted.iter().rev().cloned().collect();

        // Three pages of 4, 4, 1.
        let mut pages = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let uri = match &cursor {
                Some(c) => format!("/v1/deliveries?limit=4&cursor={c}"),
                None => "/v1/deliveries?limit=4".into(),
            };
            let v = env.api.send(get(uri).bearer(&t.key)).await.expect(OK);
            let mut fields: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
            fields.sort();
            assert_eq!(fields, ["deliveries", "next_cursor"], "{b}: list fields");
            let page = v["deliveries"].as_array().unwrap().clone();
            for d in &page {
                assert_delivery(b, d, false);
            }
            pages.push(ids(&page));
            cursor = v["next_cursor"].as_str().map(String::from);
            if cursor.is_none() || pages.len() > 5 {
                break;
            }
        }
        assert_eq!(pages.iter().map(Vec::len).collect::<Vec<_>>(), [4, 4, 1], "{b}: page sizes");
        assert_eq!(pages.concat(), newest_first, "{b}: every delivery once, newest first");
        let all = env.api.list(&t.key, "").await;
        assert_eq!(ids(&all), newest_first, "{b}: one big page");
        for w in all.windows(2) {
            let (a, c): (jiff::Timestamp, jiff::Timestamp) = (
                w[0]["created_at"].as_str().unwrap().parse().unwrap(),
                w[1]["created_at"].as_str().unwrap().parse().unwrap(),
            );
            assert!(a >= c, "{b}: created_at not newest first: {a} then {c}");
        }
        // An exact fit has no further page.
        let v = env.api.send(get("/v1/deliveries?limit=9").bearer(&t.key)).await.expect(OK);
        assert_eq!(v["deliveries"].as_array().unwrap().len(), 9, "{b}");
        assert!(v["next_cursor"].is_null(), "{b}: exact fit, no cursor: {}", v["next_cursor"]);

        let pick =
            |idx: &[usize]| idx.iter().rev().map(|&i| submitted[i].clone()).collect::<Vec<_>>();
        let filters: Vec<(&str, Vec<String>)> = vec![
            ("state=sent", pick(&[0, 1, 2])),
            ("state=failed", pick(&[3, 4])),
            ("state=pending", pick(&[6, 7, 8])),
            ("state=cancelled", pick(&[5])),
            ("state=sending", vec![]),
            ("channel=sms", pick(&[3, 4])),
            ("channel=email", pick(&[0, 1, 2, 5, 6, 7, 8])),
            ("channel=pigeon", vec![]),
            ("state=pending&channel=email", pick(&[6, 7, 8])),
            ("state=sent&channel=sms", vec![]),
        ];
        for (query, expected) in filters {
            assert_eq!(ids(&env.api.list(&t.key, query).await), expected, "{b}: list {query}");
        }
        for d in env.api.list(&t.key, "state=sent").await {
            assert!(
                d["sent_at"].as_str().is_some_and(is_rfc3339),
                "{b}: sent_at of a sent delivery: {d}"
            );
        }
        for d in env.api.list(&t.key, "state=failed").await {
            assert!(d["last_error"].is_string(), "{b}: last_error of a failed delivery: {d}");
        }

        // Filtered pages: 3, 3, 1 emails; the cursor only works with its own filters.
        let mut seen = Vec::new();
        let mut cursor: Option<String> = None;
        let mut filtered_cursor = String::new();
        for n in 0..5 {
            let uri = match &cursor {
                Some(c) => format!("/v1/deliveries?channel=email&limit=3&cursor={c}"),
                None => "/v1/deliveries?channel=email&limit=3".into(),
            };
            let v = env.api.send(get(uri).bearer(&t.key)).await.expect(OK);
            seen.extend(ids(v["deliveries"].as_array().unwrap()));
            cursor = v["next_cursor"].as_str().map(String::from);
            if n == 0 {
                filtered_cursor = cursor.clone().unwrap();
            }
            if cursor.is_none() {
                break;
            }
        }
        assert_eq!(seen, pick(&[0, 1, 2, 5, 6, 7, 8]), "{b}: filtered pages");
        for other in ["", "&channel=sms", "&state=pending&channel=email", "&state=sent"] {
            env.api
                .send(get(format!("/v1/deliveries?cursor={filtered_cursor}{other}")).bearer(&t.key))
                .await
                .expect_error(BAD, "invalid_request");
        }
        // Another tenant sees none of it, whatever the cursor.
        let other = env.api.tenant("other").await;
        let v = env
            .api
            .send(
                get(format!("/v1/deliveries?channel=email&cursor={filtered_cursor}"))
                    .bearer(&other.key),
            )
            .await
            .expect(OK);
        assert_eq!(v["deliveries"], json!([]), "{b}: another tenant's listing");
    }
}

/// Guarantee 10 over HTTP: cancel and replay, their 409s and 402, identity kept, the
/// ledger moved as SPEC says; attempts as JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn replay_and_cancel() {
    for env in envs().await {
        let b = env.backend;
        let api = &env.api;
        let t = api.tenant("acme").await;
        api.grant(&t, "email", 2).await;
        let d =
            |id: &str, action: &str| post(format!("/v1/deliveries/{id}/{action}")).bearer(&t.key);

        let a = id_of(&api.submit(&t.key, &email("a")).await.expect(CREATED));
        assert_eq!(api.quota(&t.key, "email").await, Some((2, 1, 1, 0)), "{b}: reserved");
        let v = api.send(d(&a, "cancel")).await.expect(OK);
        assert_delivery(b, &v, false);
        assert_eq!((id_of(&v), v["state"].as_str()), (a.clone(), Some("cancelled")), "{b}: cancel");
        assert_eq!(api.quota(&t.key, "email").await, Some((2, 2, 0, 0)), "{b}: cancel released");
        api.send(d(&a, "cancel")).await.expect_error(StatusCode::CONFLICT, "conflict");
        let v = api.send(d(&a, "replay")).await.expect(OK);
        assert_delivery(b, &v, false);
        assert_eq!((id_of(&v), v["state"].as_str()), (a.clone(), Some("pending")), "{b}: replay");
        assert_eq!(v["operation_key"], "a", "{b}: replay keeps the operation key");
        assert_eq!(
            api.quota(&t.key, "email").await,
            Some((2, 1, 1, 0)),
            "{b}: replay reserved again"
        );
        api.send(d(&a, "replay")).await.expect_error(StatusCode::CONFLICT, "conflict");

        // Replay with no quota left: 402, nothing changes.
        let bb = id_of(&api.submit(&t.key, &email("b")).await.expect(CREATED));
        api.send(d(&a, "cancel")).await.expect(OK);
        let c = id_of(&api.submit(&t.key, &email("c")).await.expect(CREATED));
        let before = api.quotas(&t.key).await;
        api.send(d(&a, "replay"))
            .await
            .expect_error(StatusCode::PAYMENT_REQUIRED, "quota_exhausted");
        assert_eq!(api.quotas(&t.key).await, before, "{b}: a refused replay moved no quota");
        let v = api.send(get(format!("/v1/deliveries/{a}")).bearer(&t.key)).await.expect(OK);
        assert_eq!(v["state"], "cancelled", "{b}: a refused replay left it cancelled");

        // Sent deliveries can be neither replayed nor cancelled.
        let report = env.worker().run_once().await.unwrap();
        assert_eq!(report.sent, 2, "{b}: worker {report:?}");
        for id in [&bb, &c] {
            let v = api.send(get(format!("/v1/deliveries/{id}")).bearer(&t.key)).await.expect(OK);
            assert_eq!(v["state"], "sent", "{b}: {v}");
            assert_eq!(v["attempts"], 1, "{b}: {v}");
            api.send(d(id, "replay")).await.expect_error(StatusCode::CONFLICT, "conflict");
            api.send(d(id, "cancel")).await.expect_error(StatusCode::CONFLICT, "conflict");
        }
        assert_eq!(api.quota(&t.key, "email").await, Some((2, 0, 0, 2)), "{b}: both charged");
        let v =
            api.send(get(format!("/v1/deliveries/{bb}/attempts")).bearer(&t.key)).await.expect(OK);
        let attempts = v["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 1, "{b}: {v}");
        assert_attempt(b, &attempts[0], 1, "sent");

        // Failed (terminal) → replay → pending again with the same id, attempts keep counting.
        api.grant(&t, "sms", 1).await;
        let s = id_of(
            &api.submit(
                &t.key,
                &json!({"operation_key": "s", "channel": "sms", "to": "+1555", "payload": {}}),
            )
            .await
            .expect(CREATED),
        );
        env.worker().run_once().await.unwrap();
        let v = api.send(get(format!("/v1/deliveries/{s}")).bearer(&t.key)).await.expect(OK);
        assert_eq!(v["state"], "failed", "{b}: terminal → failed: {v}");
        assert_eq!(api.quota(&t.key, "sms").await, Some((1, 1, 0, 0)), "{b}: failed released");
        api.send(d(&s, "cancel")).await.expect_error(StatusCode::CONFLICT, "conflict");
        let v = api.send(d(&s, "replay")).await.expect(OK);
        assert_eq!(
            (id_of(&v), v["state"].as_str()),
            (s.clone(), Some("pending")),
            "{b}: replay failed"
        );
        assert_eq!(v["attempts"], 1, "{b}: attempts are cumulative over a replay: {v}");
        assert_eq!(api.quota(&t.key, "sms").await, Some((1, 0, 1, 0)), "{b}: replay reserved");
        env.worker().run_once().await.unwrap();
        let v =
            api.send(get(format!("/v1/deliveries/{s}/attempts")).bearer(&t.key)).await.expect(OK);
        let attempts = v["attempts"].as_array().unwrap();
        assert_eq!(attempts.len(), 2, "{b}: {v}");
        assert_attempt(b, &attempts[0], 1, "terminal");
        assert_attempt(b, &attempts[1], 2, "terminal");
        assert_eq!(attempts[0]["error_code"], "refused", "{b}: {v}");
    }
}

fn assert_attempt(b: &str, v: &Value, n: u64, outcome: &str) {
    let obj = v.as_object().unwrap_or_else(|| panic!("{b}: attempt {v}"));
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["error_code", "error_message", "finished_at", "n", "outcome", "started_at", "worker"],
        "{b}: attempt fields {v}"
    );
    assert_eq!(obj["n"], n, "{b}: attempt number {v}");
    assert_eq!(obj["outcome"], outcome, "{b}: attempt outcome {v}");
    assert!(obj["worker"].as_str().is_some_and(|w| !w.is_empty()), "{b}: worker {v}");
    for f in ["started_at", "finished_at"] {
        assert!(obj[f].as_str().is_some_and(is_rfc3339), "{b}: {f} {v}");
    }
}

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

/// Sets an account's granted (and available) total directly, to reach the limits without
/// millions of grants.
async fn set_granted(env: &Env, tenant: &str, quota_key: &str, granted: i64) {
    let tenant = uuid::Uuid::try_parse(tenant).unwrap();
    let store = env.herald.store();
    let done = match (store.sqlite_pool(), store.postgres_pool()) {
        (Some(pool), _) => herald::sqlx::query(
            "UPDATE quota_accounts SET granted = ?1, available = ?1
             WHERE tenant_id = ?2 AND quota_key = ?3",
        )
        .bind(granted)
        .bind(tenant)
        .bind(quota_key)
        .execute(pool)
        .await
        .unwrap()
        .rows_affected(),
        (_, Some(pool)) => herald::sqlx::query(
            "UPDATE quota_accounts SET granted = $1, available = $1
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
    assert_eq!(done, 1, "{}: set granted", env.backend);
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
    }
}
