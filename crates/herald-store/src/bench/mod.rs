//! The SQL of `herald bench`, all of it: the floor — the least work any engine must do per
//! delivery on herald's own tables, hand-written, one statement each on PostgreSQL, the
//! fewest in-process statements on SQLite (no writing CTEs there), the fewest round trips
//! on MariaDB (the same, in `mysql/bench.rs`) — with the transactions
//! around it, and the bench's housekeeping (a scratch schema on the server, emptied tables,
//! fresh statistics, counts). The bench runs the floor with the same harness and
//! concurrency as herald and prints herald as a ratio to it; it reaches this module only
//! through `herald::bench`.

mod sql_api;
mod work;
pub use sql_api::{
    SqlSubmit, app_commit_pooled, app_floor_commit_pooled, app_order_insert, app_table_create,
    session_role, sql_submit_pooled,
};
pub use work::Work;

use crate::clock::sqlite_now;
use crate::conn::{AsConn, Conn};
use crate::error::{ErrorClass, StoreError};
use crate::mysql::bench as mysql;
use crate::store::{Backend, PooledConn, Store};
use crate::url::DbUrl;
use sqlx::Connection;
use sqlx::mysql::MySqlConnection;
use sqlx::postgres::PgConnection;
use sqlx::types::Uuid;

/// How a single-delivery submit commits — herald's and the floor's alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commit {
    /// `BEGIN`, the submit, `COMMIT`: a submit inside the caller's transaction.
    InTransaction,
    /// One autocommitted statement: herald's `submit_alone`, the floor's CTE alone.
    Alone,
}

/// Claim + reserve + journal row, one statement: the floor of one submit, reserving from
/// the account's stripe `stripe` (the bench's other floors take stripe 0).
pub async fn floor_submit(
    conn: Conn<'_>,
    id: Uuid,
    tenant: Uuid,
    stripe: i16,
    operation_key: &str,
) -> Result<bool, StoreError> {
    let c = match conn {
        Conn::MySql(c) => return mysql::floor_submit(c, id, tenant, stripe, operation_key).await,
        Conn::Postgres(c) => c,
        Conn::Sqlite(c) => return floor_submit_sqlite(c, id, tenant, stripe, operation_key).await,
    };
    let n = sqlx::query(
        "WITH d AS (
             INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient, fingerprint,
                 quota_key, cost, state, max_attempts, next_attempt_at, reserve_stripe,
                 reserve_id)
             VALUES ($1, $2, $3, 'webhook', 'https://example.com/h', '\\x00', 'webhook', 1,
                 'pending', 8, now(), $4, nextval('quota_movements_id_seq'))
             ON CONFLICT DO NOTHING RETURNING id),
         p AS (INSERT INTO delivery_payloads (delivery_id, payload) SELECT id, '{}' FROM d)
         UPDATE quota_accounts SET available = available - 1, reserved = reserved + 1
         WHERE tenant_id = $2 AND quota_key = 'webhook' AND stripe = $4 AND available >= 1
           AND EXISTS (SELECT 1 FROM d)",
    )
    .bind(id)
    .bind(tenant)
    .bind(operation_key)
    .bind(stripe)
    .execute(c)
    .await?
    .rows_affected();
    Ok(n == 1)
}

/// Lease up to `limit` due deliveries with SKIP LOCKED, mark them sent and commit their
/// reservations (on PostgreSQL on the rows, as herald does since schema 20; elsewhere as
/// journal rows) — one statement: the floor of draining. Client
/// `part` of `parts` takes only its share of the tenants, so concurrent batches never
/// update the same quota rows in different orders (which would deadlock).
pub async fn floor_drain(
    conn: Conn<'_>,
    limit: i64,
    part: i64,
    parts: i64,
) -> Result<u64, StoreError> {
    let c = match conn {
        Conn::MySql(c) => return mysql::floor_drain(c, limit, part, parts).await,
        Conn::Postgres(c) => c,
        // One writer at a time: a part of the tenants would change nothing.
        Conn::Sqlite(c) => return floor_drain_sqlite(c, limit).await,
    };
    let n: i64 = sqlx::query_scalar(
        "WITH l AS (
             SELECT id FROM deliveries WHERE state = 'pending' AND next_attempt_at <= now()
               AND abs(hashtext(tenant_id::text)::bigint) % $3 = $2
             ORDER BY next_attempt_at LIMIT $1 FOR UPDATE SKIP LOCKED),
         d AS (UPDATE deliveries u SET state = 'sent', sent_at = now(), updated_at = now(),
                   settle_kind = 'commit', settle_id = nextval('quota_movements_id_seq'),
                   settled_at = now()
               FROM l WHERE u.id = l.id
               RETURNING u.tenant_id, u.cost),
         n AS (SELECT tenant_id, sum(cost) AS c FROM d GROUP BY tenant_id),
         a AS (UPDATE quota_accounts q SET reserved = q.reserved - n.c, spent = q.spent + n.c
               FROM n WHERE q.tenant_id = n.tenant_id AND q.quota_key = 'webhook'
                 AND stripe = 0)
         SELECT count(*) FROM d",
    )
    .bind(limit)
    .bind(part)
    .bind(parts.max(1))
    .fetch_one(c)
    .await?;
    Ok(n as u64)
}

