//! Deliveries: the claim (a row under a unique identity), the lease, the completion
//! fenced by (lease owner, attempt), the reconciler's sweep, replay and cancel.
//!
//! Each function is the SQL of one step, per backend. What an outcome *means* is decided
//! by `herald_core::decide`; this file only reads the row, asks, and applies the answer.

use crate::clock::sqlite_now;
use crate::conn::Conn;
use crate::error::StoreError;
use crate::quota::{
    SQLITE_ACCOUNT_COMMIT, Settle, journal_insert_sqlite, quota_reserve, quota_settle,
};
use herald_core::{Current, Decision, DeliveryState, Report, RetryPolicy, decide};
use sqlx::Row;
use sqlx::types::Uuid;
use std::time::Duration;

/// A delivery row (times in Unix milliseconds).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeliveryRow {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub operation_key: String,
    pub channel: String,
    pub recipient: String,
    pub fingerprint: Vec<u8>,
    pub quota_key: String,
    pub cost: i64,
    pub state: DeliveryState,
    pub attempts: i32,
    pub max_attempts: i32,
    pub attempts_base: i32,
    pub reservation_seq: i32,
    pub next_attempt_at: i64,
    pub lease_owner: Option<String>,
    pub lease_until: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub sent_at: Option<i64>,
    /// The latest attempt's worker, set by the lease and kept only while the row stands for
    /// that attempt (`sending`, or `sent` by it): such an attempt has no `delivery_attempts`
    /// row, and listing reads it from here. Any other transition clears it.
    pub attempt_worker: Option<String>,
    /// When the latest attempt was leased (kept after it ends, for its row's start).
    pub attempt_started_at: Option<i64>,
}

/// A leased delivery with its payload (JSON text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeasedRow {
    pub delivery: DeliveryRow,
    pub payload: String,
}

/// One attempt row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptRow {
    pub n: i32,
    pub worker: String,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    pub outcome: Option<String>,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
}

/// A claim to insert.
#[derive(Debug, Clone)]
pub struct NewDelivery<'a> {
    pub id: Uuid,
    pub tenant_id: Uuid,
    pub operation_key: &'a str,
    pub channel: &'a str,
    pub recipient: &'a str,
    pub payload: &'a str,
    pub fingerprint: &'a [u8],
    pub quota_key: &'a str,
    pub cost: i64,
    pub max_attempts: i32,
    /// Due time; `None` means now.
    pub send_at: Option<i64>,
}

const SQLITE_COLS: &str = "id, tenant_id, operation_key, channel, recipient, fingerprint, \
    quota_key, cost, state, attempts, max_attempts, attempts_base, reservation_seq, \
    next_attempt_at, lease_owner, lease_until, last_error, created_at, updated_at, sent_at, \
    attempt_worker, attempt_started_at";

const PG_COLS: &str = "d.id, d.tenant_id, d.operation_key, d.channel, d.recipient, \
    d.fingerprint, d.quota_key, d.cost, d.state, d.attempts, d.max_attempts, \
    d.attempts_base, d.reservation_seq, herald_ms(d.next_attempt_at) AS next_attempt_at, \
    d.lease_owner, herald_ms(d.lease_until) AS lease_until, d.last_error, \
    herald_ms(d.created_at) AS created_at, herald_ms(d.updated_at) AS updated_at, \
    herald_ms(d.sent_at) AS sent_at, d.attempt_worker, \
    herald_ms(d.attempt_started_at) AS attempt_started_at";

macro_rules! delivery_row {
    ($row:expr) => {{
        let state: String = $row.try_get("state")?;
        DeliveryRow {
            id: $row.try_get("id")?,
            tenant_id: $row.try_get("tenant_id")?,
            operation_key: $row.try_get("operation_key")?,
            channel: $row.try_get("channel")?,
            recipient: $row.try_get("recipient")?,
            fingerprint: $row.try_get("fingerprint")?,
            quota_key: $row.try_get("quota_key")?,
            cost: $row.try_get("cost")?,
            state: state
                .parse()
                .map_err(|e: herald_core::state::UnknownState| sqlx::Error::Decode(e.into()))?,
            attempts: $row.try_get("attempts")?,
            max_attempts: $row.try_get("max_attempts")?,
            attempts_base: $row.try_get("attempts_base")?,
            reservation_seq: $row.try_get("reservation_seq")?,
            next_attempt_at: $row.try_get("next_attempt_at")?,
            lease_owner: $row.try_get("lease_owner")?,
            lease_until: $row.try_get("lease_until")?,
            last_error: $row.try_get("last_error")?,
            created_at: $row.try_get("created_at")?,
            updated_at: $row.try_get("updated_at")?,
            sent_at: $row.try_get("sent_at")?,
            attempt_worker: $row.try_get("attempt_worker")?,
            attempt_started_at: $row.try_get("attempt_started_at")?,
        }
    }};
}

fn sql(s: String) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(s)
}

/// What claiming did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// The claim row is in; `reserved` says whether the quota was reserved with it (always
    /// true for cost 0). When it was not, the caller withdraws the claim.
    Inserted { reserved: bool, created_at: i64, next_attempt_at: i64 },
    /// A row with this identity exists (committed, or committed while we waited for it).
    Exists,
    /// No such tenant: nothing was written.
    UnknownTenant,
    /// Only from [`delivery_claim_alone`]: the quota could not cover the cost, so nothing
    /// was written. A row with this identity may exist; the caller looks it up, since a
    /// duplicate is reported before short quota.
    QuotaShort,
}

/// The claim's CTEs on PostgreSQL, shared by both ways of claiming: `d` inserts the claim
/// where `$gate` holds (and returns its times), `p` its payload, `a` reserves the cost on
/// the account (`$guard` adds to that update's condition), `j` journals the reservation.
/// Parameters $1–$12 are [`bind_claim`]'s.
macro_rules! pg_claim_ctes {
    ($gate:literal, $guard:literal) => {
        concat!(
            "d AS (
                 INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient,
                     fingerprint, quota_key, cost, state, max_attempts, next_attempt_at,
                     created_at, updated_at)
                 SELECT $1, $2, $3, $4, $5, $6, $7, $8, 'pending', $9,
                     coalesce(herald_ts($10), herald_now($11)), herald_now($11), herald_now($11)
                 WHERE ",
            $gate,
            "
                 ON CONFLICT (tenant_id, operation_key, channel) DO NOTHING
                 RETURNING id, herald_ms(created_at) AS created_ms,
                     herald_ms(next_attempt_at) AS due_ms),
             p AS (INSERT INTO delivery_payloads (delivery_id, payload)
                   SELECT id, $12::jsonb FROM d),
             a AS (UPDATE quota_accounts SET available = available - $8,
                       reserved = reserved + $8, updated_at = herald_now($11)
                   WHERE $8 > 0 AND tenant_id = $2 AND quota_key = $7 ",
            $guard,
            "
                     AND EXISTS (SELECT 1 FROM d)
                   RETURNING 1),
             j AS (INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, delivery_id,
                       reservation_seq, at)
                   SELECT $2, $7, 'reserve', $8, $1, 1, herald_now($11) FROM a)"
        )
    };
}

