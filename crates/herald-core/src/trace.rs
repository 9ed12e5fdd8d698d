//! W3C Trace Context's `traceparent`: the one field herald carries from a submit to each
//! attempt of its delivery, so that an operator's tracing system shows the attempts under
//! the request that caused them.
//!
//! Read as the Recommendation says (<https://www.w3.org/TR/trace-context/#traceparent-header>):
//! version `00` is exactly 55 characters; a later version may be longer, its first 55
//! characters read as `00`'s, the next one a `-`; version `ff`, upper-case hex, and an
//! all-zero trace or parent id are invalid. An invalid value is ignored (a new trace
//! starts), never an error: a caller's tracing never fails its submit.

use std::fmt;

/// A valid `traceparent` is this long in version `00`, and its prefix this long in any.
pub const TRACEPARENT_LEN: usize = 55;

/// A parsed `traceparent`: the trace, the caller's span in it, and its flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub span_id: [u8; 8],
    pub flags: u8,
}

impl TraceParent {
    /// The header's value read, or `None` when it is not a valid one.
    pub fn parse(text: &str) -> Option<TraceParent> {
        let text = text.trim_matches([' ', '\t']);
        let bytes = text.as_bytes();
        if bytes.len() < TRACEPARENT_LEN {
            return None;
        }
        let version = hex::<1>(&bytes[0..2])?[0];
        let longer_ok = version != 0 && bytes.get(TRACEPARENT_LEN).is_none_or(|b| *b == b'-');
        if version == 0xff || (bytes.len() != TRACEPARENT_LEN && !longer_ok) {
            return None;
        }
        if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let trace_id = hex::<16>(&bytes[3..35])?;
        let span_id = hex::<8>(&bytes[36..52])?;
        let flags = hex::<1>(&bytes[53..55])?[0];
        if trace_id == [0; 16] || span_id == [0; 8] {
            return None;
        }
        Some(TraceParent { trace_id, span_id, flags })
    }

    /// Whether the caller recorded its span (flag `01`): spans under it are recorded too.
    pub fn sampled(&self) -> bool {
        self.flags & 1 == 1
    }

    /// The trace id as 32 lower-case hex digits.
    pub fn trace_hex(&self) -> String {
        crate::ident::hex(&self.trace_id)
    }
}

/// Always version `00`, whatever version it was read from.
impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "00-{}-{}-{:02x}",
            crate::ident::hex(&self.trace_id),
            crate::ident::hex(&self.span_id),
            self.flags
        )
    }
}

/// `N` bytes from `2 × N` lower-case hex digits (upper case is invalid in a traceparent).
fn hex<const N: usize>(digits: &[u8]) -> Option<[u8; N]> {
    if digits.len() != 2 * N {
        return None;
    }
    let nibble = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (i, pair) in digits.chunks_exact(2).enumerate() {
        out[i] = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_recommendations_example_reads_and_prints_back() {
        let tp = TraceParent::parse(GOOD).unwrap();
        assert_eq!(tp.trace_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(tp.span_id, [0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7]);
        assert!(tp.sampled());
        assert_eq!(tp.to_string(), GOOD);
        let unsampled = TraceParent::parse(&GOOD.replace("-01", "-00")).unwrap();
        assert!(!unsampled.sampled());
    }

    #[test]
    fn a_later_version_is_read_by_its_first_55_characters() {
        let later = GOOD.replacen("00-", "01-", 1);
        assert!(TraceParent::parse(&later).is_some());
        assert!(TraceParent::parse(&format!("{later}-what-comes-next")).is_some());
        assert!(TraceParent::parse(&format!("{later}x")).is_none());
        assert_eq!(TraceParent::parse(&later).unwrap().to_string(), GOOD);
    }

    #[test]
    fn invalid_values_are_ignored() {
        for bad in [
            "",
            "00",
            &GOOD[..54],
            &format!("{GOOD}-"),
            &GOOD.replacen("00-", "ff-", 1),
            &GOOD.to_uppercase(),
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x",
            "é0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn no_input_panics() {
        for len in 0..70 {
            for fill in ["-", "é", "a", "0"] {
                let s: String = fill.repeat(len);
                let _ = TraceParent::parse(&s);
                let mut t = GOOD.to_string();
                t.truncate(len.min(GOOD.len()));
                let _ = TraceParent::parse(&(t + &s));
            }
        }
    }
}
