//! What every handler shares.

use herald::Herald;
use std::collections::BTreeSet;
use std::sync::Arc;

#[derive(Clone)]
pub struct AppState {
    pub herald: Herald,
    /// SHA-256 of `HERALD_ADMIN_KEY`; `None` disables the admin calls (403).
    pub admin_key_sha256: Option<[u8; 32]>,
    /// SHA-256 of `HERALD_VIEWER_KEY`: a dashboard session that reads what the admin reads
    /// and acts on nothing; `None`: no such sign-in.
    pub viewer_key_sha256: Option<[u8; 32]>,
    /// `HERALD_METRICS_TOKEN`: when set, `/metrics` needs `Authorization: Bearer <token>`.
    pub metrics_token_sha256: Option<[u8; 32]>,
    /// Channels this deployment delivers; a submit for any other is a 400.
    pub channels: Arc<BTreeSet<String>>,
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    /// `HERALD_METRICS_PER_TENANT`: `/metrics` adds the series labelled by tenant id.
    pub metrics_per_tenant: bool,
    /// API keys verified recently (`keys::KEY_CACHE_TTL`), so a request's key check costs
    /// no database round trip.
    pub key_cache: Arc<crate::keys::KeyCache>,
    /// What the dashboard's session cookies are signed with (`ui::session`).
    pub session_keys: crate::ui::session::SessionKeys,
    /// The names requests may give in `Host` (`hosts`).
    pub allowed_hosts: crate::hosts::AllowedHosts,
    /// Failed keys by client address and key id (`guesses`).
    pub guesses: Arc<crate::guesses::Guesses>,
    /// A dashboard session unused this long is over.
    pub ui_idle: std::time::Duration,
    /// The dashboard's running bulk actions (`ui::jobs`).
    pub bulk_jobs: Arc<crate::ui::jobs::Jobs>,
}

impl std::fmt::Debug for AppState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AppState")
            .field("herald", &self.herald)
            .field("admin", &self.admin_key_sha256.is_some())
            .field("channels", &self.channels)
            .finish()
    }
}
