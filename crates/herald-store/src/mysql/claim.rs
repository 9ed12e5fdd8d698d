use super::{Bind, end_savepoint, inserted, savepoint, sql};
use crate::clock::Now;
use crate::deliveries::{Claim, NewDelivery};
use crate::error::StoreError;
use sqlx::MySqlConnection;

/// Budget first, then claim, as on PostgreSQL: a stripe of the account that covers the
/// cost and that no other transaction holds is locked (`herald_quota_take`, whose locking
/// read sees the latest version whatever the isolation) before the identity is inserted,
/// so every claim locks its stripe before the identity and none inserted on short quota
/// ever needs withdrawing. When no free stripe covers it, and the identity is not taken
/// (a duplicate is answered before short quota, and a refusal moves no balance), the
/// account is gathered: every stripe waited for, the balance gathered into one if none
/// covers the cost alone. The writes — delivery, payload, reservation and its journal
/// row — run in one savepoint: a statement MariaDB refuses is undone alone, and the claim
/// must stand or fall whole in the caller's transaction.
///
/// Round trips: the stripe's call and its answer (which also reads the server's clock
/// once, for all the claim's rows), the savepoint, the four writes — seven, against the
/// bench floor's four writes.
pub(crate) async fn delivery_claim(
    c: &mut MySqlConnection,
    new: &NewDelivery<'_>,
    now: Now,
    _notify: bool,
) -> Result<Claim, StoreError> {
    let t = now.mysql_sql();
    let (stripe, now_ms) = if new.cost > 0 {
        let (tenant, key, cost) = (new.tenant_id, new.quota_key, new.cost);
        match super::quota::stripe_take(c, tenant, key, cost, false, now).await? {
            (Some(stripe), now_ms) => (stripe, now_ms),
            (None, now_ms) => {
                if !super::tenants::tenant_exists(c, new.tenant_id).await? {
                    return Ok(Claim::UnknownTenant);
                }
                if identity_taken(c, new).await? {
                    return Ok(Claim::Exists);
                }
                match super::quota::stripe_take(c, tenant, key, cost, true, now).await? {
                    (Some(stripe), _) => (stripe, now_ms),
                    (None, _) => return Ok(Claim::QuotaShort),
                }
            }
        }
    } else {
        let q = format!("SELECT {t} FROM tenants WHERE id = ?");
        let found: Option<i64> = sqlx::query_scalar(sql(q))
            .bind_now(now)
            .bind(new.tenant_id)
            .fetch_optional(&mut *c)
            .await?;
        match found {
            Some(now_ms) => (0, now_ms),
            None => return Ok(Claim::UnknownTenant),
        }
    };
    let now = Now::At(now_ms);
    savepoint(c).await?;
    let claimed = claim_steps(c, new, stripe, now, now_ms).await;
    end_savepoint(c, claimed).await
}

/// Whether a delivery with the claim's identity exists (as this transaction sees it).
async fn identity_taken(
    c: &mut MySqlConnection,
    new: &NewDelivery<'_>,
) -> Result<bool, StoreError> {
    let taken: Option<i32> = sqlx::query_scalar(
        "SELECT 1 FROM deliveries WHERE tenant_id = ? AND operation_key = ? AND channel = ?",
    )
    .bind(new.tenant_id)
    .bind(new.operation_key)
    .bind(new.channel)
    .fetch_optional(&mut *c)
    .await?;
    Ok(taken.is_some())
}

async fn claim_steps(
    c: &mut MySqlConnection,
    new: &NewDelivery<'_>,
    stripe: i16,
    now: Now,
    now_ms: i64,
) -> Result<Claim, StoreError> {
    let due = new.send_at.unwrap_or(now_ms);
    let fresh = inserted(
        sqlx::query(
            "INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient,
                 fingerprint, fingerprint_version, quota_key, cost, state, max_attempts,
                 next_attempt_at, created_at, updated_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)",
        )
        .bind(new.id)
        .bind(new.tenant_id)
        .bind(new.operation_key)
        .bind(new.channel)
        .bind(new.recipient)
        .bind(new.fingerprint)
        .bind(new.fingerprint_version)
        .bind(new.quota_key)
        .bind(new.cost)
        .bind(new.max_attempts)
        .bind(due)
        .bind(now_ms)
        .bind(now_ms)
        .execute(&mut *c)
        .await,
    )?;
    if !fresh {
        return Ok(Claim::Exists);
    }
    sqlx::query(
        "INSERT INTO delivery_payloads (delivery_id, payload, traceparent) VALUES (?, ?, ?)",
    )
    .bind(new.id)
    .bind(new.payload)
    .bind(new.traceparent)
    .execute(&mut *c)
    .await?;
    if new.cost > 0 {
        let (tenant, key, cost) = (new.tenant_id, new.quota_key, new.cost);
        let reserved =
            super::quota::reserve_steps(c, tenant, key, stripe, cost, new.id, 1, now).await?;
        if !reserved {
            // The stripe is locked and covered the cost: this cannot happen. If it ever
            // did, the savepoint undoes the claim rather than commit it unbudgeted.
            return Err(StoreError::Database(sqlx::Error::Protocol(
                "the locked account no longer covers the claim".into(),
            )));
        }
    }
    Ok(Claim::Inserted { created_at: now_ms, next_attempt_at: due })
}
