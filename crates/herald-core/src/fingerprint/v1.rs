//! Fingerprint version 1, for rows written before version 2 existed: SHA-256 of what
//! serde_json 1.0.154 with its default features printed for the resolved request — keys
//! sorted, its short escapes, integers that fit a `u64` or `i64` as written and every
//! other number through its default ("best effort", not correctly rounded) float parser
//! and `zmij`'s shortest float notation.
//!
//! Reproduced here step for step, so an old row is compared the way it was written
//! whatever features serde_json has in this build. Only ever compared, never written.

use super::Resolved;
use crate::json::Value;
use sha2::{Digest, Sha256};

/// The version-1 fingerprint, or `None` when serde_json would have refused the request
/// (a number beyond `f64`), which therefore cannot match any stored row.
pub(super) fn fingerprint(r: &Resolved<'_>) -> Option<[u8; 32]> {
    let text = super::envelope(r, string, value)?;
    Some(Sha256::digest(text.as_bytes()).into())
}

fn value(v: &Value, out: &mut String) -> Option<()> {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&number(n.literal())?),
        Value::String(s) => string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                value(item, out)?;
            }
            out.push(']');
        }
        Value::Object(members) => {
            // serde_json's map without `preserve_order` is a BTreeMap<String, _>.
            let mut sorted: Vec<&(String, Value)> = members.iter().collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            out.push('{');
            for (i, (key, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                string(key, out);
                out.push(':');
                value(item, out)?;
            }
            out.push('}');
        }
    }
    Some(())
}

/// serde_json's string escapes: the short forms where JSON has one, `\u00xx` otherwise.
fn string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '\u{0}'..='\u{1f}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// What serde_json printed for a number it parsed from `literal` (valid JSON number).
fn number(literal: &str) -> Option<String> {
    let b = literal.as_bytes();
    let mut i = 0;
    let positive = b.first() != Some(&b'-');
    if !positive {
        i += 1;
    }
    let digit = |i: usize| b.get(i).filter(|c| c.is_ascii_digit()).map(|c| u64::from(c - b'0'));
    // The integer part, as serde_json's `parse_integer` and `parse_long_integer`.
    let mut significand: u64 = 0;
    let mut exponent: i32 = 0;
    let mut overflowed = false;
    while let Some(d) = digit(i) {
        if overflowed || overflows(significand, d) {
            overflowed = true;
            exponent += 1;
        } else {
            significand = significand * 10 + d;
        }
        i += 1;
    }
    let fraction = b.get(i) == Some(&b'.');
    let has_exponent = matches!(b.get(i), Some(b'e' | b'E'));
    if !overflowed && !fraction && !has_exponent {
        if positive {
            return Some(significand.to_string());
        }
        let negated = (significand as i64).wrapping_neg();
        return Some(if negated >= 0 { float(-(significand as f64)) } else { negated.to_string() });
    }
    if fraction {
        // `parse_decimal`: digits join the significand until one would overflow it, and
        // every later digit is dropped (`parse_decimal_overflow`).
        i += 1;
        let mut dropping = false;
        while let Some(d) = digit(i) {
            if !dropping && overflows(significand, d) {
                dropping = true;
            }
            if !dropping {
                significand = significand * 10 + d;
                exponent -= 1;
            }
            i += 1;
        }
    }
    if let Some(b'e' | b'E') = b.get(i) {
        // `parse_exponent`.
        i += 1;
        let positive_exp = match b.get(i) {
            Some(b'-') => {
                i += 1;
                false
            }
            Some(b'+') => {
                i += 1;
                true
            }
            _ => true,
        };
        let mut exp: i32 = 0;
        while let Some(d) = digit(i) {
            let d = d as i32;
            if exp >= i32::MAX / 10 && (exp > i32::MAX / 10 || d > i32::MAX % 10) {
                // `parse_exponent_overflow`: an error towards infinity, zero otherwise.
                if significand != 0 && positive_exp {
                    return None;
                }
                return Some(float(if positive { 0.0 } else { -0.0 }));
            }
            exp = exp * 10 + d;
            i += 1;
        }
        exponent =
            if positive_exp { exponent.saturating_add(exp) } else { exponent.saturating_sub(exp) };
    }
    from_parts(positive, significand, exponent).map(float)
}

/// serde_json's `overflow!(significand * 10 + digit, u64::MAX)`.
fn overflows(significand: u64, digit: u64) -> bool {
    significand >= u64::MAX / 10 && (significand > u64::MAX / 10 || digit > u64::MAX % 10)
}

/// serde_json's `f64_from_parts` without `float_roundtrip`: one multiplication or
/// division by a power of ten from its table (`1e0` to `1e308`).
fn from_parts(positive: bool, significand: u64, mut exponent: i32) -> Option<f64> {
    let mut f = significand as f64;
    loop {
        let abs = exponent.unsigned_abs();
        if abs <= 308 {
            let pow: f64 = format!("1e{abs}").parse().ok()?;
            if exponent >= 0 {
                f *= pow;
                if f.is_infinite() {
                    return None;
                }
            } else {
                f /= pow;
            }
            break;
        }
        if f == 0.0 {
            break;
        }
        if exponent >= 0 {
            return None;
        }
        f /= 1e308;
        exponent += 308;
    }
    Some(if positive { f } else { -f })
}

fn float(f: f64) -> String {
    zmij::Buffer::new().format_finite(f).to_string()
}
