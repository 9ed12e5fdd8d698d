//! herald-core's integration tests: the fingerprint's golden vectors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod json_properties;
mod vectors;
