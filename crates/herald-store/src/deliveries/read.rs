//! Reads: one delivery, its attempts, a tenant's pages, queue health.

use super::{AttemptRow, DeliveryRow};
use crate::clock::Now;
use crate::conn::Conn;
use crate::error::StoreError;
use herald_core::DeliveryState;
use sqlx::types::Uuid;

/// The delivery with this identity.
pub async fn delivery_by_identity(
    conn: Conn<'_>,
    tenant: Uuid,
    operation_key: &str,
    channel: &str,
) -> Result<Option<DeliveryRow>, StoreError> {
    crate::per_backend!(conn, read::delivery_by_identity(tenant, operation_key, channel))
}

/// One delivery, optionally only if it belongs to `tenant`; `lock` takes its row lock for
/// the rest of the transaction (PostgreSQL; SQLite's writer already holds the database).
pub async fn delivery_get(
    conn: Conn<'_>,
    tenant: Option<Uuid>,
    id: Uuid,
    lock: bool,
) -> Result<Option<DeliveryRow>, StoreError> {
    crate::per_backend!(conn, read::delivery_get(tenant, id, lock))
}

/// A delivery's attempts, in order. An attempt's row is written when it ends, except one
/// that ended `sent` under its own lease: that one, like the one in flight, is read from
/// the delivery row (its `attempt_worker`, `attempt_started_at` and, when sent, `sent_at`).
pub async fn delivery_attempts(conn: Conn<'_>, id: Uuid) -> Result<Vec<AttemptRow>, StoreError> {
    crate::per_backend!(conn, read::delivery_attempts(id))
}

/// Which of a tenant's deliveries a page lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListFilter<'a> {
    /// `None`: every tenant's (the admin's incident console).
    pub tenant: Option<Uuid>,
    pub state: Option<DeliveryState>,
    pub channel: Option<&'a str>,
    /// The keyset position: only ids before this one (exclusive).
    pub before: Option<Uuid>,
    /// Only ids from this one on (inclusive). Ids are UUIDv7, so id order is creation
    /// order: a caller turns a creation time into an id bound.
    pub from: Option<Uuid>,
    /// Only deliveries whose latest attempt ended with this error code.
    pub error_code: Option<&'a str>,
    /// Only operation keys that start with this.
    pub key_prefix: Option<&'a str>,
    /// Only recipients that start with this (a webhook URL's scheme and host, a path).
    pub to_prefix: Option<&'a str>,
    /// Only deliveries that failed at or after this time (Unix ms).
    pub failed_since: Option<i64>,
    pub limit: usize,
}

/// A value [`list_where`] binds.
#[derive(Debug, Clone, Copy)]
pub(crate) enum ListBind<'a> {
    Uuid(Uuid),
    Text(&'a str),
    Int(i64),
}

/// How a backend writes [`list_where`]'s conditions: its placeholder of parameter n, and
/// "column starts with" given as many placeholders of the prefix as it needs.
pub(crate) struct ListDialect {
    pub ph: fn(usize) -> String,
    /// A placeholder holding Unix ms as the backend's time.
    pub time: fn(String) -> String,
    pub starts_with: fn(&str, &[String]) -> String,
    pub prefix_binds: usize,
}

/// A backend's `deliveries_list` over its connection type, its column list and its
/// [`ListDialect`]: the one body every backend runs.
macro_rules! deliveries_list_fn {
    ($conn:ty, $cols:expr, $dialect:expr) => {
        pub(crate) async fn deliveries_list(
            c: &mut $conn,
            f: &crate::deliveries::ListFilter<'_>,
        ) -> Result<Vec<crate::deliveries::DeliveryRow>, crate::error::StoreError> {
            let dialect: crate::deliveries::ListDialect = $dialect;
            let (clause, binds) = crate::deliveries::list_where(f, &dialect);
            let limit = (dialect.ph)(binds.len() + 1);
            let q = format!(
                "SELECT {} FROM deliveries d WHERE {clause} ORDER BY d.id DESC LIMIT {limit}",
                $cols
            );
            let mut query = sqlx::query(sqlx::AssertSqlSafe(q));
            for b in binds {
                query = match b {
                    crate::deliveries::ListBind::Uuid(u) => query.bind(u),
                    crate::deliveries::ListBind::Text(t) => query.bind(t),
                    crate::deliveries::ListBind::Int(n) => query.bind(n),
                };
            }
            let rows = query.bind(f.limit as i64).fetch_all(c).await?;
            let mut page = Vec::with_capacity(rows.len());
            for row in rows {
                page.push(crate::deliveries::delivery_row!(row));
            }
            Ok(page)
        }
    };
}
pub(crate) use deliveries_list_fn;