/// Deliveries in `state`.
pub async fn count_state(conn: Conn<'_>, state: &str) -> Result<i64, StoreError> {
    Ok(match conn {
        Conn::MySql(c) => mysql::count_state(c, state).await?,
        Conn::Postgres(c) => {
            sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE state = $1")
                .bind(state)
                .fetch_one(c)
                .await?
        }
        Conn::Sqlite(c) => {
            sqlx::query_scalar("SELECT count(*) FROM deliveries WHERE state = ?1")
                .bind(state)
                .fetch_one(c)
                .await?
        }
    })
}

/// Refreshes the planner's statistics of the delivery tables, as autovacuum would have in a
/// steady state. The bench empties and refills tables within seconds: without this, plans
/// cached while a table was nearly empty (sequential scans, sorts of every due row) stay in
/// use after it holds thousands of rows — for herald's statements and the floor's alike.
pub async fn bench_analyze(conn: Conn<'_>) -> Result<(), StoreError> {
    const TABLES: &str =
        "ANALYZE deliveries, delivery_payloads, delivery_attempts, quota_movements, quota_accounts";
    match conn {
        Conn::MySql(c) => mysql::analyze(c).await?,
        Conn::Postgres(c) => {
            sqlx::raw_sql(TABLES).execute(c).await?;
        }
        Conn::Sqlite(c) => {
            sqlx::raw_sql("ANALYZE").execute(c).await?;
        }
    }
    Ok(())
}

/// Empties the delivery tables between bench phases, so each phase starts from the same
/// table sizes (accounts are kept; their balances no longer match a journal — bench
/// schemas only, never a real database).
pub async fn bench_reset(conn: Conn<'_>) -> Result<(), StoreError> {
    match conn {
        Conn::MySql(c) => mysql::reset(c).await?,
        Conn::Postgres(c) => {
            sqlx::raw_sql(
                "TRUNCATE delivery_attempts, delivery_payloads, delivery_replays, quota_movements,
                     deliveries",
            )
            .execute(c)
            .await?;
        }
        Conn::Sqlite(c) => {
            sqlx::raw_sql(
                "DELETE FROM delivery_attempts; DELETE FROM delivery_payloads;
                 DELETE FROM delivery_replays; DELETE FROM quota_journal; DELETE FROM deliveries;",
            )
            .execute(c)
            .await?;
        }
    }
    Ok(())
}

/// The submit floor on SQLite (inside the caller's `BEGIN IMMEDIATE`): claim, payload,
/// reservation, journal row.
async fn floor_submit_sqlite(
    c: &mut sqlx::SqliteConnection,
    id: Uuid,
    tenant: Uuid,
    stripe: i16,
    operation_key: &str,
) -> Result<bool, StoreError> {
    let now = sqlite_now(None);
    let claimed = sqlx::query(
        "INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient, fingerprint,
             quota_key, cost, state, max_attempts, next_attempt_at)
         VALUES (?1, ?2, ?3, 'webhook', 'https://example.com/h', x'00', 'webhook', 1, 'pending',
             8, ?4)
         ON CONFLICT DO NOTHING",
    )
    .bind(id)
    .bind(tenant)
    .bind(operation_key)
    .bind(now)
    .execute(&mut *c)
    .await?
    .rows_affected();
    if claimed == 0 {
        return Ok(false);
    }
    sqlx::query("INSERT INTO delivery_payloads (delivery_id, payload) VALUES (?1, '{}')")
        .bind(id)
        .execute(&mut *c)
        .await?;
    sqlx::query(
        "UPDATE quota_accounts SET available = available - 1, reserved = reserved + 1
         WHERE tenant_id = ?1 AND quota_key = 'webhook' AND stripe = ?2 AND available >= 1",
    )
    .bind(tenant)
    .bind(stripe)
    .execute(&mut *c)
    .await?;
    sqlx::query(
        "INSERT INTO quota_journal (tenant_id, quota_key, stripe, kind, amount, delivery_id,
             reservation_seq, at)
         VALUES (?1, 'webhook', ?4, 'reserve', 1, ?2, 1, ?3)",
    )
    .bind(tenant)
    .bind(id)
    .bind(now)
    .bind(stripe)
    .execute(&mut *c)
    .await?;
    Ok(true)
}

