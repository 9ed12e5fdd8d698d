//! The API-key check costs no database round trip for a key verified within
//! `keys::KEY_CACHE_TTL`: a key revoked elsewhere (the CLI, another server) is still
//! believed here until then, and refused after; one revoked through this server's own API
//! is refused at once. Past half the bound a key is verified again behind the request
//! that noticed, so a busy key never expires for everyone at once. On every backend.

use crate::common::{ADMIN_KEY, config, envs, get, req};
use axum::http::{Method, StatusCode};
use herald_server::keys::{Cached, KeyCache};
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_verified_key_is_believed_for_the_bound_and_a_revocation_here_at_once() {
    for env in envs().await {
        let (ttl, cache, api) = cached_api(&env);
        let tenant = api.tenant("acme").await;
        let tenant_id: herald::TenantId = tenant.id.parse().unwrap();
        let (key_id, _) = herald::api_key_parse(&tenant.key).unwrap();

        api.send(get("/v1/quotas").bearer(&tenant.key)).await.expect(StatusCode::OK);
        // Revoked by another process (here: the library, straight in the database): this
        // server has verified the key and believes it until the bound, without asking.
        assert!(env.herald.api_key_revoke(tenant_id, &key_id).await.unwrap());
        api.send(get("/v1/quotas").bearer(&tenant.key)).await.expect(StatusCode::OK);
        // A wrong secret for the cached key id is never believed.
        let forged = format!("{}x", &tenant.key[..tenant.key.len() - 1]);
        api.send(get("/v1/quotas").bearer(&forged))
            .await
            .expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
        cache.age(ttl);
        api.send(get("/v1/quotas").bearer(&tenant.key))
            .await
            .expect_error(StatusCode::UNAUTHORIZED, "unauthorized");

        // Revoked through this server's API: refused at once, while still cached.
        let created = api
            .send(req(Method::POST, format!("/v1/tenants/{}/keys", tenant.id)).bearer(ADMIN_KEY))
            .await
            .expect(StatusCode::CREATED);
        let second = created["api_key"].as_str().unwrap().to_string();
        let second_id = created["key_id"].as_str().unwrap();
        api.send(get("/v1/quotas").bearer(&second)).await.expect(StatusCode::OK);
        api.send(
            req(Method::DELETE, format!("/v1/tenants/{}/keys/{second_id}", tenant.id))
                .bearer(ADMIN_KEY),
        )
        .await
        .expect(StatusCode::OK);
        api.send(get("/v1/quotas").bearer(&second))
            .await
            .expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_half_the_bound_a_key_is_verified_again_without_keeping_anyone_waiting() {
    for env in envs().await {
        let (ttl, cache, api) = cached_api(&env);
        let tenant = api.tenant("acme").await;
        let tenant_id: herald::TenantId = tenant.id.parse().unwrap();
        let (key_id, secret) = herald::api_key_parse(&tenant.key).unwrap();
        api.send(get("/v1/quotas").bearer(&tenant.key)).await.expect(StatusCode::OK);

        // Still valid: answered from the cache, and verified anew behind the answer, so
        // the entry is good for a whole bound again.
        cache.age(ttl / 2);
        api.send(get("/v1/quotas").bearer(&tenant.key)).await.expect(StatusCode::OK);
        until(|| cache.verified_ago(key_id.as_str()).is_some_and(|ago| ago < ttl / 2)).await;
        assert!(matches!(cache.lookup(key_id.as_str(), &secret), Cached::Fresh(_)));

        // Revoked elsewhere: the request that notices half the bound is still answered
        // from the cache (within the bound), and the verification behind it forgets the key.
        assert!(env.herald.api_key_revoke(tenant_id, &key_id).await.unwrap());
        cache.age(ttl / 2);
        api.send(get("/v1/quotas").bearer(&tenant.key)).await.expect(StatusCode::OK);
        until(|| cache.tenant(key_id.as_str(), &secret).is_none()).await;
        api.send(get("/v1/quotas").bearer(&tenant.key))
            .await
            .expect_error(StatusCode::UNAUTHORIZED, "unauthorized");
    }
}

/// Waits for the verification running behind a request, which says nothing when it ends.
async fn until(done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "the key was not verified again");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The API on `env` with a key cache of 5 s the test holds.
fn cached_api(env: &crate::common::Env) -> (Duration, Arc<KeyCache>, crate::common::Api) {
    let ttl = Duration::from_secs(5);
    let cache = Arc::new(KeyCache::new(ttl));
    let mut state = herald_server::serve::state(&env.herald, &config(Some(ADMIN_KEY), None));
    state.key_cache = cache.clone();
    (ttl, cache, crate::common::Api { backend: env.backend, router: herald_server::app(state) })
}
