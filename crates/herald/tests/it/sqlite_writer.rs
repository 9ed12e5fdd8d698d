//! On SQLite, one process's writes take turns at its writer (`Store::sqlite_writer`), in
//! the order they arrive, before SQLite's lock: none of them waits in SQLite's busy handler
//! for another of the same process, or loses to it with SQLITE_BUSY.

use herald::sqlx::{self, AssertSqlSafe};
use herald::{AsConn, BoxFuture, Committed, Error, Herald, TxOptions};
use herald_store::BeginOptions;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::Poll;

const WRITERS: usize = 12;

async fn exec(herald: &Herald, sql: &str) {
    let sql = sql.to_string();
    herald
        .transaction(|tx| {
            let sql = sql.clone();
            Box::pin(async move {
                let c = tx.sqlite().expect("sqlite");
                sqlx::raw_sql(AssertSqlSafe(sql)).execute(c).await?;
                Ok(())
            })
        })
        .await
        .unwrap();
}

/// Polls every future not done yet, in index order; `all` asks for all of them to finish.
async fn drive<T>(
    futures: &mut [Pin<Box<dyn Future<Output = T> + Send + '_>>],
    out: &mut [Option<T>],
    all: bool,
) {
    poll_fn(|cx| {
        for (future, slot) in futures.iter_mut().zip(out.iter_mut()) {
            if slot.is_none()
                && let Poll::Ready(value) = future.as_mut().poll(cx)
            {
                *slot = Some(value);
            }
        }
        if !all || out.iter().all(Option::is_some) { Poll::Ready(()) } else { Poll::Pending }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_process_writes_take_turns_in_arrival_order_with_no_busy_conflict() {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    let herald = Herald::open(&url).await.expect("open");
    exec(&herald, "CREATE TABLE t_turns (seq INTEGER PRIMARY KEY AUTOINCREMENT, who INTEGER)")
        .await;

    // A writer of this process holds the writer (and SQLite's lock) while twelve more
    // arrive, one after another, each allowed a single attempt: a busy conflict would fail
    // it.
    let mut holder = herald.store().begin(&BeginOptions::default()).await.unwrap();
    sqlx::raw_sql("INSERT INTO t_turns (who) VALUES (-1)")
        .execute(match holder.as_conn() {
            herald::Conn::Sqlite(c) => c,
            _ => unreachable!("sqlite"),
        })
        .await
        .unwrap();
    let once = TxOptions { max_attempts: 1, ..TxOptions::default() };
    let write =
        |who: usize| -> Pin<Box<dyn Future<Output = Result<Committed<()>, Error>> + Send + '_>> {
            let herald = herald.clone();
            Box::pin(async move {
                herald
                    .transaction_with(&once, move |tx| -> BoxFuture<'_, Result<(), Error>> {
                        Box::pin(async move {
                            let sql = format!("INSERT INTO t_turns (who) VALUES ({who})");
                            sqlx::raw_sql(AssertSqlSafe(sql)).execute(tx.sqlite().unwrap()).await?;
                            Ok(())
                        })
                    })
                    .await
            })
        };
    let mut futures: Vec<_> = (0..WRITERS).map(write).collect();
    let mut out: Vec<Option<Result<Committed<()>, Error>>> = (0..WRITERS).map(|_| None).collect();
    // Each arrives (its first poll), in order, and waits for its turn.
    drive(&mut futures, &mut out, false).await;
    assert!(out.iter().all(Option::is_none), "none may write while the writer is held");
    holder.commit().await.unwrap();
    drive(&mut futures, &mut out, true).await;

    for (who, result) in out.into_iter().enumerate() {
        let committed = result.unwrap().unwrap_or_else(|e| panic!("writer {who}: {e}"));
        assert_eq!(committed.attempts, 1, "writer {who}");
    }
    let pool = herald.store().sqlite_pool().unwrap();
    let order: Vec<i64> =
        sqlx::query_scalar("SELECT who FROM t_turns ORDER BY seq").fetch_all(pool).await.unwrap();
    let expected: Vec<i64> = (-1..WRITERS as i64).collect();
    assert_eq!(order, expected, "the writes took turns in arrival order");
}
