//! Admin calls (the `HERALD_ADMIN_KEY` only): tenants, their API keys, webhook-secret
//! rotation and quota grants.

use crate::audit::{self, By};
use crate::error::{ApiError, ApiResult};
use crate::extract::{AdminAuth, ClientAddr, JsonBody, NoQuery, PathParams};
use crate::routes::path_id;
use crate::state::AppState;
use crate::wire::{
    CreateTenant, Grant, Granted, KeyCreated, QuotaView, SecretRotated, TenantCreated,
};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};

pub use herald_core::limits::IDEMPOTENCY_KEY_LEN_MAX;

#[utoipa::path(post, path = "/v1/tenants", request_body = CreateTenant,
    responses((status = 201, body = TenantCreated), (status = 400), (status = 401), (status = 403), (status = 409)))]
pub async fn create_tenant(
    State(state): State<AppState>,
    _admin: AdminAuth,
    _: NoQuery,
    client: ClientAddr,
    JsonBody(body): JsonBody<CreateTenant>,
) -> ApiResult<(StatusCode, Json<TenantCreated>)> {
    // The tenant and its first key are one transaction; a taken name is `TenantExists`,
    // a 409 (error.rs).
    let tenant = state.herald.tenant_create(&body.name).await?;
    let entry = By::admin(client).entry(Some(tenant.id), "tenant_create");
    audit::record(&state, entry.target(tenant.api_key.key_id.to_string())).await;
    Ok((
        StatusCode::CREATED,
        Json(TenantCreated {
            id: tenant.id.to_string(),
            name: tenant.name,
            api_key: tenant.api_key.plaintext,
            webhook_secret: tenant.webhook_secret,
        }),
    ))
}

#[utoipa::path(post, path = "/v1/tenants/{tenant}/keys", params(("tenant" = String, Path)),
    responses((status = 201, body = KeyCreated), (status = 401), (status = 403), (status = 404)))]
pub async fn create_tenant_key(
    State(state): State<AppState>,
    _admin: AdminAuth,
    _: NoQuery,
    client: ClientAddr,
    PathParams(tenant): PathParams<String>,
) -> ApiResult<(StatusCode, Json<KeyCreated>)> {
    let tenant = path_id(&tenant, "tenant")?;
    let key = match state.herald.api_key_create(tenant).await {
        Err(herald::Error::UnknownTenant) => return Err(ApiError::not_found("tenant")),
        other => other?,
    };
    let entry = By::admin(client).entry(Some(tenant), "key_create");
    audit::record(&state, entry.target(key.key_id.to_string())).await;
    Ok((
        StatusCode::CREATED,
        Json(KeyCreated { key_id: key.key_id.to_string(), api_key: key.plaintext }),
    ))
}

#[utoipa::path(delete, path = "/v1/tenants/{tenant}/keys/{key_id}",
    params(("tenant" = String, Path), ("key_id" = String, Path)),
    responses((status = 200), (status = 401), (status = 403), (status = 404)))]
pub async fn revoke_tenant_key(
    State(state): State<AppState>,
    _admin: AdminAuth,
    _: NoQuery,
    client: ClientAddr,
    PathParams((tenant, key_id)): PathParams<(String, String)>,
) -> ApiResult<Json<serde_json::Value>> {
    let tenant = path_id(&tenant, "tenant")?;
    // Key ids are 16 hex characters; anything else names no key (and never reaches SQL).
    let key_id = herald::KeyId::parse(&key_id).ok_or_else(|| ApiError::not_found("key"))?;
    if !state.herald.api_key_revoke(tenant, &key_id).await? {
        return Err(ApiError::not_found("key"));
    }
    // This server refuses it at once; others within keys::KEY_CACHE_TTL.
    state.key_cache.forget(key_id.as_str());
    let entry = By::admin(client).entry(Some(tenant), "key_revoke");
    audit::record(&state, entry.target(key_id.as_str())).await;
    Ok(Json(serde_json::json!({"key_id": key_id.as_str(), "revoked": true})))
}

#[utoipa::path(post, path = "/v1/tenants/{tenant}/webhook-secret/rotate", params(("tenant" = String, Path)),
    responses((status = 200, body = SecretRotated), (status = 401), (status = 403), (status = 404)))]
pub async fn rotate_webhook_secret(
    State(state): State<AppState>,
    _admin: AdminAuth,
    _: NoQuery,
    client: ClientAddr,
    PathParams(tenant): PathParams<String>,
) -> ApiResult<Json<SecretRotated>> {
    let tenant = path_id(&tenant, "tenant")?;
    match state.herald.webhook_secret_rotate(tenant).await {
        Ok(webhook_secret) => {
            let entry = By::admin(client).entry(Some(tenant), "webhook_secret_rotate");
            audit::record(&state, entry).await;
            Ok(Json(SecretRotated { webhook_secret }))
        }
        Err(herald::Error::NotFound) => Err(ApiError::not_found("tenant")),
        Err(e) => Err(e.into()),
    }
}

