//! JSON as herald reads it: RFC 8259 text parsed by herald's own code, so what a request
//! means (and so its fingerprint) never depends on which features of serde_json a
//! program's dependency graph enables.
//!
//! Stricter than RFC 8259 where the fingerprint needs it, identically on every face:
//! a duplicate key, `\u0000` (a NUL cannot be stored in PostgreSQL text) and a lone
//! surrogate are invalid; a number whose exact value needs more than
//! [`NUMBER_INTEGER_DIGITS_MAX`] integer or [`NUMBER_FRACTION_DIGITS_MAX`] fraction digits
//! is invalid (the most MariaDB's `DECIMAL(65,30)` holds, so the SQL API can compute the
//! same form); nesting deeper than [`JSON_DEPTH_MAX`] is invalid (MariaDB's JSON functions
//! read 31 levels, and no recursion here can run out of stack). [`write_canonical`] writes
//! the canonical form of ARCHITECTURE.md ("The fingerprint").

use crate::limits::{JSON_DEPTH_MAX, NUMBER_FRACTION_DIGITS_MAX, NUMBER_INTEGER_DIGITS_MAX};
use std::collections::HashSet;
use std::fmt;

/// A parsed JSON value. Objects keep their members in the order written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Null,
    Bool(bool),
    Number(Number),
    String(String),
    Array(Vec<Value>),
    Object(Vec<(String, Value)>),
}

/// A number: as written, and as its exact value in canonical notation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Number {
    literal: String,
    canonical: String,
}

impl Number {
    /// The text as it appeared in the input (`1.50e1`).
    pub fn literal(&self) -> &str {
        &self.literal
    }

    /// The exact value in plain notation (`15`): no exponent, no leading zeros, no
    /// trailing fraction zeros, no `-0`.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }
}

/// Why a text is not JSON herald accepts, and where (a byte offset into the text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{problem} at byte {at}")]
pub struct JsonError {
    pub at: usize,
    pub problem: Problem,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    #[error("the text ends in the middle of a value")]
    UnexpectedEnd,
    #[error("unexpected {0:?}")]
    Unexpected(char),
    #[error("text after the value")]
    TrailingText,
    #[error("duplicate key {0:?}")]
    DuplicateKey(String),
    #[error("the NUL character (\\u0000) is not allowed")]
    Nul,
    #[error("a control character must be escaped inside a string")]
    ControlCharacter,
    #[error("a lone surrogate (\\u{0:04x}) is not a character")]
    LoneSurrogate(u16),
    #[error("an invalid escape sequence")]
    InvalidEscape,
    #[error("an invalid number")]
    InvalidNumber,
    #[error("a number whose exact value has more than {NUMBER_INTEGER_DIGITS_MAX} integer digits")]
    NumberTooLarge,
    #[error(
        "a number whose exact value has more than {NUMBER_FRACTION_DIGITS_MAX} fraction digits"
    )]
    NumberTooPrecise,
    #[error("nesting deeper than {JSON_DEPTH_MAX} arrays and objects")]
    TooDeep,
}

impl Problem {
    /// A stable name for the problem (the golden vectors' `invalid`, the SQL API's).
    pub fn code(&self) -> &'static str {
        match self {
            Problem::UnexpectedEnd
            | Problem::Unexpected(_)
            | Problem::TrailingText
            | Problem::InvalidEscape
            | Problem::InvalidNumber => "syntax",
            Problem::DuplicateKey(_) => "duplicate_key",
            Problem::Nul => "nul",
            Problem::ControlCharacter => "control_character",
            Problem::LoneSurrogate(_) => "lone_surrogate",
            Problem::NumberTooLarge => "number_too_large",
            Problem::NumberTooPrecise => "number_too_precise",
            Problem::TooDeep => "too_deep",
        }
    }
}

/// Parses one JSON text (surrounding whitespace allowed).
pub fn parse(text: &str) -> Result<Value, JsonError> {
    let mut p = Parser { text, bytes: text.as_bytes(), at: 0 };
    p.skip_whitespace();
    let value = p.value(0)?;
    p.skip_whitespace();
    if p.at < p.bytes.len() {
        return Err(p.error(Problem::TrailingText));
    }
    Ok(value)
}