/// The drain floor on SQLite (inside the caller's `BEGIN IMMEDIATE`): up to `limit` due
/// rows marked sent in one statement, then one account update per tenant and a journal
/// row per delivery.
async fn floor_drain_sqlite(c: &mut sqlx::SqliteConnection, limit: i64) -> Result<u64, StoreError> {
    let now = sqlite_now(None);
    let sent: Vec<(Uuid, Uuid, i64)> = sqlx::query_as(
        "UPDATE deliveries SET state = 'sent', sent_at = ?2, updated_at = ?2
         WHERE id IN (SELECT id FROM deliveries WHERE state = 'pending' AND next_attempt_at <= ?2
                      ORDER BY next_attempt_at LIMIT ?1)
         RETURNING id, tenant_id, cost",
    )
    .bind(limit)
    .bind(now)
    .fetch_all(&mut *c)
    .await?;
    let mut per_tenant = std::collections::BTreeMap::<Uuid, i64>::new();
    for (_, tenant, cost) in &sent {
        *per_tenant.entry(*tenant).or_default() += cost;
    }
    for (tenant, cost) in per_tenant {
        sqlx::query(
            "UPDATE quota_accounts SET reserved = reserved - ?2, spent = spent + ?2
             WHERE tenant_id = ?1 AND quota_key = 'webhook' AND stripe = 0",
        )
        .bind(tenant)
        .bind(cost)
        .execute(&mut *c)
        .await?;
    }
    for (id, tenant, cost) in &sent {
        sqlx::query(
            "INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, delivery_id,
                 reservation_seq, at)
             VALUES (?1, 'webhook', 'commit', ?2, ?3, 1, ?4)",
        )
        .bind(tenant)
        .bind(cost)
        .bind(id)
        .bind(now)
        .execute(&mut *c)
        .await?;
    }
    Ok(sent.len() as u64)
}

/// One submit floor of a fresh delivery (a UUIDv7) on a connection of its own from
/// `store`'s pool, committed as `commit` says; whether its key was new. On SQLite the floor
/// is four statements, so it is always its own `BEGIN IMMEDIATE` transaction (rolled back
/// if a statement fails), whichever `commit` is asked for.
///
/// Where the id is taken matters on SQLite: under the write lock, as herald's own submit
/// takes it there, so ids reach the table's B-tree in the order they were made. Taken
/// before the lock instead (eight clients' ids then arrive out of order), this floor
/// measured about half as fast in quick runs on this machine.
pub async fn floor_submit_pooled(
    store: &Store,
    commit: Commit,
    tenant: Uuid,
    operation_key: &str,
) -> Result<bool, StoreError> {
    // PostgreSQL's id: taken before the connection, where the bench always took it.
    let id = Uuid::now_v7();
    match store.acquire_as_left().await? {
        // No writing CTEs: the floor is four statements, in a transaction whichever
        // `commit` is asked for, in herald's isolation.
        PooledConn::MySql(mut c) => {
            let mut tx = c.begin_with(mysql::FLOOR_BEGIN).await?;
            let claimed = floor_submit(tx.as_conn(), id, tenant, 0, operation_key).await?;
            tx.commit().await?;
            Ok(claimed)
        }
        PooledConn::Postgres(mut c) => match commit {
            Commit::InTransaction => {
                let mut tx = c.begin().await?;
                let claimed = floor_submit(tx.as_conn(), id, tenant, 0, operation_key).await?;
                tx.commit().await?;
                Ok(claimed)
            }
            Commit::Alone => floor_submit(c.as_conn(), id, tenant, 0, operation_key).await,
        },
        PooledConn::Sqlite(mut c) => {
            sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *c).await?;
            // SQLite's: under the write lock, so the ids reach the B-tree in order.
            let id = Uuid::now_v7();
            match floor_submit(c.as_conn(), id, tenant, 0, operation_key).await {
                Ok(claimed) => {
                    sqlx::raw_sql("COMMIT").execute(&mut *c).await?;
                    Ok(claimed)
                }
                Err(e) => {
                    sqlx::raw_sql("ROLLBACK").execute(&mut *c).await?;
                    Err(e)
                }
            }
        }
    }
}

