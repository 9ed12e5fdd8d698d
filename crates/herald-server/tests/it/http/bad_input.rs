//! Bad input is always a JSON 4xx, never plain text, never a 5xx.

use super::*;

/// A refused field is named, with the reason the SQL API and the PHP package give for it
/// (README, "Refusal codes"); NUL, which some drivers cut a string at, is refused in every
/// field that names something; a batch item's refusal says the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_field_is_named_with_the_shared_reason() {
    for env in envs().await {
        let b = env.backend;
        let t = env.api.tenant("acme").await;
        env.api.grant(&t, "email", 100).await;
        let with = |extra: Value| {
            let mut v = email("case");
            for (k, x) in extra.as_object().unwrap() {
                v[k] = x.clone();
            }
            v
        };
        let cases = [
            (
                "NUL in operation_key",
                with(json!({"operation_key": "order-7\u{0}-a"})),
                "operation_key/control_character",
            ),
            ("NUL in to", with(json!({"to": "ada@example.com\u{0}"})), "to/control_character"),
            (
                "RLO in operation_key",
                with(json!({"operation_key": "order-17\u{202E}gpj.exe"})),
                "operation_key/control_character",
            ),
            (
                "LRM in quota_key",
                with(json!({"quota_key": "email\u{200E}"})),
                "quota_key/control_character",
            ),
            (
                "NUL in quota_key",
                with(json!({"quota_key": "email\u{0}x"})),
                "quota_key/control_character",
            ),
            (
                "NUL in the payload",
                with(json!({"payload": {"subject": "s\u{0}", "text": "t"}})),
                "payload/nul",
            ),
            ("empty operation_key", with(json!({"operation_key": ""})), "operation_key/empty"),
            (
                "operation_key too long",
                with(json!({"operation_key": "k".repeat(256)})),
                "operation_key/too_long",
            ),
            (
                "cost over COST_MAX",
                with(json!({"cost": herald_core::limits::COST_MAX + 1})),
                "cost/out_of_range",
            ),
            ("max_attempts 0", with(json!({"max_attempts": 0})), "max_attempts/out_of_range"),
            ("bad send_at", with(json!({"send_at": "tomorrow"})), "send_at/not_a_time"),
            (
                "send_at past 9999-12-30",
                with(json!({"send_at": "9999-12-31T23:59:59Z"})),
                "send_at/out_of_range",
            ),
            (
                "a date that does not exist",
                with(json!({"send_at": "2030-02-30T00:00:00Z"})),
                "send_at/not_a_time",
            ),
            ("unknown channel", with(json!({"channel": "pigeon"})), "channel/not_configured"),
            ("not an address", with(json!({"to": "nobody"})), "to/not_an_address"),
            (
                "not an email payload",
                with(json!({"payload": {"text": "t"}})),
                "payload/not_an_email",
            ),
            ("payload not an object", with(json!({"payload": 1})), "payload/not_an_email"),
        ];
        for (name, body, expected) in &cases {
            let resp = env.api.submit(&t.key, body).await;
            assert_eq!(resp.status, BAD, "{b}: {name}: {}", resp.text());
            assert_eq!(refusal(&format!("{b}: {name}"), &resp.json()), *expected, "{b}: {name}");
        }
        // The payload is kept as sent, so a duplicate key reaches herald's JSON rules.
        let raw = br#"{"operation_key":"dup","channel":"email","to":"a@b.c","payload":{"subject":"s","subject":"t","text":"x"}}"#;
        let resp = env
            .api
            .send(post("/v1/deliveries").bearer(&t.key).raw("application/json", raw.to_vec()))
            .await;
        assert_eq!(refusal(&format!("{b}: raw"), &resp.json()), "payload/duplicate_key", "{b}");
        // A batch item's refusal carries the same field and reason.
        let items = json!({"deliveries": cases.iter().map(|(_, body, _)| body.clone()).collect::<Vec<_>>()});
        let v =
            env.api.send(post("/v1/deliveries/batch").bearer(&t.key).json(&items)).await.expect(OK);
        let got: Vec<String> = v["results"]
            .as_array()
            .unwrap_or_else(|| panic!("{b}: {v}"))
            .iter()
            .map(|r| {
                format!(
                    "{}/{}",
                    r["error"]["field"].as_str().unwrap_or("-"),
                    r["error"]["reason"].as_str().unwrap_or("-")
                )
            })
            .collect();
        let expected: Vec<&str> = cases.iter().map(|(_, _, e)| *e).collect();
        assert_eq!(got, expected, "{b}: {v}");
        assert!(env.api.list(&t.key, "").await.is_empty(), "{b}: nothing created");
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
            "x".repeat(herald_server::SUBMIT_BODY_BYTES_MAX + 1)
        );
        let big_email = "x".repeat(herald_core::limits::EMAIL_PAYLOAD_BYTES_MAX);
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
            ("webhook payload over 64 KiB, body under the limit", json_ct, with(json!({"channel": "webhook", "to": "https://example.com/hooks", "payload": {"blob": big_payload}})), BAD, "invalid_request"),
            ("email payload over 4 MiB, body under the limit", json_ct, with(json!({"payload": {"subject": "s", "text": big_email}})), BAD, "invalid_request"),
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
        // A query parameter a route does not take is refused on every /v1 route, as on the
        // list (issue 37): a typo is never silently another request.
        // (Refused before any route reads the id: no delivery needs to exist.)
        let id = "01a24276-14b2-79c1-a767-bf32a6822428";
        for uri in [
            "/v1/deliveries?stat=failed".to_string(),
            "/v1/quotas?tenant=other".to_string(),
            format!("/v1/deliveries/{id}?fields=all"),
            format!("/v1/deliveries/{id}/attempts?limit=1"),
        ] {
            let r = env.api.send(get(&uri).bearer(&t.key)).await;
            r.expect_error(BAD, "invalid_request");
        }
        env.api
            .send(post("/v1/deliveries?dry_run=true").bearer(&t.key).json(&email("q2")))
            .await
            .expect_error(BAD, "invalid_request");
        // After authentication, as every check: without a key it is a 401.
        let r = env.api.send(get("/v1/quotas?tenant=other")).await;
        r.expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
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
