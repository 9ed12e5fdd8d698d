//! Several `herald migrate` processes started at the same moment on one fresh database all
//! succeed, and the schema is applied once: exactly one of them reports applying it.
//! (Each `herald serve` and `Herald::open` migrates the same way on start.)

use crate::support::{MyDatabase, SharedDb};
use std::process::{Command, Output, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_herald");
/// Processes racing per round, and rounds (each on a fresh database).
const PROCESSES: usize = 6;
const ROUNDS: usize = 3;

/// `herald migrate --json` on `db` by `PROCESSES` processes started back to back (none is
/// waited for before the last has started), with none of the runner's `HERALD_*` settings.
fn race(db: &str) -> Vec<Output> {
    let children: Vec<_> = (0..PROCESSES)
        .map(|_| {
            let mut cmd = Command::new(BIN);
            for (key, _) in std::env::vars_os() {
                if key.to_string_lossy().starts_with("HERALD_") {
                    cmd.env_remove(&key);
                }
            }
            cmd.args(["migrate", "--json", "--db", db])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("spawn {BIN}: {e}"))
        })
        .collect();
    children.into_iter().map(|c| c.wait_with_output().expect("wait")).collect()
}

/// Every process succeeded, all report the newest version, exactly one applied anything
/// and it applied every version once; returns that version.
fn check(outputs: &[Output], what: &str) -> i64 {
    let mut reports = Vec::new();
    for out in outputs {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{what}: a migrate failed: {stderr}{stdout}");
        let report: serde_json::Value = serde_json::from_str(stdout.trim())
            .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {stdout}"));
        reports.push(report);
    }
    let version = reports[0]["version"].as_i64().unwrap_or_else(|| panic!("{reports:?}"));
    assert!(version >= 1, "{what}: {reports:?}");
    assert!(reports.iter().all(|r| r["version"] == version), "{what}: {reports:?}");
    let applied: Vec<_> =
        reports.iter().filter(|r| r["applied"].as_array().is_some_and(|a| !a.is_empty())).collect();
    assert_eq!(applied.len(), 1, "{what}: exactly one process applies the schema: {reports:?}");
    let expect: Vec<i64> = (1..=version).collect();
    assert_eq!(applied[0]["applied"], serde_json::json!(expect), "{what}: {reports:?}");
    version
}

#[test]
fn processes_migrating_one_fresh_sqlite_file_at_once_all_succeed() {
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("herald.db");
        let db = format!("sqlite://{}", path.display());
        let version = check(&race(&db), &format!("sqlite round {round}"));
        // The bookkeeping has one row per version, all successful.
        let rows = Command::new(BIN)
            .args(["migrate", "--json", "--db", &db])
            .output()
            .expect("migrate again");
        let again: serde_json::Value = serde_json::from_slice(&rows.stdout).expect("json");
        assert_eq!(again["applied"], serde_json::json!([]), "{again}");
        assert_eq!(again["version"], version, "{again}");
    }
}

#[test]
fn processes_migrating_one_fresh_postgres_schema_at_once_all_succeed() {
    let Some(base) = std::env::var("HERALD_TEST_POSTGRES_URL").ok().filter(|u| !u.is_empty())
    else {
        assert!(std::env::var_os("CI").is_none(), "CI needs HERALD_TEST_POSTGRES_URL");
        return;
    };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for round in 0..ROUNDS {
        let schema = format!("t_{}", uuid::Uuid::now_v7().simple());
        let admin = |sql: String| {
            runtime.block_on(async {
                use herald::sqlx::{self, Connection};
                let mut conn = sqlx::PgConnection::connect(&base).await.expect("connect");
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.expect("sql");
                conn.close().await.ok();
            })
        };
        admin(format!("CREATE SCHEMA {schema}"));
        let sep = if base.contains('?') { '&' } else { '?' };
        let db = format!("{base}{sep}options=-c%20search_path%3D{schema}");
        check(&race(&db), &format!("postgres round {round}"));
        admin(format!("DROP SCHEMA {schema} CASCADE"));
    }
}

/// MariaDB: DDL commits implicitly, so the lock (`GET_LOCK`, per database) is what keeps
/// the processes from applying the schema twice or reading it half-built.
#[test]
fn processes_migrating_one_fresh_mariadb_database_at_once_all_succeed() {
    let Some(base) = crate::support::mysql_url() else { return };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for round in 0..ROUNDS {
        let db = runtime.block_on(MyDatabase::create(&base));
        check(&race(&db.url), &format!("mariadb round {round}"));
    }
}

/// A migration a process left half-applied (the bookkeeping row still `success = FALSE`,
/// some of its tables created) is run again to its end by the next start, not skipped
/// and not refused.
#[test]
fn a_half_applied_mariadb_migration_is_finished_by_the_next_start() {
    let Some(base) = crate::support::mysql_url() else { return };
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let db = runtime.block_on(MyDatabase::create(&base));
    check(&race(&db.url), "mariadb before the crash");
    // As a process killed in the middle of migration 1 leaves it: the row says it failed,
    // and some of its tables are gone (never created).
    runtime.block_on(db.execute(
        "UPDATE herald_migrations SET success = FALSE WHERE version = 1;
         DROP TABLE delivery_replays; DROP TABLE herald_settings;",
    ));
    let again =
        Command::new(BIN).args(["migrate", "--json", "--db", &db.url]).output().expect("migrate");
    assert!(again.status.success(), "{}", String::from_utf8_lossy(&again.stderr));
    let report: serde_json::Value = serde_json::from_slice(&again.stdout).expect("json");
    assert_eq!(report["applied"], serde_json::json!([1]), "{report}");
    let shared = SharedDb::MySql(db);
    let tables = runtime.block_on(shared.count(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE()
         AND table_name IN ('delivery_replays', 'herald_settings')",
        None,
    ));
    assert_eq!(tables, 2, "the migration was run to its end");
}
