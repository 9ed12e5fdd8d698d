//! herald: a durable delivery engine for side effects that must happen once and be paid
//! for once.
//!
//! This crate is what a Rust application depends on. Today it holds the foundation:
//!
//! - [`Herald::transaction`] — the transaction runner. It re-runs the *whole* closure on
//!   concurrency errors only (deadlock, serialization failure, SQLite busy), bounded by
//!   attempts and a deadline, and runs effects registered with [`Tx::after_commit`] once,
//!   after the final commit, never for an attempt that rolled back.
//! - [`once`] — receipts: apply an operation at most once per (scope, operation id),
//!   inside the caller's transaction, without ever aborting it on a duplicate.
//!
//! README.md shows both in use; its examples are compiled as doctests.

mod admin;
pub mod alerts;
mod audit;
#[doc(hidden)]
pub mod bench;
mod bulk;
mod channel;
pub mod channels;
mod client_fingerprint;
mod clock;
mod counts;
mod datagram;
mod delivery;
pub mod demo;
mod destinations;
mod error;
mod failures;
mod group;
mod handle;
mod holds;
mod keys;
mod known_leases;
mod lanes;
mod manage;
mod once;
mod ops;
mod outcome;
mod reconciler;
mod recorder;
mod retention;
mod rollup;
mod runner;
mod secrets;
mod settings;
mod sql_api;
mod submit;
pub mod traces;
mod tx;
mod ui_sessions;
mod wake;
mod worker;
mod worker_options;

pub use admin::{Tenant, new_webhook_secret};
pub use audit::{AuditActor, AuditEntry, AuditRecord};
pub use bulk::{BULK_MAX, BulkAction, BulkFilter, BulkProgress, BulkReport};
pub use channel::{Channel, Leased, Outcome};
pub use clock::Clock;
pub use counts::{COUNTS_MAX_AGE, DeliveryCounts};
pub use delivery::{Attempt, Delivery};
pub use destinations::{DestinationLimit, ENDPOINT_DISABLED, LaneState, SEND_WEIGHT_MAX};
pub use error::{BoxError, Error, Invalid};
pub use failures::{FAILING_READ_MAX, FailureGroup, Failures};
pub use group::GroupCommitStats;
pub use handle::{EngineOptions, Herald};
pub use herald_core::hold::{HoldKind, HoldScope, destination_of};
pub use herald_core::limits::LANE_TAKE_MAX_DEFAULT;
pub use herald_core::{Backoff, DeliveryId, KeyId, OperationId, OperationKey, Scope, TenantId};
pub use herald_core::{Decision, DeliveryState, Payload, Report, RetryPolicy};
/// The fingerprint and the JSON rules under it, as every face computes them.
pub use herald_core::{fingerprint, json};
pub use herald_store::quota::QuotaAccount;
pub use herald_store::{
    AsConn, Backend, Concurrency, Conn, DbUrl, ErrorClass, Isolation, Now, Store, StoreError,
    StoreOptions,
};
pub use holds::{HOLDS_MAX_AGE, Hold, HoldReport};
pub use keys::{NewApiKey, api_key_parse};
pub use once::{Once, once};
pub use ops::{DeliveryFilter, JournalEntry, Migrated, QueueStats};
pub use outcome::AttemptReport;
pub use reconciler::{ReconcileReport, Reconciler, ReconcilerOptions};
pub use retention::{Retention, RetentionOptions, RetentionReport};
pub use rollup::{Minute, ROLLUP_FLUSH_EVERY};
pub use runner::{Committed, TxOptions};
pub use settings::{SETTINGS_REFRESH, Settings};
pub use sql_api::SqlGrant;
pub use submit::{SubmitRequest, Submitted};
pub use ui_sessions::{UI_SESSION_IDLE, UI_SESSION_TTL, UiSession, UiSessionEnd};
pub use worker::{RELEASE_DEFAULT, RunReport, Worker, WorkerOptions, WorkerStats};
pub use worker_options::{WAKE_ADVERTISE_LEN_MAX, WAKE_LISTEN_DEFAULT};

/// A cancellation token: background loops stop when it is cancelled.
pub use tokio_util::sync::CancellationToken;

pub use tx::Tx;
/// UUIDs as herald uses them (delivery ids are UUIDv7).
pub use uuid::Uuid;

/// The sqlx this crate is built on, so applications use the very same types.
pub use herald_store::sqlx;

/// README.md's examples, compiled by `cargo test --doc`.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// A boxed, sendable future: what transaction closures return.
pub type BoxFuture<'a, T> = std::pin::Pin<Box<dyn Future<Output = T> + Send + 'a>>;
