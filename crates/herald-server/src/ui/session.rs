//! The dashboard's sessions. Signing in exchanges a key (the admin key, or a tenant's API
//! key) for a cookie: HttpOnly (the page's script cannot read it), SameSite=Strict (no
//! other site's request carries it). Where the browser keeps Secure cookies — the request
//! arrived over HTTPS (`X-Forwarded-Proto: https` from the proxy in front) or names a
//! loopback host — it is `__Host-herald_ui`: Secure, Path=/, no Domain, so a page on a
//! sibling subdomain cannot set one that shadows it ("cookie tossing"). Elsewhere (plain
//! HTTP to another name) it is `herald_ui`, Path=/ui. A request carrying more than one
//! session cookie, of either name, is refused as `session_cookie_conflict` with what to
//! do, never read as the first one (which let a tossed cookie lock an operator out, or
//! swap them into another tenant). The key itself is never kept: not in the cookie, not
//! in the page.
//!
//! Each sign-in is a row (`Herald::ui_session_start`, issue 37 defect 4) that the cookie
//! names: `v2.<session id>.<mac>`, the MAC an HMAC-SHA256 under the server's own random
//! secret, kept in the database (`Herald::ui_session_secret`), so every server on it
//! accepts the sessions of the others, and a row's id alone (the admin sees them listed)
//! forges nothing. The secret is never derived from a credential: under HMAC(admin key, a
//! constant), as it once was, a tenant holding its own cookie could guess the admin key
//! offline and forge an admin session. `herald settings rotate-session-secret` replaces
//! it, which ends every session (a running server reads it again within
//! `SETTINGS_REFRESH`). A session is over when its user signs out, when an operator ends
//! it (the admin any, a tenant its own: `GET`/`DELETE /ui/api/sessions`), when a new
//! sign-in from the same browser replaces it, when it goes unused for the idle timeout
//! (`HERALD_UI_IDLE_TIMEOUT`), and [`SESSION_TTL`] after signing in. A tenant session
//! names the API key it was made from, and each request checks that key is still
//! unrevoked: revoking it ends the session.
//!
//! CSRF: every state-changing call must carry `X-Herald-CSRF`, a second MAC of the cookie
//! that only the page (reading it from `GET /ui/api/session`, same origin) can learn; a
//! browser's cross-site request can neither set the header nor read the token. A request
//! that a browser marks cross-site (`Sec-Fetch-Site`) or whose `Origin` is not this host
//! is refused as well, the sign-in included.

use crate::error::ApiError;
use crate::hosts::AllowedHosts;
use crate::keys;
use crate::state::AppState;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, StatusCode, header};
use axum::response::AppendHeaders;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a session lasts after signing in.
pub const SESSION_TTL: Duration = herald::UI_SESSION_TTL;

/// The session cookie where the browser keeps Secure cookies (HTTPS, loopback).
pub const COOKIE: &str = "__Host-herald_ui";
/// The session cookie over plain HTTP to a name that is not loopback.
pub const COOKIE_PLAIN: &str = "herald_ui";
pub const CSRF_HEADER: &str = "x-herald-csrf";

/// The secret sessions are signed with: a snapshot of [`SessionKeys`].
#[derive(Clone)]
pub struct SessionKey([u8; 32]);

impl std::fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKey(***)")
    }
}

/// The database's session secret as this process last read it, read again at most
/// [`herald::SETTINGS_REFRESH`] later (so a rotation reaches every process within that).
#[derive(Clone, Default)]
pub struct SessionKeys(Arc<Mutex<Option<(SessionKey, Instant)>>>);

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKeys(***)")
    }
}

impl SessionKeys {
    /// The secret to sign and verify with now.
    pub async fn current(&self, herald: &herald::Herald) -> Result<SessionKey, ApiError> {
        {
            let cached = self.0.lock().unwrap_or_else(|p| p.into_inner());
            if let Some((key, at)) = cached.as_ref()
                && at.elapsed() < herald::SETTINGS_REFRESH
            {
                return Ok(key.clone());
            }
        }
        let key = SessionKey(herald.ui_session_secret().await?);
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some((key.clone(), Instant::now()));
        Ok(key)
    }
}

impl SessionKey {
    /// The CSRF token of the session whose cookie is `value`.
    pub fn csrf_of(&self, value: &str) -> String {
        self.mac(b"csrf\0", value)
    }

    fn usable(&self) -> bool {
        self.0 != [0u8; 32]
    }

