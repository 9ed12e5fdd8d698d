//! End-to-end tests of the `herald` binary: exit codes, output, and that every failure is
//! one `error:` line on stderr that leaves the data untouched.

mod db;

use db::{TestDb, postgres_url, set_granted, sqlite_master, sqlite_open};
use herald::sqlx::{self, Connection};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// A password planted in URLs: it must never reach the terminal.
const SECRET: &str = "hunter2";
/// The CLI's connect timeout is 5 s; an unreachable server must be reported well before this.
const UNREACHABLE_BOUND: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------------------
// Running the binary

/// What one run of the binary produced.
#[derive(Debug)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

/// Runs `herald args…` in `cwd`, with no inherited `HERALD_DB` or `RUST_LOG`.
fn herald_in(cwd: &Path, args: &[&str]) -> Run {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(args)
        .current_dir(cwd)
        .env_remove("HERALD_DB")
        .env_remove("RUST_LOG")
        .output()
        .expect("run the herald binary");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: started.elapsed(),
    }
}

/// Runs `herald args…` in a scratch working directory, so nothing lands in the repository.
fn herald(args: &[&str]) -> Run {
    let cwd = tempfile::tempdir().expect("tempdir");
    herald_in(cwd.path(), args)
}

/// Asserts success without a panic; returns stdout.
fn expect_success<'a>(run: &'a Run, what: &str) -> &'a str {
    assert_eq!(run.code, Some(0), "{what}: expected exit 0\n{run:#?}");
    assert!(!run.stderr.contains("panicked"), "{what}: panicked\n{run:#?}");
    &run.stdout
}

/// Asserts the failure contract: a non-zero exit (not a signal), no panic, and stderr is
/// exactly one non-empty line starting with `error:`. Returns that line.
fn expect_error_line<'a>(run: &'a Run, what: &str) -> &'a str {
    assert!(matches!(run.code, Some(c) if c != 0), "{what}: expected a non-zero exit\n{run:#?}");
    assert!(!run.stderr.contains("panicked"), "{what}: panicked\n{run:#?}");
    let lines: Vec<&str> = run.stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{what}: expected exactly one stderr line\n{run:#?}");
    assert!(lines[0].starts_with("error:"), "{what}: stderr must start with `error:`\n{run:#?}");
    assert!(!run.stderr.contains(SECRET), "{what}: the password leaked\n{run:#?}");
    lines[0]
}

fn parse_json(stdout: &str, what: &str) -> Value {
    serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{what}: stdout is not JSON ({e}):\n{stdout}"))
}

fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Migrates `db` with the binary and returns the schema version it reports.
fn migrate_ok(db: &TestDb) -> i64 {
    let what = format!("{}: migrate --json", db.name());
    let run = herald(&["migrate", "--db", &db.url(), "--json"]);
    let json = parse_json(expect_success(&run, &what), &what);
    json["version"].as_i64().unwrap_or_else(|| panic!("{what}: no version in {json}"))
}

// ---------------------------------------------------------------------------------------
// 1. migrate on a fresh database, then again

#[tokio::test]
async fn migrate_applies_then_reports_current() {
    for db in TestDb::all().await {
        let name = db.name();
        let url = db.url();
        let first = herald(&["migrate", "--db", &url]);
        let out = expect_success(&first, &format!("{name}: first migrate"));
        assert!(out.starts_with("applied migration(s) 1"), "{name}: first migrate said {out:?}");
        assert!(out.contains(&format!("on {name}")), "{name}: first migrate said {out:?}");

        let second = herald(&["migrate", "--db", &url]);
        let out = expect_success(&second, &format!("{name}: second migrate"));
        assert!(out.starts_with("schema is current (version "), "{name}: second said {out:?}");

        let rows = db.migration_rows().await;
        let version = i64::try_from(rows.len()).expect("row count");
        assert!(version >= 1, "{name}: no migration recorded");
        assert!(
            out.contains(&format!("(version {version}) on {name}")),
            "{name}: second migrate said {out:?}, {version} rows recorded"
        );
        assert!(db.tables().await.contains(&"herald_migrations".to_string()), "{name}");
    }
}

