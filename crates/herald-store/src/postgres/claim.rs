use crate::clock::Now;
use crate::deliveries::{
    Claim, LockedStripes, NewDelivery, Planned, batch_answers, batch_available, batch_needs,
    claim_plan, gathered, stripe_plan,
};
use crate::error::StoreError;
use sqlx::PgConnection;
use sqlx::types::Uuid;
use std::collections::HashMap;

/// One statement, in a transaction or autocommitted, in the common case. A stripe of the
/// account that covers the cost and that no other transaction holds is locked first (`q`,
/// `FOR UPDATE SKIP LOCKED`: the lowest such stripe, in the key's order, which reads one
/// row when it is free; SKIP LOCKED spreads concurrent claims over exactly as many stripes
/// as are held at once, so a tenant's reservations sit on few stripes, which is what the
/// recorder updates when it settles them) and the claim inserted (`d`) only if there is one —
/// so every claim locks its stripe before the identity, whichever way it runs, and no
/// claim inserted on short quota ever needs withdrawing. The reservation (`a`) then
/// updates the locked stripe and carries no `available >= cost` guard of its own: if that
/// reasoning ever failed, the balance's CHECK would abort the statement rather than commit
/// an unbudgeted claim. The delivery row carries the reservation (its stripe and its id in
/// the journal's order), `p` stores the payload, `n` queues the wake-up. When no free stripe covers the cost, `herald_quota_gather` waits for the
/// held ones (and gathers the balance into one if none covers it alone), and the claim
/// runs again on the stripe it returns, which this transaction holds by then.
pub(crate) async fn delivery_claim(
    c: &mut PgConnection,
    new: &NewDelivery<'_>,
    now: Now,
    notify: bool,
) -> Result<Claim, StoreError> {
    let claim = if new.cost > 0 && sqlx::Connection::is_in_transaction(&*c) {
        // In the caller's transaction the search runs in a savepoint. A search that finds
        // no free stripe may still have locked one: a stripe that another transaction
        // drained and committed after the statement's snapshot (PostgreSQL keeps the lock
        // of a row whose re-check failed), which the transaction would hold to its end,
        // and herald_quota_gather below waits for every held stripe in order while holding
        // it: two such waits deadlock, and the server's detector ends one after
        // `deadlock_timeout` (the exhaustion race, `striped::`, saw about three a race, and
        // one of its transactions once waited past the runner's 10 s). Undoing the
        // savepoint releases the stray. Two round trips more per claim in a transaction
        // (docs/perf.md, "Stray stripe locks"); autocommitted, the statement's end
        // releases it.
        let mut search = sqlx::Connection::begin(&mut *c).await?;
        let claim = claim_once(&mut search, new, now, notify, None).await?;
        if claim == Claim::QuotaShort {
            search.rollback().await?;
        } else {
            search.commit().await?;
        }
        claim
    } else {
        claim_once(c, new, now, notify, None).await?
    };
    if claim != Claim::QuotaShort || new.cost == 0 {
        return Ok(claim);
    }
    // A duplicate is answered before short quota, and a refusal moves no balance.
    let taken: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM deliveries
                        WHERE tenant_id = $1 AND operation_key = $2 AND channel = $3)",
    )
    .bind(new.tenant_id)
    .bind(new.operation_key)
    .bind(new.channel)
    .fetch_one(&mut *c)
    .await?;
    if taken {
        return Ok(Claim::Exists);
    }
    // The gathered stripe must stay locked until the claim on it: a transaction of its
    // own when the claim is autocommitted, a savepoint inside the caller's.
    let mut tx = sqlx::Connection::begin(&mut *c).await?;
    let given: Option<i16> =
        sqlx::query_scalar("SELECT herald_quota_gather($1, $2, $3, herald_now($4))")
            .bind(new.tenant_id)
            .bind(new.quota_key)
            .bind(new.cost)
            .bind(now.pg())
            .fetch_one(&mut *tx)
            .await?;
    let claim = match given {
        Some(stripe) => claim_once(&mut tx, new, now, notify, Some(stripe)).await?,
        None => Claim::QuotaShort,
    };
    tx.commit().await?;
    Ok(claim)
}

