//! Submit (SPEC guarantees 1, 2 and 4) on every backend: one claim and one reservation per
//! identity under real concurrency, reuse refused without changes, quota checked after the
//! duplicate check, bad input refused with the caller's transaction left usable, and a
//! ledger whose balances and journal agree after every operation.

use crate::common::backends;
use herald::sqlx::{self, AssertSqlSafe, MySql, Postgres, Sqlite};
use herald::{
    AsConn, Channel, Conn, DeliveryState, EngineOptions, Error, Herald, Leased, Outcome,
    QuotaAccount, Settings, SubmitRequest, Submitted, Worker, WorkerOptions,
};
use herald_core::limits::{COST_MAX, DELIVERY_ATTEMPTS_MAX, PAYLOAD_BYTES_MAX};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;
use std::sync::Arc;
use tokio::sync::Barrier;
use uuid::Uuid;

// ---- helpers -------------------------------------------------------------------------

fn request(tenant: herald::TenantId, operation_key: &str) -> SubmitRequest {
    SubmitRequest::new(
        tenant,
        operation_key,
        "email",
        "ada@example.com",
        json!({"subject": "receipt", "text": "thanks for your order"}),
    )
}

/// Submits in a transaction of its own through herald's runner.
async fn submit(herald: &Herald, req: &SubmitRequest) -> Result<Submitted, Error> {
    herald
        .transaction(move |tx| Box::pin(async move { herald.submit(tx, req).await }))
        .await
        .map(|c| c.value)
}

/// The two ways a submit commits on its own: a runner transaction around `submit`, or
/// `submit_alone` (on PostgreSQL one autocommitted statement).
#[derive(Debug, Clone, Copy)]
enum Via {
    Runner,
    Alone,
}
const VIAS: [Via; 2] = [Via::Runner, Via::Alone];

async fn submit_via(herald: &Herald, req: &SubmitRequest, via: Via) -> Result<Submitted, Error> {
    match via {
        Via::Runner => submit(herald, req).await,
        Via::Alone => herald.submit_alone(req).await,
    }
}

/// A short name for a submit's result, so tables of cases read as tables.
fn kind(result: &Result<Submitted, Error>) -> &'static str {
    match result {
        Ok(s) if s.duplicate => "duplicate",
        Ok(_) => "created",
        Err(Error::IdempotencyKeyReused) => "reused",
        Err(Error::QuotaExhausted { .. }) => "quota exhausted",
        Err(Error::Invalid(_)) => "invalid",
        Err(Error::UnknownTenant) => "unknown tenant",
        Err(Error::NotInTransaction) => "not in transaction",
        Err(_) => "other error",
    }
}

async fn exec(conn: Conn<'_>, sql: &str) -> Result<(), Error> {
    let sql = AssertSqlSafe(sql.to_string());
    match conn {
        Conn::Sqlite(c) => sqlx::raw_sql(sql).execute(c).await.map(drop)?,
        Conn::Postgres(c) => sqlx::raw_sql(sql).execute(c).await.map(drop)?,
        Conn::MySql(c) => sqlx::raw_sql(sql).execute(c).await.map(drop)?,
    }
    Ok(())
}

/// A bind parameter of [`one`].
#[derive(Debug, Clone, Copy)]
enum Arg<'a> {
    Id(Uuid),
    Text(&'a str),
}
use Arg::{Id, Text};

/// A column type both backends decode.
trait Col:
    Send
    + Unpin
    + for<'r> sqlx::Decode<'r, Sqlite>
    + sqlx::Type<Sqlite>
    + for<'r> sqlx::Decode<'r, Postgres>
    + sqlx::Type<Postgres>
    + for<'r> sqlx::Decode<'r, MySql>
    + sqlx::Type<MySql>
{
}
impl<T> Col for T where
    T: Send
        + Unpin
        + for<'r> sqlx::Decode<'r, Sqlite>
        + sqlx::Type<Sqlite>
        + for<'r> sqlx::Decode<'r, Postgres>
        + sqlx::Type<Postgres>
        + for<'r> sqlx::Decode<'r, MySql>
        + sqlx::Type<MySql>
{
}

/// The first column of the first row of `sql` (written with `$1`, `$2`, …), if any.
async fn one<T: Col>(conn: Conn<'_>, sql: &str, args: &[Arg<'_>]) -> Result<Option<T>, Error> {
    Ok(match conn {
        Conn::Sqlite(c) => {
            let mut q = sqlx::query_scalar::<Sqlite, T>(AssertSqlSafe(sql.replace('$', "?")));
            for arg in args {
                q = match *arg {
                    Id(id) => q.bind(id),
                    Text(text) => q.bind(text),
                };
            }
            q.fetch_optional(c).await?
        }
        Conn::Postgres(c) => {
            let mut q = sqlx::query_scalar::<Postgres, T>(AssertSqlSafe(sql.to_string()));
            for arg in args {
                q = match *arg {
                    Id(id) => q.bind(id),
                    Text(text) => q.bind(text),
                };
            }
            q.fetch_optional(c).await?
        }
        Conn::MySql(c) => {
            // Positional: each `$n` once, in order.
            let positional: String = {
                let mut out = String::new();
                let mut digits = false;
                for ch in sql.chars() {
                    match ch {
                        '$' => {
                            out.push('?');
                            digits = true;
                        }
                        d if digits && d.is_ascii_digit() => {}
                        other => {
                            digits = false;
                            out.push(other);
                        }
                    }
                }
                out
            };
            // The tests' SQL spells casts the PostgreSQL way.
            let positional =
                positional.replace("AS BIGINT)", "AS SIGNED)").replace("AS TEXT)", "AS CHAR)");
            let mut q = sqlx::query_scalar::<MySql, T>(AssertSqlSafe(positional));
            for arg in args {
                q = match *arg {
                    Id(id) => q.bind(id),
                    Text(text) => q.bind(text),
                };
            }
            q.fetch_optional(c).await?
        }
    })
}

