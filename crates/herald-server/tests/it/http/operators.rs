//! What operators use, on every backend: bulk replay and cancel by filter (API), the
//! release on every attempt, and the dashboard's JSON calls on a session cookie — the
//! session's flags, CSRF, the tenant wall, a revoked key ending its session. The page
//! itself is tested in a real browser (tests/ui).

use super::*;
use axum::http::header;

const FORBIDDEN: StatusCode = StatusCode::FORBIDDEN;
const UNAUTHORIZED: StatusCode = StatusCode::UNAUTHORIZED;

fn sms(k: &str) -> Value {
    json!({"operation_key": k, "channel": "sms", "to": "+15550100", "payload": {"text": "x"}})
}

fn worker_with_release(env: &Env, id: &str, release: &str) -> herald::Worker {
    let options = herald::WorkerOptions {
        id: id.into(),
        release: release.into(),
        ..herald::WorkerOptions::default()
    };
    herald::Worker::new(env.herald.clone(), options, channels()).unwrap()
}

/// Bulk replay by filter: a dry run counts and changes nothing; the run replays each
/// match as a single replay does (same id, a new reservation), skips what no longer
/// matches, and the filters (state, channel, error code, time) each narrow it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bulk_replay_and_cancel_take_what_the_filter_matches() {
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        env.api.grant(&t, "sms", 10).await;
        env.api.grant(&t, "email", 10).await;
        let mut failed = Vec::new();
        for k in ["f0", "f1", "f2"] {
            failed.push(id_of(&env.api.submit(&t.key, &sms(k)).await.expect(CREATED)));
        }
        let report = env.worker().run_once().await.unwrap();
        assert_eq!(report.failed, 3, "{b}: {report:?}");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let cut = jiff::Timestamp::now();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        let late = id_of(&env.api.submit(&t.key, &sms("f3")).await.expect(CREATED));
        env.worker().run_once().await.unwrap();
        let pending = id_of(&env.api.submit(&t.key, &email("p0")).await.expect(CREATED));
        assert_eq!(env.api.quota(&t.key, "sms").await, Some((10, 10, 0, 0)), "{b}: released");

        let bulk = |path: &'static str, body: Value| {
            let api = env.api.clone();
            let key = t.key.clone();
            async move { api.send(post(path).bearer(&key).json(&body)).await }
        };
        let dry = bulk("/v1/deliveries/replay", json!({"state": "failed", "dry_run": true}))
            .await
            .expect(OK);
        assert_eq!(
            dry,
            json!({"dry_run": true, "matched": 4, "changed": 0, "skipped": 0, "more": false,
                   "through": late}),
            "{b}: dry run, its newest match named"
        );
        // A confirmation carries the dry run's bound: nothing created after its newest
        // match, never more than it counted.
        let bounded = [
            (json!({"state": "failed", "through": failed[1], "dry_run": true}), 2, &failed[1]),
            (json!({"state": "failed", "max": 2, "dry_run": true}), 2, &failed[1]),
            (json!({"state": "failed", "through": late, "max": 9, "dry_run": true}), 4, &late),
        ];
        for (body, matched, through) in bounded {
            let v = bulk("/v1/deliveries/replay", body.clone()).await.expect(OK);
            assert_eq!((v["matched"].clone(), v["more"].clone()), (json!(matched), json!(false)));
            assert_eq!(v["through"], through.as_str(), "{b}: {body}: {v}");
        }
        assert_eq!(env.api.quota(&t.key, "sms").await, Some((10, 10, 0, 0)), "{b}: dry run");
        let narrowed = [
            (json!({"state": "failed", "channel": "email", "dry_run": true}), 0),
            (json!({"error_code": "refused", "dry_run": true}), 4),
            (json!({"error_code": "http_500", "dry_run": true}), 0),
            (json!({"state": "failed", "to": cut.to_string(), "dry_run": true}), 3),
            (json!({"state": "failed", "from": cut.to_string(), "dry_run": true}), 1),
        ];
        for (body, matched) in narrowed {
            let v = bulk("/v1/deliveries/replay", body.clone()).await.expect(OK);
            assert_eq!(v["matched"], matched, "{b}: {body}: {v}");
        }

        let run = bulk("/v1/deliveries/replay", json!({"state": "failed", "to": cut.to_string()}))
            .await
            .expect(OK);
        assert_eq!((run["matched"].as_u64(), run["changed"].as_u64()), (Some(3), Some(3)), "{b}");
        for id in &failed {
            let d = env.api.send(get(format!("/v1/deliveries/{id}")).bearer(&t.key)).await;
            let d = d.expect(OK);
            assert_eq!(
                (d["id"].as_str(), d["state"].as_str()),
                (Some(id.as_str()), Some("pending"))
            );
        }
        let d = env.api.send(get(format!("/v1/deliveries/{late}")).bearer(&t.key)).await.expect(OK);
        assert_eq!(d["state"], "failed", "{b}: outside the time range");
        assert_eq!(env.api.quota(&t.key, "sms").await, Some((10, 7, 3, 0)), "{b}: reserved again");

        // Cancel everything pending: the three replayed and the email.
        let v = bulk("/v1/deliveries/cancel", json!({"state": "pending"})).await.expect(OK);
        assert_eq!((v["matched"].as_u64(), v["changed"].as_u64()), (Some(4), Some(4)), "{b}: {v}");
        let d = env.api.send(get(format!("/v1/deliveries/{pending}")).bearer(&t.key)).await;
        assert_eq!(d.expect(OK)["state"], "cancelled", "{b}");
        assert_eq!(env.api.quota(&t.key, "sms").await, Some((10, 10, 0, 0)), "{b}: released");
        // Cancelling sent or failed ones skips them.
        let v = bulk("/v1/deliveries/cancel", json!({"state": "failed"})).await.expect(OK);
        assert_eq!((v["matched"].as_u64(), v["skipped"].as_u64()), (Some(1), Some(1)), "{b}: {v}");

        // Bad filters are 400s and change nothing.
        for body in [
            json!({"state": "lost"}),
            json!({"from": "yesterday"}),
            json!({"from": "2026-01-02T00:00:00Z", "to": "2026-01-01T00:00:00Z"}),
            json!({"error_code": ""}),
            json!({"channel": ""}),
            json!({"dry_run": "yes"}),
            json!({"colour": "red"}),
            json!({"through": "nope"}),
            json!({"max": 10_001}),
            json!({"max": -1}),
        ] {
            bulk("/v1/deliveries/replay", body).await.expect_error(BAD, "invalid_request");
        }
        // Another tenant's bulk sees none of these.
        let other = env.api.tenant("other").await;
        let v = env
            .api
            .send(post("/v1/deliveries/replay").bearer(&other.key).json(&json!({"dry_run": true})))
            .await
            .expect(OK);
        assert_eq!(v["matched"], 0, "{b}: the tenant wall");
    }
}

