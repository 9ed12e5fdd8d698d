//! Durations as operators write them: `500ms`, `30s`, `5m`, `1h`, `30d` — one number and a
//! unit, nothing else (no silent defaults for a missing unit).

use std::time::Duration;

/// Why a duration did not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {input:?}: write a whole number and a unit (ms, s, m, h, d), like 30s")]
pub struct DurationError {
    pub input: String,
}

pub fn parse_duration(input: &str) -> Result<Duration, DurationError> {
    let error = || DurationError { input: input.to_string() };
    let s = input.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(error)?;
    let (digits, unit) = s.split_at(split);
    if digits.is_empty() || digits.len() > 12 {
        return Err(error());
    }
    let n: u64 = digits.parse().map_err(|_| error())?;
    let ms_per = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(error()),
    };
    n.checked_mul(ms_per).map(Duration::from_millis).ok_or_else(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        let ok = [
            ("500ms", 500),
            ("30s", 30_000),
            ("5m", 300_000),
            ("1h", 3_600_000),
            ("30d", 2_592_000_000),
            ("0s", 0),
        ];
        for (input, ms) in ok {
            assert_eq!(parse_duration(input), Ok(Duration::from_millis(ms)), "{input}");
        }
        for bad in ["", "30", "s", "1.5s", "-1s", "10 s", "10sec", "99999999999999s", "1w"] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
    }
}
