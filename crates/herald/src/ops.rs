//! What operators and the HTTP face read: pages of deliveries, queue health, the schema.
//! The facade's side of `herald deliveries list`, `GET /v1/deliveries`, the metrics gauges
//! and `herald migrate`, so that neither the server nor the CLI reaches past the library.

use crate::bulk::uuid_at;
use crate::delivery::Delivery;
use crate::delivery::ts;
use crate::error::Error;
use crate::handle::Herald;
use herald_core::DeliveryState;
use herald_core::OperationKey;
use herald_core::{DeliveryId, TenantId};
use herald_store::deliveries::{
    ListFilter, deliveries_count_by_channel, deliveries_count_by_state, deliveries_list,
    delivery_by_identity, delivery_get, delivery_payload, oldest_due_age_ms,
};
use herald_store::quota::{quota_journal_recent, quota_reserved_by_tenant};
use herald_store::tenants::{tenant_get, tenants_list};
use herald_store::{DbUrl, Store, StoreOptions};
use jiff::Timestamp;
use std::time::Duration;

/// Which of a tenant's deliveries to list, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFilter {
    /// `None`: every tenant's deliveries (an operator's view over all).
    pub tenant: Option<TenantId>,
    pub state: Option<DeliveryState>,
    pub channel: Option<String>,
    /// The error code of the delivery's latest attempt.
    pub error_code: Option<String>,
    /// Operation keys that start with this.
    pub key_prefix: Option<String>,
    /// Recipients that start with this (`https://hooks.example.com`, a URL's path).
    pub to_prefix: Option<String>,
    /// Deliveries that failed at or after this time.
    pub failed_since: Option<Timestamp>,
    /// Keyset position: only deliveries created before this one (exclusive).
    pub before: Option<DeliveryId>,
    /// Only deliveries created at or after this time.
    pub from: Option<Timestamp>,
    /// Only deliveries created before this time.
    pub to: Option<Timestamp>,
    pub limit: usize,
}

/// One entry of a tenant's quota journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalEntry {
    pub at: Timestamp,
    pub quota_key: String,
    /// `grant`, `reserve`, `commit` or `release`.
    pub kind: String,
    pub amount: i64,
    pub delivery: Option<DeliveryId>,
}

/// The queue as the metrics gauges show it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Deliveries per state; a state with none is absent.
    pub by_state: Vec<(DeliveryState, i64)>,
    /// How long the oldest due, pending delivery has waited.
    pub oldest_due_age: Option<Duration>,
    /// Units reserved per tenant, over all its accounts.
    pub reserved_by_tenant: Vec<(TenantId, i64)>,
}

/// What `Herald::migrate` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migrated {
    pub backend: crate::Backend,
    /// The versions applied by this call, in order.
    pub applied: Vec<i64>,
    /// The schema version now.
    pub version: i64,
}

impl Herald {
    /// A page of a tenant's deliveries.
    pub async fn deliveries(&self, filter: &DeliveryFilter) -> Result<Vec<Delivery>, Error> {
        // Ids are UUIDv7: a creation-time range is an id range.
        let to = filter.to.map(uuid_at);
        let before = match (filter.before.map(DeliveryId::as_uuid), to) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let filter = ListFilter {
            tenant: filter.tenant.map(TenantId::as_uuid),
            state: filter.state,
            channel: filter.channel.as_deref(),
            before,
            from: filter.from.map(uuid_at),
            error_code: filter.error_code.as_deref(),
            key_prefix: filter.key_prefix.as_deref(),
            to_prefix: filter.to_prefix.as_deref(),
            failed_since: filter.failed_since.map(|t| t.as_millisecond()),
            limit: filter.limit,
        };
        let rows = self
            .read(|conn, _| Box::pin(async move { deliveries_list(conn, &filter).await }))
            .await?;
        rows.into_iter().map(Delivery::try_from).collect()
    }

    /// A tenant's deliveries with this operation key, on any of `channels` (the identity
    /// is (tenant, operation key, channel)).
    pub async fn deliveries_by_key(
        &self,
        tenant: TenantId,
        operation_key: &str,
        channels: &[String],
    ) -> Result<Vec<Delivery>, Error> {
        // Text no operation key can be (a control character, NUL, which PostgreSQL text
        // cannot even hold) finds nothing, without asking the database.
        if OperationKey::new(operation_key).is_err() {
            return Ok(Vec::new());
        }
        let tenant = tenant.as_uuid();
        let rows = self
            .read(|mut conn, _| {
                Box::pin(async move {
                    let mut found = Vec::new();
                    for channel in channels {
                        if let Some(row) =
                            delivery_by_identity(conn.reborrow(), tenant, operation_key, channel)
                                .await?
                        {
                            found.push(row);
                        }
                    }
                    Ok(found)
                })
            })
            .await?;
        rows.into_iter().map(Delivery::try_from).collect()
    }

