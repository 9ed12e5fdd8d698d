//! The SQLite backend: one module per concern, each function the SQLite form of the
//! contract documented beside its dispatcher (`crate::deliveries`, `crate::quota`). Times
//! are INTEGER Unix milliseconds, "now" is read in process ([`crate::clock::Now`]), UUIDs
//! are 16-byte BLOBs. SQLite has one writer at a time (herald's transactions take the write
//! lock at BEGIN), so there is no lock order to keep and no `SKIP LOCKED` to ask for.

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

/// The columns of a [`crate::deliveries::DeliveryRow`].
pub(crate) const DELIVERY_COLS: &str = "id, tenant_id, operation_key, channel, recipient, \
    fingerprint, fingerprint_version, quota_key, cost, state, attempts, max_attempts, attempts_base, \
    reservation_seq, next_attempt_at, lease_owner, lease_until, last_error, created_at, \
    updated_at, sent_at, attempt_worker, attempt_started_at";

pub(crate) fn sql(s: String) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(s)
}

/// Names as a JSON array of strings, for `json_each` (SQLite's stand-in for an array
/// parameter): quotes, backslashes and control characters escaped.
pub(crate) fn json_array<S: AsRef<str>>(items: &[S]) -> String {
    let mut out = String::from("[");
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('"');
        for c in item.as_ref().chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out.push(']');
    out
}
