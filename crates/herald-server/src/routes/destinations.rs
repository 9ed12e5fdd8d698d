//! Destinations: `/v1/limits` (herald's `Herald::set_destination_limit`: at most N sends in
//! flight and R started per second to a destination — a webhook's host, `smtp`, or `*` for
//! every destination's default — across every herald process on the database) and
//! `/v1/circuits` (lanes whose sends fail: open circuits wait for a probe, disabled ones
//! for `enable`). The admin key acts over every tenant or one; a tenant's key, on its own.

use crate::audit::{self, By, Caller};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ClientAddr, JsonBody, NoQuery};
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use herald::{DestinationLimit, LaneState, TenantId};
use herald_core::fair::Limit;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A limit to set.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitRequest {
    /// A webhook's host, `smtp` for email, a channel's name, or `*` (every destination
    /// without a limit of its own, each counted apart).
    #[schema(min_length = 1, max_length = 255)]
    pub destination: String,
    /// The admin's narrowing: only this tenant's sends (a tenant's key always limits its
    /// own only).
    #[schema(format = "uuid")]
    pub tenant: Option<String>,
    /// Most sends in flight at once, across every process.
    #[serde(default, deserialize_with = "crate::wire::integral::opt")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 100000)]
    pub max_in_flight: Option<u32>,
    /// Most sends started per second (a bucket of one second's worth, at least one).
    #[schema(exclusive_minimum = 0, maximum = 1000000)]
    pub per_second: Option<f64>,
}

/// A limit to remove.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitRemoveRequest {
    #[schema(min_length = 1, max_length = 255)]
    pub destination: String,
    #[schema(format = "uuid")]
    pub tenant: Option<String>,
}

/// A limit in place.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LimitView {
    pub destination: String,
    /// Only this tenant's sends; `null`: every tenant's.
    pub tenant: Option<String>,
    pub max_in_flight: Option<u32>,
    pub per_second: Option<f64>,
    /// RFC 3339, UTC.
    pub updated_at: String,
    pub actor: String,
}

impl From<DestinationLimit> for LimitView {
    fn from(l: DestinationLimit) -> LimitView {
        LimitView {
            destination: l.limit.destination,
            tenant: l.limit.tenant.map(|t| t.to_string()),
            max_in_flight: l.limit.max_in_flight,
            per_second: l.limit.per_second,
            updated_at: crate::wire::rfc3339_ms(l.updated_ms),
            actor: l.actor,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LimitList {
    /// By destination; a tenant's key sees its own and those over every tenant.
    pub limits: Vec<LimitView>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct LimitRemoved {
    /// `false`: there was no such limit.
    pub removed: bool,
}

fn own_of(caller: &Caller) -> Option<TenantId> {
    match caller {
        Caller::Admin => None,
        Caller::Tenant { tenant, .. } => Some(*tenant),
    }
}

fn by_of(caller: &Caller, headers: &HeaderMap, client: ClientAddr) -> By {
    match caller {
        Caller::Admin => By::admin(client),
        Caller::Tenant { .. } => By::tenant(headers, client),
    }
}

#[utoipa::path(get, path = "/v1/limits",
    responses((status = 200, body = LimitList, description = "The destination limits: every one for the admin key, a tenant's own and those over every tenant for its key"),
        (status = 401)))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    _: NoQuery,
) -> ApiResult<Json<LimitList>> {
    let limits = state.herald.destination_limits(own_of(&caller)).await?;
    Ok(Json(LimitList { limits: limits.into_iter().map(Into::into).collect() }))
}

#[utoipa::path(post, path = "/v1/limits", request_body = LimitRequest,
    responses((status = 200, body = LimitView, description = "The limit is set (replacing the one of its destination and scope); sends over it wait, no attempt spent"),
        (status = 400), (status = 401), (status = 404)))]
pub async fn set(
    State(state): State<AppState>,
    caller: Caller,
    _: NoQuery,
    client: ClientAddr,
    headers: HeaderMap,
    JsonBody(body): JsonBody<LimitRequest>,
) -> ApiResult<Json<LimitView>> {
    let tenant = crate::routes::scoped(own_of(&caller), body.tenant.as_deref())?;
    let limit = Limit {
        destination: body.destination.clone(),
        tenant: tenant.map(|t| t.as_uuid()),
        max_in_flight: body.max_in_flight,
        per_second: body.per_second,
    };
    let by = by_of(&caller, &headers, client);
    let actor = audit::actor_name(&by.actor);
    let limit = state.herald.set_destination_limit(&limit, &actor).await?;
    let entry = by.entry(tenant, "limit_set").target(limit.destination.clone());
    audit::record(&state, entry).await;
    let shown = state
        .herald
        .destination_limits(tenant)
        .await?
        .into_iter()
        .find(|l| l.limit.destination == limit.destination && l.limit.tenant == limit.tenant)
        .ok_or_else(|| ApiError::not_found("limit"))?;
    Ok(Json(shown.into()))
}

