//! Holds (`herald_holds`; herald_core::hold says what they mean): the scopes an operator
//! stopped, and the pending deliveries they hold. A held delivery stays `pending` with its
//! `next_attempt_at` at [`HELD_DUE_MS`] — past every time herald accepts, so no lease and no
//! scan of the due index meets it — and `held_due_at` keeping when it was due; releasing
//! puts that back. Its attempts and its reservation do not change.

use crate::conn::Conn;
use crate::error::StoreError;
use herald_core::hold::{HoldKind, HoldScope};
use sqlx::types::Uuid;

/// Where a held delivery's `next_attempt_at` waits: 9999-12-30T12:00:00Z in Unix ms, past
/// the latest `send_at` herald takes and within what a timestamp holds.
pub const HELD_DUE_MS: i64 = 253_402_171_200_000;

/// One hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HoldRow {
    pub id: i64,
    pub scope: HoldScope,
    pub created_ms: i64,
    /// Who placed it (`admin`, `tenant:<key id>`, `operator`).
    pub actor: String,
}

/// A value bound into a hold's scope condition.
#[derive(Debug, Clone)]
pub(crate) enum Bind {
    Text(String),
    Uuid(Uuid),
}

/// The condition on `deliveries` that selects a scope's rows, with its binds, placeholders
/// numbered from `first` by `ph`. A destination's webhooks are matched on their URL's
/// start (`LIKE … ESCAPE '!'`); a URL that hides its host another way (userinfo) is found
/// by the worker instead, which holds what it leases in a held scope — so releasing
/// (`broad`) takes every held webhook of the scope's tenants: one still held by another
/// hold is held again when leased.
pub(crate) fn scope_condition(
    scope: &HoldScope,
    first: usize,
    ph: fn(usize) -> String,
    broad: bool,
) -> (String, Vec<Bind>) {
    let mut binds = Vec::new();
    let next = |b: Bind, binds: &mut Vec<Bind>| {
        binds.push(b);
        ph(first + binds.len() - 1)
    };
    let mut cond = match scope.kind {
        HoldKind::Channel => {
            format!("channel = {}", next(Bind::Text(scope.value.clone()), &mut binds))
        }
        HoldKind::Tenant => match scope.value.parse::<Uuid>() {
            Ok(tenant) => format!("tenant_id = {}", next(Bind::Uuid(tenant), &mut binds)),
            Err(_) => "1 = 0".to_string(),
        },
        HoldKind::Destination if scope.value == "smtp" => "channel = 'email'".to_string(),
        HoldKind::Destination if broad => {
            let other = next(Bind::Text(scope.value.clone()), &mut binds);
            format!("(channel = 'webhook' OR (channel <> 'email' AND channel = {other}))")
        }
        HoldKind::Destination => {
            let host = scope.value.replace('!', "!!").replace('%', "!%").replace('_', "!_");
            let mut parts = Vec::new();
            for scheme in ["http://", "https://"] {
                let exact = next(Bind::Text(format!("{scheme}{}", scope.value)), &mut binds);
                parts.push(format!("lower(recipient) = {exact}"));
                for after in ["/", ":", "?", "#"] {
                    let p = next(Bind::Text(format!("{scheme}{host}{after}%")), &mut binds);
                    parts.push(format!("lower(recipient) LIKE {p} ESCAPE '!'"));
                }
            }
            let other = next(Bind::Text(scope.value.clone()), &mut binds);
            format!(
                "((channel = 'webhook' AND ({})) OR (channel NOT IN ('webhook', 'email') AND channel = {other}))",
                parts.join(" OR ")
            )
        }
    };
    if let Some(tenant) = scope.tenant {
        cond = format!("{cond} AND tenant_id = {}", next(Bind::Uuid(tenant), &mut binds));
    }
    (cond, binds)
}

/// `*` or the tenant's id: a scope's key in the unique index.
pub(crate) fn scope_key(scope: &HoldScope) -> String {
    scope.tenant.map_or_else(|| "*".to_string(), |t| t.to_string())
}

pub(crate) type HoldTuple = (i64, String, String, Option<Uuid>, i64, String);

pub(crate) fn hold_row((id, kind, value, tenant, created_ms, actor): HoldTuple) -> Option<HoldRow> {
    let kind = HoldKind::parse(&kind)?;
    Some(HoldRow { id, scope: HoldScope { kind, value, tenant }, created_ms, actor })
}

/// A backend's statements: `exists` and `delete` (kind, value, scope_key), `insert` (kind,
/// value, tenant_id, scope_key, created_ms, actor; a concurrent insert of the same scope
/// affects no row, or fails on MariaDB, which has no DO NOTHING),
/// `list`, `hold` and `release` (UPDATEs ending in `AND ` before the scope's condition),
/// `hold_leased` (id, worker, attempt), and the placeholder of parameter n.
pub(crate) struct HoldSql {
    pub exists: &'static str,
    pub insert: &'static str,
    pub delete: &'static str,
    pub list: &'static str,
    pub hold: &'static str,
    pub release: &'static str,
    pub hold_leased: &'static str,
    pub ph: fn(usize) -> String,
}

