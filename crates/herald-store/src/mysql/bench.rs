//! The bench floor on MariaDB: the least work any engine must do per delivery on herald's
//! tables, hand-written in the fewest statements MariaDB allows (no writing CTEs, no
//! `UPDATE … RETURNING`), in READ COMMITTED as herald's own transactions are. Reached
//! through `crate::bench`, which holds the transactions and the dispatch.

use super::{placeholders, sql};
use crate::clock::MYSQL_NOW_MS;
use crate::error::StoreError;
use sqlx::types::Uuid;
use sqlx::{Connection, MySqlConnection};
use std::collections::BTreeMap;

/// What opens every floor transaction: herald's isolation, then BEGIN, in one round trip.
pub(crate) const FLOOR_BEGIN: &str = "SET TRANSACTION ISOLATION LEVEL READ COMMITTED; BEGIN";

/// Claim, payload, reservation, journal row: four statements inside the caller's
/// transaction (whether the key was new; a duplicate undoes only its own statement).
pub(crate) async fn floor_submit(
    c: &mut MySqlConnection,
    id: Uuid,
    tenant: Uuid,
    stripe: i16,
    operation_key: &str,
) -> Result<bool, StoreError> {
    let claimed = super::inserted(
        sqlx::query(sql(format!(
            "INSERT INTO deliveries (id, tenant_id, operation_key, channel, recipient,
                 fingerprint, quota_key, cost, state, max_attempts, next_attempt_at,
                 created_at, updated_at)
             VALUES (?, ?, ?, 'webhook', 'https://example.com/h', x'00', 'webhook', 1,
                 'pending', 8, {MYSQL_NOW_MS}, {MYSQL_NOW_MS}, {MYSQL_NOW_MS})"
        )))
        .bind(id)
        .bind(tenant)
        .bind(operation_key)
        .execute(&mut *c)
        .await,
    )?;
    if !claimed {
        return Ok(false);
    }
    sqlx::query("INSERT INTO delivery_payloads (delivery_id, payload) VALUES (?, '{}')")
        .bind(id)
        .execute(&mut *c)
        .await?;
    sqlx::query(
        "UPDATE quota_accounts SET available = available - 1, reserved = reserved + 1
         WHERE tenant_id = ? AND quota_key = 'webhook' AND stripe = ? AND available >= 1",
    )
    .bind(tenant)
    .bind(stripe)
    .execute(&mut *c)
    .await?;
    sqlx::query(sql(format!(
        "INSERT INTO quota_journal (tenant_id, quota_key, stripe, kind, amount, delivery_id,
             reservation_seq, at)
         VALUES (?, 'webhook', ?, 'reserve', 1, ?, 1, {MYSQL_NOW_MS})"
    )))
    .bind(tenant)
    .bind(stripe)
    .bind(id)
    .execute(&mut *c)
    .await?;
    Ok(true)
}

