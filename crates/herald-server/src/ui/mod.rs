//! The operator dashboard at `/ui`: a page (HTML, one script, one stylesheet, compiled
//! into the binary from `ui/assets/`, no build step and nothing fetched from elsewhere)
//! and the JSON calls it makes under `/ui/api`, on a session cookie instead of a key
//! (`session.rs`). The calls are the library's operator reads and actions, scoped to the
//! session's tenant; the page only shows them.
//!
//! Every answer carries a strict Content-Security-Policy (only this origin's script and
//! style, no inline code, no frames; [`headers`], a layer of the whole router), and the page writes every string it shows as
//! text, never as markup: what a tenant or a receiver wrote cannot run.

pub mod api;
pub mod incident;
pub mod jobs;
pub mod session;

use crate::state::AppState;
use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

/// The policy every `/ui` answer carries.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; \
    frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");
const FAVICON_SVG: &str = include_str!("assets/favicon.svg");

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

/// The dashboard's routes.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }))
        .route("/ui/", get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }))
        .route(
            "/ui/assets/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }),
        )
        .route("/ui/assets/app.css", get(|| async { asset("text/css; charset=utf-8", APP_CSS) }))
        .route("/ui/assets/favicon.svg", get(|| async { asset("image/svg+xml", FAVICON_SVG) }))
        .route("/ui/api/session", post(api::sign_in).get(api::session).delete(api::sign_out))
        .route("/ui/api/tenants", get(api::tenants))
        .route("/ui/api/overview", get(api::overview))
        .route("/ui/api/deliveries", get(api::deliveries))
        .route("/ui/api/deliveries/{id}", get(api::delivery))
        .route("/ui/api/deliveries/{id}/replay", post(api::replay))
        .route("/ui/api/deliveries/{id}/cancel", post(api::cancel))
        .route("/ui/api/bulk", post(api::bulk))
        .route("/ui/api/bulk/{job}", get(api::bulk_job))
        .route("/ui/api/quotas", get(api::quotas))
        .route("/ui/api/sessions", get(api::sessions))
        .route("/ui/api/audit", get(api::audit_log))
        .route("/ui/api/failures", get(incident::failures))
        .route("/ui/api/holds", get(incident::holds).post(incident::hold))
        .route("/ui/api/holds/release", post(incident::hold_release))
        .route("/ui/api/circuits/enable", post(incident::enable))
        .route("/ui/api/sessions/{id}", axum::routing::delete(api::session_end))
}

/// The security headers, on every answer of the router (the outermost layer, so the
/// 404s, 405s and 414s of paths under `/ui` carry them too); under `/ui` the JSON calls are
/// never cached and the page is revalidated.
pub async fn headers(request: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let path = request.uri().path();
    let cache = if path.starts_with("/ui/api/") {
        Some("no-store")
    } else {
        (path == "/ui" || path.starts_with("/ui/")).then_some("no-cache")
    };
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if let Some(cache) = cache {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    }
    response
}
