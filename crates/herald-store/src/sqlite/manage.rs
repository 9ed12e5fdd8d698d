use crate::clock::Now;
use crate::error::StoreError;
use sqlx::SqliteConnection;
use sqlx::types::Uuid;

pub(crate) async fn delivery_replay_apply(
    c: &mut SqliteConnection,
    id: Uuid,
    seq: i32,
    now: Now,
) -> Result<(), StoreError> {
    let now = now.sqlite_ms();
    sqlx::query(
        "UPDATE deliveries SET state = 'pending', reservation_seq = ?2,
             attempts_base = attempts, next_attempt_at = ?3, last_error = NULL,
             sent_at = NULL, updated_at = ?3
         WHERE id = ?1",
    )
    .bind(id)
    .bind(seq)
    .bind(now)
    .execute(&mut *c)
    .await?;
    sqlx::query(
        "INSERT INTO delivery_replays (delivery_id, reservation_seq, at) VALUES (?1, ?2, ?3)",
    )
    .bind(id)
    .bind(seq)
    .bind(now)
    .execute(&mut *c)
    .await?;
    Ok(())
}
