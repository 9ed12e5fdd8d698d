use crate::clock::Now;
use crate::error::StoreError;
use crate::quota::{
    ACCOUNT_COLS, GrantState, JournalRow, QuotaAccount, Settle, account_row, journal_row,
};
use sqlx::PgConnection;
use sqlx::types::Uuid;

pub(crate) async fn quota_grant_lock(
    c: &mut PgConnection,
    tenant: Uuid,
    quota_key: &str,
    idempotency_key: Option<&str>,
    now: Now,
) -> Result<GrantState, StoreError> {
    sqlx::query(
        "INSERT INTO quota_accounts (tenant_id, quota_key, updated_at)
         VALUES ($1, $2, herald_now($3)) ON CONFLICT DO NOTHING",
    )
    .bind(tenant)
    .bind(quota_key)
    .bind(now.pg())
    .execute(&mut *c)
    .await?;
    let granted: i64 = sqlx::query_scalar(
        "SELECT granted FROM quota_accounts WHERE tenant_id = $1 AND quota_key = $2 FOR UPDATE",
    )
    .bind(tenant)
    .bind(quota_key)
    .fetch_one(&mut *c)
    .await?;
    // A statement of its own after the lock: under READ COMMITTED it sees a grant that a
    // concurrent holder of the lock committed under this key.
    let amount_first = match idempotency_key {
        None => None,
        Some(key) => {
            sqlx::query_scalar(
                "SELECT amount FROM quota_journal WHERE tenant_id = $1 AND quota_key = $2
                 AND kind = 'grant' AND idempotency_key = $3",
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
    c: &mut PgConnection,
    tenant: Uuid,
    quota_key: &str,
    amount: i64,
    idempotency_key: Option<&str>,
    now: Now,
) -> Result<(), StoreError> {
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
    .bind(now.pg())
    .execute(c)
    .await?;
    Ok(())
}

pub(crate) async fn quota_reserve(
    c: &mut PgConnection,
    tenant: Uuid,
    quota_key: &str,
    cost: i64,
    delivery: Uuid,
    seq: i32,
    now: Now,
) -> Result<bool, StoreError> {
    let journalled = sqlx::query(
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
    .bind(now.pg())
    .execute(c)
    .await?
    .rows_affected();
    Ok(journalled == 1)
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn quota_settle(
    c: &mut PgConnection,
    tenant: Uuid,
    quota_key: &str,
    cost: i64,
    delivery: Uuid,
    seq: i32,
    settle: Settle,
    now: Now,
) -> Result<(), StoreError> {
    // The journal row is inserted first and the account updated from it, so a second
    // final movement of one reservation is refused by the journal's unique index (23505),
    // before the balance CHECK could see it.
    const COMMIT: &str = "WITH j AS (
             INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, delivery_id,
                 reservation_seq, at)
             VALUES ($1, $2, 'commit', $3, $4, $5, herald_now($6)) RETURNING amount)
         UPDATE quota_accounts a SET reserved = a.reserved - j.amount,
             spent = a.spent + j.amount, updated_at = herald_now($6)
         FROM j WHERE a.tenant_id = $1 AND a.quota_key = $2";
    const RELEASE: &str = "WITH j AS (
             INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, delivery_id,
                 reservation_seq, at)
             VALUES ($1, $2, 'release', $3, $4, $5, herald_now($6)) RETURNING amount)
         UPDATE quota_accounts a SET reserved = a.reserved - j.amount,
             available = a.available + j.amount, updated_at = herald_now($6)
         FROM j WHERE a.tenant_id = $1 AND a.quota_key = $2";
    let statement = match settle {
        Settle::Commit => COMMIT,
        Settle::Release => RELEASE,
    };
    sqlx::query(statement)
        .bind(tenant)
        .bind(quota_key)
        .bind(cost)
        .bind(delivery)
        .bind(seq)
        .bind(now.pg())
        .execute(c)
        .await?;
    Ok(())
}

pub(crate) async fn quota_accounts(
    c: &mut PgConnection,
    tenant: Uuid,
) -> Result<Vec<QuotaAccount>, StoreError> {
    let q = format!(
        "SELECT {ACCOUNT_COLS} FROM quota_accounts WHERE tenant_id = $1 ORDER BY quota_key"
    );
    let mut accounts = Vec::new();
    for row in sqlx::query(sqlx::AssertSqlSafe(q)).bind(tenant).fetch_all(c).await? {
        accounts.push(account_row!(row));
    }
    Ok(accounts)
}

pub(crate) async fn quota_reserved_by_tenant(
    c: &mut PgConnection,
) -> Result<Vec<(Uuid, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT tenant_id, CAST(sum(reserved) AS BIGINT) FROM quota_accounts GROUP BY tenant_id",
    )
    .fetch_all(c)
    .await?)
}

/// `accounts` come sorted by (tenant, key); the lock is taken in that order.
pub(crate) async fn quota_lock(
    c: &mut PgConnection,
    accounts: &[(Uuid, String)],
) -> Result<(), StoreError> {
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

pub(crate) async fn quota_journal_recent(
    c: &mut PgConnection,
    tenant: Uuid,
    quota_key: &str,
    limit: usize,
) -> Result<Vec<(i64, JournalRow)>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, herald_ms(at) AS at, quota_key, kind, amount, delivery_id, reservation_seq
         FROM quota_journal WHERE tenant_id = $1 AND quota_key = $2
         ORDER BY id DESC LIMIT $3",
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
