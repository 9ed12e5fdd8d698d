//! Several `herald migrate` processes started at the same moment on one fresh database all
//! succeed, and the schema is applied once: exactly one of them reports applying it.
//! (Each `herald serve` and `Herald::open` migrates the same way on start.)

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
    assert!(version >= 3, "{what}: {reports:?}");
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
