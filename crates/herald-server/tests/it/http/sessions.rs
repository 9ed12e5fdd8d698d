//! The dashboard's sessions (issue 37). Defect 1: the session secret is random, the
//! server's own, kept in the database — never derived from the admin key, so a tenant
//! holding its own cookie cannot work back to the admin key and forge an admin session;
//! shared by every server on the database; rotated by the operator, which ends every
//! session. Defect 4: sessions are rows that end. Defect 5: cookie tossing.

use crate::common::*;
use axum::http::{Method, StatusCode, header};
use base64::Engine;
use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;

const OK: StatusCode = StatusCode::OK;
const UNAUTHORIZED: StatusCode = StatusCode::UNAUTHORIZED;

fn hmac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).unwrap();
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

/// The `herald_ui=…` cookie of a sign-in with `key`.
async fn sign_in(api: &Api, key: &str) -> String {
    let r = api.send(post("/ui/api/session").json(&json!({"key": key}))).await;
    r.expect(OK);
    let set = r.headers.get(header::SET_COOKIE).unwrap().to_str().unwrap();
    set.split(';').next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn no_admin_session_can_be_forged_and_the_secret_is_the_databases() {
    for env in envs().await {
        let b = env.backend;
        let a = env.api.tenant("acme").await;
        let tenant_cookie = sign_in(&env.api, &a.key).await;
        let tenant_view = env.api.send(get("/ui/api/tenants").header("cookie", &tenant_cookie));
        tenant_view.await.expect(OK);

        // The old derivation, HMAC(admin key, a constant): what a tenant who guessed the
        // admin key offline from its own cookie would sign an admin session with.
        let derived = hmac(ADMIN_KEY.as_bytes(), &[b"herald ui session v1"]);
        let body = format!("v1.a.{}.bm9uY2Vub25jZQ", 4_000_000_000u64);
        let mac = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(hmac(&derived, &[b"session\0", body.as_bytes()]));
        let forged = format!("herald_ui={body}.{mac}");
        let r = env.api.send(get("/ui/api/tenants").header("cookie", &forged)).await;
        r.expect_error(UNAUTHORIZED, "unauthorized");

        // Another server on the same database (another router, another cache) takes the
        // session; after a rotation no server does.
        let other = Api { backend: b, router: admin_router(&env.herald) };
        other.send(get("/ui/api/tenants").header("cookie", &tenant_cookie)).await.expect(OK);
        env.herald.ui_session_secret_rotate().await.unwrap();
        let fresh = Api { backend: b, router: admin_router(&env.herald) };
        let r = fresh.send(get("/ui/api/tenants").header("cookie", &tenant_cookie)).await;
        r.expect_error(UNAUTHORIZED, "unauthorized");
        let again = sign_in(&fresh, &a.key).await;
        fresh.send(get("/ui/api/tenants").header("cookie", &again)).await.expect(OK);
    }
}

/// Guessing is limited (issue 37, defect 2): past 10 failed keys for one key id in a
/// minute, that key id is answered 429 with Retry-After, over the API and at the
/// dashboard's sign-in, without the key being checked; other keys go on; a key verified
/// before the guessing is still answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_keys_for_one_key_id_are_limited() {
    let env = envs().await.remove(0);
    let api = &env.api;
    let a = api.tenant("acme").await;
    let other = api.tenant("other").await;
    api.send(get("/v1/quotas").bearer(&a.key)).await.expect(OK);
    // hk_<16 hex: the key id>_<secret>: the same key id, another secret.
    let wrong = format!("hk_{}_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", &a.key[3..19]);
    for _ in 0..herald_server::guesses::FAILURES_ALLOWED {
        api.send(get("/v1/quotas").bearer(&wrong)).await.expect_error(UNAUTHORIZED, "unauthorized");
    }
    let limited = api.send(get("/v1/quotas").bearer(&wrong)).await;
    assert_eq!(limited.status, StatusCode::TOO_MANY_REQUESTS);
    let wait: u64 = limited.headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    assert_eq!(limited.json()["error"]["code"], "too_many_failures");
    let sign_in = api.send(post("/ui/api/session").json(&json!({"key": wrong}))).await;
    assert_eq!(sign_in.status, StatusCode::TOO_MANY_REQUESTS, "the sign-in shares the count");
    api.send(get("/v1/quotas").bearer(&a.key)).await.expect(OK);
    api.send(get("/v1/quotas").bearer(&other.key)).await.expect(OK);
}

