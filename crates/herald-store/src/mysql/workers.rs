use super::{Bind, bind_in_list, in_list_len, inserted, placeholders, sql};
use crate::clock::Now;
use crate::error::StoreError;
use crate::notify::WakeTarget;
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

/// The stale rows go first: a DELETE that scans takes its locks before this worker's own
/// row is written, so two workers beating at once wait for each other, never deadlock.
pub(crate) async fn wake_target_put(
    c: &mut MySqlConnection,
    target: &WakeTarget,
    now: Now,
    forget_before: i64,
) -> Result<(), StoreError> {
    let q = format!("DELETE FROM herald_wake_targets WHERE seen_at < {} - ?", now.mysql_sql());
    sqlx::query(sql(q)).bind_now(now).bind(forget_before).execute(&mut *c).await?;
    let q = format!(
        "INSERT INTO herald_wake_targets (worker, address, token, seen_at) VALUES (?, ?, ?, {})
         ON DUPLICATE KEY UPDATE address = VALUES(address), token = VALUES(token),
             seen_at = VALUES(seen_at)",
        now.mysql_sql()
    );
    sqlx::query(sql(q))
        .bind(&target.worker)
        .bind(&target.address)
        .bind(&target.token)
        .bind_now(now)
        .execute(c)
        .await?;
    Ok(())
}

pub(crate) async fn wake_target_drop(
    c: &mut MySqlConnection,
    worker: &str,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM herald_wake_targets WHERE worker = ?").bind(worker).execute(c).await?;
    Ok(())
}

pub(crate) async fn wake_targets(
    c: &mut MySqlConnection,
    now: Now,
    fresh_within: i64,
) -> Result<Vec<WakeTarget>, StoreError> {
    let q = format!(
        "SELECT worker, address, token FROM herald_wake_targets WHERE seen_at >= {} - ?
         ORDER BY worker",
        now.mysql_sql()
    );
    let rows: Vec<(String, String, String)> =
        sqlx::query_as(sql(q)).bind_now(now).bind(fresh_within).fetch_all(c).await?;
    Ok(rows.into_iter().map(WakeTarget::from).collect())
}
