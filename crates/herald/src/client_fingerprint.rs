//! The check of a fingerprint the client computed (`submit_v2`, fingerprint version 3):
//! nothing but the client vouched for it, so the worker recomputes it from the leased row
//! before each send (ARCHITECTURE.md, "The client's fingerprint").

use herald_core::fingerprint::{FINGERPRINT_CLIENT, Resolved, fingerprint};
use herald_store::deliveries::LeasedRow;

/// Whether the row's fingerprint is that of what would be sent. Only a row whose
/// fingerprint the client handed over (`FINGERPRINT_CLIENT`) is in question; a payload
/// herald's rules refuse has no fingerprint, so it does not hold either.
pub(crate) fn holds(row: &LeasedRow) -> bool {
    let d = &row.delivery;
    if d.fingerprint_version != FINGERPRINT_CLIENT {
        return true;
    }
    let (Ok(payload), Ok(max_attempts)) =
        (herald_core::json::parse(&row.payload), u32::try_from(d.max_attempts))
    else {
        return false;
    };
    let resolved = Resolved {
        channel: &d.channel,
        to: &d.recipient,
        payload: &payload,
        quota_key: &d.quota_key,
        cost: d.cost,
        send_at_ms: row.fingerprint_send_at,
        max_attempts,
    };
    fingerprint(&resolved).as_slice() == d.fingerprint.as_slice()
}
