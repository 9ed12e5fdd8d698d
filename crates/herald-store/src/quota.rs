//! The quota ledger: accounts with granted / available / reserved / spent, and a journal
//! row for every movement. Modelled on two-phase transfers: `reserve` holds units,
//! then exactly one of `commit` (spent) or `release` (back to available) ends the hold.
//!
//! Every balance change and its journal row are one statement on PostgreSQL (a CTE), so
//! they cannot part. The journal's unique indexes, not code, make a second reserve or a
//! second final movement of one reservation impossible; the CHECKs on the account make a
//! negative or unbalanced account impossible.

use crate::clock::sqlite_now;
use crate::conn::Conn;
use crate::error::StoreError;
use herald_core::limits::QUOTA_GRANTED_MAX;
use sqlx::Row;
use sqlx::types::Uuid;

/// One quota account.
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

/// What a grant did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    /// The units were added (and journalled).
    Applied,
    /// This idempotency key already granted the same amount on this account: nothing
    /// added, the first grant stands.
    Repeated,
    /// This idempotency key already granted another amount on this account: nothing
    /// changed. `amount_first` is what it granted.
    KeyReused { amount_first: i64 },
    /// The account's granted total would pass `QUOTA_GRANTED_MAX`: nothing changed.
    OverLimit { granted: i64 },
}

/// Adds `amount` to an account (creating it). An idempotency key is scoped to the account
/// (tenant, quota key): a repeat with the same amount counts once, one with another amount
/// is refused, and either way nothing changes. So is a grant that would take the account's
/// granted total past `QUOTA_GRANTED_MAX`.
///
/// The account row is locked before the journal is read (PostgreSQL `FOR UPDATE`; SQLite's
/// write lock is already held by `BEGIN IMMEDIATE`), so two concurrent grants under one
/// key are decided one after the other, never both applied.
pub async fn quota_grant(
    conn: Conn<'_>,
    tenant: Uuid,
    quota_key: &str,
    amount: i64,
    idempotency_key: Option<&str>,
    now: Option<i64>,
) -> Result<Grant, StoreError> {
    debug_assert!(amount > 0, "a grant is positive");
    match conn {
        Conn::Sqlite(c) => {
            let now = sqlite_now(now);
            sqlx::query(
                "INSERT INTO quota_accounts (tenant_id, quota_key, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT DO NOTHING",
            )
            .bind(tenant)
            .bind(quota_key)
            .bind(now)
            .execute(&mut *c)
            .await?;
            let (granted,): (i64,) = sqlx::query_as(
                "SELECT granted FROM quota_accounts WHERE tenant_id = ?1 AND quota_key = ?2",
            )
            .bind(tenant)
            .bind(quota_key)
            .fetch_one(&mut *c)
            .await?;
            let first: Option<(i64,)> =
                match idempotency_key {
                    None => None,
                    Some(key) => sqlx::query_as(
                        "SELECT amount FROM quota_journal WHERE tenant_id = ?1 AND quota_key = ?2
                         AND kind = 'grant' AND idempotency_key = ?3",
                    )
                    .bind(tenant)
                    .bind(quota_key)
                    .bind(key)
                    .fetch_optional(&mut *c)
                    .await?,
                };
            let decided = decide(granted, amount, first.map(|(a,)| a));
            if decided != Grant::Applied {
                return Ok(decided);
            }
            sqlx::query(
                "INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, idempotency_key, at)
                 VALUES (?1, ?2, 'grant', ?3, ?4, ?5)",
            )
            .bind(tenant)
            .bind(quota_key)
            .bind(amount)
            .bind(idempotency_key)
            .bind(now)
            .execute(&mut *c)
            .await?;
            sqlx::query(
                "UPDATE quota_accounts SET granted = granted + ?3, available = available + ?3,
                     updated_at = ?4
                 WHERE tenant_id = ?1 AND quota_key = ?2",
            )
            .bind(tenant)
            .bind(quota_key)
            .bind(amount)
            .bind(now)
            .execute(&mut *c)
            .await?;
            Ok(Grant::Applied)
        }
        Conn::Postgres(c) => {
            sqlx::query(
                "INSERT INTO quota_accounts (tenant_id, quota_key, updated_at)
                 VALUES ($1, $2, herald_now($3)) ON CONFLICT DO NOTHING",
            )
            .bind(tenant)
            .bind(quota_key)
            .bind(now)
            .execute(&mut *c)
            .await?;
            let (granted,): (i64,) = sqlx::query_as(
                "SELECT granted FROM quota_accounts WHERE tenant_id = $1 AND quota_key = $2
                 FOR UPDATE",
            )
            .bind(tenant)
            .bind(quota_key)
            .fetch_one(&mut *c)
            .await?;
            // A statement of its own after the lock: under READ COMMITTED it sees a grant
            // that a concurrent holder of the lock committed under this key.
            let first: Option<(i64,)> =
                match idempotency_key {
                    None => None,
                    Some(key) => sqlx::query_as(
                        "SELECT amount FROM quota_journal WHERE tenant_id = $1 AND quota_key = $2
                         AND kind = 'grant' AND idempotency_key = $3",
                    )
                    .bind(tenant)
                    .bind(quota_key)
                    .bind(key)
                    .fetch_optional(&mut *c)
                    .await?,
                };
            let decided = decide(granted, amount, first.map(|(a,)| a));
            if decided != Grant::Applied {
                return Ok(decided);
            }
            sqlx::query(
                "WITH j AS (
                     INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, idempotency_key, at)
                     VALUES ($1, $2, 'grant', $3, $4, herald_now($5))
                     RETURNING amount)
                 UPDATE quota_accounts a SET granted = a.granted + j.amount,
                     available = a.available + j.amount, updated_at = herald_now($5)
                 FROM j WHERE a.tenant_id = $1 AND a.quota_key = $2",
            )
            .bind(tenant)
            .bind(quota_key)
            .bind(amount)
            .bind(idempotency_key)
            .bind(now)
            .execute(&mut *c)
            .await?;
            Ok(Grant::Applied)
        }
    }
}