/// Cookie tossing (issue 37, defect 5): where the browser keeps Secure cookies (loopback,
/// HTTPS behind a proxy) the session is a `__Host-` cookie, which a page on a sibling
/// subdomain cannot set; elsewhere the plain one. A request carrying two session cookies
/// is refused saying so — before, the first one was read, so a tossed cookie locked the
/// operator out ("That key is not valid.") or swapped them into another tenant.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_cookie_cannot_be_tossed_in() {
    let env = envs().await.remove(0);
    let api = &env.api;
    let a = api.tenant("acme").await;
    let b = api.tenant("globex").await;
    let signed_in = |host: &'static str, https: bool, key: String| async move {
        let mut request = post("/ui/api/session").header("host", host).json(&json!({"key": key}));
        if https {
            request = request.header("x-forwarded-proto", "https");
        }
        let r = api.send(request).await;
        r.expect(OK);
        let set: Vec<String> = r
            .headers
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_string())
            .collect();
        assert_eq!(set.len(), 2, "{set:?}");
        set
    };
    for (host, https) in [("127.0.0.1:8080", false), ("localhost", false), ("herald:8080", true)] {
        let set = signed_in(host, https, a.key.clone()).await;
        assert!(set[0].starts_with("__Host-herald_ui=v2."), "{host}: {set:?}");
        for attribute in ["; Secure", "; Path=/;", "; HttpOnly", "; SameSite=Strict"] {
            assert!(set[0].contains(attribute), "{host}: {attribute}: {set:?}");
        }
        assert!(!set[0].contains("Domain"), "{host}: {set:?}");
        assert!(set[1].starts_with("herald_ui=;") && set[1].contains("Max-Age=0"), "{set:?}");
    }
    // Plain HTTP to a name the browser would not keep a Secure cookie for.
    let set = signed_in("herald:8080", false, a.key.clone()).await;
    assert!(set[0].starts_with("herald_ui=v2.") && set[0].contains("Path=/ui"), "{set:?}");
    assert!(!set[0].contains("Secure"), "{set:?}");
    assert!(set[1].starts_with("__Host-herald_ui=;") && set[1].contains("Max-Age=0"), "{set:?}");

    let own = sign_in(api, &a.key).await;
    let tossed = sign_in(api, &b.key).await;
    let value = |c: &str| c.split_once('=').unwrap().1.to_string();
    for cookies in [
        format!("__Host-herald_ui={}; herald_ui={}", value(&own), value(&tossed)),
        format!("herald_ui={}; herald_ui={}", value(&tossed), value(&own)),
        format!("herald_ui={}; herald_ui=x", value(&own)),
    ] {
        let r = api.send(get("/ui/api/tenants").header("cookie", &cookies)).await;
        r.expect_error(StatusCode::BAD_REQUEST, "session_cookie_conflict");
        let message = r.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.contains("2 herald session cookies"), "{message}");
        // The page's first question: no one is signed in, and why.
        let r = api.send(get("/ui/api/session").header("cookie", &cookies)).await;
        let me = r.expect(OK);
        assert_eq!((me["role"].clone(), me["problem"].as_str()), (json!(null), Some(&*message)));
    }
    // One cookie, of either name, is a session; another cookie beside it is no matter.
    let one = format!("theme=dark; __Host-herald_ui={}", value(&own));
    let r = api.send(get("/ui/api/session").header("cookie", &one)).await;
    assert_eq!(r.expect(OK)["role"], "tenant");
}

/// A signed-in browser's cookie and CSRF token, signing in with `key` (and carrying
/// `cookie`, the browser's session before, if any).
async fn browser(api: &Api, key: &str, cookie: Option<&str>) -> (String, String) {
    let mut r = post("/ui/api/session").json(&json!({"key": key}));
    if let Some(cookie) = cookie {
        r = r.header("cookie", cookie);
    }
    let r = api.send(r).await;
    let v = r.expect(OK);
    let set = r.headers.get(header::SET_COOKIE).unwrap().to_str().unwrap();
    (set.split(';').next().unwrap().to_string(), v["csrf"].as_str().unwrap().to_string())
}

async fn status_of(api: &Api, cookie: &str) -> StatusCode {
    api.send(get("/ui/api/tenants").header("cookie", cookie)).await.status
}

