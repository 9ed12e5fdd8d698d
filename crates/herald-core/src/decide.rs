//! What a reported outcome does to a delivery: the fencing rules of SPEC guarantee 6 and
//! the reconciler's rule of guarantee 7, as one pure function the store applies.

use crate::state::{AttemptOutcome, DeliveryState};

/// The delivery as it is in the database when an outcome arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Current<'a> {
    pub state: DeliveryState,
    pub lease_owner: Option<&'a str>,
    /// Leases taken over the delivery's life (the current attempt's number when sending).
    pub attempts: u32,
    /// Attempts taken before the latest replay: `attempts - attempts_base` count against
    /// `max_attempts`.
    pub attempts_base: u32,
    pub max_attempts: u32,
    /// Whether the lease has expired by the deciding clock.
    pub lease_expired: bool,
}

impl Current<'_> {
    fn attempts_used(&self) -> u32 {
        self.attempts.saturating_sub(self.attempts_base)
    }

    /// The attempt `(worker, n)` still holds the lease.
    pub fn is_fenced_by(&self, worker: &str, n: u32) -> bool {
        self.state == DeliveryState::Sending
            && self.lease_owner == Some(worker)
            && self.attempts == n
    }
}

/// What happened to attempt `n`, as reported by its worker or by the reconciler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Report {
    Sent,
    Transient,
    Terminal,
    /// The reconciler found the lease expired.
    Lost,
}

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// → `sent`, reservation committed. `stale` when the reporter no longer held the lease.
    MarkSent { stale: bool },
    /// → `pending` again after a backoff; reservation kept.
    Requeue { outcome: AttemptOutcome },
    /// → `failed`, reservation released.
    Fail { outcome: AttemptOutcome },
    /// The delivery is already `sent`: only the attempt row records this `sent` too.
    RecordSentAgain,
    /// `failed`/`cancelled` and a stale `sent` arrived: the attempt row says `late_sent`,
    /// the state and the ledger stay as they are.
    RecordLateSent,
    /// A stale transient/terminal/lost: nothing changes.
    Ignore,
}

impl Decision {
    /// The outcome written on the attempt row, if the row is written.
    pub fn attempt_outcome(self) -> Option<AttemptOutcome> {
        match self {
            Decision::MarkSent { .. } | Decision::RecordSentAgain => Some(AttemptOutcome::Sent),
            Decision::Requeue { outcome } | Decision::Fail { outcome } => Some(outcome),
            Decision::RecordLateSent => Some(AttemptOutcome::LateSent),
            Decision::Ignore => None,
        }
    }
}

/// Decides what `report` for attempt `(worker, n)` does to `current`.
pub fn decide(current: &Current<'_>, worker: &str, n: u32, report: Report) -> Decision {
    let fenced = current.is_fenced_by(worker, n);
    let exhausted = current.attempts_used() >= current.max_attempts;
    match report {
        Report::Sent if fenced => Decision::MarkSent { stale: false },
        // The effect happened: a delivery that is not final is sent, whoever holds it now.
        Report::Sent => match current.state {
            DeliveryState::Pending | DeliveryState::Sending => Decision::MarkSent { stale: true },
            DeliveryState::Sent => Decision::RecordSentAgain,
            DeliveryState::Failed | DeliveryState::Cancelled => Decision::RecordLateSent,
        },
        Report::Transient if fenced && exhausted => {
            Decision::Fail { outcome: AttemptOutcome::Transient }
        }
        Report::Transient if fenced => Decision::Requeue { outcome: AttemptOutcome::Transient },
        Report::Terminal if fenced => Decision::Fail { outcome: AttemptOutcome::Terminal },
        Report::Lost if fenced && current.lease_expired && exhausted => {
            Decision::Fail { outcome: AttemptOutcome::Lost }
        }
        Report::Lost if fenced && current.lease_expired => {
            Decision::Requeue { outcome: AttemptOutcome::Lost }
        }
        Report::Transient | Report::Terminal | Report::Lost => Decision::Ignore,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DeliveryState::*;

    fn current(state: DeliveryState, owner: Option<&str>, attempts: u32) -> Current<'_> {
        Current {
            state,
            lease_owner: owner,
            attempts,
            attempts_base: 0,
            max_attempts: 3,
            lease_expired: false,
        }
    }

    #[test]
    fn decisions() {
        let requeue_t = Decision::Requeue { outcome: AttemptOutcome::Transient };
        let fail_t = Decision::Fail { outcome: AttemptOutcome::Transient };
        let fail_terminal = Decision::Fail { outcome: AttemptOutcome::Terminal };
        let cases = [
            // (state, owner, attempts, reporter, n, report, expect)
            (Sending, Some("w1"), 1, "w1", 1, Report::Sent, Decision::MarkSent { stale: false }),
            (Sending, Some("w1"), 1, "w1", 1, Report::Transient, requeue_t),
            (Sending, Some("w1"), 3, "w1", 3, Report::Transient, fail_t),
            (Sending, Some("w1"), 1, "w1", 1, Report::Terminal, fail_terminal),
            // Stale reporters: another worker holds attempt 2 now.
            (Sending, Some("w2"), 2, "w1", 1, Report::Transient, Decision::Ignore),
            (Sending, Some("w2"), 2, "w1", 1, Report::Terminal, Decision::Ignore),
            (Sending, Some("w2"), 2, "w1", 1, Report::Sent, Decision::MarkSent { stale: true }),
            (Pending, None, 1, "w1", 1, Report::Sent, Decision::MarkSent { stale: true }),
            (Pending, None, 1, "w1", 1, Report::Terminal, Decision::Ignore),
            (Sent, None, 2, "w1", 1, Report::Sent, Decision::RecordSentAgain),
            (Failed, None, 1, "w1", 1, Report::Sent, Decision::RecordLateSent),
            (Cancelled, None, 1, "w1", 1, Report::Sent, Decision::RecordLateSent),
            // Same worker id, older attempt number: still stale.
            (Sending, Some("w1"), 2, "w1", 1, Report::Terminal, Decision::Ignore),
        ];
        for (state, owner, attempts, reporter, n, report, expect) in cases {
            let c = current(state, owner, attempts);
            assert_eq!(decide(&c, reporter, n, report), expect, "{state} {owner:?} {report:?}");
        }
    }

    #[test]
    fn the_reconciler_only_takes_expired_leases() {
        let mut c = current(Sending, Some("w1"), 1);
        assert_eq!(decide(&c, "w1", 1, Report::Lost), Decision::Ignore, "live lease");
        c.lease_expired = true;
        assert_eq!(
            decide(&c, "w1", 1, Report::Lost),
            Decision::Requeue { outcome: AttemptOutcome::Lost }
        );
        c.attempts = 3;
        assert_eq!(decide(&c, "w1", 1, Report::Lost), Decision::Ignore, "another attempt now");
        assert_eq!(
            decide(&c, "w1", 3, Report::Lost),
            Decision::Fail { outcome: AttemptOutcome::Lost }
        );
        // A replay grants a fresh budget: attempts_base moves up.
        c.attempts_base = 3;
        c.attempts = 4;
        assert_eq!(
            decide(&c, "w1", 4, Report::Lost),
            Decision::Requeue { outcome: AttemptOutcome::Lost }
        );
    }
}
