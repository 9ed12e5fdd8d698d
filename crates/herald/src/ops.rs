//! What operators and the HTTP face read: pages of deliveries, queue health, the schema.
//! The facade's side of `herald deliveries list`, `GET /v1/deliveries`, the metrics gauges
//! and `herald migrate`, so that neither the server nor the CLI reaches past the library.

use crate::delivery::Delivery;
use crate::error::Error;
use crate::handle::Herald;
use herald_core::DeliveryState;
use herald_core::{DeliveryId, TenantId};
use herald_store::deliveries::{
    ListFilter, deliveries_count_by_state, deliveries_list, delivery_get, oldest_due_age_ms,
};
use herald_store::quota::quota_reserved_by_tenant;
use herald_store::{DbUrl, Store, StoreOptions};
use std::time::Duration;

/// Which of a tenant's deliveries to list, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryFilter {
    pub tenant: TenantId,
    pub state: Option<DeliveryState>,
    pub channel: Option<String>,
    /// Keyset position: only deliveries created before this one (exclusive).
    pub before: Option<DeliveryId>,
    pub limit: usize,
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
        let filter = ListFilter {
            tenant: filter.tenant.as_uuid(),
            state: filter.state,
            channel: filter.channel.as_deref(),
            before: filter.before.map(DeliveryId::as_uuid),
            limit: filter.limit,
        };
        let rows = self
            .read(|conn, _| Box::pin(async move { deliveries_list(conn, &filter).await }))
            .await?;
        rows.into_iter().map(Delivery::try_from).collect()
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
