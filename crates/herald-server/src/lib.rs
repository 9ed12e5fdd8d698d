//! herald's HTTP face: the axum router (`app`), wire types, API-key authentication, JSON
//! errors, metrics and the OpenAPI document. `serve` runs the router next to workers, the
//! reconciler and retention in one process.

pub mod audit;
pub mod cursor;
#[cfg(test)]
mod debug_tests;
pub mod error;
pub mod extract;
pub mod guesses;
pub mod head_errors;
pub mod hosts;
pub mod keys;
pub mod listen;
pub mod metrics;
pub mod openapi;
pub mod routes;
pub mod serve;
pub mod state;
mod traced;
pub mod ui;
pub mod wire;
pub mod write_stall;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post, put};
use error::ApiError;
pub use state::AppState;
use utoipa::OpenApi;

/// Largest request body, in bytes: the payload limit plus room for the other fields.
pub const BODY_BYTES_MAX: usize = herald_core::limits::PAYLOAD_BYTES_MAX + 16 * 1024;
/// Largest body of `POST /v1/deliveries`, in bytes: the email channel's payload limit (a
/// rendered message) plus room for the other fields; every other channel's payload is
/// still refused past its own limit.
pub const SUBMIT_BODY_BYTES_MAX: usize = herald_core::limits::EMAIL_PAYLOAD_BYTES_MAX + 16 * 1024;
/// Largest body of `POST /v1/deliveries/batch`, in bytes (4 MiB: a batch of the most
/// items with payloads of about 8 KiB each; bigger payloads take smaller batches).
pub const BATCH_BODY_BYTES_MAX: usize = 4 * 1024 * 1024;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "herald",
        description = "Durable deliveries: claimed once, paid for once, never lost."
    ),
    paths(
        routes::deliveries::create,
        routes::deliveries::create_batch,
        routes::deliveries::list,
        routes::deliveries::show,
        routes::deliveries::attempts,
        routes::deliveries::replay,
        routes::deliveries::cancel,
        routes::deliveries::replay_matching,
        routes::deliveries::cancel_matching,
        routes::deliveries::quotas,
        routes::admin::create_tenant,
        routes::admin::create_tenant_key,
        routes::admin::revoke_tenant_key,
        routes::admin::rotate_webhook_secret,
        routes::admin::grant,
        audit::list,
        routes::holds::list,
        routes::holds::hold,
        routes::holds::release,
        routes::destinations::list,
        routes::destinations::set,
        routes::destinations::remove,
        routes::destinations::circuits,
        routes::destinations::enable,
        routes::admin::events_url,
        routes::admin::send_weight,
        routes::system::healthz,
        routes::system::readyz,
        routes::system::metrics,
        routes::system::openapi,
    )
)]
struct ApiDoc;

/// The OpenAPI document of this router as utoipa generates it; `/openapi.json` serves
/// it completed by [`openapi::document`].
pub fn openapi_document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The router. Every answer, including the framework's own rejections, is JSON.
pub fn app(state: AppState) -> Router {
    use routes::{admin, deliveries, system};
    Router::new()
        .route(
            "/v1/deliveries",
            post(deliveries::create)
                .layer(DefaultBodyLimit::max(SUBMIT_BODY_BYTES_MAX))
                .get(deliveries::list),
        )
        .route(
            "/v1/deliveries/batch",
            post(deliveries::create_batch).layer(DefaultBodyLimit::max(BATCH_BODY_BYTES_MAX)),
        )
        .route("/v1/deliveries/replay", post(deliveries::replay_matching))
        .route("/v1/deliveries/cancel", post(deliveries::cancel_matching))
        .route("/v1/deliveries/{id}", get(deliveries::show))
        .route("/v1/deliveries/{id}/attempts", get(deliveries::attempts))
        .route("/v1/deliveries/{id}/replay", post(deliveries::replay))
        .route("/v1/deliveries/{id}/cancel", post(deliveries::cancel))
        .route("/v1/quotas", get(deliveries::quotas))
        .route("/v1/tenants", post(admin::create_tenant))
        .route("/v1/tenants/{tenant}/keys", post(admin::create_tenant_key))
        .route("/v1/tenants/{tenant}/keys/{key_id}", delete(admin::revoke_tenant_key))
        .route("/v1/tenants/{tenant}/webhook-secret/rotate", post(admin::rotate_webhook_secret))
        .route("/v1/tenants/{tenant}/quotas/{quota_key}/grant", post(admin::grant))
        .route("/v1/audit", get(audit::list))
        .route("/v1/holds", get(routes::holds::list).post(routes::holds::hold))
        .route("/v1/holds/release", post(routes::holds::release))
        .route("/v1/limits", get(routes::destinations::list).post(routes::destinations::set))
        .route("/v1/limits/remove", post(routes::destinations::remove))
        .route("/v1/circuits", get(routes::destinations::circuits))
        .route("/v1/circuits/enable", post(routes::destinations::enable))
        .route("/v1/tenants/{tenant}/events-url", put(admin::events_url))
        .route("/v1/tenants/{tenant}/send-weight", put(admin::send_weight))
        .route("/healthz", get(system::healthz))
        .route("/readyz", get(system::readyz))
        .route("/metrics", get(system::metrics))
        .route("/openapi.json", get(system::openapi))
        .merge(ui::routes())
        .route_layer(axum::middleware::from_fn(traced::request_span))
        .fallback(|| async { ApiError::not_found("route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                "method_not_allowed",
                "method not allowed",
            )
        })
        .layer(DefaultBodyLimit::max(BODY_BYTES_MAX))
        .layer(axum::middleware::from_fn_with_state(state.clone(), hosts::check))
        .layer(axum::middleware::from_fn(uri_limit))
        .layer(axum::middleware::from_fn(ui::headers))
        .with_state(state)
}

/// A URI over `listen::URI_BYTES_MAX` is a 414 before any route sees it (hyper answers
/// longer ones than its own limit itself; `head_errors` makes that answer JSON too).
async fn uri_limit(
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let uri_bytes = request.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if uri_bytes > listen::URI_BYTES_MAX {
        return ApiError::new(
            axum::http::StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!("the request URI is longer than {} bytes", listen::URI_BYTES_MAX),
        )
        .into_response();
    }
    next.run(request).await
}