#[utoipa::path(post, path = "/v1/tenants/{tenant}/quotas/{quota_key}/grant", request_body = Grant,
    params(("tenant" = String, Path), ("quota_key" = String, Path)),
    responses((status = 200, body = Granted), (status = 400), (status = 401), (status = 403), (status = 404)))]
pub async fn grant(
    State(state): State<AppState>,
    _admin: AdminAuth,
    _: NoQuery,
    client: ClientAddr,
    PathParams((tenant, quota_key)): PathParams<(String, String)>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<Grant>,
) -> ApiResult<Json<Granted>> {
    let tenant = path_id(&tenant, "tenant")?;
    let idempotency_key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => {
            let v = v
                .to_str()
                .map_err(|_| ApiError::invalid("Idempotency-Key must be visible ASCII"))?;
            if v.is_empty() || v.len() > IDEMPOTENCY_KEY_LEN_MAX {
                return Err(ApiError::invalid(format!(
                    "Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_LEN_MAX} bytes"
                )));
            }
            Some(v.to_string())
        }
    };
    let applied = match state
        .herald
        .quota_grant(tenant, &quota_key, body.amount, idempotency_key.as_deref())
        .await
    {
        Err(herald::Error::UnknownTenant) => return Err(ApiError::not_found("tenant")),
        other => other?,
    };
    if applied {
        let entry = By::admin(client).entry(Some(tenant), "grant");
        audit::record(&state, entry.target(quota_key.as_str()).count(body.amount)).await;
    }
    let quotas = state.herald.quotas(tenant).await?;
    let quota = quotas
        .into_iter()
        .find(|q| q.quota_key == quota_key)
        .map(QuotaView::from)
        .ok_or_else(ApiError::internal)?;
    Ok(Json(Granted { applied, quota }))
}

/// A tenant's share of every worker's send slots.
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendWeight {
    /// 1 to 100 (1 by default): against other tenants with due work, a tenant of weight 3
    /// gets three turns to another's one.
    #[serde(deserialize_with = "crate::wire::integral::req")]
    #[schema(value_type = u32, minimum = 1, maximum = 100)]
    pub send_weight: u32,
}

#[utoipa::path(put, path = "/v1/tenants/{tenant}/send-weight", request_body = SendWeight,
    params(("tenant" = String, Path)),
    responses((status = 200, body = SendWeight), (status = 400), (status = 401), (status = 403), (status = 404)))]
pub async fn send_weight(
    State(state): State<AppState>,
    _admin: AdminAuth,
    _: NoQuery,
    client: ClientAddr,
    PathParams(tenant): PathParams<String>,
    JsonBody(body): JsonBody<SendWeight>,
) -> ApiResult<Json<SendWeight>> {
    let tenant = path_id(&tenant, "tenant")?;
    match state.herald.set_send_weight(tenant, body.send_weight).await {
        Err(herald::Error::NotFound) => return Err(ApiError::not_found("tenant")),
        other => other?,
    }
    let entry = By::admin(client).entry(Some(tenant), "send_weight");
    audit::record(&state, entry.count(i64::from(body.send_weight))).await;
    Ok(Json(body))
}

/// Where a tenant hears of herald's own events (an endpoint disabled, …).
#[derive(Debug, Clone, serde::Deserialize, serde::Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsUrl {
    /// An http:// or https:// URL, signed as every webhook is; `null` removes it.
    #[schema(max_length = 2048)]
    pub url: Option<String>,
}

#[utoipa::path(put, path = "/v1/tenants/{tenant}/events-url", request_body = EventsUrl,
    params(("tenant" = String, Path)),
    responses((status = 200, body = EventsUrl), (status = 400), (status = 401), (status = 403), (status = 404)))]
pub async fn events_url(
    State(state): State<AppState>,
    _admin: AdminAuth,
    _: NoQuery,
    client: ClientAddr,
    PathParams(tenant): PathParams<String>,
    JsonBody(body): JsonBody<EventsUrl>,
) -> ApiResult<Json<EventsUrl>> {
    let tenant = path_id(&tenant, "tenant")?;
    match state.herald.set_events_url(tenant, body.url.as_deref()).await {
        Err(herald::Error::NotFound) => return Err(ApiError::not_found("tenant")),
        other => other?,
    }
    audit::record(&state, By::admin(client).entry(Some(tenant), "events_url")).await;
    Ok(Json(body))
}
