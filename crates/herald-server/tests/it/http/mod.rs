//! The HTTP API through the real router (SPEC.md "HTTP API", guarantees 1, 2, 10, 11) on
//! every backend: every route, every error code, JSON errors for bad input, tenant walls.

use crate::common::*;
use axum::http::{HeaderValue, Method, StatusCode};
use serde_json::{Value, json};
use std::collections::BTreeSet;

const BAD: StatusCode = StatusCode::BAD_REQUEST;
const OK: StatusCode = StatusCode::OK;
const CREATED: StatusCode = StatusCode::CREATED;
const NOT_FOUND: StatusCode = StatusCode::NOT_FOUND;

/// Every route the router serves, as (method, OpenAPI path). The OpenAPI document must
/// list exactly these, and the router must answer each of them.
const ROUTES: &[(&str, &str)] = &[
    ("POST", "/v1/deliveries"),
    ("POST", "/v1/deliveries/batch"),
    ("GET", "/v1/deliveries"),
    ("GET", "/v1/deliveries/{id}"),
    ("GET", "/v1/deliveries/{id}/attempts"),
    ("POST", "/v1/deliveries/{id}/replay"),
    ("POST", "/v1/deliveries/{id}/cancel"),
    ("POST", "/v1/deliveries/replay"),
    ("POST", "/v1/deliveries/cancel"),
    ("GET", "/v1/quotas"),
    ("POST", "/v1/tenants"),
    ("POST", "/v1/tenants/{tenant}/keys"),
    ("DELETE", "/v1/tenants/{tenant}/keys/{key_id}"),
    ("POST", "/v1/tenants/{tenant}/webhook-secret/rotate"),
    ("POST", "/v1/tenants/{tenant}/quotas/{quota_key}/grant"),
    ("GET", "/v1/audit"),
    ("GET", "/v1/holds"),
    ("POST", "/v1/holds"),
    ("POST", "/v1/holds/release"),
    ("GET", "/v1/limits"),
    ("POST", "/v1/limits"),
    ("POST", "/v1/limits/remove"),
    ("GET", "/v1/circuits"),
    ("POST", "/v1/circuits/enable"),
    ("PUT", "/v1/tenants/{tenant}/send-weight"),
    ("PUT", "/v1/tenants/{tenant}/events-url"),
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/metrics"),
    ("GET", "/openapi.json"),
];

/// (what, Idempotency-Key header, body, status, error code or `None` for a duplicate).
type KeyCase = (&'static str, Option<&'static str>, Value, StatusCode, Option<&'static str>);

/// (what, content type, body, status, error code).
type BodyCase<N> = (N, Option<&'static str>, Vec<u8>, StatusCode, &'static str);

fn id_of(v: &Value) -> String {
    v["id"].as_str().unwrap_or_else(|| panic!("no id in {v}")).to_string()
}

fn ids(list: &[Value]) -> Vec<String> {
    list.iter().map(id_of).collect()
}

mod admin;
mod audit;
mod bad_input;
mod batch;
mod deliveries;
mod holds;
mod hosts;
mod operators;
mod sessions;
mod submits;
mod walls;
