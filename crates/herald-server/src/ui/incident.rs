//! The incident console's calls: what is failing, grouped (`Herald::failures`), and the
//! holds that pause a channel, tenant or destination (`/v1/holds`).

use super::api::{Actor, Reader, by, own_tenant, scope};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ClientAddr, JsonBody, QueryParams};
use crate::routes::holds::{HoldList, HoldRequest, HoldResult, change};
use crate::state::AppState;
use crate::wire::rfc3339_ms;
use axum::Json;
use axum::extract::State;
use herald::FailureGroup;
use serde::Deserialize;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::time::Duration;

/// Longest window the failures view takes, in hours.
const WINDOW_HOURS_MAX: u64 = 24 * 7;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailuresQuery {
    tenant: Option<String>,
    /// Failed within this many hours (default 24, at most a week).
    hours: Option<String>,
}

/// `GET /ui/api/failures`: what is failing, by destination, error code, tenant and
/// channel, with the holds in place.
pub async fn failures(
    State(state): State<AppState>,
    Reader(s): Reader,
    QueryParams(q): QueryParams<FailuresQuery>,
) -> ApiResult<Json<Value>> {
    let tenant = scope(&s, q.tenant.as_deref())?;
    let hours = match q.hours.as_deref() {
        None => 24,
        Some(h) => {
            h.parse::<u64>().ok().filter(|h| (1..=WINDOW_HOURS_MAX).contains(h)).ok_or_else(
                || ApiError::invalid(format!("hours must be 1 to {WINDOW_HOURS_MAX}")),
            )?
        }
    };
    let f = state.herald.failures(tenant, Duration::from_secs(hours * 3600)).await?;
    let names: HashMap<String, String> = match tenant {
        Some(t) => HashMap::from([(t.to_string(), state.herald.tenant_name(t).await?)]),
        None => state
            .herald
            .tenants(super::api::TENANTS_MAX)
            .await?
            .into_iter()
            .map(|(id, name)| (id.to_string(), name))
            .collect(),
    };
    let view = |groups: Vec<FailureGroup>, named: bool| -> Vec<Value> {
        groups
            .into_iter()
            .take(GROUPS_SHOWN)
            .map(|g| {
                json!({"key": g.key, "name": if named { names.get(&g.key).cloned() } else { None },
                   "failed": g.failed, "retrying": g.retrying, "held": g.held,
                   "tenants": g.tenants, "top_error": g.top_error,
                   "first_seen": g.first_ms.map(rfc3339_ms), "last_seen": g.last_ms.map(rfc3339_ms)})
            })
            .collect()
    };
    let holds: Vec<Value> = state
        .herald
        .holds(own_tenant(&s))
        .await?
        .into_iter()
        .map(as_view::<crate::routes::holds::HoldView, _>)
        .collect();
    let circuits: Vec<Value> = state
        .herald
        .lanes_failing(tenant)
        .await?
        .into_iter()
        .map(|l| {
            let name = names.get(&l.tenant.to_string()).cloned();
            let mut v = as_view::<crate::routes::destinations::CircuitView, _>(l);
            v["name"] = json!(name);
            v
        })
        .collect();
    let limits: Vec<Value> = state
        .herald
        .destination_limits(tenant)
        .await?
        .into_iter()
        .map(as_view::<crate::routes::destinations::LimitView, _>)
        .collect();
    Ok(Json(json!({
        "hours": hours,
        "circuits": circuits,
        "limits": limits,
        "destinations": view(f.destinations, false),
        "errors": view(f.errors, false),
        "tenants": view(f.tenants, true),
        "channels": view(f.channels, false),
        "examined": f.examined,
        "truncated": f.truncated,
        "holds": holds,
    })))
}

/// Groups shown per kind.
const GROUPS_SHOWN: usize = 20;

/// `GET /ui/api/holds`: the holds the session may see (`GET /v1/holds`).
/// A row as the API shows it (`V`, its view), as JSON the page reads.
fn as_view<V: From<T> + serde::Serialize, T>(row: T) -> Value {
    serde_json::to_value(V::from(row)).unwrap_or(Value::Null)
}

pub async fn holds(State(state): State<AppState>, Reader(s): Reader) -> ApiResult<Json<HoldList>> {
    let holds = state.herald.holds(own_tenant(&s)).await?;
    Ok(Json(HoldList { holds: holds.into_iter().map(Into::into).collect() }))
}

/// `POST /ui/api/holds`: pause a channel, tenant or destination (`POST /v1/holds`).
pub async fn hold(
    State(state): State<AppState>,
    Actor(s): Actor,
    client: ClientAddr,
    JsonBody(body): JsonBody<HoldRequest>,
) -> ApiResult<Json<HoldResult>> {
    change(&state, own_tenant(&s), &body, &by(&s, client), false).await.map(Json)
}

/// `POST /ui/api/holds/release`: resume it (`POST /v1/holds/release`).
pub async fn hold_release(
    State(state): State<AppState>,
    Actor(s): Actor,
    client: ClientAddr,
    JsonBody(body): JsonBody<HoldRequest>,
) -> ApiResult<Json<HoldResult>> {
    change(&state, own_tenant(&s), &body, &by(&s, client), true).await.map(Json)
}

/// `POST /ui/api/circuits/enable`: a lane sends again (`POST /v1/circuits/enable`).
pub async fn enable(
    State(state): State<AppState>,
    Actor(s): Actor,
    client: ClientAddr,
    JsonBody(body): JsonBody<crate::routes::destinations::EnableRequest>,
) -> ApiResult<Json<Value>> {
    let tenant = crate::routes::scoped(own_tenant(&s), body.tenant.as_deref())?
        .ok_or_else(|| ApiError::invalid("choose the lane's tenant"))?;
    let enabled = state.herald.enable_lane(tenant, &body.destination).await?;
    if enabled {
        let entry =
            by(&s, client).entry(Some(tenant), "lane_enable").target(body.destination.trim());
        crate::audit::record(&state, entry).await;
    }
    Ok(Json(json!({"enabled": enabled})))
}