/// The batched submit floor: `items` (tenant, operation key) claimed in one transaction,
/// one COMMIT for all of them — the work of a group-committed batch of that size,
/// hand-written: on PostgreSQL one statement for the batch (the rows, payloads, one update
/// per account and the journal), elsewhere [`floor_submit`] once per item. Returns how
/// many were claimed.
pub async fn floor_submit_batch_pooled(
    store: &Store,
    items: &[(Uuid, String)],
) -> Result<usize, StoreError> {
    let mut claimed = 0;
    match store.acquire_as_left().await? {
        PooledConn::MySql(mut c) => {
            let mut tx = c.begin_with(mysql::FLOOR_BEGIN).await?;
            for (tenant, key) in items {
                claimed +=
                    usize::from(floor_submit(tx.as_conn(), Uuid::now_v7(), *tenant, 0, key).await?);
            }
            tx.commit().await?;
        }
        // One statement for the whole batch, as herald's batch claim inserts it.
        PooledConn::Postgres(mut c) => {
            let mut tx = c.begin().await?;
            let ids: Vec<Uuid> = items.iter().map(|_| Uuid::now_v7()).collect();
            let (tenants, keys): (Vec<Uuid>, Vec<String>) = items.iter().cloned().unzip();
            let rows: i64 = sqlx::query_scalar(
                "WITH i AS (SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[])
                            AS i (id, tenant_id, operation_key)),
                 d AS (
                     INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient,
                         fingerprint, quota_key, cost, state, max_attempts, next_attempt_at,
                         reserve_stripe, reserve_id)
                     SELECT id, tenant_id, operation_key, 'webhook', 'https://example.com/h',
                         '\\x00', 'webhook', 1, 'pending', 8, now(), 0,
                         nextval('quota_movements_id_seq') FROM i
                     ON CONFLICT DO NOTHING RETURNING id, tenant_id),
                 p AS (INSERT INTO delivery_payloads (delivery_id, payload)
                       SELECT id, '{}' FROM d),
                 s AS (SELECT tenant_id, count(*) AS n FROM d GROUP BY tenant_id),
                 a AS (UPDATE quota_accounts q SET available = q.available - s.n,
                           reserved = q.reserved + s.n
                       FROM s WHERE q.tenant_id = s.tenant_id AND q.quota_key = 'webhook' AND stripe = 0
                       RETURNING 1)
                 SELECT count(*) FROM d",
            )
            .bind(&ids)
            .bind(&tenants)
            .bind(&keys)
            .fetch_one(&mut *tx)
            .await?;
            tx.commit().await?;
            claimed = rows as usize;
        }
        PooledConn::Sqlite(mut c) => {
            sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *c).await?;
            for (tenant, key) in items {
                match floor_submit(c.as_conn(), Uuid::now_v7(), *tenant, 0, key).await {
                    Ok(one) => claimed += usize::from(one),
                    Err(e) => {
                        sqlx::raw_sql("ROLLBACK").execute(&mut *c).await?;
                        return Err(e);
                    }
                }
            }
            sqlx::raw_sql("COMMIT").execute(&mut *c).await?;
        }
    }
    Ok(claimed)
}

/// One batch of the drain floor (see [`floor_drain`]) in a transaction of its own, on a
/// connection from `store`'s pool: `Some(rows drained)`, or `None` when the batch lost to a
/// concurrency conflict and was rolled back — the caller runs it again, as `pgbench
/// --max-tries` would.
pub async fn floor_drain_pooled(
    store: &Store,
    limit: i64,
    part: i64,
    parts: i64,
) -> Result<Option<u64>, StoreError> {
    let conflict = |e: &StoreError| matches!(e.class(), ErrorClass::Concurrency(_));
    match store.acquire_as_left().await? {
        PooledConn::MySql(mut c) => {
            floor_drain_in(c.begin_with(mysql::FLOOR_BEGIN).await?, limit, part, parts).await
        }
        PooledConn::Postgres(mut c) => floor_drain_in(c.begin().await?, limit, part, parts).await,
        PooledConn::Sqlite(mut c) => {
            sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut *c).await?;
            let n = match floor_drain(c.as_conn(), limit, part, parts).await {
                Ok(n) => n,
                Err(e) if conflict(&e) => {
                    let _ = sqlx::raw_sql("ROLLBACK").execute(&mut *c).await;
                    return Ok(None);
                }
                Err(e) => return Err(e),
            };
            sqlx::raw_sql("COMMIT").execute(&mut *c).await?;
            Ok(Some(n))
        }
    }
}

