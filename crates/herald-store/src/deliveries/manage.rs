//! Replay: the same row back to `pending` under a new reservation. (Cancel is a
//! [`super::Transition`]; whether either is allowed is the library's call.)

use crate::clock::Now;
use crate::conn::Conn;
use crate::error::StoreError;
use sqlx::types::Uuid;

/// Puts a delivery back in the queue under reservation `seq` (reserved by the caller in
/// this transaction) with a fresh attempt budget — attempt numbers keep counting — and
/// records the replay.
pub async fn delivery_replay_apply(
    conn: Conn<'_>,
    id: Uuid,
    seq: i32,
    now: Now,
) -> Result<(), StoreError> {
    crate::per_backend!(conn, manage::delivery_replay_apply(id, seq, now))
}
