use super::{Bind, end_savepoint, insert_rows, savepoint, sql};
use crate::clock::Now;
use crate::error::StoreError;
use crate::quota::{
    GrantState, JournalRow, QuotaAccount, Settle, Stripe, account_row, journal_row,
};
use sqlx::MySqlConnection;
use sqlx::types::Uuid;

pub(crate) async fn quota_grant_lock(
    c: &mut MySqlConnection,
    tenant: Uuid,
    quota_key: &str,
    idempotency_key: Option<&str>,
    now: Now,
) -> Result<GrantState, StoreError> {
    // Every stripe made if missing (an account from before stripes gets the rest here),
    // and all locked in stripe order. Not an insert whose duplicate is caught: a duplicate
    // leaves a shared lock behind, and two grants upgrading theirs to the lock below would
    // deadlock. An upsert's duplicate takes the exclusive lock at once (its row count is
    // not read here, so CLIENT_FOUND_ROWS does not matter).
    let t = now.mysql_sql();
    let rows: Vec<String> =
        (0..crate::quota::QUOTA_STRIPES).map(|stripe| format!("(?, ?, {stripe}, {t})")).collect();
    let q = format!(
        "INSERT INTO quota_accounts (tenant_id, quota_key, stripe, updated_at) VALUES {}
         ON DUPLICATE KEY UPDATE updated_at = updated_at",
        rows.join(", ")
    );
    let mut upsert = sqlx::query(sql(q));
    for _ in 0..crate::quota::QUOTA_STRIPES {
        upsert = upsert.bind(tenant).bind(quota_key).bind_now(now);
    }
    upsert.execute(&mut *c).await?;
    let granted: i64 = sqlx::query_scalar(
        "SELECT CAST(SUM(granted) AS SIGNED) FROM quota_accounts
         WHERE tenant_id = ? AND quota_key = ? FOR UPDATE",
    )
    .bind(tenant)
    .bind(quota_key)
    .fetch_one(&mut *c)
    .await?;
    // After the lock, and locking: under REPEATABLE READ a plain read would not see a
    // grant a concurrent holder of the lock committed under this key.
    let amount_first = match idempotency_key {
        None => None,
        Some(key) => {
            sqlx::query_scalar(
                "SELECT amount FROM quota_journal WHERE tenant_id = ? AND quota_key = ?
                 AND kind = 'grant' AND idempotency_key = ? LOCK IN SHARE MODE",
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
    c: &mut MySqlConnection,
    tenant: Uuid,
    quota_key: &str,
    amount: i64,
    idempotency_key: Option<&str>,
    now: Now,
) -> Result<(), StoreError> {
    let t = now.mysql_sql();
    savepoint(c).await?;
    let applied = async {
        // Granted on stripe 0 (one journal row, under the grant's idempotency key), then
        // the account's available spread evenly over its stripes (all locked by
        // quota_grant_lock).
        let q = format!(
            "INSERT INTO quota_journal (tenant_id, quota_key, stripe, kind, amount,
                 idempotency_key, at)
             VALUES (?, ?, 0, 'grant', ?, ?, {t})"
        );
        sqlx::query(sql(q))
            .bind(tenant)
            .bind(quota_key)
            .bind(amount)
            .bind(idempotency_key)
            .bind_now(now)
            .execute(&mut *c)
            .await?;
        let q = format!(
            "UPDATE quota_accounts SET granted = granted + ?, available = available + ?,
                 updated_at = {t}
             WHERE tenant_id = ? AND quota_key = ? AND stripe = 0"
        );
        sqlx::query(sql(q))
            .bind(amount)
            .bind(amount)
            .bind_now(now)
            .bind(tenant)
            .bind(quota_key)
            .execute(&mut *c)
            .await?;
        let q = format!("CALL herald_quota_move(?, ?, NULL, {t})");
        sqlx::query(sql(q)).bind(tenant).bind(quota_key).bind_now(now).execute(&mut *c).await?;
        Ok(())
    }
    .await;
    end_savepoint(c, applied).await
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn quota_reserve(
    c: &mut MySqlConnection,
    tenant: Uuid,
    quota_key: &str,
    cost: i64,
    delivery: Uuid,
    seq: i32,
    now: Now,
) -> Result<bool, StoreError> {
    let stripe = match stripe_take(c, tenant, quota_key, cost, false, now).await? {
        (Some(stripe), _) => stripe,
        (None, _) => match stripe_take(c, tenant, quota_key, cost, true, now).await? {
            (Some(stripe), _) => stripe,
            (None, _) => return Ok(false),
        },
    };
    savepoint(c).await?;
    let reserved = reserve_steps(c, tenant, quota_key, stripe, cost, delivery, seq, now).await;
    end_savepoint(c, reserved).await
}

/// The stripe a reservation of `cost` takes, locked for the rest of the transaction
/// (`herald_quota_take`: a free stripe that covers it, or with `gather` the account
/// gathered, which a caller asks for after a search found none); `None` when there is
/// none. With it, the server's clock once (or the fixed
/// instant) in milliseconds, for all of a claim's rows. Two round trips: the call, and its
/// OUT parameter.
pub(crate) async fn stripe_take(
    c: &mut MySqlConnection,
    tenant: Uuid,
    quota_key: &str,
    cost: i64,
    gather: bool,
    now: Now,
) -> Result<(Option<i16>, i64), StoreError> {
    let q = format!("CALL herald_quota_take(?, ?, ?, ?, {}, ?, @herald_stripe)", now.mysql_sql());
    sqlx::query(sql(q))
        .bind(tenant)
        .bind(quota_key)
        .bind(cost)
        .bind(0) // from stripe 0: the lowest free stripe (ARCHITECTURE.md)
        .bind_now(now)
        .bind(gather)
        .execute(&mut *c)
        .await?;
    let q = format!("SELECT @herald_stripe, {}", now.mysql_sql());
    Ok(sqlx::query_as(sql(q)).bind_now(now).fetch_one(&mut *c).await?)
}

/// Reserves `cost` on `stripe` of the account (which the caller has locked) and journals
/// it; `false` when the stripe cannot cover it. Inside the caller's savepoint.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn reserve_steps(
    c: &mut MySqlConnection,
    tenant: Uuid,
    quota_key: &str,
    stripe: i16,
    cost: i64,
    delivery: Uuid,
    seq: i32,
    now: Now,
) -> Result<bool, StoreError> {
    let q = format!(
        "UPDATE quota_accounts SET available = available - ?, reserved = reserved + ?,
             updated_at = {}
         WHERE tenant_id = ? AND quota_key = ? AND stripe = ? AND available >= ?",
        now.mysql_sql()
    );
    let reserved = sqlx::query(sql(q))
        .bind(cost)
        .bind(cost)
        .bind_now(now)
        .bind(tenant)
        .bind(quota_key)
        .bind(stripe)
        .bind(cost)
        .execute(&mut *c)
        .await?
        .rows_affected()
        == 1;
    if reserved {
        let movement = [(delivery, seq, cost)];
        journal_insert(c, tenant, quota_key, stripe, "reserve", &movement, now).await?;
    }
    Ok(reserved)
}

/// Moves `amount` of an account from reserved to spent (a commit) or to available (a
/// release); the journal rows are the caller's.
pub(crate) async fn account_settle(
    c: &mut MySqlConnection,
    tenant: Uuid,
    quota_key: &str,
    stripe: i16,
    amount: i64,
    settle: Settle,
    now: Now,
) -> Result<(), StoreError> {
    let to = match settle {
        Settle::Commit => "spent = spent + ?",
        Settle::Release => "available = available + ?",
    };
    let q = format!(
        "UPDATE quota_accounts SET reserved = reserved - ?, {to}, updated_at = {}
         WHERE tenant_id = ? AND quota_key = ? AND stripe = ?",
        now.mysql_sql()
    );
    sqlx::query(sql(q))
        .bind(amount)
        .bind(amount)
        .bind_now(now)
        .bind(tenant)
        .bind(quota_key)
        .bind(stripe)
        .execute(c)
        .await?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn quota_settle(
    c: &mut MySqlConnection,
    tenant: Uuid,
    quota_key: &str,
    cost: i64,
    delivery: Uuid,
    seq: i32,
    settle: Settle,
    now: Now,
) -> Result<(), StoreError> {
    // The reservation's stripe, from its `reserve` row (unique per reservation).
    let stripe: Option<i16> = sqlx::query_scalar(
        "SELECT stripe FROM quota_journal WHERE reserve_of = ? AND reservation_seq = ?",
    )
    .bind(delivery)
    .bind(seq)
    .fetch_optional(&mut *c)
    .await?;
    let Some(stripe) = stripe else {
        return Err(StoreError::Database(sqlx::Error::Protocol(format!(
            "no reservation {seq} of delivery {delivery} to settle"
        ))));
    };
    savepoint(c).await?;
    let settled = async {
        // Journal first: a second final movement fails here, before the balance moves.
        let movement = [(delivery, seq, cost)];
        journal_insert(c, tenant, quota_key, stripe, settle.kind(), &movement, now).await?;
        account_settle(c, tenant, quota_key, stripe, cost, settle, now).await
    }
    .await;
    end_savepoint(c, settled).await
}

/// Journal rows of one kind on one account, one per (delivery, reservation, amount), in
/// few statements ([`insert_rows`]).
pub(crate) async fn journal_insert(
    c: &mut MySqlConnection,
    tenant: Uuid,
    quota_key: &str,
    stripe: i16,
    kind: &str,
    movements: &[(Uuid, i32, i64)],
    now: Now,
) -> Result<(), StoreError> {
    let rows: Vec<JournalMove<'_>> = movements
        .iter()
        .map(|&(delivery, seq, amount)| JournalMove {
            tenant,
            quota_key,
            stripe,
            delivery,
            seq,
            amount,
        })
        .collect();
    journal_moves(c, kind, &rows, now).await
}

/// One movement of a reservation, on the stripe it names.
pub(crate) struct JournalMove<'a> {
    pub tenant: Uuid,
    pub quota_key: &'a str,
    pub stripe: i16,
    pub delivery: Uuid,
    pub seq: i32,
    pub amount: i64,
}

/// Journal rows of one kind, one per movement, on any accounts, in few statements.
pub(crate) async fn journal_moves(
    c: &mut MySqlConnection,
    kind: &str,
    moves: &[JournalMove<'_>],
    now: Now,
) -> Result<(), StoreError> {
    let head = "INSERT INTO quota_journal (tenant_id, quota_key, stripe, kind, amount, \
                delivery_id, reservation_seq, at) VALUES";
    let row = format!("(?, ?, ?, ?, ?, ?, ?, {})", now.mysql_sql());
    insert_rows(c, head, &row, "", moves, |q, m| {
        q.bind(m.tenant)
            .bind(m.quota_key)
            .bind(m.stripe)
            .bind(kind)
            .bind(m.amount)
            .bind(m.delivery)
            .bind(m.seq)
            .bind_now(now)
    })
    .await?;
    Ok(())
}

pub(crate) async fn quota_accounts(
    c: &mut MySqlConnection,
    tenant: Uuid,
) -> Result<Vec<QuotaAccount>, StoreError> {
    let q = "SELECT tenant_id, quota_key, CAST(SUM(granted) AS SIGNED) AS granted,
             CAST(SUM(available) AS SIGNED) AS available,
             CAST(SUM(reserved) AS SIGNED) AS reserved, CAST(SUM(spent) AS SIGNED) AS spent
         FROM quota_accounts WHERE tenant_id = ?
         GROUP BY tenant_id, quota_key ORDER BY quota_key";
    let mut accounts = Vec::new();
    for row in sqlx::query(q).bind(tenant).fetch_all(c).await? {
        accounts.push(account_row!(row));
    }
    Ok(accounts)
}

pub(crate) async fn quota_reserved_by_tenant(
    c: &mut MySqlConnection,
) -> Result<Vec<(Uuid, i64)>, StoreError> {
    Ok(sqlx::query_as(
        "SELECT tenant_id, CAST(SUM(reserved) AS SIGNED) FROM quota_accounts GROUP BY tenant_id",
    )
    .fetch_all(c)
    .await?)
}

/// One account at a time, in the order given (sorted by the contract): InnoDB takes the
/// locks of one statement in the order it scans, which need not be this one. Within an
/// account, the primary key's order: stripe by stripe.
pub(crate) async fn quota_lock(
    c: &mut MySqlConnection,
    accounts: &[(Uuid, String)],
) -> Result<(), StoreError> {
    for (tenant, quota_key) in accounts {
        sqlx::query(
            "SELECT 1 FROM quota_accounts WHERE tenant_id = ? AND quota_key = ? FOR UPDATE",
        )
        .bind(tenant)
        .bind(quota_key)
        .fetch_optional(&mut *c)
        .await?;
    }
    Ok(())
}

/// The stripes read unlocked (the reservations' `reserve` rows), then locked one by one in
/// (tenant, key, stripe) order with those the caller knew: one statement joining them would
/// lock the journal and delivery rows it read too (MariaDB has no `FOR UPDATE OF`).
pub(crate) async fn quota_lock_reservations(
    c: &mut MySqlConnection,
    deliveries: &[Uuid],
    mut stripes: Vec<Stripe>,
) -> Result<(), StoreError> {
    if !deliveries.is_empty() {
        let q = format!(
            "SELECT DISTINCT r.tenant_id, r.quota_key, r.stripe
             FROM deliveries d JOIN quota_journal r ON r.reserve_of = d.id
                  AND r.reservation_seq = d.reservation_seq
             WHERE d.id IN ({}) AND d.cost > 0",
            super::placeholders(super::in_list_len(deliveries.len()))
        );
        let read = sqlx::query_as::<_, Stripe>(sql(q));
        stripes.extend(super::bind_in_list(read, deliveries).fetch_all(&mut *c).await?);
        stripes.sort();
        stripes.dedup();
    }
    for (tenant, quota_key, stripe) in stripes {
        sqlx::query(
            "SELECT 1 FROM quota_accounts WHERE tenant_id = ? AND quota_key = ? AND stripe = ?
             FOR UPDATE",
        )
        .bind(tenant)
        .bind(quota_key)
        .bind(stripe)
        .fetch_optional(&mut *c)
        .await?;
    }
    Ok(())
}

pub(crate) async fn quota_journal_recent(
    c: &mut MySqlConnection,
    tenant: Uuid,
    quota_key: &str,
    limit: usize,
) -> Result<Vec<(i64, JournalRow)>, StoreError> {
    let rows = sqlx::query(
        "SELECT id, at, quota_key, kind, amount, delivery_id, reservation_seq
         FROM quota_journal WHERE tenant_id = ? AND quota_key = ?
           AND kind IN ('grant', 'reserve', 'commit', 'release')
         ORDER BY id DESC LIMIT ?",
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
