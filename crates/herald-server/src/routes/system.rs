//! Health, readiness, metrics and the OpenAPI document.

use crate::error::ApiError;
use crate::keys;
use crate::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", responses((status = 200)))]
pub async fn healthz() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok"}))
}

/// Readiness: the database answers.
#[utoipa::path(get, path = "/readyz", responses((status = 200), (status = 503)))]
pub async fn readyz(State(state): State<AppState>) -> Response {
    match state.herald.store().ping().await {
        Ok(()) => Json(serde_json::json!({"status": "ready"})).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "not ready");
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                "the database is unreachable",
            )
            .into_response()
        }
    }
}

/// Prometheus text format; needs `Authorization: Bearer $HERALD_METRICS_TOKEN` when set.
#[utoipa::path(get, path = "/metrics", responses((status = 200), (status = 401)))]
pub async fn metrics(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Some(token) = &state.metrics_token_sha256 {
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(keys::digest);
        if !presented.is_some_and(|p| keys::same(&p, token)) {
            return ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "the metrics token is required",
            )
            .into_response();
        }
    }
    crate::metrics::refresh_gauges(&state.herald, false).await;
    let mut body = state.metrics.as_ref().map(|h| h.render()).unwrap_or_default();
    if state.metrics_per_tenant {
        if !body.is_empty() && !body.ends_with('\n') {
            body.push('\n');
        }
        body.push_str(&crate::metrics::render_per_tenant());
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

/// This API, as OpenAPI 3, generated from the handlers.
#[utoipa::path(get, path = "/openapi.json", responses((status = 200)))]
pub async fn openapi(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(crate::openapi::document(&state.channels))
}
