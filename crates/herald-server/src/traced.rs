//! A span per request when traces are on (`herald::traces`): named by the matched route,
//! a child of the caller's W3C `traceparent` header when it sends one, so that a submit
//! and every attempt of its delivery join the caller's trace. When traces are off this
//! is one branch per request.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument as _;

pub(crate) async fn request_span(request: Request, next: Next) -> Response {
    if !herald::traces::on() {
        return next.run(request).await;
    }
    let method = request.method().clone();
    let route = request.extensions().get::<MatchedPath>().map_or("", |p| p.as_str()).to_string();
    let span = tracing::info_span!(
        "request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
        otel.status_code = tracing::field::Empty,
    );
    let traceparent = request.headers().get("traceparent").and_then(|v| v.to_str().ok());
    herald::traces::follow(&span, traceparent);
    let response = next.run(request).instrument(span.clone()).await;
    span.record("http.response.status_code", response.status().as_u16());
    if response.status().is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    response
}
