use super::json_array;
use crate::clock::Now;
use crate::error::StoreError;
use crate::notify::WakeTarget;
use sqlx::SqliteConnection;

/// The release recorded for `worker`: this one when the row is new. (SQLite's writer lock
/// already orders concurrent registers.)
pub(crate) async fn worker_register(
    c: &mut SqliteConnection,
    worker: &str,
    release: &str,
    now: Now,
) -> Result<String, StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO herald_workers (worker, release, started_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (worker) DO NOTHING",
    )
    .bind(worker)
    .bind(release)
    .bind(now.sqlite_ms())
    .execute(&mut *c)
    .await?
    .rows_affected();
    if inserted == 1 {
        return Ok(release.to_string());
    }
    Ok(sqlx::query_scalar("SELECT release FROM herald_workers WHERE worker = ?1")
        .bind(worker)
        .fetch_one(c)
        .await?)
}

pub(crate) async fn worker_releases(
    c: &mut SqliteConnection,
    workers: &[&str],
) -> Result<Vec<(String, String)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT worker, release FROM herald_workers
         WHERE worker IN (SELECT value FROM json_each(?1))",
    )
    .bind(json_array(workers))
    .fetch_all(c)
    .await?)
}

pub(crate) async fn wake_target_put(
    c: &mut SqliteConnection,
    target: &WakeTarget,
    now: Now,
    forget_before: i64,
) -> Result<(), StoreError> {
    let now = now.sqlite_ms();
    sqlx::query(
        "INSERT INTO herald_wake_targets (worker, address, token, seen_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (worker) DO UPDATE SET address = excluded.address,
             token = excluded.token, seen_at = excluded.seen_at",
    )
    .bind(&target.worker)
    .bind(&target.address)
    .bind(&target.token)
    .bind(now)
    .execute(&mut *c)
    .await?;
    sqlx::query("DELETE FROM herald_wake_targets WHERE seen_at < ?1")
        .bind(now - forget_before)
        .execute(c)
        .await?;
    Ok(())
}

pub(crate) async fn wake_target_drop(
    c: &mut SqliteConnection,
    worker: &str,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM herald_wake_targets WHERE worker = ?1")
        .bind(worker)
        .execute(c)
        .await?;
    Ok(())
}

pub(crate) async fn wake_targets(
    c: &mut SqliteConnection,
    now: Now,
    fresh_within: i64,
) -> Result<Vec<WakeTarget>, StoreError> {
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT worker, address, token FROM herald_wake_targets WHERE seen_at >= ?1
         ORDER BY worker",
    )
    .bind(now.sqlite_ms() - fresh_within)
    .fetch_all(c)
    .await?;
    Ok(rows.into_iter().map(WakeTarget::from).collect())
}