/// Every attempt names the release its worker ran — the transient one, the terminal one
/// and the successful one, which lives on the delivery row; a worker id recorded with
/// another release is refused before it leases anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_attempt_names_its_release() {
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        env.api.grant(&t, "email", 10).await;
        env.api.grant(&t, "sms", 10).await;
        let sent = id_of(&env.api.submit(&t.key, &email("e0")).await.expect(CREATED));
        let failed = id_of(&env.api.submit(&t.key, &sms("s0")).await.expect(CREATED));
        let r = worker_with_release(&env, "w-release", "2026.12.1").run_once().await.unwrap();
        assert_eq!((r.sent, r.failed), (1, 1), "{b}: {r:?}");
        for id in [&sent, &failed] {
            let v = env
                .api
                .send(get(format!("/v1/deliveries/{id}/attempts")).bearer(&t.key))
                .await
                .expect(OK);
            let attempts = v["attempts"].as_array().unwrap();
            assert_eq!(attempts.len(), 1, "{b}: {v}");
            assert_eq!(attempts[0]["release"], "2026.12.1", "{b}: {v}");
            assert_eq!(attempts[0]["worker"], "w-release", "{b}: {v}");
        }
        // The same id under another release: refused, and nothing leased.
        let pending = id_of(&env.api.submit(&t.key, &email("e1")).await.expect(CREATED));
        let e = worker_with_release(&env, "w-release", "2026.12.2").run_once().await.unwrap_err();
        assert!(e.to_string().contains("2026.12.1"), "{b}: {e}");
        let d = env.api.send(get(format!("/v1/deliveries/{pending}")).bearer(&t.key)).await;
        assert_eq!(d.expect(OK)["state"], "pending", "{b}: nothing leased");
        // A bad release is refused when the worker is made.
        let bad = herald::WorkerOptions { release: "a\nb".into(), ..Default::default() };
        assert!(herald::Worker::new(env.herald.clone(), bad, channels()).is_err(), "{b}");
        // The default is herald's version.
        let r = env.worker().run_once().await.unwrap();
        assert_eq!(r.sent, 1, "{b}");
        let v = env
            .api
            .send(get(format!("/v1/deliveries/{pending}/attempts")).bearer(&t.key))
            .await
            .expect(OK);
        assert_eq!(v["attempts"][0]["release"], herald::RELEASE_DEFAULT, "{b}: {v}");
    }
}

