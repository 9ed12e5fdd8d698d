use crate::clock::Now;
use crate::deliveries::{Claim, NewDelivery};
use crate::error::StoreError;
use sqlx::PgConnection;

/// One statement, in a transaction or autocommitted. The account row is locked first
/// (`q`, `FOR UPDATE`, which re-reads its latest version) and the claim inserted (`d`)
/// only if the row covers the cost — so every claim locks the account before the
/// identity, whichever way it runs, and no claim inserted on short quota ever needs
/// withdrawing. The reservation (`a`) then updates the locked row and carries no
/// `available >= cost` guard of its own: if that reasoning ever failed, the balance's CHECK
/// would abort the statement rather than commit an unbudgeted claim. `j` journals the
/// reservation, `p` stores the payload, `n` queues the wake-up.
pub(crate) async fn delivery_claim(
    c: &mut PgConnection,
    new: &NewDelivery<'_>,
    now: Now,
    notify: bool,
) -> Result<Claim, StoreError> {
    let (created, due, tenant_known, covered, _notified): ClaimRow = sqlx::query_as(
        "WITH q AS (
                 SELECT 1 FROM quota_accounts
                 WHERE $8 > 0 AND tenant_id = $2 AND quota_key = $7 AND available >= $8
                 FOR UPDATE),
             t AS (SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $2) AS known),
             d AS (
                 INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient,
                     fingerprint, fingerprint_version, quota_key, cost, state, max_attempts,
                     next_attempt_at, created_at, updated_at)
                 SELECT $1, $2, $3, $4, $5, $6, $15, $7, $8, 'pending', $9,
                     coalesce(herald_ts($10), herald_now($11)), herald_now($11), herald_now($11)
                 WHERE (SELECT known FROM t) AND ($8 = 0 OR EXISTS (SELECT 1 FROM q))
                 ON CONFLICT (tenant_id, operation_key, channel) DO NOTHING
                 RETURNING id, herald_ms(created_at) AS created_ms,
                     herald_ms(next_attempt_at) AS due_ms),
             p AS (INSERT INTO delivery_payloads (delivery_id, payload)
                   SELECT id, $12::text FROM d),
             a AS (UPDATE quota_accounts SET available = available - $8,
                       reserved = reserved + $8, updated_at = herald_now($11)
                   WHERE $8 > 0 AND tenant_id = $2 AND quota_key = $7
                     AND EXISTS (SELECT 1 FROM d)
                   RETURNING 1),
             j AS (INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, delivery_id,
                       reservation_seq, at)
                   SELECT $2, $7, 'reserve', $8, $1, 1, herald_now($11) FROM a),
             n AS (SELECT pg_notify($14, '') FROM d WHERE $13)
         SELECT (SELECT created_ms FROM d), (SELECT due_ms FROM d), (SELECT known FROM t),
             $8 = 0 OR EXISTS (SELECT 1 FROM q),
             -- Referenced, or the wake-up would never be sent (a plain SELECT in WITH runs
             -- only when something reads it).
             (SELECT count(*) FROM n)",
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
    .bind(now.pg())
    .bind(new.payload)
    .bind(notify)
    .bind(crate::notify::WAKE_CHANNEL)
    .bind(new.fingerprint_version)
    .fetch_one(c)
    .await?;
    Ok(match (created, due) {
        (Some(created_at), Some(next_attempt_at)) => {
            Claim::Inserted { created_at, next_attempt_at }
        }
        _ if !tenant_known => Claim::UnknownTenant,
        _ if !covered => Claim::QuotaShort,
        _ => Claim::Exists,
    })
}

/// created, due, tenant known, quota covered, notified.
type ClaimRow = (Option<i64>, Option<i64>, bool, bool, i64);
