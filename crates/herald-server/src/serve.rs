//! `herald serve`: the HTTP API, workers, the reconciler and retention in one process,
//! all stopped by one cancellation token (SIGTERM/SIGINT in the binary) and all awaited.

use crate::listen::HttpOptions;
use crate::state::AppState;
use crate::{app, keys};
use herald::{
    CancellationToken, Channel, Herald, Reconciler, ReconcilerOptions, Retention, RetentionOptions,
    Worker, WorkerOptions,
};
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// What to run and how.
#[derive(Clone)]
pub struct ServeConfig {
    /// `None`: no HTTP API (`herald worker`).
    pub listen: Option<SocketAddr>,
    pub admin_key: Option<String>,
    /// `HERALD_VIEWER_KEY`: a read-only operator's dashboard key (every tenant, no action).
    pub viewer_key: Option<String>,
    pub metrics_token: Option<String>,
    /// `HERALD_METRICS_PER_TENANT`: `/metrics` also shows series labelled by tenant id.
    pub metrics_per_tenant: bool,
    /// Timeouts and limits of the HTTP connections.
    pub http: HttpOptions,
    /// `None`: no workers in this process.
    pub worker: Option<WorkerOptions>,
    /// `None`: no reconciler in this process.
    pub reconciler: Option<ReconcilerOptions>,
    /// `HERALD_RETENTION`; `None` disables pruning in this process.
    pub retention: Option<Duration>,
    pub channels: Vec<(String, Arc<dyn Channel>)>,
}

impl std::fmt::Debug for ServeConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeConfig")
            .field("listen", &self.listen)
            .field("metrics_per_tenant", &self.metrics_per_tenant)
            .field("http", &self.http)
            .field("worker", &self.worker)
            .field("reconciler", &self.reconciler)
            .field("retention", &self.retention)
            .field("channels", &self.channels.iter().map(|(n, _)| n).collect::<Vec<_>>())
            .finish()
    }
}

/// Why serving stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}")]
    Bind {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Herald(#[from] herald::Error),
    #[error("the HTTP server failed")]
    Http(#[source] std::io::Error),
}

/// The router's state for `herald` and `config`.
pub fn state(herald: &Herald, config: &ServeConfig) -> AppState {
    AppState {
        herald: herald.clone(),
        admin_key_sha256: config.admin_key.as_deref().filter(|k| !k.is_empty()).map(keys::digest),
        viewer_key_sha256: config.viewer_key.as_deref().filter(|k| !k.is_empty()).map(keys::digest),
        metrics_token_sha256: config
            .metrics_token
            .as_deref()
            .filter(|k| !k.is_empty())
            .map(keys::digest),
        channels: Arc::new(config.channels.iter().map(|(n, _)| n.clone()).collect::<BTreeSet<_>>()),
        metrics: crate::metrics::handle(),
        metrics_per_tenant: config.metrics_per_tenant,
        key_cache: Arc::new(keys::KeyCache::new(keys::KEY_CACHE_TTL)),
        session_keys: crate::ui::session::SessionKeys::default(),
        allowed_hosts: config.http.allowed_hosts.clone(),
        guesses: Arc::new(crate::guesses::Guesses::default()),
        ui_idle: config.http.ui_idle,
        bulk_jobs: Arc::default(),
    }
}

/// Runs until `shutdown` is cancelled; then stops accepting requests, shuts the workers
/// down gracefully and returns once every task has ended. `ready` receives the bound
/// address (useful with port 0).
pub async fn run(
    herald: Herald,
    config: ServeConfig,
    shutdown: CancellationToken,
    ready: Option<tokio::sync::oneshot::Sender<SocketAddr>>,
) -> Result<(), ServeError> {
    let worker = match &config.worker {
        Some(options) => {
            Some(Worker::new(herald.clone(), options.clone(), config.channels.clone())?)
        }
        None => None,
    };
    let mut tasks = tokio::task::JoinSet::new();
    if let Some(addr) = config.listen {
        let listener =
            crate::listen::bind(addr).map_err(|source| ServeError::Bind { addr, source })?;
        let bound = listener.local_addr().map_err(ServeError::Http)?;
        tracing::info!(%bound, "listening");
        if let Some(ready) = ready {
            let _ = ready.send(bound);
        }
        let router = app(state(&herald, &config));
        let (options, stop) = (config.http.clone(), shutdown.clone());
        tasks.spawn(async move {
            crate::listen::serve(listener, router, options, stop).await;
            Ok(())
        });
    }
    if let Some(worker) = worker {
        let stop = shutdown.clone();
        tasks.spawn(async move { worker.run(stop).await.map_err(ServeError::from) });
    }
    if let Some(options) = config.reconciler {
        let reconciler = Reconciler::new(herald.clone(), options);
        let stop = shutdown.clone();
        tasks.spawn(async move { reconciler.run(stop).await.map_err(ServeError::from) });
    }
    // The dashboard's per-minute counts, written every ROLLUP_FLUSH_EVERY and at the end.
    {
        let (herald, stop) = (herald.clone(), shutdown.clone());
        tasks.spawn(async move {
            herald.run_rollup(stop).await;
            Ok(())
        });
    }
    if let Some(keep) = config.retention {
        let retention = Retention::new(herald.clone(), RetentionOptions::keep(keep));
        let stop = shutdown.clone();
        tasks.spawn(async move { retention.run(stop).await.map_err(ServeError::from) });
    }
    let mut first_error = None;
    while let Some(joined) = tasks.join_next().await {
        let result =
            joined.unwrap_or_else(|e| Err(ServeError::Http(std::io::Error::other(e.to_string()))));
        if let Err(e) = result {
            tracing::error!(error = %e, "a part of the server stopped");
            shutdown.cancel();
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}