#[tokio::test]
async fn migrate_json_reports_backend_applied_and_version() {
    for db in TestDb::all().await {
        let name = db.name();
        let url = db.url();
        let what = format!("{name}: first migrate --json");
        let first =
            parse_json(expect_success(&herald(&["migrate", "--db", &url, "--json"]), &what), &what);
        assert_eq!(first["backend"], name, "{what}: {first}");
        let version = first["version"].as_i64().unwrap_or_else(|| panic!("{what}: {first}"));
        assert!(version >= 1, "{what}: {first}");
        let expected: Vec<i64> = (1..=version).collect();
        assert_eq!(first["applied"], serde_json::json!(expected), "{what}: {first}");

        let what = format!("{name}: second migrate --json");
        let second =
            parse_json(expect_success(&herald(&["migrate", "--db", &url, "--json"]), &what), &what);
        assert_eq!(second, serde_json::json!({"backend": name, "applied": [], "version": version}));
    }
}

// ---------------------------------------------------------------------------------------
// 2. malformed or unsupported --db

#[test]
fn malformed_or_unsupported_db_is_one_error_line_and_creates_nothing() {
    // (--db value, a word the error must contain)
    let cases = [
        ("redis://root@localhost/test", "unsupported database scheme"),
        ("oracle://root:hunter2@localhost/test", "unsupported database scheme"),
        ("mariadb://u:hunter2@[::1", "invalid database URL"),
        ("postgres://[::1", "invalid database URL"),
        ("postgres://u:hunter2@[::1", "invalid database URL"),
        ("", "empty"),
        ("   ", "empty"),
        ("sqlite://herald.db?mode=sideways", "invalid database URL"),
    ];
    for command in ["migrate", "demo"] {
        for (value, expect) in cases {
            let cwd = tempfile::tempdir().expect("tempdir");
            let what = format!("{command} --db {value:?}");
            let run = herald_in(cwd.path(), &[command, "--db", value]);
            let line = expect_error_line(&run, &what);
            assert!(line.contains(expect), "{what}: expected {expect:?} in {line:?}");
            assert!(run.stdout.is_empty(), "{what}: printed to stdout: {:?}", run.stdout);
            assert_eq!(file_names(cwd.path()), Vec::<String>::new(), "{what}: created files");
        }
    }
}

/// An admin key that could be guessed is refused before anything starts (issue 37): the
/// error says how long one must be and how to make one, and never quotes the key.
#[test]
fn a_short_admin_key_is_refused_with_how_to_make_one() {
    let cwd = tempfile::tempdir().expect("tempdir");
    for key in ["change-me", "0123456789abcdef0123456789abcdef0123456789"] {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_herald"));
        cmd.args(["serve", "--listen", "127.0.0.1:0"]).current_dir(cwd.path());
        let out = cmd.env("HERALD_ADMIN_KEY", key).env_remove("RUST_LOG").output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{key}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1, "{stderr}");
        assert!(stderr.contains("at least 43") && stderr.contains("/dev/urandom"), "{stderr}");
        assert!(!stderr.contains(key), "the key is quoted: {stderr}");
        assert_eq!(file_names(cwd.path()), Vec::<String>::new(), "{key}: created files");
    }
}

/// `herald settings rotate-session-secret` replaces the dashboard's secret in the database.
#[test]
fn the_session_secret_rotates() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let db = cwd.path().join("h.db").display().to_string();
    let rotate = herald_in(cwd.path(), &["settings", "rotate-session-secret", "--db", &db]);
    let out = expect_success(&rotate, "rotate-session-secret");
    assert!(out.contains("every dashboard session ends"), "{out}");
    let json = herald_in(cwd.path(), &["settings", "rotate-session-secret", "--json", "--db", &db]);
    assert_eq!(expect_success(&json, "--json").trim(), r#"{"rotated":"ui_session"}"#);
}

