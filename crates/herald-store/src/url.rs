//! Parsing the `--db` value: a PostgreSQL URL, a MariaDB/MySQL URL (`mariadb://` or
//! `mysql://`), an `sqlite:` URL, or a bare file path (which means SQLite). Parsed once, into a typed value, before anything connects.

use crate::error::StoreError;
use sqlx::mysql::MySqlConnectOptions;
use sqlx::postgres::{PgConnectOptions, PgSslMode};
use sqlx::sqlite::SqliteConnectOptions;
use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// Where the database is.
#[derive(Clone)]
pub enum DbUrl {
    Sqlite(Box<SqliteConnectOptions>),
    Postgres(Box<PgConnectOptions>),
    /// MariaDB 10.11+ (MySQL 8.4 through the subset both share, untested).
    MySql(Box<MySqlConnectOptions>),
}

impl DbUrl {
    /// Parses `value`. Anything with a scheme other than sqlite, postgres/postgresql or
    /// mariadb/mysql is an error (a typo must not silently become a file named `pg:`).
    pub fn parse(value: &str) -> Result<DbUrl, StoreError> {
        let value = value.trim();
        if value.is_empty() {
            return Err(StoreError::InvalidUrl("the database URL is empty".into()));
        }
        let invalid = |e: sqlx::Error| StoreError::InvalidUrl(format!("{}: {e}", redact(value)));
        if let Some((scheme, _)) = value.split_once(':')
            && is_scheme(scheme)
        {
            return match scheme.to_ascii_lowercase().as_str() {
                "postgres" | "postgresql" => Ok(DbUrl::Postgres(Box::new(
                    PgConnectOptions::from_str(value).map_err(invalid)?,
                ))),
                // sqlx's MySQL driver speaks to both; it parses only the `mysql` scheme.
                "mariadb" | "mysql" => {
                    let rest = &value[scheme.len()..];
                    Ok(DbUrl::MySql(Box::new(
                        MySqlConnectOptions::from_str(&format!("mysql{rest}")).map_err(invalid)?,
                    )))
                }
                "sqlite" => Ok(DbUrl::Sqlite(Box::new(
                    SqliteConnectOptions::from_str(value).map_err(invalid)?,
                ))),
                other => Err(StoreError::InvalidUrl(format!(
                    "unsupported database scheme {other:?}: use a file path, sqlite://PATH, postgres://… or mariadb://…"
                ))),
            };
        }
        Ok(DbUrl::Sqlite(Box::new(SqliteConnectOptions::new().filename(PathBuf::from(value)))))
    }
}

/// A host whose traffic never leaves the machine: `localhost`, a loopback address, a
/// Unix socket directory.
pub(crate) fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.starts_with('/')
        || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A scheme is letters, digits, `+`, `-`, `.`, starting with a letter, and longer than one
/// character (so `C:\data\herald.db` stays a path).
fn is_scheme(candidate: &str) -> bool {
    candidate.len() > 1
        && candidate.starts_with(|c: char| c.is_ascii_alphabetic())
        && candidate.chars().all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
}

/// The URL with any password replaced (in the user info or a `password=` parameter), fit
/// for error messages and logs.
pub fn redact(url: &str) -> String {
    herald_core::redact_url(url)
}

impl fmt::Debug for DbUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbUrl::Sqlite(o) => write!(f, "sqlite:{}", o.get_filename().display()),
            DbUrl::Postgres(o) => {
                write!(
                    f,
                    "postgres://{}@{}:{}/{}",
                    o.get_username(),
                    o.get_host(),
                    o.get_port(),
                    o.get_database().unwrap_or("")
                )?;
                // A TLS failure reads differently under require and verify-full, so a mode
                // the user chose is part of the target; the default (prefer) is left out.
                match ssl_mode_name(o.get_ssl_mode()) {
                    Some(mode) => write!(f, "?sslmode={mode}"),
                    None => Ok(()),
                }
            }
            DbUrl::MySql(o) => write!(
                f,
                "mariadb://{}@{}:{}/{}",
                o.get_username(),
                o.get_host(),
                o.get_port(),
                o.get_database().unwrap_or("")
            ),
        }
    }
}

/// The URL spelling of a mode other than the default.
fn ssl_mode_name(mode: PgSslMode) -> Option<&'static str> {
    match mode {
        PgSslMode::Prefer => None,
        PgSslMode::Disable => Some("disable"),
        PgSslMode::Allow => Some("allow"),
        PgSslMode::Require => Some("require"),
        PgSslMode::VerifyCa => Some("verify-ca"),
        PgSslMode::VerifyFull => Some("verify-full"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(input: &str) -> &'static str {
        match DbUrl::parse(input) {
            Ok(DbUrl::Sqlite(_)) => "sqlite",
            Ok(DbUrl::Postgres(_)) => "postgres",
            Ok(DbUrl::MySql(_)) => "mysql",
            Err(_) => "error",
        }
    }

    #[test]
    fn parses_the_forms_users_type() {
        let cases = [
            ("herald.db", "sqlite"),
            ("./data/herald.db", "sqlite"),
            ("sqlite://herald.db", "sqlite"),
            ("sqlite:herald.db?mode=ro", "sqlite"),
            ("postgres://postgres@127.0.0.1/test", "postgres"),
            ("postgresql://u:p@localhost:5432/db", "postgres"),
            ("mysql://root@localhost/test", "mysql"),
            ("mariadb://u:p@127.0.0.1:3306/herald", "mysql"),
            ("MariaDB://u@h/herald", "mysql"),
            ("pg://u@h/db", "error"),
            ("", "error"),
            ("   ", "error"),
            ("postgres://[::1", "error"),
        ];
        for (input, expect) in cases {
            assert_eq!(kind(input), expect, "input {input:?}");
        }
    }

    #[test]
    fn loopback_hosts() {
        for host in ["localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]", "/var/run/postgresql"] {
            assert!(is_loopback(host), "{host}");
        }
        for host in ["db.example.com", "10.0.0.5", "::2", "localhost.example.com"] {
            assert!(!is_loopback(host), "{host}");
        }
    }

    #[test]
    fn redacts_passwords() {
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("herald.db"), "herald.db");
        assert_eq!(redact("postgres://h/db?password=secret"), "postgres://h/db?password=***");
    }

    #[test]
    fn target_names_the_server_and_a_chosen_tls_mode_without_secrets() {
        let cases = [
            ("postgres://u:secret@h/db", "postgres://u@h:5432/db"),
            ("postgres://u:secret@h:6543/db?sslmode=prefer", "postgres://u@h:6543/db"),
            ("postgres://u:secret@h/db?sslmode=require", "postgres://u@h:5432/db?sslmode=require"),
            (
                "postgres://u:secret@h/db?sslmode=verify-full&sslrootcert=/etc/ca.pem",
                "postgres://u@h:5432/db?sslmode=verify-full",
            ),
            ("mysql://u:secret@h/herald", "mariadb://u@h:3306/herald"),
        ];
        for (input, expect) in cases {
            let target =
                DbUrl::parse(input).map(|url| format!("{url:?}")).map_err(|e| e.to_string());
            assert_eq!(target, Ok(expect.to_string()), "input {input:?}");
        }
    }
}