/// Binds [`pg_claim_ctes`]'s parameters $1–$12.
fn bind_claim<'q, O>(
    query: sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    new: &'q NewDelivery<'_>,
    now: Option<i64>,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
    query
        .bind(new.id)
        .bind(new.tenant_id)
        .bind(new.operation_key)
        .bind(new.channel)
        .bind(new.recipient)
        .bind(new.fingerprint)
        .bind(new.quota_key)
        .bind(new.cost)
        .bind(new.max_attempts)
        .bind(new.send_at)
        .bind(now)
        .bind(new.payload)
}

/// Inserts the claim and its payload and reserves its quota (reservation 1) — on
/// PostgreSQL in one statement. Never raises on a duplicate (`ON CONFLICT DO NOTHING`)
/// nor on short quota (a conditional update), so the caller's transaction stays usable.
pub async fn delivery_claim(
    mut conn: Conn<'_>,
    new: &NewDelivery<'_>,
    now: Option<i64>,
) -> Result<Claim, StoreError> {
    let claimed = match conn.reborrow() {
        Conn::Sqlite(c) => {
            let now = sqlite_now(now);
            let n = sqlx::query(
                "INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient,
                     fingerprint, quota_key, cost, state, max_attempts, next_attempt_at,
                     created_at, updated_at)
                 SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'pending', ?9, coalesce(?10, ?11), ?11, ?11
                 WHERE EXISTS (SELECT 1 FROM tenants WHERE id = ?2)
                 ON CONFLICT (tenant_id, operation_key, channel) DO NOTHING",
            )
            .bind(new.id)
            .bind(new.tenant_id)
            .bind(new.operation_key)
            .bind(new.channel)
            .bind(new.recipient)
            .bind(new.fingerprint)
            .bind(new.quota_key)
            .bind(new.cost)
            .bind(new.max_attempts)
            .bind(new.send_at)
            .bind(now)
            .execute(&mut *c)
            .await?
            .rows_affected();
            if n == 1 {
                sqlx::query("INSERT INTO delivery_payloads (delivery_id, payload) VALUES (?1, ?2)")
                    .bind(new.id)
                    .bind(new.payload)
                    .execute(&mut *c)
                    .await?;
                let reserved = new.cost == 0
                    || quota_reserve(
                        Conn::Sqlite(c),
                        new.tenant_id,
                        new.quota_key,
                        new.cost,
                        new.id,
                        1,
                        Some(now),
                    )
                    .await?;
                Some((reserved, now, new.send_at.unwrap_or(now)))
            } else {
                None
            }
        }
        Conn::Postgres(c) => {
            let row: Option<(i64, i64, i64)> = bind_claim(
                sqlx::query_as(concat!(
                    "WITH ",
                    pg_claim_ctes!(
                        "EXISTS (SELECT 1 FROM tenants WHERE id = $2)",
                        "AND available >= $8"
                    ),
                    " SELECT d.created_ms, d.due_ms, (SELECT count(*) FROM a) AS reserved FROM d"
                )),
                new,
                now,
            )
            .fetch_optional(c)
            .await?;
            row.map(|(created, due, reserved)| (new.cost == 0 || reserved == 1, created, due))
        }
    };
    if let Some((reserved, created_at, next_attempt_at)) = claimed {
        return Ok(Claim::Inserted { reserved, created_at, next_attempt_at });
    }
    if tenant_exists(conn, new.tenant_id).await? {
        Ok(Claim::Exists)
    } else {
        Ok(Claim::UnknownTenant)
    }
}

/// The claim, its payload and its reservation as one autocommitted statement on
/// PostgreSQL, for a submit that has no transaction of its own: one round trip where
/// `BEGIN`, the claim and `COMMIT` are three. Without a transaction around it a claim
/// inserted on short quota could not be withdrawn unseen, so the order is reversed: the
/// quota row is locked first (`FOR UPDATE`, which re-reads the latest version) and the
/// claim is inserted only if it covers the cost; the reservation then updates the locked
/// row. It carries no `available >= cost` guard of its own, so if that reasoning ever
/// failed the balance's CHECK constraint would abort the whole statement rather than
/// commit an unbudgeted claim. `notify` adds the cross-process wake-up, sent only when a
/// claim was inserted. Never returns `Inserted { reserved: false }`.
pub async fn delivery_claim_alone(
    c: &mut sqlx::PgConnection,
    new: &NewDelivery<'_>,
    now: Option<i64>,
    notify: bool,
) -> Result<Claim, StoreError> {
    let (created, due, _reserved, tenant_known, covered, _notified): ClaimAloneRow = bind_claim(
        sqlx::query_as(concat!(
            "WITH q AS (
                     SELECT 1 FROM quota_accounts
                     WHERE $8 > 0 AND tenant_id = $2 AND quota_key = $7 AND available >= $8
                     FOR UPDATE),
                 t AS (SELECT EXISTS (SELECT 1 FROM tenants WHERE id = $2) AS known), ",
            pg_claim_ctes!("(SELECT known FROM t) AND ($8 = 0 OR EXISTS (SELECT 1 FROM q))", ""),
            ", n AS (SELECT pg_notify($14, '') FROM d WHERE $13)
                 SELECT (SELECT created_ms FROM d), (SELECT due_ms FROM d),
                     (SELECT count(*) FROM a), (SELECT known FROM t),
                     $8 = 0 OR EXISTS (SELECT 1 FROM q), (SELECT count(*) FROM n)"
        )),
        new,
        now,
    )
    .bind(notify)
    .bind(crate::notify::WAKE_CHANNEL)
    .fetch_one(c)
    .await?;
    Ok(match (created, due) {
        (Some(created_at), Some(next_attempt_at)) => {
            Claim::Inserted { reserved: true, created_at, next_attempt_at }
        }
        _ if !tenant_known => Claim::UnknownTenant,
        _ if !covered => Claim::QuotaShort,
        _ => Claim::Exists,
    })
}

/// created, due, reserved, tenant known, quota covered, notified.
type ClaimAloneRow = (Option<i64>, Option<i64>, i64, bool, bool, i64);

pub async fn tenant_exists(conn: Conn<'_>, tenant: Uuid) -> Result<bool, StoreError> {
    let found: Option<i32> = match conn {
        Conn::Sqlite(c) => {
            sqlx::query_scalar("SELECT 1 FROM tenants WHERE id = ?1")
                .bind(tenant)
                .fetch_optional(c)
                .await?
        }
        Conn::Postgres(c) => {
            sqlx::query_scalar("SELECT 1 FROM tenants WHERE id = $1")
                .bind(tenant)
                .fetch_optional(c)
                .await?
        }
    };
    Ok(found.is_some())
}

