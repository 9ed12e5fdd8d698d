use crate::clock::Now;
use crate::error::StoreError;
use crate::quota::{
    ACCOUNT_COLS, GrantState, JournalRow, QuotaAccount, Settle, Stripe, account_row, journal_row,
};
use sqlx::SqliteConnection;
use sqlx::types::Uuid;

pub(crate) async fn quota_grant_lock(
    c: &mut SqliteConnection,
    tenant: Uuid,
    quota_key: &str,
    idempotency_key: Option<&str>,
    now: Now,
) -> Result<GrantState, StoreError> {
    sqlx::query(
        "INSERT INTO quota_accounts (tenant_id, quota_key, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT DO NOTHING",
    )
    .bind(tenant)
    .bind(quota_key)
    .bind(now.sqlite_ms())
    .execute(&mut *c)
    .await?;
    let granted: i64 = sqlx::query_scalar(
        "SELECT granted FROM quota_accounts WHERE tenant_id = ?1 AND quota_key = ?2",
    )
    .bind(tenant)
    .bind(quota_key)
    .fetch_one(&mut *c)
    .await?;
    let amount_first = match idempotency_key {
        None => None,
        Some(key) => {
            sqlx::query_scalar(
                "SELECT amount FROM quota_journal WHERE tenant_id = ?1 AND quota_key = ?2
                 AND kind = 'grant' AND idempotency_key = ?3",
            )
            .bind(tenant)
            .bind(quota_key)
            .bind(key)
            .fetch_optional(&mut *c)
            .await?
        }
    };
    Ok(GrantState { granted, amount_first })
}

pub(crate) async fn quota_grant_apply(
    c: &mut SqliteConnection,
    tenant: Uuid,
    quota_key: &str,
    amount: i64,
    idempotency_key: Option<&str>,
    now: Now,
) -> Result<(), StoreError> {
    let now = now.sqlite_ms();
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
    Ok(())
}

pub(crate) async fn quota_reserve(
    c: &mut SqliteConnection,
    tenant: Uuid,
    quota_key: &str,
    cost: i64,
    delivery: Uuid,
    seq: i32,
    now: Now,
) -> Result<bool, StoreError> {
    let now = now.sqlite_ms();
    savepoint(c).await?;
    let reserved = reserve_steps(c, tenant, quota_key, cost, delivery, seq, now).await;
    end_savepoint(c, reserved).await
}

#[allow(clippy::too_many_arguments)]
async fn reserve_steps(
    c: &mut SqliteConnection,
    tenant: Uuid,
    quota_key: &str,
    cost: i64,
    delivery: Uuid,
    seq: i32,
    now: i64,
) -> Result<bool, StoreError> {
    let reserved = sqlx::query(
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
    .rows_affected()
        == 1;
    if reserved {
        journal_insert(c, tenant, quota_key, "reserve", cost, delivery, seq, now).await?;
    }
    Ok(reserved)
}

/// Moves `?3` of account (`?1`, `?2`) from reserved to spent at `?4` (a commit; the
/// journal row is the caller's).
pub(crate) const ACCOUNT_COMMIT: &str =
    "UPDATE quota_accounts SET reserved = reserved - ?3, spent = spent + ?3, updated_at = ?4
     WHERE tenant_id = ?1 AND quota_key = ?2";

const ACCOUNT_RELEASE: &str =
    "UPDATE quota_accounts SET reserved = reserved - ?3, available = available + ?3,
         updated_at = ?4
     WHERE tenant_id = ?1 AND quota_key = ?2";

#[allow(clippy::too_many_arguments)]
pub(crate) async fn quota_settle(
    c: &mut SqliteConnection,
    tenant: Uuid,
    quota_key: &str,
    cost: i64,
    delivery: Uuid,
    seq: i32,
    settle: Settle,
    now: Now,
) -> Result<(), StoreError> {
    let now = now.sqlite_ms();
    savepoint(c).await?;
    let settled = async {
        // Journal first: a second final movement fails here, before the balance moves.
        journal_insert(c, tenant, quota_key, settle.kind(), cost, delivery, seq, now).await?;
        let update = match settle {
            Settle::Commit => ACCOUNT_COMMIT,
            Settle::Release => ACCOUNT_RELEASE,
        };
        sqlx::query(update)
            .bind(tenant)
            .bind(quota_key)
            .bind(cost)
            .bind(now)
            .execute(&mut *c)
            .await?;
        Ok(())
    }
    .await;
    end_savepoint(c, settled).await
}

/// A movement's statements run as one, inside this savepoint: SQLite undoes only the
/// statement that failed, so without it a balance moved without its journal row (or the
/// other way round) would stay in the caller's transaction when the second statement is
/// refused. In process, the savepoint costs no round trip.
async fn savepoint(c: &mut SqliteConnection) -> Result<(), StoreError> {
    sqlx::raw_sql("SAVEPOINT herald_movement").execute(c).await?;
    Ok(())
}

/// Keeps the movement when it worked, undoes all of it when it did not.
async fn end_savepoint<T>(
    c: &mut SqliteConnection,
    result: Result<T, StoreError>,
) -> Result<T, StoreError> {
    let end = if result.is_ok() {
        "RELEASE herald_movement"
    } else {
        "ROLLBACK TO herald_movement; RELEASE herald_movement"
    };
    sqlx::raw_sql(end).execute(c).await?;
    result
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn journal_insert(
    c: &mut SqliteConnection,
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

pub(crate) async fn quota_accounts(
    c: &mut SqliteConnection,
    tenant: Uuid,
) -> Result<Vec<QuotaAccount>, StoreError> {
    let q = format!(
        "SELECT {ACCOUNT_COLS} FROM quota_accounts WHERE tenant_id = ?1 ORDER BY quota_key"
    );
    let mut accounts = Vec::new();
    for row in sqlx::query(sqlx::AssertSqlSafe(q)).bind(tenant).fetch_all(c).await? {
        accounts.push(account_row!(row));
    }
    Ok(accounts)
}

pub(crate) async fn quota_reserved_by_tenant(
    c: &mut SqliteConnection,
) -> Result<Vec<(Uuid, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT tenant_id, CAST(sum(reserved) AS BIGINT) FROM quota_accounts GROUP BY tenant_id",
    )
    .fetch_all(c)
    .await?)
}

/// One writer at a time: nothing to lock.
pub(crate) async fn quota_lock(
    _c: &mut SqliteConnection,
    _accounts: &[(Uuid, String)],
) -> Result<(), StoreError> {
    Ok(())
}

pub(crate) async fn quota_lock_reservations(
    _c: &mut SqliteConnection,
    _deliveries: &[Uuid],
    _known: Vec<Stripe>,
) -> Result<(), StoreError> {
    Ok(())
}

pub(crate) async fn quota_journal_recent(
    c: &mut SqliteConnection,
    tenant: Uuid,
    quota_key: &str,
    limit: usize,
) -> Result<Vec<(i64, JournalRow)>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, at, quota_key, kind, amount, delivery_id, reservation_seq
         FROM quota_journal WHERE tenant_id = ?1 AND quota_key = ?2
         ORDER BY id DESC LIMIT ?3",
    )
    .bind(tenant)
    .bind(quota_key)
    .bind(limit as i64)
    .fetch_all(c)
    .await?;
    let mut journal = Vec::with_capacity(rows.len());
    for row in rows {
        journal.push((sqlx::Row::try_get(&row, "id")?, journal_row!(row)));
    }
    Ok(journal)
}
