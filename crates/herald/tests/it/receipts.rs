//! Receipts (SPEC guarantee 9): `once` applies an operation once per (scope, operation
//! id), under real concurrency, durably, and never aborts the caller's transaction.

use crate::common::backends;
use herald::sqlx::{self, AssertSqlSafe};
use herald::{AsConn, Conn, Error, Herald, Once, once};
use std::sync::Arc;

async fn exec(conn: Conn<'_>, sql: &str) -> Result<(), Error> {
    let sql = AssertSqlSafe(sql.to_string());
    match conn {
        Conn::Sqlite(c) => sqlx::raw_sql(sql).execute(c).await.map(drop)?,
        Conn::Postgres(c) => sqlx::raw_sql(sql).execute(c).await.map(drop)?,
        Conn::MySql(c) => sqlx::raw_sql(sql).execute(c).await.map(drop)?,
    }
    Ok(())
}

async fn scalar(conn: Conn<'_>, sql: &'static str) -> i64 {
    match conn {
        Conn::Sqlite(c) => sqlx::query_scalar(sql).fetch_one(c).await.unwrap(),
        Conn::Postgres(c) => sqlx::query_scalar(sql).fetch_one(c).await.unwrap(),
        Conn::MySql(c) => sqlx::query_scalar(sql).fetch_one(c).await.unwrap(),
    }
}

async fn read(herald: &Herald, sql: &'static str) -> i64 {
    herald
        .transaction(|tx| Box::pin(async move { Ok(scalar(tx.conn(), sql).await) }))
        .await
        .unwrap()
        .value
}

async fn setup(herald: &Herald) {
    herald
        .transaction(|tx| {
            Box::pin(async move {
                exec(
                    tx.conn(),
                    "CREATE TABLE t_invoice (id BIGINT PRIMARY KEY, total BIGINT NOT NULL);
                     INSERT INTO t_invoice (id, total) VALUES (17, 0);
                     CREATE TABLE t_notes (note TEXT NOT NULL);",
                )
                .await
            })
        })
        .await
        .unwrap();
}

/// Applies one invoice adjustment event through `once`, in its own transaction.
async fn adjust(herald: &Herald, event_id: &'static str, units: i64) -> Once<()> {
    herald
        .transaction(|tx| {
            Box::pin(async move {
                once(tx, "invoice-adjustments", event_id, |tx| {
                    Box::pin(async move {
                        let sql =
                            format!("UPDATE t_invoice SET total = total + {units} WHERE id = 17");
                        exec(tx.conn(), &sql).await
                    })
                })
                .await
            })
        })
        .await
        .unwrap()
        .value
}

/// (invoice total, receipts in the scope) — the seed article's "15 2".
async fn tally(herald: &Herald) -> (i64, i64) {
    let total = read(herald, "SELECT total FROM t_invoice WHERE id = 17").await;
    let identities =
        read(herald, "SELECT count(*) FROM receipts WHERE scope = 'invoice-adjustments'").await;
    (total, identities)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_concurrent_calls_with_one_id_apply_exactly_once() {
    for db in backends().await {
        let herald = db.herald().await;
        setup(&herald).await;
        let start = Arc::new(tokio::sync::Barrier::new(32));
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let (herald, start) = (herald.clone(), start.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    adjust(&herald, "evt-concurrent", 10).await
                })
            })
            .collect();
        let mut applied = 0;
        for task in tasks {
            if task.await.unwrap().is_applied() {
                applied += 1;
            }
        }
        assert_eq!(applied, 1, "{}: exactly one call applies", db.name());
        assert_eq!(tally(&herald).await, (10, 1), "{}", db.name());
    }
}

#[tokio::test]
async fn the_seed_fixture_gives_15_2_and_again_after_reopening() {
    for db in backends().await {
        let herald = db.herald().await;
        setup(&herald).await;
        let outcomes = [
            adjust(&herald, "evt-17", 10).await,
            adjust(&herald, "evt-17", 10).await,
            adjust(&herald, "evt-18", 5).await,
        ];
        assert_eq!(outcomes, [Once::Applied(()), Once::AlreadyApplied, Once::Applied(())]);
        assert_eq!(tally(&herald).await, (15, 2), "{}", db.name());
        herald.close().await;

        let reopened = db.herald().await;
        let again = [
            adjust(&reopened, "evt-17", 10).await,
            adjust(&reopened, "evt-17", 10).await,
            adjust(&reopened, "evt-18", 5).await,
        ];
        assert!(again.iter().all(|o| *o == Once::AlreadyApplied), "{}: {again:?}", db.name());
        assert_eq!(tally(&reopened).await, (15, 2), "{}: after reopening", db.name());
    }
}

