//! The golden vectors of fingerprint version 2 (`testdata/fingerprint-vectors.json`,
//! written by `scripts/fingerprint-vectors`, a second implementation in Python) against
//! the Rust one; and fingerprint version 1 against the serde_json it reproduces.

use herald_core::fingerprint::{self, FINGERPRINT_VERSION, Resolved};
use herald_core::json;
use serde_json::Value;

const VECTORS: &str = include_str!("../../../../testdata/fingerprint-vectors.json");

struct Case {
    name: String,
    request: Value,
    payload: String,
    expected: Result<(String, String), String>,
}

fn cases() -> Vec<Case> {
    // The file is read with serde_json, which only has to get strings and small integers
    // right: the payloads are JSON text inside strings.
    let file: Value = serde_json::from_str(VECTORS).expect("the vectors are JSON");
    assert_eq!(file["version"], i64::from(FINGERPRINT_VERSION));
    let text = |v: &Value, k: &str| v[k].as_str().map(str::to_string);
    file["cases"]
        .as_array()
        .expect("cases")
        .iter()
        .map(|c| Case {
            name: text(c, "name").expect("name"),
            request: c["request"].clone(),
            payload: text(c, "payload").expect("payload"),
            expected: match text(c, "invalid") {
                Some(code) => Err(code),
                None => Ok((
                    text(c, "canonical").expect("canonical"),
                    text(c, "sha256").expect("sha256"),
                )),
            },
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The request of a case with `payload` parsed, or the problem's code.
fn resolved<'a>(case: &'a Case, payload: &'a json::Value) -> Resolved<'a> {
    let r = &case.request;
    Resolved {
        channel: r["channel"].as_str().expect("channel"),
        to: r["to"].as_str().expect("to"),
        payload,
        quota_key: r["quota_key"].as_str().expect("quota_key"),
        cost: r["cost"].as_i64().expect("cost"),
        send_at_ms: r["send_at"].as_i64(),
        max_attempts: r["max_attempts"].as_u64().expect("max_attempts") as u32,
    }
}

#[test]
fn the_golden_vectors_hold() {
    let cases = cases();
    assert!(cases.len() >= 200, "only {} vectors", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let got = match json::parse(&case.payload) {
            Ok(payload) => {
                let r = resolved(case, &payload);
                let canonical = fingerprint::canonical(&r);
                let hash = hex(&fingerprint::fingerprint(&r));
                assert_eq!(
                    hex(&herald_core::fingerprint::fingerprint_in(FINGERPRINT_VERSION, &r)
                        .unwrap_or_default()),
                    hash
                );
                Ok((canonical, hash))
            }
            Err(e) => Err(e.problem.code().to_string()),
        };
        if got != case.expected {
            failures.push(format!("{}: expected {:?}, got {:?}", case.name, case.expected, got));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} vectors fail:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// Version 1 is serde_json 1.0.154's text with default features, reproduced without it.
/// Checked here against serde_json itself, its objects sorted as its default features keep
/// them: a workspace build may have `preserve_order` on (herald-audit's PHP parser turns it
/// on through schemars), which changes only the order of a map's keys. `arbitrary_precision`
/// would change how numbers print: asserted off first.
#[test]
fn version_1_is_what_serde_json_printed() {
    let mut probe: Value =
        serde_json::from_str(r#"{"b":1,"a":18446744073709551616}"#).expect("probe");
    probe.sort_all_objects();
    assert_eq!(
        probe.to_string(),
        r#"{"a":1.8446744073709552e+19,"b":1}"#,
        "serde_json's number printing (no arbitrary_precision)"
    );
    let mut texts: Vec<String> =
        cases().into_iter().filter(|c| c.expected.is_ok()).map(|c| c.payload).collect();
    texts.extend(
        [
            "-0",
            "-0.0",
            "1e2",
            "1E-7",
            "1e21",
            "1e300",
            "1e-300",
            "5e-324",
            "1e-400",
            "0.1",
            "2.5e-5",
            "123456789012345678901.5",
            "12345678901234567890123",
            "1844674407370955161.5",
            "18446744073709551616.25",
            "-9223372036854775808",
            "-9223372036854775809",
            "9007199254740993",
            "0.30000000000000001",
            "3.141592653589793238462643383279",
            "1.7976931348623157e308",
            "4.9406564584124654e-324",
            "0.000000000000000000000000000001",
            "99999999999999999999999999999999999",
            "1e-99999999999",
            r#"{"k":[1,-1,1.5,-1.5,1e5,1e-5,0]}"#,
            r#"["\u0000x"]"#,
        ]
        .map(str::to_string),
    );
    for text in &texts {
        let Ok(theirs) = serde_json::from_str::<Value>(text) else { continue };
        // `\u0000` is refused by herald's parser: version 1 is only compared for requests
        // version 2 accepts.
        let Ok(ours) = json::parse(text) else { continue };
        let r = Resolved {
            channel: "webhook",
            to: "https://example.com/\n\"x\"",
            payload: &ours,
            quota_key: "q\u{1}",
            cost: 3,
            send_at_ms: Some(1_796_169_600_000),
            max_attempts: 12,
        };
        let mut printed = serde_json::json!({
            "channel": r.channel, "to": r.to, "payload": theirs, "quota_key": r.quota_key,
            "cost": r.cost, "send_at": r.send_at_ms, "max_attempts": r.max_attempts,
        });
        printed.sort_all_objects();
        let printed = printed.to_string();
        let want: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(printed.as_bytes()).into();
        assert_eq!(
            fingerprint::fingerprint_in(1, &r).map(|h| hex(&h)),
            Some(hex(&want)),
            "{text} printed as {printed}"
        );
    }
}