async fn claim_once(
    c: &mut PgConnection,
    new: &NewDelivery<'_>,
    now: Now,
    notify: bool,
    given: Option<i16>,
) -> Result<Claim, StoreError> {
    let (created, due, tenant_known, covered, _notified): ClaimRow = sqlx::query_as(
        "WITH q AS (
                 SELECT (SELECT stripe FROM quota_accounts
                         WHERE $8 > 0 AND tenant_id = $2 AND quota_key = $7 AND available >= $8
                           AND stripe BETWEEN coalesce($16, 0) AND coalesce($16, 63)
                         ORDER BY stripe LIMIT 1 FOR UPDATE SKIP LOCKED) AS stripe),
             t AS (SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $2) AS known),
             d AS (
                 INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient,
                     fingerprint, fingerprint_version, quota_key, cost, state, max_attempts,
                     next_attempt_at, created_at, updated_at, reserve_stripe, reserve_id)
                 SELECT $1, $2, $3, $4, $5, $6, $15, $7, $8, 'pending', $9,
                     coalesce(herald_ts($10), herald_now($11)), herald_now($11), herald_now($11),
                     (SELECT stripe FROM q),
                     CASE WHEN $8 > 0 THEN nextval('quota_movements_id_seq') END
                 WHERE (SELECT known FROM t) AND ($8 = 0 OR (SELECT stripe FROM q) IS NOT NULL)
                 ON CONFLICT (tenant_id, operation_key, channel) DO NOTHING
                 RETURNING id, herald_ms(created_at) AS created_ms,
                     herald_ms(next_attempt_at) AS due_ms),
             p AS (INSERT INTO delivery_payloads (delivery_id, payload, traceparent)
                   SELECT id, $12::text, $17::text FROM d),
             a AS (UPDATE quota_accounts SET available = available - $8,
                       reserved = reserved + $8, updated_at = herald_now($11)
                   WHERE $8 > 0 AND tenant_id = $2 AND quota_key = $7
                     AND stripe = (SELECT stripe FROM q) AND EXISTS (SELECT 1 FROM d)
                   RETURNING stripe),
             n AS (SELECT pg_notify($14, '') FROM d WHERE $13)
         SELECT (SELECT created_ms FROM d), (SELECT due_ms FROM d), (SELECT known FROM t),
             $8 = 0 OR (SELECT stripe FROM q) IS NOT NULL,
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
    .bind(given)
    .bind(new.traceparent)
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

