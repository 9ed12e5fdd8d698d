//! The transaction runner's guarantees (SPEC guarantee 8), on every backend, with real
//! conflicts: a transaction that loses a real serialization conflict, deadlock or
//! SQLite write lock, never an error constructed to look like one.

use crate::common;
use crate::common::backends;
use herald::sqlx::{self, AssertSqlSafe};
use herald::{Backend, Conn, Error, Herald, Isolation, Tx, TxOptions};
use herald_store::{BeginOptions, Store};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

// ---- helpers -------------------------------------------------------------------------

async fn exec(conn: Conn<'_>, sql: &str) -> Result<(), Error> {
    let sql = AssertSqlSafe(sql.to_string());
    match conn {
        Conn::Sqlite(c) => sqlx::raw_sql(sql).execute(c).await.map(drop)?,
        Conn::Postgres(c) => sqlx::raw_sql(sql).execute(c).await.map(drop)?,
        Conn::MySql(c) => sqlx::raw_sql(sql).execute(c).await.map(drop)?,
    }
    Ok(())
}

async fn ids(conn: Conn<'_>) -> Vec<i64> {
    let sql = "SELECT id FROM t_rows ORDER BY id";
    match conn {
        Conn::Sqlite(c) => sqlx::query_scalar(sql).fetch_all(c).await.unwrap(),
        Conn::Postgres(c) => sqlx::query_scalar(sql).fetch_all(c).await.unwrap(),
        Conn::MySql(c) => sqlx::query_scalar(sql).fetch_all(c).await.unwrap(),
    }
}

/// Autocommit statement on another pooled connection.
async fn exec_elsewhere(store: &Store, sql: &'static str) {
    match (store.sqlite_pool(), store.postgres_pool(), store.mysql_pool()) {
        (Some(p), _, _) => sqlx::raw_sql(sql).execute(p).await.map(drop).unwrap(),
        (_, Some(p), _) => sqlx::raw_sql(sql).execute(p).await.map(drop).unwrap(),
        (_, _, Some(p)) => sqlx::raw_sql(sql).execute(p).await.map(drop).unwrap(),
        _ => unreachable!(),
    }
}

async fn setup(herald: &Herald) {
    herald
        .transaction(|tx| {
            Box::pin(async move {
                exec(
                    tx.conn(),
                    "CREATE TABLE t_rows (id BIGINT PRIMARY KEY, label TEXT NOT NULL);
                     CREATE TABLE t_counters (id BIGINT PRIMARY KEY, n BIGINT NOT NULL);
                     INSERT INTO t_counters (id, n) VALUES (1, 0), (2, 0);",
                )
                .await
            })
        })
        .await
        .unwrap();
}

async fn row_ids(herald: &Herald) -> Vec<i64> {
    herald.transaction(|tx| Box::pin(async move { Ok(ids(tx.conn()).await) })).await.unwrap().value
}

/// Options under which `lose_conflict` produces a serialization failure on PostgreSQL.
fn conflict_options() -> TxOptions {
    TxOptions { isolation: Isolation::RepeatableRead, ..TxOptions::default() }
}

