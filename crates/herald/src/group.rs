//! Group commit: submits with no transaction of the caller's around them
//! ([`Herald::submit_alone`], [`Herald::submit_many`], the HTTP API) share one transaction
//! and its one durable commit.
//!
//! Submits queue here, already checked (every check that can fail without SQL has run).
//! At most [`GROUP_COMMIT_LANES`] lanes (one on SQLite) — tasks of their own, so a caller that goes away
//! never cuts a batch short — each take what has gathered, up to [`GROUP_COMMIT_MAX`],
//! and run it; what arrives meanwhile gathers for the next. There is no timer: a lone
//! submit finds a lane free and commits at once. After a small batch
//! ([`GROUP_COMMIT_SMALL_BATCH`]) a lane gives the scheduler a turn or two before it
//! gathers, so callers it just answered that submit again at once join its next batch
//! instead of trickling in as batches of one.
//!
//! A batch of one is the submit alone ([`Herald::submit_solo`]: on PostgreSQL one
//! autocommitted statement). A bigger batch is one transaction under the runner. On
//! PostgreSQL and MariaDB the store claims it whole in a fixed number of statements
//! (`deliveries_claim_many`: the accounts locked in the one order and read, the
//! identities read, then one insert of what the plan admits — on MariaDB one per table),
//! each member answered as its claim alone would have been in arrival order. On SQLite
//! (or to find a member at fault) a batch over several accounts locks
//! them once, every stripe, in the store's one order (`quota_lock`), then each member is
//! claimed in arrival order. Either
//! way an account that cannot cover the whole batch serves its first submits, and a
//! duplicate, a reused key, short quota are answers, not errors: they leave the
//! transaction usable.
//! - A conflict (deadlock, serialization failure, busy) or a connection lost before COMMIT
//!   runs the whole batch again, within the runner's attempts and deadline.
//! - Any other database error belongs to the member whose statement raised it (on
//!   PostgreSQL it aborts the whole transaction): the batch runs again without it, and it
//!   is answered alone, by a transaction of its own. When the batch's one statement
//!   raised it, the batch runs again claim by claim, which names the member.
//! - A COMMIT whose outcome is unknown is every member's: each gets
//!   [`Error::CommitOutcomeUnknown`], and submitting the same request again settles it.
//! - Admission control ([`EngineOptions::queue_wait`]): a member still queued when its
//!   wait runs out is taken off the queue and answered [`Error::Busy`], with nothing
//!   written; while the oldest queued member has waited half of it, new submits are
//!   refused at once. The queue is first in, first out, so the head's age is what a new
//!   arrival can expect to wait: when the offered rate exceeds what the database takes,
//!   the excess is answered early instead of every caller waiting longer and longer.
//!
//! [`EngineOptions::queue_wait`]: crate::EngineOptions::queue_wait

use crate::error::Error;
use crate::handle::Herald;
use crate::runner::TxOptions;
use crate::submit::{Checked, SubmitRequest, Submitted};
use herald_core::limits::{
    GROUP_COMMIT_LANES, GROUP_COMMIT_MAX, GROUP_COMMIT_SMALL_BATCH, GROUP_COMMIT_YIELDS,
    TX_DEADLINE_DEFAULT,
};
use herald_store::quota::quota_lock;
use herald_store::{Backend, ErrorClass, StoreError};
use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use tokio::sync::oneshot;
use tokio::time::Instant;

/// The submits waiting for a lane, and how many lanes run. One per [`Herald`] handle and
/// its clones.
#[derive(Default)]
pub(crate) struct Group {
    queue: Mutex<Queue>,
    /// Transactions committed for group-committed submits, and the submits they held.
    committed: AtomicU64,
    members: AtomicU64,
    /// The next member's id.
    ids: AtomicU64,
    /// Submits refused by admission control, at once or after their wait.
    refused: AtomicU64,
    /// Submits taken by lanes and not yet answered.
    running: AtomicUsize,
}