struct Parser<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn error(&self, problem: Problem) -> JsonError {
        JsonError { at: self.at, problem }
    }

    fn unexpected(&self) -> JsonError {
        match self.text[self.at..].chars().next() {
            Some(c) => self.error(Problem::Unexpected(c)),
            None => self.error(Problem::UnexpectedEnd),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), JsonError> {
        if self.peek() == Some(byte) {
            self.at += 1;
            Ok(())
        } else {
            Err(self.unexpected())
        }
    }

    /// A value; `depth` counts the arrays and objects around it.
    fn value(&mut self, depth: usize) -> Result<Value, JsonError> {
        match self.peek() {
            None => Err(self.error(Problem::UnexpectedEnd)),
            Some(b'{') => self.object(depth + 1),
            Some(b'[') => self.array(depth + 1),
            Some(b'"') => Ok(Value::String(self.string()?)),
            Some(b'-' | b'0'..=b'9') => Ok(Value::Number(self.number()?)),
            Some(b't') => self.word("true", Value::Bool(true)),
            Some(b'f') => self.word("false", Value::Bool(false)),
            Some(b'n') => self.word("null", Value::Null),
            Some(_) => Err(self.unexpected()),
        }
    }

    fn word(&mut self, word: &str, value: Value) -> Result<Value, JsonError> {
        for &b in word.as_bytes() {
            if self.peek() != Some(b) {
                return Err(self.unexpected());
            }
            self.at += 1;
        }
        Ok(value)
    }

    fn array(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > JSON_DEPTH_MAX {
            return Err(self.error(Problem::TooDeep));
        }
        self.at += 1;
        let mut items = Vec::new();
        self.skip_whitespace();
        if self.peek() == Some(b']') {
            self.at += 1;
            return Ok(Value::Array(items));
        }
        loop {
            self.skip_whitespace();
            items.push(self.value(depth)?);
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b']') => {
                    self.at += 1;
                    return Ok(Value::Array(items));
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    fn object(&mut self, depth: usize) -> Result<Value, JsonError> {
        if depth > JSON_DEPTH_MAX {
            return Err(self.error(Problem::TooDeep));
        }
        self.at += 1;
        let mut members: Vec<(String, Value)> = Vec::new();
        let mut keys = HashSet::new();
        self.skip_whitespace();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Ok(Value::Object(members));
        }
        loop {
            self.skip_whitespace();
            let key_at = self.at;
            if self.peek() != Some(b'"') {
                return Err(self.unexpected());
            }
            let key = self.string()?;
            if !keys.insert(key.clone()) {
                return Err(JsonError { at: key_at, problem: Problem::DuplicateKey(key) });
            }
            self.skip_whitespace();
            self.expect(b':')?;
            self.skip_whitespace();
            let value = self.value(depth)?;
            members.push((key, value));
            self.skip_whitespace();
            match self.peek() {
                Some(b',') => self.at += 1,
                Some(b'}') => {
                    self.at += 1;
                    return Ok(Value::Object(members));
                }
                _ => return Err(self.unexpected()),
            }
        }
    }

    /// A string literal, its escapes decoded. The opening quote is at `self.at`.
    fn string(&mut self) -> Result<String, JsonError> {
        self.at += 1;
        let mut out = String::new();
        loop {
            let start = self.at;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.at += 1;
            }
            // Only ASCII bytes stop the scan, so both ends are character boundaries.
            out.push_str(&self.text[start..self.at]);
            match self.peek() {
                None => return Err(self.error(Problem::UnexpectedEnd)),
                Some(b'"') => {
                    self.at += 1;
                    return Ok(out);
                }
                Some(0) => return Err(self.error(Problem::Nul)),
                Some(b'\\') => out.push(self.escape()?),
                Some(_) => return Err(self.error(Problem::ControlCharacter)),
            }
        }
    }

    /// One escape sequence; the backslash is at `self.at`.
    fn escape(&mut self) -> Result<char, JsonError> {
        let start = self.at;
        self.at += 1;
        let c = match self.peek() {
            None => return Err(self.error(Problem::UnexpectedEnd)),
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.at += 1;
                let unit = self.hex4()?;
                return self.code_point(start, unit);
            }
            Some(_) => return Err(self.error(Problem::InvalidEscape)),
        };
        self.at += 1;
        Ok(c)
    }

    /// The character a `\uXXXX` escape (and for a high surrogate, the `\uXXXX` after
    /// it) stands for.
    fn code_point(&mut self, start: usize, unit: u16) -> Result<char, JsonError> {
        let lone = |unit| JsonError { at: start, problem: Problem::LoneSurrogate(unit) };
        let c = match unit {
            0 => return Err(JsonError { at: start, problem: Problem::Nul }),
            0xd800..=0xdbff => {
                if self.bytes.get(self.at..self.at + 2) != Some(b"\\u") {
                    return Err(lone(unit));
                }
                self.at += 2;
                let low = self.hex4()?;
                if !(0xdc00..=0xdfff).contains(&low) {
                    return Err(lone(unit));
                }
                0x10000 + ((u32::from(unit) - 0xd800) << 10) + (u32::from(low) - 0xdc00)
            }
            0xdc00..=0xdfff => return Err(lone(unit)),
            _ => u32::from(unit),
        };
        char::from_u32(c).ok_or_else(|| lone(unit))
    }

    fn hex4(&mut self) -> Result<u16, JsonError> {
        let mut unit = 0u16;
        for _ in 0..4 {
            let digit = match self.peek() {
                Some(b @ b'0'..=b'9') => b - b'0',
                Some(b @ b'a'..=b'f') => b - b'a' + 10,
                Some(b @ b'A'..=b'F') => b - b'A' + 10,
                None => return Err(self.error(Problem::UnexpectedEnd)),
                Some(_) => return Err(self.error(Problem::InvalidEscape)),
            };
            unit = unit * 16 + u16::from(digit);
            self.at += 1;
        }
        Ok(unit)
    }

    fn digits(&mut self) -> &str {
        let start = self.at;
        while let Some(b'0'..=b'9') = self.peek() {
            self.at += 1;
        }
        &self.text[start..self.at]
    }

    fn number(&mut self) -> Result<Number, JsonError> {
        let start = self.at;
        let negative = self.peek() == Some(b'-');
        if negative {
            self.at += 1;
        }
        let int = self.digits().to_string();
        if int.is_empty() || (int.len() > 1 && int.starts_with('0')) {
            return Err(JsonError { at: start, problem: Problem::InvalidNumber });
        }
        let mut frac = String::new();
        if self.peek() == Some(b'.') {
            self.at += 1;
            frac = self.digits().to_string();
            if frac.is_empty() {
                return Err(self.error(Problem::InvalidNumber));
            }
        }
        let mut exponent: i64 = 0;
        if let Some(b'e' | b'E') = self.peek() {
            self.at += 1;
            let negative_exponent = match self.peek() {
                Some(b'-') => {
                    self.at += 1;
                    true
                }
                Some(b'+') => {
                    self.at += 1;
                    false
                }
                _ => false,
            };
            let digits = self.digits();
            if digits.is_empty() {
                return Err(self.error(Problem::InvalidNumber));
            }
            // Saturates far beyond any exponent a number within the limits can have.
            exponent = digits
                .bytes()
                .fold(0i64, |e, d| (e * 10 + i64::from(d - b'0')).min(EXPONENT_SATURATED));
            if negative_exponent {
                exponent = -exponent;
            }
        }
        let literal = self.text[start..self.at].to_string();
        let canonical = canonical_number(negative, &int, &frac, exponent)
            .map_err(|problem| JsonError { at: start, problem })?;
        Ok(Number { literal, canonical })
    }
}

