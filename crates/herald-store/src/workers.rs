//! Workers: which release each worker process runs. A worker id names one process, so its
//! row is written once and never changed: the release an attempt's worker ran is never
//! relabelled, for as long as the attempt is kept.

use crate::clock::Now;
use crate::conn::Conn;
use crate::error::StoreError;

/// Records that `worker` runs `release`, started at `now`. A new worker is inserted (and
/// `None` returned); the same worker with the same release again changes nothing (`None`);
/// the same worker with another release changes nothing and returns the release recorded.
///
/// Safe under a concurrent register of one id: the second insert waits for the first
/// transaction on the primary key, then finds its row (or inserts, if the first rolled
/// back). A duplicate is an answer, never a failed statement, so the caller's transaction
/// goes on.
pub async fn worker_register(
    conn: Conn<'_>,
    worker: &str,
    release: &str,
    now: Now,
) -> Result<Option<String>, StoreError> {
    let recorded: String =
        crate::per_backend!(conn, workers::worker_register(worker, release, now))?;
    Ok((recorded != release).then_some(recorded))
}

/// (worker, release) of those of `workers` that are registered, in no particular order.
/// No query for no workers.
pub async fn worker_releases(
    conn: Conn<'_>,
    workers: &[&str],
) -> Result<Vec<(String, String)>, StoreError> {
    if workers.is_empty() {
        return Ok(Vec::new());
    }
    crate::per_backend!(conn, workers::worker_releases(workers))
}
