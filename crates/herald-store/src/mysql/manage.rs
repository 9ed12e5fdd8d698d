use super::Bind;
use crate::clock::Now;
use crate::error::StoreError;
use sqlx::MySqlConnection;
use sqlx::types::Uuid;

pub(crate) async fn delivery_replay_apply(
    c: &mut MySqlConnection,
    id: Uuid,
    seq: i32,
    now: Now,
) -> Result<(), StoreError> {
    let t = now.mysql_sql();
    let q = format!(
        "UPDATE deliveries SET state = 'pending', reservation_seq = ?,
             attempts_base = attempts, next_attempt_at = {t}, last_error = NULL,
             sent_at = NULL, updated_at = {t}
         WHERE id = ?"
    );
    sqlx::query(super::sql(q))
        .bind(seq)
        .bind_now(now)
        .bind_now(now)
        .bind(id)
        .execute(&mut *c)
        .await?;
    let q = format!(
        "INSERT INTO delivery_replays (delivery_id, reservation_seq, at) VALUES (?, ?, {t})"
    );
    sqlx::query(super::sql(q)).bind(id).bind(seq).bind_now(now).execute(&mut *c).await?;
    Ok(())
}
