//! `herald serve`, `herald worker`, `herald reconcile`: the long-running commands.

use crate::settings::{Resolved, Settings};
use anyhow::{Context, Result};
use herald::{CancellationToken, EngineOptions, Herald, Reconciler};
use herald_server::serve::{ServeConfig, run};

#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    settings: Settings,
}

impl ServeArgs {
    /// Where this process's traces go (`None`: off).
    pub fn traces(&self) -> Result<Option<crate::traces::Otlp>> {
        self.settings.traces()
    }
}

#[derive(Debug, clap::Args)]
pub struct ReconcileArgs {
    #[command(flatten)]
    settings: Settings,
    /// One pass, print what it did, exit.
    #[arg(long)]
    once: bool,
    /// With --once: print JSON.
    #[arg(long)]
    json: bool,
}

/// What a process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// API + workers + reconciler + retention.
    Serve,
    /// Workers only.
    Worker,
}

async fn open(settings: &Resolved) -> Result<Herald> {
    // One connection per send slot (each records its outcome), plus room for the API, the
    // reconciler, heartbeats and the LISTEN connection.
    let options = herald::StoreOptions {
        connections_max: (settings.worker.slots as u32).saturating_add(10),
        ..herald::StoreOptions::default()
    };
    let herald = Herald::open_with(&settings.db, &options).await?.with_options(EngineOptions {
        max_attempts: settings.max_attempts,
        queue_wait: settings.queue_wait,
        circuit: settings.circuit,
    })?;
    // A secret on the command line is in `ps` for every user of the machine.
    for flag in ["--admin-key", "--metrics-token", "--smtp-url"] {
        if std::env::args().any(|a| a == flag || a.starts_with(&format!("{flag}="))) {
            tracing::warn!(
                flag,
                "a secret given on the command line is visible to every user of this machine \
                 (ps, /proc); give it in the environment (HERALD_…) or the settings file"
            );
        }
    }
    // The shared settings, written from this process's if the database has none yet.
    let shared = herald.settings().await?;
    if settings.max_attempts_given && shared.max_attempts != settings.max_attempts {
        tracing::warn!(
            configured = settings.max_attempts,
            shared = shared.max_attempts,
            "HERALD_MAX_ATTEMPTS differs from this database's shared setting, which every \
             process uses; change it with `herald settings set --max-attempts N`"
        );
    }
    Ok(herald)
}

/// SIGTERM or SIGINT cancels the token.
fn on_signal(token: CancellationToken) {
    tokio::spawn(async move {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term =
                match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
                    Ok(term) => term,
                    Err(e) => {
                        tracing::warn!(error = %e, "no SIGTERM handler");
                        let _ = ctrl_c.await;
                        token.cancel();
                        return;
                    }
                };
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
        }
        #[cfg(not(unix))]
        let _ = ctrl_c.await;
        tracing::info!("shutting down");
        token.cancel();
    });
}

pub async fn serve(args: ServeArgs, role: Role) -> Result<()> {
    let settings = args.settings.resolve()?;
    let herald = open(&settings).await?;
    let channels = crate::channels::configured(&herald, &settings)?;
    if channels.is_empty() {
        tracing::warn!("no delivery channels are configured: submits will be refused with 400");
    }
    let config = ServeConfig {
        listen: (role == Role::Serve).then_some(settings.listen),
        admin_key: settings.admin_key.clone(),
        viewer_key: settings.viewer_key.clone(),
        metrics_token: settings.metrics_token.clone(),
        metrics_per_tenant: settings.metrics_per_tenant,
        http: settings.http.clone(),
        worker: Some(settings.worker.clone()),
        reconciler: (role == Role::Serve).then_some(settings.reconciler),
        retention: (role == Role::Serve).then_some(settings.retention),
        channels,
    };
    let shutdown = CancellationToken::new();
    on_signal(shutdown.clone());
    let (ready, bound) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        if let Ok(addr) = bound.await {
            eprintln!("herald listening on http://{addr}");
        }
    });
    run(herald.clone(), config, shutdown, Some(ready)).await.context("herald stopped")?;
    herald.close().await;
    Ok(())
}

pub async fn reconcile(args: ReconcileArgs) -> Result<()> {
    let settings = args.settings.resolve()?;
    let herald = open(&settings).await?;
    let reconciler = Reconciler::new(herald.clone(), settings.reconciler);
    if args.once {
        let report = reconciler.run_once().await?;
        let age = report.oldest_due_age.map(|d| d.as_secs_f64());
        if args.json {
            println!(
                "{}",
                serde_json::json!({"requeued": report.requeued, "failed": report.failed, "oldest_due_age_seconds": age})
            );
        } else {
            println!(
                "re-queued {} | failed {} | oldest due delivery waiting {}",
                report.requeued,
                report.failed,
                age.map_or("-".to_string(), |s| format!("{s:.1}s"))
            );
        }
    } else {
        let shutdown = CancellationToken::new();
        on_signal(shutdown.clone());
        reconciler.run(shutdown).await?;
    }
    herald.close().await;
    Ok(())
}