/// The WHERE clause of a page (`TRUE` when nothing narrows it) and its binds in order:
/// only the filters given, so each backend plans the statement it runs (a tenant's page
/// reads its (tenant, id) index; every tenant's, the primary key).
pub(crate) fn list_where<'a>(f: &ListFilter<'a>, d: &ListDialect) -> (String, Vec<ListBind<'a>>) {
    let mut conds = Vec::new();
    let mut binds = Vec::new();
    let next = |b: ListBind<'a>, binds: &mut Vec<ListBind<'a>>| {
        binds.push(b);
        (d.ph)(binds.len())
    };
    if let Some(t) = f.tenant {
        conds.push(format!("d.tenant_id = {}", next(ListBind::Uuid(t), &mut binds)));
    }
    if let Some(s) = f.state {
        conds.push(format!("d.state = {}", next(ListBind::Text(s.as_str()), &mut binds)));
    }
    if let Some(c) = f.channel {
        conds.push(format!("d.channel = {}", next(ListBind::Text(c), &mut binds)));
    }
    if let Some(b) = f.before {
        conds.push(format!("d.id < {}", next(ListBind::Uuid(b), &mut binds)));
    }
    if let Some(from) = f.from {
        conds.push(format!("d.id >= {}", next(ListBind::Uuid(from), &mut binds)));
    }
    if let Some(code) = f.error_code {
        conds.push(format!(
            "EXISTS (SELECT 1 FROM delivery_attempts a
                     WHERE a.delivery_id = d.id AND a.n = d.attempts AND a.error_code = {})",
            next(ListBind::Text(code), &mut binds)
        ));
    }
    if let Some(since) = f.failed_since {
        let at = (d.time)(next(ListBind::Int(since), &mut binds));
        conds.push(format!("d.state = 'failed' AND d.updated_at >= {at}"));
    }
    for (column, prefix) in [("d.operation_key", f.key_prefix), ("d.recipient", f.to_prefix)] {
        if let Some(p) = prefix {
            let phs: Vec<String> =
                (0..d.prefix_binds).map(|_| next(ListBind::Text(p), &mut binds)).collect();
            conds.push((d.starts_with)(column, &phs));
        }
    }
    let clause = if conds.is_empty() { "TRUE".to_string() } else { conds.join(" AND ") };
    (clause, binds)
}

/// A page of a tenant's deliveries, newest first (ids are UUIDv7: id order is creation
/// order).
pub async fn deliveries_list(
    conn: Conn<'_>,
    filter: &ListFilter<'_>,
) -> Result<Vec<DeliveryRow>, StoreError> {
    crate::per_backend!(conn, read::deliveries_list(filter))
}

/// Age in milliseconds of the oldest pending delivery that is due by `now`.
pub async fn oldest_due_age_ms(conn: Conn<'_>, now: Now) -> Result<Option<i64>, StoreError> {
    crate::per_backend!(conn, read::oldest_due_age_ms(now))
}

/// Deliveries per state, for the metrics gauges. A state this build does not know is an
/// error that names it.
pub async fn deliveries_count_by_state(
    conn: Conn<'_>,
) -> Result<Vec<(DeliveryState, i64)>, StoreError> {
    let rows: Vec<(String, i64)> = crate::per_backend!(conn, read::deliveries_count_by_state())?;
    rows.into_iter()
        .map(|(state, n)| {
            let state = state.parse().map_err(|e: herald_core::state::UnknownState| {
                StoreError::Database(sqlx::Error::Decode(e.into()))
            })?;
            Ok((state, n))
        })
        .collect()
}

