//! herald's integration tests, one test binary for the crate: each former `tests/*.rs`
//! is a module here, so a change relinks one binary instead of one per file.
//! Every test still runs in a process of its own under nextest.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod demo;
mod email;
mod engine;
mod exact;
mod faults;
mod properties;
mod receipts;
mod runner;
mod sql_api;
mod sql_api_mariadb;
mod sqlite_reads;
mod sqlite_writer;
mod store_paths;
mod striped;
mod submit;
mod tracing;
mod webhook;
