//! The transaction runner: run a closure in a transaction and, on a concurrency error
//! only, roll back and run the *whole* closure again — bounded by attempts and by a
//! deadline that also bounds every lock and statement wait inside each attempt.
//!
//! Rules (docs/design.md, "The transaction runner", explains why):
//! 1. Retry only on concurrency errors, classified by code (PostgreSQL 40001/40P01, SQLite
//!    BUSY/LOCKED), and on a connection lost before COMMIT (the transaction went with it;
//!    the next attempt takes a fresh connection); anything else propagates after the first
//!    attempt. An empty pool is [`Error::Busy`].
//! 2. Each attempt's waits are bounded by the time left: `statement_timeout` (which counts
//!    lock waits) on PostgreSQL, the busy timeout on SQLite, and the closure itself runs
//!    under a timer.
//! 3. A concurrency error raised by COMMIT is retried; a broken connection during COMMIT,
//!    or a COMMIT that does not answer in time, is [`Error::CommitOutcomeUnknown`], never
//!    success, never a plain failure. A connection whose transaction did not end cleanly
//!    is closed, never returned to the pool.
//! 4. Effects registered with `after_commit` run after the final COMMIT, in order, once.
//! 5. No nested runner: calling `transaction` inside a closure is an error.

use crate::BoxFuture;
use crate::error::Error;
use crate::handle::Herald;
use crate::tx::Tx;
use herald_core::Backoff;
use herald_core::limits::{
    TX_ATTEMPTS_DEFAULT, TX_ATTEMPTS_MAX, TX_BACKOFF_BASE_DEFAULT, TX_BACKOFF_MAX_DEFAULT,
    TX_DEADLINE_DEFAULT,
};
use herald_store::tx::timed_out;
use herald_store::{
    AsConn, BeginOptions, Conn, ErrorClass, Isolation, SqliteLock, Store, StoreError,
};
use std::marker::PhantomData;
use std::time::Duration;
use tokio::time::Instant;

tokio::task_local! {
    /// Set while a runner closure is being polled on this task.
    static IN_RUNNER: ();
}

/// Whether this task is inside a runner closure (where a second transaction of herald's
/// could only wait on the first one's locks).
pub(crate) fn in_runner() -> bool {
    IN_RUNNER.try_with(|_| ()).is_ok()
}

/// How the runner retries. Every field has a named default (see `herald_core::limits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxOptions {
    /// Runs of the closure at most (1 = no retry). Capped at `TX_ATTEMPTS_MAX`.
    pub max_attempts: u32,
    /// The whole call, all attempts, waits and backoffs included, ends by this.
    pub deadline: Duration,
    /// Full-jitter backoff between attempts.
    pub backoff: Backoff,
    /// PostgreSQL isolation level (SQLite is always serializable).
    pub isolation: Isolation,
}

impl Default for TxOptions {
    fn default() -> Self {
        TxOptions {
            max_attempts: TX_ATTEMPTS_DEFAULT,
            deadline: TX_DEADLINE_DEFAULT,
            backoff: Backoff { base: TX_BACKOFF_BASE_DEFAULT, max: TX_BACKOFF_MAX_DEFAULT },
            isolation: Isolation::ReadCommitted,
        }
    }
}

/// A committed transaction's result and how many runs of the closure it took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed<T> {
    pub value: T,
    pub attempts: u32,
}

impl Herald {
    /// [`Herald::transaction_with`] with the default options.
    pub async fn transaction<'a, T, F>(&self, f: F) -> Result<Committed<T>, Error>
    where
        T: Send,
        F: for<'t> FnMut(&'t mut Tx<'a>) -> BoxFuture<'t, Result<T, Error>> + Send,
    {
        self.transaction_with(&TxOptions::default(), f).await
    }