/// A signed-in browser: the cookie and the CSRF token of one session.
struct Browser {
    api: Api,
    cookie: String,
    csrf: String,
}

impl Browser {
    async fn sign_in(api: &Api, key: &str) -> (Browser, Value) {
        let r = api.send(post("/ui/api/session").json(&json!({"key": key}))).await;
        let v = r.expect(OK);
        let set = r.headers.get(header::SET_COOKIE).unwrap().to_str().unwrap().to_string();
        for flag in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
            assert!(set.contains(flag), "{}: cookie {set:?} lacks {flag}", api.backend);
        }
        assert!(!set.contains(key), "{}: the key is not in the cookie", api.backend);
        let cookie = set.split(';').next().unwrap().to_string();
        let csrf = v["csrf"].as_str().unwrap().to_string();
        (Browser { api: api.clone(), cookie, csrf }, v)
    }

    async fn get(&self, uri: &str) -> Resp {
        self.api.send(get(uri).header("cookie", &self.cookie)).await
    }

    async fn act(&self, uri: &str, body: &Value) -> Resp {
        let r = post(uri).header("cookie", &self.cookie).header("x-herald-csrf", &self.csrf);
        self.api.send(r.json(body)).await
    }
}

/// The dashboard's calls: a key becomes an HttpOnly session; reads need it, actions also
/// its CSRF token and a same-site request; a tenant session sees its own tenant only; an
/// admin session any; revoking the key ends the session; every answer carries the CSP.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn dashboard_sessions_are_scoped_and_csrf_protected() {
    for env in envs().await {
        let b = env.backend;
        let a = env.api.tenant("acme").await;
        let other = env.api.tenant("other").await;
        env.api.grant(&a, "sms", 10).await;
        env.api.grant(&other, "email", 10).await;
        let failed = id_of(&env.api.submit(&a.key, &sms("s0")).await.expect(CREATED));
        let body = json!({"operation_key": "o0", "channel": "email", "to": "x@example.com",
                          "payload": {"subject": "<script>alert(1)</script>", "text": "t"}});
        let theirs = id_of(&env.api.submit(&other.key, &body).await.expect(CREATED));
        env.worker().run_once().await.unwrap();
        env.herald.rollup_flush().await.unwrap();

        // The page and its assets, with the policy.
        let page = env.api.send(get("/ui")).await;
        assert_eq!(page.status, OK, "{b}");
        let csp = page.headers.get(header::CONTENT_SECURITY_POLICY).unwrap().to_str().unwrap();
        assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe"), "{b}: {csp}");
        for asset in ["/ui/assets/app.js", "/ui/assets/app.css"] {
            assert_eq!(env.api.send(get(asset)).await.status, OK, "{b}: {asset}");
        }

        // Signing in: a wrong key, a cross-site form, then the tenant's key.
        env.api
            .send(post("/ui/api/session").json(&json!({"key": "hk_nope"})))
            .await
            .expect_error(UNAUTHORIZED, "unauthorized");
        env.api
            .send(
                post("/ui/api/session")
                    .header("origin", "http://evil.example")
                    .json(&json!({"key": a.key})),
            )
            .await
            .expect_error(FORBIDDEN, "forbidden");
        env.api.send(get("/ui/api/overview")).await.expect_error(UNAUTHORIZED, "unauthorized");
        let nobody = env.api.send(get("/ui/api/session")).await.expect(OK);
        assert_eq!(nobody["role"], Value::Null, "{b}: signed out is an answer, not an error");
        let (tenant, who) = Browser::sign_in(&env.api, &a.key).await;
        assert_eq!(
            (who["role"].as_str(), who["tenant"]["name"].as_str()),
            (Some("tenant"), Some("acme"))
        );

        // Reads are its own tenant's; another tenant is a 404 everywhere.
        let v = tenant.get("/ui/api/overview").await.expect(OK);
        assert_eq!(v["by_state"]["failed"], 1, "{b}: {v}");
        assert_eq!(v["by_state"]["sent"], 0, "{b}: not the other tenant's: {v}");
        let series = v["series"].as_array().unwrap();
        assert_eq!(series.len(), 60, "{b}");
        assert_eq!(series.iter().map(|m| m["failed"].as_i64().unwrap()).sum::<i64>(), 1, "{b}");
        let tenants = tenant.get("/ui/api/tenants").await.expect(OK);
        assert_eq!(tenants["tenants"].as_array().unwrap().len(), 1, "{b}: {tenants}");
        for uri in [
            format!("/ui/api/deliveries?tenant={}", other.id),
            format!("/ui/api/quotas?tenant={}", other.id),
            format!("/ui/api/overview?tenant={}", other.id),
            format!("/ui/api/deliveries/{theirs}"),
        ] {
            tenant.get(&uri).await.expect_error(NOT_FOUND, "not_found");
        }
        let list = tenant.get("/ui/api/deliveries").await.expect(OK);
        assert_eq!(
            ids(list["deliveries"].as_array().unwrap()),
            std::slice::from_ref(&failed),
            "{b}"
        );
        let found = tenant.get("/ui/api/deliveries?q=s0").await.expect(OK);
        assert_eq!(
            ids(found["deliveries"].as_array().unwrap()),
            std::slice::from_ref(&failed),
            "{b}: by key"
        );
        // A key no delivery can have (NUL, which PostgreSQL text cannot hold) finds
        // nothing, never a 500 (issue 32).
        for q in ["s0%00x", "%00", "s%0A0"] {
            let none = tenant.get(&format!("/ui/api/deliveries?q={q}")).await.expect(OK);
            assert_eq!(none["deliveries"], serde_json::json!([]), "{b}: {q}");
        }
        let one = tenant.get(&format!("/ui/api/deliveries/{failed}")).await.expect(OK);
        assert_eq!(one["attempts"][0]["outcome"], "terminal", "{b}: {one}");
        assert_eq!(one["payload"], r#"{"text": "x"}"#.replace(' ', ""), "{b}: {one}");
        let q = tenant.get("/ui/api/quotas").await.expect(OK);
        assert_eq!(q["quotas"][0]["granted"], 10, "{b}: {q}");
        assert!(q["journal"].as_array().unwrap().len() >= 3, "{b}: grant, reserve, release");

        // Actions need the CSRF token, from this session, and a same-site request.
        let replay = format!("/ui/api/deliveries/{failed}/replay");
        let bare = post(&replay).header("cookie", &tenant.cookie).json(&json!({}));
        env.api.send(bare).await.expect_error(FORBIDDEN, "csrf");
        let wrong = post(&replay)
            .header("cookie", &tenant.cookie)
            .header("x-herald-csrf", "forged")
            .json(&json!({}));
        env.api.send(wrong).await.expect_error(FORBIDDEN, "csrf");
        let cross = post(&replay)
            .header("cookie", &tenant.cookie)
            .header("x-herald-csrf", &tenant.csrf)
            .header("sec-fetch-site", "cross-site")
            .json(&json!({}));
        env.api.send(cross).await.expect_error(FORBIDDEN, "csrf");
        let d = env.api.send(get(format!("/v1/deliveries/{failed}")).bearer(&a.key)).await;
        assert_eq!(d.expect(OK)["state"], "failed", "{b}: nothing replayed yet");
        let v = tenant
            .act("/ui/api/bulk", &json!({"action": "replay", "state": "failed", "dry_run": true}))
            .await
            .expect(OK);
        assert_eq!((v["matched"].as_u64(), v["changed"].as_u64()), (Some(1), Some(0)), "{b}");
        let v = tenant.act(&replay, &json!({})).await.expect(OK);
        assert_eq!(v["delivery"]["state"], "pending", "{b}: {v}");
        assert_eq!(v["delivery"]["id"], failed.as_str(), "{b}: same delivery");
        let bulk_other = json!({"action": "cancel", "tenant": other.id, "dry_run": true});
        tenant.act("/ui/api/bulk", &bulk_other).await.expect_error(NOT_FOUND, "not_found");

        // The admin sees every tenant, and names one.
        let (admin, who) = Browser::sign_in(&env.api, ADMIN_KEY).await;
        assert_eq!(who["role"], "admin", "{b}");
        let all = admin.get("/ui/api/overview").await.expect(OK);
        assert_eq!(all["by_state"]["sent"], 1, "{b}: every tenant: {all}");
        let tenants = admin.get("/ui/api/tenants").await.expect(OK);
        assert_eq!(tenants["tenants"].as_array().unwrap().len(), 2, "{b}");
        let theirs_page = admin.get(&format!("/ui/api/deliveries/{theirs}")).await.expect(OK);
        let payload = theirs_page["payload"].as_str().unwrap();
        assert!(
            payload.contains("<script>"),
            "{b}: the payload as written, for the page to show as text"
        );
        // Without a tenant the admin lists every tenant's, narrowed by the latest error
        // code and by prefixes of the key and the recipient.
        let every = admin.get("/ui/api/deliveries").await.expect(OK);
        let mut listed = ids(every["deliveries"].as_array().unwrap());
        listed.sort();
        let mut both = vec![failed.clone(), theirs.clone()];
        both.sort();
        assert_eq!(listed, both, "{b}");
        for (query, expect) in [
            ("error_code=refused", vec![failed.clone()]),
            ("key_prefix=o", vec![theirs.clone()]),
            ("to_prefix=x%40example", vec![theirs.clone()]),
            ("to_prefix=%2B1555", vec![failed.clone()]),
            ("key_prefix=zz", vec![]),
            ("error_code=refused&key_prefix=o", vec![]),
        ] {
            let v = admin.get(&format!("/ui/api/deliveries?{query}")).await.expect(OK);
            assert_eq!(ids(v["deliveries"].as_array().unwrap()), expect, "{b}: {query}");
        }
        let theirs_list = admin.get(&format!("/ui/api/deliveries?tenant={}", other.id)).await;
        assert_eq!(ids(theirs_list.expect(OK)["deliveries"].as_array().unwrap()), [theirs], "{b}");

        // Revoking the key the tenant session was made from ends it.
        let key_id = a.key.split('_').nth(1).unwrap();
        env.api
            .send(
                req(Method::DELETE, format!("/v1/tenants/{}/keys/{key_id}", a.id))
                    .bearer(ADMIN_KEY),
            )
            .await
            .expect(OK);
        tenant.get("/ui/api/overview").await.expect_error(UNAUTHORIZED, "unauthorized");
        // Signing out clears the cookie.
        let out = env
            .api
            .send(
                req(Method::DELETE, "/ui/api/session")
                    .header("cookie", &admin.cookie)
                    .header("x-herald-csrf", &admin.csrf),
            )
            .await;
        assert_eq!(out.status, StatusCode::NO_CONTENT, "{b}");
        let cleared = out.headers.get(header::SET_COOKIE).unwrap().to_str().unwrap();
        assert!(cleared.contains("Max-Age=0"), "{b}: {cleared}");
        // A forged or edited cookie is no session.
        let forged = admin.cookie.replace("v1.a.", "v1.a.1");
        let r = env.api.send(get("/ui/api/overview").header("cookie", &forged)).await;
        r.expect_error(UNAUTHORIZED, "unauthorized");
    }
}