/// How much sharing the group commit achieved since the handle was opened:
/// `submits / transactions` is the mean batch size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GroupCommitStats {
    /// Transactions committed (a lone submit's included).
    pub transactions: u64,
    /// Submits answered by those commits.
    pub submits: u64,
    /// Submits answered [`Error::Busy`] by admission control, nothing written: refused on
    /// arrival, or still queued when their wait ran out.
    pub refused: u64,
    /// Submits waiting for a lane now.
    pub waiting: usize,
    /// Submits in the lanes' transactions now.
    pub running: usize,
}

impl GroupCommitStats {
    /// The mean batch size between an `earlier` reading and this one: submits answered
    /// by the commits in between, per commit (0 when nothing committed).
    pub fn submits_per_commit_since(&self, earlier: &GroupCommitStats) -> f64 {
        let submits = self.submits.saturating_sub(earlier.submits);
        match self.transactions.saturating_sub(earlier.transactions) {
            0 => 0.0,
            transactions => submits as f64 / transactions as f64,
        }
    }
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        f.debug_struct("Group")
            .field("waiting", &queue.waiting.len())
            .field("lanes", &queue.lanes)
            .finish()
    }
}

#[derive(Default)]
struct Queue {
    waiting: VecDeque<Member>,
    lanes: usize,
}

/// One checked submit and where its answer goes.
struct Member {
    /// Names it in the queue, for a waiter whose wait ran out to take it off.
    id: u64,
    req: SubmitRequest,
    checked: Checked,
    /// When it was queued: the queue's head tells a new arrival how long it would wait.
    queued: Instant,
    /// Still queued at this instant, it is answered `Busy`.
    queued_until: Instant,
    /// Of its transaction, once a lane runs it.
    deadline: Instant,
    reply: oneshot::Sender<Result<Submitted, Error>>,
}

impl Member {
    fn answer(self, answer: Result<Submitted, Error>) {
        // The caller may have gone away; the submit stands all the same.
        let _ = self.reply.send(answer);
    }
}

/// How a batch's shared transaction ended.
enum Together {
    /// Committed: each member's answer, in order.
    Committed(Vec<Result<Submitted, Error>>),
    /// The statement of the member at this index raised an error of its own.
    Failed(usize),
    /// A statement of the batch's own (the accounts' lock) raised an error no member
    /// owns: each member is answered alone.
    Unowned,
    /// What every member is answered: an unknown commit outcome, the deadline, an empty
    /// pool.
    Each(Error),
}

impl Herald {
    /// How much sharing the group commit achieved so far, in this handle and its clones.
    pub fn group_commit_stats(&self) -> GroupCommitStats {
        GroupCommitStats {
            transactions: self.group.committed.load(Ordering::Relaxed),
            submits: self.group.members.load(Ordering::Relaxed),
            refused: self.group.refused.load(Ordering::Relaxed),
            waiting: self.group.queue.lock().unwrap_or_else(PoisonError::into_inner).waiting.len(),
            running: self.group.running.load(Ordering::Relaxed),
        }
    }

    /// Group-committed transactions this handle runs at once: [`GROUP_COMMIT_LANES`] on a
    /// server, one on SQLite.
    pub fn group_commit_lanes(&self) -> usize {
        match self.backend() {
            Backend::Sqlite => 1,
            Backend::Postgres | Backend::MySql => GROUP_COMMIT_LANES,
        }
    }

    fn count_commit(&self, submits: usize) {
        self.group.committed.fetch_add(1, Ordering::Relaxed);
        self.group.members.fetch_add(submits as u64, Ordering::Relaxed);
    }