    fn mac(&self, purpose: &[u8], text: &str) -> String {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(hmac(&self.0, &[purpose, text.as_bytes()]))
    }
}

/// HMAC-SHA256 of the concatenated parts.
fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // HMAC takes a key of any length: `new_from_slice` cannot fail.
    let Ok(mut mac) = <Hmac<Sha256> as Mac>::new_from_slice(key) else { return [0u8; 32] };
    for part in parts {
        mac.update(part);
    }
    mac.finalize().into_bytes().into()
}

/// Who a session is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Who {
    /// The admin key: every tenant.
    Admin,
    /// The viewer key: reads every tenant, acts on nothing.
    Viewer,
    /// A tenant's API key (its id, so a revocation ends the session): that tenant only.
    Tenant { tenant: herald::TenantId, key_id: String },
}

/// A verified session.
#[derive(Debug, Clone)]
pub struct Session {
    /// Its row's id.
    pub id: String,
    pub who: Who,
    /// The anti-CSRF token for this session.
    pub csrf: String,
}

/// The cookie value naming the session `id`.
pub fn issue(key: &SessionKey, id: &str) -> Option<String> {
    if !key.usable() {
        return None;
    }
    let body = format!("v2.{id}");
    let mac = key.mac(b"session\0", &body);
    Some(format!("{body}.{mac}"))
}

/// The session id a cookie value names, if we signed it. (A `v1` cookie, signed but
/// stored nowhere, could not be ended: it is no longer a session.)
fn verify(key: &SessionKey, value: &str) -> Option<String> {
    if !key.usable() || value.len() > 512 {
        return None;
    }
    let (body, mac) = value.rsplit_once('.')?;
    if !keys::same(key.mac(b"session\0", body).as_bytes(), mac.as_bytes()) {
        return None;
    }
    let id = body.strip_prefix("v2.")?;
    (id.len() == 32 && id.bytes().all(|b| b.is_ascii_hexdigit())).then(|| id.to_string())
}

/// The id of the session a request's cookie names, if it is one we signed (live or not);
/// an error when the request carries conflicting session cookies.
pub async fn named(headers: &HeaderMap, state: &AppState) -> Result<Option<String>, ApiError> {
    let Some(value) = cookie(headers)? else { return Ok(None) };
    let key = state.session_keys.current(&state.herald).await?;
    Ok(verify(&key, value))
}

/// The session cookie's value in a request: none, or exactly one of either name.
fn cookie(headers: &HeaderMap) -> Result<Option<&str>, ApiError> {
    let mut found = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(name, _)| *name == COOKIE || *name == COOKIE_PLAIN)
        .map(|(_, value)| value);
    let first = found.next();
    let more = found.count();
    if more > 0 {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "session_cookie_conflict",
            format!(
                "this request carries {} herald session cookies: another page on this \
                 domain or host set one. Clear this site's cookies, sign in again, and serve \
                 the dashboard on a host name of its own",
                more + 1
            ),
        ));
    }
    Ok(first)
}

/// Whether the browser keeps a Secure cookie for this request: over HTTPS (as the proxy
/// in front says), or to a loopback host, which browsers treat as a secure context.
fn secure_context(headers: &HeaderMap) -> bool {
    let https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|p| p.eq_ignore_ascii_case("https"));
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    https || crate::hosts::is_loopback_host(host)
}

/// Whether a browser says the request came from another site, or names another origin
/// than this host's or `HERALD_PUBLIC_URL`'s.
pub fn cross_site(headers: &HeaderMap, hosts: &AllowedHosts) -> bool {
    let fetch_site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if matches!(fetch_site, Some("cross-site" | "same-site")) {
        return true;
    }
    let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    if hosts.is_public_origin(origin) {
        return false;
    }
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or("");
    let origin_host = origin.split_once("://").map_or("", |(_, rest)| rest);
    origin == "null" || origin_host != host
}

/// The `Set-Cookie` headers for a new session, or for ending one (`None`): this
/// context's cookie, and the other name's expired — so a session from the other context
/// (an older herald's `herald_ui` on a loopback host) is not left to conflict with it.
pub fn set_cookies(
    value: Option<&str>,
    headers: &HeaderMap,
) -> AppendHeaders<[(HeaderName, String); 2]> {
    let secure = secure_context(headers);
    let (value, age) = match value {
        Some(v) => (v, SESSION_TTL.as_secs()),
        None => ("", 0),
    };
    let cookie = |secure: bool, value: &str, age: u64| {
        let (name, path, flag) =
            if secure { (COOKIE, "/", "; Secure") } else { (COOKIE_PLAIN, "/ui", "") };
        format!("{name}={value}; HttpOnly; SameSite=Strict; Path={path}; Max-Age={age}{flag}")
    };
    AppendHeaders([
        (header::SET_COOKIE, cookie(secure, value, age)),
        (header::SET_COOKIE, cookie(!secure, "", 0)),
    ])
}

