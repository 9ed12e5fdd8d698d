//! `herald bench` as a real process on PostgreSQL and on MariaDB: a short run (no peers,
//! small N) writes every figure to its JSON file, and bad input is one `error:` line,
//! never a panic.

use crate::support::{mysql_url, postgres_url};
use serde_json::Value;
use std::process::Command;

fn herald(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_herald"))
        .args(args)
        .env("RUST_LOG", "error")
        .env_remove("HERALD_DB")
        .output()
        .expect("run herald")
}

/// The figures every short run has, whichever server it measures.
const FIGURES: &[&str] = &[
    "submit, library, submit_alone (one statement)",
    "submit, library, submit_alone: submits per commit",
    "submit, library, in a transaction (BEGIN, submit, COMMIT)",
    "submit, one tenant (hot quota row)",
    "submit, half the keys repeat",
    "drain, no-op channel, 2048 slots",
    "drain, no-op channel, 2048 slots: deliveries per transaction",
    "commit-to-start p50 at 200/s",
    "commit-to-start p99 at 200/s",
    "commit-to-start p50 at 200/s, worker in a second process",
    "commit-to-start p99 at 200/s, worker in a second process",
    "submit, library, submit_alone, 64 tasks",
    "submit, library, submit_alone, 64 tasks: submits per commit",
    "submit, HTTP API, 1 connection",
    "submit, HTTP API, 1 connection: p99",
    "submit, HTTP API, 8 connections",
    "submit, HTTP API, 64 connections",
    "submit, HTTP API, 64 connections: p50",
    "submit, HTTP API, 64 connections: p99",
    "submit, HTTP API, 64 connections: submits per commit",
    "submit, HTTP API, 64 connections, one tenant (against the many-tenant figure)",
    "submit, HTTP API, 64 connections, one tenant (against the many-tenant figure): submits per commit",
    "submit, HTTP batch (100 per request, 8 connections)",
    "end-to-end: submit + webhook drain",
    "end-to-end: submit + no-op drain",
    "submit, SQL API, 4 KiB nested payload",
    "submit, SQL API v2, 4 KiB nested payload",
    "application commits with an SQL submit inside (vs. without)",
    "app transaction, 10 ms of work, 8 clients: with a library submit, one tenant (vs. without)",
    "app transaction, 10 ms of work, 8 clients: with an SQL API submit, one tenant, cost 0 (vs. without)",
    "app transaction, 10 ms of work, 64 clients: with an SQL API submit, one tenant (vs. without)",
    "app transaction, 10 ms of work, 64 clients: with a library submit, many tenants (vs. without)",
    "app transaction, 10 ms of work, 64 clients: with the floor's claim, one tenant (vs. without)",
    "commit-to-start p50 at 200/s, SQL API submits",
    "commit-to-start p99 at 200/s, SQL API submits",
];

/// The PHP package's figures, where PHP is installed (always in CI, whose `.ci/run`
/// installs it; the bench skips them otherwise, saying so).
const PHP_FIGURES: &[&str] = &[
    "submit, PHP package (v2: the fingerprint in PHP)",
    "submit, PHP package, 4 KiB nested payload",
    "submit, PHP package, 4 KiB nested payload, v1 (the fingerprint in SQL)",
];

fn php_here() -> bool {
    std::env::var_os("CI").is_some()
        || Command::new("php").arg("-v").output().is_ok_and(|o| o.status.success())
}

