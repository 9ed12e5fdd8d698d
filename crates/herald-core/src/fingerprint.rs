//! The fingerprint of a submit: SHA-256 of the canonical JSON of the *resolved* request
//! (defaults applied), so a retry with the same meaning matches and any change does not.
//!
//! Canonical: object keys sorted (serde_json's map is ordered by key without the
//! `preserve_order` feature), no whitespace, numbers as serde_json prints them.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

/// The fields that make up a delivery's meaning.
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

pub fn fingerprint(r: &Resolved<'_>) -> [u8; 32] {
    let canonical = json!({
        "channel": r.channel,
        "to": r.to,
        "payload": r.payload,
        "quota_key": r.quota_key,
        "cost": r.cost,
        "send_at": r.send_at_ms,
        "max_attempts": r.max_attempts,
    });
    Sha256::digest(canonical.to_string().as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_does_not_matter_and_content_does() {
        let a: Value = serde_json::from_str(r#"{"subject":"hi","text":"x"}"#).unwrap_or_default();
        let b: Value =
            serde_json::from_str(r#"{ "text": "x", "subject": "hi" }"#).unwrap_or_default();
        let c: Value = serde_json::from_str(r#"{"subject":"hi","text":"y"}"#).unwrap_or_default();
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
    }
}
