//! Where MariaDB and MySQL differ, and the only place in herald that may say so. Every
//! other statement of the MariaDB backend is in the subset both servers share (a test
//! below keeps it so); what is MariaDB's alone is here, with MySQL's counterpart beside it.
//! MariaDB 10.11+ is supported and tested; MySQL 8.4 is targeted through this module and
//! the shared subset, and untested (no MySQL server runs where herald is tested).
//!
//! | what | MariaDB | MySQL 8.4 |
//! |---|---|---|
//! | byte-for-byte collation, no padding | `utf8mb4_nopad_bin` | `utf8mb4_0900_bin` |
//! | a statement's time bound, lock waits included | `max_statement_time` (seconds, fractional) | `max_execution_time` (ms; read-only SELECTs only) |
//! | a transaction whose client went silent ends | `idle_transaction_timeout` (s) | `wait_timeout` (s; any idle session) |
//! | the SQL API (`submit_v1`, migration 2) | JSON_KEYS / JSON_TABLE over text kept as written | none: MySQL's JSON type keeps the last of duplicate keys and rewrites numbers |
//!
//! On MySQL, then, a write waiting for a row lock is bounded by `innodb_lock_wait_timeout`
//! alone, in whole seconds: a wait may outlast the caller's deadline by up to a second
//! (the runner's own timer gives up on it at the deadline, and the server ends the wait
//! within that second).

use std::borrow::Cow;
use std::time::Duration;

/// Which server a MariaDB-protocol connection reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    MariaDb,
    MySql,
}

/// The collation of every text column whose bytes are an identity (operation keys,
/// names, channels): MariaDB's name for it, as the migration files spell it. On MySQL the
/// migration text is rewritten to [`MYSQL_BIN_COLLATION`] before it runs (the MariaDB text
/// stays byte for byte what it always was: its checksum is recorded).
pub const MARIADB_BIN_COLLATION: &str = "utf8mb4_nopad_bin";
/// The first line of a migration that runs on MariaDB alone (the SQL API's).
pub const MARIADB_ONLY_MIGRATION: &str = "-- MariaDB only.";

/// MySQL 8's binary, NO PAD collation of utf8mb4.
pub const MYSQL_BIN_COLLATION: &str = "utf8mb4_0900_bin";

/// A regular expression's first back reference in `REGEXP_REPLACE`, as the migration
/// files spell it for MariaDB (PCRE: `\1`, written inside a quoted statement inside a
/// quoted string), and as MySQL's ICU spells it.
const MARIADB_BACK_REFERENCE: &str = r"''\\\\1''";
const MYSQL_BACK_REFERENCE: &str = "''$1''";

impl Flavor {
    /// From `SELECT VERSION()`: MariaDB says so ("10.11.19-MariaDB-0+deb12u1").
    pub fn of_version(version: &str) -> Flavor {
        if version.to_ascii_lowercase().contains("mariadb") {
            Flavor::MariaDb
        } else {
            Flavor::MySql
        }
    }

    /// What opens a transaction whose every wait must end within `wait_ms`: the session's
    /// wait bounds, the isolation, BEGIN — one round trip.
    ///
    /// The server also ends the transaction (and the session) if its client goes silent
    /// between statements for `idle_max` (whole seconds; [`crate::tx::IDLE_IN_TRANSACTION_MAX`]
    /// unless the caller holds a lock on purpose): a connection whose flow was
    /// dropped sends no FIN, TCP keepalive takes hours and `wait_timeout` is 8 hours by
    /// default, and until then its row locks — an account's, say — would make every
    /// other claim on that account wait out its deadline (found by the fault test, whose
    /// proxy silences connections mid-transaction). PostgreSQL's counterpart is
    /// `idle_in_transaction_session_timeout` (`Store::begin`).
    pub fn begin_sql(self, wait_ms: u128, idle_max: Duration, isolation: &str) -> String {
        // InnoDB's lock wait, and the metadata-lock wait, take whole seconds (at least 1).
        let lock_s = wait_ms.div_ceil(1000).max(1);
        let idle_s = idle_max.as_secs().max(1);
        let bounds = match self {
            Flavor::MariaDb => format!(
                "max_statement_time = {:.3}, idle_transaction_timeout = {idle_s}",
                wait_ms as f64 / 1000.0
            ),
            Flavor::MySql => format!("max_execution_time = {wait_ms}, wait_timeout = {idle_s}"),
        };
        match self {
            // The session's isolation, not the next transaction's: a procedure can read it
            // (`@@tx_isolation`), and `herald_quota_take` finds a free stripe in one locking
            // statement under READ COMMITTED. `session_defaults` puts the server's back
            // before a use outside a transaction.
            Flavor::MariaDb => format!(
                "SET SESSION innodb_lock_wait_timeout = {lock_s}, lock_wait_timeout = {lock_s}, \
                 {bounds}, tx_isolation = '{}'; BEGIN",
                isolation.replace(' ', "-")
            ),
            Flavor::MySql => format!(
                "SET SESSION innodb_lock_wait_timeout = {lock_s}, lock_wait_timeout = {lock_s}, \
                 {bounds}; SET TRANSACTION ISOLATION LEVEL {isolation}; BEGIN"
            ),
        }
    }