/// An operator's actions go into the audit log as `operator`, and `herald audit-log`
/// reads it, newest first, all or one tenant's (issue 37, defect 7).
#[test]
fn operator_actions_are_in_the_audit_log() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let db = cwd.path().join("h.db").display().to_string();
    let run = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["--json", "--db", &db]);
        let run = herald_in(cwd.path(), &all);
        parse_json(expect_success(&run, &args.join(" ")), &args.join(" "))
    };
    let acme = run(&["tenant", "create", "acme"]);
    let tenant = acme["id"].as_str().unwrap().to_string();
    run(&["quota", "grant", &tenant, "email", "5"]);
    let key = run(&["key", "create", &tenant]);
    run(&["key", "revoke", &tenant, key["key_id"].as_str().unwrap()]);
    run(&["settings", "rotate-session-secret"]);
    let log = run(&["audit-log"]);
    let entries = log["entries"].as_array().unwrap();
    let actions: Vec<&str> = entries.iter().map(|e| e["action"].as_str().unwrap()).collect();
    assert_eq!(
        actions,
        ["session_secret_rotate", "key_revoke", "key_create", "grant", "tenant_create"],
        "{log}"
    );
    assert!(entries.iter().all(|e| e["actor"] == "operator"), "{log}");
    assert_eq!(entries[3]["count"], 5, "{log}");
    let own = run(&["audit-log", "--tenant", &tenant, "--limit", "2"]);
    assert_eq!(own["entries"].as_array().unwrap().len(), 2, "{own}");
    assert_eq!(own["entries"][0]["tenant"], tenant.as_str(), "{own}");
    let text = herald_in(cwd.path(), &["audit-log", "--db", &db]);
    assert!(expect_success(&text, "audit-log").contains("tenant_create"));
    let bad = herald_in(cwd.path(), &["audit-log", "--tenant", "nope", "--db", &db]);
    assert!(expect_error_line(&bad, "a bad tenant").contains("not a UUID"));
}

// ---------------------------------------------------------------------------------------
// 3. unreachable PostgreSQL

#[test]
fn unreachable_server_fails_within_seconds() {
    for (command, scheme) in [("migrate", "postgres"), ("demo", "postgres"), ("migrate", "mariadb")]
    {
        let url = format!("{scheme}://postgres:{SECRET}@127.0.0.1:1/test");
        let what = format!("{command} --db {url}");
        let run = herald(&[command, "--db", &url]);
        let line = expect_error_line(&run, &what);
        assert!(line.contains("127.0.0.1:1"), "{what}: the error should name the server: {line:?}");
        assert!(run.elapsed < UNREACHABLE_BOUND, "{what}: took {:?}", run.elapsed);
        assert!(run.stdout.is_empty(), "{what}: printed to stdout: {:?}", run.stdout);
    }
}

// ---------------------------------------------------------------------------------------
// 4. a read-only SQLite file that would need migrating

#[tokio::test]
async fn read_only_sqlite_that_needs_migrating_is_left_untouched() {
    // Journal modes of the application's file. With a rollback journal herald fails while
    // connecting (it cannot switch the file to WAL); with WAL it connects and fails inside
    // the migration.
    for journal_mode in ["DELETE", "WAL"] {
        for command in ["migrate", "demo"] {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("app.db");
            let mut c = sqlite_open(&path, true).await;
            let setup = format!(
                "PRAGMA journal_mode = {journal_mode};
                 CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL);
                 INSERT INTO customers (id, name) VALUES (1, 'Ada');"
            );
            sqlx::raw_sql(sqlx::AssertSqlSafe(setup))
                .execute(&mut c)
                .await
                .expect("create the application table");
            c.close().await.expect("close");
            let tables_before = sqlite_master(&path).await;
            assert_eq!(tables_before, ["customers"]);
            let bytes_before = std::fs::read(&path).expect("read");

            let what = format!("{command} on a read-only SQLite file ({journal_mode} journal)");
            let url = format!("sqlite://{}?mode=ro", path.display());
            expect_error_line(&herald(&[command, "--db", &url]), &what);

            assert_eq!(std::fs::read(&path).expect("read"), bytes_before, "{what}: file changed");
            assert_eq!(sqlite_master(&path).await, tables_before, "{what}: tables changed");
            let mut c = sqlite_open(&path, false).await;
            let rows: Vec<(i64, String)> = sqlx::query_as("SELECT id, name FROM customers")
                .fetch_all(&mut c)
                .await
                .expect("read customers");
            c.close().await.expect("close");
            assert_eq!(rows, [(1, "Ada".to_string())], "{what}: rows changed");
        }
    }
}

// ---------------------------------------------------------------------------------------
// 5. a corrupt SQLite file

