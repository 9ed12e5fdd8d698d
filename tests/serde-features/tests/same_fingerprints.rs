//! herald with serde_json's `preserve_order` and `arbitrary_precision` on: the golden
//! vectors hold, and submits through the library answer as they do in herald's own build.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use herald::fingerprint::{self, Resolved};
use herald::{Herald, Payload, SubmitRequest, json};

const VECTORS: &str = include_str!("../../../testdata/fingerprint-vectors.json");

#[test]
fn this_build_has_both_features() {
    // preserve_order keeps insertion order; arbitrary_precision keeps every digit.
    let v: serde_json::Value =
        serde_json::from_str(r#"{"b":1,"a":18446744073709551616.0000}"#).unwrap();
    assert_eq!(v.to_string(), r#"{"b":1,"a":18446744073709551616.0000}"#);
}

#[test]
fn the_golden_vectors_hold_with_the_features_on() {
    let file: serde_json::Value = serde_json::from_str(VECTORS).unwrap();
    let cases = file["cases"].as_array().unwrap();
    assert!(cases.len() >= 200);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let r = &case["request"];
        let got = match json::parse(case["payload"].as_str().unwrap()) {
            Err(e) => Err(e.problem.code().to_string()),
            Ok(payload) => {
                let resolved = Resolved {
                    channel: r["channel"].as_str().unwrap(),
                    to: r["to"].as_str().unwrap(),
                    payload: &payload,
                    quota_key: r["quota_key"].as_str().unwrap(),
                    cost: r["cost"].as_i64().unwrap(),
                    send_at_ms: r["send_at"].as_i64(),
                    max_attempts: r["max_attempts"].as_u64().unwrap() as u32,
                };
                let hash: String = fingerprint::fingerprint(&resolved)
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                Ok((fingerprint::canonical(&resolved), hash))
            }
        };
        let want = match case["invalid"].as_str() {
            Some(code) => Err(code.to_string()),
            None => Ok((
                case["canonical"].as_str().unwrap().to_string(),
                case["sha256"].as_str().unwrap().to_string(),
            )),
        };
        assert_eq!(got, want, "{name}");
    }
}

/// Through the library on a real SQLite file: the same meaning from text and from a
/// `serde_json::Value` (which this build keeps in insertion order, digits intact) is a
/// duplicate, and `0.3` against `0.30000000000000001` is a reuse.
#[tokio::test]
async fn submits_answer_as_in_herald_s_own_build() {
    let dir = tempfile::tempdir().unwrap();
    let herald = Herald::open(dir.path().join("herald.db").to_str().unwrap()).await.unwrap();
    let tenant = herald.tenant_create("acme").await.unwrap().id;
    herald.quota_grant(tenant, "ledger", 10, None).await.unwrap();
    let request =
        |payload: Payload| SubmitRequest::new(tenant, "evt-1", "ledger", "acct:42", payload);
    let text = r#"{"n": 18446744073709551616, "amount": 0.30000000000000001}"#;
    let first = herald.submit_alone(&request(Payload::from_text(text))).await.unwrap();
    assert!(!first.duplicate);
    let value: serde_json::Value =
        serde_json::from_str(r#"{"amount":0.300000000000000010,"n":18446744073709551616}"#)
            .unwrap();
    let again = herald.submit_alone(&request(Payload::from(value))).await.unwrap();
    assert!(again.duplicate, "{again:?}");
    let rounded = herald
        .submit_alone(&request(Payload::from_text(r#"{"n": 18446744073709551616, "amount": 0.3}"#)))
        .await;
    assert!(matches!(rounded, Err(herald::Error::IdempotencyKeyReused)), "{rounded:?}");
}
