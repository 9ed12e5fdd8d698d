//! `herald demo`: the seed article's experiment, run for real. A retried transaction with
//! an inline side effect fires it once per attempt; the same work through herald's runner
//! with `after_commit` fires it once; a non-concurrency error is not retried; receipts
//! apply an event once, also after the database is closed and reopened; and a lock held
//! by another connection past the caller's deadline ends the call at that deadline — not
//! after the seed's five attempts of `innodb_lock_wait_timeout` each.
//!
//! The conflicts are real: on PostgreSQL a second connection takes two rows in the
//! opposite order and the server's deadlock detector picks the closure as its victim; on
//! SQLite a second connection commits a write under a deferred transaction's read
//! snapshot (SQLITE_BUSY_SNAPSHOT). Nothing here throws an error that merely says
//! "deadlock". The counts printed are the counts observed.

use crate::error::Error;
use crate::handle::Herald;
use crate::once::once;
use herald_core::Scope;
use herald_store::demo::{
    demo_account_read, demo_account_touch, demo_invoice_add, demo_invoice_total, demo_job_insert,
    demo_jobs_count, demo_server_lock_wait, demo_setup,
};
use herald_store::diag::{backend_pid, postgres_waiting_on_lock};
use herald_store::receipts::receipts_count;
use herald_store::{Backend, BeginOptions, Conn, SqliteLock, Store, StoreTx};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;

/// How many runs of the closure meet a conflict before one is let through.
const CONFLICTS: u32 = 2;
/// Attempts of the naive loop (the article's `attempts: 5`).
const NAIVE_ATTEMPTS: u32 = 5;
/// The receipts fixture of the seed article: (event id, units).
pub const RECEIPT_EVENTS: [(&str, i64); 3] = [("evt-17", 10), ("evt-17", 10), ("evt-18", 5)];
const RECEIPT_SCOPE: &str = "demo-invoice-adjustments";
const INVOICE_ID: i32 = 17;
/// The deadline of part 5's call, behind a lock held longer.
pub const LOCK_WAIT_DEADLINE: Duration = Duration::from_secs(2);
/// How long part 5's other connection would hold the lock if nothing released it.
const LOCK_HELD_AT_MOST: Duration = Duration::from_secs(30);

/// What the demo observed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoReport {
    pub backend: Backend,
    /// A framework-style retried transaction with the effect inline.
    pub naive: Runs,
    /// herald's runner, the effect registered with `after_commit`.
    pub herald: Runs,
    /// Runner attempts reported by herald for part 2.
    pub herald_attempts: u32,
    /// On SQLite: how long the competing writer waited for herald's write lock.
    pub competing_writer_waited: Option<Duration>,
    /// Runs of a closure that failed with a non-concurrency error.
    pub plain_error_runs: u32,
    pub plain_error: String,
    /// (total, identities) of the receipts fixture, first run.
    pub receipts: (i64, i64),
    /// The same after closing and reopening the database.
    pub receipts_reopened: (i64, i64),
    /// A lock held past the call's deadline.
    pub lock_wait: LockWait,
}

/// Part 5: herald's call behind a lock another connection holds, with a deadline of
/// [`LOCK_WAIT_DEADLINE`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockWait {
    pub deadline: Duration,
    /// From the call to its answer.
    pub elapsed: Duration,
    pub closure_runs: u32,
    pub error: String,
    /// The server's default bound on one lock wait (`None`: none, it waits for ever; on
    /// SQLite, the busy timeout herald sets): what each attempt of a framework's
    /// `attempts: 5` would wait instead.
    pub server_lock_wait: Option<Duration>,
}

/// Counters of one part of the demo.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runs {
    pub closure_runs: u32,
    pub effects_fired: u32,
    pub job_rows: i64,
}

type Adversaries = Arc<Mutex<Vec<JoinHandle<Result<Option<Duration>, Error>>>>>;

/// Runs the whole demo against `url`.
pub async fn run(url: &str) -> Result<DemoReport, Error> {
    let herald = Herald::open(url).await?;
    herald
        .transaction(|tx| {
            Box::pin(async move {
                demo_setup(tx.conn()).await?;
                Ok(())
            })
        })
        .await?;
    let run_id = uuid::Uuid::now_v7().to_string();
    let naive = naive_part(herald.store(), &run_id).await?;
    let (herald_runs, herald_attempts, waited) = herald_part(&herald, &run_id).await?;
    let (plain_error_runs, plain_error) = plain_error_part(&herald).await?;
    let receipts = receipts_part(&herald).await?;
    let lock_wait = lock_wait_part(&herald).await?;
    herald.close().await;
    let reopened = Herald::open(url).await?;
    let receipts_reopened = receipts_part(&reopened).await?;
    reopened.close().await;
    Ok(DemoReport {
        backend: herald.backend(),
        naive,
        herald: herald_runs,
        herald_attempts,
        competing_writer_waited: waited,
        plain_error_runs,
        plain_error,
        receipts,
        receipts_reopened,
        lock_wait,
    })
}