/// Withdraws a claim inserted in this transaction (quota was short): as if it never was.
pub async fn delivery_withdraw(conn: Conn<'_>, id: Uuid) -> Result<(), StoreError> {
    match conn {
        Conn::Sqlite(c) => sqlx::query("DELETE FROM deliveries WHERE id = ?1")
            .bind(id)
            .execute(c)
            .await?
            .rows_affected(),
        Conn::Postgres(c) => sqlx::query("DELETE FROM deliveries WHERE id = $1")
            .bind(id)
            .execute(c)
            .await?
            .rows_affected(),
    };
    Ok(())
}

/// The delivery with this identity.
pub async fn delivery_by_identity(
    conn: Conn<'_>,
    tenant: Uuid,
    operation_key: &str,
    channel: &str,
) -> Result<Option<DeliveryRow>, StoreError> {
    Ok(match conn {
        Conn::Sqlite(c) => {
            let q = format!(
                "SELECT {SQLITE_COLS} FROM deliveries
                 WHERE tenant_id = ?1 AND operation_key = ?2 AND channel = ?3"
            );
            match sqlx::query(sql(q))
                .bind(tenant)
                .bind(operation_key)
                .bind(channel)
                .fetch_optional(c)
                .await?
            {
                Some(row) => Some(delivery_row!(row)),
                None => None,
            }
        }
        Conn::Postgres(c) => {
            let q = format!(
                "SELECT {PG_COLS} FROM deliveries d
                 WHERE tenant_id = $1 AND operation_key = $2 AND channel = $3"
            );
            match sqlx::query(sql(q))
                .bind(tenant)
                .bind(operation_key)
                .bind(channel)
                .fetch_optional(c)
                .await?
            {
                Some(row) => Some(delivery_row!(row)),
                None => None,
            }
        }
    })
}

/// One delivery, optionally only if it belongs to `tenant`; `lock` takes its row lock
/// (PostgreSQL; SQLite's writer already holds the database).
pub async fn delivery_get(
    conn: Conn<'_>,
    tenant: Option<Uuid>,
    id: Uuid,
    lock: bool,
) -> Result<Option<DeliveryRow>, StoreError> {
    Ok(match conn {
        Conn::Sqlite(c) => {
            let q = format!(
                "SELECT {SQLITE_COLS} FROM deliveries WHERE id = ?1 AND (?2 IS NULL OR tenant_id = ?2)"
            );
            match sqlx::query(sql(q)).bind(id).bind(tenant).fetch_optional(c).await? {
                Some(row) => Some(delivery_row!(row)),
                None => None,
            }
        }
        Conn::Postgres(c) => {
            let lock = if lock { "FOR UPDATE" } else { "" };
            let q = format!(
                "SELECT {PG_COLS} FROM deliveries d
                 WHERE id = $1 AND ($2::uuid IS NULL OR tenant_id = $2) {lock}"
            );
            match sqlx::query(sql(q)).bind(id).bind(tenant).fetch_optional(c).await? {
                Some(row) => Some(delivery_row!(row)),
                None => None,
            }
        }
    })
}

/// A delivery's attempts, in order. An attempt's row is written when it ends, except one
/// that ended `sent` under its own lease: that one, like the one in flight, is read from
/// the delivery row (its `attempt_worker`, `attempt_started_at` and, when sent, `sent_at`).
pub async fn delivery_attempts(conn: Conn<'_>, id: Uuid) -> Result<Vec<AttemptRow>, StoreError> {
    macro_rules! attempt_row {
        ($row:expr) => {
            AttemptRow {
                n: $row.try_get("n")?,
                worker: $row.try_get("worker")?,
                started_at: $row.try_get("started_at")?,
                finished_at: $row.try_get("finished_at")?,
                outcome: $row.try_get("outcome")?,
                error_code: $row.try_get("error_code")?,
                error_message: $row.try_get("error_message")?,
            }
        };
    }
    let mut attempts = Vec::new();
    match conn {
        Conn::Sqlite(c) => {
            let rows = sqlx::query(
                "SELECT n, worker, started_at, finished_at, outcome, error_code, error_message
                 FROM delivery_attempts WHERE delivery_id = ?1
                 UNION ALL
                 SELECT d.attempts, d.attempt_worker, d.attempt_started_at,
                     CASE WHEN d.state = 'sent' THEN d.sent_at END,
                     CASE WHEN d.state = 'sent' THEN 'sent' END, NULL, NULL
                 FROM deliveries d WHERE d.id = ?1 AND d.state IN ('sending', 'sent')
                   AND d.attempt_worker IS NOT NULL AND d.attempt_started_at IS NOT NULL
                   AND NOT EXISTS (SELECT 1 FROM delivery_attempts a
                                   WHERE a.delivery_id = d.id AND a.n = d.attempts)
                 ORDER BY n",
            )
            .bind(id)
            .fetch_all(c)
            .await?;
            for row in rows {
                attempts.push(attempt_row!(row));
            }
        }
        Conn::Postgres(c) => {
            let rows = sqlx::query(
                "SELECT n, worker, herald_ms(started_at) AS started_at,
                     herald_ms(finished_at) AS finished_at, outcome, error_code, error_message
                 FROM delivery_attempts WHERE delivery_id = $1
                 UNION ALL
                 SELECT d.attempts, d.attempt_worker, herald_ms(d.attempt_started_at),
                     CASE WHEN d.state = 'sent' THEN herald_ms(d.sent_at) END,
                     CASE WHEN d.state = 'sent' THEN 'sent' END, NULL, NULL
                 FROM deliveries d WHERE d.id = $1 AND d.state IN ('sending', 'sent')
                   AND d.attempt_worker IS NOT NULL AND d.attempt_started_at IS NOT NULL
                   AND NOT EXISTS (SELECT 1 FROM delivery_attempts a
                                   WHERE a.delivery_id = d.id AND a.n = d.attempts)
                 ORDER BY n",
            )
            .bind(id)
            .fetch_all(c)
            .await?;
            for row in rows {
                attempts.push(attempt_row!(row));
            }
        }
    }
    Ok(attempts)
}

/// What to lease.
#[derive(Debug, Clone)]
pub struct Lease<'a> {
    pub worker: &'a str,
    /// Only deliveries of these channels (the ones this process can send).
    pub channels: &'a [String],
    pub limit: usize,
    pub lease: Duration,
    pub now: Option<i64>,
}

