//! The dashboard's JSON calls (`/ui/api/*`): the same reads and actions as `/v1`, on the
//! session cookie, where an admin session may name any tenant and a tenant session only
//! its own (another tenant is a 404, as on `/v1`). Reads need the session; actions also
//! its CSRF token (`session::for_action`).

use super::session::{self, Session, Who};
use crate::audit::{self, By};
use crate::error::{ApiError, ApiResult};
use crate::extract::{ClientAddr, JsonBody, PathParams, QueryParams};
use crate::keys;
use crate::routes::deliveries::{PageQuery, page};
use crate::routes::path_id;
use crate::state::AppState;
use crate::wire::{AttemptView, BulkRequest, DeliveryList, DeliveryView, QuotaView};
use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use herald::{AuditActor, BulkAction, DeliveryId, DeliveryState, TenantId, UiSessionEnd};
use serde::Deserialize;
use serde_json::{Value, json};

/// Most tenants the selector lists.
pub(super) const TENANTS_MAX: usize = 1_000;
/// Journal entries the quotas page shows.
const JOURNAL_SHOWN: usize = 100;
/// Minutes the overview's chart covers.
const SERIES_MINUTES: usize = 60;

/// A read: the request's session.
#[derive(Debug)]
pub struct Reader(pub(super) Session);

impl FromRequestParts<AppState> for Reader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        session::from_parts(parts, state).await.map(Reader)
    }
}

/// An action: the session, its CSRF token checked, and not the read-only viewer's.
#[derive(Debug)]
pub struct Actor(pub(super) Session);

impl FromRequestParts<AppState> for Actor {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let session = session::for_action(parts, state).await?;
        if session.who == Who::Viewer {
            return Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "read_only",
                "this session is read-only (signed in with the viewer key)",
            ));
        }
        Ok(Actor(session))
    }
}

/// Signing out: the session and its CSRF token, whoever's it is (the viewer's too).
#[derive(Debug)]
pub struct Leaving(Session);

impl FromRequestParts<AppState> for Leaving {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        session::for_action(parts, state).await.map(Leaving)
    }
}

/// Who a session's request is, as the audit log says it.
pub(super) fn by(s: &Session, client: ClientAddr) -> By {
    let actor = match &s.who {
        Who::Admin => AuditActor::Admin,
        Who::Viewer => AuditActor::Viewer,
        Who::Tenant { key_id, .. } => AuditActor::Tenant { key_id: key_id.clone() },
    };
    By::new(actor, client)
}

/// The tenant a session is of (`None`: the admin's).
pub(super) fn own_tenant(s: &Session) -> Option<TenantId> {
    match &s.who {
        Who::Admin | Who::Viewer => None,
        Who::Tenant { tenant, .. } => Some(*tenant),
    }
}

/// The tenant a call is about: a tenant session's own (naming another is a 404), or the
/// one an admin names (`None`: the admin named none).
pub(super) fn scope(session: &Session, named: Option<&str>) -> ApiResult<Option<TenantId>> {
    crate::routes::scoped(own_tenant(session), named)
}

/// As `scope`, where a tenant is required.
fn tenant_of(session: &Session, named: Option<&str>) -> ApiResult<TenantId> {
    scope(session, named)?.ok_or_else(|| ApiError::invalid("tenant is required"))
}

