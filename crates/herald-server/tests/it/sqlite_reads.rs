//! On SQLite a tenant's GETs never queue behind a writer: while another connection holds
//! the write lock, the API-key lookup and every read route still answer at once.

use axum::http::Method;
use herald::sqlx::{self, Connection, SqliteConnection};
use herald::{Herald, SubmitRequest};
use serde_json::{Value, json};
use std::time::Duration;

use crate::common::{ADMIN_KEY, admin_router, call};
/// Far below the runner's 10 s deadline: a read that waited for the lock would miss it.
const PROMPT: Duration = Duration::from_secs(2);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_routes_answer_while_another_connection_holds_the_write_lock() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    let herald = Herald::open(&url).await.expect("open");
    let api = admin_router(&herald);
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
