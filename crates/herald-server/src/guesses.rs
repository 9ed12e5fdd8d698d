//! Failed authentication, limited (issue 37, defect 2). Every key that fails — a bearer
//! key, a dashboard sign-in — counts against the client's address and, when the key names
//! one, against its key id. Past [`FAILURES_ALLOWED`] in a [`WINDOW`], that address or key
//! id is answered 429 `too_many_failures` with `Retry-After` until the window ends,
//! without the key being checked, so guessing runs at a few keys a minute instead of
//! hundreds a second. Every failure is logged (address, key id, never the key) and counted
//! in `herald_auth_failures_total`.
//!
//! Per process and bounded ([`SOURCES_MAX`]): each process behind a balancer keeps its own
//! count, so N processes let N × the allowance through, still minutes per guess for any
//! key worth having. Behind a proxy every client has the proxy's address: the address limit
//! then locks out everyone for a window while someone guesses, which the key-id limit
//! does not (a tenant's key id is public only to its holder).

use crate::error::ApiError;
use axum::http::StatusCode;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Failures a source may have in one window before it is refused.
pub const FAILURES_ALLOWED: u32 = 10;
/// How long a window lasts (and so the longest refusal).
pub const WINDOW: Duration = Duration::from_secs(60);
/// Sources remembered; past it, expired ones go first, then the oldest.
pub const SOURCES_MAX: usize = 10_000;

/// Who failed: the client's address, a key id.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Source {
    Address(IpAddr),
    KeyId(String),
}

/// The failure counts of this process.
#[derive(Debug, Default)]
pub struct Guesses(Mutex<HashMap<Source, (u32, Instant)>>);

impl Guesses {
    /// 429 when any of `sources` is past its allowance in its current window.
    pub fn check(&self, sources: &[Source]) -> Result<(), ApiError> {
        let map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let wait = sources
            .iter()
            .filter_map(|s| map.get(s))
            .filter(|(n, since)| *n >= FAILURES_ALLOWED && since.elapsed() < WINDOW)
            .map(|(_, since)| WINDOW.saturating_sub(since.elapsed()))
            .max();
        match wait {
            Some(wait) => Err(too_many(wait)),
            None => Ok(()),
        }
    }

    /// One failed authentication by `sources`, at `face` (`api`, `ui`): counted, logged.
    pub fn failed(&self, sources: &[Source], face: &'static str) {
        metrics::counter!("herald_auth_failures_total", "face" => face).increment(1);
        let address = sources.iter().find_map(|s| match s {
            Source::Address(a) => Some(a.to_string()),
            Source::KeyId(_) => None,
        });
        let key_id = sources.iter().find_map(|s| match s {
            Source::KeyId(k) => Some(k.as_str()),
            Source::Address(_) => None,
        });
        tracing::warn!(face, address, key_id, "authentication failed");
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= SOURCES_MAX {
            map.retain(|_, (_, since)| since.elapsed() < WINDOW);
            if map.len() >= SOURCES_MAX
                && let Some(oldest) =
                    map.iter().min_by_key(|(_, (_, at))| *at).map(|(s, _)| s.clone())
            {
                map.remove(&oldest);
            }
        }
        for source in sources {
            let entry = map.entry(source.clone()).or_insert((0, Instant::now()));
            if entry.1.elapsed() >= WINDOW {
                *entry = (0, Instant::now());
            }
            entry.0 = entry.0.saturating_add(1);
        }
    }
}

fn too_many(wait: Duration) -> ApiError {
    let secs = wait.as_secs().max(1);
    ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "too_many_failures",
        format!("too many failed keys from this client or for this key; retry in {secs} s"),
    )
    .retry_after(secs)
}
