//! The quota ledger: accounts with granted / available / reserved / spent, and a journal
//! row for every movement. Modelled on two-phase transfers: `reserve` holds units,
//! then exactly one of `commit` (spent) or `release` (back to available) ends the hold.
//!
//! Every balance change and its journal row are one statement on PostgreSQL (a CTE), so
//! they cannot part. The journal's unique indexes, not code, make a second reserve or a
//! second final movement of one reservation impossible; the CHECKs on the account make a
//! negative or unbalanced account impossible. Whether a grant applies is the library's
//! decision (`herald_core::decide_grant`), from what [`quota_grant_lock`] reads.

use crate::clock::Now;
use crate::conn::Conn;
use crate::error::StoreError;
use sqlx::types::Uuid;

/// The stripes of an account on PostgreSQL and MariaDB (SQLite, one writer: one stripe).
/// An account is the sum of its stripes; a reservation in a caller's transaction locks one
/// of them, so up to this many of a tenant's transactions hold reservations at once
/// without waiting for each other (ARCHITECTURE.md, "Striped quota accounts").
pub const QUOTA_STRIPES: i32 = 64;

/// One quota account: the sum of its stripes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuotaAccount {
    pub tenant_id: Uuid,
    pub quota_key: String,
    pub granted: i64,
    pub available: i64,
    pub reserved: i64,
    pub spent: i64,
}

/// The final movement of a reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settle {
    /// Charged: reserved → spent.
    Commit,
    /// Given back: reserved → available.
    Release,
}

impl Settle {
    /// The journal's `kind`.
    pub(crate) fn kind(self) -> &'static str {
        match self {
            Settle::Commit => "commit",
            Settle::Release => "release",
        }
    }
}

/// An account as a grant finds it, locked for the rest of the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GrantState {
    /// The account's granted total so far.
    pub granted: i64,
    /// What this grant's idempotency key granted on this account before, if it did.
    pub amount_first: Option<i64>,
}

/// Creates the account if it is missing, locks it (PostgreSQL `FOR UPDATE`; SQLite's
/// write lock is already held) and reads what a grant is decided by. The journal is read
/// after the lock, so two concurrent grants under one key are decided one after the
/// other, never both applied.
pub async fn quota_grant_lock(
    conn: Conn<'_>,
    tenant: Uuid,
    quota_key: &str,
    idempotency_key: Option<&str>,
    now: Now,
) -> Result<GrantState, StoreError> {
    crate::per_backend!(conn, quota::quota_grant_lock(tenant, quota_key, idempotency_key, now))
}

/// Adds a positive `amount` to the account locked by [`quota_grant_lock`], with its
/// journal row (whose unique index refuses a second grant under one idempotency key).
pub async fn quota_grant_apply(
    conn: Conn<'_>,
    tenant: Uuid,
    quota_key: &str,
    amount: i64,
    idempotency_key: Option<&str>,
    now: Now,
) -> Result<(), StoreError> {
    crate::per_backend!(
        conn,
        quota::quota_grant_apply(tenant, quota_key, amount, idempotency_key, now)
    )
}

/// Holds `cost` units for reservation `seq` of `delivery`. `false` (and nothing written)
/// when the account is missing or has less than `cost` available. A conditional
/// single-statement update: correct under READ COMMITTED, no read-modify-write race.
pub async fn quota_reserve(
    conn: Conn<'_>,
    tenant: Uuid,
    quota_key: &str,
    cost: i64,
    delivery: Uuid,
    seq: i32,
    now: Now,
) -> Result<bool, StoreError> {
    crate::per_backend!(conn, quota::quota_reserve(tenant, quota_key, cost, delivery, seq, now))
}

/// Ends reservation `seq` of `delivery` with a commit or a release. A second final
/// movement of one reservation fails on the journal's unique index.
#[allow(clippy::too_many_arguments)]
pub async fn quota_settle(
    conn: Conn<'_>,
    tenant: Uuid,
    quota_key: &str,
    cost: i64,
    delivery: Uuid,
    seq: i32,
    settle: Settle,
    now: Now,
) -> Result<(), StoreError> {
    crate::per_backend!(
        conn,
        quota::quota_settle(tenant, quota_key, cost, delivery, seq, settle, now)
    )
}

/// A tenant's accounts, by quota key.
pub async fn quota_accounts(conn: Conn<'_>, tenant: Uuid) -> Result<Vec<QuotaAccount>, StoreError> {
    crate::per_backend!(conn, quota::quota_accounts(tenant))
}

/// Units reserved per tenant, over all its accounts (for the metrics gauge).
pub async fn quota_reserved_by_tenant(conn: Conn<'_>) -> Result<Vec<(Uuid, i64)>, StoreError> {
    crate::per_backend!(conn, quota::quota_reserved_by_tenant())
}

