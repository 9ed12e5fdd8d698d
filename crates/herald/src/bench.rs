//! What `herald bench` needs below the library's API: the SQL floor it measures herald
//! against, the housekeeping between its phases (emptied tables, fresh statistics, counts)
//! and a scratch schema to measure in — so the bench itself holds no SQL and no store
//! types. The SQL is in `herald_store::bench`; this is its face on a [`Herald`]. Hidden
//! from the documentation: for the bench only, not a stable API, and never pointed at a
//! database whose deliveries matter ([`reset`] empties the delivery tables).

use crate::error::Error;
use crate::handle::Herald;
use herald_core::DeliveryState;
use herald_store::bench::{
    BenchSchema, BenchServer, bench_analyze, bench_reset, floor_drain_pooled, floor_drain_serial,
    floor_submit_batch_pooled, floor_submit_pooled,
};
use uuid::Uuid;

pub use herald_store::bench::{Commit, SqlSubmit, Work};

/// Empties the delivery tables (accounts are kept), so each compared phase starts from the
/// same table sizes, on connections whose sessions have the server's defaults.
pub async fn reset(herald: &Herald) -> Result<(), Error> {
    herald.transaction(|tx| Box::pin(async move { Ok(bench_reset(tx.conn()).await?) })).await?;
    herald_store::bench::sessions_reset(herald.store()).await?;
    Ok(())
}

/// Fresh planner statistics of the delivery tables, as autovacuum would have given a
/// steady-state database: the bench takes them, untimed, before every timed drain of
/// pre-submitted rows.
pub async fn analyze(herald: &Herald) -> Result<(), Error> {
    herald.transaction(|tx| Box::pin(async move { Ok(bench_analyze(tx.conn()).await?) })).await?;
    Ok(())
}

/// Deliveries in `state`.
pub async fn count_state(herald: &Herald, state: DeliveryState) -> Result<i64, Error> {
    let state = state.as_str();
    let counted = herald
        .transaction(|tx| {
            Box::pin(async move { Ok(herald_store::bench::count_state(tx.conn(), state).await?) })
        })
        .await?;
    Ok(counted.value)
}

/// One floor submit (claim, payload, reservation, journal row; one statement on
/// PostgreSQL) of a fresh delivery id on a pooled connection, committed as `commit` says
/// (on SQLite always its own `BEGIN IMMEDIATE` transaction). Whether the key was new.
pub async fn floor_submit(
    herald: &Herald,
    commit: Commit,
    tenant: Uuid,
    operation_key: &str,
) -> Result<bool, Error> {
    Ok(floor_submit_pooled(herald.store(), commit, tenant, operation_key).await?)
}

/// The batched submit floor: the floor submit of each (tenant, operation key) one after
/// another in one transaction with one COMMIT, on a pooled connection. How many were new.
pub async fn floor_submit_batch(herald: &Herald, items: &[(Uuid, String)]) -> Result<usize, Error> {
    Ok(floor_submit_batch_pooled(herald.store(), items).await?)
}

/// One batch of up to `limit` rows of the drain floor (lease, sent, ledger, journal) in a
/// transaction of its own, taking client `part` of `parts`'s share of the tenants:
/// `Some(rows drained)`, or `None` when it lost to a concurrency conflict and was rolled
/// back, to be run again.
pub async fn floor_drain(
    herald: &Herald,
    limit: i64,
    part: i64,
    parts: i64,
) -> Result<Option<u64>, Error> {
    Ok(floor_drain_pooled(herald.store(), limit, part, parts).await?)
}

/// The drain floor from one client, on one connection, a transaction per batch of
/// `limit`, until a batch comes back empty (SQLite's: one writer at a time). `on_batch`
/// hears each batch's size; returns the rows drained.
pub async fn floor_drain_one_client(
    herald: &Herald,
    limit: i64,
    on_batch: &(dyn Fn(u64) + Send + Sync),
) -> Result<u64, Error> {
    Ok(floor_drain_serial(herald.store(), limit, on_batch).await?)
}

/// One submit through the SQL API (`herald_submit_v1`, or MariaDB's `submit_v2` with the
/// client's fingerprint), autocommitted, as an application's own statement: the
/// delivery's id when it was created.
pub async fn sql_submit(
    herald: &Herald,
    tenant: Uuid,
    operation_key: &str,
    payload: &str,
    version: SqlSubmit,
) -> Result<Option<Uuid>, Error> {
    let store = herald.store();
    Ok(herald_store::bench::sql_submit_pooled(store, tenant, operation_key, payload, version)
        .await?)
}

/// One application transaction (an order row, then `work` of its own time), with an
/// SQL-API submit inside when `submit` names a tenant and a cost.
pub async fn app_commit(
    herald: &Herald,
    order: &str,
    submit: Option<(Uuid, i64)>,
    work: std::time::Duration,
    version: SqlSubmit,
) -> Result<(), Error> {
    Ok(herald_store::bench::app_commit_pooled(herald.store(), order, submit, work, version).await?)
}

