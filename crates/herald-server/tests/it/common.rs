//! Helpers for the HTTP tests: one database per backend (SQLite always, PostgreSQL when
//! `HERALD_TEST_POSTGRES_URL` is set and MariaDB when `HERALD_TEST_MYSQL_URL` is, both
//! required when `CI` is set), the real router driven
//! with `tower::ServiceExt::oneshot`, and small request/response helpers.

#![allow(dead_code)]

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use herald::sqlx::{self, Connection};
use herald::{BoxFuture, Channel, Herald, Leased, Outcome};
use herald_server::serve::ServeConfig;
use serde_json::Value;
use std::sync::Arc;
use tower::ServiceExt as _;

pub const POSTGRES_ENV: &str = "HERALD_TEST_POSTGRES_URL";
pub const MYSQL_ENV: &str = "HERALD_TEST_MYSQL_URL";
pub const ADMIN_KEY: &str = "admin-secret";
/// The read-only operator's dashboard key of the tests' router.
pub const VIEWER_KEY: &str = "viewer-secret";

/// `email`: every send succeeds.
#[derive(Debug)]
pub struct NoopChannel;

impl Channel for NoopChannel {
    fn send<'a>(&'a self, _d: &'a Leased) -> BoxFuture<'a, Outcome> {
        Box::pin(async { Outcome::Sent })
    }
}

/// `sms`: every send is refused for good (so deliveries can reach `failed`).
#[derive(Debug)]
pub struct RefusingChannel;

impl Channel for RefusingChannel {
    fn send<'a>(&'a self, _d: &'a Leased) -> BoxFuture<'a, Outcome> {
        Box::pin(async { Outcome::terminal("refused", "the test provider refuses everything") })
    }
}

pub fn channels() -> Vec<(String, Arc<dyn Channel>)> {
    vec![
        ("email".into(), Arc::new(NoopChannel) as Arc<dyn Channel>),
        ("sms".into(), Arc::new(RefusingChannel) as Arc<dyn Channel>),
    ]
}

pub fn config(admin_key: Option<&str>, metrics_token: Option<&str>) -> ServeConfig {
    ServeConfig {
        listen: None,
        admin_key: admin_key.map(Into::into),
        viewer_key: Some(VIEWER_KEY.into()),
        metrics_token: metrics_token.map(Into::into),
        metrics_per_tenant: false,
        http: herald_server::listen::HttpOptions::default(),
        worker: None,
        reconciler: None,
        retention: None,
        channels: channels(),
    }
}

/// The router on `herald`, with the admin key [`ADMIN_KEY`] and the test channels.
pub fn admin_router(herald: &Herald) -> Router {
    herald_server::app(herald_server::serve::state(herald, &config(Some(ADMIN_KEY), None)))
}

/// One JSON request with a bearer key: (status, body as JSON or null).
pub async fn call(
    router: &Router,
    method: Method,
    uri: &str,
    key: &str,
    body: Value,
) -> (u16, Value) {
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

/// One database for one test.
#[derive(Debug)]
pub struct TestDb {
    pub backend: &'static str,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
    pg_cleanup: Option<(String, String)>,
    my_cleanup: Option<(String, String)>,
}

pub fn postgres_url() -> Option<String> {
    match std::env::var(POSTGRES_ENV) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but {POSTGRES_ENV} is not: PostgreSQL tests must run in CI")
        }
        _ => None,
    }
}

pub fn mysql_url() -> Option<String> {
    match std::env::var(MYSQL_ENV) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but {MYSQL_ENV} is not: MariaDB tests must run in CI")
        }
        _ => None,
    }
}

async fn mysql(base: &str) -> TestDb {
    let database = format!("t_{}", uuid::Uuid::now_v7().simple());
    let mut conn = sqlx::MySqlConnection::connect(base)
        .await
        .unwrap_or_else(|e| panic!("MariaDB at {base} is unreachable: {e}"));
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&mut conn)
        .await
        .expect("create database");
    conn.close().await.ok();
    let (head, _) = base.rsplit_once('/').expect("a MariaDB URL has a path");
    let url = format!("{head}/{database}");
    TestDb {
        backend: "mysql",
        url,
        _dir: None,
        pg_cleanup: None,
        my_cleanup: Some((base.into(), database)),
    }
}

fn sqlite() -> TestDb {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    TestDb { backend: "sqlite", url, _dir: Some(dir), pg_cleanup: None, my_cleanup: None }
}