async fn describe(state: &AppState, session: &Session) -> ApiResult<Value> {
    let (role, tenant) = match &session.who {
        Who::Admin => ("admin", Value::Null),
        Who::Viewer => ("viewer", Value::Null),
        Who::Tenant { tenant, .. } => {
            let name = state.herald.tenant_name(*tenant).await?;
            ("tenant", json!({"id": tenant.to_string(), "name": name}))
        }
    };
    let channels: Vec<&String> = state.channels.iter().collect();
    Ok(json!({"role": role, "tenant": tenant, "csrf": session.csrf, "channels": channels}))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignIn {
    key: String,
}

/// `POST /ui/api/session`: a key for a session cookie.
pub async fn sign_in(
    State(state): State<AppState>,
    client: crate::extract::ClientAddr,
    headers: HeaderMap,
    JsonBody(body): JsonBody<SignIn>,
) -> ApiResult<Response> {
    if session::cross_site(&headers, &state.allowed_hosts) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "a sign-in must come from this server's own page",
        ));
    }
    let key = body.key.trim();
    let parsed = keys::parse(key);
    let sources =
        crate::extract::guess_sources(client.0, parsed.as_ref().map(|(id, _)| id.as_str()));
    state.guesses.check(&sources)?;
    let named = parsed.as_ref().map(|(id, _)| id.as_str().to_string());
    let who = if key.is_empty() || key.len() > keys::KEY_LEN_MAX {
        None
    } else if state.admin_key_sha256.is_some_and(|admin| keys::same(&admin, &keys::digest(key))) {
        Some(Who::Admin)
    } else if state.viewer_key_sha256.is_some_and(|v| keys::same(&v, &keys::digest(key))) {
        Some(Who::Viewer)
    } else {
        match &parsed {
            None => None,
            Some((key_id, hash)) => match state.herald.api_key(key_id).await? {
                Some(row) if !row.revoked && keys::same(&row.secret_sha256, hash) => {
                    Some(Who::Tenant {
                        tenant: TenantId::from_uuid(row.tenant_id),
                        key_id: key_id.as_str().to_string(),
                    })
                }
                _ => None,
            },
        }
    };
    let Some(who) = who else {
        state.guesses.failed(&sources, "ui");
        let anonymous = By::new(AuditActor::Anonymous { key_id: named }, client);
        audit::record(&state, anonymous.entry(None, "sign_in_failed")).await;
        return Err(ApiError::unauthorized());
    };
    let signing = state.session_keys.current(&state.herald).await?;
    // A session this browser already had is replaced, not kept beside the new one (a
    // cookie planted before the sign-in is never the session after it).
    let previous = session::named(&headers, &state).await.ok().flatten();
    let owner = match &who {
        Who::Admin | Who::Viewer => None,
        Who::Tenant { tenant, key_id } => Some((*tenant, key_id.as_str())),
    };
    let address = client.0.map(|ip| ip.to_string());
    let agent = headers.get(axum::http::header::USER_AGENT).and_then(|v| v.to_str().ok());
    let viewer = who == Who::Viewer;
    let started = state.herald.ui_session_start(owner, viewer, address.as_deref(), agent).await?;
    if let Some(previous) = previous {
        state.herald.ui_session_end(&previous, None, UiSessionEnd::Replaced).await?;
    }
    let Some(value) = session::issue(&signing, &started.id) else {
        return Err(ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "sessions cannot be signed on this server",
        ));
    };
    let session = Session { id: started.id, who, csrf: signing.csrf_of(&value) };
    let entry = by(&session, client).entry(own_tenant(&session), "sign_in");
    audit::record(&state, entry.target(session.id.as_str())).await;
    let body = describe(&state, &session).await?;
    Ok((session::set_cookies(Some(&value), &headers), Json(body)).into_response())
}

/// `GET /ui/api/session`: who is signed in, and the session's CSRF token; `{"role": null}`
/// when no one is (a 200, so the page's first question is not logged as a failed load),
/// with `problem` saying why when the request carried conflicting session cookies.
pub async fn session(
    State(state): State<AppState>,
    request: axum::extract::Request,
) -> ApiResult<Json<Value>> {
    let (parts, _) = request.into_parts();
    match session::from_parts(&parts, &state).await {
        Ok(s) => describe(&state, &s).await.map(Json),
        Err(e) if e.status == StatusCode::UNAUTHORIZED => Ok(Json(json!({"role": null}))),
        Err(e) if e.code == "session_cookie_conflict" => {
            Ok(Json(json!({"role": null, "problem": e.message})))
        }
        Err(e) => Err(e),
    }
}

