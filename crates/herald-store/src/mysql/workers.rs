use super::{Bind, bind_in_list, in_list_len, inserted, placeholders, sql};
use crate::clock::Now;
use crate::error::StoreError;
use sqlx::MySqlConnection;

/// The release recorded for `worker`: this one when the row is new. A concurrent register
/// of the same id waits on the primary key for the first transaction, then meets the
/// duplicate key (1062, undone alone: the caller's transaction goes on) and reads the row
/// with a locking read, which sees the latest commit under REPEATABLE READ too.
/// (`release` is a reserved word on both servers.)
pub(crate) async fn worker_register(
    c: &mut MySqlConnection,
    worker: &str,
    release: &str,
    now: Now,
) -> Result<String, StoreError> {
    let q = format!(
        "INSERT INTO herald_workers (worker, `release`, started_at) VALUES (?, ?, {})",
        now.mysql_sql()
    );
    let insert = sqlx::query(sql(q)).bind(worker).bind(release).bind_now(now);
    if inserted(insert.execute(&mut *c).await)? {
        return Ok(release.to_string());
    }
    Ok(sqlx::query_scalar(
        "SELECT `release` FROM herald_workers WHERE worker = ? LOCK IN SHARE MODE",
    )
    .bind(worker)
    .fetch_one(c)
    .await?)
}

pub(crate) async fn worker_releases(
    c: &mut MySqlConnection,
    workers: &[&str],
) -> Result<Vec<(String, String)>, StoreError> {
    let q = format!(
        "SELECT worker, `release` FROM herald_workers WHERE worker IN ({})",
        placeholders(in_list_len(workers.len()))
    );
    Ok(bind_in_list(sqlx::query_as(sql(q)), workers).fetch_all(c).await?)
}
