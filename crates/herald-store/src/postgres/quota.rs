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
                "SELECT amount FROM quota_movements WHERE tenant_id = $1 AND quota_key = $2
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
             INSERT INTO quota_movements (tenant_id, quota_key, stripe, kind, amount,
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
    // The reservation goes onto the delivery row (the replay then moves the row to `seq`
    // in the same transaction; its time is the replay's row). Only a row that holds no
    // reservation, or an earlier one, takes it, and the stripe moves only if it does: a
    // second reserve of one reservation, or of a delivery that is not there, moves nothing.
    // A reservation that has ended on the row is written out as its final row first
    // (schema 20), with its own id, time and reservation, so the journal keeps it.
    let q = format!(
        "WITH a AS (
             UPDATE quota_accounts SET available = available - $3,
                 reserved = reserved + $3, updated_at = herald_now($6)
             WHERE tenant_id = $1 AND quota_key = $2 AND stripe = $7 AND available >= $3
               AND EXISTS (SELECT 1 FROM deliveries d WHERE d.id = $4
                           AND (d.reserve_id IS NULL OR d.reservation_seq < $5))
             RETURNING stripe),
         w AS ({})
         UPDATE deliveries d SET reserve_stripe = a.stripe,
             reserve_id = nextval('quota_movements_id_seq'),
             settle_kind = NULL, settle_id = NULL, settled_at = NULL
         FROM a WHERE d.id = $4",
        write_out_ends("deliveries", "d.id = $4 AND EXISTS (SELECT 1 FROM a)")
    );
    let reserved = sqlx::query(super::sql(q))
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
    Ok(reserved == 1)
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
    // The current reservation ends on its delivery's row (schema 20) and the stripe is
    // updated from what that update returns, so a second end of it is refused by the
    // row's trigger (23505) before the balance CHECK could see it. A reservation that is
    // not the row's current one (the delivery was replayed since, its end written out as a
    // final row) is inserted as a final row again, which the final rows' unique index
    // refuses (23505); for a delivery that is not there, that insert has no stripe (a NOT
    // NULL violation), as for an amount that is not the reservation's. So every second
    // end fails, and none moves a unit.
    let row = |kind: &str, column: &str| {
        format!(
            "WITH e AS (
                 UPDATE deliveries d SET settle_kind = '{kind}',
                     settle_id = nextval('quota_movements_id_seq'),
                     settled_at = herald_now($6)
                 WHERE d.id = $4 AND d.reservation_seq = $5 AND d.reserve_id IS NOT NULL
                   AND d.cost = $3
                 RETURNING d.reserve_stripe AS stripe),
             f AS (
                 SELECT f.stripe, f.reserve_id, f.reserved_at FROM quota_movements f
                 WHERE f.delivery_id = $4 AND f.reservation_seq = $5
                   AND f.kind IN ('commit', 'release')
                 LIMIT 1),
             j AS (
                 INSERT INTO quota_movements (tenant_id, quota_key, stripe, kind, amount,
                     delivery_id, reservation_seq, at, reserve_id, reserved_at)
                 SELECT $1, $2, (SELECT stripe FROM f), '{kind}', $3, $4, $5,
                     herald_now($6), (SELECT reserve_id FROM f), (SELECT reserved_at FROM f)
                 WHERE NOT EXISTS (SELECT 1 FROM e)
                 RETURNING stripe),
             m AS (SELECT stripe FROM e UNION ALL SELECT stripe FROM j)
             UPDATE quota_accounts a SET reserved = a.reserved - $3,
                 {column} = a.{column} + $3, updated_at = herald_now($6)
             FROM m WHERE a.tenant_id = $1 AND a.quota_key = $2 AND a.stripe = m.stripe"
        )
    };
    let statement = match settle {
        Settle::Commit => row("commit", "spent"),
        Settle::Release => row("release", "available"),
    };
    sqlx::query(super::sql(statement))
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