/// Leases up to `limit` due deliveries, oldest due first: `sending`, `attempts + 1`, the
/// lease starting now, an attempt row each. On PostgreSQL one statement with
/// `FOR UPDATE SKIP LOCKED`, so concurrent workers never take the same row.
pub async fn deliveries_lease(
    conn: Conn<'_>,
    lease: &Lease<'_>,
) -> Result<Vec<LeasedRow>, StoreError> {
    let lease_ms = lease.lease.as_millis() as i64;
    let limit = lease.limit as i64;
    let mut leased = Vec::new();
    if lease.limit == 0 || lease.channels.is_empty() {
        return Ok(leased);
    }
    match conn {
        Conn::Sqlite(c) => {
            let now = sqlite_now(lease.now);
            let channels = serde_json_array(lease.channels);
            let q = format!(
                "UPDATE deliveries SET state = 'sending', attempts = attempts + 1,
                     lease_owner = ?1, lease_until = ?2 + ?3, updated_at = ?2,
                     attempt_worker = ?1, attempt_started_at = ?2
                 WHERE id IN (
                     SELECT id FROM deliveries
                     WHERE state = 'pending' AND next_attempt_at <= ?2
                       AND channel IN (SELECT value FROM json_each(?4))
                     ORDER BY next_attempt_at LIMIT ?5)
                 RETURNING {SQLITE_COLS}"
            );
            let rows = sqlx::query(sql(q))
                .bind(lease.worker)
                .bind(now)
                .bind(lease_ms)
                .bind(channels)
                .bind(limit)
                .fetch_all(&mut *c)
                .await?;
            let mut deliveries = Vec::with_capacity(rows.len());
            for row in rows {
                deliveries.push(delivery_row!(row));
            }
            deliveries.sort_by_key(|d| (d.next_attempt_at, d.id));
            for delivery in deliveries {
                let payload: String = sqlx::query_scalar(
                    "SELECT payload FROM delivery_payloads WHERE delivery_id = ?1",
                )
                .bind(delivery.id)
                .fetch_one(&mut *c)
                .await?;
                leased.push(LeasedRow { delivery, payload });
            }
        }
        Conn::Postgres(c) => {
            let q = format!(
                "WITH due AS (
                     SELECT id FROM deliveries
                     WHERE state = 'pending' AND next_attempt_at <= herald_now($1)
                       AND channel = ANY($2)
                     ORDER BY next_attempt_at
                     LIMIT $3
                     FOR UPDATE SKIP LOCKED),
                 leased AS (
                     UPDATE deliveries u SET state = 'sending', attempts = u.attempts + 1,
                         lease_owner = $4,
                         lease_until = herald_now($1) + $5 * interval '1 millisecond',
                         updated_at = herald_now($1), attempt_worker = $4,
                         attempt_started_at = herald_now($1)
                     -- An array, not a join: a join on the CTE is planned as a hash
                     -- join over a scan of every delivery, ever (O(history) per lease).
                     WHERE u.id = ANY(ARRAY(SELECT id FROM due))
                     RETURNING u.*)
                 SELECT {PG_COLS},
                     (SELECT p.payload::text FROM delivery_payloads p WHERE p.delivery_id = d.id)
                         AS payload
                 FROM leased d
                 ORDER BY d.next_attempt_at, d.id"
            );
            let rows = sqlx::query(sql(q))
                .bind(lease.now)
                .bind(lease.channels)
                .bind(limit)
                .bind(lease.worker)
                .bind(lease_ms)
                .fetch_all(c)
                .await?;
            for row in rows {
                let payload: String = row.try_get("payload")?;
                leased.push(LeasedRow { delivery: delivery_row!(row), payload });
            }
        }
    }
    Ok(leased)
}

fn serde_json_array(items: &[String]) -> String {
    let quoted: Vec<String> = items
        .iter()
        .map(|s| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    format!("[{}]", quoted.join(","))
}

/// Extends a live lease (heartbeat). `false` when the attempt no longer holds it.
pub async fn delivery_lease_extend(
    conn: Conn<'_>,
    id: Uuid,
    worker: &str,
    n: i32,
    lease: Duration,
    now: Option<i64>,
) -> Result<bool, StoreError> {
    let lease_ms = lease.as_millis() as i64;
    let n = match conn {
        Conn::Sqlite(c) => sqlx::query(
            "UPDATE deliveries SET lease_until = ?4 + ?5
             WHERE id = ?1 AND state = 'sending' AND lease_owner = ?2 AND attempts = ?3",
        )
        .bind(id)
        .bind(worker)
        .bind(n)
        .bind(sqlite_now(now))
        .bind(lease_ms)
        .execute(c)
        .await?
        .rows_affected(),
        Conn::Postgres(c) => sqlx::query(
            "UPDATE deliveries SET lease_until = herald_now($4) + $5 * interval '1 millisecond'
             WHERE id = $1 AND state = 'sending' AND lease_owner = $2 AND attempts = $3",
        )
        .bind(id)
        .bind(worker)
        .bind(n)
        .bind(now)
        .bind(lease_ms)
        .execute(c)
        .await?
        .rows_affected(),
    };
    Ok(n == 1)
}

/// Hands back a lease whose send never started (shutdown): `pending` again, the attempt
/// un-spent and its row removed. `false` when the attempt no longer holds the lease.
pub async fn delivery_hand_back(
    conn: Conn<'_>,
    id: Uuid,
    worker: &str,
    n: i32,
) -> Result<bool, StoreError> {
    let handed = match conn {
        Conn::Sqlite(c) => {
            let n_rows = sqlx::query(
                "UPDATE deliveries SET state = 'pending', attempts = attempts - 1,
                     lease_owner = NULL, lease_until = NULL, attempt_worker = NULL,
                     attempt_started_at = NULL
                 WHERE id = ?1 AND state = 'sending' AND lease_owner = ?2 AND attempts = ?3",
            )
            .bind(id)
            .bind(worker)
            .bind(n)
            .execute(&mut *c)
            .await?
            .rows_affected();
            if n_rows == 1 {
                // (Rows an older herald wrote at lease time; see below.)
                sqlx::query("DELETE FROM delivery_attempts WHERE delivery_id = ?1 AND n = ?2")
                    .bind(id)
                    .bind(n)
                    .execute(&mut *c)
                    .await?;
            }
            n_rows == 1
        }
        Conn::Postgres(c) => {
            // (An attempt's row is written when it ends, so a handed-back one has none;
            // the delete covers rows an older herald wrote at lease time.)
            sqlx::query_scalar::<_, i64>(
                "WITH back AS (
                     UPDATE deliveries SET state = 'pending', attempts = attempts - 1,
                         lease_owner = NULL, lease_until = NULL, attempt_worker = NULL,
                         attempt_started_at = NULL
                     WHERE id = $1 AND state = 'sending' AND lease_owner = $2 AND attempts = $3
                     RETURNING id),
                 gone AS (DELETE FROM delivery_attempts a USING back
                          WHERE a.delivery_id = back.id AND a.n = $3)
                 SELECT count(*) FROM back",
            )
            .bind(id)
            .bind(worker)
            .bind(n)
            .fetch_one(c)
            .await?
                == 1
        }
    };
    Ok(handed)
}

