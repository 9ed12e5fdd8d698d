//! Destination limits and pacing (`herald_destination_limits`, `herald_destination_pace`,
//! `herald_lanes`; herald_core::fair says what they mean): the limits an operator set,
//! the token bucket of each, locked by the leases that take its destination's rows, what
//! is in flight to a destination, and the pauses receivers asked for.

use crate::conn::Conn;
use crate::error::StoreError;
use herald_core::fair::{LaneHealth, Limit};
use sqlx::types::Uuid;

/// One limit as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitRow {
    pub limit: Limit,
    pub updated_ms: i64,
    /// Who set it (`admin`, `operator`, …).
    pub actor: String,
}

/// Every limit, by destination then scope.
pub async fn limits_list(conn: Conn<'_>) -> Result<Vec<LimitRow>, StoreError> {
    crate::per_backend!(conn, destinations::limits_list())
}

/// Sets `row` (a limit of its destination and scope replaces the one there was).
pub async fn limit_set(conn: Conn<'_>, row: &LimitRow) -> Result<(), StoreError> {
    crate::per_backend!(conn, destinations::limit_set(row))
}

/// Removes the limit of (`destination`, `tenant`), and its bucket; `false` when none.
pub async fn limit_remove(
    conn: Conn<'_>,
    destination: &str,
    tenant: Option<Uuid>,
) -> Result<bool, StoreError> {
    let scope = scope_key(tenant);
    crate::per_backend!(conn, destinations::limit_remove(destination, &scope))
}

/// The token bucket of (`destination`, `scope`), locked until the transaction ends (made
/// full, `full` tokens at `now_ms`, when it is new): (tokens, when they were counted).
pub async fn pace_lock(
    conn: Conn<'_>,
    destination: &str,
    scope: &str,
    full: f64,
    now_ms: i64,
) -> Result<(f64, i64), StoreError> {
    crate::per_backend!(conn, destinations::pace_lock(destination, scope, full, now_ms))
}

/// Stores a bucket's tokens as of `now_ms`.
pub async fn pace_save(
    conn: Conn<'_>,
    destination: &str,
    scope: &str,
    tokens: f64,
    now_ms: i64,
) -> Result<(), StoreError> {
    crate::per_backend!(conn, destinations::pace_save(destination, scope, tokens, now_ms))
}

/// Sends in flight (`sending`) to `destination`, per tenant.
pub async fn deliveries_in_flight(
    conn: Conn<'_>,
    destination: &str,
) -> Result<Vec<(Uuid, i64)>, StoreError> {
    crate::per_backend!(conn, destinations::deliveries_in_flight(destination))
}

/// Pauses the lane (`tenant`, `destination`) until `until_ms` (a later pause there was
/// stays), and forgets pauses of healthy lanes that ended before `now_ms`.
pub async fn lane_pause(
    conn: Conn<'_>,
    tenant: Uuid,
    destination: &str,
    until_ms: i64,
    now_ms: i64,
) -> Result<(), StoreError> {
    crate::per_backend!(conn, destinations::lane_pause(tenant, destination, until_ms, now_ms))
}

/// Sets `tenant`'s `send_weight` (its share of a worker's slots against other tenants',
/// 1 to 100); `false` when there is no such tenant.
pub async fn tenant_send_weight(
    conn: Conn<'_>,
    tenant: Uuid,
    weight: u32,
) -> Result<bool, StoreError> {
    crate::per_backend!(conn, destinations::tenant_send_weight(tenant, weight as i32))
}

/// A lane's health, locked until the transaction ends (`None`: healthy, no row).
pub async fn lane_health(
    conn: Conn<'_>,
    tenant: Uuid,
    destination: &str,
) -> Result<Option<LaneHealth>, StoreError> {
    crate::per_backend!(conn, destinations::lane_health(tenant, destination))
}

