//! The leases a worker knows it holds. A lease statement whose COMMIT went unanswered
//! (`CommitOutcomeUnknown`) may have committed: its rows are then `sending` under this
//! worker, but no send of theirs ever started, because the worker never received them.
//! Comparing the database's list of this worker's live leases with the ones it knows of
//! finds exactly those rows, which it hands back without spending an attempt, instead of
//! leaving them to wait out the lease (a minute by default) and lose an attempt to the
//! reconciler.

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
    /// A lease statement's outcome is unknown since the last successful check.
    suspect: bool,
}

impl KnownLeases {
    /// `lease`: the worker's lease length (how long an unrecorded send's lease can stand).
    pub(crate) fn new(lease: Duration) -> KnownLeases {
        KnownLeases {
            held: HashSet::new(),
            unrecorded: VecDeque::new(),
            retain_for: lease + Duration::from_secs(1),
            suspect: false,
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

    /// A lease statement may have committed without the worker hearing of it.
    pub(crate) fn outcome_unknown(&mut self) {
        self.suspect = true;
    }

    pub(crate) fn suspect(&self) -> bool {
        self.suspect
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

    /// Every orphan found was handed back.
    pub(crate) fn cleared(&mut self) {
        self.suspect = false;
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
        known.outcome_unknown();
        assert!(known.suspect());
        known.cleared();
        assert!(!known.suspect());
    }
}