    /// Runs `f` in a transaction, retrying the whole closure on concurrency errors.
    ///
    /// `f` may run several times: it must contain database work only, plus effects
    /// registered with [`Tx::after_commit`]. Database errors must reach the runner as
    /// [`Error::Store`] (use `?` on sqlx and store results) or they cannot be classified.
    pub async fn transaction_with<'a, T, F>(
        &self,
        options: &TxOptions,
        mut f: F,
    ) -> Result<Committed<T>, Error>
    where
        T: Send,
        F: for<'t> FnMut(&'t mut Tx<'a>) -> BoxFuture<'t, Result<T, Error>> + Send,
    {
        if IN_RUNNER.try_with(|_| ()).is_ok() {
            return Err(Error::NestedTransaction);
        }
        if options.max_attempts == 0 {
            return Err(Error::invalid("max_attempts must be at least 1"));
        }
        let max_attempts = options.max_attempts.min(TX_ATTEMPTS_MAX);
        let deadline = Instant::now() + options.deadline;
        let expired =
            |attempts, last| Error::DeadlineExceeded { deadline: options.deadline, attempts, last };

        let mut attempt = 0;
        loop {
            attempt += 1;
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(expired(attempt - 1, None));
            }
            let begin = BeginOptions {
                isolation: options.isolation,
                sqlite_lock: SqliteLock::Immediate,
                wait_max: remaining,
                ..BeginOptions::default()
            };
            let conflict = match tokio::time::timeout(remaining, self.store.begin(&begin)).await {
                Err(_elapsed) => return Err(expired(attempt, None)),
                Ok(Err(e)) => judge(&self.store, e, deadline, |e| expired(attempt, Some(e)))?,
                Ok(Ok(store_tx)) => {
                    let mut tx = Tx::new(store_tx, attempt);
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    let run = IN_RUNNER.scope((), tokio::time::timeout(remaining, f(&mut tx)));
                    match run.await {
                        Err(_elapsed) => {
                            // A statement may be mid-flight: close the connection (the
                            // server rolls back) rather than wait on it again.
                            tx.into_parts().0.abandon();
                            return Err(expired(attempt, None));
                        }
                        Ok(Err(error)) => {
                            rollback(tx).await;
                            match error {
                                Error::Store(e) => {
                                    judge(&self.store, e, deadline, |e| expired(attempt, Some(e)))?
                                }
                                other => return Err(other),
                            }
                        }
                        Ok(Ok(value)) => {
                            let (store_tx, effects) = tx.into_parts();
                            // COMMIT gets at least COMMIT_WAIT_MIN: cutting it short cannot
                            // undo it, only make its outcome unknown.
                            let wait = deadline
                                .saturating_duration_since(Instant::now())
                                .max(COMMIT_WAIT_MIN);
                            let committed =
                                match tokio::time::timeout(wait, store_tx.commit()).await {
                                    Ok(result) => result,
                                    Err(_elapsed) => {
                                        return Err(Error::CommitOutcomeUnknown {
                                            attempts: attempt,
                                            source: StoreError::Database(timed_out("COMMIT")),
                                        });
                                    }
                                };
                            match committed {
                                Ok(()) => {
                                    for effect in effects {
                                        effect();
                                    }
                                    return Ok(Committed { value, attempts: attempt });
                                }
                                Err(e) if e.class() == ErrorClass::ConnectionLost => {
                                    self.store.note_connection_lost();
                                    return Err(Error::CommitOutcomeUnknown {
                                        attempts: attempt,
                                        source: e,
                                    });
                                }
                                Err(e) => {
                                    judge(&self.store, e, deadline, |e| expired(attempt, Some(e)))?
                                }
                            }
                        }
                    }
                }
            };

            back_off(options, attempt, max_attempts, deadline, conflict).await?;
        }
    }

    /// Runs one statement on a pooled connection *outside* a transaction, so it commits on
    /// its own (one round trip instead of BEGIN, the statement and COMMIT), with the
    /// runner's rules: a concurrency error runs it again after a backoff, within the
    /// default attempts and deadline. A statement cannot carry its own timeout in the same
    /// round trip, so the deadline is kept on this side: a statement that outlives it may
    /// still commit, and is reported as [`Error::CommitOutcomeUnknown`] (its connection is
    /// closed, not returned to the pool). Meant for single statements that are safe to
    /// repeat, like an idempotent claim.
    pub(crate) async fn autocommit<'a, T, F>(&self, f: F) -> Result<T, Error>
    where
        F: for<'c> FnMut(Conn<'c>, PhantomData<&'c &'a ()>) -> BoxFuture<'c, Result<T, StoreError>>
            + Send,
    {
        self.autocommit_until(Instant::now() + TxOptions::default().deadline, f).await
    }

    /// [`Herald::autocommit`] under a deadline of the caller's (a group-committed submit's,
    /// which started counting when it was queued).
    pub(crate) async fn autocommit_until<'a, T, F>(
        &self,
        deadline: Instant,
        f: F,
    ) -> Result<T, Error>
    where
        F: for<'c> FnMut(Conn<'c>, PhantomData<&'c &'a ()>) -> BoxFuture<'c, Result<T, StoreError>>
            + Send,
    {
        if IN_RUNNER.try_with(|_| ()).is_ok() {
            // Outside the caller's transaction it could wait on that transaction's locks.
            return Err(Error::NestedTransaction);
        }
        self.outside_transaction(Outside::Write, deadline, f).await
    }

    /// Runs `f` on a pooled connection *outside* a transaction — for reads, where BEGIN
    /// and COMMIT would be two round trips for nothing, and where on SQLite a transaction
    /// of the runner's (`BEGIN IMMEDIATE`) would take the write lock: a read there would
    /// queue behind every writer, and every writer behind it. Each statement autocommits
    /// and sees the latest commit (a WAL reader never waits for the writer). Under the
    /// runner's bounds: the default deadline over everything, a lost connection (or a
    /// concurrency error) retried on a fresh connection after a backoff, an empty pool
    /// [`Error::Busy`]. A connection whose read was cut short by the deadline or broke is
    /// closed, not pooled.
    ///
    /// `f` may run more than once and must only read: a write in it would commit on its
    /// own, statement by statement. Several statements share the connection through
    /// [`Conn::reborrow`].
    pub async fn read<'a, T, F>(&self, f: F) -> Result<T, Error>
    where
        F: for<'c> FnMut(Conn<'c>, PhantomData<&'c &'a ()>) -> BoxFuture<'c, Result<T, StoreError>>
            + Send,
    {
        let deadline = Instant::now() + TxOptions::default().deadline;
        self.outside_transaction(Outside::Read, deadline, f).await
    }

    /// The loop `autocommit` and `read` share: a pooled connection under the default
    /// deadline, conflicts retried with the runner's backoff. They differ in what a
    /// statement cut short or a lost connection means: a write may have committed
    /// ([`Error::CommitOutcomeUnknown`], never retried), a read did nothing (the deadline,
    /// or another try on a fresh connection).
    async fn outside_transaction<'a, T, F>(
        &self,
        kind: Outside,
        deadline: Instant,
        mut f: F,
    ) -> Result<T, Error>
    where
        F: for<'c> FnMut(Conn<'c>, PhantomData<&'c &'a ()>) -> BoxFuture<'c, Result<T, StoreError>>
            + Send,
    {
        let options = TxOptions {
            deadline: deadline.saturating_duration_since(Instant::now()),
            ..TxOptions::default()
        };
        let expired =
            |attempts, last| Error::DeadlineExceeded { deadline: options.deadline, attempts, last };
        let mut attempt = 0;
        loop {
            attempt += 1;
            let remaining = deadline.saturating_duration_since(Instant::now());
            // On SQLite a write takes this process's writer first, as a transaction does.
            let _writer = match (kind, self.store.backend()) {
                (Outside::Write, herald_store::Backend::Sqlite) => {
                    match self.store.sqlite_writer(remaining).await {
                        Ok(writer) => Some(writer),
                        Err(e) => {
                            let conflict =
                                judge(&self.store, e, deadline, |e| expired(attempt, Some(e)))?;
                            back_off(&options, attempt, options.max_attempts, deadline, conflict)
                                .await?;
                            continue;
                        }
                    }
                }
                _ => None,
            };
            let remaining = deadline.saturating_duration_since(Instant::now());
            let conflict = match tokio::time::timeout(remaining, self.store.acquire()).await {
                Err(_elapsed) => return Err(expired(attempt - 1, None)),
                Ok(Err(e)) => judge(&self.store, e, deadline, |e| expired(attempt, Some(e)))?,
                Ok(Ok(mut conn)) => {
                    let remaining = deadline.saturating_duration_since(Instant::now());
                    let run = tokio::time::timeout(remaining, f(conn.as_conn(), PhantomData));
                    match (run.await, kind) {
                        (Ok(Ok(value)), _) => return Ok(value),
                        // A write cut short or broken may still commit: unknown, not retried.
                        (Err(_elapsed), Outside::Write) => {
                            conn.discard();
                            return Err(Error::CommitOutcomeUnknown {
                                attempts: attempt,
                                source: StoreError::Database(timed_out(
                                    "the statement (which may still commit)",
                                )),
                            });
                        }
                        (Err(_elapsed), Outside::Read) => {
                            conn.discard();
                            return Err(expired(attempt, None));
                        }
                        (Ok(Err(e)), kind) if e.class() == ErrorClass::ConnectionLost => {
                            conn.discard();
                            if kind == Outside::Write {
                                self.store.note_connection_lost();
                                return Err(Error::CommitOutcomeUnknown {
                                    attempts: attempt,
                                    source: e,
                                });
                            }
                            judge(&self.store, e, deadline, |e| expired(attempt, Some(e)))?
                        }
                        (Ok(Err(e)), _) => {
                            judge(&self.store, e, deadline, |e| expired(attempt, Some(e)))?
                        }
                    }
                }
            };
            back_off(&options, attempt, options.max_attempts, deadline, conflict).await?;
        }
    }
}

