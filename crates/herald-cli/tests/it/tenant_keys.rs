//! `herald tenant create` writes the tenant and its first key in one transaction (a
//! failure leaves nothing, so the retry succeeds), and keys minted by the CLI and over
//! HTTP have one format and authenticate alike.

use herald::Herald;
use herald::sqlx;
use herald_server::serve::ServeConfig;
use serde_json::{Value, json};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_herald");
const ADMIN_KEY: &str = "admin-secret";

/// `herald ARGS --db DB --json`, with none of the runner's `HERALD_*` settings:
/// (success, stdout as JSON or null, stderr).
fn herald_cli(db: &str, args: &[&str]) -> (bool, Value, String) {
    let mut cmd = Command::new(BIN);
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("HERALD_") {
            cmd.env_remove(&key);
        }
    }
    let out = cmd.args(args).args(["--db", db, "--json"]).output().expect("run herald");
    let stdout = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    (out.status.success(), stdout, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `hk_` + 16 hex digits (the key id) + `_` + 43 characters of unpadded base64url.
fn assert_key_format(key: &str, what: &str) {
    let parts: Vec<&str> = key.splitn(3, '_').collect();
    assert_eq!(parts.len(), 3, "{what}: {key:?}");
    assert_eq!(parts[0], "hk", "{what}");
    assert!(parts[1].len() == 16 && parts[1].bytes().all(|b| b.is_ascii_hexdigit()), "{what}");
    let base64url = |b: u8| b.is_ascii_alphanumeric() || b == b'-' || b == b'_';
    assert!(parts[2].len() == 43 && parts[2].bytes().all(base64url), "{what}: {key:?}");
}

/// An HTTP server of this process on the database: (address, its task).
async fn serve(herald: &Herald) -> (String, tokio::task::JoinHandle<()>) {
    let config = ServeConfig {
        listen: None,
        admin_key: Some(ADMIN_KEY.into()),
        viewer_key: None,
        metrics_token: None,
        metrics_per_tenant: false,
        http: herald_server::listen::HttpOptions::default(),
        worker: None,
        reconciler: None,
        retention: None,
        channels: Vec::new(),
    };
    let app = herald_server::app(herald_server::serve::state(herald, &config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.ok();
    });
    (format!("http://{addr}"), task)
}

async fn call(
    base: &str,
    method: &str,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (u16, Value) {
    // reqwest is built without a TLS provider of its own (herald's is ring).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
    let mut request = client.request(method, format!("{base}{path}")).bearer_auth(key);
    if let Some(body) = body {
        request = request.header("content-type", "application/json").body(body.to_string());
    }
    let response = request.send().await.expect("request");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_and_http_keys_share_one_format_and_a_failed_create_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = format!("sqlite://{}", dir.path().join("herald.db").display());
    let herald = Herald::open(&db).await.expect("open");
    let pool = herald.store().sqlite_pool().expect("sqlite").clone();

    // Every key insert fails: `tenant create` fails and leaves no tenant behind.
    sqlx::raw_sql(
        "CREATE TRIGGER refuse_keys BEFORE INSERT ON api_keys \
         BEGIN SELECT RAISE(ABORT, 'injected failure'); END",
    )
    .execute(&pool)
    .await
    .expect("trigger");
    let (ok, _, stderr) = herald_cli(&db, &["tenant", "create", "acme"]);
    assert!(!ok, "tenant create succeeded although its key could not be stored");
    let tenants: i64 =
        sqlx::query_scalar("SELECT count(*) FROM tenants").fetch_one(&pool).await.unwrap();
    assert_eq!(tenants, 0, "a tenant without a key is left behind ({stderr})");
    sqlx::raw_sql("DROP TRIGGER refuse_keys").execute(&pool).await.expect("drop trigger");

    // The retry creates it, with its key; a second key for it comes from `key create`.
    let (ok, cli_tenant, stderr) = herald_cli(&db, &["tenant", "create", "acme"]);
    assert!(ok, "the retry failed: {stderr}");
    let cli_id = cli_tenant["id"].as_str().unwrap_or_else(|| panic!("{cli_tenant}")).to_string();
    let cli_key = cli_tenant["api_key"].as_str().unwrap().to_string();
    let (ok, cli_second, stderr) = herald_cli(&db, &["key", "create", &cli_id]);
    assert!(ok, "key create: {stderr}");
    let cli_second_key = cli_second["api_key"].as_str().unwrap().to_string();
    assert!(cli_second_key.contains(cli_second["key_id"].as_str().unwrap()), "{cli_second}");
    let (ok, _, stderr) = herald_cli(&db, &["tenant", "create", "acme"]);
    assert!(!ok && stderr.contains("exists"), "a second acme: {stderr}");
    let (ok, _, stderr) = herald_cli(&db, &["key", "create", &uuid::Uuid::now_v7().to_string()]);
    assert!(!ok && stderr.contains("no tenant"), "a key for no tenant: {stderr}");

    // The HTTP face mints the same kind of key, and every key authenticates as its tenant.
    let (base, server) = serve(&herald).await;
    let (status, http_tenant) =
        call(&base, "POST", "/v1/tenants", ADMIN_KEY, Some(json!({"name": "globex"}))).await;
    assert_eq!(status, 201, "{http_tenant}");
    let http_id = http_tenant["id"].as_str().unwrap().to_string();
    let (status, http_second) =
        call(&base, "POST", &format!("/v1/tenants/{cli_id}/keys"), ADMIN_KEY, None).await;
    assert_eq!(status, 201, "{http_second}");
    // Each tenant has one quota account named after it, which tells whose key it is.
    for (tenant, units) in [(&cli_id, "acme-units"), (&http_id, "globex-units")] {
        let tenant: herald::TenantId = tenant.parse().unwrap();
        herald.quota_grant(tenant, units, 1, None).await.unwrap();
    }
    let keys = [
        ("cli tenant create", cli_key.as_str(), "acme-units"),
        ("cli key create", cli_second_key.as_str(), "acme-units"),
        ("http tenant create", http_tenant["api_key"].as_str().unwrap(), "globex-units"),
        ("http key create", http_second["api_key"].as_str().unwrap(), "acme-units"),
    ];
    for (what, key, units) in keys {
        assert_key_format(key, what);
        let (status, body) = call(&base, "GET", "/v1/quotas", key, None).await;
        assert_eq!(status, 200, "{what}: {body}");
        assert_eq!(body["quotas"][0]["quota_key"], units, "{what}: another tenant's key: {body}");
    }
    let stored: i64 =
        sqlx::query_scalar("SELECT count(*) FROM api_keys").fetch_one(&pool).await.unwrap();
    assert_eq!(stored, 4, "one row per key minted");
    server.abort();
    herald.close().await;
}