/// The stripe of each current reservation of the deliveries `$1`, from the delivery row.
const RESERVATION_STRIPES: &str = "SELECT d.tenant_id, d.quota_key, d.reserve_stripe
    FROM deliveries d WHERE d.id = ANY($1) AND d.cost > 0";

/// The statement that writes the ended reservations among `from`'s rows (deliveries, or
/// what a CTE returned of them) that match `filter` out as final rows of the journal, with
/// their own ids, times and reservations (schema 20): before a replay takes the next
/// reservation, and before retention deletes the row.
pub(crate) fn write_out_ends(from: &str, filter: &str) -> String {
    format!(
        "INSERT INTO quota_movements (id, tenant_id, quota_key, stripe, kind, amount,
             delivery_id, reservation_seq, at, reserve_id, reserved_at)
         OVERRIDING SYSTEM VALUE
         SELECT d.settle_id, d.tenant_id, d.quota_key, d.reserve_stripe, d.settle_kind,
             d.cost, d.id, d.reservation_seq, d.settled_at, d.reserve_id, {RESERVED_AT}
         FROM {from} d WHERE d.settle_id IS NOT NULL AND {filter}"
    )
}

/// When the current reservation of `deliveries d` was taken: its claim for the first,
/// its replay for a later one.
pub(crate) const RESERVED_AT: &str = "CASE WHEN d.reservation_seq = 1 THEN d.created_at
    ELSE (SELECT x.at FROM delivery_replays x
          WHERE x.delivery_id = d.id AND x.reservation_seq = d.reservation_seq) END";

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
    // The journal view's parts, each read by an index: the account's newest movement
    // rows (a range of its index) and newest ends on delivery rows (`deliveries_settled`),
    // with the reserves of the final movements among them (a reservation's id precedes
    // its end's, so any reserve newer than the cut has its end in those ranges); and the
    // open reservations, on the live rows only (the partial indexes of pending and sending
    // deliveries, never the history).
    let q = format!(
        "WITH m AS (
             SELECT id, at, kind, amount, delivery_id, reservation_seq, reserve_id,
                 reserved_at
             FROM quota_movements WHERE tenant_id = $1 AND quota_key = $2
               AND kind IN ('grant', 'reserve', 'commit', 'release')
             ORDER BY id DESC LIMIT $3),
         s AS (
             SELECT d.settle_id AS id, d.settled_at AS at, d.settle_kind AS kind,
                 d.cost AS amount, d.id AS delivery_id, d.reservation_seq, d.reserve_id,
                 {RESERVED_AT} AS reserved_at
             FROM deliveries d
             WHERE d.tenant_id = $1 AND d.quota_key = $2 AND d.settle_id IS NOT NULL
             ORDER BY d.settle_id DESC LIMIT $3),
         o AS (
             SELECT d.reserve_id AS id, {RESERVED_AT} AS at, d.cost, d.id AS delivery_id,
                 d.reservation_seq
             FROM (SELECT * FROM deliveries WHERE state = 'pending'
                   UNION ALL SELECT * FROM deliveries WHERE state = 'sending') AS d
             WHERE d.tenant_id = $1 AND d.quota_key = $2 AND d.reserve_id IS NOT NULL
               AND d.settle_id IS NULL),
         f AS (SELECT * FROM m UNION ALL SELECT * FROM s),
         e AS (
             SELECT id, at, kind, amount, delivery_id, reservation_seq FROM f
             UNION ALL
             SELECT reserve_id, reserved_at, 'reserve', amount, delivery_id, reservation_seq
             FROM f WHERE reserve_id IS NOT NULL
             UNION ALL
             SELECT id, at, 'reserve', cost, delivery_id, reservation_seq FROM o)
         SELECT id, herald_ms(at) AS at, $2 AS quota_key, kind, amount, delivery_id,
             reservation_seq
         FROM e ORDER BY id DESC LIMIT $3"
    );
    let rows = sqlx::query(super::sql(q))
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