async fn postgres(base: &str) -> TestDb {
    let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
    let mut conn = sqlx::PgConnection::connect(base)
        .await
        .unwrap_or_else(|e| panic!("PostgreSQL at {base} is unreachable: {e}"));
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&mut conn)
        .await
        .expect("create schema");
    conn.close().await.ok();
    let sep = if base.contains('?') { '&' } else { '?' };
    let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
    TestDb {
        backend: "postgres",
        url,
        _dir: None,
        pg_cleanup: Some((base.into(), schema)),
        my_cleanup: None,
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some((base, database)) = self.my_cleanup.take() {
            let _ = std::thread::spawn(move || {
                let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build()
                else {
                    return;
                };
                rt.block_on(async move {
                    if let Ok(mut conn) = sqlx::MySqlConnection::connect(&base).await {
                        let sql = format!("DROP DATABASE IF EXISTS {database}");
                        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
                        let _ = conn.close().await;
                    }
                });
            })
            .join();
        }
        let Some((base, schema)) = self.pg_cleanup.take() else { return };
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
                return;
            };
            rt.block_on(async move {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&base).await {
                    let sql = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await;
                    let _ = conn.close().await;
                }
            });
        })
        .join();
    }
}

/// A backend under test: its database, a herald on it and the router with the admin key.
#[derive(Debug)]
pub struct Env {
    pub backend: &'static str,
    pub herald: Herald,
    pub api: Api,
    _db: TestDb,
}

impl Env {
    /// The database URL this environment's herald opened.
    pub fn url(&self) -> &str {
        &self._db.url
    }

    /// Another router on the same database, with other settings.
    pub fn api_with(&self, config: &ServeConfig) -> Api {
        Api {
            backend: self.backend,
            router: herald_server::app(herald_server::serve::state(&self.herald, config)),
        }
    }

    /// A worker for the test channels.
    pub fn worker(&self) -> herald::Worker {
        herald::Worker::new(self.herald.clone(), herald::WorkerOptions::default(), channels())
            .unwrap_or_else(|e| panic!("{}: worker: {e}", self.backend))
    }
}

/// Every backend of this run.
pub async fn envs() -> Vec<Env> {
    let mut dbs = vec![sqlite()];
    if let Some(base) = postgres_url() {
        dbs.push(postgres(&base).await);
    }
    if let Some(base) = mysql_url() {
        dbs.push(mysql(&base).await);
    }
    let mut envs = Vec::new();
    for db in dbs {
        let herald = Herald::open(&db.url)
            .await
            .unwrap_or_else(|e| panic!("{}: open failed: {e}", db.backend));
        let router = herald_server::app(herald_server::serve::state(
            &herald,
            &config(Some(ADMIN_KEY), None),
        ));
        envs.push(Env {
            backend: db.backend,
            herald,
            api: Api { backend: db.backend, router },
            _db: db,
        });
    }
    envs
}

/// A request to send through the router.
#[derive(Debug, Clone)]
pub struct Req {
    pub method: Method,
    pub uri: String,
    pub headers: Vec<(header::HeaderName, HeaderValue)>,
    pub body: Vec<u8>,
}

pub fn req(method: Method, uri: impl Into<String>) -> Req {
    Req { method, uri: uri.into(), headers: Vec::new(), body: Vec::new() }
}

pub fn get(uri: impl Into<String>) -> Req {
    req(Method::GET, uri)
}

pub fn post(uri: impl Into<String>) -> Req {
    req(Method::POST, uri)
}

impl Req {
    pub fn bearer(self, key: &str) -> Req {
        self.header_value(
            header::AUTHORIZATION,
            HeaderValue::from_str(&format!("Bearer {key}")).unwrap(),
        )
    }

    pub fn header(self, name: &'static str, value: &str) -> Req {
        self.header_value(
            header::HeaderName::from_static(name),
            HeaderValue::from_str(value).unwrap(),
        )
    }

    pub fn header_value(mut self, name: header::HeaderName, value: HeaderValue) -> Req {
        self.headers.push((name, value));
        self
    }

    /// A JSON body with `Content-Type: application/json`.
    pub fn json(self, body: &Value) -> Req {
        self.raw("application/json", serde_json::to_vec(body).unwrap())
    }

    /// Any body with the given content type.
    pub fn raw(mut self, content_type: &str, body: impl Into<Vec<u8>>) -> Req {
        self.headers.push((header::CONTENT_TYPE, HeaderValue::from_str(content_type).unwrap()));
        self.body = body.into();
        self
    }

    /// A body with no content type at all.
    pub fn untyped(mut self, body: impl Into<Vec<u8>>) -> Req {
        self.body = body.into();
        self
    }
}

/// What came back.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// "<backend> <METHOD> <uri>", for messages.
    pub what: String,
}

