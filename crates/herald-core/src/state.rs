//! Delivery states and attempt outcomes, with their spellings in the database and on the
//! wire. The legal transitions are written once, here.

use std::fmt;
use std::str::FromStr;

/// Where a delivery is in its life.
///
/// `pending` (due now or later) → `sending` (leased) → `sent` | `failed` | `pending`
/// (retry); `pending` → `cancelled`; `failed` | `cancelled` → `pending` (replay).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryState {
    Pending,
    Sending,
    Sent,
    Failed,
    Cancelled,
}

impl DeliveryState {
    pub const ALL: [DeliveryState; 5] = [
        DeliveryState::Pending,
        DeliveryState::Sending,
        DeliveryState::Sent,
        DeliveryState::Failed,
        DeliveryState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Sending => "sending",
            DeliveryState::Sent => "sent",
            DeliveryState::Failed => "failed",
            DeliveryState::Cancelled => "cancelled",
        }
    }

    /// No worker will touch it again (until a replay).
    pub fn is_final(self) -> bool {
        matches!(self, DeliveryState::Sent | DeliveryState::Failed | DeliveryState::Cancelled)
    }

    /// Its reservation is held (neither committed nor released).
    pub fn holds_reservation(self) -> bool {
        matches!(self, DeliveryState::Pending | DeliveryState::Sending)
    }

    pub fn can_replay(self) -> bool {
        matches!(self, DeliveryState::Failed | DeliveryState::Cancelled)
    }

    pub fn can_cancel(self) -> bool {
        self == DeliveryState::Pending
    }
}

impl fmt::Display for DeliveryState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state name that is not one of the five.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown delivery state {0:?}")]
pub struct UnknownState(pub String);

impl FromStr for DeliveryState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, UnknownState> {
        DeliveryState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_string()))
    }
}

/// How one attempt ended, as recorded on its row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttemptOutcome {
    Sent,
    Transient,
    Terminal,
    /// The lease expired with no outcome: the worker vanished.
    Lost,
    /// A stale worker reported `sent` after the delivery had failed or been cancelled.
    LateSent,
}

impl AttemptOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Sent => "sent",
            AttemptOutcome::Transient => "transient",
            AttemptOutcome::Terminal => "terminal",
            AttemptOutcome::Lost => "lost",
            AttemptOutcome::LateSent => "late_sent",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_classify() {
        for state in DeliveryState::ALL {
            assert_eq!(state.as_str().parse::<DeliveryState>(), Ok(state));
            assert_eq!(state.is_final(), !state.holds_reservation(), "{state}");
        }
        assert!("paused".parse::<DeliveryState>().is_err());
    }
}
