//! What a Laravel application's configuration says about its connections: each database
//! connection's driver (`config/database.php`, with `env()` read from `.env`), which
//! queue connections dispatch after commit (`config/queue.php`), and the lock wait
//! timeout when the database config sets one.

use crate::ir::{Callee, Expr};
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
    fn parse(name: &str) -> Option<Driver> {
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

/// One application's configuration; every field is empty when nothing was found.
#[derive(Debug, Default, Clone)]
pub struct AppConfig {
    /// The directory holding `config/` (and `.env`), if any was found.
    pub root: Option<PathBuf>,
    pub db_default: Option<String>,
    pub db_drivers: HashMap<String, Driver>,
    pub queue_default: Option<String>,
    pub queue_after_commit: HashMap<String, bool>,
    /// `innodb_lock_wait_timeout` when the database config sets it.
    pub lock_wait_s: Option<u64>,
}

impl AppConfig {
    /// The driver of connection `name`, or of the default connection.
    pub fn driver(&self, name: Option<&str>) -> Option<Driver> {
        let name = name.or(self.db_default.as_deref())?;
        self.db_drivers.get(name).copied()
    }

    /// Whether jobs pushed on queue connection `name` (or the default) wait for commit.
    pub fn queue_after_commit(&self, name: Option<&str>) -> bool {
        name.or(self.queue_default.as_deref())
            .and_then(|n| self.queue_after_commit.get(n).copied())
            .unwrap_or(false)
    }

    /// Reads the configuration of the application that `path` is in or under: the
    /// nearest directory at or above it with a `config/database.php`.
    pub fn discover(path: &Path) -> AppConfig {
        let start = if path.is_dir() { Some(path) } else { path.parent() };
        let Some(root) =
            start.and_then(|s| s.ancestors().find(|d| d.join("config/database.php").is_file()))
        else {
            return AppConfig::default();
        };
        AppConfig::read(root)
    }

    pub fn read(root: &Path) -> AppConfig {
        let env = read_env(&root.join(".env"));
        let mut config = AppConfig { root: Some(root.to_path_buf()), ..AppConfig::default() };
        let database = std::fs::read(root.join("config/database.php")).unwrap_or_default();
        if let Some(items) = returned_array(&database) {
            config.db_default = value(&items, "default").and_then(|v| string(v, &env));
            if let Some(Expr::Array(connections)) = value(&items, "connections") {
                for (name, settings) in connections {
                    let (Some(Expr::Str(name)), Expr::Array(settings)) = (name, settings) else {
                        continue;
                    };
                    let driver = value(settings, "driver").and_then(|v| string(v, &env));
                    if let Some(driver) = driver.as_deref().and_then(Driver::parse) {
                        config.db_drivers.insert(name.clone(), driver);
                    }
                }
            }
        }
        config.lock_wait_s = lock_wait(&String::from_utf8_lossy(&database));
        let queue = std::fs::read(root.join("config/queue.php")).unwrap_or_default();
        if let Some(items) = returned_array(&queue) {
            config.queue_default = value(&items, "default").and_then(|v| string(v, &env));
            if let Some(Expr::Array(connections)) = value(&items, "connections") {
                for (name, settings) in connections {
                    let (Some(Expr::Str(name)), Expr::Array(settings)) = (name, settings) else {
                        continue;
                    };
                    let after = value(settings, "after_commit").and_then(|v| boolean(v, &env));
                    config.queue_after_commit.insert(name.clone(), after.unwrap_or(false));
                }
            }
        }
        config
    }
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

/// The items of the array a config file returns.
fn returned_array(source: &[u8]) -> Option<Vec<(Option<Expr>, Expr)>> {
    let file = crate::php::parse(source).ok()?;
    file.top.into_iter().find_map(|e| match e {
        Expr::Return(mut v, _) => match v.pop() {
            Some(Expr::Array(items)) => Some(items),
            _ => None,
        },
        _ => None,
    })
}

fn value<'a>(items: &'a [(Option<Expr>, Expr)], key: &str) -> Option<&'a Expr> {
    items.iter().find_map(|(k, v)| match k {
        Some(Expr::Str(k)) if k == key => Some(v),
        _ => None,
    })
}

/// A literal, or `env('KEY', default)` looked up in `.env`.
fn string(expr: &Expr, env: &HashMap<String, String>) -> Option<String> {
    match expr {
        Expr::Str(s) => Some(s.clone()),
        Expr::Call(call) => match &call.callee {
            Callee::Function(f) if f.eq_ignore_ascii_case("env") => {
                let Some(Expr::Str(key)) = call.arg(0, "key") else { return None };
                env.get(key)
                    .cloned()
                    .or_else(|| call.arg(1, "default").and_then(|d| string(d, env)))
            }
            _ => None,
        },
        _ => None,
    }
}

fn boolean(expr: &Expr, env: &HashMap<String, String>) -> Option<bool> {
    match expr {
        Expr::Bool(b) => Some(*b),
        Expr::Call(call) => match &call.callee {
            Callee::Function(f) if f.eq_ignore_ascii_case("env") => {
                let Some(Expr::Str(key)) = call.arg(0, "key") else { return None };
                match env.get(key).map(|v| v.to_ascii_lowercase()) {
                    Some(v) => Some(matches!(v.as_str(), "true" | "(true)" | "1" | "on" | "yes")),
                    None => call.arg(1, "default").and_then(|d| boolean(d, env)),
                }
            }
            _ => None,
        },
        _ => None,
    }
}

/// `innodb_lock_wait_timeout=N` in an init command of the database config.
fn lock_wait(text: &str) -> Option<u64> {
    let at = text.find("innodb_lock_wait_timeout")?;
    let rest = &text[at + "innodb_lock_wait_timeout".len()..];
    let digits: String =
        rest.trim_start_matches([' ', '=']).chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}