impl Resp {
    pub fn json(&self) -> Value {
        let ct = self.headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
        assert!(
            ct.starts_with("application/json"),
            "{}: content type {ct:?}, body {}",
            self.what,
            String::from_utf8_lossy(&self.body)
        );
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("{}: not JSON ({e}): {}", self.what, String::from_utf8_lossy(&self.body))
        })
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Asserts the status and returns the JSON body.
    pub fn expect(&self, status: StatusCode) -> Value {
        assert_eq!(self.status, status, "{}: body {}", self.what, self.text());
        self.json()
    }

    /// Asserts an error answer: this status, and exactly `{"error": {"code", "message"}}`
    /// with this code.
    pub fn expect_error(&self, status: StatusCode, code: &str) {
        assert_eq!(self.status, status, "{}: body {}", self.what, self.text());
        let code_seen = error_code(&self.what, &self.json());
        assert_eq!(code_seen, code, "{}: error code", self.what);
    }
}

/// Checks the error envelope and returns its code.
pub fn error_code(what: &str, v: &Value) -> String {
    let obj = v.as_object().unwrap_or_else(|| panic!("{what}: error is not an object: {v}"));
    assert_eq!(obj.keys().collect::<Vec<_>>(), ["error"], "{what}: error envelope {v}");
    let inner = obj["error"].as_object().unwrap_or_else(|| panic!("{what}: {v}"));
    let mut keys: Vec<_> = inner.keys().map(String::as_str).collect();
    keys.sort_unstable();
    // A 400 that refuses one field names it, and why.
    if keys.contains(&"field") {
        assert_eq!(keys, ["code", "field", "message", "reason"], "{what}: error fields {v}");
        assert_eq!(inner["code"], "invalid_request", "{what}: {v}");
    } else {
        assert_eq!(keys, ["code", "message"], "{what}: error fields {v}");
    }
    assert!(inner["message"].as_str().is_some_and(|m| !m.is_empty()), "{what}: error message {v}");
    inner["code"]
        .as_str()
        .unwrap_or_else(|| panic!("{what}: code is not a string: {v}"))
        .to_string()
}

/// Checks the error envelope of a 400 that refuses one field and returns "field/reason".
pub fn refusal(what: &str, v: &Value) -> String {
    assert_eq!(error_code(what, v), "invalid_request", "{what}: {v}");
    let inner = &v["error"];
    match (inner["field"].as_str(), inner["reason"].as_str()) {
        (Some(field), Some(reason)) => format!("{field}/{reason}"),
        _ => panic!("{what}: no field and reason in {v}"),
    }
}

/// The router of one backend.
#[derive(Debug, Clone)]
pub struct Api {
    pub backend: &'static str,
    pub router: Router,
}

/// A tenant as created over the API.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub id: String,
    pub name: String,
    pub key: String,
    pub webhook_secret: String,
}

impl Api {
    pub async fn send(&self, r: Req) -> Resp {
        let what = format!("{} {} {}", self.backend, r.method, r.uri);
        let mut builder = Request::builder().method(r.method).uri(&r.uri);
        for (name, value) in r.headers {
            builder = builder.header(name, value);
        }
        let request = builder.body(Body::from(r.body)).unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), 16 * 1024 * 1024)
            .await
            .unwrap_or_else(|e| panic!("{what}: body: {e}"))
            .to_vec();
        Resp { status, headers, body, what }
    }

    pub async fn tenant(&self, name: &str) -> Tenant {
        let v = self
            .send(post("/v1/tenants").bearer(ADMIN_KEY).json(&serde_json::json!({"name": name})))
            .await
            .expect(StatusCode::CREATED);
        let mut keys: Vec<_> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            ["api_key", "id", "name", "webhook_secret"],
            "{}: tenant {v}",
            self.backend
        );
        Tenant {
            id: v["id"].as_str().unwrap().into(),
            name: v["name"].as_str().unwrap().into(),
            key: v["api_key"].as_str().unwrap().into(),
            webhook_secret: v["webhook_secret"].as_str().unwrap().into(),
        }
    }

    pub async fn grant(&self, tenant: &Tenant, quota_key: &str, amount: i64) -> Value {
        self.send(
            post(format!("/v1/tenants/{}/quotas/{quota_key}/grant", tenant.id))
                .bearer(ADMIN_KEY)
                .json(&serde_json::json!({"amount": amount})),
        )
        .await
        .expect(StatusCode::OK)
    }

    /// Submits and returns the answer.
    pub async fn submit(&self, key: &str, body: &Value) -> Resp {
        self.send(post("/v1/deliveries").bearer(key).json(body)).await
    }

    /// `GET /v1/quotas` as a list of accounts.
    pub async fn quotas(&self, key: &str) -> Vec<Value> {
        let v = self.send(get("/v1/quotas").bearer(key)).await.expect(StatusCode::OK);
        assert_eq!(v.as_object().unwrap().len(), 1, "{}: quotas {v}", self.backend);
        v["quotas"].as_array().unwrap_or_else(|| panic!("{}: {v}", self.backend)).clone()
    }

    /// One account as (granted, available, reserved, spent).
    pub async fn quota(&self, key: &str, quota_key: &str) -> Option<(i64, i64, i64, i64)> {
        self.quotas(key).await.iter().find(|q| q["quota_key"] == quota_key).map(|q| {
            (
                q["granted"].as_i64().unwrap(),
                q["available"].as_i64().unwrap(),
                q["reserved"].as_i64().unwrap(),
                q["spent"].as_i64().unwrap(),
            )
        })
    }

    /// Every delivery of a tenant (one page of the maximum size).
    pub async fn list(&self, key: &str, query: &str) -> Vec<Value> {
        let sep = if query.is_empty() { "" } else { "&" };
        let v = self
            .send(get(format!("/v1/deliveries?limit=200{sep}{query}")).bearer(key))
            .await
            .expect(StatusCode::OK);
        assert!(v["next_cursor"].is_null(), "{}: more than one page: {v}", self.backend);
        v["deliveries"].as_array().unwrap().clone()
    }
}

