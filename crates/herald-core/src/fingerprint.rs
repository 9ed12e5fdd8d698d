//! The fingerprint of a submit: SHA-256 of the canonical form of the *resolved* request
//! (defaults applied), so a retry with the same meaning matches and any change does not.
//! ARCHITECTURE.md ("The fingerprint") defines it; `testdata/fingerprint-vectors.json`
//! holds its golden vectors, written by a second implementation
//! (`scripts/fingerprint-vectors`).
//!
//! Every delivery row keeps the version its fingerprint was computed in, and a repeat is
//! compared in that version ([`fingerprint_in`]), so requests submitted before an upgrade
//! stay duplicates after it.

mod v1;

use crate::json::{self, Value};
use sha2::{Digest, Sha256};

/// The version every new delivery's fingerprint is computed in.
pub const FINGERPRINT_VERSION: i16 = 2;

/// A row whose fingerprint the *client* computed (`submit_v2`): version 2's rules and
/// bytes, compared as version 2 by a repeat, and checked by herald against the row before
/// each send, since nothing but the client vouched for it (ARCHITECTURE.md, "The client's
/// fingerprint").
pub const FINGERPRINT_CLIENT: i16 = 3;

/// The fields that make up a delivery's meaning, defaults resolved.
#[derive(Debug, Clone, Copy)]
pub struct Resolved<'a> {
    pub channel: &'a str,
    pub to: &'a str,
    pub payload: &'a Value,
    pub quota_key: &'a str,
    pub cost: i64,
    /// Unix milliseconds, `None` for "now".
    pub send_at_ms: Option<i64>,
    pub max_attempts: u32,
}

/// The canonical text of version 2: one object with the seven members in byte order,
/// every string and number canonical, no whitespace.
pub fn canonical(r: &Resolved<'_>) -> String {
    let payload = |v: &Value, out: &mut String| {
        json::write_canonical(v, out);
        Some(())
    };
    envelope(r, json::write_canonical_string, payload).unwrap_or_default()
}

/// The resolved request as one object, its members in byte order, written with a
/// version's rules for strings and for the payload (`None` if the payload cannot be).
/// Both versions share this shape: only the spelling of values differs.
fn envelope(
    r: &Resolved<'_>,
    string: fn(&str, &mut String),
    payload: impl Fn(&Value, &mut String) -> Option<()>,
) -> Option<String> {
    let mut out = String::with_capacity(256);
    out.push_str("{\"channel\":");
    string(r.channel, &mut out);
    out.push_str(",\"cost\":");
    out.push_str(&r.cost.to_string());
    out.push_str(",\"max_attempts\":");
    out.push_str(&r.max_attempts.to_string());
    out.push_str(",\"payload\":");
    payload(r.payload, &mut out)?;
    out.push_str(",\"quota_key\":");
    string(r.quota_key, &mut out);
    out.push_str(",\"send_at\":");
    match r.send_at_ms {
        Some(ms) => out.push_str(&ms.to_string()),
        None => out.push_str("null"),
    }
    out.push_str(",\"to\":");
    string(r.to, &mut out);
    out.push('}');
    Some(out)
}

/// The fingerprint in the current version ([`FINGERPRINT_VERSION`]).
pub fn fingerprint(r: &Resolved<'_>) -> [u8; 32] {
    Sha256::digest(canonical(r).as_bytes()).into()
}

/// The fingerprint in `version`, to compare with a row written in it; `None` for a
/// version this build does not know, or a request that version could not represent
/// (which therefore matches no row of it).
pub fn fingerprint_in(version: i16, r: &Resolved<'_>) -> Option<[u8; 32]> {
    match version {
        1 => v1::fingerprint(r),
        FINGERPRINT_VERSION | FINGERPRINT_CLIENT => Some(fingerprint(r)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_notation_do_not_matter_and_content_does() {
        let a = json::parse(r#"{"subject":"hi","n":1.0}"#).unwrap_or(Value::Null);
        let b = json::parse(r#"{ "n": 1e0, "subject": "hi" }"#).unwrap_or(Value::Null);
        let c = json::parse(r#"{"subject":"hi","n":1.01}"#).unwrap_or(Value::Null);
        let base = Resolved {
            channel: "email",
            to: "a@example.com",
            payload: &a,
            quota_key: "email",
            cost: 1,
            send_at_ms: None,
            max_attempts: 5,
        };
        assert_eq!(fingerprint(&base), fingerprint(&Resolved { payload: &b, ..base }));
        assert_ne!(fingerprint(&base), fingerprint(&Resolved { payload: &c, ..base }));
        assert_ne!(fingerprint(&base), fingerprint(&Resolved { cost: 2, ..base }));
        assert_ne!(fingerprint(&base), fingerprint(&Resolved { max_attempts: 6, ..base }));
        assert_ne!(fingerprint(&base), fingerprint(&Resolved { send_at_ms: Some(1), ..base }));
        assert_eq!(fingerprint_in(FINGERPRINT_VERSION, &base), Some(fingerprint(&base)));
        // A client-computed row compares as version 2; an unknown version matches nothing.
        assert_eq!(fingerprint_in(FINGERPRINT_CLIENT, &base), Some(fingerprint(&base)));
        assert_eq!(fingerprint_in(4, &base), None);
    }
}