    /// A tenant's delivery's payload, as submitted (JSON text).
    pub async fn payload(&self, tenant: TenantId, id: DeliveryId) -> Result<String, Error> {
        let (tenant, id) = (tenant.as_uuid(), id.as_uuid());
        self.read(|mut conn, _| {
            Box::pin(async move {
                if delivery_get(conn.reborrow(), Some(tenant), id, false).await?.is_none() {
                    return Ok(None);
                }
                delivery_payload(conn, id).await
            })
        })
        .await?
        .ok_or(Error::NotFound)
    }

    /// A tenant's name; `NotFound` when there is no such tenant.
    pub async fn tenant_name(&self, tenant: TenantId) -> Result<String, Error> {
        let tenant = tenant.as_uuid();
        self.read(|conn, _| Box::pin(async move { tenant_get(conn, tenant).await }))
            .await?
            .map(|row| row.name)
            .ok_or(Error::NotFound)
    }

    /// Tenants (id, name), by name, at most `limit`.
    pub async fn tenants(&self, limit: usize) -> Result<Vec<(TenantId, String)>, Error> {
        let rows =
            self.read(|conn, _| Box::pin(async move { tenants_list(conn, limit).await })).await?;
        Ok(rows.into_iter().map(|(id, name)| (TenantId::from_uuid(id), name)).collect())
    }

    /// Deliveries per (channel, state), of one tenant or of all.
    pub async fn delivery_counts(
        &self,
        tenant: Option<TenantId>,
    ) -> Result<Vec<(String, DeliveryState, i64)>, Error> {
        let tenant = tenant.map(TenantId::as_uuid);
        self.read(|conn, _| {
            Box::pin(async move { deliveries_count_by_channel(conn, tenant).await })
        })
        .await
    }

    /// A tenant's newest quota journal entries, newest first.
    pub async fn journal(
        &self,
        tenant: TenantId,
        limit: usize,
    ) -> Result<Vec<JournalEntry>, Error> {
        let tenant = tenant.as_uuid();
        let rows = self
            .read(|conn, _| {
                Box::pin(async move { quota_journal_recent(conn, tenant, limit).await })
            })
            .await?;
        rows.into_iter()
            .map(|r| {
                Ok(JournalEntry {
                    at: ts(r.at, || format!("the journal entry of {}", r.quota_key))?,
                    quota_key: r.quota_key,
                    kind: r.kind,
                    amount: r.amount,
                    delivery: r.delivery_id.map(DeliveryId::from_uuid),
                })
            })
            .collect()
    }

    /// The tenant a delivery belongs to, for an operator who holds only its id.
    pub async fn delivery_tenant(&self, id: DeliveryId) -> Result<TenantId, Error> {
        self.read(|conn, _| {
            Box::pin(async move { delivery_get(conn, None, id.as_uuid(), false).await })
        })
        .await?
        .map(|row| TenantId::from_uuid(row.tenant_id))
        .ok_or(Error::NotFound)
    }

    /// How long the oldest due delivery has waited past its time, of every tenant (one
    /// read of the due index; `None` when nothing is due).
    pub async fn oldest_due_age(&self) -> Result<Option<Duration>, Error> {
        let now = self.clock().now();
        let age = self
            .read(|conn, _| Box::pin(async move { oldest_due_age_ms(conn, now).await }))
            .await?;
        Ok(age.map(|ms| Duration::from_millis(ms.max(0) as u64)))
    }

    /// Counts for the metrics gauges: reads outside a transaction, so on SQLite they never
    /// take the write lock (three statements, so not one snapshot; gauges need none).
    pub async fn queue_stats(&self) -> Result<QueueStats, Error> {
        let now = self.clock().now();
        self.read(|mut conn, _| {
            Box::pin(async move {
                let by_state = deliveries_count_by_state(conn.reborrow()).await?;
                let age = oldest_due_age_ms(conn.reborrow(), now).await?;
                let reserved_by_tenant = quota_reserved_by_tenant(conn)
                    .await?
                    .into_iter()
                    .map(|(tenant, units)| (TenantId::from_uuid(tenant), units))
                    .collect();
                Ok(QueueStats {
                    by_state,
                    oldest_due_age: age.map(|ms| Duration::from_millis(ms.max(0) as u64)),
                    reserved_by_tenant,
                })
            })
        })
        .await
    }

    /// Applies pending migrations to the database at `url` without opening an engine on it
    /// (`herald migrate`). A database with a schema newer than this build is refused.
    pub async fn migrate(url: &str, options: &StoreOptions) -> Result<Migrated, Error> {
        let store = Store::connect(&DbUrl::parse(url)?, options).await?;
        let report = store.migrate().await;
        store.close().await;
        let report = report?;
        Ok(Migrated { backend: store.backend(), applied: report.applied, version: report.version })
    }
}