/// `DELETE /ui/api/session`: signs out — ends the session's row, so a copy of the cookie
/// is worth nothing — and clears the cookie.
pub async fn sign_out(
    State(state): State<AppState>,
    Leaving(s): Leaving,
    client: ClientAddr,
    headers: HeaderMap,
) -> ApiResult<Response> {
    state.herald.ui_session_end(&s.id, None, UiSessionEnd::SignedOut).await?;
    let entry = by(&s, client).entry(own_tenant(&s), "sign_out");
    audit::record(&state, entry.target(s.id.as_str())).await;
    Ok((StatusCode::NO_CONTENT, session::set_cookies(None, &headers)).into_response())
}

/// Most sessions the list shows.
const SESSIONS_SHOWN: usize = 500;

/// `GET /ui/api/sessions`: the live sessions, newest first — an admin's of every tenant
/// and the admin's own (or one tenant's, named), a tenant's of its own tenant.
pub async fn sessions(
    State(state): State<AppState>,
    Reader(s): Reader,
    QueryParams(q): QueryParams<TenantQuery>,
) -> ApiResult<Json<Value>> {
    let tenant = scope(&s, q.tenant.as_deref())?;
    let list: Vec<Value> = state
        .herald
        .ui_sessions(tenant, state.ui_idle, SESSIONS_SHOWN)
        .await?
        .into_iter()
        .map(|u| {
            json!({
                "id": u.id,
                "role": if u.tenant.is_some() { "tenant" } else if u.viewer { "viewer" } else { "admin" },
                "tenant": u.tenant.as_ref().map(|(t, _)| t.to_string()),
                "key_id": u.tenant.as_ref().map(|(_, k)| k),
                "created_at": rfc3339_ms(u.created_at),
                "seen_at": rfc3339_ms(u.seen_at),
                "expires_at": rfc3339_ms(u.expires_at),
                "address": u.address,
                "agent": u.agent,
                "current": u.id == s.id,
            })
        })
        .collect();
    Ok(Json(json!({"sessions": list})))
}

/// `DELETE /ui/api/sessions/{id}`: ends a session — any, for the admin; one of its own
/// tenant's, for a tenant (another's is a 404, as it is not there for it).
pub async fn session_end(
    State(state): State<AppState>,
    Actor(s): Actor,
    client: ClientAddr,
    PathParams(id): PathParams<String>,
) -> ApiResult<Response> {
    let tenant = own_tenant(&s);
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::not_found("session"));
    }
    if !state.herald.ui_session_end(&id, tenant, UiSessionEnd::Revoked).await? {
        return Err(ApiError::not_found("session"));
    }
    audit::record(&state, by(&s, client).entry(tenant, "session_end").target(id)).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// `GET /ui/api/audit`: the audit log, newest first — the admin's of every tenant (or the
/// one named), a tenant's of its own.
pub async fn audit_log(
    State(state): State<AppState>,
    Reader(s): Reader,
    QueryParams(q): QueryParams<audit::AuditQuery>,
) -> ApiResult<Json<Value>> {
    let entries = audit::read(&state, own_tenant(&s), &q).await?;
    Ok(Json(json!({"entries": entries})))
}