/// Stores a lane's health.
pub async fn lane_health_put(
    conn: Conn<'_>,
    tenant: Uuid,
    destination: &str,
    health: &LaneHealth,
    now_ms: i64,
) -> Result<(), StoreError> {
    crate::per_backend!(conn, destinations::lane_health_put(tenant, destination, health, now_ms))
}

/// Forgets a lane's health (it sent, or was enabled again); `false` when it had none.
pub async fn lane_health_clear(
    conn: Conn<'_>,
    tenant: Uuid,
    destination: &str,
) -> Result<bool, StoreError> {
    crate::per_backend!(conn, destinations::lane_health_clear(tenant, destination))
}

/// Lets a lane's next probe wait until `until_ms` (the probe a lease just took).
pub async fn lane_probe(
    conn: Conn<'_>,
    tenant: Uuid,
    destination: &str,
    until_ms: i64,
) -> Result<(), StoreError> {
    crate::per_backend!(conn, destinations::lane_probe(tenant, destination, until_ms))
}

/// Lanes with failures (an open or disabled circuit, or failing sends), `tenant`'s when
/// given, the most failures first, at most `limit`.
pub async fn lanes_failing(
    conn: Conn<'_>,
    tenant: Option<Uuid>,
    limit: usize,
) -> Result<Vec<(Uuid, String, LaneHealth)>, StoreError> {
    crate::per_backend!(conn, destinations::lanes_failing(tenant, limit as i64))
}

/// A tenant's events webhook (`None`: none set); `Err` only on the database.
pub async fn tenant_events_url(conn: Conn<'_>, tenant: Uuid) -> Result<Option<String>, StoreError> {
    crate::per_backend!(conn, destinations::tenant_events_url(tenant))
}

/// Sets (or, `None`, removes) a tenant's events webhook; `false` when no such tenant.
pub async fn tenant_events_url_set(
    conn: Conn<'_>,
    tenant: Uuid,
    url: Option<&str>,
) -> Result<bool, StoreError> {
    crate::per_backend!(conn, destinations::tenant_events_url_set(tenant, url))
}

pub(crate) type HealthTuple = (i64, i32, Option<i64>, Option<i64>, Option<i64>, Option<i64>);

pub(crate) fn health_of(
    (until_ms, failures, failing_since_ms, probe_ms, opened_ms, disabled_ms): HealthTuple,
) -> LaneHealth {
    let failures = failures.max(0) as u32;
    LaneHealth { until_ms, failures, failing_since_ms, probe_ms, opened_ms, disabled_ms }
}

/// `*` or the tenant's id: a limit's scope as keyed.
pub fn scope_key(tenant: Option<Uuid>) -> String {
    tenant.map_or_else(|| "*".to_string(), |t| t.to_string())
}

pub(crate) type LimitTuple = (String, Option<Uuid>, Option<i32>, Option<f64>, i64, String);

pub(crate) fn limit_row(
    (destination, tenant, max_in_flight, per_second, updated_ms, actor): LimitTuple,
) -> LimitRow {
    let max_in_flight = max_in_flight.map(|n| n.max(1) as u32);
    LimitRow { limit: Limit { destination, tenant, max_in_flight, per_second }, updated_ms, actor }
}

