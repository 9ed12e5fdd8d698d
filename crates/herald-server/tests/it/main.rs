//! herald-server's integration tests, one test binary for the crate: each former
//! `tests/*.rs` is a module here, so a change relinks one binary instead of one per file.
//! Every test still runs in a process of its own under nextest.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod busy;
mod edges;
mod http;
mod key_cache;
mod robust;
mod sqlite_reads;
mod tenants;
