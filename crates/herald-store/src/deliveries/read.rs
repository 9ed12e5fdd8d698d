//! Reads: one delivery, its attempts, a tenant's pages, queue health.

use super::{AttemptRow, DeliveryRow};
use crate::clock::Now;
use crate::conn::Conn;
use crate::error::StoreError;
use herald_core::DeliveryState;
use sqlx::types::Uuid;

/// The delivery with this identity.
pub async fn delivery_by_identity(
    conn: Conn<'_>,
    tenant: Uuid,
    operation_key: &str,
    channel: &str,
) -> Result<Option<DeliveryRow>, StoreError> {
    crate::per_backend!(conn, read::delivery_by_identity(tenant, operation_key, channel))
}

/// One delivery, optionally only if it belongs to `tenant`; `lock` takes its row lock for
/// the rest of the transaction (PostgreSQL; SQLite's writer already holds the database).
pub async fn delivery_get(
    conn: Conn<'_>,
    tenant: Option<Uuid>,
    id: Uuid,
    lock: bool,
) -> Result<Option<DeliveryRow>, StoreError> {
    crate::per_backend!(conn, read::delivery_get(tenant, id, lock))
}

/// A delivery's attempts, in order. An attempt's row is written when it ends, except one
/// that ended `sent` under its own lease: that one, like the one in flight, is read from
/// the delivery row (its `attempt_worker`, `attempt_started_at` and, when sent, `sent_at`).
pub async fn delivery_attempts(conn: Conn<'_>, id: Uuid) -> Result<Vec<AttemptRow>, StoreError> {
    crate::per_backend!(conn, read::delivery_attempts(id))
}

/// Which of a tenant's deliveries a page lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListFilter<'a> {
    pub tenant: Uuid,
    pub state: Option<DeliveryState>,
    pub channel: Option<&'a str>,
    /// The keyset position: only ids before this one (exclusive).
    pub before: Option<Uuid>,
    pub limit: usize,
}

/// A page of a tenant's deliveries, newest first (ids are UUIDv7: id order is creation
/// order).
pub async fn deliveries_list(
    conn: Conn<'_>,
    filter: &ListFilter<'_>,
) -> Result<Vec<DeliveryRow>, StoreError> {
    crate::per_backend!(conn, read::deliveries_list(filter))
}

/// Age in milliseconds of the oldest pending delivery that is due by `now`.
pub async fn oldest_due_age_ms(conn: Conn<'_>, now: Now) -> Result<Option<i64>, StoreError> {
    crate::per_backend!(conn, read::oldest_due_age_ms(now))
}

/// Deliveries per state, for the metrics gauges. A state this build does not know is an
/// error that names it.
pub async fn deliveries_count_by_state(
    conn: Conn<'_>,
) -> Result<Vec<(DeliveryState, i64)>, StoreError> {
    let rows: Vec<(String, i64)> = crate::per_backend!(conn, read::deliveries_count_by_state())?;
    rows.into_iter()
        .map(|(state, n)| {
            let state = state.parse().map_err(|e: herald_core::state::UnknownState| {
                StoreError::Database(sqlx::Error::Decode(e.into()))
            })?;
            Ok((state, n))
        })
        .collect()
}
