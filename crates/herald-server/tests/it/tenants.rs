//! Creating a tenant over HTTP: the tenant and its first API key are written in one
//! transaction, so a failure leaves neither behind (and a retry gets both), and a second
//! tenant of the same name is a 409 that adds no tenant and no key. On SQLite always, on
//! PostgreSQL when `HERALD_TEST_POSTGRES_URL` is set (required when `CI` is set).

use axum::Router;
use axum::http::Method;
use herald::Herald;
use herald::sqlx::{self, Connection};
use serde_json::{Value, json};

use crate::common::{ADMIN_KEY, admin_router, call};

/// One database: a fresh SQLite file, or a fresh schema on the test PostgreSQL.
struct Db {
    url: String,
    postgres: bool,
    /// (server URL, schema) to drop when done.
    schema: Option<(String, String)>,
    _dir: Option<tempfile::TempDir>,
}

impl Db {
    async fn cleanup(self) {
        let Some((base, schema)) = self.schema else { return };
        if let Ok(mut conn) = sqlx::PgConnection::connect(&base).await {
            let drop = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
            sqlx::raw_sql(sqlx::AssertSqlSafe(drop)).execute(&mut conn).await.ok();
            conn.close().await.ok();
        }
    }
}

async fn databases() -> Vec<Db> {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    let mut dbs = vec![Db { url, postgres: false, schema: None, _dir: Some(dir) }];
    match std::env::var("HERALD_TEST_POSTGRES_URL") {
        Ok(base) if !base.is_empty() => {
            let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
            let mut conn = sqlx::PgConnection::connect(&base).await.expect("postgres");
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
                .execute(&mut conn)
                .await
                .expect("create schema");
            conn.close().await.ok();
            let sep = if base.contains('?') { '&' } else { '?' };
            let url = format!("{base}{sep}options=-c%20search_path%3D{schema}");
            dbs.push(Db { url, postgres: true, schema: Some((base, schema)), _dir: None });
        }
        _ => assert!(std::env::var_os("CI").is_none(), "CI needs HERALD_TEST_POSTGRES_URL"),
    }
    dbs
}

/// Runs one statement of the test's own (setup only: herald's SQL stays in herald-store).
async fn sql(herald: &Herald, statement: &str) {
    let statement = sqlx::AssertSqlSafe(statement.to_string());
    match (herald.store().sqlite_pool(), herald.store().postgres_pool()) {
        (Some(p), _) => sqlx::raw_sql(statement).execute(p).await.map(drop),
        (_, Some(p)) => sqlx::raw_sql(statement).execute(p).await.map(drop),
        _ => unreachable!("a store has a pool"),
    }
    .unwrap_or_else(|e| panic!("{e}"))
}

async fn count(herald: &Herald, table: &str) -> i64 {
    let statement = sqlx::AssertSqlSafe(format!("SELECT count(*) FROM {table}"));
    match (herald.store().sqlite_pool(), herald.store().postgres_pool()) {
        (Some(p), _) => sqlx::query_scalar(statement).fetch_one(p).await,
        (_, Some(p)) => sqlx::query_scalar(statement).fetch_one(p).await,
        _ => unreachable!("a store has a pool"),
    }
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Makes every insert into `api_keys` fail (`true`), or stops doing so (`false`).
async fn refuse_keys(herald: &Herald, postgres: bool, on: bool) {
    let statements: &[&str] = match (postgres, on) {
        (false, true) => &["CREATE TRIGGER refuse_keys BEFORE INSERT ON api_keys \
                            BEGIN SELECT RAISE(ABORT, 'injected failure'); END"],
        (false, false) => &["DROP TRIGGER refuse_keys"],
        (true, true) => &[
            "CREATE FUNCTION refuse_keys() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$",
            "CREATE TRIGGER refuse_keys BEFORE INSERT ON api_keys \
             FOR EACH ROW EXECUTE FUNCTION refuse_keys()",
        ],
        (true, false) => &["DROP TRIGGER refuse_keys ON api_keys"],
    };
    for statement in statements {
        sql(herald, statement).await;
    }
}

/// The key authenticates as its tenant.
async fn authenticates(router: &Router, key: &str, what: &str) {
    let (status, body) = call(router, Method::GET, "/v1/quotas", key, Value::Null).await;
    assert_eq!(status, 200, "{what}: the new key does not authenticate: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_tenant_creation_leaves_nothing_and_its_retry_gets_a_working_key() {
    for db in databases().await {
        let what = if db.postgres { "postgres" } else { "sqlite" };
        let herald = Herald::open(&db.url).await.expect("open");
        let api = admin_router(&herald);

        // The key's insert fails: the tenant goes with it.
        refuse_keys(&herald, db.postgres, true).await;
        let body = json!({"name": "acme"});
        let (status, failed) = call(&api, Method::POST, "/v1/tenants", ADMIN_KEY, body).await;
        assert_eq!(status, 500, "{what}: {failed}");
        assert_eq!(count(&herald, "tenants").await, 0, "{what}: a tenant without a key is left");
        refuse_keys(&herald, db.postgres, false).await;

        // So the retry creates it, with a key that works.
        let body = json!({"name": "acme"});
        let (status, created) = call(&api, Method::POST, "/v1/tenants", ADMIN_KEY, body).await;
        assert_eq!(status, 201, "{what}: the retry: {created}");
        let key = created["api_key"].as_str().unwrap_or_else(|| panic!("{created}"));
        authenticates(&api, key, what).await;
        assert_eq!((count(&herald, "tenants").await, count(&herald, "api_keys").await), (1, 1));
        herald.close().await;
        db.cleanup().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_created_twice_is_a_conflict_and_leaves_one_tenant_and_one_key() {
    for db in databases().await {
        let what = if db.postgres { "postgres" } else { "sqlite" };
        let herald = Herald::open(&db.url).await.expect("open");
        let api = admin_router(&herald);
        let body = json!({"name": "acme"});
        let (status, first) = call(&api, Method::POST, "/v1/tenants", ADMIN_KEY, body).await;
        assert_eq!(status, 201, "{what}: {first}");
        let body = json!({"name": "acme"});
        let (status, again) = call(&api, Method::POST, "/v1/tenants", ADMIN_KEY, body).await;
        assert_eq!(status, 409, "{what}: {again}");
        assert_eq!(again["error"]["code"], "conflict", "{what}: {again}");
        assert!(again.get("api_key").is_none() && again.get("id").is_none(), "{what}: {again}");
        assert_eq!((count(&herald, "tenants").await, count(&herald, "api_keys").await), (1, 1));
        authenticates(&api, first["api_key"].as_str().unwrap(), what).await;

        // A key for a tenant that does not exist is a 404 and writes nothing.
        let uri = format!("/v1/tenants/{}/keys", uuid::Uuid::now_v7());
        let (status, missing) = call(&api, Method::POST, &uri, ADMIN_KEY, Value::Null).await;
        assert_eq!(status, 404, "{what}: {missing}");
        assert_eq!(count(&herald, "api_keys").await, 1, "{what}");
        herald.close().await;
        db.cleanup().await;
    }
}
