use crate::clock::Now;
use crate::deliveries::{Claim, NewDelivery};
use crate::error::StoreError;
use sqlx::SqliteConnection;

/// Claim first, then budget (one writer: no lock order to keep): a claim inserted on short
/// quota is deleted again before returning, so the transaction holds nothing unbudgeted.
pub(crate) async fn delivery_claim(
    c: &mut SqliteConnection,
    new: &NewDelivery<'_>,
    now: Now,
    _notify: bool,
) -> Result<Claim, StoreError> {
    let now = now.sqlite_ms();
    let inserted = sqlx::query(
        "INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient,
             fingerprint, fingerprint_version, quota_key, cost, state, max_attempts,
             next_attempt_at, created_at, updated_at, destination)
         SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?12, ?7, ?8, 'pending', ?9, coalesce(?10, ?11), ?11, ?11,
             ?13
         WHERE EXISTS (SELECT 1 FROM tenants WHERE id = ?2)
         ON CONFLICT (tenant_id, operation_key, channel) DO NOTHING",
    )
    .bind(new.id)
    .bind(new.tenant_id)
    .bind(new.operation_key)
    .bind(new.channel)
    .bind(new.recipient)
    .bind(new.fingerprint)
    .bind(new.quota_key)
    .bind(new.cost)
    .bind(new.max_attempts)
    .bind(new.send_at)
    .bind(now)
    .bind(new.fingerprint_version)
    // PostgreSQL and MariaDB generate the column from the same function.
    .bind(herald_core::hold::destination_of(new.channel, new.recipient))
    .execute(&mut *c)
    .await?
    .rows_affected()
        == 1;
    if !inserted {
        let known: Option<i32> = sqlx::query_scalar("SELECT 1 FROM tenants WHERE id = ?1")
            .bind(new.tenant_id)
            .fetch_optional(&mut *c)
            .await?;
        return Ok(if known.is_some() { Claim::Exists } else { Claim::UnknownTenant });
    }
    sqlx::query(
        "INSERT INTO delivery_payloads (delivery_id, payload, traceparent) VALUES (?1, ?2, ?3)",
    )
    .bind(new.id)
    .bind(new.payload)
    .bind(new.traceparent)
    .execute(&mut *c)
    .await?;
    let reserved = new.cost == 0
        || super::quota::quota_reserve(
            c,
            new.tenant_id,
            new.quota_key,
            new.cost,
            new.id,
            1,
            Now::At(now),
        )
        .await?;
    if !reserved {
        // The payload goes with it (ON DELETE CASCADE).
        sqlx::query("DELETE FROM deliveries WHERE id = ?1").bind(new.id).execute(&mut *c).await?;
        return Ok(Claim::QuotaShort);
    }
    Ok(Claim::Inserted { created_at: now, next_attempt_at: new.send_at.unwrap_or(now) })
}
