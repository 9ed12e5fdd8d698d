//! Extractors that answer bad input the way SPEC.md says — JSON errors, 400 for anything
//! malformed, 413 for anything too big — instead of the framework's plain-text 415/422.

use crate::error::ApiError;
use crate::keys::{self, Cached};
use crate::state::AppState;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Query, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

/// A JSON body (`Content-Type: application/json`, within the body limit).
#[derive(Debug)]
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(JsonBody(value)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::MissingJsonContentType(_) => {
            ApiError::invalid("the body must be JSON with Content-Type: application/json")
        }
        JsonRejection::JsonSyntaxError(e) => {
            ApiError::invalid(format!("malformed JSON: {}", e.body_text()))
        }
        JsonRejection::JsonDataError(e) => ApiError::invalid(e.body_text()),
        JsonRejection::BytesRejection(e) if e.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            ApiError::too_large(format!(
                "the body is larger than {} bytes ({} for a submit, {} for a batch)",
                crate::BODY_BYTES_MAX,
                crate::SUBMIT_BODY_BYTES_MAX,
                crate::BATCH_BODY_BYTES_MAX
            ))
        }
        JsonRejection::BytesRejection(e) if caused_by_body_timeout(&e) => ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            "the request body did not arrive in time",
        ),
        other => ApiError::invalid(other.body_text()),
    }
}

/// Whether reading the body failed because `listen`'s body deadline passed.
fn caused_by_body_timeout(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(e) = cause {
        if e.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// Path parameters. A path that cannot be decoded (invalid UTF-8, …) names nothing that
/// exists: a JSON 404, like a malformed id.
#[derive(Debug)]
pub struct PathParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(PathParams(value)),
            Err(_) => Err(ApiError::not_found("resource")),
        }
    }
}

/// Query parameters; unknown or malformed ones are a 400.
#[derive(Debug)]
pub struct QueryParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match Query::<T>::from_request_parts(parts, state).await {
            Ok(Query(value)) => Ok(QueryParams(value)),
            Err(QueryRejection::FailedToDeserializeQueryString(e)) => {
                Err(ApiError::invalid(format!("bad query: {}", e.body_text())))
            }
            Err(other) => Err(ApiError::invalid(other.body_text())),
        }
    }
}

fn bearer(parts: &Parts) -> Option<&str> {
    bearer_token(&parts.headers)
}

/// The token of an `Authorization: Bearer …` header.
pub(crate) fn bearer_token(headers: &axum::http::HeaderMap) -> Option<&str> {
    let value = headers.get(axum::http::header::AUTHORIZATION)?.to_str().ok()?;
    let token = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer "))?;
    Some(token.trim())
}

/// The tenant a valid, unrevoked API key belongs to.
#[derive(Debug, Clone, Copy)]
pub struct TenantAuth(pub herald::TenantId);

impl FromRequestParts<AppState> for TenantAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer(parts).ok_or_else(ApiError::unauthorized)?;
        let parsed = keys::parse(token);
        // A key verified lately is answered from the cache, limits or not: only a key
        // that is not (a guess among them) is counted and limited.
        if let Some((key_id, hash)) = &parsed {
            match state.key_cache.lookup(key_id.as_str(), hash) {
                Cached::Fresh(tenant) => return Ok(TenantAuth(tenant)),
                Cached::Refresh(tenant) => {
                    refresh_behind(state, key_id, *hash);
                    return Ok(TenantAuth(tenant));
                }
                Cached::Missing => {}
            }
        }
        let sources =
            guess_sources(ClientAddr::of(parts).0, parsed.as_ref().map(|(id, _)| id.as_str()));
        state.guesses.check(&sources)?;
        let Some((key_id, hash)) = parsed else {
            state.guesses.failed(&sources, "api");
            return Err(ApiError::unauthorized());
        };
        // Longer than a lookup takes, shorter than a lookup that cannot get a connection
        // (the pool's wait): when the database is down, requests do not queue for it.
        let turn = state.key_cache.turn(key_id.as_str());
        let _turn = tokio::time::timeout(keys::TURN_WAIT, turn.lock()).await.ok();
        if let Some(tenant) = state.key_cache.tenant(key_id.as_str(), &hash) {
            return Ok(TenantAuth(tenant)); // verified by the request whose turn came first
        }
        let row = state.herald.api_key(&key_id).await.map_err(ApiError::from)?;
        match row {
            Some(row) if !row.revoked && keys::same(&row.secret_sha256, &hash) => {
                let tenant = herald::TenantId::from_uuid(row.tenant_id);
                state.key_cache.verified(key_id.as_str(), hash, tenant);
                Ok(TenantAuth(tenant))
            }
            _ => {
                state.guesses.failed(&sources, "api");
                Err(ApiError::unauthorized())
            }
        }
    }
}