/// Sessions are rows (issue 37, defect 4): before, sign-out only cleared the browser's
/// cookie, and a copy of it worked for its whole 8 hours. Now a session ends when it is
/// signed out, when a new sign-in from the same browser replaces it, when an operator ends
/// it (the admin any, a tenant its own tenant's), and when it goes unused for the idle
/// timeout; the live ones are listed, the admin's to the admin only.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_session_ends_when_signed_out_replaced_revoked_or_idle() {
    for env in envs().await {
        let (b, api) = (env.backend, &env.api);
        let a = api.tenant("acme").await;
        let other = api.tenant("globex").await;

        let (copied, csrf) = browser(api, &a.key, None).await;
        assert_eq!(status_of(api, &copied).await, OK, "{b}");
        let out = req(Method::DELETE, "/ui/api/session")
            .header("cookie", &copied)
            .header("x-herald-csrf", &csrf);
        assert_eq!(api.send(out).await.status, StatusCode::NO_CONTENT, "{b}");
        assert_eq!(status_of(api, &copied).await, UNAUTHORIZED, "{b}: a copy after sign-out");

        let (first, _) = browser(api, &a.key, None).await;
        let (second, _) = browser(api, &a.key, Some(&first)).await;
        assert_eq!(status_of(api, &first).await, UNAUTHORIZED, "{b}: replaced on sign-in");
        assert_eq!(status_of(api, &second).await, OK, "{b}");
        let (theirs, _) = browser(api, &other.key, None).await;

        let (admin, admin_csrf) = browser(api, ADMIN_KEY, None).await;
        let listed = |cookie: &str, query: &str| {
            let r = get(format!("/ui/api/sessions{query}")).header("cookie", cookie);
            async move {
                let v = api.send(r).await.expect(OK);
                v["sessions"].as_array().unwrap().clone()
            }
        };
        let all = listed(&admin, "").await;
        let mut roles: Vec<(&str, bool)> = all
            .iter()
            .map(|s| (s["role"].as_str().unwrap(), s["current"].as_bool().unwrap()))
            .collect();
        // Newest first, but sign-ins within one millisecond may come in either order.
        roles.sort_unstable();
        assert_eq!(roles, [("admin", true), ("tenant", false), ("tenant", false)], "{b}: {all:?}");
        let (tenant_csrf, tenant_cookie) = (browser_csrf(api, &second).await, second.clone());
        let own = listed(&tenant_cookie, "").await;
        assert_eq!(own.len(), 1, "{b}: a tenant sees its own tenant's sessions: {own:?}");
        assert_eq!(own[0]["tenant"], a.id.to_string(), "{b}");
        assert_eq!(own[0]["current"], true, "{b}");
        assert!(own[0]["created_at"].as_str().is_some_and(is_rfc3339), "{b}: {own:?}");
        let scoped = listed(&admin, &format!("?tenant={}", other.id)).await;
        assert_eq!(scoped.len(), 1, "{b}: {scoped:?}");

        // A tenant cannot end the admin's session or another tenant's: not there for it.
        let end = |cookie: &str, csrf: &str, id: &str| {
            req(Method::DELETE, format!("/ui/api/sessions/{id}"))
                .header("cookie", cookie)
                .header("x-herald-csrf", csrf)
        };
        let admin_id = all.iter().find(|s| s["role"] == "admin").unwrap()["id"].as_str().unwrap();
        let theirs_id = scoped[0]["id"].as_str().unwrap();
        for id in [admin_id, theirs_id, "nope", "ffffffffffffffffffffffffffffffff"] {
            let r = api.send(end(&tenant_cookie, &tenant_csrf, id)).await;
            r.expect_error(StatusCode::NOT_FOUND, "not_found");
        }
        assert_eq!(status_of(api, &admin).await, OK, "{b}");
        // The admin ends a tenant's session: that browser is signed out at its next call.
        let r = api.send(end(&admin, &admin_csrf, theirs_id)).await;
        assert_eq!(r.status, StatusCode::NO_CONTENT, "{b}");
        assert_eq!(status_of(api, &theirs).await, UNAUTHORIZED, "{b}: revoked");
        let r = api.send(end(&admin, &admin_csrf, theirs_id)).await;
        r.expect_error(StatusCode::NOT_FOUND, "not_found");

        // Idle: a server whose timeout is 2 s (a use is written every quarter of it); a
        // session used every 300 ms lives on, one left alone for 2.4 s is over. Wide
        // margins: a request on a loaded CI machine can take a few hundred ms.
        let mut config = config(Some(ADMIN_KEY), None);
        config.http.ui_idle = std::time::Duration::from_secs(2);
        let quick = env.api_with(&config);
        let (used, _) = browser(&quick, &a.key, None).await;
        let (left, _) = browser(&quick, &a.key, None).await;
        for _ in 0..8 {
            tokio::time::sleep(std::time::Duration::from_millis(300)).await;
            assert_eq!(status_of(&quick, &used).await, OK, "{b}: a session in use");
        }
        assert_eq!(status_of(&quick, &left).await, UNAUTHORIZED, "{b}: idle");
    }
}

/// The CSRF token of the session `cookie` names.
async fn browser_csrf(api: &Api, cookie: &str) -> String {
    let v = api.send(get("/ui/api/session").header("cookie", cookie)).await.expect(OK);
    v["csrf"].as_str().unwrap().to_string()
}