/// Every answer carries the security headers, the framework's own included: a 404, a 405
/// and a 414 under `/ui` as well as the page (issue 37, defect 6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_under_ui_carries_the_security_headers() {
    let env = envs().await.remove(0);
    let long = format!("/ui/api/deliveries?x={}", "a".repeat(herald_server::listen::URI_BYTES_MAX));
    for (r, status) in [
        (get("/ui"), StatusCode::OK),
        (get("/ui/nowhere"), StatusCode::NOT_FOUND),
        (req(Method::DELETE, "/ui"), StatusCode::METHOD_NOT_ALLOWED),
        (get(long), StatusCode::URI_TOO_LONG),
        (get("/v1/nowhere"), StatusCode::NOT_FOUND),
    ] {
        let what = format!("{} {}", r.method, &r.uri[..r.uri.len().min(40)]);
        let answer = env.api.send(r).await;
        assert_eq!(answer.status, status, "{what}");
        let h = &answer.headers;
        let csp = h.get(header::CONTENT_SECURITY_POLICY).map(|v| v.to_str().unwrap());
        assert!(csp.is_some_and(|c| c.contains("frame-ancestors 'none'")), "{what}: {h:?}");
        assert_eq!(h.get(header::X_CONTENT_TYPE_OPTIONS).unwrap(), "nosniff", "{what}");
        assert_eq!(h.get(header::X_FRAME_OPTIONS).unwrap(), "DENY", "{what}");
    }
}