/// A backend's functions of this module over its connection type and its [`HoldSql`].
macro_rules! holds_fns {
    ($conn:ty, $sql:expr) => {
        use crate::error::StoreError;
        use crate::holds::{Bind, HoldRow, HoldTuple, hold_row, scope_condition, scope_key};
        use herald_core::hold::HoldScope;
        use sqlx::types::Uuid;

        pub(crate) async fn hold_add(
            c: &mut $conn,
            scope: &HoldScope,
            created_ms: i64,
            actor: &str,
        ) -> Result<(bool, u64), StoreError> {
            let existed: Option<i64> = sqlx::query_scalar($sql.exists)
                .bind(scope.kind.as_str())
                .bind(&scope.value)
                .bind(scope_key(scope))
                .fetch_optional(&mut *c)
                .await?;
            if existed.is_some() {
                return Ok((false, scoped(c, $sql.hold, scope, false).await?));
            }
            let added = sqlx::query($sql.insert)
                .bind(scope.kind.as_str())
                .bind(&scope.value)
                .bind(scope.tenant)
                .bind(scope_key(scope))
                .bind(created_ms)
                .bind(actor)
                .execute(&mut *c)
                .await?
                .rows_affected();
            let held = scoped(c, $sql.hold, scope, false).await?;
            Ok((added == 1, held))
        }

        pub(crate) async fn hold_remove(
            c: &mut $conn,
            scope: &HoldScope,
        ) -> Result<(bool, u64), StoreError> {
            let removed = sqlx::query($sql.delete)
                .bind(scope.kind.as_str())
                .bind(&scope.value)
                .bind(scope_key(scope))
                .execute(&mut *c)
                .await?
                .rows_affected();
            let released = scoped(c, $sql.release, scope, true).await?;
            Ok((removed == 1, released))
        }

        pub(crate) async fn holds_list(c: &mut $conn) -> Result<Vec<HoldRow>, StoreError> {
            let rows: Vec<HoldTuple> = sqlx::query_as($sql.list).fetch_all(c).await?;
            Ok(rows.into_iter().filter_map(hold_row).collect())
        }

        pub(crate) async fn delivery_hold_leased(
            c: &mut $conn,
            id: Uuid,
            worker: &str,
            n: i32,
        ) -> Result<bool, StoreError> {
            let q = sqlx::query($sql.hold_leased).bind(id).bind(worker).bind(n);
            Ok(q.execute(c).await?.rows_affected() == 1)
        }

        /// Runs `update` (which ends in `AND `) on the scope's rows: how many changed.
        async fn scoped(
            c: &mut $conn,
            update: &str,
            scope: &HoldScope,
            broad: bool,
        ) -> Result<u64, StoreError> {
            let (cond, binds) = scope_condition(scope, 1, $sql.ph, broad);
            let text = format!("{update}{cond}");
            let mut q = sqlx::query(sqlx::AssertSqlSafe(text));
            for b in binds {
                q = match b {
                    Bind::Text(t) => q.bind(t),
                    Bind::Uuid(u) => q.bind(u),
                };
            }
            Ok(q.execute(c).await?.rows_affected())
        }
    };
}
pub(crate) use holds_fns;

/// Holds `scope` (`false`: it was held already) and its pending deliveries: how many.
pub async fn hold_add(
    conn: Conn<'_>,
    scope: &HoldScope,
    created_ms: i64,
    actor: &str,
) -> Result<(bool, u64), StoreError> {
    crate::per_backend!(conn, holds::hold_add(scope, created_ms, actor))
}

/// Releases `scope` (`false`: it was not held) and the deliveries it may have held, due
/// again when they were due: how many. One still in another held scope is held again when
/// a worker leases it.
pub async fn hold_remove(conn: Conn<'_>, scope: &HoldScope) -> Result<(bool, u64), StoreError> {
    crate::per_backend!(conn, holds::hold_remove(scope))
}

/// Every hold, oldest first.
pub async fn holds_list(conn: Conn<'_>) -> Result<Vec<HoldRow>, StoreError> {
    crate::per_backend!(conn, holds::holds_list())
}

/// A delivery `worker` leased (attempt `n`) in a held scope: `pending` again, held, the
/// attempt un-spent. `false` when the lease is no longer that one.
pub async fn delivery_hold_leased(
    conn: Conn<'_>,
    id: Uuid,
    worker: &str,
    n: i32,
) -> Result<bool, StoreError> {
    crate::per_backend!(conn, holds::delivery_hold_leased(id, worker, n))
}
