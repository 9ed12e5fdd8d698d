use super::quota::{JournalMove, journal_moves};
use super::{Bind, end_savepoint, insert_rows, inserted, savepoint, sql};
use crate::clock::Now;
use crate::deliveries::{
    Claim, LockedStripes, NewDelivery, Planned, batch_answers, batch_available, batch_needs,
    claim_plan, gathered, stripe_plan,
};
use crate::error::StoreError;
use herald_core::hex;
use sqlx::MySqlConnection;
use sqlx::types::Uuid;
use std::collections::{BTreeMap, HashMap};

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

/// [`crate::deliveries::deliveries_claim_many`] on MariaDB: a fixed number of statements
/// however many deliveries, where claiming them one by one takes seven round trips each.
/// (1) `herald_batch_take`: for each account the batch reserves from, in the one order,
/// one free stripe covering the whole batch, or every stripe, locked and read; then
/// which identities are taken, which tenants known, and the clock; then the plan
/// ([`claim_plan`]) and (2) one multi-row statement per table: the deliveries, their
/// payloads, the reservations (one upsert row per stripe, which always exists: it is
/// locked) and their journal rows ([`insert_rows`]: a few statements for an odd count).
/// MariaDB has no per-row `ON CONFLICT DO NOTHING` that hides nothing else, so an identity
/// committed since the read fails the deliveries' insert whole (1062) and the answer is
/// [`StoreError::BatchRaced`]. As on PostgreSQL (where any error aborts the transaction),
/// an error leaves the caller's transaction to be rolled back: the writes are not undone
/// one by one (no savepoint, a round trip saved), and the group commit rolls back and
/// runs the batch again — the read then sees the identity.
pub(crate) async fn deliveries_claim_many(
    c: &mut MySqlConnection,
    news: &[NewDelivery<'_>],
    now: Now,
) -> Result<Vec<Claim>, StoreError> {
    if news.is_empty() {
        return Ok(Vec::new());
    }
    let needs = batch_needs(news);
    let taken = batch_take(c, &needs, news, now).await?;
    let plan = claim_plan(news, &taken.known, &taken.taken, batch_available(&taken.stripes));
    let admitted: Vec<&NewDelivery<'_>> =
        news.iter().zip(&plan).filter(|(_, p)| **p == Planned::Insert).map(|(n, _)| n).collect();
    if admitted.is_empty() {
        return batch_answers(news, &plan, &HashMap::new());
    }
    let now_ms = taken.now_ms;
    batch_write(c, &admitted, taken.stripes, now_ms).await?;
    let inserted = admitted.iter().map(|n| (n.id, (now_ms, n.send_at.unwrap_or(now_ms)))).collect();
    batch_answers(news, &plan, &inserted)
}

/// Payload bytes one statement of a batch carries at most.
const PAYLOAD_PART_BYTES: usize = 4 << 20;

/// What a batch plans from: the stripes it locked, for each member whether its tenant is
/// known and its identity taken, and the clock.
struct Taken {
    stripes: LockedStripes,
    known: Vec<bool>,
    taken: Vec<bool>,
    now_ms: i64,
}

/// `herald_batch_take`: the stripes locked, then the identities and tenants read, in one
/// round trip.
async fn batch_take(
    c: &mut MySqlConnection,
    needs: &BTreeMap<(Uuid, String), i64>,
    news: &[NewDelivery<'_>],
    now: Now,
) -> Result<Taken, StoreError> {
    // Strings in hex: nothing in the JSON then needs escaping.
    let json = |rows: Vec<String>| format!("[{}]", rows.join(","));
    let accounts = json(
        needs
            .iter()
            .map(|((tenant, key), need)| {
                format!(r#"["{}","{}",{need}]"#, hex(tenant.as_bytes()), hex(key.as_bytes()))
            })
            .collect(),
    );
    let items = json(
        news.iter()
            .map(|n| {
                let (t, k, c) = (n.tenant_id.as_bytes(), n.operation_key, n.channel);
                format!(r#"["{}","{}","{}"]"#, hex(t), hex(k.as_bytes()), hex(c.as_bytes()))
            })
            .collect(),
    );
    let q = format!("CALL herald_batch_take(?, ?, {})", now.mysql_sql());
    let (locked, taken, known, now_ms): (String, Option<String>, Option<String>, i64) =
        sqlx::query_as(sql(q)).bind(accounts).bind(items).bind_now(now).fetch_one(&mut *c).await?;
    let answered = || protocol(format!("herald_batch_take answered {locked:?}"));
    let account_list: Vec<&(Uuid, String)> = needs.keys().collect();
    let mut stripes = LockedStripes::new();
    for row in locked.split(',').filter(|r| !r.is_empty()) {
        let mut fields = row.split(':').map(str::parse::<i64>);
        let (Some(Ok(i)), Some(Ok(stripe)), Some(Ok(available)), None) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            return Err(answered());
        };
        let account = usize::try_from(i).ok().and_then(|i| account_list.get(i));
        let (Some(&account), Ok(stripe)) = (account, i16::try_from(stripe)) else {
            return Err(answered());
        };
        stripes.entry(account.clone()).or_default().push((stripe, available));
    }
    // Members, 1-based, as a comma-separated list (NULL: none).
    let members = |list: Option<String>| -> Result<Vec<bool>, StoreError> {
        let mut marked = vec![false; news.len()];
        for i in list.iter().flat_map(|l| l.split(',')) {
            let slot = i.parse::<usize>().ok().and_then(|i| marked.get_mut(i.wrapping_sub(1)));
            *slot.ok_or_else(answered)? = true;
        }
        Ok(marked)
    };
    Ok(Taken { stripes, known: members(known)?, taken: members(taken)?, now_ms })
}

/// The admitted deliveries' rows: balance gathered where the plan needs it, then one
/// multi-row statement per table.
async fn batch_write(
    c: &mut MySqlConnection,
    admitted: &[&NewDelivery<'_>],
    stripes: LockedStripes,
    now_ms: i64,
) -> Result<(), StoreError> {
    let now = Now::At(now_ms);
    let t = now.mysql_sql();
    let (mut on_stripe, gather) = stripe_plan(admitted, stripes);
    for account in &gather {
        let (tenant, key, lowest) = account;
        let q = format!("CALL herald_quota_move(?, ?, ?, {t})");
        sqlx::query(sql(q))
            .bind(tenant)
            .bind(key)
            .bind(lowest)
            .bind_now(now)
            .execute(&mut *c)
            .await?;
        gathered(admitted, &mut on_stripe, account);
    }
    let head = "INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient, \
                fingerprint, fingerprint_version, quota_key, cost, state, max_attempts, \
                next_attempt_at, created_at, updated_at) VALUES";
    let row = "(?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?)";
    let inserted = insert_rows(c, head, row, "", admitted, |q, n| {
        q.bind(n.id)
            .bind(n.tenant_id)
            .bind(n.operation_key)
            .bind(n.channel)
            .bind(n.recipient)
            .bind(n.fingerprint)
            .bind(n.fingerprint_version)
            .bind(n.quota_key)
            .bind(n.cost)
            .bind(n.max_attempts)
            .bind(n.send_at.unwrap_or(now_ms))
            .bind(now_ms)
            .bind(now_ms)
    })
    .await;
    match inserted {
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            return Err(StoreError::BatchRaced);
        }
        inserted => inserted?,
    };
    // The payloads in parts of at most PAYLOAD_PART_BYTES, so that no statement comes near
    // the server's max_allowed_packet (16 MiB by default; 256 payloads of 64 KiB would
    // pass it).
    let head = "INSERT INTO delivery_payloads (delivery_id, payload, traceparent) VALUES";
    let mut rest = admitted;
    while !rest.is_empty() {
        let mut bytes = 0;
        let n = rest
            .iter()
            .take_while(|n| {
                bytes += n.payload.len();
                bytes <= PAYLOAD_PART_BYTES
            })
            .count()
            .max(1);
        let (part, after) = rest.split_at(n);
        rest = after;
        insert_rows(c, head, "(?, ?, ?)", "", part, |q, n| {
            q.bind(n.id).bind(n.payload).bind(n.traceparent)
        })
        .await?;
    }

    // The reservations: one row per stripe, its total.
    let mut totals: BTreeMap<(Uuid, &str, i16), i64> = BTreeMap::new();
    let mut moves = Vec::new();
    for (n, &stripe) in admitted.iter().zip(&on_stripe).filter(|(n, _)| n.cost > 0) {
        *totals.entry((n.tenant_id, n.quota_key, stripe)).or_default() += n.cost;
        moves.push(JournalMove {
            tenant: n.tenant_id,
            quota_key: n.quota_key,
            stripe,
            delivery: n.id,
            seq: 1,
            amount: n.cost,
        });
    }
    let totals: Vec<_> = totals.into_iter().collect();
    // An upsert of rows that exist (each is locked): their update, two rows affected
    // each. MariaDB checks the row to insert against the balance's CHECK before it finds
    // the duplicate, so that row is a balanced one (granted = reserved = the total); were
    // a stripe ever missing, it would be inserted, counted one, and the count below fails
    // the batch (its transaction is rolled back) rather than reserve from nothing.
    let head = "INSERT INTO quota_accounts (tenant_id, quota_key, stripe, granted, reserved, \
                updated_at) VALUES";
    let row = format!("(?, ?, ?, ?, ?, {t})");
    let tail = " ON DUPLICATE KEY UPDATE available = available - VALUES(reserved), \
                reserved = reserved + VALUES(reserved), updated_at = VALUES(updated_at)";
    let updated = insert_rows(c, head, &row, tail, &totals, |q, ((tenant, key, stripe), total)| {
        q.bind(tenant).bind(*key).bind(stripe).bind(total).bind(total).bind_now(now)
    })
    .await?;
    if updated != 2 * totals.len() as u64 {
        return Err(protocol(format!(
            "reserving on {} stripes changed {updated} rows",
            totals.len()
        )));
    }
    journal_moves(c, "reserve", &moves, now).await
}

fn protocol(what: String) -> StoreError {
    StoreError::Database(sqlx::Error::Protocol(what))
}
