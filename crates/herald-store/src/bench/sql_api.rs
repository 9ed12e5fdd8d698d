//! The bench's SQL-API phases: submits as an application makes them, on its own pooled
//! connection — `herald_submit_v1` on PostgreSQL, `CALL submit_v1` on MariaDB (or v2,
//! with the fingerprint computed by the client, as the PHP package does) — alone
//! (autocommitted) or inside the application's own transaction.

use crate::conn::Conn;
use crate::error::StoreError;
use crate::store::Store;
use sqlx::types::Uuid;
use sqlx::{MySqlConnection, PgConnection};
use std::time::Duration;

const RECIPIENT: &str = "https://example.com/h";

fn not_here(store: &Store) -> StoreError {
    StoreError::NotOnBackend { what: "the SQL API", backend: store.backend().name() }
}

/// Which SQL submit the bench calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlSubmit {
    /// v1: the fingerprint computed in SQL (PostgreSQL at the first repeat).
    V1,
    /// v2: the fingerprint computed here, by the client, timed with the call.
    V2ClientFingerprint,
}

/// `herald_submit_v1` with its defaults but the cost (or `herald_submit_v2`, its
/// max_attempts given, with the fingerprint computed here): (status, delivery id).
async fn postgres_submit(
    c: &mut PgConnection,
    tenant: Uuid,
    operation_key: &str,
    payload: &str,
    cost: i64,
    version: SqlSubmit,
) -> Result<(String, Option<Uuid>), StoreError> {
    let call = match version {
        SqlSubmit::V1 => sqlx::query_as(
            "SELECT status, delivery_id FROM herald_submit_v1(tenant => $1, operation_key => $2,
                 channel => 'webhook', recipient => $3, payload => $4, cost => $5)",
        ),
        SqlSubmit::V2ClientFingerprint => sqlx::query_as(
            "SELECT status, delivery_id FROM herald_submit_v2(tenant => $1, operation_key => $2,
                 channel => 'webhook', recipient => $3, payload => $4, cost => $5,
                 max_attempts => $6, fingerprint => $7)",
        ),
    };
    let call =
        call.bind(tenant.to_string()).bind(operation_key).bind(RECIPIENT).bind(payload).bind(cost);
    let call = match v2_arguments(version, payload, cost)? {
        Some((attempts, print)) => call.bind(attempts).bind(print),
        None => call,
    };
    Ok(call.fetch_one(&mut *c).await?)
}

/// `CALL submit_v1` with its defaults but the cost (or `submit_v2`, its max_attempts
/// given, with the fingerprint computed here), then its answer: (status, delivery id).
async fn mysql_submit(
    c: &mut MySqlConnection,
    tenant: Uuid,
    operation_key: &str,
    payload: &str,
    cost: i64,
    version: SqlSubmit,
) -> Result<(String, Option<Uuid>), StoreError> {
    let call = match version {
        SqlSubmit::V1 => sqlx::query(
            "CALL submit_v1(?, ?, 'webhook', ?, ?, NULL, ?, NULL, NULL, @status, @id, @f, @c)",
        ),
        SqlSubmit::V2ClientFingerprint => sqlx::query(
            "CALL submit_v2(?, ?, 'webhook', ?, ?, NULL, ?, NULL, ?, ?, @status, @id, @f, @c)",
        ),
    };
    let call =
        call.bind(tenant.to_string()).bind(operation_key).bind(RECIPIENT).bind(payload).bind(cost);
    let call = match v2_arguments(version, payload, cost)? {
        Some((attempts, print)) => call.bind(attempts).bind(print),
        None => call,
    };
    call.execute(&mut *c).await?;
    let (status, id): (String, Option<String>) =
        sqlx::query_as("SELECT @status, @id").fetch_one(&mut *c).await?;
    Ok((status, id.and_then(|id| Uuid::parse_str(&id).ok())))
}

/// v2's arguments after v1's: max_attempts (herald's default) and the fingerprint the
/// client computed with it; none for v1.
fn v2_arguments(
    version: SqlSubmit,
    payload: &str,
    cost: i64,
) -> Result<Option<(i32, Vec<u8>)>, StoreError> {
    if version == SqlSubmit::V1 {
        return Ok(None);
    }
    let attempts = herald_core::limits::DELIVERY_ATTEMPTS_DEFAULT;
    Ok(Some((attempts as i32, client_fingerprint(payload, cost, attempts)?)))
}

/// The fingerprint (version 2) of the bench's request, as a client computes it.
fn client_fingerprint(payload: &str, cost: i64, max_attempts: u32) -> Result<Vec<u8>, StoreError> {
    use herald_core::fingerprint::{Resolved, fingerprint};
    let value = herald_core::json::parse(payload).map_err(|e| {
        StoreError::Database(sqlx::Error::Protocol(format!("the bench's payload: {e}")))
    })?;
    let resolved = Resolved {
        channel: "webhook",
        to: RECIPIENT,
        payload: &value,
        quota_key: "webhook",
        cost,
        send_at_ms: None,
        max_attempts,
    };
    Ok(fingerprint(&resolved).to_vec())
}

/// One submit through the SQL API, autocommitted on a pooled connection, as an
/// application's statement would be: the delivery's id when it was created. The payload
/// is given as text, as an application sends it.
pub async fn sql_submit_pooled(
    store: &Store,
    tenant: Uuid,
    operation_key: &str,
    payload: &str,
    version: SqlSubmit,
) -> Result<Option<Uuid>, StoreError> {
    let (status, id) = if let Some(pool) = store.postgres_pool() {
        let mut c = pool.acquire().await?;
        postgres_submit(&mut c, tenant, operation_key, payload, 1, version).await?
    } else if let Some(pool) = store.mysql_pool() {
        let mut c = pool.acquire().await?;
        mysql_submit(&mut c, tenant, operation_key, payload, 1, version).await?
    } else {
        return Err(not_here(store));
    };
    Ok(id.filter(|_| status == "created"))
}