/// Makes the transaction `tx` meet a real concurrency error, and returns it.
///
/// PostgreSQL (REPEATABLE READ): `tx` reads a row, another connection commits an update
/// of it, `tx` updates it too → 40001 from the server. SQLite: `tx` holds the write lock
/// (BEGIN IMMEDIATE), so the only real conflict left is a second writer; the closure here
/// begins another transaction of the same store (a classic bug), which finds the process's
/// writer taken and is busy at once, as SQLITE_BUSY would be.
/// An attempt that starts a hair before the caller's deadline may instead have its read
/// cut short by the per-attempt `statement_timeout`; that error is returned as it is, for
/// the runner to judge (it is the deadline's).
async fn lose_conflict(tx: &mut Tx<'_>, store: &Store) -> Error {
    match tx.backend() {
        // MariaDB: REPEATABLE READ alone lets the update overwrite the concurrent one (a
        // lost update); with `innodb_snapshot_isolation` (on from 11.6) it loses with 1020.
        Backend::MySql => {
            if let Err(e) = exec(tx.conn(), "SET SESSION innodb_snapshot_isolation = ON").await {
                return e;
            }
            if let Err(e) = exec(tx.conn(), "SELECT n FROM t_counters WHERE id = 1").await {
                return e;
            }
            exec_elsewhere(store, "UPDATE t_counters SET n = n + 1 WHERE id = 1").await;
            exec(tx.conn(), "UPDATE t_counters SET n = n + 1 WHERE id = 1")
                .await
                .expect_err("the update must lose the snapshot conflict")
        }
        Backend::Postgres => {
            if let Err(e) = exec(tx.conn(), "SELECT n FROM t_counters WHERE id = 1").await {
                return e;
            }
            exec_elsewhere(store, "UPDATE t_counters SET n = n + 1 WHERE id = 1").await;
            exec(tx.conn(), "UPDATE t_counters SET n = n + 1 WHERE id = 1")
                .await
                .expect_err("the update must lose the serialization conflict")
        }
        Backend::Sqlite => {
            let begin = BeginOptions { wait_max: Duration::ZERO, ..BeginOptions::default() };
            Error::Store(store.begin(&begin).await.expect_err("a second writer must be busy"))
        }
    }
}