/// `GET /ui/api/tenants`.
pub async fn tenants(State(state): State<AppState>, Reader(s): Reader) -> ApiResult<Json<Value>> {
    let list: Vec<Value> = match &s.who {
        Who::Admin | Who::Viewer => state
            .herald
            .tenants(TENANTS_MAX)
            .await?
            .into_iter()
            .map(|(id, name)| json!({"id": id.to_string(), "name": name}))
            .collect(),
        Who::Tenant { tenant, .. } => {
            let name = state.herald.tenant_name(*tenant).await?;
            vec![json!({"id": tenant.to_string(), "name": name})]
        }
    };
    Ok(Json(json!({"tenants": list})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TenantQuery {
    tenant: Option<String>,
}

use crate::wire::rfc3339_ms;

/// `GET /ui/api/overview`: counts by state and channel, the last hour per minute (from
/// the rollup), queue age, reconciler losses and operator alerts.
pub async fn overview(
    State(state): State<AppState>,
    Reader(s): Reader,
    QueryParams(q): QueryParams<TenantQuery>,
) -> ApiResult<Json<Value>> {
    let tenant = scope(&s, q.tenant.as_deref())?;
    let recent = state.herald.delivery_counts_recent(tenant).await?;
    let counts = recent.counts;
    let mut by_state = serde_json::Map::new();
    for st in [
        DeliveryState::Pending,
        DeliveryState::Sending,
        DeliveryState::Sent,
        DeliveryState::Failed,
        DeliveryState::Cancelled,
    ] {
        let n: i64 = counts.iter().filter(|(_, s, _)| *s == st).map(|(_, _, n)| n).sum();
        by_state.insert(st.to_string(), json!(n));
    }
    let by_channel: Vec<Value> = counts
        .iter()
        .map(|(channel, st, n)| json!({"channel": channel, "state": st.to_string(), "count": n}))
        .collect();
    // The oldest due age is the whole queue's: shown to the admin's all-tenant view only.
    let oldest_due_age_ms = match tenant {
        None => state.herald.oldest_due_age().await?.map(|age| age.as_millis() as u64),
        Some(_) => None,
    };
    let series = state.herald.throughput(tenant, SERIES_MINUTES).await?;
    let lost: i64 = series.iter().map(|m| m.lost).sum();
    let series: Vec<Value> = series
        .iter()
        .map(|m| {
            json!({"minute": rfc3339_ms(m.at_ms), "sent": m.sent, "retried": m.retried,
                   "failed": m.failed, "lost": m.lost})
        })
        .collect();
    let alerts: Vec<Value> = match s.who {
        Who::Admin | Who::Viewer => herald::alerts::raised()
            .into_iter()
            .map(|a| json!({"reason": a.reason, "count": a.count, "last_at": rfc3339_ms(a.last_at_ms)}))
            .collect(),
        Who::Tenant { .. } => Vec::new(),
    };
    Ok(Json(json!({
        "generated_at": jiff::Timestamp::now().to_string(),
        "by_state": by_state,
        "by_channel": by_channel,
        "counted_ms_ago": recent.age.as_millis() as u64,
        "oldest_due_age_ms": oldest_due_age_ms,
        "series": series,
        "reconciler": {"lost_last_hour": lost},
        "alerts": alerts,
    })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    tenant: Option<String>,
    state: Option<String>,
    channel: Option<String>,
    error_code: Option<String>,
    key_prefix: Option<String>,
    to_prefix: Option<String>,
    failed_since: Option<String>,
    from: Option<String>,
    to: Option<String>,
    q: Option<String>,
    cursor: Option<String>,
    limit: Option<String>,
}

/// `GET /ui/api/deliveries`: a tenant's deliveries, newest first, filtered; `q` finds one
/// by id or by operation key.
pub async fn deliveries(
    State(state): State<AppState>,
    Reader(s): Reader,
    QueryParams(q): QueryParams<ListQuery>,
) -> ApiResult<Json<DeliveryList>> {
    // The admin with no tenant named lists every tenant's.
    let tenant = scope(&s, q.tenant.as_deref())?;
    if let Some(search) = q.q.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        let mut found = Vec::new();
        if let Ok(id) = uuid::Uuid::try_parse(search) {
            let id = DeliveryId::from_uuid(id);
            let owner = match tenant {
                Some(t) => Ok(t),
                None => state.herald.delivery_tenant(id).await,
            };
            match owner {
                Ok(t) => match state.herald.delivery(t, id).await {
                    Ok(d) => found.push(d),
                    Err(herald::Error::NotFound) => {}
                    Err(e) => return Err(e.into()),
                },
                Err(herald::Error::NotFound) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if let Some(tenant) = tenant {
            let channels: Vec<String> = state.channels.iter().cloned().collect();
            found.extend(state.herald.deliveries_by_key(tenant, search, &channels).await?);
        }
        let found = found.into_iter().map(Into::into).collect();
        return Ok(Json(DeliveryList { deliveries: found, next_cursor: None }));
    }
    fn text(v: &Option<String>) -> Option<&str> {
        v.as_deref().map(str::trim).filter(|t| !t.is_empty())
    }
    let filters = PageQuery {
        state: q.state.as_deref(),
        channel: q.channel.as_deref(),
        error_code: text(&q.error_code),
        key_prefix: text(&q.key_prefix),
        to_prefix: text(&q.to_prefix),
        failed_since: text(&q.failed_since),
        from: q.from.as_deref(),
        to: q.to.as_deref(),
        limit: q.limit.as_deref(),
        cursor: q.cursor.as_deref(),
    };
    Ok(Json(page(&state, tenant, &filters).await?))
}

/// The delivery `id` as the session may see it: an admin's of any tenant (the named one,
/// or whichever it belongs to), a tenant's own only.
async fn visible(
    state: &AppState,
    s: &Session,
    id: &str,
    named: Option<&str>,
) -> ApiResult<(TenantId, DeliveryId)> {
    let id: DeliveryId = path_id(id, "delivery")?;
    let tenant = match scope(s, named)? {
        Some(tenant) => tenant,
        None => match state.herald.delivery_tenant(id).await {
            Ok(tenant) => tenant,
            Err(herald::Error::NotFound) => return Err(ApiError::not_found("delivery")),
            Err(e) => return Err(e.into()),
        },
    };
    Ok((tenant, id))
}

/// `GET /ui/api/deliveries/{id}`: the delivery, its payload and its attempts.
pub async fn delivery(
    State(state): State<AppState>,
    Reader(s): Reader,
    PathParams(id): PathParams<String>,
    QueryParams(q): QueryParams<TenantQuery>,
) -> ApiResult<Json<Value>> {
    let (tenant, id) = visible(&state, &s, &id, q.tenant.as_deref()).await?;
    let delivery = state.herald.delivery(tenant, id).await?;
    let payload = state.herald.payload(tenant, id).await?;
    let attempts: Vec<AttemptView> =
        state.herald.attempts(tenant, id).await?.into_iter().map(Into::into).collect();
    Ok(Json(json!({
        "delivery": DeliveryView::from(delivery),
        "payload": payload,
        "attempts": attempts,
    })))
}

/// `POST /ui/api/deliveries/{id}/replay`.
pub async fn replay(
    State(state): State<AppState>,
    Actor(s): Actor,
    client: ClientAddr,
    PathParams(id): PathParams<String>,
    QueryParams(q): QueryParams<TenantQuery>,
) -> ApiResult<Json<Value>> {
    act(&state, &s, client, &id, &q, BulkAction::Replay).await
}

/// `POST /ui/api/deliveries/{id}/cancel`.
pub async fn cancel(
    State(state): State<AppState>,
    Actor(s): Actor,
    client: ClientAddr,
    PathParams(id): PathParams<String>,
    QueryParams(q): QueryParams<TenantQuery>,
) -> ApiResult<Json<Value>> {
    act(&state, &s, client, &id, &q, BulkAction::Cancel).await
}

/// Replays or cancels one delivery the session may see, as `/v1` does.
async fn act(
    state: &AppState,
    s: &Session,
    client: ClientAddr,
    id: &str,
    q: &TenantQuery,
    action: BulkAction,
) -> ApiResult<Json<Value>> {
    let (tenant, id) = visible(state, s, id, q.tenant.as_deref()).await?;
    let (delivery, name) = match action {
        BulkAction::Replay => (state.herald.replay(tenant, id).await?, "replay"),
        BulkAction::Cancel => (state.herald.cancel(tenant, id).await?, "cancel"),
    };
    audit::record(state, by(s, client).entry(Some(tenant), name).target(id.to_string())).await;
    Ok(Json(json!({"delivery": DeliveryView::from(delivery)})))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkCall {
    action: String,
    tenant: Option<String>,
    state: Option<String>,
    channel: Option<String>,
    from: Option<String>,
    to: Option<String>,
    error_code: Option<String>,
    destination: Option<String>,
    through: Option<String>,
    #[serde(default, deserialize_with = "crate::wire::integral::opt")]
    max: Option<u64>,
    #[serde(default)]
    dry_run: bool,
    /// Run as a job of the server and answer its id at once (`GET /ui/api/bulk/{job}`
    /// reads its progress); a dry run is always answered in place.
    #[serde(default)]
    background: bool,
}

/// `POST /ui/api/bulk`: replay or cancel what a filter matches, or count it; a
/// confirmation carries the dry run's `through` and `max`, so it acts on what was counted.
pub async fn bulk(
    State(state): State<AppState>,
    Actor(s): Actor,
    client: ClientAddr,
    JsonBody(body): JsonBody<BulkCall>,
) -> ApiResult<Response> {
    let tenant = scope(&s, body.tenant.as_deref())?;
    let action = match body.action.as_str() {
        "replay" => BulkAction::Replay,
        "cancel" => BulkAction::Cancel,
        _ => return Err(ApiError::invalid("action must be replay or cancel")),
    };
    let request = BulkRequest {
        state: body.state,
        channel: body.channel,
        from: body.from,
        to: body.to,
        error_code: body.error_code,
        destination: body.destination,
        through: body.through,
        max: body.max,
        dry_run: body.dry_run,
    };
    let by = by(&s, client);
    if !body.background || request.dry_run {
        // The admin without a tenant acts over every tenant (the incident console).
        let progress = herald::BulkProgress::default();
        let done =
            crate::routes::deliveries::bulk(&state, tenant, action, &request, &by, &progress);
        return Ok(Json(done.await?).into_response());
    }
    request.filter()?; // a bad filter is this answer, not the job's
    let expected = request.max.unwrap_or(herald::BULK_MAX as u64);
    let (id, job) = state.bulk_jobs.start(own_tenant(&s), expected)?;
    let task_state = state.clone();
    tokio::spawn(async move {
        let done = crate::routes::deliveries::bulk(
            &task_state,
            tenant,
            action,
            &request,
            &by,
            &job.progress,
        );
        job.finish(done.await.map_err(|e| e.message));
    });
    Ok((StatusCode::ACCEPTED, Json(json!({"job": id}))).into_response())
}

/// `GET /ui/api/bulk/{job}`: a running or finished bulk action's counts and result.
pub async fn bulk_job(
    State(state): State<AppState>,
    Reader(s): Reader,
    PathParams(id): PathParams<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(state.bulk_jobs.get(&id, own_tenant(&s))?.view()))
}

/// `GET /ui/api/quotas`: the tenant's accounts and the newest of its journal.
pub async fn quotas(
    State(state): State<AppState>,
    Reader(s): Reader,
    QueryParams(q): QueryParams<TenantQuery>,
) -> ApiResult<Json<Value>> {
    let tenant = tenant_of(&s, q.tenant.as_deref())?;
    let quotas: Vec<QuotaView> =
        state.herald.quotas(tenant).await?.into_iter().map(Into::into).collect();
    let journal: Vec<Value> = state
        .herald
        .journal(tenant, JOURNAL_SHOWN)
        .await?
        .into_iter()
        .map(|j| {
            json!({"at": j.at.to_string(), "quota_key": j.quota_key, "kind": j.kind,
                   "amount": j.amount, "delivery_id": j.delivery.map(|d| d.to_string())})
        })
        .collect();
    Ok(Json(json!({"quotas": quotas, "journal": journal})))
}