/// Exponents are clamped here: beyond any that `int` and `frac` of a text within
/// `PAYLOAD_BYTES_MAX` could bring back within the digit limits.
const EXPONENT_SATURATED: i64 = 1 << 40;

/// The exact value of `-?int.frac e exponent` in plain notation, within the digit limits.
fn canonical_number(
    negative: bool,
    int: &str,
    frac: &str,
    exponent: i64,
) -> Result<String, Problem> {
    let all = format!("{int}{frac}");
    // The decimal point sits `point` digits into `all`.
    let mut point = int.len() as i64 + exponent;
    let leading = all.bytes().take_while(|&b| b == b'0').count();
    let digits = all[leading..].trim_end_matches('0');
    if digits.is_empty() {
        return Ok("0".to_string());
    }
    point -= leading as i64;
    let len = digits.len() as i64;
    let integer_digits = point.max(0);
    let fraction_digits = (len - point).max(0);
    if integer_digits > NUMBER_INTEGER_DIGITS_MAX as i64 {
        return Err(Problem::NumberTooLarge);
    }
    if fraction_digits > NUMBER_FRACTION_DIGITS_MAX as i64 {
        return Err(Problem::NumberTooPrecise);
    }
    let mut out = String::with_capacity(digits.len() + 40);
    if negative {
        out.push('-');
    }
    if point >= len {
        out.push_str(digits);
        out.extend(std::iter::repeat_n('0', (point - len) as usize));
    } else if point <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-point) as usize));
        out.push_str(digits);
    } else {
        out.push_str(&digits[..point as usize]);
        out.push('.');
        out.push_str(&digits[point as usize..]);
    }
    Ok(out)
}

