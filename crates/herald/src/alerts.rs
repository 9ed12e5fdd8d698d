//! Operator alerts: conditions only an operator can fix (the SMTP relay refuses herald's
//! credentials, or cannot be reached; a client hands over fingerprints that are not its
//! requests'). Each is counted in `herald_operator_alerts_total`
//! (what the shipped alert rules watch) and kept here, per reason, with when it last
//! happened, for the dashboard. Both are this process's own since it started.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

/// One reason's count in this process, and the last time it was raised (Unix ms).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlertCount {
    pub reason: &'static str,
    pub count: u64,
    pub last_at_ms: i64,
}

static RAISED: Mutex<BTreeMap<&'static str, (u64, i64)>> = Mutex::new(BTreeMap::new());

/// A client's fingerprint (`submit_v2`) was not that of its request: the delivery failed
/// unsent (`fingerprint_mismatch`).
pub const FINGERPRINT_MISMATCH: &str = "fingerprint_mismatch";

/// Makes `reason`'s series exist at 0 before it is first raised: the shipped rules watch
/// `increase()`, which cannot see a series that appears at 1, so a reason raised once in a
/// process's life would otherwise never alert.
pub fn register(reason: &'static str) {
    metrics::counter!("herald_operator_alerts_total", "reason" => reason).increment(0);
}

/// Raises an operator alert.
pub fn raise(reason: &'static str) {
    metrics::counter!("herald_operator_alerts_total", "reason" => reason).increment(1);
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    if let Ok(mut raised) = RAISED.lock() {
        let entry = raised.entry(reason).or_insert((0, now));
        *entry = (entry.0 + 1, now);
    }
}

/// The alerts this process raised, by reason.
pub fn raised() -> Vec<AlertCount> {
    RAISED.lock().map_or_else(
        |_| Vec::new(),
        |raised| {
            raised
                .iter()
                .map(|(&reason, &(count, last_at_ms))| AlertCount { reason, count, last_at_ms })
                .collect()
        },
    )
}