#[test]
fn corrupt_sqlite_file_is_left_byte_for_byte_unchanged() {
    let noise: Vec<u8> =
        (0..8192u32).map(|i| (i.wrapping_mul(31).wrapping_add(7) % 251) as u8).collect();
    let text = b"this is a shopping list, not a database\n".repeat(200);
    let cases: [(&str, &[u8]); 2] = [("8 KiB of noise", &noise), ("a text file", &text)];
    for command in ["migrate", "demo"] {
        for (label, bytes) in cases {
            assert!(!bytes.starts_with(b"SQLite format 3\0"));
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("herald.db");
            std::fs::write(&path, bytes).expect("write");
            let names_before = file_names(dir.path());

            let what = format!("{command} on {label}");
            expect_error_line(&herald(&[command, "--db", &path.display().to_string()]), &what);

            assert_eq!(std::fs::read(&path).expect("read"), bytes, "{what}: bytes changed");
            assert_eq!(file_names(dir.path()), names_before, "{what}: files left behind");
        }
    }
}

// ---------------------------------------------------------------------------------------
// 6. a database migrated by a newer herald

#[tokio::test]
async fn schema_from_a_newer_herald_is_refused_and_left_unchanged() {
    for command in ["migrate", "demo"] {
        for db in TestDb::all().await {
            let what = format!("{}: {command} on a schema from the future", db.name());
            migrate_ok(&db);
            db.record_future_migration().await;
            let tables_before = db.tables().await;
            let rows_before = db.migration_rows().await;
            assert!(rows_before.iter().any(|r| r.starts_with("999|")), "{what}: {rows_before:?}");

            let run = herald(&[command, "--db", &db.url()]);
            let line = expect_error_line(&run, &what);
            assert!(line.contains("newer"), "{what}: expected \"newer\" in {line:?}");
            assert!(line.contains("999"), "{what}: expected the found version in {line:?}");

            assert_eq!(db.migration_rows().await, rows_before, "{what}: herald_migrations changed");
            assert_eq!(db.tables().await, tables_before, "{what}: tables changed");
        }
    }
}

/// `herald sql grant|revoke|grants`: per role, as JSON too; a role the server does not
/// know is one error line; on SQLite (no SQL API) too.
#[tokio::test]
async fn sql_grants_are_per_role_and_refused_where_there_is_no_sql_api() {
    for db in TestDb::all().await {
        let url = db.url();
        let backend = db.name();
        // The tests' own role (a user, on MariaDB).
        let role = match db {
            TestDb::Sqlite { .. } => {
                let run = herald(&["sql", "grant", "app", "--all-tenants", "--db", &url]);
                let line = expect_error_line(&run, "sql grant on SQLite");
                assert!(line.contains("SQL API"), "{line}");
                continue;
            }
            TestDb::Postgres { .. } => "postgres",
            TestDb::MySql(_) => "root",
        };
        let json = |args: &[&str], what: &str| {
            let mut all = args.to_vec();
            all.extend(["--json", "--db", &url]);
            parse_json(expect_success(&herald(&all), what), &format!("{backend}: {what}"))
        };
        let what = "sql grant";
        let granted = json(&["sql", "grant", role, "--all-tenants"], what);
        assert_eq!(granted, serde_json::json!({"granted": true}), "{backend}");
        let again = json(&["sql", "grant", role, "--all-tenants"], what);
        assert_eq!(again, serde_json::json!({"granted": false}), "{backend}");
        assert_eq!(
            json(&["sql", "grants"], "sql grants"),
            serde_json::json!({"grants": [{"role": role, "tenant": "*"}]}),
            "{backend}"
        );
        let run = herald(&["sql", "grant", "no_such_role_here", "--all-tenants", "--db", &url]);
        let line = expect_error_line(&run, "sql grant to an unknown role");
        assert!(line.contains("no_such_role_here"), "{backend}: {line}");
        assert_eq!(
            json(&["sql", "revoke", role, "--all-tenants"], "revoke"),
            serde_json::json!({"revoked": true}),
            "{backend}"
        );
        assert_eq!(json(&["sql", "grants"], "sql grants"), serde_json::json!({"grants": []}));
    }
}

// ---------------------------------------------------------------------------------------
// 7. demo

