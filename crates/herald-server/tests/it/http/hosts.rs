//! DNS rebinding (issue 37, defect 3): a page whose name was made to resolve to a loopback
//! herald sends `Host: <its name>`; herald answers only for loopback names, IP addresses
//! and the names the operator allowed, so that page gets a 421 on every route — the
//! metrics, the sign-in, the admin API — and a page on `HERALD_PUBLIC_URL`'s origin may
//! sign in through a proxy that gives herald another `Host`.

use crate::common::*;
use axum::http::StatusCode;
use herald_server::hosts::AllowedHosts;
use serde_json::json;

const MISDIRECTED: StatusCode = StatusCode::MISDIRECTED_REQUEST;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rebound_name_gets_nothing_and_allowed_names_get_answers() {
    let env = envs().await.remove(0);
    let (b, api) = (env.backend, &env.api);
    let tenant = api.tenant("acme").await;
    for host in ["attacker.example", "attacker.example:8080", "localhost.attacker.example"] {
        for r in [
            get("/metrics"),
            get("/healthz"),
            get("/ui"),
            post("/ui/api/session").json(&json!({"key": tenant.key})),
            post("/v1/tenants").bearer(ADMIN_KEY).json(&json!({"name": "minted"})),
        ] {
            let what = format!("{b}: {} {} Host: {host}", r.method, r.uri);
            let answer = api.send(r.header("host", host)).await;
            assert_eq!(answer.status, MISDIRECTED, "{what}");
            assert_eq!(answer.json()["error"]["code"], "host_not_allowed", "{what}");
        }
    }
    for host in ["localhost:8080", "127.0.0.1:8080", "[::1]:8080", "10.1.2.3"] {
        api.send(get("/healthz").header("host", host)).await.expect(StatusCode::OK);
    }

    // Behind a proxy: the public name is allowed, and a page on the public origin signs in
    // while herald sees the proxy's Host.
    let mut config = config(Some(ADMIN_KEY), None);
    config.http.allowed_hosts =
        AllowedHosts::parse(Some("herald.internal"), Some("https://herald.example.com")).unwrap();
    let proxied = Api {
        backend: b,
        router: herald_server::app(herald_server::serve::state(&env.herald, &config)),
    };
    for host in ["herald.example.com", "herald.internal:8080"] {
        proxied.send(get("/healthz").header("host", host)).await.expect(StatusCode::OK);
    }
    let sign_in = post("/ui/api/session")
        .header("host", "herald.internal:8080")
        .header("origin", "https://herald.example.com")
        .json(&json!({"key": tenant.key}));
    proxied.send(sign_in).await.expect(StatusCode::OK);
    let elsewhere = post("/ui/api/session")
        .header("host", "herald.internal:8080")
        .header("origin", "https://attacker.example")
        .json(&json!({"key": tenant.key}));
    proxied.send(elsewhere).await.expect_error(StatusCode::FORBIDDEN, "forbidden");
}
