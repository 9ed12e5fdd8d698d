//! The leases a worker knows it holds. A lease statement whose COMMIT went unanswered
//! (`CommitOutcomeUnknown`) may have committed: its rows are then `sending` under this
//! worker, but no send of theirs ever started, because the worker never received them.
//! Comparing the database's list of this worker's live leases with the ones it knows of
//! finds exactly those rows, which it hands back without spending an attempt, instead of
//! leaving them to wait out the lease (a minute by default) and lose an attempt to the
//! reconciler.
//!
//! The client hears of the broken connection before the server has necessarily finished
//! the COMMIT (a slow fsync, a deferred trigger): a check made meanwhile sees the rows as
//! they were and finds nothing. So the worker stays suspicious until the statement must
//! have ended on the server — its statement bound, which the runner's deadline caps —
//! checking every [`CHECK_EVERY`] until then, and a check that found nothing clears it
//! only if it began after that moment.

use std::collections::{HashSet, VecDeque};
use std::time::Duration;
use tokio::time::Instant;
use uuid::Uuid;

/// A lease: (delivery id, attempt).
pub(crate) type LeaseKey = (Uuid, i32);

#[derive(Debug)]
pub(crate) struct KnownLeases {
    /// Received from a lease statement and not yet recorded (sending, or recording).
    held: HashSet<LeaseKey>,
    /// Sends whose outcome could not be recorded: their lease stands until it expires and
    /// the reconciler takes over, so they are never orphans. Kept for `retain_for` after
    /// the send ended, by when their lease has expired.
    unrecorded: VecDeque<(Instant, LeaseKey)>,
    retain_for: Duration,
    /// A lease statement's outcome is unknown: until a complete check that began after
    /// this moment, by when that statement had surely ended on the server.
    suspect_until: Option<Instant>,
    /// When the last check began.
    last_check: Option<Instant>,
}

/// How often a suspicious worker compares its leases with the database's.
pub(crate) const CHECK_EVERY: Duration = Duration::from_millis(250);

impl KnownLeases {
    /// `lease`: the worker's lease length (how long an unrecorded send's lease can stand).
    pub(crate) fn new(lease: Duration) -> KnownLeases {
        KnownLeases {
            held: HashSet::new(),
            unrecorded: VecDeque::new(),
            retain_for: lease + Duration::from_secs(1),
            suspect_until: None,
            last_check: None,
        }
    }

    pub(crate) fn received(&mut self, lease: LeaseKey) {
        self.held.insert(lease);
    }

    /// The send ended; `recorded`: its outcome is committed.
    pub(crate) fn ended(&mut self, lease: LeaseKey, recorded: bool) {
        if self.held.remove(&lease) && !recorded {
            self.unrecorded.push_back((Instant::now(), lease));
        }
    }

    /// A lease statement may have committed without the worker hearing of it; on the
    /// server it has ended by `settled_by` at the latest.
    pub(crate) fn outcome_unknown(&mut self, settled_by: Instant) {
        self.suspect_until = Some(self.suspect_until.map_or(settled_by, |t| t.max(settled_by)));
    }

    pub(crate) fn suspect(&self) -> bool {
        self.suspect_until.is_some()
    }

    /// Suspicious, and the last check is at least [`CHECK_EVERY`] old.
    pub(crate) fn check_due(&self, now: Instant) -> bool {
        self.suspect() && self.last_check.is_none_or(|t| now >= t + CHECK_EVERY)
    }

    /// A check begins now.
    pub(crate) fn checking(&mut self, now: Instant) {
        self.last_check = Some(now);
    }

    /// Of the live leases the database says this worker holds, those it never received.
    pub(crate) fn orphans(&mut self, live: &[LeaseKey]) -> Vec<LeaseKey> {
        while self.unrecorded.front().is_some_and(|(at, _)| at.elapsed() > self.retain_for) {
            self.unrecorded.pop_front();
        }
        live.iter()
            .filter(|l| !self.held.contains(l) && !self.unrecorded.iter().any(|(_, u)| u == *l))
            .copied()
            .collect()
    }

    /// The check that began at `began` found every live lease and handed back every
    /// orphan: suspicion ends if that check began once the unknown outcomes had settled.
    pub(crate) fn cleared(&mut self, began: Instant) {
        if self.suspect_until.is_some_and(|until| began >= until) {
            self.suspect_until = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_leases_never_received_are_orphans() {
        let (a, b, c, d) = ((Uuid::nil(), 1), (Uuid::max(), 1), (Uuid::nil(), 2), (Uuid::max(), 2));
        let mut known = KnownLeases::new(Duration::from_secs(60));
        known.received(a);
        known.received(b);
        known.ended(b, false); // sent, but its outcome was not recorded: not an orphan
        known.received(d);
        known.ended(d, true); // recorded: the database no longer lists it as leased
        assert_eq!(known.orphans(&[a, b, c]), vec![c]);
        assert!(!known.suspect());
    }

    /// A check made while the unknown COMMIT may still be running on the server does not
    /// end suspicion (the flake this fixed: a check that read the rows before that COMMIT
    /// finished found nothing, and three deliveries waited out their lease).
    #[test]
    fn only_a_check_begun_after_the_outcome_settled_clears_suspicion() {
        let mut known = KnownLeases::new(Duration::from_secs(60));
        let t0 = Instant::now();
        let settled = t0 + Duration::from_secs(10);
        known.outcome_unknown(settled);
        assert!(known.suspect() && known.check_due(t0));
        known.checking(t0);
        assert!(!known.check_due(t0 + CHECK_EVERY / 2), "checks are spaced");
        known.cleared(t0);
        assert!(known.suspect(), "the COMMIT may still have been running");
        assert!(known.check_due(t0 + CHECK_EVERY));
        // A later unknown outcome moves the horizon; an earlier one does not.
        known.outcome_unknown(t0 + Duration::from_secs(5));
        known.cleared(settled);
        assert!(!known.suspect());
        known.outcome_unknown(settled + Duration::from_secs(1));
        known.cleared(settled);
        assert!(known.suspect());
        known.cleared(settled + Duration::from_secs(1));
        assert!(!known.suspect() && !known.check_due(settled + Duration::from_secs(2)));
    }
}