/// A backend's statements: `list`; `set` (destination, tenant_id, scope_key,
/// max_in_flight, per_second, updated_ms, actor; an upsert); `remove` and `remove_pace`
/// (destination, scope_key); `pace_create` (destination, scope_key, tokens, tokens_ms; no
/// change when there), `pace_lock` (destination, scope_key → tokens, tokens_ms, locked),
/// `pace_save` (tokens, tokens_ms, destination, scope_key); `in_flight` (destination →
/// tenant, count); `pause` (tenant, destination, until_ms; keeping a later end) and
/// `pauses_prune` (now_ms); `weight` (send_weight, tenant id); `health` (tenant,
/// destination → until_ms, failures, failing_since_ms, probe_ms, opened_ms, disabled_ms;
/// locked),
/// `health_put` (tenant, destination, those six, updated_ms; an upsert), `health_clear`
/// (tenant, destination), `probe` (until_ms, tenant, destination), `failing` (limit) and
/// `failing_of` (tenant, limit) → tenant, destination and the six; `events_url` (tenant),
/// `events_url_set` (url, tenant).
pub(crate) struct DestinationSql {
    pub list: &'static str,
    pub set: &'static str,
    pub remove: &'static str,
    pub remove_pace: &'static str,
    pub pace_create: &'static str,
    pub pace_lock: &'static str,
    pub pace_save: &'static str,
    pub in_flight: &'static str,
    pub pause: &'static str,
    pub pauses_prune: &'static str,
    pub weight: &'static str,
    pub health: &'static str,
    pub health_put: &'static str,
    pub health_clear: &'static str,
    pub probe: &'static str,
    pub failing: &'static str,
    pub failing_of: &'static str,
    pub events_url: &'static str,
    pub events_url_set: &'static str,
}