/// Checks the counts of `herald demo --json` that hold on every backend.
fn check_demo_json(json: &Value, backend: &str, what: &str) {
    let herald_runs = if backend == "sqlite" { 1 } else { 3 };
    let expected = [
        ("/backend", serde_json::json!(backend)),
        ("/naive/closure_runs", 3.into()),
        ("/naive/effects_fired", 3.into()),
        ("/naive/job_rows", 1.into()),
        ("/herald/closure_runs", herald_runs.into()),
        ("/herald/effects_fired", 1.into()),
        ("/herald/job_rows", 1.into()),
        ("/herald_attempts", herald_runs.into()),
        ("/plain_error/closure_runs", 1.into()),
        ("/plain_error/error", "card declined".into()),
        ("/receipts", serde_json::json!({"total": 15, "identities": 2})),
        ("/receipts_reopened", serde_json::json!({"total": 15, "identities": 2})),
    ];
    for (pointer, value) in expected {
        assert_eq!(json.pointer(pointer), Some(&value), "{what}: {pointer} in {json}");
    }
    // A lock held past the call's deadline: answered at the deadline, with its error.
    let deadline = json.pointer("/lock_wait/deadline_ms").and_then(Value::as_u64).unwrap_or(0);
    let elapsed = json.pointer("/lock_wait/elapsed_ms").and_then(Value::as_u64).unwrap_or(0);
    assert!(deadline > 0 && elapsed < deadline + 1_500, "{what}: lock_wait in {json}");
    let error = json.pointer("/lock_wait/error").and_then(Value::as_str).unwrap_or("");
    assert!(error.contains("deadline"), "{what}: lock_wait in {json}");
}

#[test]
fn demo_on_sqlite_prints_the_article_counts() {
    let db = TestDb::sqlite();
    let url = db.url();
    let run = herald(&["demo", "--db", &url]);
    let out = expect_success(&run, "demo");
    for needle in [
        "herald demo on sqlite",
        "closure ran: 3 | side effect fired: 3",
        "closure ran: 1 | side effect fired: 1 | job rows enqueued in the closure: 1",
        "closure ran: 1 | error: card declined",
    ] {
        assert!(out.contains(needle), "demo: expected {needle:?} in\n{out}");
    }
    let lines: Vec<&str> = out.lines().map(str::trim).collect();
    let receipts = lines.iter().position(|l| *l == "15 2");
    let reopened = lines.iter().position(|l| l.contains("reopening") && l.ends_with(": 15 2"));
    assert!(
        matches!((receipts, reopened), (Some(a), Some(b)) if a < b),
        "demo: expected `15 2` then `…reopening…: 15 2` in\n{out}"
    );

    // Again on the same file, as JSON: the demo is repeatable.
    let what = "demo --json (second run on the same file)";
    let json = parse_json(expect_success(&herald(&["demo", "--db", &url, "--json"]), what), what);
    check_demo_json(&json, "sqlite", what);
}

#[tokio::test]
async fn demo_on_postgres_shows_real_deadlocks() {
    let Some(base) = postgres_url() else { return };
    let db = TestDb::postgres(&base).await;
    let what = "postgres: demo --json";
    let json =
        parse_json(expect_success(&herald(&["demo", "--db", &db.url(), "--json"]), what), what);
    check_demo_json(&json, "postgres", what);
    let tables = db.tables().await;
    assert!(tables.contains(&"herald_migrations".to_string()), "{what}: tables {tables:?}");
}

/// The seed's experiment on MariaDB: two real deadlocks (1213), the closure run three
/// times, the effect once.
#[tokio::test]
async fn demo_on_mariadb_shows_real_deadlocks() {
    let Some(base) = crate::support::mysql_url() else { return };
    let db = crate::support::MyDatabase::create(&base).await;
    let what = "mariadb: demo --json";
    let json =
        parse_json(expect_success(&herald(&["demo", "--db", &db.url, "--json"]), what), what);
    check_demo_json(&json, "mysql", what);
}

// ---------------------------------------------------------------------------------------
// 8. help

