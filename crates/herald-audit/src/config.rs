//! The configuration an application really runs with: each database connection's driver
//! (`config/database.php`), each queue connection's driver, database connection and
//! `after_commit` (`config/queue.php`), and the lock wait timeout when the database config
//! sets one. The config files are evaluated in their common shapes (variables, `env()`
//! with defaults read from `.env`, `array_merge`, `return $var`); a file that is missing
//! falls back to the framework's defaults for the installed Laravel major, and every
//! assumption records where it came from, so a run can say what it assumed (issue 39).

mod eval;

use eval::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// MySQL's and MariaDB's `innodb_lock_wait_timeout` default.
pub const LOCK_WAIT_DEFAULT_S: u64 = 50;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    Pgsql,
    Mysql,
    Sqlite,
    Sqlsrv,
}

impl Driver {
    pub fn parse(name: &str) -> Option<Driver> {
        match name {
            "pgsql" | "postgres" | "postgresql" => Some(Driver::Pgsql),
            "mysql" | "mariadb" => Some(Driver::Mysql),
            "sqlite" => Some(Driver::Sqlite),
            "sqlsrv" => Some(Driver::Sqlsrv),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Driver::Pgsql => "pgsql",
            Driver::Mysql => "mysql",
            Driver::Sqlite => "sqlite",
            Driver::Sqlsrv => "sqlsrv",
        }
    }
}

/// One queue connection of `config/queue.php`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QueueConnection {
    pub driver: Option<String>,
    /// For the `database` driver: the database connection its job rows go to (`None`:
    /// the default one).
    pub db_connection: Option<String>,
    pub after_commit: bool,
}

/// Overrides given on the command line (`--assume db=pgsql`, `queue=redis`,
/// `after_commit=true`, `lock_wait=20`); each applies to the default connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Assume {
    pub db: Option<Driver>,
    pub queue: Option<String>,
    pub after_commit: Option<bool>,
    pub lock_wait_s: Option<u64>,
}

/// A `--assume` that cannot be read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AssumeError {
    #[error("--assume {0}: expected KEY=VALUE")]
    Shape(String),
    #[error("--assume {0}: unknown key (db, queue, after_commit, lock_wait)")]
    Key(String),
    #[error("--assume {key}={value}: {expected}")]
    Value { key: String, value: String, expected: &'static str },
}

const QUEUE_DRIVERS: [&str; 6] = ["sync", "database", "redis", "sqs", "beanstalkd", "null"];

impl Assume {
    /// Reads `KEY=VALUE` items; nothing is assumed when one of them is wrong.
    pub fn parse(items: &[String]) -> Result<Assume, AssumeError> {
        let mut assume = Assume::default();
        for item in items {
            let Some((key, value)) = item.split_once('=') else {
                return Err(AssumeError::Shape(item.clone()));
            };
            let (key, value) = (key.trim(), value.trim());
            let bad = |expected| AssumeError::Value {
                key: key.to_string(),
                value: value.to_string(),
                expected,
            };
            match key {
                "db" => {
                    assume.db = Some(
                        Driver::parse(value)
                            .ok_or_else(|| bad("one of pgsql, mysql, sqlite, sqlsrv"))?,
                    );
                }
                "queue" => {
                    if !QUEUE_DRIVERS.contains(&value) {
                        return Err(bad("one of sync, database, redis, sqs, beanstalkd, null"));
                    }
                    assume.queue = Some(value.to_string());
                }
                "after_commit" => {
                    assume.after_commit = Some(match value {
                        "true" => true,
                        "false" => false,
                        _ => return Err(bad("true or false")),
                    });
                }
                "lock_wait" => {
                    assume.lock_wait_s = Some(
                        value.parse().ok().filter(|s| *s > 0).ok_or_else(|| bad("seconds, > 0"))?,
                    );
                }
                _ => return Err(AssumeError::Key(key.to_string())),
            }
        }
        Ok(assume)
    }
}

/// One application's configuration; every field is empty when nothing was found.
#[derive(Debug, Default, Clone)]
pub struct AppConfig {
    /// The application's directory (holding `config/`, `.env`, `artisan`), if found.
    pub root: Option<PathBuf>,
    pub db_default: Option<String>,
    pub db_drivers: HashMap<String, Driver>,
    pub queue_default: Option<String>,
    pub queues: HashMap<String, QueueConnection>,
    /// `innodb_lock_wait_timeout` when the database config sets it.
    pub lock_wait_s: Option<u64>,
    /// Where the database and the queue settings came from (a file, a default, `--assume`).
    pub db_source: String,
    pub queue_source: String,
}

impl AppConfig {
    /// The driver of connection `name`, or of the default connection.
    pub fn driver(&self, name: Option<&str>) -> Option<Driver> {
        let name = name.or(self.db_default.as_deref())?;
        self.db_drivers.get(name).copied()
    }

