//! What a quota grant does, decided from the locked account: an idempotency key counts
//! once per account, a repeat with another amount is refused, and no account's granted
//! total passes [`QUOTA_GRANTED_MAX`].

use crate::limits::QUOTA_GRANTED_MAX;

/// What a grant did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// The units were added (and journalled).
    Applied,
    /// This idempotency key already granted the same amount on this account: nothing
    /// added, the first grant stands.
    Repeated,
    /// This idempotency key already granted another amount on this account: nothing
    /// changed. `amount_first` is what it granted.
    KeyReused { amount_first: i64 },
    /// The account's granted total would pass `QUOTA_GRANTED_MAX`: nothing changed.
    OverLimit { granted: i64 },
}

/// The grant of a positive `amount` on an account that has `granted` so far, where this
/// grant's idempotency key granted `amount_first` before (if it did).
pub fn decide_grant(granted: i64, amount: i64, amount_first: Option<i64>) -> Grant {
    match amount_first {
        Some(first) if first == amount => Grant::Repeated,
        Some(amount_first) => Grant::KeyReused { amount_first },
        // `amount` is positive, so the subtraction cannot overflow (an addition could).
        None if granted > QUOTA_GRANTED_MAX - amount => Grant::OverLimit { granted },
        None => Grant::Applied,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_counts_once_and_the_total_is_capped() {
        assert_eq!(decide_grant(0, 10, None), Grant::Applied);
        assert_eq!(decide_grant(10, 10, Some(10)), Grant::Repeated);
        assert_eq!(decide_grant(10, 5, Some(10)), Grant::KeyReused { amount_first: 10 });
        assert_eq!(
            decide_grant(QUOTA_GRANTED_MAX, 1, None),
            Grant::OverLimit { granted: QUOTA_GRANTED_MAX }
        );
        assert_eq!(decide_grant(QUOTA_GRANTED_MAX - 1, 1, None), Grant::Applied);
    }
}
