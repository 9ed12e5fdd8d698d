use super::json_array;
use crate::clock::Now;
use crate::error::StoreError;
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
