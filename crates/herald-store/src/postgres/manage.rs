use crate::clock::Now;
use crate::error::StoreError;
use sqlx::PgConnection;
use sqlx::types::Uuid;

pub(crate) async fn delivery_replay_apply(
    c: &mut PgConnection,
    id: Uuid,
    seq: i32,
    now: Now,
) -> Result<(), StoreError> {
    sqlx::query(
        "WITH r AS (
             UPDATE deliveries SET state = 'pending', reservation_seq = $2,
                 attempts_base = attempts, next_attempt_at = herald_now($3),
                 last_error = NULL, sent_at = NULL, updated_at = herald_now($3)
             WHERE id = $1 RETURNING id)
         INSERT INTO delivery_replays (delivery_id, reservation_seq, at)
         SELECT id, $2, herald_now($3) FROM r",
    )
    .bind(id)
    .bind(seq)
    .bind(now.pg())
    .execute(c)
    .await?;
    Ok(())
}