/// Which of a tenant's deliveries a selection takes (bulk replay and cancel): every given
/// filter applies. Ids are UUIDv7, so an id range is a creation-time range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelectFilter<'a> {
    pub tenant: Uuid,
    pub state: Option<DeliveryState>,
    pub channel: Option<&'a str>,
    /// Only ids from this one on (inclusive).
    pub from: Option<Uuid>,
    /// Only ids before this one (exclusive).
    pub to: Option<Uuid>,
    /// Only deliveries whose latest attempt (its row in `delivery_attempts`, `n` =
    /// the delivery's `attempts`) ended with this error code. An attempt in flight, or one
    /// that ended `sent` under its own lease, has no row: it never matches.
    pub error_code: Option<&'a str>,
    /// The keyset position: only ids after this one (exclusive).
    pub after: Option<Uuid>,
    pub limit: usize,
}

/// The ids of the tenant's deliveries that match `filter`, ascending, at most `limit`.
/// A plain read: no row is locked (the caller pages through with `after` and handles each
/// id in a transaction of its own).
///
/// The id bounds (`from`, `to`, `after`) reach the backend as one inclusive range, always
/// bound, so every backend reads it as a range of its (tenant, id) index.
pub async fn deliveries_select(
    conn: Conn<'_>,
    filter: &SelectFilter<'_>,
) -> Result<Vec<Selected>, StoreError> {
    let Some((low, high)) = id_range(filter) else { return Ok(Vec::new()) };
    let rows: Vec<(Uuid, String, String)> =
        crate::per_backend!(conn, read::deliveries_select(filter, low, high))?;
    Ok(rows
        .into_iter()
        .map(|(id, channel, recipient)| Selected { id, channel, recipient })
        .collect())
}

/// A delivery [`deliveries_select`] matched, with what its destination is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    pub id: Uuid,
    pub channel: String,
    pub recipient: String,
}

/// `filter`'s id bounds as one inclusive range (`None`: empty). `after` (exclusive) is its
/// successor, inclusive; `to` (exclusive) its predecessor.
fn id_range(filter: &SelectFilter<'_>) -> Option<(Uuid, Uuid)> {
    let mut low = filter.from.map_or(0, |from| from.as_u128());
    if let Some(after) = filter.after {
        low = low.max(after.as_u128().checked_add(1)?);
    }
    let high = match filter.to {
        Some(to) => to.as_u128().checked_sub(1)?,
        None => u128::MAX,
    };
    (low <= high).then(|| (Uuid::from_u128(low), Uuid::from_u128(high)))
}

/// Deliveries per (channel, state), of one tenant or of every tenant (`None`), ordered by
/// channel then state (byte order, on every backend). A state this build does not know
/// is an error that names it.
pub async fn deliveries_count_by_channel(
    conn: Conn<'_>,
    tenant: Option<Uuid>,
) -> Result<Vec<(String, DeliveryState, i64)>, StoreError> {
    let rows: Vec<(String, String, i64)> =
        crate::per_backend!(conn, read::deliveries_count_by_channel(tenant))?;
    rows.into_iter()
        .map(|(channel, state, n)| {
            let state = state.parse().map_err(|e: herald_core::state::UnknownState| {
                StoreError::Database(sqlx::Error::Decode(e.into()))
            })?;
            Ok((channel, state, n))
        })
        .collect()
}

/// A delivery's payload as it was submitted (JSON text, byte for byte); `None` when there
/// is no such delivery. Any tenant's: the caller checks the tenant first.
pub async fn delivery_payload(conn: Conn<'_>, id: Uuid) -> Result<Option<String>, StoreError> {
    crate::per_backend!(conn, read::delivery_payload(id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filter(from: Option<u128>, to: Option<u128>, after: Option<u128>) -> SelectFilter<'static> {
        SelectFilter {
            tenant: Uuid::nil(),
            state: None,
            channel: None,
            from: from.map(Uuid::from_u128),
            to: to.map(Uuid::from_u128),
            error_code: None,
            after: after.map(Uuid::from_u128),
            limit: 10,
        }
    }

    fn range(low: u128, high: u128) -> Option<(Uuid, Uuid)> {
        Some((Uuid::from_u128(low), Uuid::from_u128(high)))
    }

    #[test]
    fn the_id_bounds_are_one_inclusive_range() {
        assert_eq!(id_range(&filter(None, None, None)), range(0, u128::MAX));
        assert_eq!(id_range(&filter(Some(5), Some(9), None)), range(5, 8));
        assert_eq!(id_range(&filter(Some(5), None, Some(6))), range(7, u128::MAX));
        assert_eq!(id_range(&filter(Some(5), None, Some(2))), range(5, u128::MAX));
        assert_eq!(id_range(&filter(None, Some(9), Some(7))), range(8, 8));
        assert_eq!(id_range(&filter(None, Some(9), Some(8))), None);
        assert_eq!(id_range(&filter(Some(9), Some(9), None)), None);
        assert_eq!(id_range(&filter(None, Some(0), None)), None);
        assert_eq!(id_range(&filter(None, None, Some(u128::MAX))), None);
    }
}

/// A delivery that is failing: `failed` recently, or `pending` after an attempt, with its
/// latest attempt's error code and end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailingRow {
    pub tenant_id: Uuid,
    pub channel: String,
    pub recipient: String,
    pub state: String,
    pub next_attempt_at: i64,
    pub error_code: Option<String>,
    pub finished_at: Option<i64>,
}