/// What runs outside a transaction: a write that commits on its own, or reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outside {
    Write,
    Read,
}

/// COMMIT is given at least this long to answer, even past the deadline: a COMMIT cut
/// short cannot be undone, only reported as unknown.
const COMMIT_WAIT_MIN: Duration = Duration::from_secs(1);

/// After a concurrency conflict (or a lost connection): gives up if the attempts or the deadline are spent,
/// otherwise sleeps a full-jitter backoff.
async fn back_off(
    options: &TxOptions,
    attempt: u32,
    max_attempts: u32,
    deadline: Instant,
    conflict: StoreError,
) -> Result<(), Error> {
    tracing::debug!(attempt, error = %conflict, "transaction conflict, retrying");
    if attempt >= max_attempts {
        return Err(Error::AttemptsExhausted { attempts: attempt, last: conflict });
    }
    let pause = options.backoff.full_jitter(attempt, fastrand::f64());
    let remaining = deadline.saturating_duration_since(Instant::now());
    if pause >= remaining {
        return Err(Error::DeadlineExceeded {
            deadline: options.deadline,
            attempts: attempt,
            last: Some(conflict),
        });
    }
    tokio::time::sleep(pause).await;
    Ok(())
}

/// What to do with a database error from one attempt.
/// `Ok(conflict)` when the attempt may be retried; otherwise the error to return: the
/// deadline's (built by `expired`) or the database error itself.
fn judge(
    store: &Store,
    error: StoreError,
    deadline: Instant,
    expired: impl FnOnce(StoreError) -> Error,
) -> Result<StoreError, Error> {
    // The per-attempt waits were set to the time left, so a wait that ran out at (or a
    // hair before, by timer granularity) the deadline is the deadline.
    let near_deadline =
        deadline.saturating_duration_since(Instant::now()) <= Duration::from_millis(5);
    if error.class() == ErrorClass::ConnectionLost {
        store.note_connection_lost();
    }
    match error.class() {
        ErrorClass::Concurrency(_) | ErrorClass::WaitTimeout if near_deadline => {
            Err(expired(error))
        }
        ErrorClass::Concurrency(_) => Ok(error),
        // Before COMMIT a lost connection took its transaction with it: nothing happened,
        // and the next attempt takes a fresh connection. (COMMIT's own loss is judged
        // before this, as an unknown outcome.)
        ErrorClass::ConnectionLost if near_deadline => Err(expired(error)),
        ErrorClass::ConnectionLost => Ok(error),
        ErrorClass::PoolExhausted => Err(Error::Busy { source: error }),
        _ => Err(Error::Store(error)),
    }
}

async fn rollback(tx: Tx<'_>) {
    let (store_tx, _discarded_effects) = tx.into_parts();
    if let Err(e) = store_tx.rollback().await {
        // A broken connection cannot roll back, and needs not: the server ends the
        // transaction when the connection goes. The pool drops such connections.
        tracing::debug!(error = %e, "rollback failed");
    }
}