    fn queue(&self, name: Option<&str>) -> Option<&QueueConnection> {
        self.queues.get(name.or(self.queue_default.as_deref())?)
    }

    /// Whether jobs pushed on queue connection `name` (or the default) wait for commit.
    pub fn queue_after_commit(&self, name: Option<&str>) -> bool {
        self.queue(name).is_some_and(|q| q.after_commit)
    }

    /// Whether queue connection `name` runs its jobs at once (the `sync` driver, or a
    /// connection named `sync` the configuration does not describe).
    pub fn queue_is_sync(&self, name: &str) -> bool {
        match self.queues.get(name) {
            Some(q) => q.driver.as_deref() == Some("sync"),
            None => name == "sync",
        }
    }

    /// Whether a job pushed on queue connection `queue` (or the default) inside a
    /// transaction on database connection `db` (or the default) is a row of that same
    /// transaction: the `database` driver on the same connection. Such a push rolls back
    /// with the transaction and no worker sees it before the commit.
    pub fn queue_in_transaction(&self, queue: Option<&str>, db: Option<&str>) -> bool {
        let Some(q) = self.queue(queue) else { return false };
        if q.driver.as_deref() != Some("database") {
            return false;
        }
        let job_rows = q.db_connection.as_deref().or(self.db_default.as_deref());
        let tx = db.or(self.db_default.as_deref());
        job_rows == tx
    }

    /// The application directory that `path` is in or under: the nearest directory at or
    /// above it with a `config/` directory, an `artisan` script or a `composer.json`
    /// requiring laravel/framework.
    pub fn discover(path: &Path, assume: &Assume) -> AppConfig {
        let start = if path.is_dir() { Some(path) } else { path.parent() };
        let root = start.and_then(|s| {
            s.ancestors().find(|d| {
                d.join("config/database.php").is_file()
                    || d.join("config/queue.php").is_file()
                    || d.join("artisan").is_file()
                    || laravel_major(d).is_some()
            })
        });
        let mut config = match root {
            Some(root) => AppConfig::read(root),
            None => AppConfig {
                db_source: "no Laravel application found".into(),
                queue_source: "no Laravel application found".into(),
                ..AppConfig::default()
            },
        };
        config.apply(assume);
        config
    }

    pub fn read(root: &Path) -> AppConfig {
        let env = read_env(&root.join(".env"));
        let major = laravel_major(root);
        let mut config = AppConfig { root: Some(root.to_path_buf()), ..AppConfig::default() };
        let database_path = root.join("config/database.php");
        let database = std::fs::read(&database_path).ok();
        let db_defaults = eval::database_defaults(major, &env);
        let (db, db_source) = match database.as_deref().and_then(|d| eval::returned(d, &env)) {
            Some(v) if v.get("default").is_some() => {
                (eval::overlay(&db_defaults, &v), "config/database.php".to_string())
            }
            Some(v) => (
                eval::overlay(&db_defaults, &v),
                format!("config/database.php over Laravel {} defaults", major_name(major)),
            ),
            None => {
                let why = if database.is_some() { "not read" } else { "missing" };
                (
                    db_defaults,
                    format!("config/database.php {why}: Laravel {} defaults", major_name(major)),
                )
            }
        };
        config.db_default = db.get("default").and_then(Value::string);
        if let Some(connections) = db.get("connections").and_then(Value::items) {
            for (name, settings) in connections {
                let Some(name) = name else { continue };
                if let Some(d) = settings.get("driver").and_then(Value::string)
                    && let Some(driver) = Driver::parse(&d)
                {
                    config.db_drivers.insert(name.clone(), driver);
                }
            }
        }
        config.db_source = db_source;
        config.lock_wait_s =
            lock_wait(&String::from_utf8_lossy(database.as_deref().unwrap_or_default()));
        let queue = std::fs::read(root.join("config/queue.php")).ok();
        // A skeleton without config/queue.php is Laravel 11 or later.
        let queue_major = major.or(if queue.is_none() { Some(11) } else { None });
        let queue_defaults = eval::queue_defaults(queue_major, &env);
        let (q, queue_source) = match queue.as_deref().and_then(|q| eval::returned(q, &env)) {
            Some(v) if v.get("default").is_some() => {
                (eval::overlay(&queue_defaults, &v), "config/queue.php".to_string())
            }
            Some(v) => (
                eval::overlay(&queue_defaults, &v),
                format!("config/queue.php over Laravel {} defaults", major_name(queue_major)),
            ),
            None => {
                let why = if queue.is_some() { "not read" } else { "missing" };
                (
                    queue_defaults,
                    format!("config/queue.php {why}: Laravel {} defaults", major_name(queue_major)),
                )
            }
        };
        config.queue_default = q.get("default").and_then(Value::string);
        if let Some(connections) = q.get("connections").and_then(Value::items) {
            for (name, settings) in connections {
                let Some(name) = name else { continue };
                config.queues.insert(
                    name.clone(),
                    QueueConnection {
                        driver: settings.get("driver").and_then(Value::string),
                        db_connection: settings.get("connection").and_then(Value::string),
                        after_commit: settings
                            .get("after_commit")
                            .and_then(Value::boolean)
                            .unwrap_or(false),
                    },
                );
            }
        }
        config.queue_source = queue_source;
        config
    }

