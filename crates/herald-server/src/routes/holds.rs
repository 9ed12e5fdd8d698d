//! `/v1/holds`: stop sending to a channel, a tenant or a destination while an incident
//! lasts, and resume (herald's `Herald::hold`). The admin key holds any scope, over every
//! tenant or one; a tenant's key holds its own deliveries only.

use crate::audit::{self, By, Caller};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ClientAddr, JsonBody, NoQuery};
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use herald::{Hold, HoldKind, HoldScope, TenantId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A scope to hold or release.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HoldRequest {
    /// `channel`, `tenant` or `destination` (a webhook's host, or `smtp` for email).
    #[schema(pattern = "^(channel|tenant|destination)$")]
    pub kind: String,
    /// The channel's name, the tenant's id, or the destination's host.
    #[schema(min_length = 1, max_length = 255)]
    pub value: String,
    /// The admin's narrowing: only this tenant's deliveries (a tenant's key always holds
    /// its own only).
    #[schema(format = "uuid")]
    pub tenant: Option<String>,
}

/// A hold in place.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HoldView {
    pub kind: String,
    pub value: String,
    /// Only this tenant's deliveries; `null`: every tenant's.
    pub tenant: Option<String>,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// `admin`, `tenant:<key id>` or `operator`.
    pub actor: String,
}

impl From<Hold> for HoldView {
    fn from(h: Hold) -> HoldView {
        HoldView {
            kind: h.scope.kind.to_string(),
            value: h.scope.value,
            tenant: h.scope.tenant.map(|t| t.to_string()),
            created_at: crate::wire::rfc3339_ms(h.created_ms),
            actor: h.actor,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HoldList {
    /// Oldest first; a tenant's key sees its own and those over every tenant.
    pub holds: Vec<HoldView>,
}

/// What placing or releasing did.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HoldResult {
    /// `false`: the scope was held already (placing) or not held (releasing).
    pub changed: bool,
    /// Pending deliveries held, or released (due again when they were due), now.
    pub deliveries: u64,
}

/// The scope a caller may hold: the admin's as asked, a tenant's narrowed to itself.
pub(crate) fn scope_of(own: Option<TenantId>, body: &HoldRequest) -> ApiResult<HoldScope> {
    let kind = HoldKind::parse(&body.kind)
        .ok_or_else(|| ApiError::invalid("kind must be channel, tenant or destination"))?;
    let tenant = crate::routes::scoped(own, body.tenant.as_deref())?;
    let value = body.value.trim().to_string();
    if kind == HoldKind::Tenant {
        let named: TenantId = crate::routes::path_id(&value, "tenant")?;
        if own.is_some_and(|own| own != named) || tenant.is_some_and(|t| t != named) {
            return Err(ApiError::not_found("tenant"));
        }
        // A tenant hold names its tenant in `value`: no narrowing beside it.
        return Ok(HoldScope { kind, value: named.to_string(), tenant: None });
    }
    Ok(HoldScope { kind, value, tenant: tenant.map(|t| t.as_uuid()) })
}

/// Places or releases a hold for a caller (`own`: its tenant; `None`: the admin), and logs it.
pub(crate) async fn change(
    state: &AppState,
    own: Option<TenantId>,
    body: &HoldRequest,
    by: &By,
    release: bool,
) -> ApiResult<HoldResult> {
    let scope = scope_of(own, body)?;
    let actor = audit::actor_name(&by.actor);
    let report = if release {
        state.herald.release_hold(&scope).await?
    } else {
        state.herald.hold(&scope, &actor).await?
    };
    let scope = &report.scope;
    if report.changed {
        let named = (scope.kind == HoldKind::Tenant).then(|| scope.value.parse().ok()).flatten();
        let tenant = scope.tenant.map(TenantId::from_uuid).or(named).or(own);
        let entry = by
            .entry(tenant, if release { "hold_release" } else { "hold" })
            .target(format!("{}:{}", scope.kind, scope.value))
            .count(report.deliveries as i64);
        audit::record(state, entry).await;
    }
    Ok(HoldResult { changed: report.changed, deliveries: report.deliveries })
}

fn own_of(caller: &Caller) -> Option<TenantId> {
    match caller {
        Caller::Admin => None,
        Caller::Tenant { tenant, .. } => Some(*tenant),
    }
}

#[utoipa::path(get, path = "/v1/holds",
    responses((status = 200, body = HoldList, description = "The holds in place: every one for the admin key, a tenant's own and those over every tenant for its key"),
        (status = 401)))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    _: NoQuery,
) -> ApiResult<Json<HoldList>> {
    let holds = state.herald.holds(own_of(&caller)).await?;
    Ok(Json(HoldList { holds: holds.into_iter().map(Into::into).collect() }))
}

#[utoipa::path(post, path = "/v1/holds", request_body = HoldRequest,
    responses((status = 200, body = HoldResult, description = "The scope is held: its pending deliveries wait, no attempt spent, until released"),
        (status = 400), (status = 401), (status = 404)))]
pub async fn hold(
    State(state): State<AppState>,
    caller: Caller,
    _: NoQuery,
    client: ClientAddr,
    headers: HeaderMap,
    JsonBody(body): JsonBody<HoldRequest>,
) -> ApiResult<Json<HoldResult>> {
    called(&state, &caller, &headers, client, &body, false).await
}

#[utoipa::path(post, path = "/v1/holds/release", request_body = HoldRequest,
    responses((status = 200, body = HoldResult, description = "The scope is released: what it held is due again when it was due"),
        (status = 400), (status = 401), (status = 404)))]
pub async fn release(
    State(state): State<AppState>,
    caller: Caller,
    _: NoQuery,
    client: ClientAddr,
    headers: HeaderMap,
    JsonBody(body): JsonBody<HoldRequest>,
) -> ApiResult<Json<HoldResult>> {
    called(&state, &caller, &headers, client, &body, true).await
}

/// [`change`] for an API caller.
async fn called(
    state: &AppState,
    caller: &Caller,
    headers: &HeaderMap,
    client: ClientAddr,
    body: &HoldRequest,
    release: bool,
) -> ApiResult<Json<HoldResult>> {
    let by = match caller {
        Caller::Admin => By::admin(client),
        Caller::Tenant { .. } => By::tenant(headers, client),
    };
    change(state, own_of(caller), body, &by, release).await.map(Json)
}