/// An outcome to apply to attempt `n` of a delivery.
#[derive(Debug, Clone)]
pub struct Finish<'a> {
    pub id: Uuid,
    /// The attempt's worker (for `Lost`: the lease owner the reconciler saw).
    pub worker: &'a str,
    pub n: i32,
    pub report: Report,
    /// Provider's Retry-After, for a transient outcome.
    pub retry_after: Option<Duration>,
    pub retry: RetryPolicy,
    /// A random unit in [0, 1] for the backoff's jitter.
    pub jitter: f64,
    pub error_code: Option<&'a str>,
    pub error_message: Option<&'a str>,
    pub now: Option<i64>,
}

/// Applies an outcome: reads the row (locked), decides by the fencing rules, writes the
/// state, the attempt row and the ledger movement. `None` when the delivery is gone.
pub async fn delivery_finish(
    mut conn: Conn<'_>,
    finish: &Finish<'_>,
) -> Result<Option<Decision>, StoreError> {
    let Some(row) = delivery_get(conn.reborrow(), None, finish.id, true).await? else {
        return Ok(None);
    };
    let now_ms = match &conn {
        Conn::Sqlite(_) => Some(sqlite_now(finish.now)),
        Conn::Postgres(_) => finish.now,
    };
    // Only the reconciler's `Lost` depends on expiry; a worker's own outcome does not, so
    // it costs no extra round trip to the database clock.
    let lease_expired = match (row.lease_until, now_ms) {
        (_, _) if finish.report != Report::Lost => false,
        (Some(until), Some(now)) => until <= now,
        (Some(_), None) => lease_expired_by_db(conn.reborrow(), finish.id).await?,
        (None, _) => false,
    };
    let current = Current {
        state: row.state,
        lease_owner: row.lease_owner.as_deref(),
        attempts: row.attempts.max(0) as u32,
        attempts_base: row.attempts_base.max(0) as u32,
        max_attempts: row.max_attempts.max(1) as u32,
        lease_expired,
    };
    let decision = decide(&current, finish.worker, finish.n.max(0) as u32, finish.report);
    let attempts_used = row.attempts.saturating_sub(row.attempts_base).max(1) as u32;
    let message = finish.error_message;
    match decision {
        Decision::MarkSent { stale } => {
            let own = !stale;
            set_state(conn.reborrow(), finish.id, DeliveryState::Sent, None, None, own, finish.now)
                .await?;
            if row.cost > 0 && row.state.holds_reservation() {
                quota_settle(
                    conn.reborrow(),
                    row.tenant_id,
                    &row.quota_key,
                    row.cost,
                    row.id,
                    row.reservation_seq,
                    Settle::Commit,
                    finish.now,
                )
                .await?;
            }
        }
        Decision::Requeue { .. } => {
            let delay = finish.retry.delay(attempts_used, finish.retry_after, finish.jitter);
            set_state(
                conn.reborrow(),
                finish.id,
                DeliveryState::Pending,
                Some(delay),
                message,
                false,
                finish.now,
            )
            .await?;
        }
        Decision::Fail { .. } => {
            let failed = DeliveryState::Failed;
            set_state(conn.reborrow(), finish.id, failed, None, message, false, finish.now).await?;
            if row.cost > 0 {
                quota_settle(
                    conn.reborrow(),
                    row.tenant_id,
                    &row.quota_key,
                    row.cost,
                    row.id,
                    row.reservation_seq,
                    Settle::Release,
                    finish.now,
                )
                .await?;
            }
        }
        Decision::RecordSentAgain | Decision::RecordLateSent | Decision::Ignore => {}
    }
    // An attempt that ended `sent` under its own lease is read from the delivery row (its
    // worker, start and `sent_at`); a repeated `sent` from it changes nothing either.
    let own_attempt =
        row.attempts == finish.n && row.attempt_worker.as_deref() == Some(finish.worker);
    let on_row = match decision {
        Decision::MarkSent { stale } => !stale,
        Decision::RecordSentAgain => own_attempt && row.state == DeliveryState::Sent,
        _ => false,
    };
    if let (Some(outcome), false) = (decision.attempt_outcome(), on_row) {
        // The current attempt started when it was leased; an older attempt's row normally
        // exists already.
        let started =
            (row.attempts == finish.n).then_some(row.attempt_started_at.unwrap_or(row.updated_at));
        attempt_close(conn, finish, outcome.as_str(), started).await?;
    }
    Ok(Some(decision))
}

async fn lease_expired_by_db(conn: Conn<'_>, id: Uuid) -> Result<bool, StoreError> {
    Ok(match conn {
        Conn::Sqlite(_) => false,
        Conn::Postgres(c) => sqlx::query_scalar::<_, Option<bool>>(
            "SELECT lease_until <= now() FROM deliveries WHERE id = $1",
        )
        .bind(id)
        .fetch_one(c)
        .await?
        .unwrap_or(false),
    })
}

/// Moves a delivery to `state`, clearing the lease. `delay` sets the next attempt time;
/// `error` the last error. `own_sent`: the current attempt ended `sent` under its own lease,
/// so the row keeps standing for it; any other move clears `attempt_worker` (the start is
/// kept: a row written later for that attempt still starts when it was leased).
async fn set_state(
    conn: Conn<'_>,
    id: Uuid,
    state: DeliveryState,
    delay: Option<Duration>,
    error: Option<&str>,
    own_sent: bool,
    now: Option<i64>,
) -> Result<(), StoreError> {
    let delay_ms = delay.map(|d| d.as_millis() as i64);
    let error = error.map(truncate_error);
    match conn {
        Conn::Sqlite(c) => {
            let now = sqlite_now(now);
            sqlx::query(
                "UPDATE deliveries SET state = ?2, lease_owner = NULL, lease_until = NULL,
                     next_attempt_at = CASE WHEN ?3 IS NULL THEN next_attempt_at ELSE ?4 + ?3 END,
                     last_error = CASE WHEN ?2 = 'sent' THEN NULL ELSE coalesce(?5, last_error) END,
                     sent_at = CASE WHEN ?2 = 'sent' THEN ?4 ELSE sent_at END,
                     updated_at = ?4,
                     attempt_worker = CASE WHEN ?6 THEN attempt_worker END
                 WHERE id = ?1",
            )
            .bind(id)
            .bind(state.as_str())
            .bind(delay_ms)
            .bind(now)
            .bind(error)
            .bind(own_sent)
            .execute(c)
            .await?;
        }
        Conn::Postgres(c) => {
            sqlx::query(
                "UPDATE deliveries SET state = $2, lease_owner = NULL, lease_until = NULL,
                     next_attempt_at = CASE WHEN $3::bigint IS NULL THEN next_attempt_at
                         ELSE herald_now($4) + $3 * interval '1 millisecond' END,
                     last_error = CASE WHEN $2 = 'sent' THEN NULL ELSE coalesce($5, last_error) END,
                     sent_at = CASE WHEN $2 = 'sent' THEN herald_now($4) ELSE sent_at END,
                     updated_at = herald_now($4),
                     attempt_worker = CASE WHEN $6 THEN attempt_worker END
                 WHERE id = $1",
            )
            .bind(id)
            .bind(state.as_str())
            .bind(delay_ms)
            .bind(now)
            .bind(error)
            .bind(own_sent)
            .execute(c)
            .await?;
        }
    }
    Ok(())
}