    /// What a connection's session gets back before a use outside a transaction
    /// (`Store::acquire`): the server's own wait bounds and isolation, whatever the last
    /// transaction on it set.
    pub fn session_defaults(self) -> &'static str {
        match self {
            Flavor::MariaDb => {
                "SET SESSION innodb_lock_wait_timeout = DEFAULT, lock_wait_timeout = DEFAULT, \
                 max_statement_time = DEFAULT, idle_transaction_timeout = DEFAULT, \
                 tx_isolation = DEFAULT"
            }
            Flavor::MySql => {
                "SET SESSION innodb_lock_wait_timeout = DEFAULT, lock_wait_timeout = DEFAULT, \
                 max_execution_time = DEFAULT, wait_timeout = 5"
            }
        }
    }

    /// Every session of herald's: the server ends it once idle for
    /// [`crate::store::SESSION_IDLE_MAX`] (5 s; on MySQL `session_defaults` puts the same
    /// back after a transaction bounded its idle time).
    pub fn session_idle_bound(self) -> &'static str {
        "SET SESSION wait_timeout = 5"
    }

    /// No statement bound on the session: a migration may take as long as it takes.
    pub fn unbounded_statements(self) -> &'static str {
        match self {
            Flavor::MariaDb => "SET SESSION max_statement_time = 0",
            Flavor::MySql => "SET SESSION max_execution_time = 0",
        }
    }

    /// A migration file as this server runs it (see [`MARIADB_BIN_COLLATION`]). A file
    /// that starts with [`MARIADB_ONLY_MIGRATION`] runs on MariaDB alone: on MySQL it is
    /// recorded as applied and does nothing.
    pub fn migration_sql(self, sql: &'static str) -> Cow<'static, str> {
        match self {
            Flavor::MariaDb => Cow::Borrowed(sql),
            Flavor::MySql if sql.starts_with(MARIADB_ONLY_MIGRATION) => {
                Cow::Borrowed("DO 0 -- a MariaDB-only migration (herald_store::mysql::dialect)")
            }
            Flavor::MySql => Cow::Owned(
                sql.replace(MARIADB_BIN_COLLATION, MYSQL_BIN_COLLATION)
                    .replace(MARIADB_BACK_REFERENCE, MYSQL_BACK_REFERENCE),
            ),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // a test that cannot read its files fails
mod tests {
    use super::*;

    /// MariaDB's own syntax and names, which MySQL 8.4 refuses or reads differently.
    const MARIADB_ONLY: &[&str] = &[
        "RETURNING",
        "CREATE OR REPLACE",
        "ADD COLUMN IF NOT EXISTS",
        "CREATE INDEX IF NOT EXISTS",
        "DROP INDEX IF EXISTS",
        "DROP COLUMN IF EXISTS",
        "SET STATEMENT",
        "ROWS EXAMINED",
        "SEQUENCE",
        "FOR SYSTEM_TIME",
        "NOPAD",
        "MAX_STATEMENT_TIME",
        "INNODB_SNAPSHOT_ISOLATION",
        // Not MariaDB's alone, but never herald's (it coerces bad values into rows).
        "INSERT IGNORE",
    ];

    fn mariadb_only(text: &str) -> Vec<&'static str> {
        let upper = text.to_ascii_uppercase();
        MARIADB_ONLY.iter().copied().filter(|t| upper.contains(t)).collect()
    }

    /// Rust source without its comments: the words the docs use about MariaDB are not SQL.
    fn code(source: &str) -> String {
        source.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn the_shared_sql_holds_nothing_that_only_mariadb_runs() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut sources = vec![dir.join("src/tx.rs"), dir.join("src/store.rs")];
        for entry in std::fs::read_dir(dir.join("src/mysql")).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name() != Some("dialect.rs".as_ref()) {
                sources.push(path);
            }
        }
        for path in &sources {
            let found = mariadb_only(&code(&std::fs::read_to_string(path).unwrap()));
            assert!(found.is_empty(), "{}: {found:?} (say it in dialect.rs)", path.display());
        }
        let files = std::fs::read_dir(dir.join("migrations/mysql"))
            .unwrap()
            .chain(std::fs::read_dir(dir.join("routines/mysql")).unwrap());
        for entry in files {
            let path = entry.unwrap().path();
            let sql: &'static str = std::fs::read_to_string(&path).unwrap().leak();
            let found = mariadb_only(&Flavor::MySql.migration_sql(sql));
            assert!(found.is_empty(), "{} as MySQL runs it: {found:?}", path.display());
        }
    }

    #[test]
    fn mysql_gets_its_own_bounds_and_collation() {
        const IDLE: std::time::Duration = crate::tx::IDLE_IN_TRANSACTION_MAX;
        for sql in [
            Flavor::MySql.begin_sql(2_500, IDLE, "READ COMMITTED"),
            Flavor::MySql.session_defaults().to_string(),
            Flavor::MySql.unbounded_statements().to_string(),
        ] {
            assert!(mariadb_only(&sql).is_empty(), "{sql}");
        }
        assert_eq!(
            Flavor::MariaDb.begin_sql(2_500, IDLE, "READ COMMITTED"),
            "SET SESSION innodb_lock_wait_timeout = 3, lock_wait_timeout = 3, \
             max_statement_time = 2.500, idle_transaction_timeout = 2, \
             tx_isolation = 'READ-COMMITTED'; BEGIN"
        );
        assert!(Flavor::MySql.begin_sql(1, IDLE, "READ COMMITTED").contains("= 1, lock_wait"));
        let idle_s = crate::store::SESSION_IDLE_MAX.as_secs();
        assert!(Flavor::MySql.session_defaults().ends_with(&format!("wait_timeout = {idle_s}")));
        assert!(Flavor::MariaDb.session_idle_bound().ends_with(&format!("= {idle_s}")));
        assert_eq!(Flavor::of_version("10.11.19-MariaDB-0+deb12u1"), Flavor::MariaDb);
        assert_eq!(Flavor::of_version("8.4.3"), Flavor::MySql);
    }
}
