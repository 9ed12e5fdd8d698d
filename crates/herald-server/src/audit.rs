//! The audit log at the HTTP face (issue 37, defect 7): every action of consequence
//! writes an entry once it has succeeded ([`record`]), and `GET /v1/audit` reads the log —
//! the admin key every tenant's (or one's), a tenant's key its own tenant's.

use crate::error::{ApiError, ApiResult};
use crate::extract::{AdminAuth, ClientAddr, QueryParams, TenantAuth};
use crate::keys;
use crate::state::AppState;
use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use herald::{AuditActor, AuditEntry, AuditRecord, TenantId};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Most entries one read returns.
pub const AUDIT_PAGE_MAX: usize = 500;

/// Writes `entry`. The action it records has already happened, so a failure to write is
/// logged, not answered.
pub async fn record(state: &AppState, entry: AuditEntry) {
    let action = entry.action;
    if let Err(e) = state.herald.audit(entry).await {
        tracing::warn!(error = %e, action, "an audit entry was not written");
    }
}

/// The id of the API key a request's bearer token names (already verified by
/// [`TenantAuth`] when a handler asks).
pub fn bearer_key_id(headers: &axum::http::HeaderMap) -> Option<String> {
    let token = crate::extract::bearer_token(headers)?;
    keys::parse(token).map(|(id, _)| id.as_str().to_string())
}

/// The caller of a `/v1` call that either key may make, with what the log says of it.
#[derive(Debug, Clone)]
pub enum Caller {
    Admin,
    Tenant { tenant: TenantId, key_id: String },
}

impl Caller {
    pub fn actor(&self) -> AuditActor {
        match self {
            Caller::Admin => AuditActor::Admin,
            Caller::Tenant { key_id, .. } => AuditActor::Tenant { key_id: key_id.clone() },
        }
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match AdminAuth::from_request_parts(parts, state).await {
            Ok(AdminAuth) => Ok(Caller::Admin),
            Err(e) if e.status == axum::http::StatusCode::FORBIDDEN => {
                let TenantAuth(tenant) = TenantAuth::from_request_parts(parts, state).await?;
                let key_id = bearer_key_id(&parts.headers).unwrap_or_default();
                Ok(Caller::Tenant { tenant, key_id })
            }
            Err(e) => Err(e),
        }
    }
}

/// Who made a request, as the log says it: the actor and the client's address.
#[derive(Debug, Clone)]
pub struct By {
    pub actor: AuditActor,
    pub address: Option<String>,
}

impl By {
    pub fn new(actor: AuditActor, client: ClientAddr) -> By {
        By { actor, address: client.0.map(|ip| ip.to_string()) }
    }

    /// The admin key's caller.
    pub fn admin(client: ClientAddr) -> By {
        By::new(AuditActor::Admin, client)
    }

    /// A tenant key's caller, by the key its bearer token names.
    pub fn tenant(headers: &axum::http::HeaderMap, client: ClientAddr) -> By {
        By::new(AuditActor::Tenant { key_id: bearer_key_id(headers).unwrap_or_default() }, client)
    }

    /// The entry `action` on `tenant` by this caller.
    pub fn entry(&self, tenant: Option<TenantId>, action: &'static str) -> AuditEntry {
        AuditEntry::new(self.actor.clone(), tenant, action).address(self.address.clone())
    }
}

/// How a hold or a limit names who placed it: `admin`, `viewer`, `tenant:<key id>`,
/// `operator` or `anonymous`.
pub(crate) fn actor_name(actor: &herald::AuditActor) -> String {
    match actor {
        herald::AuditActor::Admin => "admin".to_string(),
        herald::AuditActor::Viewer => "viewer".to_string(),
        herald::AuditActor::Tenant { key_id } => format!("tenant:{key_id}"),
        herald::AuditActor::Operator => "operator".to_string(),
        herald::AuditActor::Anonymous { .. } => "anonymous".to_string(),
    }
}

/// One entry of the audit log.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AuditView {
    /// Its place in the log: pass the smallest one seen as `before` for the next page.
    pub id: i64,
    /// RFC 3339, UTC.
    pub at: String,
    /// `admin`, `tenant`, `operator` or `anonymous`.
    pub actor: String,
    /// The API key a tenant acted with, or the key id a failed sign-in named.
    pub key_id: Option<String>,
    pub tenant: Option<String>,
    pub action: String,
    pub target: Option<String>,
    pub count: Option<i64>,
    pub address: Option<String>,
}

impl From<AuditRecord> for AuditView {
    fn from(r: AuditRecord) -> AuditView {
        AuditView {
            id: r.id,
            at: crate::wire::rfc3339_ms(r.at),
            actor: r.actor,
            key_id: r.key_id,
            tenant: r.tenant.map(|t| t.to_string()),
            action: r.action,
            target: r.target,
            count: r.count,
            address: r.address,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AuditList {
    /// Newest first.
    pub entries: Vec<AuditView>,
}

/// `GET /v1/audit` query.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// The admin's filter: one tenant's entries (a tenant key reads its own only).
    pub tenant: Option<String>,
    /// Entries older than this id (the next page).
    pub before: Option<i64>,
    /// At most this many (1 to 500; default 100).
    pub limit: Option<usize>,
}

/// The entries `caller` may read: the admin's named tenant (or all), a tenant's own.
pub async fn read(
    state: &AppState,
    caller_tenant: Option<TenantId>,
    q: &AuditQuery,
) -> ApiResult<Vec<AuditView>> {
    let tenant = crate::routes::scoped(caller_tenant, q.tenant.as_deref())?;
    let limit = q.limit.unwrap_or(100);
    if !(1..=AUDIT_PAGE_MAX).contains(&limit) {
        return Err(ApiError::invalid("limit must be from 1 to 500"));
    }
    let entries = state.herald.audit_log(tenant, q.before, limit).await?;
    Ok(entries.into_iter().map(Into::into).collect())
}

#[utoipa::path(get, path = "/v1/audit", params(AuditQuery),
    responses((status = 200, body = AuditList, description = "The audit log, newest first: the admin key reads every tenant's (or `tenant`'s), a tenant's key its own tenant's"),
        (status = 400), (status = 401), (status = 404)))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    QueryParams(q): QueryParams<AuditQuery>,
) -> ApiResult<Json<AuditList>> {
    let own = match caller {
        Caller::Admin => None,
        Caller::Tenant { tenant, .. } => Some(tenant),
    };
    Ok(Json(AuditList { entries: read(&state, own, &q).await? }))
}