/// The read-only operator (`HERALD_VIEWER_KEY`): its session reads what the admin reads —
/// every tenant, the incident console, the audit log — and every action is a 403
/// `read_only` that changes nothing; it may still sign out; its sign-in is logged as the
/// `viewer`'s.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_viewer_reads_everything_and_acts_on_nothing() {
    for env in envs().await {
        let b = env.backend;
        let (a, other) = (env.api.tenant("acme").await, env.api.tenant("other").await);
        env.api.grant(&a, "sms", 10).await;
        env.api.grant(&other, "email", 10).await;
        let failed = id_of(&env.api.submit(&a.key, &sms("s0")).await.expect(CREATED));
        env.api.submit(&other.key, &email("e0")).await.expect(CREATED);
        env.worker().run_once().await.unwrap();

        let (viewer, who) = Browser::sign_in(&env.api, VIEWER_KEY).await;
        assert_eq!(who["role"], "viewer", "{b}: {who}");
        let tenants = viewer.get("/ui/api/tenants").await.expect(OK);
        assert_eq!(tenants["tenants"].as_array().unwrap().len(), 2, "{b}: {tenants}");
        let every = viewer.get("/ui/api/deliveries").await.expect(OK);
        assert_eq!(every["deliveries"].as_array().unwrap().len(), 2, "{b}");
        viewer.get(&format!("/ui/api/deliveries/{failed}")).await.expect(OK);
        for (since, expect) in
            [("2000-01-01T00:00:00Z", vec![failed.clone()]), ("9000-01-01T00:00:00Z", vec![])]
        {
            let v =
                viewer.get(&format!("/ui/api/deliveries?failed_since={since}")).await.expect(OK);
            assert_eq!(
                ids(v["deliveries"].as_array().unwrap()),
                expect,
                "{b}: failed since {since}"
            );
        }
        let failures = viewer.get("/ui/api/failures").await.expect(OK);
        assert_eq!(failures["errors"][0]["key"], "refused", "{b}: {failures}");
        viewer.get("/ui/api/audit").await.expect(OK);

        let forbidden = StatusCode::FORBIDDEN;
        let acts = [
            (format!("/ui/api/deliveries/{failed}/replay"), json!({})),
            (format!("/ui/api/deliveries/{failed}/cancel"), json!({})),
            ("/ui/api/bulk".to_string(), json!({"action": "replay", "state": "failed"})),
            ("/ui/api/holds".to_string(), json!({"kind": "channel", "value": "sms"})),
        ];
        for (uri, body) in &acts {
            viewer.act(uri, body).await.expect_error(forbidden, "read_only");
        }
        let d = env.api.send(get(format!("/v1/deliveries/{failed}")).bearer(&a.key)).await;
        assert_eq!(d.expect(OK)["state"], "failed", "{b}: nothing was replayed");
        let holds = env.api.send(get("/v1/holds").bearer(ADMIN_KEY)).await.expect(OK);
        assert_eq!(holds, json!({"holds": []}), "{b}: nothing was held");
        // The viewer key is no API key.
        env.api
            .send(get("/v1/holds").bearer(VIEWER_KEY))
            .await
            .expect_error(UNAUTHORIZED, "unauthorized");

        let log = env.api.send(get("/v1/audit").bearer(ADMIN_KEY)).await.expect(OK);
        let sign_in = log["entries"].as_array().unwrap().iter().find(|e| e["action"] == "sign_in");
        assert_eq!(sign_in.unwrap()["actor"], "viewer", "{b}: {log}");
        let out = req(axum::http::Method::DELETE, "/ui/api/session");
        let out = out.header("cookie", &viewer.cookie).header("x-herald-csrf", &viewer.csrf);
        assert_eq!(env.api.send(out).await.status, StatusCode::NO_CONTENT, "{b}: it signs out");
        viewer.get("/ui/api/tenants").await.expect_error(UNAUTHORIZED, "unauthorized");
    }
}

