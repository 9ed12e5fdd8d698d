//! A database that cannot answer now is 503 `busy` with `Retry-After`, never 500: an empty
//! connection pool (every connection held elsewhere), and pooled connections that the
//! network broke while they sat idle (replaced and the request retried, so the caller
//! never sees it).

use crate::common;
use crate::common::{ADMIN_KEY, Api, config, envs, get, post};
use axum::http::StatusCode;
use herald::sqlx;
use herald::{Herald, StoreOptions};
use herald_faults::FaultProxy;
use serde_json::json;
use std::time::Duration;

fn submit(key: &str, operation_key: &str) -> common::Req {
    post("/v1/deliveries").bearer(key).json(&json!({
        "operation_key": operation_key,
        "channel": "sms",
        "to": "+15550100",
        "payload": {"n": 1},
    }))
}

#[tokio::test]
async fn an_empty_pool_is_503_busy_with_retry_after_and_changes_nothing() {
    for env in envs().await {
        let tenant = env.api.tenant("acme").await;
        let path = format!("/v1/tenants/{}/quotas/sms/grant", tenant.id);
        env.api.send(post(&path).bearer(ADMIN_KEY).json(&json!({"amount": 5}))).await;

        // A second herald on the same database with two connections, both held.
        let options = StoreOptions {
            connections_max: 2,
            connect_timeout: Duration::from_millis(300),
            ..StoreOptions::default()
        };
        let small = Herald::open_with(env.url(), &options).await.unwrap();
        let api = Api {
            backend: env.backend,
            router: herald_server::app(herald_server::serve::state(
                &small,
                &config(Some(ADMIN_KEY), None),
            )),
        };
        let held = (small.store().acquire().await.unwrap(), small.store().acquire().await.unwrap());

        for request in [submit(&tenant.key, "busy-1"), get("/v1/deliveries").bearer(&tenant.key)] {
            let resp = api.send(request).await;
            resp.expect_error(StatusCode::SERVICE_UNAVAILABLE, "busy");
            assert_eq!(
                resp.headers.get("retry-after").map(|v| v.to_str().unwrap()),
                Some("1"),
                "{}: {}",
                resp.what,
                resp.text()
            );
        }
        drop(held);
        // Nothing was claimed: the same submit now creates the delivery.
        let created = api.send(submit(&tenant.key, "busy-1")).await.expect(StatusCode::CREATED);
        assert_eq!(created["duplicate"], false, "{}: {created}", env.backend);
    }
}

#[tokio::test]
async fn pooled_connections_reset_while_idle_are_replaced_and_the_request_retried() {
    let Some(base) = common::postgres_url() else { return };
    // The environment's schema, reached through a proxy that can reset every connection.
    let env = envs().await.into_iter().find(|e| e.backend == "postgres").unwrap();
    let tenant = env.api.tenant("acme").await;
    let path = format!("/v1/tenants/{}/quotas/sms/grant", tenant.id);
    env.api.send(post(&path).bearer(ADMIN_KEY).json(&json!({"amount": 100}))).await;
    let upstream = tokio::net::lookup_host(authority(&base)).await.unwrap().next().unwrap();
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let url = env.url().replacen(authority(&base), &proxy.addr().to_string(), 1);
    let herald = Herald::open(&url).await.unwrap();
    let api = Api {
        backend: "postgres",
        router: herald_server::app(herald_server::serve::state(
            &herald,
            &config(Some(ADMIN_KEY), None),
        )),
    };
    for round in 0..5 {
        // Warm the pool with several connections, then break every one of them.
        let mut warm = tokio::task::JoinSet::new();
        for i in 0..4 {
            let (api, key) = (api.clone(), tenant.key.clone());
            warm.spawn(async move { api.send(submit(&key, &format!("warm-{round}-{i}"))).await });
        }
        while let Some(resp) = warm.join_next().await {
            resp.unwrap().expect(StatusCode::CREATED);
        }
        assert!(proxy.reset_all() > 0, "the pool should hold open connections");
        // The resets happen in the proxy's connection tasks: wait until every one is done,
        // so the pool's connections are broken before the next request rather than while
        // its statement is in flight (which is an unknown outcome, rightly not retried).
        let by = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while proxy.open() > 0 {
            assert!(std::time::Instant::now() < by, "the proxy's resets did not finish");
            tokio::task::yield_now().await;
        }
        let get = api.send(get("/v1/deliveries").bearer(&tenant.key)).await;
        get.expect(StatusCode::OK);
        let resp = api.send(submit(&tenant.key, &format!("after-reset-{round}"))).await;
        resp.expect(StatusCode::CREATED);
    }
}

/// `host:port` of a `postgres://user@host:port/db` URL.
fn authority(url: &str) -> &str {
    let start = url.find('@').map_or_else(|| url.find("://").unwrap() + 3, |at| at + 1);
    let end = url[start..].find('/').map_or(url.len(), |e| start + e);
    &url[start..end]
}

#[tokio::test]
async fn a_transaction_whose_client_went_silent_gives_its_locks_back() {
    let Some(base) = common::postgres_url() else { return };
    let env = envs().await.into_iter().find(|e| e.backend == "postgres").unwrap();
    let upstream = tokio::net::lookup_host(authority(&base)).await.unwrap().next().unwrap();
    let proxy = FaultProxy::start(upstream).await.unwrap();
    let url = env.url().replacen(authority(&base), &proxy.addr().to_string(), 1);
    let options = StoreOptions { connections_max: 2, ..StoreOptions::default() };
    let herald = Herald::open_with(&url, &options).await.unwrap();
    let tenant = herald.tenant_create("acme").await.unwrap().id;

    // A transaction takes a row lock, then its connection goes silent (as behind a
    // firewall that dropped the flow: no FIN, no RST) before it can end.
    let locked = std::sync::Arc::new(tokio::sync::Notify::new());
    let signal = locked.clone();
    let silenced = async {
        locked.notified().await;
        assert!(proxy.blackhole_all() > 0, "the transaction's connection should be open");
    };
    let options =
        herald::TxOptions { deadline: Duration::from_secs(1), ..herald::TxOptions::default() };
    let transaction = herald.transaction_with(&options, |tx| {
        let signal = signal.clone();
        Box::pin(async move {
            let herald::Conn::Postgres(c) = tx.conn() else { unreachable!() };
            sqlx::query("SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE")
                .bind(tenant.as_uuid())
                .execute(&mut *c)
                .await?;
            signal.notify_one();
            std::future::pending::<()>().await;
            Ok(())
        })
    });
    let (result, ()) = tokio::join!(transaction, silenced);
    assert!(matches!(result, Err(herald::Error::DeadlineExceeded { .. })), "{result:?}");

    // The server ends that transaction itself, soon after its bound, and the lock is free
    // for others — not when TCP finally gives up on the silent connection, hours later.
    let mut direct = <sqlx::PgConnection as sqlx::Connection>::connect(env.url()).await.unwrap();
    sqlx::query("SET lock_timeout = '10s'").execute(&mut direct).await.unwrap();
    let started = std::time::Instant::now();
    let freed = sqlx::query("SELECT 1 FROM tenants WHERE id = $1 FOR UPDATE")
        .bind(tenant.as_uuid())
        .execute(&mut direct)
        .await;
    let waited = started.elapsed();
    // Before any assertion: reset the silent connections (and let the proxy's tasks do it),
    // or a failing test would leave the lock held and its schema's DROP waiting forever.
    proxy.reset_all();
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
    if let Err(e) = freed {
        panic!("the row is still locked after {waited:?}: {e}");
    }
    assert!(waited < Duration::from_secs(8), "freed after {waited:?}");
}