    /// Queues the checked submits and waits for their answers, in the order given; items
    /// that failed their checks are answered at once, and so is every item when admission
    /// control refuses the call.
    pub(crate) async fn group_commit(
        &self,
        reqs: &[SubmitRequest],
        checked: Vec<Result<Checked, Error>>,
    ) -> Vec<Result<Submitted, Error>> {
        enum Pending {
            Now(Box<Result<Submitted, Error>>),
            Later(u64, oneshot::Receiver<Result<Submitted, Error>>),
        }
        let queued = Instant::now();
        let queued_until = queued + self.options.queue_wait;
        let deadline = queued + TX_DEADLINE_DEFAULT;
        let mut members = Vec::new();
        let pending: Vec<Pending> = reqs
            .iter()
            .zip(checked)
            .map(|(req, checked)| match checked {
                Err(e) => Pending::Now(Box::new(Err(e))),
                Ok(checked) => {
                    let (reply, answer) = oneshot::channel();
                    let id = self.group.ids.fetch_add(1, Ordering::Relaxed);
                    let (req, at) = (req.clone(), queued);
                    members.push(Member {
                        id,
                        req,
                        checked,
                        queued: at,
                        queued_until,
                        deadline,
                        reply,
                    });
                    Pending::Later(id, answer)
                }
            })
            .collect();
        if !members.is_empty()
            && let Err(refused) = self.enqueue(members)
        {
            // Refused whole: every queued item's answer is the refusal.
            self.group.refused.fetch_add(refused.len() as u64, Ordering::Relaxed);
            for member in refused {
                member.answer(Err(queue_full(self.options.queue_wait)));
            }
        }
        let mut answers = Vec::with_capacity(pending.len());
        for p in pending {
            answers.push(match p {
                Pending::Now(answer) => *answer,
                Pending::Later(id, answer) => self.answer_of(id, queued_until, answer).await,
            });
        }
        answers
    }

    /// A queued member's answer: its lane's, or [`Error::Busy`] if it is still queued when
    /// its wait runs out (then it is taken off the queue, so nothing of it is ever written).
    async fn answer_of(
        &self,
        id: u64,
        queued_until: Instant,
        mut answer: oneshot::Receiver<Result<Submitted, Error>>,
    ) -> Result<Submitted, Error> {
        let stopped = || Err(Error::app("the group commit stopped before answering this submit"));
        match tokio::time::timeout_at(queued_until, &mut answer).await {
            Ok(answered) => return answered.unwrap_or_else(|_| stopped()),
            Err(_elapsed) => {
                let mut queue = self.group.queue.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(at) = queue.waiting.iter().position(|m| m.id == id) {
                    queue.waiting.remove(at);
                    drop(queue);
                    self.group.refused.fetch_add(1, Ordering::Relaxed);
                    return Err(queued_too_long());
                }
            }
        }
        // A lane holds it: its transaction's deadline bounds the wait.
        answer.await.unwrap_or_else(|_| stopped())
    }

    /// Queues `members`, or hands them back when admission control refuses them: the
    /// oldest queued member has waited half of [`EngineOptions::queue_wait`] or more.
    ///
    /// [`EngineOptions::queue_wait`]: crate::EngineOptions::queue_wait
    fn enqueue(&self, members: Vec<Member>) -> Result<(), Vec<Member>> {
        let mut queue = self.group.queue.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(head) = queue.waiting.front()
            && head.queued.elapsed() >= self.options.queue_wait / 2
        {
            return Err(members);
        }
        queue.waiting.extend(members);
        self.start_lane_if_wanted(&mut queue);
        Ok(())
    }

    /// Starts a lane when submits wait and fewer than [`Herald::group_commit_lanes`] run
    /// (one on SQLite, whose single writer a second lane would only wait for).
    fn start_lane_if_wanted(&self, queue: &mut Queue) {
        if !queue.waiting.is_empty() && queue.lanes < self.group_commit_lanes() {
            queue.lanes += 1;
            let lane = Lane { herald: self.clone(), ended: false, taken: 0 };
            tokio::spawn(lane.run());
        }
    }

