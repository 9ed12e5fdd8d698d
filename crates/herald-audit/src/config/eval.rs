//! A config file's returned value, evaluated in the shapes real applications write:
//! literals and arrays, `env('KEY', default)` read from `.env`, variables assigned before
//! the `return` (`$db = [...]; … return $db;`), `array_merge`/`array_replace`, and the
//! framework's own defaults when a file is missing. Anything else is unknown, never
//! guessed.

use crate::ir::{Callee, Expr};
use std::collections::HashMap;

/// How many variable look-ups one value may go through (a guard against `$a = $a`).
const EVAL_DEPTH_MAX: usize = 16;

#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Str(String),
    Bool(bool),
    Int(i64),
    Null,
    /// Items in order; a string key or none (a list item).
    Array(Vec<(Option<String>, Value)>),
    Unknown,
}

impl Value {
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Array(items) => {
                items.iter().rev().find(|(k, _)| k.as_deref() == Some(key)).map(|(_, v)| v)
            }
            _ => None,
        }
    }

    pub fn items(&self) -> Option<&[(Option<String>, Value)]> {
        match self {
            Value::Array(items) => Some(items),
            _ => None,
        }
    }

    pub fn string(&self) -> Option<String> {
        match self {
            Value::Str(s) => Some(s.clone()),
            _ => None,
        }
    }

    pub fn boolean(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            Value::Int(n) => Some(*n != 0),
            Value::Str(s) => Some(matches!(
                s.to_ascii_lowercase().as_str(),
                "true" | "(true)" | "1" | "on" | "yes"
            )),
            _ => None,
        }
    }
}

/// The value a config file returns, when it is an array.
pub fn returned(source: &[u8], env: &HashMap<String, String>) -> Option<Value> {
    let file = crate::php::parse(source).ok()?;
    let mut vars: HashMap<String, Value> = HashMap::new();
    for e in &file.top {
        match e {
            Expr::Assign { target, value } => {
                if let Expr::Var(name) = &**target {
                    let v = eval(value, env, &vars, 0);
                    vars.insert(name.clone(), v);
                }
            }
            Expr::Return(v, _) => {
                let value = eval(v.first()?, env, &vars, 0);
                return matches!(value, Value::Array(_)).then_some(value);
            }
            _ => {}
        }
    }
    None
}

fn eval(
    e: &Expr,
    env: &HashMap<String, String>,
    vars: &HashMap<String, Value>,
    depth: usize,
) -> Value {
    if depth > EVAL_DEPTH_MAX {
        return Value::Unknown;
    }
    match e {
        Expr::Str(s) => Value::Str(s.clone()),
        Expr::Bool(b) => Value::Bool(*b),
        Expr::Int(n) => Value::Int(*n),
        Expr::Null => Value::Null,
        Expr::Var(v) => vars.get(v).cloned().unwrap_or(Value::Unknown),
        Expr::Array(items) => Value::Array(
            items
                .iter()
                .map(|(k, v)| {
                    let key = k.as_ref().and_then(|k| match eval(k, env, vars, depth + 1) {
                        Value::Str(s) => Some(s),
                        Value::Int(n) => Some(n.to_string()),
                        _ => None,
                    });
                    (key, eval(v, env, vars, depth + 1))
                })
                .collect(),
        ),
        Expr::Call(call) => match &call.callee {
            Callee::Function(f) if f.eq_ignore_ascii_case("env") => {
                let Some(Expr::Str(key)) = call.arg(0, "key") else { return Value::Unknown };
                match env.get(key) {
                    Some(v) => env_value(v),
                    None => match call.arg(1, "default") {
                        Some(d) => eval(d, env, vars, depth + 1),
                        None => Value::Null,
                    },
                }
            }
            Callee::Function(f)
                if [
                    "array_merge",
                    "array_replace",
                    "array_merge_recursive",
                    "array_replace_recursive",
                ]
                .iter()
                .any(|m| f.trim_start_matches('\\').eq_ignore_ascii_case(m)) =>
            {
                let mut out: Vec<(Option<String>, Value)> = Vec::new();
                for a in &call.args {
                    let Value::Array(items) = eval(&a.value, env, vars, depth + 1) else {
                        return Value::Unknown;
                    };
                    for (k, v) in items {
                        match &k {
                            Some(key) => {
                                out.retain(|(o, _)| o.as_deref() != Some(key));
                                out.push((k, v));
                            }
                            None => out.push((None, v)),
                        }
                    }
                }
                Value::Array(out)
            }
            _ => Value::Unknown,
        },
        _ => Value::Unknown,
    }
}