pub(crate) type FailingTuple = (Uuid, String, String, String, i64, Option<String>, Option<i64>);

pub(crate) fn failing_row(t: FailingTuple) -> FailingRow {
    let (tenant_id, channel, recipient, state, next_attempt_at, error_code, finished_at) = t;
    FailingRow { tenant_id, channel, recipient, state, next_attempt_at, error_code, finished_at }
}

/// How a backend spells [`deliveries_failing`]'s statement: a time column as Unix ms, the
/// optional tenant, the window's start and the limit (numbered placeholders are bound once,
/// `?` ones at each place, `positional`).
pub(crate) struct FailingDialect {
    pub ms: fn(&str) -> String,
    pub tenant: &'static str,
    pub since: &'static str,
    pub limit: &'static str,
    pub positional: bool,
}

/// A backend's `deliveries_failing` over its connection type and its [`FailingDialect`].
macro_rules! deliveries_failing_fn {
    ($conn:ty, $dialect:expr) => {
        pub(crate) async fn deliveries_failing(
            c: &mut $conn,
            tenant: Option<Uuid>,
            since_ms: i64,
            limit: i64,
        ) -> Result<Vec<crate::deliveries::FailingTuple>, StoreError> {
            let d: crate::deliveries::FailingDialect = $dialect;
            let part = |state_and_order: &str| {
                format!(
                    "SELECT d.tenant_id, d.channel, d.recipient, d.state, {} AS next_ms,
                         a.error_code, {} AS finished_ms
                     FROM deliveries d
                     LEFT JOIN delivery_attempts a ON a.delivery_id = d.id AND a.n = d.attempts
                     WHERE {} AND {state_and_order} LIMIT {}",
                    (d.ms)("d.next_attempt_at"),
                    (d.ms)("a.finished_at"),
                    d.tenant,
                    d.limit
                )
            };
            let failed = format!(
                "d.state = 'failed' AND d.updated_at >= {} ORDER BY d.updated_at DESC",
                d.since
            );
            let q = format!(
                "SELECT * FROM ({}) f UNION ALL SELECT * FROM ({}) p",
                part(&failed),
                part("d.state = 'pending' AND d.attempts > 0 ORDER BY d.next_attempt_at"),
            );
            let q = sqlx::query_as(sqlx::AssertSqlSafe(q)).bind(tenant).bind(since_ms).bind(limit);
            let q = if d.positional { q.bind(tenant).bind(limit) } else { q };
            Ok(q.fetch_all(c).await?)
        }
    };
}
pub(crate) use deliveries_failing_fn;

/// What the incident console reads: up to `limit` deliveries that failed since
/// `since_ms` (newest first, by the final-state index) and up to `limit` pending ones that
/// have had an attempt (soonest due first, by the due index), of `tenant` or of all. Two
/// bounded index reads, never a scan of history.
pub async fn deliveries_failing(
    conn: Conn<'_>,
    tenant: Option<Uuid>,
    since_ms: i64,
    limit: usize,
) -> Result<Vec<FailingRow>, StoreError> {
    let rows: Vec<FailingTuple> =
        crate::per_backend!(conn, read::deliveries_failing(tenant, since_ms, limit as i64))?;
    Ok(rows.into_iter().map(failing_row).collect())
}