/// Part 5: another connection takes account 1's lock (on SQLite, the write lock) and keeps
/// it; herald's runner, given [`LOCK_WAIT_DEADLINE`], runs a closure that needs it. Every
/// wait inside an attempt is bounded by the time left (`innodb_lock_wait_timeout` and
/// `max_statement_time` on MariaDB, `statement_timeout` on PostgreSQL, the busy timeout on
/// SQLite), so the call ends at its deadline with an error that says so.
async fn lock_wait_part(herald: &Herald) -> Result<LockWait, Error> {
    let store = herald.store().clone();
    let server_lock_wait = {
        let mut tx = store.begin(&BeginOptions::default()).await?;
        let wait = demo_server_lock_wait(conn(&mut tx)).await?;
        tx.rollback().await?;
        wait
    };
    let (locked, held) = tokio::sync::oneshot::channel();
    let (release, released) = tokio::sync::oneshot::channel::<()>();
    let holder = tokio::spawn(async move {
        // The other application's transaction holds the lock idle, on purpose.
        let begin = BeginOptions {
            wait_max: LOCK_HELD_AT_MOST,
            idle_max: LOCK_HELD_AT_MOST,
            ..BeginOptions::default()
        };
        let mut tx = store.begin(&begin).await?;
        demo_account_touch(conn(&mut tx), 1).await?;
        let _ = locked.send(());
        let _ = tokio::time::timeout(LOCK_HELD_AT_MOST, released).await;
        tx.rollback().await?;
        Ok::<_, Error>(())
    });
    held.await.map_err(|_| Error::app("the other connection did not take the lock"))?;
    let runs = Arc::new(AtomicU32::new(0));
    let options = crate::TxOptions { deadline: LOCK_WAIT_DEADLINE, ..crate::TxOptions::default() };
    let started = Instant::now();
    let result = herald
        .transaction_with(&options, |tx| {
            let runs = runs.clone();
            Box::pin(async move {
                runs.fetch_add(1, Ordering::SeqCst);
                demo_account_touch(tx.conn(), 1).await?;
                Ok(())
            })
        })
        .await;
    let elapsed = started.elapsed();
    let _ = release.send(());
    holder.await.map_err(|e| Error::app(format!("the lock holder failed: {e}")))??;
    let error = match result {
        Ok(_) => "none: the lock was free".to_string(),
        Err(e) => e.to_string(),
    };
    Ok(LockWait {
        deadline: LOCK_WAIT_DEADLINE,
        elapsed,
        closure_runs: runs.load(Ordering::SeqCst),
        error,
        server_lock_wait,
    })
}

/// Part 1: `for attempt in 1..=5 { BEGIN; closure; COMMIT }`, retrying on concurrency
/// errors, with the effect inline — what `DB::transaction(fn, attempts: 5)` does.
async fn naive_part(store: &Store, run_id: &str) -> Result<Runs, Error> {
    let runs = AtomicU32::new(0);
    let effects = AtomicU32::new(0);
    let adversaries = Adversaries::default();
    for _attempt in 1..=NAIVE_ATTEMPTS {
        let begin = BeginOptions { sqlite_lock: SqliteLock::Deferred, ..BeginOptions::default() };
        let mut tx = store.begin(&begin).await?;
        let result = async {
            let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
            effects.fetch_add(1, Ordering::SeqCst); // the email, sent inline
            if run <= CONFLICTS {
                collide(conn(&mut tx), store, SqliteLock::Deferred, &adversaries).await?;
            }
            demo_job_insert(conn(&mut tx), run_id, "naive").await?;
            Ok::<_, Error>(())
        }
        .await;
        match result {
            Ok(()) => {
                tx.commit().await?;
                break;
            }
            Err(e) if e.concurrency().is_some() => {
                let _ = tx.rollback().await;
            }
            Err(e) => {
                let _ = tx.rollback().await;
                return Err(e);
            }
        }
    }
    join(&adversaries).await?;
    let job_rows = jobs(store, run_id, "naive").await?;
    Ok(Runs {
        closure_runs: runs.load(Ordering::SeqCst),
        effects_fired: effects.load(Ordering::SeqCst),
        job_rows,
    })
}