/// A `.env` value as `env()` returns it: `true`/`false`/`null` and their `(…)` forms
/// become booleans and null.
fn env_value(v: &str) -> Value {
    match v.to_ascii_lowercase().as_str() {
        "true" | "(true)" => Value::Bool(true),
        "false" | "(false)" => Value::Bool(false),
        "null" | "(null)" => Value::Null,
        "empty" | "(empty)" => Value::Str(String::new()),
        _ => Value::Str(v.to_string()),
    }
}

fn env_or(env: &HashMap<String, String>, key: &str, default: &str) -> Value {
    env.get(key).map_or_else(|| Value::Str(default.to_string()), |v| env_value(v))
}

fn connection(driver: &str) -> (Option<String>, Value) {
    (
        Some(driver.to_string()),
        Value::Array(vec![(Some("driver".into()), Value::Str(driver.into()))]),
    )
}

/// `top` over `base`, as the framework merges an application's slim config file over its
/// own (Laravel 11 on: a `config/database.php` that sets only `migrations` keeps the
/// framework's `default` and `connections`); keyed arrays merge key by key, one level
/// into `connections`.
pub fn overlay(base: &Value, top: &Value) -> Value {
    let (Value::Array(base_items), Value::Array(top_items)) = (base, top) else {
        return top.clone();
    };
    let mut out = base_items.clone();
    for (key, value) in top_items {
        match key {
            Some(k) => {
                let merged = match out.iter().find(|(o, _)| o.as_deref() == Some(k.as_str())) {
                    Some((_, old)) if k == "connections" => overlay(old, value),
                    _ => value.clone(),
                };
                out.retain(|(o, _)| o.as_deref() != Some(k.as_str()));
                out.push((Some(k.clone()), merged));
            }
            None => out.push((None, value.clone())),
        }
    }
    Value::Array(out)
}

/// The framework's `config/database.php` for a Laravel major: the default connection is
/// `sqlite` from Laravel 11 on, `mysql` before.
pub fn database_defaults(major: Option<u32>, env: &HashMap<String, String>) -> Value {
    let default = if major.is_some_and(|m| m >= 11) { "sqlite" } else { "mysql" };
    let mut connections = vec![connection("sqlite"), connection("mysql"), connection("pgsql")];
    connections.push(connection("sqlsrv"));
    if major.is_some_and(|m| m >= 11) {
        connections.push((
            Some("mariadb".into()),
            Value::Array(vec![(Some("driver".into()), Value::Str("mariadb".into()))]),
        ));
    }
    Value::Array(vec![
        (Some("default".into()), env_or(env, "DB_CONNECTION", default)),
        (Some("connections".into()), Value::Array(connections)),
    ])
}

/// The framework's `config/queue.php` for a Laravel major: the default connection is
/// `database` from Laravel 11 on, `sync` before; no connection waits for commit.
pub fn queue_defaults(major: Option<u32>, env: &HashMap<String, String>) -> Value {
    let default = if major.is_some_and(|m| m >= 11) { "database" } else { "sync" };
    let mut database = vec![(Some("driver".into()), Value::Str("database".into()))];
    if let Some(c) = env.get("DB_QUEUE_CONNECTION") {
        database.push((Some("connection".into()), env_value(c)));
    }
    let connections = vec![
        connection("sync"),
        (Some("database".into()), Value::Array(database)),
        connection("beanstalkd"),
        connection("sqs"),
        connection("redis"),
    ];
    Value::Array(vec![
        (Some("default".into()), env_or(env, "QUEUE_CONNECTION", default)),
        (Some("connections".into()), Value::Array(connections)),
    ])
}