fn signed_out() -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", "sign in first")
}

/// The request's session: signed by us, live (not ended, not idle, not expired), and (a
/// tenant's) made from a key that is still valid.
pub async fn from_parts(parts: &Parts, state: &AppState) -> Result<Session, ApiError> {
    let value = cookie(&parts.headers)?.ok_or_else(signed_out)?;
    let key = state.session_keys.current(&state.herald).await?;
    let id = verify(&key, value).ok_or_else(signed_out)?;
    let row = state.herald.ui_session_live(&id, state.ui_idle).await?.ok_or_else(signed_out)?;
    let who = match row.tenant {
        None if row.viewer => Who::Viewer,
        None => Who::Admin,
        Some((tenant, key_id)) => {
            let parsed = herald::KeyId::parse(&key_id).ok_or_else(signed_out)?;
            match state.herald.api_key(&parsed).await? {
                Some(k) if !k.revoked && k.tenant_id == tenant.as_uuid() => {}
                _ => return Err(signed_out()),
            }
            Who::Tenant { tenant, key_id }
        }
    };
    Ok(Session { csrf: key.csrf_of(value), id, who })
}

/// For a state-changing call: the session, with its CSRF token presented and the request
/// not cross-site.
pub async fn for_action(parts: &Parts, state: &AppState) -> Result<Session, ApiError> {
    let session = from_parts(parts, state).await?;
    let presented = parts.headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok()).unwrap_or("");
    if cross_site(&parts.headers, &state.allowed_hosts)
        || !keys::same(presented.as_bytes(), session.csrf.as_bytes())
    {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "csrf",
            "this action needs the page's X-Herald-CSRF token",
        ));
    }
    Ok(session)
}

#[cfg(test)]
#[allow(clippy::panic, clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_cookie_is_verified_only_as_issued() {
        let key = SessionKey([7; 32]);
        let id = "0123456789abcdef0123456789abcdef";
        let value = issue(&key, id).unwrap();
        assert_eq!(verify(&key, &value).as_deref(), Some(id));
        assert!(verify(&SessionKey([8; 32]), &value).is_none(), "another secret");
        let edited = value.replacen("01234", "01235", 1);
        assert!(verify(&key, &edited).is_none(), "an edited cookie");
        let other = issue(&key, "ffffffffffffffffffffffffffffffff").unwrap();
        assert_ne!(key.csrf_of(&other), key.csrf_of(&value), "one token per session");
        assert!(issue(&SessionKey([0; 32]), id).is_none(), "no secret, no session");
        for bad in ["", "v2.", "v2.xyz", "v2.0123456789abcdef0123456789abcdeg"] {
            let signed = format!("{bad}.{}", key.mac(b"session\0", bad));
            assert!(verify(&key, &signed).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn a_v1_cookie_is_no_longer_a_session() {
        // Signed but stored nowhere, it could not be ended: refused even when intact.
        let key = SessionKey([7; 32]);
        let body = "v1.a.99999999999.nonce";
        let value = format!("{body}.{}", key.mac(b"session\0", body));
        assert!(verify(&key, &value).is_none());
    }

    #[test]
    fn cross_site_requests_are_recognised() {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, "herald.example:8080".parse().unwrap());
        assert!(
            !cross_site(&h, &AllowedHosts::default()),
            "no Origin: a same-origin GET or a non-browser client"
        );
        h.insert(header::ORIGIN, "http://herald.example:8080".parse().unwrap());
        assert!(!cross_site(&h, &AllowedHosts::default()));
        h.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
        assert!(cross_site(&h, &AllowedHosts::default()));
        h.insert(header::ORIGIN, "null".parse().unwrap());
        assert!(cross_site(&h, &AllowedHosts::default()));
        h.remove(header::ORIGIN);
        h.insert("sec-fetch-site", "cross-site".parse().unwrap());
        assert!(cross_site(&h, &AllowedHosts::default()));
    }
}