/// Verifies a cached key again past half its bound, in the background: the request that
/// was asked to is answered from the cache like the others, so none waits for it. A key
/// the database no longer has (or has revoked) is forgotten; a database error leaves the
/// cached answer in force until its bound, and the next request past half of it tries again.
fn refresh_behind(state: &AppState, key_id: &herald::KeyId, hash: [u8; 32]) {
    let (state, key_id) = (state.clone(), key_id.clone());
    tokio::spawn(async move {
        let key_id_text = key_id.as_str();
        match state.herald.api_key(&key_id).await {
            Ok(Some(row)) if !row.revoked && keys::same(&row.secret_sha256, &hash) => {
                let tenant = herald::TenantId::from_uuid(row.tenant_id);
                state.key_cache.verified(key_id_text, hash, tenant);
            }
            Ok(_) => state.key_cache.forget(key_id_text),
            Err(e) => {
                tracing::warn!(error = %e, "re-verifying a cached API key failed; the cached answer stands until its bound");
                state.key_cache.refresh_failed(key_id_text);
            }
        }
    });
}

/// The caller presented the admin key.
#[derive(Debug, Clone, Copy)]
pub struct AdminAuth;

impl FromRequestParts<AppState> for AdminAuth {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer(parts).ok_or_else(ApiError::unauthorized)?;
        // Limited before the comparison: a guess that happens to be right must not be the
        // one answer a locked-out client can still get.
        state.guesses.check(&guess_sources(ClientAddr::of(parts).0, None))?;
        if let Some(admin) = &state.admin_key_sha256
            && keys::same(admin, &keys::digest(token))
        {
            return Ok(AdminAuth);
        }
        // A valid tenant key is authenticated but not allowed here; anything else is not
        // authenticated at all.
        match TenantAuth::from_request_parts(parts, state).await {
            Ok(_) => Err(ApiError::forbidden()),
            Err(e) => Err(e),
        }
    }
}

/// Who a failed key counts against: the client's address (when the server knows it) and
/// the key id the key names, if any.
pub fn guess_sources(
    address: Option<std::net::IpAddr>,
    key_id: Option<&str>,
) -> Vec<crate::guesses::Source> {
    use crate::guesses::Source;
    let address = address.map(Source::Address);
    address.into_iter().chain(key_id.map(|k| Source::KeyId(k.to_string()))).collect()
}

/// The client's address, when the listener recorded it (`ConnectInfo`; not in-process).
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub Option<std::net::IpAddr>);

impl ClientAddr {
    pub fn of(parts: &Parts) -> ClientAddr {
        let info = parts.extensions.get::<axum::extract::ConnectInfo<std::net::SocketAddr>>();
        ClientAddr(info.map(|c| c.0.ip()))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(ClientAddr::of(parts))
    }
}

/// A route that takes no query parameters refuses any, after its authentication, as
/// `GET /v1/deliveries` refuses one it does not know: a typo such as `?stat=failed` is
/// never silently another request (issue 37).
#[derive(Debug, Clone, Copy)]
pub struct NoQuery;

impl<S: Send + Sync> FromRequestParts<S> for NoQuery {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        match parts.uri.query() {
            Some(q) if !q.is_empty() => {
                Err(ApiError::invalid("this route takes no query parameters"))
            }
            _ => Ok(NoQuery),
        }
    }
}