/// Up to `limit` due rows of client `part`'s share of the tenants locked with SKIP LOCKED,
/// marked sent, their reservations committed (one statement for every account of the
/// batch) and journalled (one multi-row insert): four statements inside the caller's
/// transaction.
pub(crate) async fn floor_drain(
    c: &mut MySqlConnection,
    limit: i64,
    part: i64,
    parts: i64,
) -> Result<u64, StoreError> {
    let due: Vec<(Uuid, Uuid, i64)> = sqlx::query_as(sql(format!(
        "SELECT id, tenant_id, cost FROM deliveries
         WHERE state = 'pending' AND next_attempt_at <= {MYSQL_NOW_MS}
           AND CRC32(tenant_id) % ? = ?
         ORDER BY next_attempt_at LIMIT ?
         FOR UPDATE SKIP LOCKED"
    )))
    .bind(parts.max(1))
    .bind(part)
    .bind(limit)
    .fetch_all(&mut *c)
    .await?;
    if due.is_empty() {
        return Ok(0);
    }
    let mut mark = sqlx::query(sql(format!(
        "UPDATE deliveries SET state = 'sent', sent_at = {MYSQL_NOW_MS},
             updated_at = {MYSQL_NOW_MS}
         WHERE id IN ({})",
        placeholders(due.len())
    )));
    for (id, _, _) in &due {
        mark = mark.bind(id);
    }
    mark.execute(&mut *c).await?;
    let mut per_tenant = BTreeMap::<Uuid, i64>::new();
    for (_, tenant, cost) in &due {
        *per_tenant.entry(*tenant).or_default() += cost;
    }
    let case = vec!["WHEN ? THEN ?"; per_tenant.len()].join(" ");
    let mut accounts = sqlx::query(sql(format!(
        "UPDATE quota_accounts
         SET reserved = reserved - (CASE tenant_id {case} END),
             spent = spent + (CASE tenant_id {case} END)
         WHERE quota_key = 'webhook' AND stripe = 0 AND tenant_id IN ({})",
        placeholders(per_tenant.len())
    )));
    for _ in 0..2 {
        for (tenant, cost) in &per_tenant {
            accounts = accounts.bind(tenant).bind(cost);
        }
    }
    for tenant in per_tenant.keys() {
        accounts = accounts.bind(tenant);
    }
    accounts.execute(&mut *c).await?;
    let rows = vec![format!("(?, 'webhook', 'commit', ?, ?, 1, {MYSQL_NOW_MS})"); due.len()];
    let mut journal = sqlx::query(sql(format!(
        "INSERT INTO quota_journal (tenant_id, quota_key, kind, amount, delivery_id,
             reservation_seq, at)
         VALUES {}",
        rows.join(", ")
    )));
    for (id, tenant, cost) in &due {
        journal = journal.bind(tenant).bind(cost).bind(id);
    }
    journal.execute(&mut *c).await?;
    Ok(due.len() as u64)
}

pub(crate) async fn count_state(c: &mut MySqlConnection, state: &str) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT CAST(count(*) AS SIGNED) FROM deliveries WHERE state = ?")
        .bind(state)
        .fetch_one(c)
        .await?)
}

/// InnoDB's persistent statistics, refreshed (what the background recalculation would
/// have given a steady-state table).
pub(crate) async fn analyze(c: &mut MySqlConnection) -> Result<(), StoreError> {
    sqlx::raw_sql(
        "ANALYZE TABLE deliveries, delivery_payloads, delivery_attempts, quota_journal,
             quota_accounts",
    )
    .fetch_all(c)
    .await?;
    Ok(())
}

/// Empties the delivery tables. DELETE, not TRUNCATE: TRUNCATE is DDL (an implicit
/// commit) and refuses tables that foreign keys point at.
pub(crate) async fn reset(c: &mut MySqlConnection) -> Result<(), StoreError> {
    sqlx::raw_sql(
        "DELETE FROM delivery_attempts; DELETE FROM delivery_payloads;
         DELETE FROM delivery_replays; DELETE FROM quota_journal; DELETE FROM deliveries;",
    )
    .execute(c)
    .await?;
    Ok(())
}

/// A connection to the server, outside any store, to make and drop the bench's scratch
/// database.
pub(crate) async fn server_connect(url: &str) -> Result<MySqlConnection, StoreError> {
    let options = match crate::url::DbUrl::parse(url)? {
        crate::url::DbUrl::MySql(options) => options,
        _ => return Err(StoreError::InvalidUrl("not a MariaDB URL".into())),
    };
    Ok(MySqlConnection::connect_with(&options).await?)
}

pub(crate) async fn connections_max(c: &mut MySqlConnection) -> Result<i64, StoreError> {
    Ok(sqlx::query_scalar("SELECT CAST(@@max_connections AS SIGNED)").fetch_one(c).await?)
}

pub(crate) async fn version(c: &mut MySqlConnection) -> Result<String, StoreError> {
    Ok(sqlx::query_scalar("SELECT VERSION()").fetch_one(c).await?)
}

/// `url` with its database replaced by `database`.
pub(crate) fn url_with_database(url: &str, database: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("mariadb", url));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let query = path.split_once('?').map(|(_, q)| format!("?{q}")).unwrap_or_default();
    format!("{scheme}://{authority}/{database}{query}")
}
