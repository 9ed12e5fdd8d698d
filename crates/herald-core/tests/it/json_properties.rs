//! Properties of herald's JSON rules: no input makes the parser panic, the canonical form
//! is a fixed point, and writing a value differently (whitespace, key order, number
//! notation, escapes) never changes it.

use herald_core::json::{self, Value};
use proptest::prelude::*;

/// A JSON value as a tree of texts, each written in one of several equivalent ways.
#[derive(Debug, Clone)]
enum Doc {
    Literal(&'static str),
    Number { digits: String, point: usize, negative: bool },
    Text(String),
    Array(Vec<Doc>),
    Object(Vec<(String, Doc)>),
}

fn doc() -> impl Strategy<Value = Doc> {
    let leaf = prop_oneof![
        prop_oneof![Just("null"), Just("true"), Just("false")].prop_map(Doc::Literal),
        ("[0-9]{1,20}", 0usize..20, any::<bool>()).prop_map(|(digits, point, negative)| {
            let point = point.min(digits.len());
            Doc::Number { digits, point, negative }
        }),
        "\\PC{0,8}".prop_map(Doc::Text),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Doc::Array),
            prop::collection::btree_map("[a-z\u{e9}\u{1F600}]{0,4}", inner, 0..5)
                .prop_map(|m| Doc::Object(m.into_iter().collect())),
        ]
    })
}

/// `doc` as text; `style` picks whitespace, key order, number notation and escapes.
fn write(doc: &Doc, style: u64, out: &mut String) {
    let space = if style & 1 == 1 { " \n\t" } else { "" };
    match doc {
        Doc::Literal(l) => out.push_str(l),
        Doc::Number { digits, point, negative } => {
            if *negative {
                out.push('-');
            }
            let digits = digits.trim_start_matches('0');
            let digits = if digits.is_empty() { "0" } else { digits };
            let point = (*point).min(digits.len());
            if style & 2 == 2 {
                // d.ddd e±n, with trailing zeros: the same value.
                out.push_str(&digits[..1]);
                out.push('.');
                out.push_str(&digits[1..]);
                out.push_str("00");
                let exp = digits.len() as i64 - 1 - point as i64;
                out.push_str(&format!("e{exp}"));
            } else {
                let (int, frac) = digits.split_at(digits.len() - point);
                out.push_str(if int.is_empty() { "0" } else { int });
                if !frac.is_empty() {
                    out.push('.');
                    out.push_str(frac);
                }
            }
        }
        Doc::Text(s) => {
            out.push('"');
            for c in s.chars() {
                match c {
                    '"' => out.push_str("\\\""),
                    '\\' => out.push_str("\\\\"),
                    c if (c as u32) < 0x20 || style & 4 == 4 => {
                        let mut units = [0u16; 2];
                        for unit in c.encode_utf16(&mut units) {
                            out.push_str(&format!("\\u{unit:04X}"));
                        }
                    }
                    c => out.push(c),
                }
            }
            out.push('"');
        }
        Doc::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(space);
                write(item, style, out);
            }
            out.push(']');
        }
        Doc::Object(members) => {
            let mut members: Vec<&(String, Doc)> = members.iter().collect();
            if style & 8 == 8 {
                members.reverse();
            }
            out.push('{');
            for (i, (key, value)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(space);
                write(&Doc::Text(key.clone()), style, out);
                out.push_str(space);
                out.push(':');
                write(value, style, out);
            }
            out.push('}');
        }
    }
}

fn canonical(text: &str) -> String {
    json::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}")).to_string()
}

proptest! {
    #[test]
    fn no_input_makes_the_parser_panic(text in "\\PC{0,64}|[\\[\\]{}\",:0-9eE.+\\-\\\\u ]{0,64}") {
        let _ = json::parse(&text);
    }

    #[test]
    fn every_way_of_writing_a_value_has_one_canonical_form(doc in doc(), style in 0u64..16) {
        let mut plain = String::new();
        write(&doc, 0, &mut plain);
        let mut styled = String::new();
        write(&doc, style, &mut styled);
        let canonical_plain = canonical(&plain);
        prop_assert_eq!(&canonical(&styled), &canonical_plain, "{} vs {}", plain, styled);
        // A fixed point, and JSON that another parser reads too.
        prop_assert_eq!(&canonical(&canonical_plain), &canonical_plain);
        prop_assert!(serde_json::from_str::<serde_json::Value>(&canonical_plain).is_ok());
    }

    #[test]
    fn objects_are_sorted_by_utf8_bytes(keys in prop::collection::btree_set("\\PC{0,4}", 0..6)) {
        let text = format!(
            "{{{}}}",
            keys.iter().rev().map(|k| format!("{}:1", Value::String(k.clone()))).collect::<Vec<_>>().join(",")
        );
        let Value::Object(members) = json::parse(&canonical(&text)).unwrap() else {
            panic!("not an object");
        };
        let got: Vec<&[u8]> = members.iter().map(|(k, _)| k.as_bytes()).collect();
        let mut want = got.clone();
        want.sort();
        prop_assert_eq!(got, want);
    }
}

proptest! {
    /// Fingerprint version 1 reproduces serde_json (default features, which this build
    /// has: `vectors::version_1_is_what_serde_json_printed` asserts it) on any value, in
    /// any notation: its float parser is not correctly rounded, and version 1 must round
    /// the same way.
    #[test]
    fn version_1_matches_serde_json_on_any_value(doc in doc(), style in 0u64..16) {
        use herald_core::fingerprint::{Resolved, fingerprint_in};
        let mut text = String::new();
        write(&doc, style, &mut text);
        let theirs: serde_json::Value = serde_json::from_str(&text).unwrap();
        let ours = json::parse(&text).unwrap();
        let r = Resolved {
            channel: "webhook",
            to: "https://example.com/h",
            payload: &ours,
            quota_key: "webhook",
            cost: 1,
            send_at_ms: None,
            max_attempts: 8,
        };
        // Sorted as serde_json's default features keep objects (see vectors.rs).
        let mut printed = serde_json::json!({
            "channel": r.channel, "to": r.to, "payload": theirs, "quota_key": r.quota_key,
            "cost": r.cost, "send_at": r.send_at_ms, "max_attempts": r.max_attempts,
        });
        printed.sort_all_objects();
        let printed = printed.to_string();
        let want: [u8; 32] = <sha2::Sha256 as sha2::Digest>::digest(printed.as_bytes()).into();
        prop_assert_eq!(fingerprint_in(1, &r), Some(want), "{} printed as {}", text, printed);
    }
}
