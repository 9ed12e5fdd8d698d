use crate::clock::Now;
use crate::error::StoreError;
use crate::quota::{
    GrantState, JournalRow, QuotaAccount, Settle, Stripe, account_row, journal_row,
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
    // Every stripe made if missing (an account from before stripes gets the rest here),
    // then all locked in stripe order: a grant waits for the transactions holding
    // reservations on the account, each for its own duration, never for a queue of them.
    sqlx::query(
        "INSERT INTO quota_accounts (tenant_id, quota_key, stripe, updated_at)
         SELECT $1, $2, g, herald_now($3) FROM generate_series(0, $4 - 1) AS g
         ON CONFLICT DO NOTHING",
    )
    .bind(tenant)
    .bind(quota_key)
    .bind(now.pg())
    .bind(crate::quota::QUOTA_STRIPES)
    .execute(&mut *c)
    .await?;
    let granted: i64 = sqlx::query_scalar(
        "SELECT CAST(sum(l.granted) AS bigint) FROM (
             SELECT granted FROM quota_accounts WHERE tenant_id = $1 AND quota_key = $2
             ORDER BY stripe FOR UPDATE) AS l",
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
    // Granted on stripe 0 (one journal row, under the grant's idempotency key), then the
    // account's available spread evenly over its stripes (locked by quota_grant_lock).
    sqlx::query(
        "WITH j AS (
             INSERT INTO quota_journal (tenant_id, quota_key, stripe, kind, amount,
                 idempotency_key, at)
             VALUES ($1, $2, 0, 'grant', $3, $4, herald_now($5))
             RETURNING amount)
         UPDATE quota_accounts a SET granted = a.granted + j.amount,
             available = a.available + j.amount, updated_at = herald_now($5)
         FROM j WHERE a.tenant_id = $1 AND a.quota_key = $2 AND a.stripe = 0",
    )
    .bind(tenant)
    .bind(quota_key)
    .bind(amount)
    .bind(idempotency_key)
    .bind(now.pg())
    .execute(&mut *c)
    .await?;
    sqlx::query("SELECT herald_quota_move($1, $2, NULL, herald_now($3))")
        .bind(tenant)
        .bind(quota_key)
        .bind(now.pg())
        .execute(&mut *c)
        .await?;
    Ok(())
}

