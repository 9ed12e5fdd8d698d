//! herald-cli's integration tests, one test binary for the crate: each former `tests/*.rs`
//! is a module here, so a change relinks one binary instead of one per file.
//! Every test still runs in a process of its own under nextest.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod audit;
mod bench;
mod chaos;
mod circuits;
mod cli;
mod composer;
mod deb;
mod e2e;
mod fair;
mod faults;
mod fingerprint;
mod limits;
mod migrate_race;
mod openapi;
mod php;
mod quickstart;
mod serve;
mod tenant_keys;
mod traces;