/// Appends the canonical form of `value`: no whitespace, object members sorted by key as
/// UTF-8 bytes, strings with only `"`, `\` and U+0001–U+001F escaped, numbers canonical.
pub fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => out.push_str(&n.canonical),
        Value::String(s) => write_canonical_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(members) => {
            let mut sorted: Vec<&(String, Value)> = members.iter().collect();
            // `str`'s order is the order of its UTF-8 bytes.
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            out.push('{');
            for (i, (key, value)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical_string(key, out);
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
    }
}

/// A string in canonical form: raw UTF-8, with `\"`, `\\` and lowercase `\u00xx` for
/// U+0001–U+001F (no short forms such as `\n`).
pub fn write_canonical_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{1}'..='\u{1f}' => {
                out.push_str("\\u00");
                out.push(HEX[(c as usize) >> 4]);
                out.push(HEX[(c as usize) & 0xf]);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

const HEX: [char; 16] =
    ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'];

impl fmt::Display for Value {
    /// The canonical form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        write_canonical(self, &mut out);
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> Result<String, Problem> {
        parse(text).map(|v| v.to_string()).map_err(|e| e.problem)
    }

    #[test]
    fn numbers_keep_their_exact_value() {
        for (text, want) in [
            ("1", "1"),
            ("1.0", "1"),
            ("1e0", "1"),
            ("10E-1", "1"),
            ("-0", "0"),
            ("-0.0e5", "0"),
            ("0.30000000000000001", "0.30000000000000001"),
            ("18446744073709551616", "18446744073709551616"),
            ("1.5e1", "15"),
            ("-12.3400e-3", "-0.01234"),
            ("1e34", "10000000000000000000000000000000000"),
            ("1e-30", "0.000000000000000000000000000001"),
            ("0e99999999999999999999", "0"),
        ] {
            assert_eq!(canonical(text).as_deref(), Ok(want), "{text}");
        }
        assert_eq!(canonical("1e35"), Err(Problem::NumberTooLarge));
        assert_eq!(canonical("1e-31"), Err(Problem::NumberTooPrecise));
        assert_eq!(canonical("1e99999999999999999999"), Err(Problem::NumberTooLarge));
        for bad in ["01", "1.", ".5", "-", "1e", "+1", "0x10", "NaN", "Infinity", "1.e5"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn strings_and_objects() {
        assert_eq!(
            canonical(r#"{"b":1,"a":"\u00e9\n\/"}"#).as_deref(),
            Ok("{\"a\":\"é\\u000a/\",\"b\":1}")
        );
        assert_eq!(canonical(r#""\ud83d\ude00""#).as_deref(), Ok("\"😀\""));
        assert_eq!(canonical(r#"{"a":1,"a":1}"#), Err(Problem::DuplicateKey("a".into())));
        assert_eq!(canonical(r#""\u0000""#), Err(Problem::Nul));
        assert_eq!(canonical(r#""\ud800""#), Err(Problem::LoneSurrogate(0xd800)));
        assert_eq!(canonical(r#""\udc00x""#), Err(Problem::LoneSurrogate(0xdc00)));
        assert_eq!(canonical("\"a\u{1}\""), Err(Problem::ControlCharacter));
        let deep = |n| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(&deep(JSON_DEPTH_MAX)).is_ok());
        assert_eq!(canonical(&deep(JSON_DEPTH_MAX + 1)), Err(Problem::TooDeep));
        assert_eq!(canonical(&deep(100_000)), Err(Problem::TooDeep));
    }
}