    fn apply(&mut self, assume: &Assume) {
        if let Some(driver) = assume.db {
            let name = self.db_default.get_or_insert_with(|| "default".into()).clone();
            self.db_drivers.insert(name, driver);
            self.db_source = "--assume".into();
        }
        if assume.queue.is_some() || assume.after_commit.is_some() {
            let name = self.queue_default.get_or_insert_with(|| "default".into()).clone();
            let q = self.queues.entry(name).or_default();
            if let Some(driver) = &assume.queue {
                q.driver = Some(driver.clone());
                q.db_connection = None;
            }
            if let Some(after) = assume.after_commit {
                q.after_commit = after;
            }
            self.queue_source = "--assume".into();
        }
        if let Some(s) = assume.lock_wait_s {
            self.lock_wait_s = Some(s);
        }
    }

    /// One line: the drivers assumed and where each came from.
    pub fn summary(&self) -> String {
        let db = match (&self.db_default, self.driver(None)) {
            (Some(name), Some(d)) => format!("database {} ({name})", d.name()),
            (Some(name), None) => format!("database unknown (connection {name})"),
            (None, _) => "database unknown".to_string(),
        };
        let queue = match (&self.queue_default, self.queue(None)) {
            (Some(name), Some(q)) => format!(
                "queue {} ({name}{})",
                q.driver.as_deref().unwrap_or("unknown"),
                if q.after_commit { ", after_commit" } else { "" }
            ),
            (Some(name), None) => format!("queue unknown (connection {name})"),
            (None, _) => "queue unknown".to_string(),
        };
        format!("{db} from {}; {queue} from {}", self.db_source, self.queue_source)
    }

    /// The rules this configuration leaves unchecked, and why.
    pub fn unchecked(&self) -> Vec<String> {
        let mut out = Vec::new();
        match self.driver(None) {
            None => out.push(
                "poisoned-transaction not checked: the database driver is unknown (--assume db=pgsql to check it)".to_string(),
            ),
            Some(Driver::Sqlite) => out.push(
                "lock-wait-retry not checked: SQLite takes no row locks (lockForUpdate is a no-op)".to_string(),
            ),
            Some(_) => {}
        }
        if self.queue(None).and_then(|q| q.driver.as_deref()).is_none() {
            out.push(
                "queued effects judged without the queue driver (unknown): a push on the database queue would roll back with its transaction (--assume queue=… to say)".to_string(),
            );
        }
        out
    }
}

fn major_name(major: Option<u32>) -> String {
    major.map_or("10 (version unknown)".to_string(), |m| m.to_string())
}

/// The Laravel major a `composer.json` requires (`"laravel/framework": "^11.0"`); a Lumen
/// application (`"laravel/lumen-framework": "5.1.*"`, Polr in the corpus) is read by the
/// defaults of the Laravel major it shares its number with (a `sync` queue before 11).
fn laravel_major(root: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(root.join("composer.json")).ok()?;
    let json: serde_json::Value = serde_json::from_str(&text).ok()?;
    let require = json.get("require")?;
    let constraint = require
        .get("laravel/framework")
        .or_else(|| require.get("laravel/lumen-framework"))?
        .as_str()?;
    // The first version number in the constraint: "^10.0|^11.0" → 10.
    let digits: String = constraint
        .chars()
        .skip_while(|c| !c.is_ascii_digit())
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// `KEY=value` lines; quotes around a value are dropped, `#` lines skipped.
fn read_env(path: &Path) -> HashMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut env = HashMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else { continue };
        let key = key.trim().trim_start_matches("export ").trim();
        let value = value.trim();
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
            .unwrap_or(value);
        env.insert(key.to_string(), value.to_string());
    }
    env
}

/// `innodb_lock_wait_timeout=N` in an init command of the database config.
fn lock_wait(text: &str) -> Option<u64> {
    let at = text.find("innodb_lock_wait_timeout")?;
    let rest = &text[at + "innodb_lock_wait_timeout".len()..];
    let digits: String =
        rest.trim_start_matches([' ', '=']).chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}
