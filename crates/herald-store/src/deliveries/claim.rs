//! The claim: a delivery row inserted under its unique identity (tenant, operation key,
//! channel), with its payload and its first reservation.

use crate::clock::Now;
use crate::conn::Conn;
use crate::error::StoreError;
use sqlx::types::Uuid;
use std::collections::{BTreeMap, HashMap, HashSet};

/// A claim to insert.
#[derive(Debug, Clone)]
pub struct NewDelivery<'a> {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub operation_key: &'a str,
    pub channel: &'a str,
    pub recipient: &'a str,
    /// JSON text, stored byte for byte.
    pub payload: &'a str,
    pub fingerprint: &'a [u8],
    pub fingerprint_version: i16,
    pub quota_key: &'a str,
    pub cost: i64,
    pub max_attempts: i32,
    /// Due time (Unix ms); `None` means now.
    pub send_at: Option<i64>,
    /// The W3C traceparent its attempts' spans descend from (stored beside the payload);
    /// `None` when tracing is off or the submit had no trace.
    pub traceparent: Option<&'a str>,
}

/// What claiming did. Nothing is written unless it is `Inserted`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The claim, its payload and its reservation (none for cost 0) are in.
    Inserted { created_at: i64, next_attempt_at: i64 },
    /// A row with this identity exists (committed, or committed while the claim waited for
    /// it).
    Exists,
    /// No such tenant.
    UnknownTenant,
    /// The account could not cover the cost. A row with this identity may exist all the
    /// same (the account is looked at first): the caller looks it up, since a duplicate is
    /// reported before short quota.
    QuotaShort,
}

/// Claims a delivery: inserts it and its payload and reserves its cost (reservation 1), or
/// says why not. It never raises on a duplicate (`ON CONFLICT DO NOTHING`) nor on short
/// quota (a conditional update), so a caller's transaction stays usable either way.
///
/// Locks in one order on every path — the quota account row, then the identity — so two
/// claims of one identity never deadlock, in a transaction or not. On PostgreSQL it is one
/// statement (the account row locked `FOR UPDATE`, the claim inserted only if the row
/// covers the cost), which is also safe to run autocommitted
/// ([`crate::Backend::claims_in_one_statement`]); `notify` then adds the cross-process
/// wake-up, sent only if a claim was inserted and only when it commits. On SQLite (one
/// writer: no lock order to keep) it must run in a transaction: a claim inserted on
/// short quota is deleted again before it returns.
pub async fn delivery_claim(
    conn: Conn<'_>,
    new: &NewDelivery<'_>,
    now: Now,
    notify: bool,
) -> Result<Claim, StoreError> {
    crate::per_backend!(conn, claim::delivery_claim(new, now, notify))
}