/// An email delivery body.
pub fn email(operation_key: &str) -> Value {
    serde_json::json!({
        "operation_key": operation_key,
        "channel": "email",
        "to": "ada@example.com",
        "payload": {"subject": "hi", "text": "hello"},
    })
}

/// Whether `s` is an RFC 3339 date-time (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`) that
/// also parses as a timestamp.
pub fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|x| x.iter().all(u8::is_ascii_digit));
    if b.len() < 20
        || !digits(0..4)
        || b[4] != b'-'
        || !digits(5..7)
        || b[7] != b'-'
        || !digits(8..10)
        || b[10] != b'T'
        || !digits(11..13)
        || b[13] != b':'
        || !digits(14..16)
        || b[16] != b':'
        || !digits(17..19)
    {
        return false;
    }
    let mut i = 19;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    let zone = &s[i..];
    let zone_ok = zone == "Z"
        || (zone.len() == 6
            && (zone.starts_with('+') || zone.starts_with('-'))
            && digits(i + 1..i + 3)
            && b[i + 3] == b':'
            && digits(i + 4..i + 6));
    zone_ok && s.parse::<jiff::Timestamp>().is_ok()
}

pub const DELIVERY_FIELDS: [&str; 16] = [
    "attempts",
    "channel",
    "cost",
    "created_at",
    "held",
    "id",
    "last_error",
    "max_attempts",
    "next_attempt_at",
    "operation_key",
    "quota_key",
    "sent_at",
    "state",
    "tenant",
    "to",
    "updated_at",
];

/// Asserts a delivery has exactly SPEC's fields (plus `duplicate` on a submit), with the
/// right types and RFC 3339 times.
pub fn assert_delivery(what: &str, v: &Value, submitted: bool) {
    let obj = v.as_object().unwrap_or_else(|| panic!("{what}: delivery is not an object: {v}"));
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    let mut expected: Vec<&str> = DELIVERY_FIELDS.to_vec();
    if submitted {
        expected.push("duplicate");
        expected.sort_unstable();
    }
    assert_eq!(keys, expected, "{what}: delivery fields of {v}");
    for f in ["id", "tenant", "operation_key", "channel", "to", "state", "quota_key"] {
        assert!(obj[f].is_string(), "{what}: {f} is not a string: {v}");
    }
    for f in ["id", "tenant"] {
        assert!(
            uuid::Uuid::try_parse(obj[f].as_str().unwrap()).is_ok(),
            "{what}: {f} is not a UUID: {v}"
        );
    }
    for f in ["attempts", "max_attempts", "cost"] {
        assert!(obj[f].is_u64(), "{what}: {f} is not a count: {v}");
    }
    for f in ["created_at", "updated_at", "next_attempt_at"] {
        let t = obj[f].as_str().unwrap_or_else(|| panic!("{what}: {f} is not a string: {v}"));
        assert!(is_rfc3339(t), "{what}: {f} = {t:?} is not RFC 3339");
    }
    match &obj["sent_at"] {
        Value::Null => {}
        Value::String(t) => assert!(is_rfc3339(t), "{what}: sent_at = {t:?} is not RFC 3339"),
        other => panic!("{what}: sent_at = {other}"),
    }
    assert!(obj["last_error"].is_null() || obj["last_error"].is_string(), "{what}: last_error {v}");
    assert!(
        ["pending", "sending", "sent", "failed", "cancelled"]
            .contains(&obj["state"].as_str().unwrap()),
        "{what}: state {v}"
    );
    if submitted {
        assert!(obj["duplicate"].is_boolean(), "{what}: duplicate {v}");
    }
}
