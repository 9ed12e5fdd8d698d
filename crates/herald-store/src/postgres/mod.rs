//! The PostgreSQL backend: one module per concern, each function the PostgreSQL form of
//! the contract documented beside its dispatcher (`crate::deliveries`, `crate::quota`).
//! `timestamptz` columns cross as Unix milliseconds through `herald_ms`/`herald_ts`, and
//! "now" is `herald_now($n)` — the server's `now()` when the parameter is NULL
//! ([`crate::clock::Now::Database`]). A step is one statement where writing CTEs allow it.

pub(crate) mod apply;
pub(crate) mod audit;
pub(crate) mod claim;
pub(crate) mod destinations;
pub(crate) mod holds;
pub(crate) mod keys;
pub(crate) mod lease;
pub(crate) mod manage;
pub(crate) mod quota;
pub(crate) mod read;
pub(crate) mod receipts;
pub(crate) mod retention;
pub(crate) mod rollup;
pub(crate) mod settings;
pub(crate) mod tenants;
pub(crate) mod ui_sessions;
pub(crate) mod workers;

/// The columns of a [`crate::deliveries::DeliveryRow`], from `deliveries d`.
pub(crate) const DELIVERY_COLS: &str = "d.id, d.tenant_id, d.operation_key, d.channel, \
    d.recipient, d.fingerprint, d.fingerprint_version, d.quota_key, d.cost, d.state, d.attempts, d.max_attempts, \
    d.attempts_base, d.reservation_seq, herald_ms(d.next_attempt_at) AS next_attempt_at, \
    d.lease_owner, herald_ms(d.lease_until) AS lease_until, d.last_error, \
    herald_ms(d.created_at) AS created_at, herald_ms(d.updated_at) AS updated_at, \
    herald_ms(d.sent_at) AS sent_at, d.attempt_worker, \
    herald_ms(d.attempt_started_at) AS attempt_started_at";

pub(crate) fn sql(s: String) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(s)
}
