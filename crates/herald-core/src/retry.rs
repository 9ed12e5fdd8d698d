//! How long a delivery waits before its next attempt: exponential backoff with full
//! jitter, or the provider's Retry-After when that is longer, capped.

use crate::backoff::Backoff;
use std::time::Duration;

/// Retry settings for deliveries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    pub backoff: Backoff,
    /// The longest Retry-After herald honours (`HERALD_RETRY_AFTER_MAX`).
    pub retry_after_max: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            backoff: Backoff {
                base: crate::limits::DELIVERY_BACKOFF_BASE_DEFAULT,
                max: crate::limits::DELIVERY_BACKOFF_MAX_DEFAULT,
            },
            retry_after_max: crate::limits::RETRY_AFTER_MAX_DEFAULT,
        }
    }
}

impl RetryPolicy {
    /// The wait after failed attempt `attempt` (1-based, counted since the last replay),
    /// given the provider's `retry_after` and a random `unit` in `[0, 1]`.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>, unit: f64) -> Duration {
        let jittered = self.backoff.full_jitter(attempt, unit);
        match retry_after {
            Some(asked) => jittered.max(asked.min(self.retry_after_max)),
            None => jittered,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_wins_when_longer_and_is_capped() {
        let policy = RetryPolicy {
            backoff: Backoff { base: Duration::from_secs(1), max: Duration::from_secs(60) },
            retry_after_max: Duration::from_secs(3600),
        };
        assert_eq!(policy.delay(1, None, 0.5), Duration::from_millis(500));
        assert_eq!(policy.delay(1, Some(Duration::from_secs(2)), 0.5), Duration::from_secs(2));
        assert_eq!(policy.delay(3, Some(Duration::from_secs(1)), 1.0), Duration::from_secs(4));
        assert_eq!(
            policy.delay(1, Some(Duration::from_secs(86_400)), 0.0),
            Duration::from_secs(3600)
        );
    }
}
