use super::{Bind, end_savepoint, inserted, savepoint, sql};
use crate::clock::Now;
use crate::deliveries::{Claim, NewDelivery};
use crate::error::StoreError;
use sqlx::MySqlConnection;

/// Budget first, then claim, as on PostgreSQL: the account row is locked (`FOR UPDATE`,
/// which reads its latest version whatever the isolation) before the identity is
/// inserted, so every claim locks the account before the identity and none inserted on
/// short quota ever needs withdrawing. The writes — delivery, payload, reservation and its
/// journal row — run in one savepoint: a statement MariaDB refuses is undone alone, and
/// the claim must stand or fall whole in the caller's transaction.
///
/// Round trips: the account's lock (which also reads the server's clock once, for all the
/// claim's rows), the savepoint, the four writes — six, against the bench floor's four
/// writes.
pub(crate) async fn delivery_claim(
    c: &mut MySqlConnection,
    new: &NewDelivery<'_>,
    now: Now,
    _notify: bool,
) -> Result<Claim, StoreError> {
    let t = now.mysql_sql();
    let now_ms = if new.cost > 0 {
        let q = format!(
            "SELECT available, {t} FROM quota_accounts WHERE tenant_id = ? AND quota_key = ?
             FOR UPDATE"
        );
        let account: Option<(i64, i64)> = sqlx::query_as(sql(q))
            .bind_now(now)
            .bind(new.tenant_id)
            .bind(new.quota_key)
            .fetch_optional(&mut *c)
            .await?;
        match account {
            Some((available, now_ms)) if available >= new.cost => now_ms,
            // An account exists only for a known tenant.
            Some(_) => return Ok(Claim::QuotaShort),
            None if super::tenants::tenant_exists(c, new.tenant_id).await? => {
                return Ok(Claim::QuotaShort);
            }
            None => return Ok(Claim::UnknownTenant),
        }
    } else {
        let q = format!("SELECT {t} FROM tenants WHERE id = ?");
        let found: Option<i64> = sqlx::query_scalar(sql(q))
            .bind_now(now)
            .bind(new.tenant_id)
            .fetch_optional(&mut *c)
            .await?;
        match found {
            Some(now_ms) => now_ms,
            None => return Ok(Claim::UnknownTenant),
        }
    };
    let now = Now::At(now_ms);
    savepoint(c).await?;
    let claimed = claim_steps(c, new, now, now_ms).await;
    end_savepoint(c, claimed).await
}

async fn claim_steps(
    c: &mut MySqlConnection,
    new: &NewDelivery<'_>,
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
    sqlx::query("INSERT INTO delivery_payloads (delivery_id, payload) VALUES (?, ?)")
        .bind(new.id)
        .bind(new.payload)
        .execute(&mut *c)
        .await?;
    if new.cost > 0 {
        let reserved =
            super::quota::reserve_steps(c, new.tenant_id, new.quota_key, new.cost, new.id, 1, now)
                .await?;
        if !reserved {
            // The account is locked and covered the cost: this cannot happen. If it ever
            // did, the savepoint undoes the claim rather than commit it unbudgeted.
            return Err(StoreError::Database(sqlx::Error::Protocol(
                "the locked account no longer covers the claim".into(),
            )));
        }
    }
    Ok(Claim::Inserted { created_at: now_ms, next_attempt_at: due })
}
