//! The dashboard's sessions (`herald_ui_sessions`): one row per sign-in, which the signed
//! cookie names. The store keeps the rows; the library decides what is live (its clock,
//! the idle timeout) and the server what a row lets a request do. Times are Unix ms.

use crate::conn::Conn;
use crate::error::StoreError;
use sqlx::types::Uuid;

/// A session's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiSessionRow {
    /// 32 hex characters, random.
    pub id: String,
    /// The tenant of a tenant session; `None` for the admin.
    pub tenant_id: Option<Uuid>,
    /// The API key a tenant session was made from.
    pub key_id: Option<String>,
    pub created_ms: i64,
    /// When a request last used it (written at most once a minute).
    pub seen_ms: i64,
    /// The end of its life, whatever its use.
    pub expires_ms: i64,
    /// When and why it ended (`signed_out`, `revoked`, `replaced`), if it did.
    pub ended: Option<(i64, String)>,
    /// The client's address at sign-in.
    pub address: Option<String>,
    /// The client's `User-Agent` at sign-in, cut to 200 characters.
    pub agent: Option<String>,
    /// A read-only operator's session (`tenant_id` is `None`): it can read what the admin
    /// reads and act on nothing.
    pub viewer: bool,
}

pub(crate) type UiSessionTuple = (
    String,
    Option<Uuid>,
    Option<String>,
    i64,
    i64,
    i64,
    Option<i64>,
    Option<String>,
    Option<String>,
    Option<String>,
    bool,
);

pub(crate) fn ui_session_row(t: UiSessionTuple) -> UiSessionRow {
    let (
        id,
        tenant_id,
        key_id,
        created_ms,
        seen_ms,
        expires_ms,
        ended_ms,
        why,
        address,
        agent,
        viewer,
    ) = t;
    UiSessionRow {
        id,
        tenant_id,
        key_id,
        created_ms,
        seen_ms,
        expires_ms,
        ended: ended_ms.zip(why),
        address,
        agent,
        viewer,
    }
}

/// The statements of a backend, in its placeholders, every parameter bound once and in
/// the order the functions below bind it (so one body serves every backend).
pub(crate) struct UiSessionSql {
    /// id, tenant_id, key_id, created_ms, seen_ms, expires_ms, address, agent, viewer.
    pub insert: &'static str,
    /// id.
    pub get: &'static str,
    /// seen_ms, id.
    pub touch: &'static str,
    /// ended_ms, why, id, tenant (the row's, or any when NULL).
    pub end: &'static str,
    /// now_ms, tenant (or any when NULL), limit.
    pub open: &'static str,
    /// before_ms, limit.
    pub prune: &'static str,
}

/// A backend's functions of this module over its connection type and its [`UiSessionSql`]:
/// the same binds in the same order, the statements its own.
macro_rules! ui_session_fns {
    ($conn:ty, $sql:expr) => {
        use crate::error::StoreError;
        use crate::ui_sessions::{UiSessionRow, UiSessionTuple, ui_session_row};
        use sqlx::types::Uuid;

        pub(crate) async fn ui_session_insert(
            c: &mut $conn,
            row: &UiSessionRow,
        ) -> Result<(), StoreError> {
            sqlx::query($sql.insert)
                .bind(&row.id)
                .bind(row.tenant_id)
                .bind(&row.key_id)
                .bind(row.created_ms)
                .bind(row.seen_ms)
                .bind(row.expires_ms)
                .bind(&row.address)
                .bind(&row.agent)
                .bind(row.viewer)
                .execute(c)
                .await?;
            Ok(())
        }

        pub(crate) async fn ui_session_get(
            c: &mut $conn,
            id: &str,
        ) -> Result<Option<UiSessionRow>, StoreError> {
            let row: Option<UiSessionTuple> =
                sqlx::query_as($sql.get).bind(id).fetch_optional(c).await?;
            Ok(row.map(ui_session_row))
        }

        pub(crate) async fn ui_session_touch(
            c: &mut $conn,
            id: &str,
            seen_ms: i64,
        ) -> Result<(), StoreError> {
            sqlx::query($sql.touch).bind(seen_ms).bind(id).execute(c).await?;
            Ok(())
        }

        pub(crate) async fn ui_session_end(
            c: &mut $conn,
            id: &str,
            tenant: Option<Uuid>,
            ended_ms: i64,
            why: &str,
        ) -> Result<bool, StoreError> {
            let q = sqlx::query($sql.end).bind(ended_ms).bind(why).bind(id).bind(tenant);
            Ok(q.execute(c).await?.rows_affected() == 1)
        }

        pub(crate) async fn ui_sessions_open(
            c: &mut $conn,
            tenant: Option<Uuid>,
            now_ms: i64,
            limit: i64,
        ) -> Result<Vec<UiSessionRow>, StoreError> {
            let q = sqlx::query_as($sql.open).bind(now_ms).bind(tenant).bind(limit);
            let rows: Vec<UiSessionTuple> = q.fetch_all(c).await?;
            Ok(rows.into_iter().map(ui_session_row).collect())
        }

        pub(crate) async fn ui_sessions_prune(
            c: &mut $conn,
            before_ms: i64,
            limit: i64,
        ) -> Result<u64, StoreError> {
            let q = sqlx::query($sql.prune).bind(before_ms).bind(limit);
            Ok(q.execute(c).await?.rows_affected())
        }
    };
}
pub(crate) use ui_session_fns;

/// Writes a new session's row.
pub async fn ui_session_insert(conn: Conn<'_>, row: &UiSessionRow) -> Result<(), StoreError> {
    crate::per_backend!(conn, ui_sessions::ui_session_insert(row))
}

/// The session `id`, ended or not; `None` when there is no such row.
pub async fn ui_session_get(conn: Conn<'_>, id: &str) -> Result<Option<UiSessionRow>, StoreError> {
    crate::per_backend!(conn, ui_sessions::ui_session_get(id))
}

/// Records a use of a session that has not ended.
pub async fn ui_session_touch(conn: Conn<'_>, id: &str, seen_ms: i64) -> Result<(), StoreError> {
    crate::per_backend!(conn, ui_sessions::ui_session_touch(id, seen_ms))
}

/// Ends the session `id` (when it has not ended yet), for `tenant` only when given;
/// whether it did.
pub async fn ui_session_end(
    conn: Conn<'_>,
    id: &str,
    tenant: Option<Uuid>,
    ended_ms: i64,
    why: &str,
) -> Result<bool, StoreError> {
    crate::per_backend!(conn, ui_sessions::ui_session_end(id, tenant, ended_ms, why))
}

/// Sessions that have not ended and expire after `now_ms`, newest first: every one, or a
/// tenant's (`Some`).
pub async fn ui_sessions_open(
    conn: Conn<'_>,
    tenant: Option<Uuid>,
    now_ms: i64,
    limit: i64,
) -> Result<Vec<UiSessionRow>, StoreError> {
    crate::per_backend!(conn, ui_sessions::ui_sessions_open(tenant, now_ms, limit))
}

/// Deletes up to `limit` sessions that expired or ended before `before_ms`; how many.
pub async fn ui_sessions_prune(
    conn: Conn<'_>,
    before_ms: i64,
    limit: i64,
) -> Result<u64, StoreError> {
    crate::per_backend!(conn, ui_sessions::ui_sessions_prune(before_ms, limit))
}