// ---- tests ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolled_back_attempts_discard_effects_and_the_committed_one_runs_them_once_in_order() {
    for db in backends().await {
        let herald = db.herald().await;
        setup(&herald).await;
        let fired = Arc::new(Mutex::new(Vec::new()));
        let runs = Arc::new(AtomicU32::new(0));
        let store = herald.store().clone();
        let committed = herald
            .transaction_with(&conflict_options(), |tx| {
                let (fired, runs, store) = (fired.clone(), runs.clone(), store.clone());
                Box::pin(async move {
                    let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                    for i in 1..=3 {
                        let fired = fired.clone();
                        tx.after_commit(move || fired.lock().unwrap().push((run, i)));
                    }
                    exec(tx.conn(), &format!("INSERT INTO t_rows (id, label) VALUES ({run}, 'a')"))
                        .await?;
                    if run <= 2 {
                        let conflict = lose_conflict(tx, &store).await;
                        assert!(conflict.concurrency().is_some(), "{conflict:?}");
                        return Err(conflict);
                    }
                    Ok(run)
                })
            })
            .await
            .unwrap_or_else(|e| panic!("{}: {e:?}", db.name()));
        assert_eq!((committed.value, committed.attempts), (3, 3), "{}", db.name());
        assert_eq!(*fired.lock().unwrap(), [(3, 1), (3, 2), (3, 3)], "{}", db.name());
        assert_eq!(row_ids(&herald).await, [3], "{}: only the committed attempt's row", db.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attempts_run_out_and_nothing_fires() {
    for db in backends().await {
        let herald = db.herald().await;
        setup(&herald).await;
        let fired = Arc::new(AtomicU32::new(0));
        let store = herald.store().clone();
        let options = TxOptions { max_attempts: 2, ..conflict_options() };
        let result = herald
            .transaction_with(&options, |tx| {
                let (fired, store) = (fired.clone(), store.clone());
                Box::pin(async move {
                    tx.after_commit(move || {
                        fired.fetch_add(1, Ordering::SeqCst);
                    });
                    exec(tx.conn(), "INSERT INTO t_rows (id, label) VALUES (1, 'a')").await?;
                    Err::<(), _>(lose_conflict(tx, &store).await)
                })
            })
            .await;
        match result {
            Err(Error::AttemptsExhausted { attempts: 2, .. }) => {}
            other => panic!("{}: expected AttemptsExhausted after 2, got {other:?}", db.name()),
        }
        assert_eq!(fired.load(Ordering::SeqCst), 0, "{}", db.name());
        assert!(row_ids(&herald).await.is_empty(), "{}", db.name());
    }
}

#[tokio::test]
async fn other_errors_propagate_on_the_first_attempt() {
    for db in backends().await {
        let herald = db.herald().await;
        setup(&herald).await;

        // A real constraint violation from the database.
        let runs = Arc::new(AtomicU32::new(0));
        let result = herald
            .transaction(|tx| {
                let runs = runs.clone();
                Box::pin(async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    exec(tx.conn(), "INSERT INTO t_rows (id, label) VALUES (1, 'a')").await?;
                    exec(tx.conn(), "INSERT INTO t_rows (id, label) VALUES (1, 'b')").await?;
                    Ok(())
                })
            })
            .await;
        match &result {
            Err(Error::Store(e)) if e.is_unique_violation() => {}
            other => panic!("{}: expected a unique violation, got {other:?}", db.name()),
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{}", db.name());

        // An application error.
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
        assert!(matches!(&result, Err(Error::App(e)) if e.to_string() == "card declined"));
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{}", db.name());
        assert!(row_ids(&herald).await.is_empty(), "{}", db.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_timeout_of_the_callers_own_making_is_not_a_deadline() {
    // NOWAIT raises 55P03 at once, long before the deadline: it is the caller's error.
    let Some(base) = common::postgres_url() else { return };
    let db = common::postgres(&base).await;
    let herald = db.herald().await;
    setup(&herald).await;
    let mut holder = herald.store().begin(&BeginOptions::default()).await.unwrap();
    exec(herald_store::AsConn::as_conn(&mut holder), "UPDATE t_counters SET n = 1 WHERE id = 1")
        .await
        .unwrap();
    let runs = Arc::new(AtomicU32::new(0));
    let result = herald
        .transaction(|tx| {
            let runs = runs.clone();
            Box::pin(async move {
                runs.fetch_add(1, Ordering::SeqCst);
                exec(tx.conn(), "SELECT n FROM t_counters WHERE id = 1 FOR UPDATE NOWAIT").await
            })
        })
        .await;
    holder.rollback().await.unwrap();
    match result {
        Err(Error::Store(e)) if e.code().as_deref() == Some("55P03") => {}
        other => panic!("expected the 55P03 error itself, got {other:?}"),
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_stops_retries_while_attempts_remain() {
    for db in backends().await {
        let herald = db.herald().await;
        setup(&herald).await;
        let store = herald.store().clone();
        let options = TxOptions {
            max_attempts: 100,
            deadline: Duration::from_millis(300),
            ..conflict_options()
        };
        let started = Instant::now();
        let result = herald
            .transaction_with(&options, |tx| {
                let store = store.clone();
                Box::pin(async move { Err::<(), _>(lose_conflict(tx, &store).await) })
            })
            .await;
        let elapsed = started.elapsed();
        match result {
            Err(Error::DeadlineExceeded { attempts, .. }) => {
                assert!((1..100).contains(&attempts), "{}: {attempts} attempts", db.name())
            }
            other => panic!("{}: expected DeadlineExceeded, got {other:?}", db.name()),
        }
        assert!(elapsed < Duration::from_secs(2), "{}: took {elapsed:?}", db.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deadline_bounds_a_real_lock_wait() {
    for db in backends().await {
        let herald = db.herald().await;
        setup(&herald).await;
        // Another transaction holds the row lock (PostgreSQL) or the write lock (SQLite)
        // for longer than the caller's deadline.
        let mut holder = herald.store().begin(&BeginOptions::default()).await.unwrap();
        exec(
            herald_store::AsConn::as_conn(&mut holder),
            "UPDATE t_counters SET n = 1 WHERE id = 1",
        )
        .await
        .unwrap();
        let runs = Arc::new(AtomicU32::new(0));
        let options = TxOptions {
            max_attempts: 10,
            deadline: Duration::from_millis(400),
            ..TxOptions::default()
        };
        let started = Instant::now();
        let result = herald
            .transaction_with(&options, |tx| {
                let runs = runs.clone();
                Box::pin(async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    exec(tx.conn(), "UPDATE t_counters SET n = 2 WHERE id = 1").await
                })
            })
            .await;
        let elapsed = started.elapsed();
        holder.rollback().await.unwrap();
        assert!(
            matches!(result, Err(Error::DeadlineExceeded { .. })),
            "{}: expected DeadlineExceeded, got {result:?}",
            db.name()
        );
        assert!(elapsed >= Duration::from_millis(350), "{}: gave up early, {elapsed:?}", db.name());
        assert!(elapsed < Duration::from_secs(3), "{}: took {elapsed:?}", db.name());
        // PostgreSQL: the closure waited on the row inside its one attempt. SQLite: the
        // wait happened at BEGIN IMMEDIATE, before the closure could run at all.
        let expected_runs = match db.backend {
            Backend::Postgres | Backend::MySql => 1,
            Backend::Sqlite => 0,
        };
        assert_eq!(runs.load(Ordering::SeqCst), expected_runs, "{}", db.name());
    }
}

/// MariaDB: a metadata-lock wait (another session's `LOCK TABLES … WRITE`, or an
/// application's `ALTER TABLE` on herald's tables) follows `lock_wait_timeout`, a year by
/// default, not InnoDB's row-lock timeout. The runner's bounds cover it too: the call
/// ends at its deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mariadb_the_deadline_bounds_a_metadata_lock_wait() {
    use herald::sqlx::Connection;
    let Some(base) = common::mysql_url() else { return };
    let db = common::mysql(&base).await;
    let herald = db.herald().await;
    setup(&herald).await;
    let mut holder = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    sqlx::raw_sql("LOCK TABLES t_counters WRITE").execute(&mut holder).await.unwrap();
    let options = TxOptions { deadline: Duration::from_millis(400), ..TxOptions::default() };
    let started = Instant::now();
    let result = herald
        .transaction_with(&options, |tx| {
            Box::pin(
                async move { exec(tx.conn(), "UPDATE t_counters SET n = 2 WHERE id = 1").await },
            )
        })
        .await;
    let elapsed = started.elapsed();
    sqlx::raw_sql("UNLOCK TABLES").execute(&mut holder).await.unwrap();
    assert!(matches!(result, Err(Error::DeadlineExceeded { .. })), "got {result:?}");
    assert!(elapsed >= Duration::from_millis(350), "gave up early, {elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "took {elapsed:?}");
}

#[tokio::test]
async fn a_nested_runner_is_an_error_and_a_savepoint_is_the_way_to_nest() {
    for db in backends().await {
        let herald = db.herald().await;
        setup(&herald).await;
        let inner_herald = herald.clone();
        let runs = Arc::new(AtomicU32::new(0));
        let nested = herald
            .transaction(|tx| {
                let (inner_herald, runs) = (inner_herald.clone(), runs.clone());
                Box::pin(async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    exec(tx.conn(), "INSERT INTO t_rows (id, label) VALUES (1, 'outer')").await?;
                    let inner =
                        inner_herald.transaction(|_tx| Box::pin(async move { Ok(()) })).await;
                    Ok(matches!(inner, Err(Error::NestedTransaction)))
                })
            })
            .await
            .unwrap();
        assert!(nested.value, "{}: the nested runner must be refused", db.name());
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{}", db.name());
        assert_eq!(row_ids(&herald).await, [1], "{}", db.name());
        // Outside any closure the same handle works again.
        herald.transaction(|_tx| Box::pin(async move { Ok(()) })).await.unwrap();
    }
}

#[tokio::test]
async fn a_failed_savepoint_undoes_its_work_and_effects_and_the_transaction_goes_on() {
    for db in backends().await {
        let herald = db.herald().await;
        setup(&herald).await;
        let fired = Arc::new(Mutex::new(Vec::new()));
        let f = fired.clone();
        herald
            .transaction(|tx| {
                let fired = f.clone();
                Box::pin(async move {
                    let outer = fired.clone();
                    tx.after_commit(move || outer.lock().unwrap().push("outer"));
                    exec(tx.conn(), "INSERT INTO t_rows (id, label) VALUES (1, 'before')").await?;
                    let inner = fired.clone();
                    let failed = tx
                        .savepoint(|tx| {
                            Box::pin(async move {
                                tx.after_commit(move || inner.lock().unwrap().push("inner"));
                                exec(tx.conn(), "INSERT INTO t_rows (id, label) VALUES (2, 'sp')")
                                    .await?;
                                // A real error inside the savepoint: a duplicate key.
                                exec(tx.conn(), "INSERT INTO t_rows (id, label) VALUES (1, 'dup')")
                                    .await
                            })
                        })
                        .await;
                    assert!(failed.is_err());
                    let kept = fired.clone();
                    tx.savepoint(|tx| {
                        Box::pin(async move {
                            tx.after_commit(move || kept.lock().unwrap().push("kept"));
                            exec(tx.conn(), "INSERT INTO t_rows (id, label) VALUES (3, 'sp2')")
                                .await
                        })
                    })
                    .await?;
                    exec(tx.conn(), "INSERT INTO t_rows (id, label) VALUES (4, 'after')").await
                })
            })
            .await
            .unwrap_or_else(|e| panic!("{}: {e:?}", db.name()));
        assert_eq!(row_ids(&herald).await, [1, 3, 4], "{}", db.name());
        assert_eq!(*fired.lock().unwrap(), ["outer", "kept"], "{}", db.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conflict_inside_a_savepoint_retries_the_whole_closure() {
    for db in backends().await {
        let herald = db.herald().await;
        setup(&herald).await;
        let runs = Arc::new(AtomicU32::new(0));
        let store = herald.store().clone();
        let committed = herald
            .transaction_with(&conflict_options(), |tx| {
                let (runs, store) = (runs.clone(), store.clone());
                Box::pin(async move {
                    let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                    exec(tx.conn(), &format!("INSERT INTO t_rows (id, label) VALUES ({run}, 'o')"))
                        .await?;
                    tx.savepoint(|tx| {
                        Box::pin(async move {
                            if run == 1 {
                                return Err(lose_conflict(tx, &store).await);
                            }
                            Ok(())
                        })
                    })
                    .await
                })
            })
            .await
            .unwrap_or_else(|e| panic!("{}: {e:?}", db.name()));
        assert_eq!(committed.attempts, 2, "{}", db.name());
        assert_eq!(row_ids(&herald).await, [2], "{}", db.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runners_that_deadlock_both_commit_after_one_retry() {
    // A real deadlock: two transactions lock rows 1 and 2 in opposite order. PostgreSQL
    // aborts one (40P01); the runner re-runs it and both commit. (SQLite cannot deadlock
    // here: BEGIN IMMEDIATE makes the second transaction wait before it takes any lock.)
    let Some(base) = common::postgres_url() else { return };
    let db = common::postgres(&base).await;
    let herald = db.herald().await;
    setup(&herald).await;
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let run = |first: i64, second: i64| {
        let (herald, barrier) = (herald.clone(), barrier.clone());
        tokio::spawn(async move {
            let runs = Arc::new(AtomicU32::new(0));
            let committed = herald
                .transaction(|tx| {
                    let (barrier, runs) = (barrier.clone(), runs.clone());
                    Box::pin(async move {
                        let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                        let lock = |id| format!("UPDATE t_counters SET n = n + 1 WHERE id = {id}");
                        exec(tx.conn(), &lock(first)).await?;
                        if run == 1 {
                            barrier.wait().await; // both hold their first row now
                        }
                        exec(tx.conn(), &lock(second)).await?;
                        Ok(())
                    })
                })
                .await
                .unwrap();
            committed.attempts
        })
    };
    let (a, b) = (run(1, 2), run(2, 1));
    let mut attempts = [a.await.unwrap(), b.await.unwrap()];
    attempts.sort();
    assert_eq!(attempts, [1, 2], "one victim, retried once");
    let totals = herald
        .transaction(|tx| {
            Box::pin(async move {
                let Conn::Postgres(c) = tx.conn() else { unreachable!() };
                Ok(sqlx::query_scalar::<_, i64>("SELECT sum(n)::bigint FROM t_counters")
                    .fetch_one(c)
                    .await?)
            })
        })
        .await
        .unwrap();
    assert_eq!(totals.value, 4, "both transactions' two updates committed once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serialization_failure_raised_by_commit_is_retried() {
    // SERIALIZABLE write skew: the closure reads k=2 and inserts k=1 while another
    // transaction reads k=1, inserts k=2 and commits first. PostgreSQL refuses the
    // closure's COMMIT with 40001; the runner re-runs the closure.
    let Some(base) = common::postgres_url() else { return };
    let db = common::postgres(&base).await;
    let herald = db.herald().await;
    herald
        .transaction(|tx| {
            Box::pin(async move { exec(tx.conn(), "CREATE TABLE t_ssi (k int)").await })
        })
        .await
        .unwrap();
    let store = herald.store().clone();
    let runs = Arc::new(AtomicU32::new(0));
    let insert_succeeded_in_first_run = Arc::new(AtomicU32::new(0));
    let options = TxOptions { isolation: Isolation::Serializable, ..TxOptions::default() };
    let committed = herald
        .transaction_with(&options, |tx| {
            let (store, runs, flag) =
                (store.clone(), runs.clone(), insert_succeeded_in_first_run.clone());
            Box::pin(async move {
                let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                exec(tx.conn(), "SELECT count(*) FROM t_ssi WHERE k = 2").await?;
                if run == 1 {
                    let serializable = BeginOptions {
                        isolation: Isolation::Serializable,
                        ..BeginOptions::default()
                    };
                    let mut other = store.begin(&serializable).await?;
                    let c = herald_store::AsConn::as_conn(&mut other);
                    exec(c, "SELECT count(*) FROM t_ssi WHERE k = 1").await?;
                    exec(herald_store::AsConn::as_conn(&mut other), "INSERT INTO t_ssi VALUES (2)")
                        .await?;
                    exec(tx.conn(), "INSERT INTO t_ssi VALUES (1)").await?;
                    flag.store(1, Ordering::SeqCst);
                    other.commit().await.expect("the other transaction commits first");
                    return Ok(run);
                }
                exec(tx.conn(), "INSERT INTO t_ssi VALUES (1)").await?;
                Ok(run)
            })
        })
        .await
        .unwrap();
    assert_eq!(insert_succeeded_in_first_run.load(Ordering::SeqCst), 1, "run 1 reached COMMIT");
    assert_eq!((committed.value, committed.attempts), (2, 2), "the COMMIT conflict was retried");
}

/// The transaction's connection is ended by the server (an operator's kill, a failover)
/// after its writes and before COMMIT answers: the runner cannot know whether it
/// committed, says so, and runs no effect.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_lost_during_commit_is_reported_as_unknown() {
    for db in backends().await {
        if db.backend == Backend::Sqlite {
            continue; // no server to lose
        }
        connection_lost_during_commit(&db).await;
    }
}

async fn connection_lost_during_commit(db: &common::TestDb) {
    let herald = db.herald().await;
    setup(&herald).await;
    let store = herald.store().clone();
    let fired = Arc::new(AtomicU32::new(0));
    let f = fired.clone();
    let result = herald
        .transaction(|tx| {
            let (store, fired) = (store.clone(), f.clone());
            Box::pin(async move {
                tx.after_commit(move || {
                    fired.fetch_add(1, Ordering::SeqCst);
                });
                exec(tx.conn(), "INSERT INTO t_rows (id, label) VALUES (1, 'x')").await?;
                let pid = herald_store::diag::backend_pid(tx.conn()).await?.unwrap();
                assert!(herald_store::diag::connection_terminate(&store, pid).await?);
                Ok(())
            })
        })
        .await;
    match result {
        Err(Error::CommitOutcomeUnknown { attempts: 1, .. }) => {}
        other => panic!("{}: expected CommitOutcomeUnknown, got {other:?}", db.name()),
    }
    assert_eq!(fired.load(Ordering::SeqCst), 0, "{}: no effect for an unknown outcome", db.name());
}

#[tokio::test]
async fn a_clean_run_takes_one_attempt_and_bad_options_are_refused() {
    for db in backends().await {
        let herald = db.herald().await;
        let committed = herald.transaction(|_tx| Box::pin(async move { Ok(7) })).await.unwrap();
        assert_eq!((committed.value, committed.attempts), (7, 1), "{}", db.name());
        let options = TxOptions { max_attempts: 0, ..TxOptions::default() };
        let result = herald.transaction_with(&options, |_tx| Box::pin(async move { Ok(()) })).await;
        assert!(matches!(result, Err(Error::Invalid(_))), "{}: {result:?}", db.name());
    }
}