/// The grant's fate from the locked account's granted total and the amount this key
/// granted before, if it did.
fn decide(granted: i64, amount: i64, amount_first: Option<i64>) -> Grant {
    match amount_first {
        Some(first) if first == amount => Grant::Repeated,
        Some(amount_first) => Grant::KeyReused { amount_first },
        // `amount` is positive, so the subtraction cannot overflow (an addition could).
        None if granted > QUOTA_GRANTED_MAX - amount => Grant::OverLimit { granted },
        None => Grant::Applied,
    }
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
    now: Option<i64>,
) -> Result<bool, StoreError> {
    let reserved = match conn {
        Conn::Sqlite(c) => {
            let now = sqlite_now(now);
            let n = sqlx::query(
                "UPDATE quota_accounts SET available = available - ?3, reserved = reserved + ?3,
                     updated_at = ?4
                 WHERE tenant_id = ?1 AND quota_key = ?2 AND available >= ?3",
            )
            .bind(tenant)
            .bind(quota_key)
            .bind(cost)
            .bind(now)
            .execute(&mut *c)
            .await?
            .rows_affected();
            if n == 1 {
                journal_insert_sqlite(c, tenant, quota_key, "reserve", cost, delivery, seq, now)
                    .await?;
            }
            n == 1
        }
        Conn::Postgres(c) => {
            sqlx::query(
                "WITH a AS (
                     UPDATE quota_accounts SET available = available - $3,
                         reserved = reserved + $3, updated_at = herald_now($6)
                     WHERE tenant_id = $1 AND quota_key = $2 AND available >= $3
                     RETURNING tenant_id)
                 INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, delivery_id,
                     reservation_seq, at)
                 SELECT $1, $2, 'reserve', $3, $4, $5, herald_now($6) FROM a",
            )
            .bind(tenant)
            .bind(quota_key)
            .bind(cost)
            .bind(delivery)
            .bind(seq)
            .bind(now)
            .execute(c)
            .await?
            .rows_affected()
                == 1
        }
    };
    Ok(reserved)
}

