//! Tenant walls, authentication and the admin key on every route.

use super::*;

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
                // A server of its own per request: one client failing this often would be
                // limited (sessions.rs, `failed_keys_for_one_key_id_are_limited`).
                let resp = env.api_with(&config(Some(ADMIN_KEY), None)).send(r).await;
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
                let fresh = env.api_with(&config(Some(ADMIN_KEY), None));
                fresh.send(r).await.expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
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