#[tokio::test]
async fn a_duplicate_leaves_the_callers_transaction_usable_and_its_writes_commit() {
    for db in backends().await {
        let herald = db.herald().await;
        setup(&herald).await;
        adjust(&herald, "evt-17", 10).await;

        // Through herald's runner: write, duplicate once, write again, commit.
        herald
            .transaction(|tx| {
                Box::pin(async move {
                    exec(tx.conn(), "INSERT INTO t_notes (note) VALUES ('before')").await?;
                    let dup = once(tx, "invoice-adjustments", "evt-17", |_tx| {
                        Box::pin(async move { panic!("a duplicate must not apply") })
                    })
                    .await?;
                    assert_eq!(dup, Once::<()>::AlreadyApplied);
                    exec(tx.conn(), "INSERT INTO t_notes (note) VALUES ('after')").await
                })
            })
            .await
            .unwrap_or_else(|e| panic!("{}: {e:?}", db.name()));

        // Through the application's own sqlx transaction (no herald runner at all).
        let store = herald.store();
        match (store.sqlite_pool(), store.postgres_pool(), store.mysql_pool()) {
            (Some(pool), _, _) => {
                let mut own = pool.begin().await.unwrap();
                exec(own.as_conn(), "INSERT INTO t_notes (note) VALUES ('own')").await.unwrap();
                let dup = once(&mut own, "invoice-adjustments", "evt-17", |_c| {
                    Box::pin(async move { Ok(()) })
                })
                .await
                .unwrap();
                assert_eq!(dup, Once::AlreadyApplied);
                own.commit().await.unwrap();
            }
            (_, Some(pool), _) => {
                let mut own = pool.begin().await.unwrap();
                exec(own.as_conn(), "INSERT INTO t_notes (note) VALUES ('own')").await.unwrap();
                let dup = once(&mut own, "invoice-adjustments", "evt-17", |_c| {
                    Box::pin(async move { Ok(()) })
                })
                .await
                .unwrap();
                assert_eq!(dup, Once::AlreadyApplied);
                own.commit().await.unwrap();
            }
            (_, _, Some(pool)) => {
                let mut own = pool.begin().await.unwrap();
                exec(own.as_conn(), "INSERT INTO t_notes (note) VALUES ('own')").await.unwrap();
                let dup = once(&mut own, "invoice-adjustments", "evt-17", |_c| {
                    Box::pin(async move { Ok(()) })
                })
                .await
                .unwrap();
                assert_eq!(dup, Once::AlreadyApplied);
                own.commit().await.unwrap();
            }
            _ => unreachable!(),
        }
        assert_eq!(read(&herald, "SELECT count(*) FROM t_notes").await, 3, "{}", db.name());
        assert_eq!(tally(&herald).await, (10, 1), "{}", db.name());
    }
}

#[tokio::test]
async fn a_failed_apply_rolls_back_its_receipt_so_a_retry_applies() {
    for db in backends().await {
        let herald = db.herald().await;
        setup(&herald).await;
        let failed = herald
            .transaction(|tx| {
                Box::pin(async move {
                    once(tx, "invoice-adjustments", "evt-17", |tx| {
                        Box::pin(async move {
                            exec(tx.conn(), "UPDATE t_invoice SET total = total + 10").await?;
                            Err::<(), _>(Error::app("ledger unavailable"))
                        })
                    })
                    .await
                })
            })
            .await;
        assert!(matches!(failed, Err(Error::App(_))), "{}: {failed:?}", db.name());
        assert_eq!(tally(&herald).await, (0, 0), "{}: nothing kept", db.name());
        assert_eq!(adjust(&herald, "evt-17", 10).await, Once::Applied(()));
        assert_eq!(tally(&herald).await, (10, 1), "{}", db.name());
    }
}

#[tokio::test]
async fn bad_ids_and_connections_outside_a_transaction_are_refused_and_write_nothing() {
    for db in backends().await {
        let herald = db.herald().await;
        setup(&herald).await;
        let long = "x".repeat(256);
        // NUL among them: a driver that cuts strings at NUL would make "evt\0-1" and
        // "evt\0-2" one receipt, so the second operation would be skipped.
        for (scope, id, refusal) in [
            ("", "evt-1", ("scope", "empty")),
            ("invoice-adjustments", "", ("operation_id", "empty")),
            ("invoice-adjustments", long.as_str(), ("operation_id", "too_long")),
            ("invoice-adjustments", "evt\u{0}-1", ("operation_id", "control_character")),
            ("invoices\u{0}x", "evt-1", ("scope", "control_character")),
        ] {
            let (scope, id) = (scope.to_string(), id.to_string());
            let result = herald
                .transaction(|tx| {
                    let (scope, id) = (scope.clone(), id.clone());
                    Box::pin(async move {
                        let refused =
                            once(tx, &scope, &id, |_tx| Box::pin(async move { Ok(()) })).await;
                        match &refused {
                            Err(Error::Invalid(herald::Invalid {
                                field: Some(field),
                                code,
                                ..
                            })) => assert_eq!((*field, *code), refusal, "{refused:?}"),
                            other => panic!("{scope:?} {id:?}: {other:?}"),
                        }
                        // The transaction is still usable after the refusal.
                        exec(tx.conn(), "INSERT INTO t_notes (note) VALUES ('still usable')").await
                    })
                })
                .await;
            assert!(result.is_ok(), "{}: {result:?}", db.name());
        }
        let store = herald.store();
        let refused = match (store.sqlite_pool(), store.postgres_pool(), store.mysql_pool()) {
            (Some(pool), _, _) => {
                let mut conn = pool.acquire().await.unwrap();
                once(&mut conn, "invoice-adjustments", "evt-1", |_c| {
                    Box::pin(async move { Ok(()) })
                })
                .await
            }
            (_, Some(pool), _) => {
                let mut conn = pool.acquire().await.unwrap();
                once(&mut conn, "invoice-adjustments", "evt-1", |_c| {
                    Box::pin(async move { Ok(()) })
                })
                .await
            }
            (_, _, Some(pool)) => {
                let mut conn = pool.acquire().await.unwrap();
                once(&mut conn, "invoice-adjustments", "evt-1", |_c| {
                    Box::pin(async move { Ok(()) })
                })
                .await
            }
            _ => unreachable!(),
        };
        assert!(matches!(refused, Err(Error::NotInTransaction)), "{}: {refused:?}", db.name());
        assert_eq!(read(&herald, "SELECT count(*) FROM receipts").await, 0, "{}", db.name());
        assert_eq!(read(&herald, "SELECT count(*) FROM t_notes").await, 5, "{}", db.name());
    }
}