#[utoipa::path(post, path = "/v1/limits/remove", request_body = LimitRemoveRequest,
    responses((status = 200, body = LimitRemoved, description = "The limit is gone; what it held back is due at once"),
        (status = 400), (status = 401), (status = 404)))]
pub async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    _: NoQuery,
    client: ClientAddr,
    headers: HeaderMap,
    JsonBody(body): JsonBody<LimitRemoveRequest>,
) -> ApiResult<Json<LimitRemoved>> {
    let tenant = crate::routes::scoped(own_of(&caller), body.tenant.as_deref())?;
    let removed = state.herald.remove_destination_limit(&body.destination, tenant).await?;
    if removed {
        let by = by_of(&caller, &headers, client);
        let entry = by.entry(tenant, "limit_remove").target(body.destination.trim().to_string());
        audit::record(&state, entry).await;
    }
    Ok(Json(LimitRemoved { removed }))
}

/// A lane whose sends fail.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CircuitView {
    pub tenant: String,
    pub destination: String,
    /// `closed` (failing, not open yet), `open` (waiting for its next probe) or `disabled`
    /// (waiting until enabled).
    pub circuit: String,
    /// Consecutive failed sends.
    pub failures: u32,
    /// RFC 3339, UTC: since when it fails.
    pub failing_since: Option<String>,
    /// RFC 3339, UTC: when it sends again (a probe, or the end of a receiver's Retry-After).
    pub waits_until: Option<String>,
    /// RFC 3339, UTC.
    pub disabled_at: Option<String>,
}

impl From<LaneState> for CircuitView {
    fn from(l: LaneState) -> CircuitView {
        let h = l.health;
        let at = |ms: Option<i64>| ms.map(crate::wire::rfc3339_ms);
        CircuitView {
            tenant: l.tenant.to_string(),
            destination: l.destination,
            circuit: l.circuit.to_string(),
            failures: h.failures,
            failing_since: at(h.failing_since_ms),
            waits_until: at((h.until_ms > 0 && h.disabled_ms.is_none()).then_some(h.until_ms)),
            disabled_at: at(h.disabled_ms),
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CircuitList {
    /// The most failures first.
    pub circuits: Vec<CircuitView>,
}

/// A lane to enable again.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnableRequest {
    #[schema(min_length = 1, max_length = 255)]
    pub destination: String,
    /// The lane's tenant (the admin's; a tenant's key enables its own).
    #[schema(format = "uuid")]
    pub tenant: Option<String>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Enabled {
    /// `false`: the lane had no failures.
    pub enabled: bool,
}

#[utoipa::path(get, path = "/v1/circuits",
    responses((status = 200, body = CircuitList, description = "Lanes whose sends fail: every tenant's for the admin key, a tenant's own for its key"),
        (status = 401)))]
pub async fn circuits(
    State(state): State<AppState>,
    caller: Caller,
    _: NoQuery,
) -> ApiResult<Json<CircuitList>> {
    let lanes = state.herald.lanes_failing(own_of(&caller)).await?;
    Ok(Json(CircuitList { circuits: lanes.into_iter().map(Into::into).collect() }))
}

#[utoipa::path(post, path = "/v1/circuits/enable", request_body = EnableRequest,
    responses((status = 200, body = Enabled, description = "The lane sends again: what waited is due now"),
        (status = 400), (status = 401), (status = 404)))]
pub async fn enable(
    State(state): State<AppState>,
    caller: Caller,
    _: NoQuery,
    client: ClientAddr,
    headers: HeaderMap,
    JsonBody(body): JsonBody<EnableRequest>,
) -> ApiResult<Json<Enabled>> {
    let tenant = crate::routes::scoped(own_of(&caller), body.tenant.as_deref())?
        .ok_or_else(|| ApiError::invalid("tenant is required with the admin key"))?;
    let enabled = state.herald.enable_lane(tenant, &body.destination).await?;
    if enabled {
        let by = by_of(&caller, &headers, client);
        let entry =
            by.entry(Some(tenant), "lane_enable").target(body.destination.trim().to_string());
        audit::record(&state, entry).await;
    }
    Ok(Json(Enabled { enabled }))
}