/// An application's own transaction, as the SQL API sees it: `BEGIN`, an order row of its
/// own, with `submit` also an SQL submit (tenant, cost), then `work` of the application's
/// own time, then `COMMIT`. The bench compares it with and without the submit to show
/// what the submit costs the application's transactions: its wake-up, and the locks it
/// holds until the application commits.
pub async fn app_commit_pooled(
    store: &Store,
    order: &str,
    submit: Option<(Uuid, i64)>,
    work: Duration,
    version: SqlSubmit,
) -> Result<(), StoreError> {
    const PAYLOAD: &str = r#"{"event": "bench"}"#;
    if let Some(pool) = store.postgres_pool() {
        let mut tx = pool.begin().await?;
        app_order_insert(Conn::Postgres(&mut tx), order).await?;
        if let Some((tenant, cost)) = submit {
            let (status, _) =
                postgres_submit(&mut tx, tenant, order, PAYLOAD, cost, version).await?;
            created(&status)?;
        }
        tokio::time::sleep(work).await;
        tx.commit().await?;
    } else if let Some(pool) = store.mysql_pool() {
        let mut tx = pool.begin().await?;
        app_order_insert(Conn::MySql(&mut tx), order).await?;
        if let Some((tenant, cost)) = submit {
            let (status, _) = mysql_submit(&mut tx, tenant, order, PAYLOAD, cost, version).await?;
            created(&status)?;
        }
        tokio::time::sleep(work).await;
        tx.commit().await?;
    } else {
        return Err(not_here(store));
    }
    Ok(())
}

/// The same application transaction with the floor's claim inside instead of herald's
/// (`floor_submit`, on stripe `stripe` of the tenant's account): what the rows alone cost
/// the application's transactions, the yardstick of issue 33's ratios.
pub async fn app_floor_commit_pooled(
    store: &Store,
    order: &str,
    tenant: Uuid,
    stripe: i16,
    work: Duration,
) -> Result<(), StoreError> {
    let claim = |conn| super::floor_submit(conn, Uuid::now_v7(), tenant, stripe, order);
    let claimed = if let Some(pool) = store.postgres_pool() {
        let mut tx = pool.begin().await?;
        app_order_insert(Conn::Postgres(&mut tx), order).await?;
        let claimed = claim(Conn::Postgres(&mut tx)).await?;
        tokio::time::sleep(work).await;
        tx.commit().await?;
        claimed
    } else if let Some(pool) = store.mysql_pool() {
        let mut tx = pool.begin().await?;
        app_order_insert(Conn::MySql(&mut tx), order).await?;
        let claimed = claim(Conn::MySql(&mut tx)).await?;
        tokio::time::sleep(work).await;
        tx.commit().await?;
        claimed
    } else {
        return Err(not_here(store));
    };
    created(if claimed { "created" } else { "duplicate" })
}

/// A bench submit that was not created measured nothing: say so rather than report a rate.
fn created(status: &str) -> Result<(), StoreError> {
    if status == "created" {
        return Ok(());
    }
    Err(StoreError::Database(sqlx::Error::Protocol(format!(
        "the bench's SQL API submit answered {status}, not created"
    ))))
}

/// The application's own write in [`app_commit_pooled`] and in the library's application
/// transaction (`herald::bench::app_transaction`): one order row, on the caller's
/// connection.
pub async fn app_order_insert(conn: Conn<'_>, order: &str) -> Result<(), StoreError> {
    match conn {
        Conn::Postgres(c) => {
            sqlx::query("INSERT INTO bench_app_orders (id) VALUES ($1)")
                .bind(order)
                .execute(c)
                .await?;
        }
        Conn::MySql(c) => {
            sqlx::query("INSERT INTO bench_app_orders (id) VALUES (?)")
                .bind(order)
                .execute(c)
                .await?;
        }
        Conn::Sqlite(_) => {
            return Err(StoreError::NotOnBackend {
                what: "the application's table",
                backend: "SQLite",
            });
        }
    }
    Ok(())
}

/// The application's table of [`app_commit_pooled`], made once before its phase.
pub async fn app_table_create(store: &Store) -> Result<(), StoreError> {
    if let Some(pool) = store.postgres_pool() {
        sqlx::raw_sql("CREATE TABLE IF NOT EXISTS bench_app_orders (id text PRIMARY KEY)")
            .execute(pool)
            .await?;
    } else if let Some(pool) = store.mysql_pool() {
        sqlx::raw_sql(
            "CREATE TABLE IF NOT EXISTS bench_app_orders (id VARCHAR(100) PRIMARY KEY)
             ENGINE = InnoDB",
        )
        .execute(pool)
        .await?;
    } else {
        return Err(not_here(store));
    }
    Ok(())
}

/// The role (MariaDB: user name) this store's connections log in as, which a grant names.
pub async fn session_role(store: &Store) -> Result<String, StoreError> {
    if let Some(pool) = store.postgres_pool() {
        Ok(sqlx::query_scalar("SELECT session_user::text").fetch_one(pool).await?)
    } else if let Some(pool) = store.mysql_pool() {
        Ok(sqlx::query_scalar("SELECT SUBSTRING_INDEX(SESSION_USER(), '@', 1)")
            .fetch_one(pool)
            .await?)
    } else {
        Err(not_here(store))
    }
}