fn truncate_error(message: &str) -> String {
    let max = herald_core::limits::ERROR_MESSAGE_LEN_MAX;
    if message.len() <= max {
        return message.to_string();
    }
    let mut end = max;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message[..end].to_string()
}

/// Writes attempt `n`'s row when it ends (or rewrites the outcome of one already ended, as
/// a late `sent` after `lost` does). `started` is when it was leased, if known (else its
/// end).
async fn attempt_close(
    conn: Conn<'_>,
    f: &Finish<'_>,
    outcome: &str,
    started: Option<i64>,
) -> Result<(), StoreError> {
    let message = f.error_message.map(truncate_error);
    match conn {
        Conn::Sqlite(c) => {
            let now = sqlite_now(f.now);
            sqlx::query(
                "INSERT INTO delivery_attempts (delivery_id, n, worker, started_at, finished_at,
                     outcome, error_code, error_message)
                 VALUES (?1, ?2, ?7, coalesce(?8, ?3), ?3, ?4, ?5, ?6)
                 ON CONFLICT (delivery_id, n) DO UPDATE SET finished_at = excluded.finished_at,
                     outcome = excluded.outcome, error_code = excluded.error_code,
                     error_message = excluded.error_message",
            )
            .bind(f.id)
            .bind(f.n)
            .bind(now)
            .bind(outcome)
            .bind(f.error_code)
            .bind(message)
            .bind(f.worker)
            .bind(started)
            .execute(c)
            .await?;
        }
        Conn::Postgres(c) => {
            sqlx::query(
                "INSERT INTO delivery_attempts (delivery_id, n, worker, started_at, finished_at,
                     outcome, error_code, error_message)
                 VALUES ($1, $2, $7, coalesce(herald_ts($8), herald_now($3)), herald_now($3),
                     $4, $5, $6)
                 ON CONFLICT (delivery_id, n) DO UPDATE SET finished_at = excluded.finished_at,
                     outcome = excluded.outcome, error_code = excluded.error_code,
                     error_message = excluded.error_message",
            )
            .bind(f.id)
            .bind(f.n)
            .bind(f.now)
            .bind(outcome)
            .bind(f.error_code)
            .bind(message)
            .bind(f.worker)
            .bind(started)
            .execute(c)
            .await?;
        }
    }
    Ok(())
}

/// A lease the reconciler found expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExpiredLease {
    pub id: Uuid,
    pub lease_owner: String,
    pub attempts: i32,
}

/// Deliveries `sending` whose lease has expired by the deciding clock, oldest first.
pub async fn deliveries_expired(
    conn: Conn<'_>,
    now: Option<i64>,
    limit: usize,
) -> Result<Vec<ExpiredLease>, StoreError> {
    let rows = match conn {
        Conn::Sqlite(c) => {
            sqlx::query(
                "SELECT id, lease_owner, attempts FROM deliveries
                 WHERE state = 'sending' AND lease_until <= ?1 ORDER BY lease_until LIMIT ?2",
            )
            .bind(sqlite_now(now))
            .bind(limit as i64)
            .fetch_all(c)
            .await?
            .into_iter()
            .map(|r| Ok(ExpiredLease { id: r.try_get(0)?, lease_owner: r.try_get(1)?, attempts: r.try_get(2)? }))
            .collect::<Result<Vec<_>, sqlx::Error>>()?
        }
        Conn::Postgres(c) => sqlx::query(
            "SELECT id, lease_owner, attempts FROM deliveries
             WHERE state = 'sending' AND lease_until <= herald_now($1) ORDER BY lease_until LIMIT $2",
        )
        .bind(now)
        .bind(limit as i64)
        .fetch_all(c)
        .await?
        .into_iter()
        .map(|r| Ok(ExpiredLease { id: r.try_get(0)?, lease_owner: r.try_get(1)?, attempts: r.try_get(2)? }))
        .collect::<Result<Vec<_>, sqlx::Error>>()?,
    };
    Ok(rows)
}

/// Leases `worker` holds that have not expired by the deciding clock, as (id, attempt),
/// at most `limit`. A worker compares them with the leases it knows of to find those
/// taken by a lease statement whose COMMIT it never heard back from.
pub async fn deliveries_leased_by(
    conn: Conn<'_>,
    worker: &str,
    now: Option<i64>,
    limit: usize,
) -> Result<Vec<(Uuid, i32)>, StoreError> {
    Ok(match conn {
        Conn::Sqlite(c) => {
            sqlx::query_as(
                "SELECT id, attempts FROM deliveries
                 WHERE state = 'sending' AND lease_owner = ?1 AND lease_until > ?2 LIMIT ?3",
            )
            .bind(worker)
            .bind(sqlite_now(now))
            .bind(limit as i64)
            .fetch_all(c)
            .await?
        }
        Conn::Postgres(c) => {
            sqlx::query_as(
                "SELECT id, attempts FROM deliveries
                 WHERE state = 'sending' AND lease_owner = $1 AND lease_until > herald_now($2)
                 LIMIT $3",
            )
            .bind(worker)
            .bind(now)
            .bind(limit as i64)
            .fetch_all(c)
            .await?
        }
    })
}

/// Age in milliseconds of the oldest pending delivery that is due.
pub async fn oldest_due_age_ms(
    conn: Conn<'_>,
    now: Option<i64>,
) -> Result<Option<i64>, StoreError> {
    Ok(match conn {
        Conn::Sqlite(c) => {
            let now = sqlite_now(now);
            sqlx::query_scalar::<_, Option<i64>>(
                "SELECT ?1 - min(next_attempt_at) FROM deliveries
                 WHERE state = 'pending' AND next_attempt_at <= ?1",
            )
            .bind(now)
            .fetch_one(c)
            .await?
        }
        Conn::Postgres(c) => {
            sqlx::query_scalar::<_, Option<i64>>(
                "SELECT herald_ms(herald_now($1)) - herald_ms(min(next_attempt_at)) FROM deliveries
             WHERE state = 'pending' AND next_attempt_at <= herald_now($1)",
            )
            .bind(now)
            .fetch_one(c)
            .await?
        }
    })
}