/// Runs a short bench on `db` and checks that it wrote `expected` (and the PHP figures,
/// where PHP is) and every figure has a value (and a rate a floor); returns the figures'
/// names.
fn short_run(db: &str, expected: &[&str]) -> Vec<String> {
    let php: &[&str] = if php_here() { PHP_FIGURES } else { &[] };
    let expected = &[expected, php].concat()[..];
    let dir = tempfile::tempdir().expect("tempdir");
    let json = dir.path().join("bench.json");
    let json_arg = json.to_str().expect("utf-8 path");
    let out = herald(&[
        "bench",
        "--quick",
        "--no-peers",
        "--n",
        "200",
        "--tenants",
        "10",
        "--db",
        db,
        "--json",
        json_arg,
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "herald bench failed:\n{stdout}\n{stderr}");
    let figures: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("the JSON file")).unwrap();
    let figures = figures.as_array().expect("an array of figures");
    let names: Vec<String> =
        figures.iter().filter_map(|f| f["name"].as_str().map(str::to_string)).collect();
    for expected in expected {
        assert!(names.iter().any(|n| n == expected), "no {expected:?} in {names:?}");
    }
    for f in figures {
        let value = f["value"].as_f64().unwrap_or(f64::NAN);
        assert!(value.is_finite() && value > 0.0, "figure without a value: {f}");
        assert!(f["unit"].is_string(), "figure without a unit: {f}");
        if f["unit"] == "/s" {
            assert!(f["floor"].as_f64().is_some_and(|v| v > 0.0), "rate without a floor: {f}");
        }
    }
    for name in &names {
        assert!(stdout.contains(name.as_str()), "{name:?} is not in the table:\n{stdout}");
    }
    // The database's work per delivery, herald's and the floor's, beside these rates
    // (issue 34): every submit writes its delivery and payload rows (and, but on
    // PostgreSQL, where the reservation is held on the delivery row, a journal row); a
    // drain writes a journal row per delivery, but on PostgreSQL, where the reservation's
    // end is on the row too (schema 20), none; every phase writes to the log.
    for name in COUNTED {
        let f = figures.iter().find(|f| f["name"] == *name).expect("a counted figure");
        for who in ["work", "floor_work"] {
            let work = &f[who];
            let log = work["log_bytes"].as_f64().unwrap_or(0.0);
            assert!(log > 0.0, "{name}: no log bytes in {who}: {f}");
            let inserted = work["rows_inserted"].as_f64().unwrap_or(0.0);
            let least = match (name.starts_with("drain"), db.starts_with("postgres")) {
                (true, true) => 0.0,
                (true, false) => 1.0,
                (false, true) => 2.0,
                (false, false) => 3.0,
            };
            assert!(inserted >= least - 0.05, "{name}: {who} inserts {inserted} rows: {f}");
            if name.starts_with("drain") && db.starts_with("postgres") {
                assert!(inserted < 0.05, "{name}: {who} inserts {inserted} rows: {f}");
            }
            assert!(work["n"].as_u64().is_some_and(|n| n > 0), "{name}: {who}: {f}");
            // Statements sent: always counted on MariaDB (`Questions`), on PostgreSQL when
            // the server preloads pg_stat_statements (.ci/run has it do so).
            let statements = work["statements"].as_f64();
            if db.starts_with("mysql") || db.starts_with("mariadb") {
                assert!(statements.is_some(), "{name}: {who}: no statements: {f}");
            }
            if !name.starts_with("drain") {
                assert!(statements.is_none_or(|s| s >= 0.95), "{name}: {who}: {f}");
            }
        }
    }
    assert!(stdout.contains("work per delivery"), "no work table:\n{stdout}");
    names
}

/// The figures whose phases count the database's work, herald's and the floor's.
const COUNTED: &[&str] = &[
    "submit, library, submit_alone (one statement)",
    "submit, library, in a transaction (BEGIN, submit, COMMIT)",
    "drain, no-op channel, 2048 slots",
    "end-to-end: submit + no-op drain",
];

#[test]
fn a_short_run_reports_every_figure_as_json() {
    let Some(db) = postgres_url() else {
        eprintln!("skipped: HERALD_TEST_POSTGRES_URL is not set");
        return;
    };
    let postgres_only = [
        "submit, SQL API (herald_submit_v1)",
        "SQLite: submit, library, single-delivery transactions",
        "SQLite: drain, no-op channel, 2048 slots",
        "SQLite: drain, no-op channel, 2048 slots: deliveries per transaction",
        "SQLite: submit, HTTP API, 64 connections",
        "SQLite: submit, HTTP API, 64 connections: p99",
        "SQLite: submit, HTTP batch (100 per request, 8 connections)",
    ];
    short_run(&db, &[FIGURES, &postgres_only[..]].concat());
}

/// On MariaDB: the same phases against MariaDB's floor, in a database the run creates and
/// drops; no SQLite rows (they come with PostgreSQL runs).
#[test]
fn a_short_run_on_mariadb_reports_every_figure_against_its_floor() {
    let Some(url) = mysql_url() else {
        eprintln!("skipped: HERALD_TEST_MYSQL_URL is not set");
        return;
    };
    let names = short_run(&url, &[FIGURES, &["submit, SQL API (submit_v1)"][..]].concat());
    assert!(!names.iter().any(|n| n.starts_with("SQLite")), "{names:?}");
}

#[test]
fn bad_input_is_one_error_line() {
    for args in [
        &["bench", "--clients", "0", "--no-peers"][..],
        &["bench", "--workers", "0", "--no-peers"],
        &["bench", "--db", "sqlite://x.db", "--no-peers"],
        &["bench", "--peers", "/nonexistent/peers", "--db", "postgres://127.0.0.1:1/x"],
        &["bench", "--peers", "/tmp", "--db", "mariadb://127.0.0.1:1/x"],
    ] {
        let out = herald(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1, "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
