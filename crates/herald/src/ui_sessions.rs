//! The dashboard's sessions as rows (issue 37, defect 4): a signed cookie alone could not
//! be ended, so a copied one worked for its whole life after sign-out. Each sign-in is a
//! row (`herald_ui_sessions`) that the cookie names; it is over when it is signed out,
//! revoked by an operator, replaced by a new sign-in from the same browser, unused for the
//! idle timeout, or past its life. This module decides which (its clock); the store only
//! keeps the rows.

use crate::error::Error;
use crate::handle::Herald;
use herald_core::TenantId;
use herald_store::ui_sessions::{
    UiSessionRow, ui_session_end, ui_session_get, ui_session_insert, ui_session_touch,
    ui_sessions_open, ui_sessions_prune,
};
use std::time::Duration;

/// How long a session lasts after signing in, however it is used.
pub const UI_SESSION_TTL: Duration = Duration::from_secs(8 * 3600);
/// How long a session may go unused before it is over (the default of `herald serve`'s
/// `HERALD_UI_IDLE_TIMEOUT`).
pub const UI_SESSION_IDLE: Duration = Duration::from_secs(30 * 60);
/// A use is written to the row at most this often (or a quarter of the idle timeout, if
/// that is shorter), so a busy page does not write on every request and the idle timeout
/// is judged to within it.
const TOUCH_EVERY_MS: i64 = 60_000;
/// How long an ended or expired session's row is kept (it is shown nowhere then).
const KEEP_ENDED_MS: i64 = 24 * 3600 * 1000;

/// Why a session ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UiSessionEnd {
    /// Its own user signed out.
    SignedOut,
    /// An operator (the admin, or its tenant) ended it.
    Revoked,
    /// A new sign-in from the same browser took its place.
    Replaced,
}

impl UiSessionEnd {
    fn as_str(self) -> &'static str {
        match self {
            UiSessionEnd::SignedOut => "signed_out",
            UiSessionEnd::Revoked => "revoked",
            UiSessionEnd::Replaced => "replaced",
        }
    }
}

/// A session of the dashboard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UiSession {
    /// Random, 32 hex characters; the cookie names it (signed).
    pub id: String,
    /// A tenant session's tenant and the API key it was made from; `None`: the admin.
    pub tenant: Option<(TenantId, String)>,
    /// Unix milliseconds.
    pub created_at: i64,
    /// The last use written (to within a minute).
    pub seen_at: i64,
    pub expires_at: i64,
    /// The client's address and `User-Agent` at sign-in.
    pub address: Option<String>,
    pub agent: Option<String>,
    /// A read-only operator's session (no tenant): it reads what the admin reads.
    pub viewer: bool,
}

impl UiSession {
    fn from_row(row: UiSessionRow) -> UiSession {
        UiSession {
            id: row.id,
            tenant: row.tenant_id.map(TenantId::from_uuid).zip(row.key_id),
            created_at: row.created_ms,
            seen_at: row.seen_ms,
            expires_at: row.expires_ms,
            address: row.address,
            agent: row.agent,
            viewer: row.viewer,
        }
    }
}

/// Whether a row is a live session at `now`: not ended, not expired, used within `idle`.
fn live(row: &UiSessionRow, now: i64, idle: Duration) -> bool {
    row.ended.is_none() && row.expires_ms > now && row.seen_ms + idle.as_millis() as i64 > now
}

fn new_id() -> Result<String, Error> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::app(format!("no randomness for a session id: {e}")))?;
    Ok(herald_core::hex(&bytes))
}

impl Herald {
    /// Starts a session: the admin's (`tenant` `None`), a read-only operator's (`viewer`,
    /// no tenant) or a tenant's, made from its API key `key_id`. `address` and `agent` are
    /// kept to be shown in the list of sessions.
    pub async fn ui_session_start(
        &self,
        tenant: Option<(TenantId, &str)>,
        viewer: bool,
        address: Option<&str>,
        agent: Option<&str>,
    ) -> Result<UiSession, Error> {
        let now = self.clock().wall_ms();
        let row = UiSessionRow {
            id: new_id()?,
            tenant_id: tenant.map(|(t, _)| t.as_uuid()),
            key_id: tenant.map(|(_, k)| k.to_string()),
            created_ms: now,
            seen_ms: now,
            expires_ms: now + UI_SESSION_TTL.as_millis() as i64,
            ended: None,
            address: address.map(|a| herald_core::ident::shown(a, 64)),
            agent: agent.map(|a| herald_core::ident::shown(a, 200)),
            viewer: viewer && tenant.is_none(),
        };
        let insert = row.clone();
        self.autocommit(|conn, _| {
            let row = insert.clone();
            Box::pin(async move { ui_session_insert(conn, &row).await })
        })
        .await?;
        Ok(UiSession::from_row(row))
    }

    /// The session `id` if it is live — not ended, not past its life, used within `idle` —
    /// recording this use (at most once a minute); `None` otherwise.
    pub async fn ui_session_live(
        &self,
        id: &str,
        idle: Duration,
    ) -> Result<Option<UiSession>, Error> {
        let owned = id.to_string();
        let row = self
            .autocommit(|conn, _| {
                let id = owned.clone();
                Box::pin(async move { ui_session_get(conn, &id).await })
            })
            .await?;
        let now = self.clock().wall_ms();
        let Some(row) = row.filter(|r| live(r, now, idle)) else { return Ok(None) };
        if now - row.seen_ms >= TOUCH_EVERY_MS.min(idle.as_millis() as i64 / 4) {
            let owned = id.to_string();
            self.autocommit(|conn, _| {
                let id = owned.clone();
                Box::pin(async move { ui_session_touch(conn, &id, now).await })
            })
            .await?;
        }
        Ok(Some(UiSession::from_row(row)))
    }

    /// Ends the session `id` — any session, or only one of `tenant`'s when given; whether
    /// it was open.
    pub async fn ui_session_end(
        &self,
        id: &str,
        tenant: Option<TenantId>,
        why: UiSessionEnd,
    ) -> Result<bool, Error> {
        let now = self.clock().wall_ms();
        let owned = id.to_string();
        self.autocommit(|conn, _| {
            let id = owned.clone();
            Box::pin(async move {
                ui_session_end(conn, &id, tenant.map(|t| t.as_uuid()), now, why.as_str()).await
            })
        })
        .await
    }

    /// The live sessions, newest first, at most `limit`: every one, or `tenant`'s.
    pub async fn ui_sessions(
        &self,
        tenant: Option<TenantId>,
        idle: Duration,
        limit: usize,
    ) -> Result<Vec<UiSession>, Error> {
        let now = self.clock().wall_ms();
        let rows = self
            .autocommit(|conn, _| {
                Box::pin(async move {
                    ui_sessions_open(conn, tenant.map(|t| t.as_uuid()), now, limit as i64).await
                })
            })
            .await?;
        Ok(rows.into_iter().filter(|r| live(r, now, idle)).map(UiSession::from_row).collect())
    }

    /// Deletes up to `limit` session rows that ended or expired more than a day ago; how
    /// many (retention runs it).
    pub async fn ui_sessions_prune(&self, limit: usize) -> Result<u64, Error> {
        let before = self.clock().wall_ms() - KEEP_ENDED_MS;
        self.autocommit(|conn, _| {
            Box::pin(async move { ui_sessions_prune(conn, before, limit as i64).await })
        })
        .await
    }
}
