//! The claim: a delivery row inserted under its unique identity (tenant, operation key,
//! channel), with its payload and its first reservation.

use crate::clock::Now;
use crate::conn::Conn;
use crate::error::StoreError;
use sqlx::types::Uuid;

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
/// delivery the plan admits with its payload, reservation and journal row). `None` on a
/// backend that claims one by one (the caller then calls [`delivery_claim`] per
/// delivery).
///
/// The plan is made from what the transaction reads: an identity that a concurrent
/// transaction commits meanwhile is not inserted (`ON CONFLICT DO NOTHING`) and is
/// answered [`Claim::Exists`]; if that changed what a later delivery of the batch was
/// answered (quota it planned to take was refused to a later one), the result is
/// [`StoreError::BatchRaced`], a concurrency conflict: roll back and run the batch again.
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
        Conn::Sqlite(_) | Conn::MySql(_) => Ok(None),
    }
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
    mut available: std::collections::HashMap<(Uuid, String), i64>,
) -> Vec<Planned> {
    let mut claimed = std::collections::HashSet::new();
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
