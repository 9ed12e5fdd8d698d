//! `herald::demo` on every backend: the counts the README promises, observed for real.

use crate::common;
use herald::Backend;
use herald::demo::Runs;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_shows_the_article_counts() {
    for db in common::backends().await {
        let report =
            herald::demo::run(&db.url).await.unwrap_or_else(|e| panic!("{}: {e:?}", db.name()));
        let name = db.name();
        assert_eq!(report.backend, db.backend);
        assert_eq!(report.naive, Runs { closure_runs: 3, effects_fired: 3, job_rows: 1 }, "{name}");
        let expected_herald_runs = match db.backend {
            // Two real deadlocks, the closure re-run twice, the effect once.
            Backend::Postgres => 3,
            // BEGIN IMMEDIATE turns the competing writer into a wait: one run.
            Backend::Sqlite => 1,
            // Two real deadlocks (1213), as on PostgreSQL.
            Backend::MySql => 3,
        };
        assert_eq!(
            report.herald,
            Runs { closure_runs: expected_herald_runs, effects_fired: 1, job_rows: 1 },
            "{name}"
        );
        assert_eq!(report.herald_attempts, expected_herald_runs, "{name}");
        assert_eq!((report.plain_error_runs, report.plain_error.as_str()), (1, "card declined"));
        assert_eq!(report.receipts, (15, 2), "{name}");
        assert_eq!(report.receipts_reopened, (15, 2), "{name}");
        // Behind a held lock the call ends at its deadline (within the bound's rounding
        // and a little scheduling), never at the server's own lock wait.
        let w = &report.lock_wait;
        assert!(
            w.elapsed >= w.deadline.saturating_sub(Duration::from_millis(100))
                && w.elapsed < w.deadline + Duration::from_millis(1_500),
            "{name}: answered after {:?} for a deadline of {:?}",
            w.elapsed,
            w.deadline
        );
        assert!(w.error.contains("deadline"), "{name}: {}", w.error);
        assert!(w.closure_runs <= 1, "{name}: {w:?}");
        if db.backend == Backend::MySql {
            assert!(w.server_lock_wait.is_some_and(|s| s > w.deadline), "{name}: {w:?}");
        }
    }
}