    /// Runs one gathering to its answers: together while it holds more than one member,
    /// then the members whose own statements failed, each alone.
    async fn run_batch(&self, mut members: Vec<Member>) {
        let mut alone = Vec::new();
        let mut one_by_one = false;
        while members.len() > 1 {
            match self.claim_together(&members, one_by_one).await {
                Together::Committed(answers) => {
                    self.count_commit(answers.len());
                    for (member, answer) in members.drain(..).zip(answers) {
                        member.answer(answer);
                    }
                }
                Together::Failed(i) => alone.push(members.remove(i)),
                // The batch's one statement failed: claim by claim, the failing member's
                // own statement names it.
                Together::Unowned if !one_by_one => one_by_one = true,
                Together::Unowned => alone.append(&mut members),
                Together::Each(e) => {
                    for member in members.drain(..) {
                        member.answer(Err(each_member(&e)));
                    }
                }
            }
        }
        alone.append(&mut members);
        for member in alone {
            let answer = self.submit_solo(&member.req, &member.checked, member.deadline).await;
            if answer.is_ok() {
                self.count_commit(1);
            }
            member.answer(answer);
        }
    }

    /// The members' claims in one transaction: where the backend claims many at once
    /// (PostgreSQL, MariaDB), all of them in its fixed number of statements; otherwise, or when
    /// `one_by_one`, accounts locked first, in one order, then each claim in arrival order.
    async fn claim_together(&self, members: &[Member], one_by_one: bool) -> Together {
        let earliest = members.iter().map(|m| m.deadline).min().unwrap_or_else(Instant::now);
        let options = TxOptions {
            deadline: earliest.saturating_duration_since(Instant::now()),
            ..TxOptions::default()
        };
        let mut accounts: Vec<_> = members
            .iter()
            .filter(|m| m.checked.cost() > 0)
            .map(|m| (m.req.tenant.as_uuid(), m.checked.quota_key().to_string()))
            .collect();
        accounts.sort();
        accounts.dedup();
        let failing = Mutex::new(None);
        let committed = self
            .transaction_with(&options, |tx| {
                let (accounts, failing) = (&accounts, &failing);
                Box::pin(async move {
                    *failing.lock().unwrap_or_else(PoisonError::into_inner) = None;
                    if !one_by_one {
                        let items: Vec<_> = members.iter().map(|m| (&m.req, &m.checked)).collect();
                        if let Some(answers) = self.claim_many_in(tx.conn(), &items).await? {
                            if answers.iter().any(|a| matches!(a, Ok(s) if !s.duplicate)) {
                                let wake = self.wake().clone();
                                tx.after_commit(move || wake.soon());
                            }
                            return Ok(answers);
                        }
                    }
                    // Several accounts: each locked whole, in the one order, so that two
                    // batches never wait for each other's stripes in a circle. One account:
                    // each claim takes a stripe of its own.
                    if accounts.len() > 1 {
                        quota_lock(tx.conn(), accounts).await?;
                    }
                    let mut answers = Vec::with_capacity(members.len());
                    let mut inserted = false;
                    for (i, m) in members.iter().enumerate() {
                        match self.claim_in(tx.conn(), &m.req, &m.checked).await {
                            Ok(answer) => {
                                inserted |= matches!(&answer, Ok(s) if !s.duplicate);
                                answers.push(answer);
                            }
                            Err(Error::Store(e)) if owned_by_member(&e) => {
                                *failing.lock().unwrap_or_else(PoisonError::into_inner) = Some(i);
                                return Err(Error::Store(e));
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    if inserted {
                        let wake = self.wake().clone();
                        tx.after_commit(move || wake.soon());
                    }
                    Ok(answers)
                })
            })
            .await;
        let failing = failing.into_inner().unwrap_or_else(PoisonError::into_inner);
        match (committed, failing) {
            (Ok(committed), _) => Together::Committed(committed.value),
            (Err(Error::Store(_)), Some(i)) => Together::Failed(i),
            (Err(Error::Store(_)), None) => Together::Unowned,
            (Err(e), _) => Together::Each(e),
        }
    }
}

/// Whether a database error raised by a member's claim is that member's own — not a
/// conflict or a lost connection (the runner runs the batch again for those), nor the
/// deadline's.
fn owned_by_member(e: &StoreError) -> bool {
    matches!(e.class(), ErrorClass::Other | ErrorClass::WaitTimeout)
}

/// A lane: takes gatherings off the queue until it is empty. Dropped without having
/// ended (its task panicked), it gives its place back and starts another lane for what
/// waits, so the queue is never left without one.
struct Lane {
    herald: Herald,
    ended: bool,
    /// Members of the batch it runs now, counted in [`GroupCommitStats::running`].
    taken: usize,
}

impl Lane {
    async fn run(mut self) {
        // Members the batch just run held (none before the first).
        let mut answered = 0;
        loop {
            if (1..=GROUP_COMMIT_SMALL_BATCH).contains(&answered) {
                // Few callers: those just answered are most of the next batch, and in a
                // closed loop they submit again at once. Let them run first (no timer: a
                // turn of the scheduler each), or the first of them to come back finds
                // this lane gathering alone — or starts another — and the rest wait.
                for _ in 0..GROUP_COMMIT_YIELDS {
                    tokio::task::yield_now().await;
                }
            }
            let (batch, expired) = {
                let mut queue =
                    self.herald.group.queue.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                let (mut batch, mut expired) = (Vec::new(), Vec::new());
                while batch.len() < GROUP_COMMIT_MAX
                    && let Some(member) = queue.waiting.pop_front()
                {
                    if member.queued_until <= now {
                        expired.push(member)
                    } else {
                        batch.push(member)
                    }
                }
                if batch.is_empty() && expired.is_empty() {
                    queue.lanes -= 1;
                    self.ended = true;
                    return;
                }
                self.herald.group.running.fetch_add(batch.len(), Ordering::Relaxed);
                self.herald.start_lane_if_wanted(&mut queue);
                (batch, expired)
            };
            self.herald.group.refused.fetch_add(expired.len() as u64, Ordering::Relaxed);
            for member in expired {
                member.answer(Err(queued_too_long()));
            }
            answered = batch.len();
            if !batch.is_empty() {
                self.taken = batch.len();
                self.herald.run_batch(batch).await;
                self.herald.group.running.fetch_sub(self.taken, Ordering::Relaxed);
                self.taken = 0;
            }
        }
    }
}

impl Drop for Lane {
    fn drop(&mut self) {
        self.herald.group.running.fetch_sub(self.taken, Ordering::Relaxed);
        if !self.ended {
            let mut queue = self.herald.group.queue.lock().unwrap_or_else(PoisonError::into_inner);
            queue.lanes -= 1;
            self.herald.start_lane_if_wanted(&mut queue);
        }
    }
}

fn queued_too_long() -> Error {
    Error::Busy {
        source: StoreError::Database(herald_store::tx::timed_out(
            "the group commit (the submit waited for its turn until its queue wait ran out)",
        )),
    }
}

/// Admission control's refusal on arrival: the queue's head has waited half of `wait`.
fn queue_full(wait: std::time::Duration) -> Error {
    Error::Busy {
        source: StoreError::Database(herald_store::tx::timed_out(&format!(
            "the group commit's queue (full: its oldest submit has waited half of {wait:?})"
        ))),
    }
}

/// `e` again, for one member of the batch it ended: the same kind, with the database
/// error it carries kept as text (database errors are not `Clone`).
fn each_member(e: &Error) -> Error {
    fn echo(e: &StoreError) -> StoreError {
        StoreError::Database(herald_store::sqlx::Error::Protocol(e.to_string()))
    }
    match e {
        Error::CommitOutcomeUnknown { attempts, source } => {
            Error::CommitOutcomeUnknown { attempts: *attempts, source: echo(source) }
        }
        Error::DeadlineExceeded { deadline, attempts, last } => Error::DeadlineExceeded {
            deadline: *deadline,
            attempts: *attempts,
            last: last.as_ref().map(echo),
        },
        Error::AttemptsExhausted { attempts, last } => {
            Error::AttemptsExhausted { attempts: *attempts, last: echo(last) }
        }
        Error::Busy { source } => Error::Busy { source: echo(source) },
        other => Error::app(other.to_string()),
    }
}