/// The same application transaction with the floor's claim inside (stripe `stripe` of
/// the tenant's account), the yardstick of what the rows alone cost it.
pub async fn app_floor_commit(
    herald: &Herald,
    order: &str,
    tenant: Uuid,
    stripe: i16,
    work: std::time::Duration,
) -> Result<(), Error> {
    let store = herald.store();
    Ok(herald_store::bench::app_floor_commit_pooled(store, order, tenant, stripe, work).await?)
}

/// The same application transaction through the library: herald's runner, the order row
/// on the transaction's connection, with `submit` a library submit (tenant, cost) inside
/// it, `work` of the application's own time, COMMIT.
pub async fn app_transaction(
    herald: &Herald,
    order: &str,
    submit: Option<(crate::TenantId, i64)>,
    work: std::time::Duration,
) -> Result<(), Error> {
    let request = submit.map(|(tenant, cost)| {
        let mut req = crate::SubmitRequest::new(
            tenant,
            order,
            "webhook",
            "https://example.com/h",
            crate::Payload::from_text(r#"{"event": "bench"}"#),
        );
        req.cost = Some(cost);
        req
    });
    herald
        .transaction(|tx| {
            let request = request.as_ref();
            Box::pin(async move {
                herald_store::bench::app_order_insert(tx.conn(), order).await?;
                if let Some(req) = request {
                    herald.submit(tx, req).await?;
                }
                tokio::time::sleep(work).await;
                Ok(())
            })
        })
        .await?;
    Ok(())
}

/// Makes the application table [`app_commit`] writes (PostgreSQL).
pub async fn app_table_create(herald: &Herald) -> Result<(), Error> {
    Ok(herald_store::bench::app_table_create(herald.store()).await?)
}

/// The role the store's connections log in as, for the bench's own SQL-API grant.
pub async fn session_role(herald: &Herald) -> Result<String, Error> {
    Ok(herald_store::bench::session_role(herald.store()).await?)
}

/// Opens `connections` of the pool's connections, so that no timed phase pays for
/// connecting (the first phase would otherwise, and the later ones not).
pub async fn pool_fill(herald: &Herald, connections: usize) -> Result<(), Error> {
    Ok(herald_store::bench::pool_fill(herald.store(), connections).await?)
}

/// The database's cumulative work counters ([`Work`]: log bytes, rows, transactions,
/// statements), read on one of the pool's connections; `None` on SQLite. PostgreSQL shows
/// a transaction's statistics up to [`Work::SETTLE`] after it ends.
pub async fn work(herald: &Herald) -> Result<Option<Work>, Error> {
    Ok(herald_store::bench::work_read(herald.store()).await?)
}

/// A connection straight to a PostgreSQL or MariaDB server (no store, no migrations), to
/// make the scratch schema (a database, on MariaDB) the bench measures in.
#[derive(Debug)]
pub struct Server {
    inner: BenchServer,
}

/// A scratch schema made by [`Server::schema_create`], dropped by [`Server::schema_drop`].
#[derive(Debug)]
pub struct Schema {
    inner: BenchSchema,
}

impl Schema {
    /// The server's `url` with this schema as every connection's `search_path`: what to
    /// open a [`Herald`] on.
    pub fn url(&self, url: &str) -> String {
        self.inner.url(url)
    }
}

impl Server {
    /// Connects to the PostgreSQL or MariaDB server at `url`.
    pub async fn connect(url: &str) -> Result<Server, Error> {
        Ok(Server { inner: BenchServer::connect(url).await? })
    }

    /// Which server this is.
    pub fn backend(&self) -> herald_store::Backend {
        self.inner.backend()
    }

    /// The server's `max_connections`.
    pub async fn connections_max(&mut self) -> Result<i64, Error> {
        Ok(self.inner.connections_max().await?)
    }

    /// The server's version, as `SHOW server_version` (PostgreSQL) or `VERSION()`
    /// (MariaDB) prints it.
    pub async fn version(&mut self) -> Result<String, Error> {
        Ok(self.inner.version().await?)
    }

    /// A fresh, empty schema (a database, on MariaDB) with a name of its own.
    pub async fn schema_create(&mut self) -> Result<Schema, Error> {
        Ok(Schema { inner: self.inner.schema_create().await? })
    }

    /// Drops the schema and everything in it.
    pub async fn schema_drop(&mut self, schema: Schema) -> Result<(), Error> {
        Ok(self.inner.schema_drop(schema.inner).await?)
    }

    /// The server's cumulative work counters, as [`work`] reads them.
    pub async fn work(&mut self) -> Result<Work, Error> {
        Ok(self.inner.work().await?)
    }

    pub async fn close(self) {
        self.inner.close().await;
    }
}