/// What a replay or a cancel did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Done(Box<DeliveryRow>),
    NotFound,
    /// The delivery is in a state that does not allow it.
    WrongState(DeliveryState),
    /// Replay only: not enough quota on this key for the new reservation.
    QuotaExhausted(String),
}

/// Replays a `failed` or `cancelled` delivery: the same row goes back to `pending`, takes
/// reservation `seq + 1`, and gets a fresh attempt budget (attempt numbers keep counting).
pub async fn delivery_replay(
    mut conn: Conn<'_>,
    tenant: Uuid,
    id: Uuid,
    now: Option<i64>,
) -> Result<Change, StoreError> {
    let Some(row) = delivery_get(conn.reborrow(), Some(tenant), id, true).await? else {
        return Ok(Change::NotFound);
    };
    if !row.state.can_replay() {
        return Ok(Change::WrongState(row.state));
    }
    let seq = row.reservation_seq + 1;
    if row.cost > 0
        && !quota_reserve(conn.reborrow(), tenant, &row.quota_key, row.cost, id, seq, now).await?
    {
        return Ok(Change::QuotaExhausted(row.quota_key));
    }
    match conn.reborrow() {
        Conn::Sqlite(c) => {
            let now = sqlite_now(now);
            sqlx::query(
                "UPDATE deliveries SET state = 'pending', reservation_seq = ?2,
                     attempts_base = attempts, next_attempt_at = ?3, last_error = NULL,
                     sent_at = NULL, updated_at = ?3
                 WHERE id = ?1",
            )
            .bind(id)
            .bind(seq)
            .bind(now)
            .execute(&mut *c)
            .await?;
            sqlx::query("INSERT INTO delivery_replays (delivery_id, reservation_seq, at) VALUES (?1, ?2, ?3)")
                .bind(id)
                .bind(seq)
                .bind(now)
                .execute(&mut *c)
                .await?;
        }
        Conn::Postgres(c) => {
            sqlx::query(
                "WITH r AS (
                     UPDATE deliveries SET state = 'pending', reservation_seq = $2,
                         attempts_base = attempts, next_attempt_at = herald_now($3),
                         last_error = NULL, sent_at = NULL, updated_at = herald_now($3)
                     WHERE id = $1 RETURNING id)
                 INSERT INTO delivery_replays (delivery_id, reservation_seq, at)
                 SELECT id, $2, herald_now($3) FROM r",
            )
            .bind(id)
            .bind(seq)
            .bind(now)
            .execute(c)
            .await?;
        }
    }
    let row = delivery_get(conn, Some(tenant), id, false).await?;
    Ok(row.map(|r| Change::Done(Box::new(r))).unwrap_or(Change::NotFound))
}

/// Cancels a `pending` delivery and releases its reservation.
pub async fn delivery_cancel(
    mut conn: Conn<'_>,
    tenant: Uuid,
    id: Uuid,
    now: Option<i64>,
) -> Result<Change, StoreError> {
    let Some(row) = delivery_get(conn.reborrow(), Some(tenant), id, true).await? else {
        return Ok(Change::NotFound);
    };
    if !row.state.can_cancel() {
        return Ok(Change::WrongState(row.state));
    }
    set_state(conn.reborrow(), id, DeliveryState::Cancelled, None, None, false, now).await?;
    if row.cost > 0 {
        quota_settle(
            conn.reborrow(),
            tenant,
            &row.quota_key,
            row.cost,
            id,
            row.reservation_seq,
            Settle::Release,
            now,
        )
        .await?;
    }
    let row = delivery_get(conn, Some(tenant), id, false).await?;
    Ok(row.map(|r| Change::Done(Box::new(r))).unwrap_or(Change::NotFound))
}

/// A page of a tenant's deliveries, newest first (ids are UUIDv7: id order is creation
/// order), after the keyset position `before` (exclusive).
pub async fn deliveries_list(
    conn: Conn<'_>,
    tenant: Uuid,
    state: Option<DeliveryState>,
    channel: Option<&str>,
    before: Option<Uuid>,
    limit: usize,
) -> Result<Vec<DeliveryRow>, StoreError> {
    let state = state.map(DeliveryState::as_str);
    let mut rows = Vec::new();
    match conn {
        Conn::Sqlite(c) => {
            let q = format!(
                "SELECT {SQLITE_COLS} FROM deliveries
                 WHERE tenant_id = ?1 AND (?2 IS NULL OR state = ?2) AND (?3 IS NULL OR channel = ?3)
                   AND (?4 IS NULL OR id < ?4)
                 ORDER BY id DESC LIMIT ?5"
            );
            for row in sqlx::query(sql(q))
                .bind(tenant)
                .bind(state)
                .bind(channel)
                .bind(before)
                .bind(limit as i64)
                .fetch_all(c)
                .await?
            {
                rows.push(delivery_row!(row));
            }
        }
        Conn::Postgres(c) => {
            let q = format!(
                "SELECT {PG_COLS} FROM deliveries d
                 WHERE tenant_id = $1 AND ($2::text IS NULL OR state = $2)
                   AND ($3::text IS NULL OR channel = $3) AND ($4::uuid IS NULL OR id < $4)
                 ORDER BY id DESC LIMIT $5"
            );
            for row in sqlx::query(sql(q))
                .bind(tenant)
                .bind(state)
                .bind(channel)
                .bind(before)
                .bind(limit as i64)
                .fetch_all(c)
                .await?
            {
                rows.push(delivery_row!(row));
            }
        }
    }
    Ok(rows)
}

/// Deletes up to `limit` final deliveries (sent, failed, cancelled) last updated before
/// `cutoff` (ms), with their payloads, attempts and replay records, and receipts older
/// than `cutoff`. Returns (deliveries, receipts) deleted. The ledger journal is kept: it
/// is the account's history, not the delivery's.
pub async fn retention_prune(
    conn: Conn<'_>,
    cutoff: i64,
    limit: usize,
) -> Result<(u64, u64), StoreError> {
    Ok(match conn {
        Conn::Sqlite(c) => {
            let d = sqlx::query(
                "DELETE FROM deliveries WHERE id IN (
                     SELECT id FROM deliveries
                     WHERE state IN ('sent', 'failed', 'cancelled') AND updated_at < ?1 LIMIT ?2)",
            )
            .bind(cutoff)
            .bind(limit as i64)
            .execute(&mut *c)
            .await?
            .rows_affected();
            let r = sqlx::query(
                "DELETE FROM receipts WHERE rowid IN (SELECT rowid FROM receipts WHERE created_at < ?1 LIMIT ?2)",
            )
            .bind(cutoff)
            .bind(limit as i64)
            .execute(&mut *c)
            .await?
            .rows_affected();
            (d, r)
        }
        Conn::Postgres(c) => {
            let d = sqlx::query(
                "DELETE FROM deliveries WHERE id IN (
                     SELECT id FROM deliveries
                     WHERE state IN ('sent', 'failed', 'cancelled') AND updated_at < herald_ts($1)
                     LIMIT $2 FOR UPDATE SKIP LOCKED)",
            )
            .bind(cutoff)
            .bind(limit as i64)
            .execute(&mut *c)
            .await?
            .rows_affected();
            let r = sqlx::query(
                "DELETE FROM receipts WHERE ctid IN (
                     SELECT ctid FROM receipts WHERE created_at < herald_ts($1) LIMIT $2)",
            )
            .bind(cutoff)
            .bind(limit as i64)
            .execute(&mut *c)
            .await?
            .rows_affected();
            (d, r)
        }
    })
}

