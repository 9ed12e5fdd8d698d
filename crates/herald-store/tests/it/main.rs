//! herald-store's integration tests, one test binary for the crate (`tests/it/`), like
//! the other crates'.
//! Every test still runs in a process of its own under nextest.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod conformance;
mod sql_fingerprint;
mod sqlite_locking;
mod tls;