/// Part 2: the same work through the runner, the effect registered with `after_commit`.
async fn herald_part(
    herald: &Herald,
    run_id: &str,
) -> Result<(Runs, u32, Option<Duration>), Error> {
    let runs = Arc::new(AtomicU32::new(0));
    let effects = Arc::new(AtomicU32::new(0));
    let adversaries = Adversaries::default();
    let store = herald.store().clone();
    let committed = herald
        .transaction(|tx| {
            let (runs, effects, adversaries, store) =
                (runs.clone(), effects.clone(), adversaries.clone(), store.clone());
            let run_id = run_id.to_string();
            Box::pin(async move {
                let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                tx.after_commit(move || {
                    effects.fetch_add(1, Ordering::SeqCst); // the email, after commit
                });
                demo_job_insert(tx.conn(), &run_id, "herald").await?;
                if run <= CONFLICTS {
                    collide(tx.conn(), &store, SqliteLock::Immediate, &adversaries).await?;
                }
                Ok(())
            })
        })
        .await?;
    let waited = join(&adversaries).await?;
    let job_rows = jobs(herald.store(), run_id, "herald").await?;
    let runs = Runs {
        closure_runs: runs.load(Ordering::SeqCst),
        effects_fired: effects.load(Ordering::SeqCst),
        job_rows,
    };
    Ok((runs, committed.attempts, waited))
}

/// Part 3: an error that is not a conflict propagates after one run.
async fn plain_error_part(herald: &Herald) -> Result<(u32, String), Error> {
    let runs = Arc::new(AtomicU32::new(0));
    let result = herald
        .transaction(|_tx| {
            let runs = runs.clone();
            Box::pin(async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Err::<(), _>(Error::app("card declined"))
            })
        })
        .await;
    let message = match result {
        Ok(_) => "no error".to_string(),
        Err(e) => e.to_string(),
    };
    Ok((runs.load(Ordering::SeqCst), message))
}

/// Part 4: the receipts fixture; returns (invoice total, identities applied).
async fn receipts_part(herald: &Herald) -> Result<(i64, i64), Error> {
    for (event_id, units) in RECEIPT_EVENTS {
        herald
            .transaction(|tx| {
                Box::pin(async move {
                    once(tx, RECEIPT_SCOPE, event_id, |tx| {
                        Box::pin(async move {
                            demo_invoice_add(tx.conn(), INVOICE_ID, units).await?;
                            Ok(())
                        })
                    })
                    .await
                })
            })
            .await?;
    }
    let scope = Scope::new(RECEIPT_SCOPE)?;
    herald
        .read(|mut conn, _| {
            let scope = scope.clone();
            Box::pin(async move {
                let total = demo_invoice_total(conn.reborrow(), INVOICE_ID).await?;
                let identities = receipts_count(conn, &scope).await?;
                Ok((total, identities))
            })
        })
        .await
}

fn conn(tx: &mut StoreTx) -> Conn<'_> {
    herald_store::AsConn::as_conn(tx)
}

async fn jobs(store: &Store, run_id: &str, label: &str) -> Result<i64, Error> {
    let mut tx = store.begin(&BeginOptions::default()).await?;
    let n = demo_jobs_count(conn(&mut tx), run_id, label).await?;
    tx.commit().await?;
    Ok(n)
}

/// Waits for every adversary; returns the longest wait one of them measured.
async fn join(adversaries: &Adversaries) -> Result<Option<Duration>, Error> {
    let handles: Vec<_> = match adversaries.lock() {
        Ok(mut guard) => guard.drain(..).collect(),
        Err(poisoned) => poisoned.into_inner().drain(..).collect(),
    };
    let mut waited = None;
    for handle in handles {
        let result = handle.await.map_err(|e| Error::app(format!("adversary task failed: {e}")))?;
        waited = waited.max(result?);
    }
    Ok(waited)
}