/// Locks every stripe of the given accounts in one stable order (tenant, key, stripe) for
/// the rest of the transaction (PostgreSQL, MariaDB; SQLite's writer lock already
/// serialises): the whole account, waiting for every transaction that holds a stripe of
/// it. Paths that settle reservations lock only their stripes
/// ([`quota_lock_reservations`]); this is for what needs the account whole.
pub async fn quota_lock(conn: Conn<'_>, accounts: &[(Uuid, String)]) -> Result<(), StoreError> {
    if accounts.is_empty() {
        return Ok(());
    }
    let mut sorted = accounts.to_vec();
    sorted.sort();
    sorted.dedup();
    crate::per_backend!(conn, quota::quota_lock(&sorted))
}

/// Locks the stripes that the current reservations of `deliveries` sit on, in (tenant,
/// key, stripe) order, for the rest of the transaction (SQLite's writer lock already
/// serialises). What a settle, a cancel or a replay locks before the delivery rows: one
/// stripe per reservation, never the whole account, so it waits for at most the caller's
/// transactions holding those stripes and leaves the others' free. The reservation is read
/// unlocked: a replay moving it meanwhile makes the later settle lock its new stripe out
/// of order, which at worst is a deadlock the database breaks and the runner retries.
///
/// `known` are stripes the caller already read (a worker's lease reads the stripe of each
/// reservation it leases: [`crate::deliveries::LeasedRow::stripe`]), as (tenant, key,
/// stripe); they are locked with the others, in the one order, without being looked up.
pub async fn quota_lock_reservations(
    conn: Conn<'_>,
    deliveries: &[Uuid],
    known: &[Stripe],
) -> Result<(), StoreError> {
    if deliveries.is_empty() && known.is_empty() {
        return Ok(());
    }
    let mut sorted = deliveries.to_vec();
    sorted.sort();
    sorted.dedup();
    let mut known = known.to_vec();
    known.sort();
    known.dedup();
    crate::per_backend!(conn, quota::quota_lock_reservations(&sorted, known))
}

/// One stripe of an account: (tenant, quota key, stripe).
pub type Stripe = (Uuid, String, i16);

/// One journal entry: a movement on one of a tenant's accounts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalRow {
    /// When it was written, in Unix milliseconds.
    pub at: i64,
    pub quota_key: String,
    /// `grant`, `reserve`, `commit` or `release`.
    pub kind: String,
    pub amount: i64,
    /// The delivery a reservation, commit or release is for (`None` for a grant).
    pub delivery_id: Option<Uuid>,
    pub reservation_seq: Option<i32>,
}

/// The tenant's newest journal entries first (by the journal's own id, descending: the
/// order they were written in), at most `limit`. Each account's newest `limit` are a
/// range of its index (tenant, quota_key, id), merged here: never a walk through every
/// entry the tenant ever had (3 a delivery). One statement per account: one statement
/// with a correlated bound per account was tried, and SQLite ran it again for every
/// entry (5.5 s for 3,000,000).
pub async fn quota_journal_recent(
    mut conn: Conn<'_>,
    tenant: Uuid,
    limit: usize,
) -> Result<Vec<JournalRow>, StoreError> {
    let accounts = quota_accounts(conn.reborrow(), tenant).await?;
    let mut entries = Vec::new();
    for account in &accounts {
        let key = account.quota_key.as_str();
        entries.extend(crate::per_backend!(
            conn.reborrow(),
            quota::quota_journal_recent(tenant, key, limit)
        )?);
    }
    entries.sort_unstable_by_key(|(id, _)| std::cmp::Reverse(*id));
    entries.truncate(limit);
    Ok(entries.into_iter().map(|(_, row)| row).collect())
}

/// Decodes a [`JournalRow`] from a row of any backend.
macro_rules! journal_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = &$row;
        $crate::quota::JournalRow {
            at: row.try_get("at")?,
            quota_key: row.try_get("quota_key")?,
            kind: row.try_get("kind")?,
            amount: row.try_get("amount")?,
            delivery_id: row.try_get("delivery_id")?,
            reservation_seq: row.try_get("reservation_seq")?,
        }
    }};
}
pub(crate) use journal_row;

/// The account columns, in [`QuotaAccount`]'s order.
pub(crate) const ACCOUNT_COLS: &str = "tenant_id, quota_key, granted, available, reserved, spent";

/// Decodes a [`QuotaAccount`] from a row of either backend.
macro_rules! account_row {
    ($row:expr) => {{
        use sqlx::Row as _;
        let row = &$row;
        $crate::quota::QuotaAccount {
            tenant_id: row.try_get("tenant_id")?,
            quota_key: row.try_get("quota_key")?,
            granted: row.try_get("granted")?,
            available: row.try_get("available")?,
            reserved: row.try_get("reserved")?,
            spent: row.try_get("spent")?,
        }
    }};
}
pub(crate) use account_row;