/// [`crate::deliveries::deliveries_claim_many`] on PostgreSQL: three or four statements
/// for any number of deliveries. (1) For each account the batch reserves from, one free
/// stripe that covers the whole batch, locked (`SKIP LOCKED`) in the one order and read;
/// for an account that has none, every stripe (as `quota_lock` does); (2) for each delivery, whether its tenant exists and
/// its identity is taken; then the plan ([`claim_plan`]), and (3) one statement inserting
/// every planned delivery (`ON CONFLICT DO NOTHING`: an identity committed meanwhile is
/// skipped), their payloads, one reservation per stripe for what was inserted (each carried
/// by its delivery row), and the wake-up. The balance's CHECK would abort the statement rather than
/// commit an unbudgeted claim, should the plan ever be wrong.
pub(crate) async fn deliveries_claim_many(
    c: &mut PgConnection,
    news: &[NewDelivery<'_>],
    now: Now,
    notify: bool,
) -> Result<Vec<Claim>, StoreError> {
    let totals = batch_needs(news);
    let mut stripes = LockedStripes::new();
    // The common case: one free stripe of each account covers the whole batch, locked
    // with SKIP LOCKED, the accounts in the one order. Locking every stripe of every
    // account in the batch (64 rows each) cost the group-committed paths about half their
    // rate, and waited for the callers' transactions holding any of them.
    let (tenants, keys, needs): (Vec<Uuid>, Vec<String>, Vec<i64>) =
        totals.iter().map(|((t, k), n)| (*t, k.clone(), *n)).collect();
    for (t, k, stripe, available) in sqlx::query_as::<_, (Uuid, String, i16, i64)>(
        "SELECT k.tenant_id, k.quota_key, s.stripe, s.available
         FROM unnest($1::uuid[], $2::text[], $3::int8[]) WITH ORDINALITY
              AS k (tenant_id, quota_key, need, ord)
         CROSS JOIN LATERAL (
             SELECT q.stripe, q.available FROM quota_accounts q
             WHERE q.tenant_id = k.tenant_id AND q.quota_key = k.quota_key
               AND q.available >= k.need
             ORDER BY q.stripe LIMIT 1 FOR UPDATE SKIP LOCKED) AS s
         ORDER BY k.ord",
    )
    .bind(&tenants)
    .bind(&keys)
    .bind(&needs)
    .fetch_all(&mut *c)
    .await?
    {
        stripes.insert((t, k), vec![(stripe, available)]);
    }
    // The others: every stripe, locked in the one order (waiting for the callers'
    // transactions that hold them), so that the plan sees the account whole.
    let (tenants, keys): (Vec<Uuid>, Vec<String>) =
        totals.keys().filter(|a| !stripes.contains_key(*a)).cloned().unzip();
    for (t, k, stripe, available) in sqlx::query_as::<_, (Uuid, String, i16, i64)>(
        "SELECT q.tenant_id, q.quota_key, q.stripe, q.available FROM quota_accounts q
         JOIN unnest($1::uuid[], $2::text[]) AS k (tenant_id, quota_key)
           ON q.tenant_id = k.tenant_id AND q.quota_key = k.quota_key
         ORDER BY q.tenant_id, q.quota_key, q.stripe
         FOR UPDATE OF q",
    )
    .bind(&tenants)
    .bind(&keys)
    .fetch_all(&mut *c)
    .await?
    {
        stripes.entry((t, k)).or_default().push((stripe, available));
    }
    let available = batch_available(&stripes);

    let column = |f: fn(&NewDelivery<'_>) -> String| news.iter().map(f).collect::<Vec<_>>();
    let tenant_ids: Vec<Uuid> = news.iter().map(|n| n.tenant_id).collect();
    let operation_keys = column(|n| n.operation_key.to_string());
    let channels = column(|n| n.channel.to_string());
    let seen: Vec<(bool, bool)> = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM tenants t WHERE t.id = i.tenant_id),
             EXISTS (SELECT 1 FROM deliveries d WHERE d.tenant_id = i.tenant_id
                 AND d.operation_key = i.operation_key AND d.channel = i.channel)
         FROM unnest($1::uuid[], $2::text[], $3::text[])
             WITH ORDINALITY AS i (tenant_id, operation_key, channel, ord)
         ORDER BY i.ord",
    )
    .bind(&tenant_ids)
    .bind(&operation_keys)
    .bind(&channels)
    .fetch_all(&mut *c)
    .await?;
    let (known, taken): (Vec<bool>, Vec<bool>) = seen.into_iter().unzip();
    let plan = claim_plan(news, &known, &taken, available);

    let admitted: Vec<&NewDelivery<'_>> =
        news.iter().zip(&plan).filter(|(_, p)| **p == Planned::Insert).map(|(n, _)| n).collect();
    let on_stripe = stripes_for(c, &admitted, stripes, now).await?;
    let inserted: HashMap<Uuid, (i64, i64)> = if admitted.is_empty() {
        HashMap::new()
    } else {
        let pick =
            |f: fn(&NewDelivery<'_>) -> String| admitted.iter().map(|n| f(n)).collect::<Vec<_>>();
        let rows: Vec<(Uuid, i64, i64, i64)> = sqlx::query_as(
            "WITH i AS (
                 SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::text[], $5::text[],
                     $6::bytea[], $7::int2[], $8::text[], $9::int8[], $10::int4[], $11::int8[],
                     $12::text[], $16::int2[], $17::text[])
                     AS i (id, tenant_id, operation_key, channel, recipient, fingerprint,
                         fingerprint_version, quota_key, cost, max_attempts, send_at, payload,
                         stripe, traceparent)),
             d AS (
                 INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient,
                     fingerprint, fingerprint_version, quota_key, cost, state, max_attempts,
                     next_attempt_at, created_at, updated_at, reserve_stripe, reserve_id)
                 SELECT id, tenant_id, operation_key, channel, recipient, fingerprint,
                     fingerprint_version, quota_key, cost, 'pending', max_attempts,
                     coalesce(herald_ts(send_at), herald_now($13)), herald_now($13),
                     herald_now($13), CASE WHEN cost > 0 THEN stripe END,
                     CASE WHEN cost > 0 THEN nextval('quota_movements_id_seq') END
                 FROM i
                 ON CONFLICT (tenant_id, operation_key, channel) DO NOTHING
                 RETURNING id, tenant_id, quota_key, cost,
                     herald_ms(created_at) AS created_ms, herald_ms(next_attempt_at) AS due_ms),
             p AS (INSERT INTO delivery_payloads (delivery_id, payload, traceparent)
                   SELECT i.id, i.payload, i.traceparent FROM i JOIN d ON d.id = i.id),
             s AS (SELECT d.tenant_id, d.quota_key, i.stripe, sum(d.cost) AS total
                   FROM d JOIN i ON i.id = d.id WHERE d.cost > 0
                   GROUP BY d.tenant_id, d.quota_key, i.stripe),
             a AS (UPDATE quota_accounts q SET available = q.available - s.total,
                       reserved = q.reserved + s.total, updated_at = herald_now($13)
                   FROM s WHERE q.tenant_id = s.tenant_id AND q.quota_key = s.quota_key
                     AND q.stripe = s.stripe
                   RETURNING 1),
             n AS (SELECT pg_notify($14, '') FROM (SELECT 1 FROM d LIMIT 1) AS one WHERE $15)
         SELECT id, created_ms, due_ms, (SELECT count(*) FROM n) FROM d",
        )
        .bind(admitted.iter().map(|n| n.id).collect::<Vec<_>>())
        .bind(admitted.iter().map(|n| n.tenant_id).collect::<Vec<_>>())
        .bind(pick(|n| n.operation_key.to_string()))
        .bind(pick(|n| n.channel.to_string()))
        .bind(pick(|n| n.recipient.to_string()))
        .bind(admitted.iter().map(|n| n.fingerprint.to_vec()).collect::<Vec<_>>())
        .bind(admitted.iter().map(|n| n.fingerprint_version).collect::<Vec<_>>())
        .bind(pick(|n| n.quota_key.to_string()))
        .bind(admitted.iter().map(|n| n.cost).collect::<Vec<_>>())
        .bind(admitted.iter().map(|n| n.max_attempts).collect::<Vec<_>>())
        .bind(admitted.iter().map(|n| n.send_at).collect::<Vec<_>>())
        .bind(pick(|n| n.payload.to_string()))
        .bind(now.pg())
        .bind(crate::notify::WAKE_CHANNEL)
        .bind(notify)
        .bind(on_stripe)
        .bind(admitted.iter().map(|n| n.traceparent).collect::<Vec<_>>())
        .fetch_all(&mut *c)
        .await?;
        rows.into_iter().map(|(id, created, due, _notified)| (id, (created, due))).collect()
    };

    batch_answers(news, &plan, &inserted)
}

/// The stripe each admitted delivery reserves from ([`stripe_plan`]), the accounts it
/// needs gathered gathered first.
async fn stripes_for(
    c: &mut PgConnection,
    admitted: &[&NewDelivery<'_>],
    stripes: LockedStripes,
    now: Now,
) -> Result<Vec<i16>, StoreError> {
    let (mut on_stripe, gather) = stripe_plan(admitted, stripes);
    for account in &gather {
        let (tenant, key, lowest) = account;
        sqlx::query("SELECT herald_quota_move($1, $2, $3, herald_now($4))")
            .bind(tenant)
            .bind(key)
            .bind(lowest)
            .bind(now.pg())
            .execute(&mut *c)
            .await?;
        gathered(admitted, &mut on_stripe, account);
    }
    Ok(on_stripe)
}
