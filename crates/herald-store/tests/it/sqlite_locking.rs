//! SQLite's locks across connections and processes: a transaction's wait bound does not
//! stay behind on its pooled connection, a connection whose transaction SQLite ended by
//! itself is not pooled, and independent stores opening one fresh file at the same moment
//! all migrate it without tripping over each other.

use herald_core::limits::SQLITE_BUSY_TIMEOUT_DEFAULT;
use herald_store::migrate::schema_version_known;
use herald_store::sqlx::{self, Connection, SqliteConnection};
use herald_store::{
    AsConn, Backend, BeginOptions, Concurrency, Conn, ErrorClass, SqliteLock, Store, StoreOptions,
};
use std::time::{Duration, Instant};

/// How long the other connection keeps the write lock in the waiting test.
const HOLD: Duration = Duration::from_millis(300);

fn fresh() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    (dir, url)
}

/// A connection of its own (not the store's) holding SQLite's write lock.
async fn write_lock(url: &str) -> SqliteConnection {
    let mut conn = SqliteConnection::connect(url).await.expect("connect");
    sqlx::raw_sql("BEGIN IMMEDIATE").execute(&mut conn).await.expect("begin immediate");
    conn
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transactions_wait_bound_does_not_stay_on_its_pooled_connection() {
    let (_dir, url) = fresh();
    let options = StoreOptions { connections_max: 2, ..StoreOptions::default() };
    let store = Store::open(&url, &options).await.expect("open");
    let mut holder = write_lock(&url).await;

    // Two transactions at once, so both pooled connections run one, each bounded to 1 ms:
    // both give up at BEGIN, BUSY.
    let tiny = BeginOptions { wait_max: Duration::from_millis(1), ..BeginOptions::default() };
    let (a, b) = tokio::join!(store.begin(&tiny), store.begin(&tiny));
    for result in [a, b] {
        let error = result.expect_err("BEGIN IMMEDIATE under another writer's lock is BUSY");
        assert_eq!(error.class(), ErrorClass::Concurrency(Concurrency::SqliteBusy), "{error}");
    }

    // Every pooled connection is back to the store's busy timeout.
    let (mut one, mut two) = (store.acquire().await.unwrap(), store.acquire().await.unwrap());
    for conn in [&mut one, &mut two] {
        let herald_store::PooledConn::Sqlite(c) = conn else { unreachable!("sqlite") };
        let ms: i64 =
            sqlx::query_scalar("PRAGMA busy_timeout").fetch_one(&mut **c).await.expect("pragma");
        assert_eq!(ms, SQLITE_BUSY_TIMEOUT_DEFAULT.as_millis() as i64, "busy timeout on reuse");
    }
    drop((one, two));

    // So a statement outside any transaction waits for the lock instead of failing at
    // once: the lock goes after HOLD, and the write succeeds after waiting about that long.
    let release = tokio::spawn(async move {
        tokio::time::sleep(HOLD).await;
        sqlx::raw_sql("COMMIT").execute(&mut holder).await.expect("commit");
        holder
    });
    let started = Instant::now();
    let pool = store.sqlite_pool().expect("sqlite");
    sqlx::raw_sql("CREATE TABLE waited_for_the_lock (x INTEGER)")
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("after {:?}: {e}", started.elapsed()));
    let waited = started.elapsed();
    assert!(waited >= HOLD - Duration::from_millis(50), "waited only {waited:?}");
    release.await.expect("release").close().await.ok();
    store.close().await;
}

/// SQLite rolls a transaction back by itself when its COMMIT fails with SQLITE_FULL (a
/// full disk); sqlx still counts it open, and its ROLLBACK finds none. Such a connection is
/// closed, not pooled: otherwise every later BEGIN on it would be refused ("begin_with at
/// non-zero transaction depth"), long after the disk had room again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_whose_transaction_sqlite_ended_by_itself_is_not_pooled() {
    let (_dir, url) = fresh();
    let options = StoreOptions { connections_max: 2, ..StoreOptions::default() };
    let store = Store::open(&url, &options).await.expect("open");
    let mut tx = store.begin(&BeginOptions::default()).await.expect("begin");
    let Conn::Sqlite(conn) = tx.as_conn() else { unreachable!("sqlite") };
    // What SQLite does after a COMMIT that failed with SQLITE_FULL: no transaction is left.
    sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await.expect("end it behind sqlx's back");
    tx.commit().await.expect_err("COMMIT finds no transaction");

    // Both pooled connections at once (deferred, so neither waits for this process's
    // writer), a few times over: every one of them begins.
    let deferred = BeginOptions { sqlite_lock: SqliteLock::Deferred, ..BeginOptions::default() };
    for round in 0..3 {
        let (a, b) = tokio::join!(store.begin(&deferred), store.begin(&deferred));
        for tx in [a, b] {
            let tx =
                tx.unwrap_or_else(|e| panic!("round {round}: BEGIN on a pooled connection: {e}"));
            tx.rollback().await.expect("rollback");
        }
    }
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn independent_stores_opening_one_fresh_file_at_once_all_migrate_it() {
    const STORES: usize = 8;
    let known = schema_version_known(Backend::Sqlite);
    for round in 0..3 {
        let (_dir, url) = fresh();
        let start = std::sync::Arc::new(tokio::sync::Barrier::new(STORES));
        let opens: Vec<_> = (0..STORES)
            .map(|_| {
                let (url, start) = (url.clone(), start.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    let store = Store::connect(
                        &herald_store::DbUrl::parse(&url).expect("url"),
                        &StoreOptions::default(),
                    )
                    .await
                    .expect("connect");
                    let report = store.migrate().await;
                    store.close().await;
                    report
                })
            })
            .collect();
        let mut applied = Vec::new();
        for open in opens {
            let report = open.await.expect("task").unwrap_or_else(|e| {
                panic!("round {round}: a migrate failed: {e} ({:?})", std::error::Error::source(&e))
            });
            assert_eq!(report.version, known, "round {round}: {report:?}");
            applied.extend(report.applied);
        }
        // Each version applied once, all by one of them.
        assert_eq!(applied, (1..=known).collect::<Vec<_>>(), "round {round}");
    }
}