/// SQLite: moves `?3` of account (`?1`, `?2`) from reserved to spent at `?4` (a commit; the
/// journal row is the caller's).
pub(crate) const SQLITE_ACCOUNT_COMMIT: &str =
    "UPDATE quota_accounts SET reserved = reserved - ?3, spent = spent + ?3, updated_at = ?4
     WHERE tenant_id = ?1 AND quota_key = ?2";

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
    now: Option<i64>,
) -> Result<(), StoreError> {
    let (kind, sqlite_update, pg_update) = match settle {
        Settle::Commit => (
            "commit",
            SQLITE_ACCOUNT_COMMIT,
            "UPDATE quota_accounts SET reserved = reserved - $3, spent = spent + $3,
                 updated_at = herald_now($6)
             WHERE tenant_id = $1 AND quota_key = $2 RETURNING tenant_id",
        ),
        Settle::Release => (
            "release",
            "UPDATE quota_accounts SET reserved = reserved - ?3, available = available + ?3,
                 updated_at = ?4
             WHERE tenant_id = ?1 AND quota_key = ?2",
            "UPDATE quota_accounts SET reserved = reserved - $3, available = available + $3,
                 updated_at = herald_now($6)
             WHERE tenant_id = $1 AND quota_key = $2 RETURNING tenant_id",
        ),
    };
    match conn {
        Conn::Sqlite(c) => {
            let now = sqlite_now(now);
            // Journal first: a second final movement fails here, before the balance moves.
            journal_insert_sqlite(c, tenant, quota_key, kind, cost, delivery, seq, now).await?;
            sqlx::query(sqlite_update)
                .bind(tenant)
                .bind(quota_key)
                .bind(cost)
                .bind(now)
                .execute(&mut *c)
                .await?;
        }
        Conn::Postgres(c) => {
            let sql = format!(
                "WITH a AS ({pg_update})
                 INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, delivery_id,
                     reservation_seq, at)
                 SELECT $1, $2, '{kind}', $3, $4, $5, herald_now($6) FROM a"
            );
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind(tenant)
                .bind(quota_key)
                .bind(cost)
                .bind(delivery)
                .bind(seq)
                .bind(now)
                .execute(c)
                .await?;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn journal_insert_sqlite(
    c: &mut sqlx::SqliteConnection,
    tenant: Uuid,
    quota_key: &str,
    kind: &str,
    amount: i64,
    delivery: Uuid,
    seq: i32,
    now: i64,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, delivery_id,
             reservation_seq, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )
    .bind(tenant)
    .bind(quota_key)
    .bind(kind)
    .bind(amount)
    .bind(delivery)
    .bind(seq)
    .bind(now)
    .execute(c)
    .await?;
    Ok(())
}

/// A tenant's accounts, by quota key.
pub async fn quota_accounts(conn: Conn<'_>, tenant: Uuid) -> Result<Vec<QuotaAccount>, StoreError> {
    const COLS: &str = "tenant_id, quota_key, granted, available, reserved, spent";
    macro_rules! account {
        ($row:expr) => {
            QuotaAccount {
                tenant_id: $row.try_get("tenant_id")?,
                quota_key: $row.try_get("quota_key")?,
                granted: $row.try_get("granted")?,
                available: $row.try_get("available")?,
                reserved: $row.try_get("reserved")?,
                spent: $row.try_get("spent")?,
            }
        };
    }
    let mut accounts = Vec::new();
    match conn {
        Conn::Sqlite(c) => {
            let sql = format!(
                "SELECT {COLS} FROM quota_accounts WHERE tenant_id = ?1 ORDER BY quota_key"
            );
            for row in sqlx::query(sqlx::AssertSqlSafe(sql)).bind(tenant).fetch_all(c).await? {
                accounts.push(account!(row));
            }
        }
        Conn::Postgres(c) => {
            let sql = format!(
                "SELECT {COLS} FROM quota_accounts WHERE tenant_id = $1 ORDER BY quota_key"
            );
            for row in sqlx::query(sqlx::AssertSqlSafe(sql)).bind(tenant).fetch_all(c).await? {
                accounts.push(account!(row));
            }
        }
    }
    Ok(accounts)
}

/// Units reserved per tenant, over all its accounts (for the metrics gauge).
pub async fn quota_reserved_by_tenant(conn: Conn<'_>) -> Result<Vec<(Uuid, i64)>, StoreError> {
    const SQL: &str =
        "SELECT tenant_id, CAST(sum(reserved) AS BIGINT) FROM quota_accounts GROUP BY tenant_id";
    let rows: Vec<(Uuid, i64)> = match conn {
        Conn::Sqlite(c) => sqlx::query_as(SQL).fetch_all(c).await?,
        Conn::Postgres(c) => sqlx::query_as(SQL).fetch_all(c).await?,
    };
    Ok(rows)
}

/// Locks the given quota rows in one stable order (tenant, key) for the rest of the
/// transaction (PostgreSQL; SQLite's writer lock already serialises). A statement that
/// then updates several accounts cannot deadlock with another that locked them this way.
pub async fn quota_lock(conn: Conn<'_>, accounts: &[(Uuid, String)]) -> Result<(), StoreError> {
    let Conn::Postgres(c) = conn else { return Ok(()) };
    if accounts.is_empty() {
        return Ok(());
    }
    let (tenants, keys): (Vec<Uuid>, Vec<String>) = accounts.iter().cloned().unzip();
    sqlx::query(
        "SELECT 1 FROM quota_accounts q
         JOIN unnest($1::uuid[], $2::text[]) AS k (tenant_id, quota_key)
           ON q.tenant_id = k.tenant_id AND q.quota_key = k.quota_key
         ORDER BY q.tenant_id, q.quota_key
         FOR UPDATE OF q",
    )
    .bind(tenants)
    .bind(keys)
    .fetch_all(c)
    .await?;
    Ok(())
}
