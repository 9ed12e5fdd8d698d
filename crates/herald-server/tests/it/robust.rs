//! Robustness and observability of the HTTP face: random malformed requests at every
//! route never get a 5xx or a non-JSON error; `/metrics` follows deliveries through their
//! states; retention prunes final deliveries past the window (which is also the
//! idempotency window).

use crate::common;
use crate::common::{ADMIN_KEY, Env, Req, envs, get, post, req};
use axum::http::{HeaderValue, Method, StatusCode, header};
use proptest::prelude::*;
use serde_json::{Value, json};
use std::time::Duration;

/// Every route, with `{id}`-like segments to be replaced by fuzzed text.
const ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/deliveries"),
    ("GET", "/v1/deliveries"),
    ("GET", "/v1/deliveries/{id}"),
    ("GET", "/v1/deliveries/{id}/attempts"),
    ("POST", "/v1/deliveries/{id}/replay"),
    ("POST", "/v1/deliveries/{id}/cancel"),
    ("GET", "/v1/quotas"),
    ("POST", "/v1/tenants"),
    ("POST", "/v1/tenants/{id}/keys"),
    ("DELETE", "/v1/tenants/{id}/keys/{id}"),
    ("POST", "/v1/tenants/{id}/webhook-secret/rotate"),
    ("POST", "/v1/tenants/{id}/quotas/{id}/grant"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
];

#[derive(Debug, Clone)]
struct Fuzz {
    route: usize,
    other_method: Option<usize>,
    segment: String,
    query: String,
    content_type: usize,
    auth: usize,
    idempotency_key: Option<Vec<u8>>,
    body: Vec<u8>,
}

fn body() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..200),
        "\\PC{0,120}".prop_map(String::into_bytes),
        Just(b"{}".to_vec()),
        Just(br#"{"channel":"email","to":"a@b.c","payload":{"subject":"s","text":"t"},"operation_key":"k"}"#.to_vec()),
        (any::<i64>(), "\\PC{0,20}").prop_map(|(n, s)| {
            json!({"channel": s, "to": s, "payload": {"subject": s, "text": n}, "operation_key": s,
                   "cost": n, "max_attempts": n, "send_at": s, "amount": n, "name": s})
            .to_string()
            .into_bytes()
        }),
        (any::<i64>(), any::<bool>()).prop_map(|(n, b)| json!({"amount": n, "name": b}).to_string().into_bytes()),
    ]
}