/// One drain-floor batch in `tx`: committed, or rolled back (`None`) on a conflict.
async fn floor_drain_in<DB: sqlx::Database>(
    mut tx: sqlx::Transaction<'_, DB>,
    limit: i64,
    part: i64,
    parts: i64,
) -> Result<Option<u64>, StoreError>
where
    for<'t> sqlx::Transaction<'t, DB>: AsConn,
{
    match floor_drain(tx.as_conn(), limit, part, parts).await {
        Ok(n) => {
            tx.commit().await?;
            Ok(Some(n))
        }
        Err(e) if matches!(e.class(), ErrorClass::Concurrency(_)) => {
            let _ = tx.rollback().await;
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// The drain floor from one client: one connection held throughout, a transaction per
/// batch of `limit` (`BEGIN IMMEDIATE` on SQLite, which has one writer at a time anyway),
/// until a batch comes back empty. `on_batch` hears each batch's size as it commits;
/// returns how many rows were drained.
pub async fn floor_drain_serial(
    store: &Store,
    limit: i64,
    on_batch: &(dyn Fn(u64) + Send + Sync),
) -> Result<u64, StoreError> {
    let begin = match store.backend() {
        Backend::Sqlite => "BEGIN IMMEDIATE",
        Backend::Postgres => "BEGIN",
        Backend::MySql => mysql::FLOOR_BEGIN,
    };
    let mut c = store.acquire().await?;
    let mut drained = 0;
    loop {
        execute(c.as_conn(), begin).await?;
        let n = floor_drain(c.as_conn(), limit, 0, 1).await?;
        execute(c.as_conn(), "COMMIT").await?;
        if n == 0 {
            return Ok(drained);
        }
        drained += n;
        on_batch(n);
    }
}

/// Puts the sessions of `store`'s idle connections back to the server's defaults (on
/// MariaDB a transaction of herald's leaves its bounds and isolation on its session:
/// `Store::acquire`), so that a phase playing an application's own connections — the SQL
/// API's, an application's transactions — starts from what an application's would have.
pub async fn sessions_reset(store: &Store) -> Result<(), StoreError> {
    match store.mysql_pool() {
        // Each connection `Store::acquire` hands out has had its session reset.
        Some(pool) => pool_fill(store, pool.num_idle()).await,
        None => Ok(()),
    }
}

/// Opens `connections` connections of `store`'s pool at once (and hands them back), so
/// that no timed phase pays for connecting.
pub async fn pool_fill(store: &Store, connections: usize) -> Result<(), StoreError> {
    let mut held = Vec::with_capacity(connections);
    for _ in 0..connections {
        held.push(store.acquire().await?);
    }
    Ok(())
}

/// The server's cumulative work counters ([`Work`]), on a connection of `store`'s pool;
/// `None` on SQLite, which keeps none.
pub async fn work_read(store: &Store) -> Result<Option<Work>, StoreError> {
    if let Some(pool) = store.postgres_pool() {
        work::postgres_flush(pool).await?;
    }
    let mut conn = store.acquire().await?;
    match conn.as_conn() {
        Conn::Postgres(c) => Ok(Some(work::postgres(c).await?)),
        Conn::MySql(c) => Ok(Some(work::mysql(c).await?)),
        Conn::Sqlite(_) => Ok(None),
    }
}

async fn execute(conn: Conn<'_>, sql: &'static str) -> Result<(), StoreError> {
    match conn {
        Conn::MySql(c) => sqlx::raw_sql(sql).execute(c).await?.rows_affected(),
        Conn::Sqlite(c) => sqlx::raw_sql(sql).execute(c).await?.rows_affected(),
        Conn::Postgres(c) => sqlx::raw_sql(sql).execute(c).await?.rows_affected(),
    };
    Ok(())
}

/// A connection straight to the server (PostgreSQL or MariaDB), outside any store: the
/// bench measures in a scratch schema (PostgreSQL) or database (MariaDB) it creates with
/// this before herald opens a store there, and drops after.
#[derive(Debug)]
pub enum BenchServer {
    Postgres(PgConnection),
    MySql(MySqlConnection),
}

/// A scratch schema or database made by [`BenchServer::schema_create`]; only its own name
/// is ever spliced into SQL.
#[derive(Debug)]
pub struct BenchSchema {
    name: String,
    backend: Backend,
}

impl BenchSchema {
    /// `url` (the server's) pointed at this schema: as every connection's `search_path` on
    /// PostgreSQL, as the URL's database on MariaDB.
    pub fn url(&self, url: &str) -> String {
        if self.backend == Backend::MySql {
            return mysql::url_with_database(url, &self.name);
        }
        let sep = if url.contains('?') { '&' } else { '?' };
        format!("{url}{sep}options=-c%20search_path%3D{}", self.name)
    }
}

impl BenchServer {
    pub async fn connect(url: &str) -> Result<BenchServer, StoreError> {
        Ok(match DbUrl::parse(url)? {
            DbUrl::MySql(_) => BenchServer::MySql(mysql::server_connect(url).await?),
            _ => BenchServer::Postgres(PgConnection::connect(url).await?),
        })
    }

    pub fn backend(&self) -> Backend {
        match self {
            BenchServer::Postgres(_) => Backend::Postgres,
            BenchServer::MySql(_) => Backend::MySql,
        }
    }

    /// The server's `max_connections`.
    pub async fn connections_max(&mut self) -> Result<i64, StoreError> {
        let c = match self {
            BenchServer::MySql(c) => return mysql::connections_max(c).await,
            BenchServer::Postgres(c) => c,
        };
        let value: String = sqlx::query_scalar("SHOW max_connections").fetch_one(c).await?;
        value.parse().map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))
    }

    /// The server's version, e.g. "15.20 (Debian 15.20-0+deb12u1)" or
    /// "10.11.19-MariaDB-0+deb12u1".
    pub async fn version(&mut self) -> Result<String, StoreError> {
        match self {
            BenchServer::MySql(c) => mysql::version(c).await,
            BenchServer::Postgres(c) => {
                Ok(sqlx::query_scalar("SHOW server_version").fetch_one(c).await?)
            }
        }
    }

    /// Creates an empty schema (a database on MariaDB) named `herald_bench_<uuid>`.
    pub async fn schema_create(&mut self) -> Result<BenchSchema, StoreError> {
        let name = format!("herald_bench_{}", Uuid::now_v7().simple());
        let schema = BenchSchema { name, backend: self.backend() };
        match self {
            BenchServer::Postgres(c) => {
                execute_owned(c, format!("CREATE SCHEMA {}", schema.name)).await?
            }
            BenchServer::MySql(c) => {
                execute_owned(c, format!("CREATE DATABASE {}", schema.name)).await?
            }
        }
        Ok(schema)
    }

    /// Drops the schema (or database) and everything in it.
    pub async fn schema_drop(&mut self, schema: BenchSchema) -> Result<(), StoreError> {
        match self {
            BenchServer::Postgres(c) => {
                execute_owned(c, format!("DROP SCHEMA {} CASCADE", schema.name)).await
            }
            BenchServer::MySql(c) => {
                execute_owned(c, format!("DROP DATABASE {}", schema.name)).await
            }
        }
    }

    /// The server's cumulative work counters ([`Work`]).
    pub async fn work(&mut self) -> Result<Work, StoreError> {
        match self {
            BenchServer::Postgres(c) => work::postgres(c).await,
            BenchServer::MySql(c) => work::mysql(c).await,
        }
    }

    pub async fn close(self) {
        let _ = match self {
            BenchServer::Postgres(c) => c.close().await,
            BenchServer::MySql(c) => c.close().await,
        };
    }
}

async fn execute_owned<C: AsConn>(c: &mut C, sql: String) -> Result<(), StoreError> {
    match c.as_conn() {
        Conn::Postgres(c) => {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(c).await?.rows_affected()
        }
        Conn::MySql(c) => sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(c).await?.rows_affected(),
        Conn::Sqlite(c) => {
            sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(c).await?.rows_affected()
        }
    };
    Ok(())
}
