//! The MariaDB backend (10.11+; MySQL 8.4 through the subset both servers share,
//! untested): one module per concern, each function the MariaDB form of the contract
//! documented beside its dispatcher. Times are BIGINT Unix milliseconds, "now" is the
//! server's clock (`Now::mysql_sql`), UUIDs are BINARY(16), identities compare byte for
//! byte (`utf8mb4_nopad_bin`).
//!
//! What MariaDB does differently, handled here rather than discovered:
//! - no writing CTEs and no `UPDATE … RETURNING`: a claim, a lease or a movement is
//!   several statements, and the ones that must stand or fall together run inside a
//!   savepoint ([`in_savepoint`]), because a failed statement is undone alone;
//! - a duplicate key (1062) undoes only its statement and leaves the transaction usable,
//!   so an insert whose duplicate is an answer catches it ([`inserted`]) — never `INSERT
//!   IGNORE` (it coerces bad values) nor a no-op `ON DUPLICATE KEY UPDATE` (sqlx sets
//!   CLIENT_FOUND_ROWS, so it would read as an insert);
//! - a plain read inside a REPEATABLE READ transaction (MariaDB's default, and maybe the
//!   caller's) sees the transaction's snapshot: a read that must see the latest commit —
//!   the identity a claim ran into — is a locking read;
//! - placeholders are positional (`?`), so a value used twice is bound twice.

pub(crate) mod apply;
pub(crate) mod claim;
pub(crate) mod keys;
pub(crate) mod lease;
pub(crate) mod manage;
pub(crate) mod quota;
pub(crate) mod read;
pub(crate) mod receipts;
pub(crate) mod retention;
pub(crate) mod settings;
pub(crate) mod tenants;

use crate::error::StoreError;
use sqlx::MySqlConnection;
use sqlx::mysql::MySqlQueryResult;

/// The columns of a [`crate::deliveries::DeliveryRow`].
pub(crate) const DELIVERY_COLS: &str = "id, tenant_id, operation_key, channel, recipient, \
    fingerprint, fingerprint_version, quota_key, cost, state, attempts, max_attempts, \
    attempts_base, reservation_seq, next_attempt_at, lease_owner, lease_until, last_error, \
    created_at, updated_at, sent_at, attempt_worker, attempt_started_at";

pub(crate) fn sql(s: String) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(s)
}

/// Whether an INSERT inserted: `false` for a duplicate key (1062), which MariaDB undoes
/// alone, leaving the transaction as it was.
pub(crate) fn inserted(result: Result<MySqlQueryResult, sqlx::Error>) -> Result<bool, StoreError> {
    match result {
        Ok(done) => Ok(done.rows_affected() == 1),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// `?, ?, …` for `n` values.
pub(crate) fn placeholders(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// Opens the savepoint that makes a group of statements one (see the module's notes).
pub(crate) async fn savepoint(c: &mut MySqlConnection) -> Result<(), StoreError> {
    sqlx::raw_sql("SAVEPOINT herald_step").execute(c).await?;
    Ok(())
}

/// Keeps the group when it worked, undoes all of it when it did not. After a deadlock
/// the server has already rolled back the whole transaction, savepoint included: the
/// group's own error is what the caller gets.
pub(crate) async fn end_savepoint<T>(
    c: &mut MySqlConnection,
    result: Result<T, StoreError>,
) -> Result<T, StoreError> {
    match result {
        Ok(value) => {
            sqlx::raw_sql("RELEASE SAVEPOINT herald_step").execute(c).await?;
            Ok(value)
        }
        Err(e) => {
            let _ =
                sqlx::raw_sql("ROLLBACK TO SAVEPOINT herald_step; RELEASE SAVEPOINT herald_step")
                    .execute(c)
                    .await;
            Err(e)
        }
    }
}