fn fuzz() -> impl Strategy<Value = Fuzz> {
    (
        0..ROUTES.len(),
        proptest::option::of(0..4usize),
        prop_oneof![
            "\\PC{0,40}",
            "[0-9a-f%-]{0,40}",
            Just("01a22a63-6bb1-7629-80d4-9ba37af9d2bd".to_string())
        ],
        prop_oneof![Just(String::new()), "[a-z=&%0-9]{0,30}", "\\PC{0,30}"],
        0..5usize,
        0..4usize,
        proptest::option::of(proptest::collection::vec(any::<u8>(), 0..40)),
        body(),
    )
        .prop_map(
            |(route, other_method, segment, query, content_type, auth, idempotency_key, body)| {
                Fuzz {
                    route,
                    other_method,
                    segment,
                    query,
                    content_type,
                    auth,
                    idempotency_key,
                    body,
                }
            },
        )
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn request(f: &Fuzz, tenant_key: &str) -> Req {
    let (method, path) = ROUTES[f.route];
    let method = match f.other_method {
        Some(i) => [Method::GET, Method::POST, Method::PUT, Method::DELETE][i].clone(),
        None => method.parse().unwrap(),
    };
    let mut uri = path.replace("{id}", &percent_encode(&f.segment));
    if uri.is_empty() || !uri.starts_with('/') {
        uri = "/".into();
    }
    if !f.query.is_empty() {
        uri = format!("{uri}?{}", percent_encode(&f.query).replace("%3D", "=").replace("%26", "&"));
    }
    let mut r = req(method, uri);
    r.body = f.body.clone();
    let content_type = [
        "application/json",
        "text/plain",
        "",
        "application/json; charset=utf-8",
        "multipart/form-data",
    ][f.content_type];
    if !content_type.is_empty() {
        r.headers.push((header::CONTENT_TYPE, HeaderValue::from_static(content_type)));
    }
    let auth = match f.auth {
        0 => None,
        1 => Some("Bearer hk_0000000000000000_nope".to_string()),
        2 => Some(format!("Bearer {ADMIN_KEY}")),
        _ => Some(format!("Bearer {tenant_key}")),
    };
    if let Some(auth) = auth {
        r.headers.push((header::AUTHORIZATION, HeaderValue::from_str(&auth).unwrap()));
    }
    if let Some(key) = &f.idempotency_key
        && let Ok(value) = HeaderValue::from_bytes(key)
    {
        r.headers.push((header::HeaderName::from_static("idempotency-key"), value));
    }
    r
}

#[test]
fn random_malformed_requests_never_get_a_5xx_or_a_non_json_error() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let envs = runtime.block_on(envs());
    let keys: Vec<String> = runtime.block_on(async {
        let mut keys = Vec::new();
        for env in &envs {
            let tenant = env.api.tenant("fuzz").await;
            env.api
                .send(
                    post(format!("/v1/tenants/{}/quotas/email/grant", tenant.id))
                        .bearer(ADMIN_KEY)
                        .json(&json!({"amount": 1000})),
                )
                .await
                .expect(StatusCode::OK);
            keys.push(tenant.key);
        }
        keys
    });
    let cases = if envs.len() > 1 { 150 } else { 300 };
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        ..ProptestConfig::default()
    });
    let result = runner.run(&fuzz(), |f| {
        for (env, key) in envs.iter().zip(&keys) {
            let resp = runtime.block_on(env.api.send(request(&f, key)));
            prop_assert!(
                resp.status.as_u16() < 500,
                "{}: {} {}",
                resp.what,
                resp.status,
                resp.text()
            );
            if resp.status.is_client_error() {
                let ct = resp
                    .headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                prop_assert!(
                    ct.starts_with("application/json"),
                    "{}: {} content type {ct:?}",
                    resp.what,
                    resp.status
                );
                let v: Value = serde_json::from_slice(&resp.body).unwrap_or(Value::Null);
                prop_assert!(
                    v["error"]["code"].is_string() && v["error"]["message"].is_string(),
                    "{}: {v}",
                    resp.what
                );
            }
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// The value of one sample line of a Prometheus text page.
fn sample(page: &str, name_and_labels: &str) -> Option<f64> {
    page.lines()
        .find(|l| l.starts_with(name_and_labels) && l[name_and_labels.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

async fn scrape(env: &Env) -> String {
    herald_server::metrics::refresh_gauges(&env.herald, true).await;
    env.api.send(get("/metrics")).await.text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_follow_deliveries_through_their_states() {
    for env in envs().await {
        let tenant = env.api.tenant("acme").await;
        for quota in ["email", "sms"] {
            env.api
                .send(
                    post(format!("/v1/tenants/{}/quotas/{quota}/grant", tenant.id))
                        .bearer(ADMIN_KEY)
                        .json(&json!({"amount": 10})),
                )
                .await
                .expect(StatusCode::OK);
        }
        let before = scrape(&env).await;
        let submit = |channel: &str, key: &str| {
            let to = if channel == "email" { "a@example.com" } else { "+15550100" };
            post("/v1/deliveries")
                .bearer(&tenant.key)
                .json(&json!({"operation_key": key, "channel": channel, "to": to, "payload": {"subject": "s", "text": "t"}}))
        };
        for (channel, key) in [("email", "e1"), ("email", "e2"), ("sms", "s1")] {
            env.api.send(submit(channel, key)).await.expect(StatusCode::CREATED);
        }
        env.api.send(submit("email", "e1")).await.expect(StatusCode::OK);
        let pending = scrape(&env).await;
        let name = env.backend;
        assert_eq!(
            sample(&pending, r#"herald_deliveries{state="pending"}"#),
            Some(3.0),
            "{name}\n{pending}"
        );
        assert_eq!(sample(&pending, r#"herald_deliveries{state="sent"}"#), Some(0.0), "{name}");
        let created =
            |page: &str| sample(page, r#"herald_submits_total{result="created"}"#).unwrap_or(0.0);
        let duplicate =
            |page: &str| sample(page, r#"herald_submits_total{result="duplicate"}"#).unwrap_or(0.0);
        assert_eq!(created(&pending) - created(&before), 3.0, "{name}");
        assert_eq!(duplicate(&pending) - duplicate(&before), 1.0, "{name}");
        assert_eq!(sample(&pending, "herald_quota_reserved"), Some(3.0), "{name}");
        assert!(!pending.contains(&tenant.id), "{name}: a tenant id by default:\n{pending}");

        env.worker().run_once().await.unwrap();
        let done = scrape(&env).await;
        assert_eq!(sample(&done, r#"herald_deliveries{state="pending"}"#), Some(0.0), "{name}");
        assert_eq!(sample(&done, r#"herald_deliveries{state="sent"}"#), Some(2.0), "{name}");
        assert_eq!(sample(&done, r#"herald_deliveries{state="failed"}"#), Some(1.0), "{name}");
        assert_eq!(sample(&done, "herald_quota_reserved"), Some(0.0), "{name}");
        let attempts = |page: &str, outcome: &str| {
            sample(page, &format!(r#"herald_attempts_total{{outcome="{outcome}"}}"#)).unwrap_or(0.0)
        };
        assert_eq!(attempts(&done, "sent") - attempts(&before, "sent"), 2.0, "{name}");
        assert_eq!(attempts(&done, "terminal") - attempts(&before, "terminal"), 1.0, "{name}");
        assert!(done.contains("herald_send_seconds"), "{name}: the send latency histogram");
    }
}

/// Series by tenant name every tenant to whoever reads `/metrics`: off by default, on
/// with `HERALD_METRICS_PER_TENANT`, and behind the metrics token like the rest.
#[tokio::test]
async fn metrics_by_tenant_only_when_asked_for() {
    for env in envs().await {
        let name = env.backend;
        let tenant = env.api.tenant("acme").await;
        env.api.grant(&tenant, "email", 10).await;
        env.api.submit(&tenant.key, &common::email("m1")).await.expect(StatusCode::CREATED);
        let by_tenant = format!(r#"herald_quota_reserved_by_tenant{{tenant="{}"}}"#, tenant.id);

        let default = scrape(&env).await;
        assert!(!default.contains(&tenant.id), "{name}: a tenant id by default:\n{default}");
        assert_eq!(sample(&default, "herald_quota_reserved"), Some(1.0), "{name}\n{default}");

        let per_tenant = herald_server::serve::ServeConfig {
            metrics_per_tenant: true,
            ..common::config(Some(ADMIN_KEY), None)
        };
        let page = env.api_with(&per_tenant).send(get("/metrics")).await.text();
        assert_eq!(sample(&page, &by_tenant), Some(1.0), "{name}\n{page}");
        assert_eq!(sample(&page, "herald_quota_reserved"), Some(1.0), "{name}: the total stays");
        assert_eq!(
            page.matches("# TYPE herald_quota_reserved_by_tenant gauge").count(),
            1,
            "{name}\n{page}"
        );

        let guarded = env.api_with(&herald_server::serve::ServeConfig {
            metrics_token: Some("t".into()),
            ..per_tenant
        });
        let refused = guarded.send(get("/metrics")).await;
        refused.expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
        assert!(!refused.text().contains(&tenant.id), "{name}");
        let page = guarded.send(get("/metrics").bearer("t")).await.text();
        assert_eq!(sample(&page, &by_tenant), Some(1.0), "{name}\n{page}");
    }
}

#[tokio::test]
async fn retention_prunes_final_deliveries_past_the_window_which_is_the_idempotency_window() {
    for env in envs().await {
        let name = env.backend;
        // Receipts are stamped by the database clock, so the manual clock starts at "now".
        let clock = herald::Clock::manual(jiff::Timestamp::now());
        let herald = env.herald.clone().with_clock(clock.clone());
        let tenant = herald.tenant_create("acme").await.unwrap().id;
        herald.quota_grant(tenant, "email", 10, None).await.unwrap();
        let request = |key: &str| {
            herald::SubmitRequest::new(
                tenant,
                key,
                "email",
                "a@example.com",
                json!({"subject": "s", "text": "t"}),
            )
        };
        let submit = |key: &'static str| {
            let (h, r) = (herald.clone(), request(key));
            async move {
                let hh = h.clone();
                h.transaction(|tx| {
                    let (hh, r) = (hh.clone(), r.clone());
                    Box::pin(async move { hh.submit(tx, &r).await })
                })
                .await
                .unwrap()
                .value
            }
        };
        let sent = submit("old-sent").await.delivery;
        let worker = herald::Worker::new(
            herald.clone(),
            herald::WorkerOptions::default(),
            common::channels(),
        )
        .unwrap();
        worker.run_once().await.unwrap();
        let pending = submit("old-pending").await.delivery;
        herald
            .transaction(|tx| {
                Box::pin(async move {
                    herald::once(tx, "scope", "op-1", |_tx| Box::pin(async move { Ok(()) })).await
                })
            })
            .await
            .unwrap();

        let window = Duration::from_secs(30 * 86_400);
        let retention =
            herald::Retention::new(herald.clone(), herald::RetentionOptions::keep(window));
        let pruned = |deliveries, receipts| herald::RetentionReport { deliveries, receipts };
        assert_eq!(retention.run_once().await.unwrap(), pruned(0, 0), "{name}: nothing is old yet");
        clock.advance(window + Duration::from_secs(60));
        assert_eq!(
            retention.run_once().await.unwrap(),
            pruned(1, 1),
            "{name}: the old sent delivery and the old receipt are pruned"
        );
        assert!(
            matches!(herald.delivery(tenant, sent.id).await, Err(herald::Error::NotFound)),
            "{name}"
        );
        assert!(
            matches!(herald.attempts(tenant, sent.id).await, Err(herald::Error::NotFound)),
            "{name}"
        );
        assert_eq!(
            herald.delivery(tenant, pending.id).await.unwrap().state,
            herald::DeliveryState::Pending,
            "{name}: pending is kept"
        );
        // Past the window the identity is free again: the same key is a new delivery.
        let again = submit("old-sent").await;
        assert!(!again.duplicate && again.delivery.id != sent.id, "{name}");
        // The ledger keeps its history: the charge of the pruned delivery is still spent.
        let q = herald.quotas(tenant).await.unwrap();
        assert_eq!((q[0].spent, q[0].reserved), (1, 2), "{name}");
    }
}