/// Claims many deliveries in the caller's transaction, each answered as [`delivery_claim`]
/// would have answered it had they run one after another in this order — where the backend
/// does it in a fixed number of statements (PostgreSQL: the accounts locked in the one
/// order and read, the identities and tenants read, then one statement inserting every
/// delivery the plan admits with its payload, reservation and journal row; MariaDB: the
/// same reads, then one multi-row statement per table). `None` on a backend that claims
/// one by one (the caller then calls [`delivery_claim`] per delivery).
///
/// The plan is made from what the transaction reads. On PostgreSQL an identity that a
/// concurrent transaction commits meanwhile is not inserted (`ON CONFLICT DO NOTHING`)
/// and is answered [`Claim::Exists`]; if that changed what a later delivery of the batch
/// was answered (quota it planned to take was refused to a later one), the result is
/// [`StoreError::BatchRaced`], a concurrency conflict: roll back and run the batch again.
/// On MariaDB (no per-row `DO NOTHING` that hides nothing else) any such identity makes
/// the result [`StoreError::BatchRaced`]. After any error the caller rolls the
/// transaction back: PostgreSQL has aborted it, and MariaDB's writes of the batch are not
/// undone one by one.
pub async fn deliveries_claim_many(
    conn: Conn<'_>,
    news: &[NewDelivery<'_>],
    now: Now,
    notify: bool,
) -> Result<Option<Vec<Claim>>, StoreError> {
    match conn {
        Conn::Postgres(c) => {
            crate::postgres::claim::deliveries_claim_many(c, news, now, notify).await.map(Some)
        }
        Conn::MySql(c) => crate::mysql::claim::deliveries_claim_many(c, news, now).await.map(Some),
        Conn::Sqlite(_) => Ok(None),
    }
}

/// What each account of a batch needs at most: the sum of its members' costs (members
/// that turn out to exist or to be refused count too), in the one order of accounts.
pub(crate) fn batch_needs(news: &[NewDelivery<'_>]) -> BTreeMap<(Uuid, String), i64> {
    let mut totals: BTreeMap<(Uuid, String), i64> = BTreeMap::new();
    for n in news.iter().filter(|n| n.cost > 0) {
        *totals.entry((n.tenant_id, n.quota_key.to_string())).or_default() += n.cost;
    }
    totals
}

/// The stripes a batch locked, per account: (stripe, available), in stripe order.
pub(crate) type LockedStripes = HashMap<(Uuid, String), Vec<(i16, i64)>>;

/// Each account's available units, summed over the stripes the batch locked.
pub(crate) fn batch_available(stripes: &LockedStripes) -> HashMap<(Uuid, String), i64> {
    stripes.iter().map(|(account, s)| (account.clone(), s.iter().map(|(_, a)| a).sum())).collect()
}

/// The stripe each admitted delivery reserves from (0 for cost 0), in order: the first
/// stripe that still covers it. With it, the accounts on which some delivery fits no
/// single stripe (the plan admitted it from the account's sum), each with its lowest
/// stripe: the caller gathers such an account's balance there (`herald_quota_move`, with
/// every stripe locked) and [`gathered`] puts all its deliveries on it.
pub(crate) fn stripe_plan(
    admitted: &[&NewDelivery<'_>],
    mut stripes: LockedStripes,
) -> (Vec<i16>, Vec<(Uuid, String, i16)>) {
    let mut on_stripe = Vec::with_capacity(admitted.len());
    let mut gather = BTreeMap::new();
    for new in admitted {
        let account = (new.tenant_id, new.quota_key.to_string());
        let lowest = stripes.get(&account).and_then(|s| s.first()).map(|(stripe, _)| *stripe);
        let fit = match stripes.get_mut(&account) {
            Some(s) if new.cost > 0 => s.iter_mut().find(|(_, left)| *left >= new.cost),
            _ => None,
        };
        on_stripe.push(match fit {
            Some((stripe, left)) => {
                *left -= new.cost;
                *stripe
            }
            None => {
                if let (true, Some(lowest)) = (new.cost > 0, lowest) {
                    gather.insert(account, lowest);
                }
                0
            }
        });
    }
    (on_stripe, gather.into_iter().map(|((t, k), lowest)| (t, k, lowest)).collect())
}

/// Puts every delivery of a gathered account on the stripe its balance was gathered into.
pub(crate) fn gathered(
    admitted: &[&NewDelivery<'_>],
    on_stripe: &mut [i16],
    (tenant, key, lowest): &(Uuid, String, i16),
) {
    for (new, stripe) in admitted.iter().zip(on_stripe.iter_mut()) {
        if new.cost > 0 && new.tenant_id == *tenant && new.quota_key == key {
            *stripe = *lowest;
        }
    }
}

/// A batch's answers from its plan and what was inserted (id → created, due).
/// A planned delivery that was not inserted: a concurrent transaction committed its
/// identity meanwhile. Its planned reservation was never taken, so a later delivery of
/// the batch on that account that the plan refused may have been refused wrongly:
/// [`StoreError::BatchRaced`].
pub(crate) fn batch_answers(
    news: &[NewDelivery<'_>],
    plan: &[Planned],
    inserted: &HashMap<Uuid, (i64, i64)>,
) -> Result<Vec<Claim>, StoreError> {
    let mut raced_accounts = HashSet::new();
    let mut claims = Vec::with_capacity(news.len());
    for (new, planned) in news.iter().zip(plan) {
        claims.push(match planned {
            Planned::Insert => match inserted.get(&new.id) {
                Some(&(created_at, next_attempt_at)) => {
                    Claim::Inserted { created_at, next_attempt_at }
                }
                None => {
                    raced_accounts.insert((new.tenant_id, new.quota_key));
                    Claim::Exists
                }
            },
            Planned::Exists => Claim::Exists,
            Planned::UnknownTenant => Claim::UnknownTenant,
            Planned::QuotaShort => {
                if raced_accounts.contains(&(new.tenant_id, new.quota_key)) {
                    return Err(StoreError::BatchRaced);
                }
                Claim::QuotaShort
            }
        });
    }
    Ok(claims)
}

/// What a batch claim decided for one delivery before inserting anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Planned {
    Insert,
    Exists,
    UnknownTenant,
    QuotaShort,
}

/// The batch claim's plan, in order, from what was read: for each delivery whether its
/// tenant is known and its identity taken, and each account's available units (absent:
/// no account). Exactly the single claims' answers run one after another: a delivery whose
/// identity an earlier one of the batch takes exists; one that costs more than its account
/// has left is short.
pub(crate) fn claim_plan(
    news: &[NewDelivery<'_>],
    known: &[bool],
    taken: &[bool],
    mut available: HashMap<(Uuid, String), i64>,
) -> Vec<Planned> {
    let mut claimed = HashSet::new();
    news.iter()
        .zip(known.iter().zip(taken))
        .map(|(new, (&known, &taken))| {
            let identity = (new.tenant_id, new.operation_key, new.channel);
            if !known {
                return Planned::UnknownTenant;
            }
            if taken || claimed.contains(&identity) {
                return Planned::Exists;
            }
            if new.cost > 0 {
                match available.get_mut(&(new.tenant_id, new.quota_key.to_string())) {
                    Some(left) if *left >= new.cost => *left -= new.cost,
                    _ => return Planned::QuotaShort,
                }
            }
            claimed.insert(identity);
            Planned::Insert
        })
        .collect()
}