/// [`one`] on a pooled connection, outside any transaction.
async fn read<T: Col>(herald: &Herald, sql: &str, args: &[Arg<'_>]) -> Option<T> {
    let store = herald.store();
    let result = match (store.sqlite_pool(), store.postgres_pool(), store.mysql_pool()) {
        (Some(pool), _, _) => one(pool.acquire().await.unwrap().as_conn(), sql, args).await,
        (_, Some(pool), _) => one(pool.acquire().await.unwrap().as_conn(), sql, args).await,
        (_, _, Some(pool)) => one(pool.acquire().await.unwrap().as_conn(), sql, args).await,
        _ => unreachable!(),
    };
    result.unwrap_or_else(|e| panic!("{sql}: {e:?}"))
}

async fn count(herald: &Herald, sql: &str, args: &[Arg<'_>]) -> i64 {
    read::<i64>(herald, sql, args).await.unwrap_or_else(|| panic!("{sql}: no row"))
}

/// Everything a refused submit must leave alone.
#[derive(Debug, PartialEq, Eq)]
struct Totals {
    deliveries: i64,
    payloads: i64,
    journal_rows: i64,
    journal_units: i64,
    accounts: Vec<QuotaAccount>,
}

async fn totals(herald: &Herald, tenants: &[herald::TenantId]) -> Totals {
    let mut accounts = Vec::new();
    for &tenant in tenants {
        accounts.extend(herald.quotas(tenant).await.unwrap());
    }
    Totals {
        deliveries: count(herald, "SELECT count(*) FROM deliveries", &[]).await,
        payloads: count(herald, "SELECT count(*) FROM delivery_payloads", &[]).await,
        journal_rows: count(herald, "SELECT count(*) FROM quota_journal", &[]).await,
        journal_units: count(
            herald,
            "SELECT CAST(coalesce(sum(amount), 0) AS BIGINT) FROM quota_journal",
            &[],
        )
        .await,
        accounts,
    }
}

/// A delivery's stored fingerprint and payload text.
async fn stored(herald: &Herald, id: herald::DeliveryId) -> (Vec<u8>, String) {
    let fingerprint: Vec<u8> =
        read(herald, "SELECT fingerprint FROM deliveries WHERE id = $1", &[Id(id.into())])
            .await
            .unwrap();
    let payload: String = read(
        herald,
        "SELECT CAST(payload AS TEXT) FROM delivery_payloads WHERE delivery_id = $1",
        &[Id(id.into())],
    )
    .await
    .unwrap();
    (fingerprint, payload)
}

fn account(tenant: herald::TenantId, quota_key: &str, balances: [i64; 4]) -> QuotaAccount {
    let [granted, available, reserved, spent] = balances;
    QuotaAccount {
        tenant_id: tenant.as_uuid(),
        quota_key: quota_key.into(),
        granted,
        available,
        reserved,
        spent,
    }
}

async fn create_orders_table(herald: &Herald) {
    herald
        .transaction(|tx| {
            Box::pin(async move {
                exec(tx.conn(), "CREATE TABLE t_orders (id BIGINT PRIMARY KEY, note TEXT NOT NULL)")
                    .await
            })
        })
        .await
        .unwrap();
}

fn insert_order(id: i64, note: &str) -> String {
    format!("INSERT INTO t_orders (id, note) VALUES ({id}, '{note}')")
}

async fn order_notes(herald: &Herald) -> Vec<String> {
    let sql = "SELECT note FROM t_orders ORDER BY id";
    let store = herald.store();
    match (store.sqlite_pool(), store.postgres_pool(), store.mysql_pool()) {
        (Some(pool), _, _) => sqlx::query_scalar(sql).fetch_all(pool).await.unwrap(),
        (_, Some(pool), _) => sqlx::query_scalar(sql).fetch_all(pool).await.unwrap(),
        (_, _, Some(pool)) => sqlx::query_scalar(sql).fetch_all(pool).await.unwrap(),
        _ => unreachable!(),
    }
}

/// Runs `$body` in the application's own sqlx transaction on `$herald`'s pool (no herald
/// runner), bound to `$tx`, and ends it with `$end` (`commit` or `rollback`).
macro_rules! own_tx {
    ($herald:expr, $end:ident, |$tx:ident| $body:block) => {{
        let store = $herald.store();
        match (store.sqlite_pool(), store.postgres_pool(), store.mysql_pool()) {
            (Some(pool), _, _) => {
                let mut $tx = pool.begin().await.unwrap();
                let out = $body;
                $tx.$end().await.unwrap();
                out
            }
            (_, Some(pool), _) => {
                let mut $tx = pool.begin().await.unwrap();
                let out = $body;
                $tx.$end().await.unwrap();
                out
            }
            (_, _, Some(pool)) => {
                let mut $tx = pool.begin().await.unwrap();
                let out = $body;
                $tx.$end().await.unwrap();
                out
            }
            _ => unreachable!(),
        }
    }};
}

mod atomic_budget;
mod group_commit;
mod ledger;
mod one_claim;
mod order_of_checks;
mod validation;
