//! SQLite's locks across connections and processes: independent stores opening one fresh
//! file at the same moment all migrate it without tripping over each other.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use herald_store::migrate::schema_version_known;
use herald_store::{Backend, Store, StoreOptions};

fn fresh() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    let url = format!("sqlite://{}", dir.path().join("herald.db").display());
    (dir, url)
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