/// A backend's functions of this module over its connection type and its
/// [`DestinationSql`].
macro_rules! destinations_fns {
    ($conn:ty, $sql:expr) => {
        use crate::destinations::{LimitRow, LimitTuple, limit_row, scope_key};
        use crate::error::StoreError;
        use sqlx::types::Uuid;

        pub(crate) async fn limits_list(c: &mut $conn) -> Result<Vec<LimitRow>, StoreError> {
            let rows: Vec<LimitTuple> = sqlx::query_as($sql.list).fetch_all(c).await?;
            Ok(rows.into_iter().map(limit_row).collect())
        }

        pub(crate) async fn limit_set(c: &mut $conn, row: &LimitRow) -> Result<(), StoreError> {
            let l = &row.limit;
            sqlx::query($sql.set)
                .bind(&l.destination)
                .bind(l.tenant)
                .bind(scope_key(l.tenant))
                .bind(l.max_in_flight.map(|n| n as i32))
                .bind(l.per_second)
                .bind(row.updated_ms)
                .bind(&row.actor)
                .execute(c)
                .await?;
            Ok(())
        }

        pub(crate) async fn limit_remove(
            c: &mut $conn,
            destination: &str,
            scope: &str,
        ) -> Result<bool, StoreError> {
            let removed = sqlx::query($sql.remove)
                .bind(destination)
                .bind(scope)
                .execute(&mut *c)
                .await?
                .rows_affected();
            sqlx::query($sql.remove_pace).bind(destination).bind(scope).execute(c).await?;
            Ok(removed == 1)
        }

        pub(crate) async fn pace_lock(
            c: &mut $conn,
            destination: &str,
            scope: &str,
            full: f64,
            now_ms: i64,
        ) -> Result<(f64, i64), StoreError> {
            sqlx::query($sql.pace_create)
                .bind(destination)
                .bind(scope)
                .bind(full)
                .bind(now_ms)
                .execute(&mut *c)
                .await?;
            Ok(sqlx::query_as($sql.pace_lock).bind(destination).bind(scope).fetch_one(c).await?)
        }

        pub(crate) async fn pace_save(
            c: &mut $conn,
            destination: &str,
            scope: &str,
            tokens: f64,
            now_ms: i64,
        ) -> Result<(), StoreError> {
            sqlx::query($sql.pace_save)
                .bind(tokens)
                .bind(now_ms)
                .bind(destination)
                .bind(scope)
                .execute(c)
                .await?;
            Ok(())
        }

        pub(crate) async fn deliveries_in_flight(
            c: &mut $conn,
            destination: &str,
        ) -> Result<Vec<(Uuid, i64)>, StoreError> {
            Ok(sqlx::query_as($sql.in_flight).bind(destination).fetch_all(c).await?)
        }

        pub(crate) async fn lane_pause(
            c: &mut $conn,
            tenant: Uuid,
            destination: &str,
            until_ms: i64,
            now_ms: i64,
        ) -> Result<(), StoreError> {
            sqlx::query($sql.pauses_prune).bind(now_ms).execute(&mut *c).await?;
            sqlx::query($sql.pause)
                .bind(tenant)
                .bind(destination)
                .bind(until_ms)
                .bind(now_ms)
                .execute(c)
                .await?;
            Ok(())
        }

        pub(crate) async fn lane_health(
            c: &mut $conn,
            tenant: Uuid,
            destination: &str,
        ) -> Result<Option<herald_core::fair::LaneHealth>, StoreError> {
            let row: Option<crate::destinations::HealthTuple> = sqlx::query_as($sql.health)
                .bind(tenant)
                .bind(destination)
                .fetch_optional(c)
                .await?;
            Ok(row.map(crate::destinations::health_of))
        }

        pub(crate) async fn lane_health_put(
            c: &mut $conn,
            tenant: Uuid,
            destination: &str,
            h: &herald_core::fair::LaneHealth,
            now_ms: i64,
        ) -> Result<(), StoreError> {
            sqlx::query($sql.health_put)
                .bind(tenant)
                .bind(destination)
                .bind(h.until_ms)
                .bind(h.failures.min(i32::MAX as u32) as i32)
                .bind(h.failing_since_ms)
                .bind(h.probe_ms)
                .bind(h.opened_ms)
                .bind(h.disabled_ms)
                .bind(now_ms)
                .execute(c)
                .await?;
            Ok(())
        }

        pub(crate) async fn lane_health_clear(
            c: &mut $conn,
            tenant: Uuid,
            destination: &str,
        ) -> Result<bool, StoreError> {
            let q = sqlx::query($sql.health_clear).bind(tenant).bind(destination);
            Ok(q.execute(c).await?.rows_affected() == 1)
        }

        pub(crate) async fn lane_probe(
            c: &mut $conn,
            tenant: Uuid,
            destination: &str,
            until_ms: i64,
        ) -> Result<(), StoreError> {
            sqlx::query($sql.probe)
                .bind(until_ms)
                .bind(tenant)
                .bind(destination)
                .execute(c)
                .await?;
            Ok(())
        }

        pub(crate) async fn lanes_failing(
            c: &mut $conn,
            tenant: Option<Uuid>,
            limit: i64,
        ) -> Result<Vec<(Uuid, String, herald_core::fair::LaneHealth)>, StoreError> {
            type Row = (Uuid, String, i64, i32, Option<i64>, Option<i64>, Option<i64>, Option<i64>);
            let rows: Vec<Row> = match tenant {
                Some(t) => sqlx::query_as($sql.failing_of).bind(t).bind(limit).fetch_all(c).await?,
                None => sqlx::query_as($sql.failing).bind(limit).fetch_all(c).await?,
            };
            Ok(rows
                .into_iter()
                .map(|(t, d, u, f, s, p, o, x)| {
                    (t, d, crate::destinations::health_of((u, f, s, p, o, x)))
                })
                .collect())
        }

        pub(crate) async fn tenant_events_url(
            c: &mut $conn,
            tenant: Uuid,
        ) -> Result<Option<String>, StoreError> {
            let url: Option<Option<String>> =
                sqlx::query_scalar($sql.events_url).bind(tenant).fetch_optional(c).await?;
            Ok(url.flatten())
        }

        pub(crate) async fn tenant_events_url_set(
            c: &mut $conn,
            tenant: Uuid,
            url: Option<&str>,
        ) -> Result<bool, StoreError> {
            let q = sqlx::query($sql.events_url_set).bind(url).bind(tenant);
            Ok(q.execute(c).await?.rows_affected() == 1)
        }

        pub(crate) async fn tenant_send_weight(
            c: &mut $conn,
            tenant: Uuid,
            weight: i32,
        ) -> Result<bool, StoreError> {
            let q = sqlx::query($sql.weight).bind(weight).bind(tenant);
            Ok(q.execute(c).await?.rows_affected() == 1)
        }
    };
}
pub(crate) use destinations_fns;
