use crate::clock::Now;
use crate::error::StoreError;
use crate::notify::WakeTarget;
use sqlx::PgConnection;

/// The release recorded for `worker`: this one when the row is new. A concurrent register
/// of the same id waits on the primary key for the first transaction, then does nothing
/// (no failed statement: the caller's transaction goes on) and reads the row the first
/// committed, in a statement of its own so that READ COMMITTED sees it.
pub(crate) async fn worker_register(
    c: &mut PgConnection,
    worker: &str,
    release: &str,
    now: Now,
) -> Result<String, StoreError> {
    let inserted = sqlx::query(
        "INSERT INTO herald_workers (worker, release, started_at)
         VALUES ($1, $2, herald_ms(herald_now($3)))
         ON CONFLICT (worker) DO NOTHING",
    )
    .bind(worker)
    .bind(release)
    .bind(now.pg())
    .execute(&mut *c)
    .await?
    .rows_affected();
    if inserted == 1 {
        return Ok(release.to_string());
    }
    Ok(sqlx::query_scalar("SELECT release FROM herald_workers WHERE worker = $1")
        .bind(worker)
        .fetch_one(c)
        .await?)
}

pub(crate) async fn worker_releases(
    c: &mut PgConnection,
    workers: &[&str],
) -> Result<Vec<(String, String)>, StoreError> {
    Ok(sqlx::query_as("SELECT worker, release FROM herald_workers WHERE worker = ANY($1)")
        .bind(workers)
        .fetch_all(c)
        .await?)
}

pub(crate) async fn wake_target_put(
    c: &mut PgConnection,
    target: &WakeTarget,
    now: Now,
    forget_before: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "WITH put AS (
             INSERT INTO herald_wake_targets (worker, address, token, seen_at)
             VALUES ($1, $2, $3, herald_ms(herald_now($4)))
             ON CONFLICT (worker) DO UPDATE SET address = EXCLUDED.address,
                 token = EXCLUDED.token, seen_at = EXCLUDED.seen_at)
         DELETE FROM herald_wake_targets
         WHERE seen_at < herald_ms(herald_now($4)) - $5 AND worker <> $1",
    )
    .bind(&target.worker)
    .bind(&target.address)
    .bind(&target.token)
    .bind(now.pg())
    .bind(forget_before)
    .execute(c)
    .await?;
    Ok(())
}

pub(crate) async fn wake_target_drop(c: &mut PgConnection, worker: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM herald_wake_targets WHERE worker = $1")
        .bind(worker)
        .execute(c)
        .await?;
    Ok(())
}

pub(crate) async fn wake_targets(
    c: &mut PgConnection,
    now: Now,
    fresh_within: i64,
) -> Result<Vec<WakeTarget>, StoreError> {
    let rows: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT worker, address, token FROM herald_wake_targets
         WHERE seen_at >= herald_ms(herald_now($1)) - $2 ORDER BY worker",
    )
    .bind(now.pg())
    .bind(fresh_within)
    .fetch_all(c)
    .await?;
    Ok(rows.into_iter().map(WakeTarget::from).collect())
}