#[test]
fn help_exits_zero() {
    // (arguments, text the help must contain)
    let cases: [(&[&str], &str); 7] = [
        (&["--help"], "migrate"),
        (&["migrate", "--help"], "--db"),
        (&["demo", "--help"], "--db"),
        (&["--version"], "herald"),
        // Every backend is named where the database is given (issue 32).
        (&["serve", "--help"], "mariadb://"),
        (&["migrate", "--help"], "mariadb://"),
        (&["deliveries", "--help"], "mariadb://"),
    ];
    for (args, needle) in cases {
        let run = herald(args);
        let out = expect_success(&run, &format!("{args:?}"));
        assert!(out.contains(needle), "{args:?}: expected {needle:?} in\n{out}");
        assert!(run.stderr.is_empty(), "{args:?}: stderr {:?}", run.stderr);
    }
}

// ---------------------------------------------------------------------------------------
// 9. quota grants

/// `herald quota grant … --idempotency-key`: the same key and amount counts once, another
/// amount is one error line, and so is a grant past the account's limit; neither changes
/// the account.
#[tokio::test]
async fn quota_grant_refuses_a_reused_key_and_an_overflow_and_changes_nothing() {
    use herald_core::limits::{GRANT_MAX, QUOTA_GRANTED_MAX};
    for db in TestDb::all().await {
        let (name, url) = (db.name(), db.url());
        let run = herald(&["tenant", "create", "acme", "--json", "--db", &url]);
        let tenant =
            parse_json(expect_success(&run, name), name)["id"].as_str().unwrap().to_string();
        let grant = |amount: &str, key: Option<&str>| {
            let mut args = vec!["quota", "grant", &tenant, "email", amount, "--json", "--db", &url];
            if let Some(k) = key {
                args.extend(["--idempotency-key", k]);
            }
            herald(&args)
        };
        let granted = |run: &Run, what: &str| -> i64 {
            let v = parse_json(expect_success(run, what), what);
            v["quotas"][0]["granted"].as_i64().unwrap_or_else(|| panic!("{what}: {v}"))
        };
        assert_eq!(granted(&grant("5", Some("g-1")), name), 5, "{name}: first grant");
        assert_eq!(granted(&grant("5", Some("g-1")), name), 5, "{name}: a retry counts once");
        let line = expect_error_line(&grant("7", Some("g-1")), name).to_string();
        assert!(line.contains("idempotency key reused") && line.contains("5"), "{name}: {line}");
        let max = GRANT_MAX.to_string();
        set_granted(&db, &tenant, QUOTA_GRANTED_MAX - 1).await;
        let line = expect_error_line(&grant(&max, None), name).to_string();
        assert!(line.contains(&QUOTA_GRANTED_MAX.to_string()), "{name}: {line}");
        let shown = herald(&["quota", "show", &tenant, "--json", "--db", &url]);
        assert_eq!(granted(&shown, name), QUOTA_GRANTED_MAX - 1, "{name}: nothing changed");
    }
}

/// Secrets in the environment, and the text each one contains that must never be shown.
const SECRET_ENV: [(&str, &str, &str); 4] = [
    ("HERALD_DB", "postgres://u:s3cr3t@h/db", "s3cr3t"),
    ("HERALD_ADMIN_KEY", "adm1nsecret", "adm1nsecret"),
    ("HERALD_SMTP_URL", "smtps://u:smtpp4ss@h:465", "smtpp4ss"),
    ("HERALD_METRICS_TOKEN", "m3trics", "m3trics"),
];

#[test]
fn help_never_shows_secrets_from_the_environment() {
    let cwd = tempfile::tempdir().expect("tempdir");
    let commands: [&[&str]; 9] = [
        &["--help"],
        &["serve", "--help"],
        &["worker", "--help"],
        &["reconcile", "--help"],
        &["migrate", "--help"],
        &["tenant", "--help"],
        &["tenant", "create", "--help"],
        &["deliveries", "list", "--help"],
        &["bench", "--help"],
    ];
    for args in commands {
        let mut command = Command::new(env!("CARGO_BIN_EXE_herald"));
        command.args(args).current_dir(cwd.path()).env_remove("RUST_LOG");
        for (name, value, _) in SECRET_ENV {
            command.env(name, value);
        }
        let out = command.output().expect("run the herald binary");
        let (stdout, stderr) =
            (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stdout.contains("Usage"), "{args:?}: not a help text:\n{stdout}");
        for (name, _, secret) in SECRET_ENV {
            assert!(
                !stdout.contains(secret) && !stderr.contains(secret),
                "{args:?}: {name} shown:\n{stdout}{stderr}"
            );
        }
    }
}
