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
pub(crate) mod audit;
pub(crate) mod bench;
pub(crate) mod claim;
pub(crate) mod destinations;
pub mod dialect;
pub(crate) mod holds;
pub(crate) mod keys;
pub(crate) mod lease;
pub(crate) mod manage;
pub(crate) mod quota;
pub(crate) mod read;
pub(crate) mod receipts;
pub(crate) mod retention;
pub(crate) mod rollup;
pub(crate) mod settings;
pub(crate) mod tenants;
pub(crate) mod ui_sessions;
pub(crate) mod workers;

use crate::clock::Now;
use crate::error::StoreError;
use sqlx::mysql::{MySqlArguments, MySqlQueryResult};
use sqlx::{MySql, MySqlConnection};

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

/// How many values an `IN (…)` list of `n` is padded to: the next power of two, so a
/// statement over lists of any length has a dozen texts, not a thousand (see
/// `Now::mysql_sql` for what a new text costs). The padding repeats the last value,
/// which changes nothing in an `IN` list.
pub(crate) fn in_list_len(n: usize) -> usize {
    n.next_power_of_two()
}

/// Binds `values`, padded to [`in_list_len`] by repeating the last one.
pub(crate) fn bind_in_list<'q, Q, T>(mut query: Q, values: &[T]) -> Q
where
    Q: Bind<'q>,
    T: Clone + sqlx::Encode<'q, MySql> + sqlx::Type<MySql> + Send + 'q,
{
    for i in 0..in_list_len(values.len()) {
        query = query.bind_value(values[i.min(values.len() - 1)].clone());
    }
    query
}

/// One query of [`insert_rows`], as its `bind` receives it.
pub(crate) type RowsQuery<'q> = sqlx::query::Query<'q, MySql, MySqlArguments>;

/// `head`, `row` once per item, then `tail`, in as few statements as keep the texts few:
/// one per power of two in the count (13 rows: 8, 4 and 1), so a statement of every
/// length is not prepared (see `Now::mysql_sql` for what a new text costs). `bind` binds
/// one item's values in `row`'s order. Rows affected, summed; the database's error as it
/// came (a caller may answer a duplicate key).
pub(crate) async fn insert_rows<'q, T>(
    c: &mut MySqlConnection,
    head: &str,
    row: &str,
    tail: &str,
    items: &'q [T],
    bind: impl Fn(RowsQuery<'q>, &'q T) -> RowsQuery<'q>,
) -> Result<u64, sqlx::Error> {
    let (mut rest, mut affected) = (items, 0);
    while !rest.is_empty() {
        let (chunk, after) = rest.split_at(1 << rest.len().ilog2());
        rest = after;
        let q = format!("{head} {}{tail}", vec![row; chunk.len()].join(", "));
        let query = chunk.iter().fold(sqlx::query(sql(q)), &bind);
        affected += query.execute(&mut *c).await?.rows_affected();
    }
    Ok(affected)
}

/// The query types' `bind`, as one trait, so helpers can bind whatever they are given.
pub(crate) trait Bind<'q>: Sized {
    fn bind_value<T: sqlx::Encode<'q, MySql> + sqlx::Type<MySql> + Send + 'q>(self, v: T) -> Self;

    /// Binds the fixed instant where [`Now::mysql_sql`] wrote a placeholder; nothing for
    /// the server's clock.
    fn bind_now(self, now: Now) -> Self {
        match now {
            Now::At(ms) => self.bind_value(ms),
            Now::Database => self,
        }
    }
}

impl<'q> Bind<'q> for sqlx::query::Query<'q, MySql, MySqlArguments> {
    fn bind_value<T: sqlx::Encode<'q, MySql> + sqlx::Type<MySql> + Send + 'q>(self, v: T) -> Self {
        self.bind(v)
    }
}

impl<'q, O> Bind<'q> for sqlx::query::QueryAs<'q, MySql, O, MySqlArguments> {
    fn bind_value<T: sqlx::Encode<'q, MySql> + sqlx::Type<MySql> + Send + 'q>(self, v: T) -> Self {
        self.bind(v)
    }
}

impl<'q, O> Bind<'q> for sqlx::query::QueryScalar<'q, MySql, O, MySqlArguments> {
    fn bind_value<T: sqlx::Encode<'q, MySql> + sqlx::Type<MySql> + Send + 'q>(self, v: T) -> Self {
        self.bind(v)
    }
}

/// Opens the savepoint that makes a group of statements one (see the module's notes).
pub(crate) async fn savepoint(c: &mut MySqlConnection) -> Result<(), StoreError> {
    sqlx::raw_sql("SAVEPOINT herald_step").execute(c).await?;
    Ok(())
}

/// Keeps the group when it worked, undoes all of it when it did not. After a deadlock
/// the server has already rolled back the whole transaction, savepoint included: the
/// group's own error is what the caller gets. A kept group's savepoint is left in place,
/// not released (a round trip for nothing): the next `SAVEPOINT herald_step` replaces it,
/// and the transaction's end discards it. (Groups never nest.)
pub(crate) async fn end_savepoint<T>(
    c: &mut MySqlConnection,
    result: Result<T, StoreError>,
) -> Result<T, StoreError> {
    match result {
        Ok(value) => Ok(value),
        Err(e) => {
            let _ =
                sqlx::raw_sql("ROLLBACK TO SAVEPOINT herald_step; RELEASE SAVEPOINT herald_step")
                    .execute(c)
                    .await;
            Err(e)
        }
    }
}