/// A replay's reservation: on a free stripe that covers the cost, as a claim's; else
/// `herald_quota_gather` waits for the held ones (gathering the balance into one if none
/// covers it alone).
pub(crate) async fn quota_reserve(
    c: &mut PgConnection,
    tenant: Uuid,
    quota_key: &str,
    cost: i64,
    delivery: Uuid,
    seq: i32,
    now: Now,
) -> Result<bool, StoreError> {
    // In a savepoint: a stripe whose re-check failed stays locked by the search, and
    // undoing the savepoint releases it before herald_quota_gather waits for the others.
    let mut search = sqlx::Connection::begin(&mut *c).await?;
    let free: Option<i16> = sqlx::query_scalar(
        "SELECT (SELECT stripe FROM quota_accounts
                 WHERE tenant_id = $1 AND quota_key = $2 AND available >= $3
                 ORDER BY stripe LIMIT 1 FOR UPDATE SKIP LOCKED)",
    )
    .bind(tenant)
    .bind(quota_key)
    .bind(cost)
    .fetch_one(&mut *search)
    .await?;
    let stripe = match free {
        Some(stripe) => {
            search.commit().await?;
            Some(stripe)
        }
        None => {
            search.rollback().await?;
            sqlx::query_scalar("SELECT herald_quota_gather($1, $2, $3, herald_now($4))")
                .bind(tenant)
                .bind(quota_key)
                .bind(cost)
                .bind(now.pg())
                .fetch_one(&mut *c)
                .await?
        }
    };
    let Some(stripe) = stripe else { return Ok(false) };
    let journalled = sqlx::query(
        "WITH a AS (
             UPDATE quota_accounts SET available = available - $3,
                 reserved = reserved + $3, updated_at = herald_now($6)
             WHERE tenant_id = $1 AND quota_key = $2 AND stripe = $7 AND available >= $3
             RETURNING stripe)
         INSERT INTO quota_journal (tenant_id, quota_key, stripe, kind, amount, delivery_id,
             reservation_seq, at)
         SELECT $1, $2, a.stripe, 'reserve', $3, $4, $5, herald_now($6) FROM a",
    )
    .bind(tenant)
    .bind(quota_key)
    .bind(cost)
    .bind(delivery)
    .bind(seq)
    .bind(now.pg())
    .bind(stripe)
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
    // The journal row is inserted first and the stripe updated from it, so a second
    // final movement of one reservation is refused by the journal's unique index (23505),
    // before the balance CHECK could see it. The stripe is the reservation's, read from
    // its `reserve` row (unique per reservation); none would be a NOT NULL violation.
    const COMMIT: &str = "WITH j AS (
             INSERT INTO quota_journal (tenant_id, quota_key, stripe, kind, amount,
                 delivery_id, reservation_seq, at)
             VALUES ($1, $2, (SELECT r.stripe FROM quota_journal r WHERE r.delivery_id = $4
                                 AND r.reservation_seq = $5 AND r.kind = 'reserve'),
                     'commit', $3, $4, $5, herald_now($6))
             RETURNING stripe, amount)
         UPDATE quota_accounts a SET reserved = a.reserved - j.amount,
             spent = a.spent + j.amount, updated_at = herald_now($6)
         FROM j WHERE a.tenant_id = $1 AND a.quota_key = $2 AND a.stripe = j.stripe";
    const RELEASE: &str = "WITH j AS (
             INSERT INTO quota_journal (tenant_id, quota_key, stripe, kind, amount,
                 delivery_id, reservation_seq, at)
             VALUES ($1, $2, (SELECT r.stripe FROM quota_journal r WHERE r.delivery_id = $4
                                 AND r.reservation_seq = $5 AND r.kind = 'reserve'),
                     'release', $3, $4, $5, herald_now($6))
             RETURNING stripe, amount)
         UPDATE quota_accounts a SET reserved = a.reserved - j.amount,
             available = a.available + j.amount, updated_at = herald_now($6)
         FROM j WHERE a.tenant_id = $1 AND a.quota_key = $2 AND a.stripe = j.stripe";
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
    let q = "SELECT tenant_id, quota_key, CAST(sum(granted) AS bigint) AS granted,
             CAST(sum(available) AS bigint) AS available,
             CAST(sum(reserved) AS bigint) AS reserved, CAST(sum(spent) AS bigint) AS spent
         FROM quota_accounts WHERE tenant_id = $1
         GROUP BY tenant_id, quota_key ORDER BY quota_key";
    let mut accounts = Vec::new();
    for row in sqlx::query(q).bind(tenant).fetch_all(c).await? {
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

/// `accounts` come sorted by (tenant, key); every stripe of each is locked, in (tenant,
/// key, stripe) order.
pub(crate) async fn quota_lock(
    c: &mut PgConnection,
    accounts: &[(Uuid, String)],
) -> Result<(), StoreError> {
    let (tenants, keys): (Vec<Uuid>, Vec<String>) = accounts.iter().cloned().unzip();
    sqlx::query(
        "SELECT 1 FROM quota_accounts q
         JOIN unnest($1::uuid[], $2::text[]) AS k (tenant_id, quota_key)
           ON q.tenant_id = k.tenant_id AND q.quota_key = k.quota_key
         ORDER BY q.tenant_id, q.quota_key, q.stripe
         FOR UPDATE OF q",
    )
    .bind(tenants)
    .bind(keys)
    .fetch_all(c)
    .await?;
    Ok(())
}

pub(crate) async fn quota_lock_reservations(
    c: &mut PgConnection,
    deliveries: &[Uuid],
    mut known: Vec<Stripe>,
) -> Result<(), StoreError> {
    if known.is_empty() {
        // One statement: the stripes looked up and locked together.
        let q = format!(
            "SELECT 1 FROM quota_accounts q
             WHERE (q.tenant_id, q.quota_key, q.stripe) IN ({RESERVATION_STRIPES})
             ORDER BY q.tenant_id, q.quota_key, q.stripe
             FOR UPDATE OF q"
        );
        sqlx::query(super::sql(q)).bind(deliveries).fetch_all(c).await?;
        return Ok(());
    }
    if !deliveries.is_empty() {
        known.extend(reservation_stripes(&mut *c, deliveries).await?);
    }
    let (tenants, (keys, stripes)): (Vec<Uuid>, (Vec<String>, Vec<i16>)) =
        known.into_iter().map(|(t, k, s)| (t, (k, s))).unzip();
    sqlx::query(
        "SELECT 1 FROM quota_accounts q
         JOIN unnest($1::uuid[], $2::text[], $3::int2[]) AS k (tenant_id, quota_key, stripe)
           ON q.tenant_id = k.tenant_id AND q.quota_key = k.quota_key AND q.stripe = k.stripe
         ORDER BY q.tenant_id, q.quota_key, q.stripe
         FOR UPDATE OF q",
    )
    .bind(tenants)
    .bind(keys)
    .bind(stripes)
    .fetch_all(c)
    .await?;
    Ok(())
}

/// The stripe of each current reservation of the deliveries `$1`, from its `reserve` row.
const RESERVATION_STRIPES: &str = "SELECT r.tenant_id, r.quota_key, r.stripe
    FROM deliveries d JOIN quota_journal r ON r.delivery_id = d.id
         AND r.reservation_seq = d.reservation_seq AND r.kind = 'reserve'
    WHERE d.id = ANY($1) AND d.cost > 0";

/// The stripes the current reservations of `deliveries` sit on, read unlocked.
async fn reservation_stripes(
    c: &mut PgConnection,
    deliveries: &[Uuid],
) -> Result<Vec<Stripe>, StoreError> {
    let q = format!("SELECT DISTINCT * FROM ({RESERVATION_STRIPES}) AS s");
    Ok(sqlx::query_as(super::sql(q)).bind(deliveries).fetch_all(c).await?)
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
           AND kind IN ('grant', 'reserve', 'commit', 'release')
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