/// Deliveries per state, for the metrics gauges (refreshed periodically, not per scrape).
pub async fn deliveries_count_by_state(conn: Conn<'_>) -> Result<Vec<(String, i64)>, StoreError> {
    const SQL: &str = "SELECT state, count(*) FROM deliveries GROUP BY state";
    let rows: Vec<(String, i64)> = match conn {
        Conn::Sqlite(c) => sqlx::query_as(SQL).fetch_all(c).await?,
        Conn::Postgres(c) => sqlx::query_as(SQL).fetch_all(c).await?,
    };
    Ok(rows)
}

/// The common case, set-based (PostgreSQL): every `(id, n)` whose attempt `n` of `worker`
/// still holds the lease and reported `sent` becomes `sent` in one statement — state,
/// reservation committed per account with one journal row per delivery; the attempt
/// stays on the delivery row (no `delivery_attempts` row, see `delivery_attempts`). Returns the `(id, n)` it marked; the others are unchanged and the caller sends
/// them through `delivery_finish`, which decides the stale cases. Only the first `(id, n)`
/// of an id is considered (a worker can hold a stale and a new attempt of one delivery):
/// later ones are never marked here. Per delivery, the same result
/// as `delivery_finish` with `Report::Sent` on a fenced attempt. On SQLite (no writing
/// CTEs) the same as a few in-process statements per delivery and one update per account.
///
/// Lock the quota rows first with `quota_lock` (in a stable order), or two concurrent
/// batches over the same tenants can deadlock.
pub async fn deliveries_sent_fenced(
    conn: Conn<'_>,
    worker: &str,
    attempts: &[(Uuid, i32)],
    now: Option<i64>,
) -> Result<Vec<(Uuid, i32)>, StoreError> {
    let mut seen = std::collections::HashSet::with_capacity(attempts.len());
    let attempts: Vec<(Uuid, i32)> =
        attempts.iter().copied().filter(|(id, _)| seen.insert(*id)).collect();
    if attempts.is_empty() {
        return Ok(Vec::new());
    }
    let c = match conn {
        Conn::Postgres(c) => c,
        Conn::Sqlite(c) => {
            return sent_fenced_sqlite(c, worker, &attempts, sqlite_now(now)).await;
        }
    };
    let (ids, ns): (Vec<Uuid>, Vec<i32>) = attempts.into_iter().unzip();
    // The rows come through the primary key (`id = ANY`), and each row's attempt is looked
    // up by its position in the arrays: a join with `unnest` let the planner pick a nested
    // loop over every pair (O(batch²)) or a scan of the whole table, by the statistics of
    // the moment. The lease owner implies `sending` (a table constraint), so the state is
    // not tested again — which also keeps the planner off the partial `sending` index.
    let sent: Vec<(Uuid, i32)> = sqlx::query_as(
        "WITH d AS (
             UPDATE deliveries u SET state = 'sent', lease_owner = NULL, lease_until = NULL,
                 last_error = NULL, sent_at = herald_now($4), updated_at = herald_now($4)
             WHERE u.id = ANY($1) AND u.lease_owner = $3
               AND u.attempts = ($2::int4[])[array_position($1::uuid[], u.id)]
             RETURNING u.id, u.tenant_id, u.quota_key, u.cost, u.reservation_seq, u.attempts),
         s AS (SELECT tenant_id, quota_key, sum(cost)::bigint AS cost FROM d WHERE cost > 0
               GROUP BY tenant_id, quota_key),
         a AS (UPDATE quota_accounts q SET reserved = q.reserved - s.cost,
                   spent = q.spent + s.cost, updated_at = herald_now($4)
               FROM s WHERE q.tenant_id = s.tenant_id AND q.quota_key = s.quota_key),
         j AS (INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, delivery_id,
                   reservation_seq, at)
               SELECT d.tenant_id, d.quota_key, 'commit', d.cost, d.id, d.reservation_seq,
                   herald_now($4)
               FROM d WHERE d.cost > 0)
         SELECT id, attempts FROM d",
    )
    .bind(ids)
    .bind(ns)
    .bind(worker)
    .bind(now)
    .fetch_all(c)
    .await?;
    Ok(sent)
}

async fn sent_fenced_sqlite(
    c: &mut sqlx::SqliteConnection,
    worker: &str,
    attempts: &[(Uuid, i32)],
    now: i64,
) -> Result<Vec<(Uuid, i32)>, StoreError> {
    let mut marked = Vec::with_capacity(attempts.len());
    let mut accounts = std::collections::BTreeMap::<(Uuid, String), i64>::new();
    for (id, n) in attempts {
        let row: Option<(Uuid, String, i64, i32)> = sqlx::query_as(
            "UPDATE deliveries SET state = 'sent', lease_owner = NULL, lease_until = NULL,
                 last_error = NULL, sent_at = ?4, updated_at = ?4
             WHERE id = ?1 AND state = 'sending' AND lease_owner = ?2 AND attempts = ?3
             RETURNING tenant_id, quota_key, cost, reservation_seq",
        )
        .bind(id)
        .bind(worker)
        .bind(n)
        .bind(now)
        .fetch_optional(&mut *c)
        .await?;
        let Some((tenant, quota_key, cost, seq)) = row else { continue };
        if cost > 0 {
            journal_insert_sqlite(c, tenant, &quota_key, "commit", cost, *id, seq, now).await?;
            *accounts.entry((tenant, quota_key)).or_default() += cost;
        }
        marked.push((*id, *n));
    }
    for ((tenant, quota_key), cost) in accounts {
        sqlx::query(SQLITE_ACCOUNT_COMMIT)
            .bind(tenant)
            .bind(quota_key)
            .bind(cost)
            .bind(now)
            .execute(&mut *c)
            .await?;
    }
    Ok(marked)
}
