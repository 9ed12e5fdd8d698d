//! On SQLite a tenant's GETs never queue behind a writer: while another connection holds
//! the write lock, the API-key lookup and every read route still answer at once.

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, header};
use herald::sqlx::{self, Connection, SqliteConnection};
use herald::{Herald, SubmitRequest};
use herald_server::serve::ServeConfig;
use serde_json::{Value, json};
use std::time::Duration;
use tower::ServiceExt as _;

const ADMIN_KEY: &str = "admin-secret";
/// Far below the runner's 10 s deadline: a read that waited for the lock would miss it.
const PROMPT: Duration = Duration::from_secs(2);

fn router(herald: &Herald) -> Router {
    let config = ServeConfig {
        listen: None,
        admin_key: Some(ADMIN_KEY.into()),
        metrics_token: None,
        metrics_per_tenant: false,
        http: herald_server::listen::HttpOptions::default(),
        worker: None,
        reconciler: None,
        retention: None,
        channels: Vec::new(),
    };
    herald_server::app(herald_server::serve::state(herald, &config))
}

async fn call(router: &Router, method: Method, uri: &str, key: &str, body: Value) -> (u16, Value) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header(header::AUTHORIZATION, format!("Bearer {key}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = router.clone().oneshot(request).await.unwrap();
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20).await.unwrap();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_routes_answer_while_another_connection_holds_the_write_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    let herald = Herald::open(&url).await.expect("open");
    let api = router(&herald);
    let body = json!({"name": "acme"});
    let (status, tenant) = call(&api, Method::POST, "/v1/tenants", ADMIN_KEY, body).await;
    assert_eq!(status, 201, "{tenant}");
    let key = tenant["api_key"].as_str().unwrap().to_string();
    let tenant_id: herald::TenantId = tenant["id"].as_str().unwrap().parse().unwrap();
    herald.quota_grant(tenant_id, "email", 10, None).await.unwrap();
    let payload = json!({"subject": "s", "text": "t"});
    let req = SubmitRequest::new(tenant_id, "order-17", "email", "a@example.com", payload);
    let id = herald.submit_alone(&req).await.unwrap().delivery.id;

    // Another connection takes the write lock and keeps it.
    let mut writer = SqliteConnection::connect(&url).await.expect("connect");
    sqlx::raw_sql("BEGIN IMMEDIATE; UPDATE quota_accounts SET granted = granted")
        .execute(&mut writer)
        .await
        .expect("hold the write lock");

    let uris = [
        "/v1/deliveries".to_string(),
        "/v1/deliveries?state=pending&limit=1".to_string(),
        format!("/v1/deliveries/{id}"),
        format!("/v1/deliveries/{id}/attempts"),
        "/v1/quotas".to_string(),
    ];
    for uri in &uris {
        let answer = tokio::time::timeout(PROMPT, call(&api, Method::GET, uri, &key, Value::Null));
        let (status, body) = answer
            .await
            .unwrap_or_else(|_| panic!("GET {uri} waited for the write lock (over {PROMPT:?})"));
        assert_eq!(status, 200, "GET {uri}: {body}");
    }

    sqlx::raw_sql("ROLLBACK").execute(&mut writer).await.expect("rollback");
    writer.close().await.ok();
    herald.close().await;
}