/// Makes a second connection contend with the transaction on `conn`, for real. Returns
/// the error the transaction met (if the database chose it as the loser).
async fn collide(
    mut conn: Conn<'_>,
    store: &Store,
    lock: SqliteLock,
    adversaries: &Adversaries,
) -> Result<(), Error> {
    match (conn.backend(), lock) {
        (Backend::MySql, _) => {
            // As on PostgreSQL: we hold row 1, the adversary row 2 and then asks for row 1
            // while we ask for row 2. InnoDB finds the cycle the moment it closes, whoever
            // closes it, and rolls back the lighter transaction: the adversary also writes
            // a few rows, so that is ours (1213, the whole transaction rolled back).
            demo_account_touch(conn.reborrow(), 1).await?;
            let (locked, row2_locked) = tokio::sync::oneshot::channel();
            let adversary = tokio::spawn(mysql_adversary(store.clone(), locked));
            push(adversaries, adversary);
            row2_locked.await.map_err(|_| Error::app("adversary did not lock row 2"))?;
            demo_account_touch(conn.reborrow(), 2).await?;
            Ok(())
        }
        (Backend::Postgres, _) => {
            // We hold row 1; the adversary takes row 2, waits until we queue for row 2,
            // then asks for row 1. We started waiting first, so our deadlock_timeout
            // fires first and the server aborts us with 40P01.
            let pid =
                backend_pid(conn.reborrow()).await?.ok_or_else(|| Error::app("no backend pid"))?;
            demo_account_touch(conn.reborrow(), 1).await?;
            let (locked, row2_locked) = tokio::sync::oneshot::channel();
            let adversary = tokio::spawn(postgres_adversary(store.clone(), pid, locked));
            push(adversaries, adversary);
            row2_locked.await.map_err(|_| Error::app("adversary did not lock row 2"))?;
            demo_account_touch(conn.reborrow(), 2).await?;
            Ok(())
        }
        (Backend::Sqlite, SqliteLock::Deferred) => {
            // A deferred transaction reads (its snapshot starts), another connection
            // commits a write, and our write can no longer be serialised after it:
            // SQLite answers SQLITE_BUSY_SNAPSHOT at once, without waiting.
            demo_account_read(conn.reborrow(), 1).await?;
            sqlite_write(store.clone()).await?;
            demo_account_touch(conn.reborrow(), 1).await?;
            Ok(())
        }
        (Backend::Sqlite, SqliteLock::Immediate) => {
            // BEGIN IMMEDIATE already holds the write lock: the other writer waits for
            // us instead of making us retry.
            demo_account_read(conn.reborrow(), 1).await?;
            push(adversaries, tokio::spawn(sqlite_write(store.clone())));
            tokio::time::sleep(Duration::from_millis(100)).await;
            demo_account_touch(conn.reborrow(), 1).await?;
            Ok(())
        }
    }
}

fn push(adversaries: &Adversaries, handle: JoinHandle<Result<Option<Duration>, Error>>) {
    match adversaries.lock() {
        Ok(mut guard) => guard.push(handle),
        Err(poisoned) => poisoned.into_inner().push(handle),
    }
}

async fn postgres_adversary(
    store: Store,
    victim_pid: i32,
    locked: tokio::sync::oneshot::Sender<()>,
) -> Result<Option<Duration>, Error> {
    let mut tx = store.begin(&BeginOptions::default()).await?;
    demo_account_touch(conn(&mut tx), 2).await?;
    let _ = locked.send(());
    let started = Instant::now();
    while !postgres_waiting_on_lock(&store, victim_pid).await? {
        if started.elapsed() > Duration::from_secs(5) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Start waiting well after the victim did, so its deadlock check (deadlock_timeout
    // after it began waiting) is the one that finds the cycle, even on a loaded machine.
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Blocks until the victim's transaction is aborted, then takes row 1.
    let result = demo_account_touch(conn(&mut tx), 1).await;
    tx.rollback().await?;
    match result {
        // If the server picked us instead, the demo's counts show it honestly.
        Err(e) if e.class() != herald_store::ErrorClass::Other => Ok(None),
        Err(e) => Err(e.into()),
        Ok(()) => Ok(None),
    }
}

async fn mysql_adversary(
    store: Store,
    locked: tokio::sync::oneshot::Sender<()>,
) -> Result<Option<Duration>, Error> {
    let mut tx = store.begin(&BeginOptions::default()).await?;
    demo_account_touch(conn(&mut tx), 2).await?;
    // Heavier than the victim (InnoDB's deadlock victim is the transaction that changed
    // fewer rows); rolled back with the rest.
    for _ in 0..4 {
        demo_job_insert(conn(&mut tx), "adversary", "weight").await?;
    }
    let _ = locked.send(());
    // Waits for row 1 until the victim is rolled back (or closes the cycle itself).
    let result = demo_account_touch(conn(&mut tx), 1).await;
    tx.rollback().await?;
    match result {
        Err(e) if e.class() != herald_store::ErrorClass::Other => Ok(None),
        Err(e) => Err(e.into()),
        Ok(()) => Ok(None),
    }
}

async fn sqlite_write(store: Store) -> Result<Option<Duration>, Error> {
    let started = Instant::now();
    let begin = BeginOptions { wait_max: Duration::from_secs(5), ..BeginOptions::default() };
    let mut tx = store.begin(&begin).await?;
    let waited = started.elapsed();
    demo_account_touch(conn(&mut tx), 2).await?;
    tx.commit().await?;
    Ok(Some(waited))
}
