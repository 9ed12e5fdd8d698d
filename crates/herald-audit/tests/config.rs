//! The configuration in force (issue 39, point 3): config files in the shapes real
//! applications write, the framework's defaults when a file is missing, the `database`
//! queue driver, and `--assume` overrides, each read from real files in a temporary
//! application directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use herald_audit::{AppConfig, Assume, AssumeError, Driver};
use std::path::Path;

fn app(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

fn read(dir: &Path) -> AppConfig {
    AppConfig::discover(dir, &Assume::default())
}

#[test]
fn a_database_config_built_in_a_variable_is_read() {
    let dir = app(&[(
        "config/database.php",
        "<?php\n$db = ['default' => env('DB_CONNECTION', 'pgsql'), 'connections' => []];\n$db['x'] = 1;\n$pg = ['driver' => 'pgsql'];\n$db = array_merge($db, ['connections' => ['pgsql' => $pg, 'mysql' => ['driver' => 'mysql']]]);\nreturn $db;\n",
    )]);
    let config = read(dir.path());
    assert_eq!(config.driver(None), Some(Driver::Pgsql), "{config:?}");
    assert_eq!(config.driver(Some("mysql")), Some(Driver::Mysql));
    assert_eq!(config.db_source, "config/database.php");
}

#[test]
fn env_overrides_a_default_and_a_missing_key_falls_back() {
    let dir = app(&[
        (".env", "DB_CONNECTION=\"mysql\"\nQUEUE_AFTER_COMMIT=true\n"),
        (
            "config/database.php",
            "<?php\nreturn ['default' => env('DB_CONNECTION', 'pgsql'), 'connections' => ['mysql' => ['driver' => 'mysql']]];\n",
        ),
        (
            "config/queue.php",
            "<?php\nreturn ['default' => env('QUEUE_CONNECTION', 'redis'), 'connections' => ['redis' => ['driver' => 'redis', 'after_commit' => env('QUEUE_AFTER_COMMIT', false)]]];\n",
        ),
    ]);
    let config = read(dir.path());
    assert_eq!(config.driver(None), Some(Driver::Mysql));
    assert_eq!(config.queue_default.as_deref(), Some("redis"));
    assert!(config.queue_after_commit(None));
    assert!(config.summary().contains("queue redis (redis, after_commit)"), "{}", config.summary());
}

#[test]
fn a_laravel_11_skeleton_gets_the_framework_defaults() {
    let dir = app(&[
        ("composer.json", r#"{"require": {"laravel/framework": "^11.9"}}"#),
        ("artisan", "#!/usr/bin/env php\n"),
    ]);
    let config = read(dir.path());
    assert_eq!(config.driver(None), Some(Driver::Sqlite));
    assert_eq!(config.queue_default.as_deref(), Some("database"));
    // The database queue on the default connection: a push is a row of the transaction.
    assert!(config.queue_in_transaction(None, None));
    assert!(!config.queue_in_transaction(Some("redis"), None));
    assert!(config.db_source.contains("Laravel 11 defaults"), "{}", config.db_source);
    assert!(config.unchecked().iter().any(|u| u.starts_with("lock-wait-retry not checked")));
}

#[test]
fn a_laravel_10_application_without_queue_config_queues_synchronously() {
    let dir = app(&[
        ("composer.json", r#"{"require": {"laravel/framework": "^10.10"}}"#),
        (
            "config/database.php",
            "<?php\nreturn ['default' => 'mysql', 'connections' => ['mysql' => ['driver' => 'mysql']]];\n",
        ),
    ]);
    let config = read(dir.path());
    assert_eq!(config.queue_default.as_deref(), Some("sync"));
    assert!(!config.queue_in_transaction(None, None));
}

#[test]
fn a_lumen_application_is_read_by_its_laravel_major() {
    // Polr in the corpus: Lumen 5.1, an `artisan` script, only `config/geoip.php`. Without
    // its major the missing queue file read as a Laravel 11 skeleton's `database` queue.
    let dir = app(&[
        ("composer.json", r#"{"require": {"laravel/lumen-framework": "5.1.*"}}"#),
        ("artisan", "#!/usr/bin/env php\n"),
    ]);
    let config = read(dir.path());
    assert_eq!(config.queue_default.as_deref(), Some("sync"));
    assert_eq!(config.driver(None), Some(Driver::Mysql));
    assert!(config.db_source.contains("Laravel 5 defaults"), "{}", config.db_source);
    assert!(config.queue_source.contains("Laravel 5 defaults"), "{}", config.queue_source);
}

#[test]
fn the_database_queue_on_another_connection_is_not_the_transaction() {
    let dir = app(&[
        (
            "config/database.php",
            "<?php\nreturn ['default' => 'mysql', 'connections' => ['mysql' => ['driver' => 'mysql'], 'jobs' => ['driver' => 'mysql']]];\n",
        ),
        (
            "config/queue.php",
            "<?php\nreturn ['default' => 'database', 'connections' => ['database' => ['driver' => 'database', 'connection' => 'jobs']]];\n",
        ),
    ]);
    let config = read(dir.path());
    assert!(!config.queue_in_transaction(None, None));
    assert!(config.queue_in_transaction(None, Some("jobs")));
}

#[test]
fn an_unknown_driver_says_which_rule_is_unchecked() {
    let dir = app(&[(
        "config/database.php",
        "<?php\nreturn ['default' => env('DB_CONNECTION'), 'connections' => []];\n",
    )]);
    let config = read(dir.path());
    assert_eq!(config.driver(None), None);
    assert!(config.unchecked().iter().any(|u| u.starts_with("poisoned-transaction not checked")));
}

#[test]
fn assume_overrides_what_the_files_say() {
    let dir = app(&[(
        "config/database.php",
        "<?php\nreturn ['default' => 'mysql', 'connections' => ['mysql' => ['driver' => 'mysql']]];\n",
    )]);
    let assume = Assume::parse(&[
        "db=pgsql".into(),
        "queue=redis".into(),
        "after_commit=true".into(),
        "lock_wait=20".into(),
    ])
    .unwrap();
    let config = AppConfig::discover(dir.path(), &assume);
    assert_eq!(config.driver(None), Some(Driver::Pgsql));
    assert!(config.queue_after_commit(None));
    assert_eq!(config.lock_wait_s, Some(20));
    assert_eq!((config.db_source.as_str(), config.queue_source.as_str()), ("--assume", "--assume"));
}

#[test]
fn a_wrong_assume_is_a_clear_error() {
    let parse = |s: &str| Assume::parse(&[s.to_string()]);
    assert_eq!(parse("db"), Err(AssumeError::Shape("db".into())));
    assert_eq!(parse("colour=red"), Err(AssumeError::Key("colour".into())));
    assert!(matches!(parse("db=oracle"), Err(AssumeError::Value { .. })));
    assert!(matches!(parse("lock_wait=0"), Err(AssumeError::Value { .. })));
    assert_eq!(
        parse("queue=kafka").unwrap_err().to_string(),
        "--assume queue=kafka: one of sync, database, redis, sqs, beanstalkd, null"
    );
}

#[test]
fn a_slim_config_file_keeps_the_framework_defaults_it_does_not_set() {
    let dir = app(&[
        ("composer.json", r#"{"require": {"laravel/framework": "^12.0"}}"#),
        (".env", "DB_CONNECTION=pgsql\n"),
        ("config/database.php", "<?php\nreturn ['migrations' => ['table' => 'migrations']];\n"),
    ]);
    let config = read(dir.path());
    assert_eq!(config.driver(None), Some(Driver::Pgsql), "{config:?}");
    assert_eq!(config.db_source, "config/database.php over Laravel 12 defaults");
}