/// A confirmed bulk action from the dashboard can run as a job of the server: the call
/// answers 202 with its id at once, and the job's counts are read until it is done —
/// by the session's tenant or the admin, a 404 to anyone else.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bulk_action_runs_as_a_job_whose_progress_the_page_reads() {
    for env in envs().await {
        let b = env.backend;
        let (a, other) = (env.api.tenant("acme").await, env.api.tenant("other").await);
        env.api.grant(&a, "sms", 10).await;
        for k in ["j0", "j1", "j2"] {
            env.api.submit(&a.key, &sms(k)).await.expect(CREATED);
        }
        env.worker().run_once().await.unwrap();
        let (tenant, _) = Browser::sign_in(&env.api, &a.key).await;
        let body = json!({"action": "replay", "state": "failed", "max": 3, "background": true});
        let started = tenant.act("/ui/api/bulk", &body).await.expect(StatusCode::ACCEPTED);
        let job = format!("/ui/api/bulk/{}", started["job"].as_str().unwrap());
        let done = tokio::time::timeout(std::time::Duration::from_secs(10), async {
            loop {
                let v = tenant.get(&job).await.expect(OK);
                if v["done"] == true {
                    return v;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("the job ends");
        assert_eq!(
            (done["expected"].clone(), done["changed"].clone()),
            (json!(3), json!(3)),
            "{b}: {done}"
        );
        assert_eq!(done["result"]["changed"], 3, "{b}: {done}");
        let (theirs, _) = Browser::sign_in(&env.api, &other.key).await;
        theirs.get(&job).await.expect_error(NOT_FOUND, "not_found");
        let (admin, _) = Browser::sign_in(&env.api, ADMIN_KEY).await;
        admin.get(&job).await.expect(OK);
        // A bad filter is the call's answer, not a job's.
        let bad = json!({"action": "replay", "state": "nope", "background": true});
        tenant.act("/ui/api/bulk", &bad).await.expect_error(BAD, "invalid_request");
    }
}
