//! Exponential backoff with full jitter, as a pure function of the attempt number and a
//! random unit value the caller supplies (so tests pick the randomness).
//!
//! Full jitter (a uniform draw in `[0, min(max, base * 2^(n-1))]`) spreads retries of
//! transactions that collided at the same instant, which is the whole point of waiting:
//! two transactions that deadlocked and retried after the same fixed pause would simply
//! deadlock again.

use std::time::Duration;

/// Backoff settings: the first ceiling and the cap on every ceiling after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Backoff {
    /// The ceiling of the wait after failed attempt `attempt` (1-based): `base * 2^(attempt-1)`,
    /// capped at `max`. Saturates instead of overflowing for any attempt number.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(32);
        let factor = 1u32 << exponent.min(31);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// The wait after failed attempt `attempt`: `unit` (clamped into `[0, 1]`) of the ceiling.
    pub fn full_jitter(&self, attempt: u32, unit: f64) -> Duration {
        let unit = if unit.is_finite() { unit.clamp(0.0, 1.0) } else { 0.0 };
        self.ceiling(attempt).mul_f64(unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn backoff() -> Backoff {
        Backoff { base: Duration::from_millis(10), max: Duration::from_secs(1) }
    }

    #[test]
    fn ceiling_doubles_then_caps() {
        let b = backoff();
        let ms: Vec<u128> = (1..=9).map(|n| b.ceiling(n).as_millis()).collect();
        assert_eq!(ms, [10, 20, 40, 80, 160, 320, 640, 1000, 1000]);
        assert_eq!(b.ceiling(0), Duration::from_millis(10));
        assert_eq!(b.ceiling(u32::MAX), Duration::from_secs(1));
    }

    proptest! {
        #[test]
        fn jitter_stays_within_the_ceiling(attempt in 0u32..100, unit in any::<f64>()) {
            let b = backoff();
            let wait = b.full_jitter(attempt, unit);
            prop_assert!(wait <= b.ceiling(attempt));
            prop_assert!(wait <= b.max);
        }
    }
}
