//! Settings: every one is a flag and an env var, optionally a key in `herald.toml`, with a
//! documented default. Precedence: flag, then env var, then the file, then the default.
//! Raw strings are parsed once, here, into typed values; a bad value is one clear line
//! naming the setting.

use anyhow::{Context, Result, anyhow, bail};
use herald::{ReconcilerOptions, RetryPolicy, WorkerOptions};
use herald_core::Backoff;
use herald_core::duration::parse_duration;
use herald_core::limits;
use herald_core::{Redacted, redact_url};
use herald_server::listen::{self, HttpOptions};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The shortest admin key taken: 32 random bytes in base64 (a key that can be guessed
/// opens every tenant).
pub const ADMIN_KEY_CHARS_MIN: usize = 43;

/// The raw settings, as given on the command line or in the environment.
#[derive(Clone, clap::Args)]
pub struct Settings {
    /// Database: a file path or sqlite://PATH (created and migrated on first start), postgres://…, or mariadb://… / mysql://… (a database of herald's own) [default: herald.db]
    #[arg(long, env = "HERALD_DB")]
    pub db: Option<String>,
    /// Optional settings file (keys like `listen = "0.0.0.0:8080"`) [default: ./herald.toml if present]
    #[arg(long, env = "HERALD_CONFIG")]
    pub config: Option<PathBuf>,
    /// HTTP address [default: 127.0.0.1:8080]
    #[arg(long, env = "HERALD_LISTEN")]
    pub listen: Option<String>,
    /// The admin key: only it creates tenants, keys and grants; at least 43 characters (`head -c 32 /dev/urandom | base64`) [default: none, admin calls disabled]
    #[arg(long, env = "HERALD_ADMIN_KEY", hide_env_values = true)]
    pub admin_key: Option<String>,
    /// A read-only operator's dashboard key: reads every tenant, acts on nothing; at least 43 characters [default: none]
    #[arg(long, env = "HERALD_VIEWER_KEY", hide_env_values = true)]
    pub viewer_key: Option<String>,
    /// The release this process runs, recorded on every attempt it makes [default: herald's version]
    #[arg(long, env = "HERALD_RELEASE")]
    pub release: Option<String>,
    /// Concurrent sends per process [default: 16]
    #[arg(long, env = "HERALD_WORKERS")]
    pub workers: Option<String>,
    /// Lease length [default: 60s]
    #[arg(long, env = "HERALD_LEASE")]
    pub lease: Option<String>,
    /// Longest single send; plus 5s it must be shorter than the lease [default: 30s]
    #[arg(long, env = "HERALD_SEND_TIMEOUT")]
    pub send_timeout: Option<String>,
    /// Fallback polling when no wake-up arrives [default: 1s]
    #[arg(long, env = "HERALD_POLL_INTERVAL")]
    pub poll_interval: Option<String>,
    /// Where workers hear wake-ups from other herald processes and SQL-API callers, on MariaDB and SQLite (PostgreSQL wakes them by NOTIFY): a UDP host:port (port 0: any free one), or `off` to find other processes' work by polling only [default: 127.0.0.1:0]
    #[arg(long, env = "HERALD_WAKE_LISTEN")]
    pub wake_listen: Option<String>,
    /// The host:port other processes send wake-ups to, when it is not the address listened on (needed with 0.0.0.0 or [::]) [default: the address listened on]
    #[arg(long, env = "HERALD_WAKE_ADVERTISE")]
    pub wake_advertise: Option<String>,
    /// Reconciler period [default: 10s]
    #[arg(long, env = "HERALD_RECONCILE_EVERY")]
    pub reconcile_every: Option<String>,
    /// Attempts per delivery unless the submit says otherwise, for a database that has no
    /// shared setting yet; after that, `herald settings set --max-attempts` [default: 8]
    #[arg(long, env = "HERALD_MAX_ATTEMPTS")]
    pub max_attempts: Option<String>,
    /// First retry backoff ceiling [default: 1s]
    #[arg(long, env = "HERALD_BACKOFF_BASE")]
    pub backoff_base: Option<String>,
    /// Cap on the retry backoff [default: 1h]
    #[arg(long, env = "HERALD_BACKOFF_MAX")]
    pub backoff_max: Option<String>,
    /// Longest provider Retry-After honoured [default: 1h]
    #[arg(long, env = "HERALD_RETRY_AFTER_MAX")]
    pub retry_after_max: Option<String>,
    /// How long started sends may finish on shutdown [default: 10s]
    #[arg(long, env = "HERALD_SHUTDOWN_GRACE")]
    pub shutdown_grace: Option<String>,
    /// Final deliveries older than this are pruned; also the idempotency window [default: 30d]
    #[arg(long, env = "HERALD_RETENTION")]
    pub retention: Option<String>,
    /// Allow webhooks to private, loopback and link-local addresses [default: false]
    #[arg(long, env = "HERALD_ALLOW_PRIVATE_TARGETS")]
    pub allow_private_targets: Option<String>,
    /// SMTP relay: smtp://host:port, smtps://user:pass@host:port, smtp://…?tls=starttls [default: none, no email channel]
    #[arg(long, env = "HERALD_SMTP_URL", hide_env_values = true)]
    pub smtp_url: Option<String>,
    /// Sender address of emails [default: none]
    #[arg(long, env = "HERALD_SMTP_FROM")]
    pub smtp_from: Option<String>,
    /// When set, /metrics needs `Authorization: Bearer <token>` [default: none]
    #[arg(long, env = "HERALD_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<String>,
    /// Also export series labelled by tenant id (they name every tenant to whoever reads /metrics) [default: false]
    #[arg(long, env = "HERALD_METRICS_PER_TENANT")]
    pub metrics_per_tenant: Option<String>,
    /// A connection must send a complete request head this soon after opening or after its previous answer; also the keep-alive idle limit [default: 10s]
    #[arg(long, env = "HERALD_HTTP_HEADER_TIMEOUT")]
    pub http_header_timeout: Option<String>,
    /// A request body must have arrived this soon after its head (408) [default: 30s]
    #[arg(long, env = "HERALD_HTTP_BODY_TIMEOUT")]
    pub http_body_timeout: Option<String>,
    /// Open HTTP connections; further ones wait to be accepted [default: 512]
    #[arg(long, env = "HERALD_HTTP_CONNECTIONS_MAX")]
    pub http_connections_max: Option<String>,
    /// Admission control: a submit waits at most this long for the database before it is answered 503 `busy` (nothing written), and while the oldest waiting submit has waited half of it new submits are refused at once; 10ms to 60s [default: 500ms]
    #[arg(long, env = "HERALD_QUEUE_WAIT")]
    pub queue_wait: Option<String>,
    /// Host names requests may give besides loopback names and IP addresses, comma separated, or `*` for any: a request naming another is refused (421), so a page whose DNS name was rebound to this server's address gets nothing [default: none]
    #[arg(long, env = "HERALD_ALLOWED_HOSTS")]
    pub allowed_hosts: Option<String>,
    /// The URL users reach herald at behind a proxy (`https://herald.example.com`): its host is allowed, and the dashboard takes requests from its origin [default: none]
    #[arg(long, env = "HERALD_PUBLIC_URL")]
    pub public_url: Option<String>,
    /// Consecutive failed sends that open a lane's circuit (a tenant's sends to one destination wait for a probe, no attempt spent); 1 to 1000 [default: 5]
    #[arg(long, env = "HERALD_CIRCUIT_FAILURES")]
    pub circuit_failures: Option<String>,
    /// An open circuit's first probe comes this long after it opened; each failed probe doubles it, up to an hour [default: 30s]
    #[arg(long, env = "HERALD_CIRCUIT_PROBE")]
    pub circuit_probe: Option<String>,
    /// A lane failing this long is disabled until enabled (`herald enable`), its tenant told on its events webhook [default: 5d]
    #[arg(long, env = "HERALD_CIRCUIT_DISABLE_AFTER")]
    pub circuit_disable_after: Option<String>,
    /// A dashboard session unused this long is over (sessions also end when signed out, revoked, or 8 hours after signing in); 1m to 8h [default: 30m]
    #[arg(long, env = "HERALD_UI_IDLE_TIMEOUT")]
    pub ui_idle_timeout: Option<String>,
    /// Traces: `off`, or `otlp` to export a span per HTTP request, submit and attempt over OTLP/HTTP (the standard OTEL_* variables apply: OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_BSP_SCHEDULE_DELAY, …) [default: off]
    #[arg(long, env = "HERALD_TRACES")]
    pub traces: Option<String>,
    /// Where `otlp` traces go: the collector's base URL, `/v1/traces` appended [default: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT, else http://localhost:4318]
    #[arg(long, env = "HERALD_OTLP_ENDPOINT")]
    pub otlp_endpoint: Option<String>,
}

/// Typed, validated settings.
#[derive(Clone)]
pub struct Resolved {
    pub db: String,
    pub listen: SocketAddr,
    pub admin_key: Option<String>,
    pub viewer_key: Option<String>,
    pub metrics_token: Option<String>,
    pub worker: WorkerOptions,
    pub reconciler: ReconcilerOptions,
    pub max_attempts: u32,
    /// Whether `max_attempts` was given (a flag or `HERALD_MAX_ATTEMPTS`), not defaulted.
    pub max_attempts_given: bool,
    pub retention: Duration,
    pub allow_private_targets: bool,
    pub smtp_url: Option<String>,
    pub smtp_from: Option<String>,
    pub metrics_per_tenant: bool,
    pub http: HttpOptions,
    pub queue_wait: Duration,
    pub circuit: herald_core::fair::CircuitPolicy,
}

impl Settings {
    pub fn resolve(&self) -> Result<Resolved> {
        let file = self.file()?;
        let get = |flag: &Option<String>, key: &str| -> Option<String> {
            flag.clone().or_else(|| file.get(key).cloned())
        };
        let duration = |flag: &Option<String>, key: &str, default: Duration| -> Result<Duration> {
            match get(flag, key) {
                None => Ok(default),
                Some(raw) => {
                    parse_duration(&raw).with_context(|| format!("HERALD_{}", key.to_uppercase()))
                }
            }
        };
        let number = |flag: &Option<String>,
                      key: &str,
                      default: u64,
                      range: std::ops::RangeInclusive<u64>|
         -> Result<u64> {
            match get(flag, key) {
                None => Ok(default),
                Some(raw) => match raw.trim().parse::<u64>() {
                    Ok(n) if range.contains(&n) => Ok(n),
                    _ => bail!(
                        "HERALD_{}: {raw:?} is not a whole number from {} to {}",
                        key.to_uppercase(),
                        range.start(),
                        range.end()
                    ),
                },
            }
        };
        let boolean = |flag: &Option<String>, key: &str| -> Result<bool> {
            match get(flag, key).as_deref().map(str::trim) {
                None | Some("false") | Some("0") | Some("no") => Ok(false),
                Some("true") | Some("1") | Some("yes") => Ok(true),
                Some(other) => {
                    bail!("HERALD_{}: {other:?} is not true or false", key.to_uppercase())
                }
            }
        };
        let positive = |flag: &Option<String>, key: &str, default: Duration| -> Result<Duration> {
            let d = duration(flag, key, default)?;
            if d.is_zero() {
                bail!("HERALD_{} must be positive", key.to_uppercase());
            }
            Ok(d)
        };
        let queue_wait =
            duration(&self.queue_wait, "queue_wait", limits::SERVE_QUEUE_WAIT_DEFAULT)?;
        if !(limits::QUEUE_WAIT_MIN..=limits::QUEUE_WAIT_MAX).contains(&queue_wait) {
            bail!(
                "HERALD_QUEUE_WAIT: {queue_wait:?} is not from {:?} to {:?}",
                limits::QUEUE_WAIT_MIN,
                limits::QUEUE_WAIT_MAX
            );
        }
        let defaults = herald_core::fair::CircuitPolicy::default();
        let circuit = herald_core::fair::CircuitPolicy {
            open_after: number(&self.circuit_failures, "circuit_failures", 5, 1..=1000)? as u32,
            probe_first: positive(&self.circuit_probe, "circuit_probe", defaults.probe_first)?,
            probe_max: defaults.probe_max,
            disable_after: positive(
                &self.circuit_disable_after,
                "circuit_disable_after",
                defaults.disable_after,
            )?,
        };
        let ui_idle = duration(&self.ui_idle_timeout, "ui_idle_timeout", herald::UI_SESSION_IDLE)?;
        if !(Duration::from_secs(60)..=herald::UI_SESSION_TTL).contains(&ui_idle) {
            bail!("HERALD_UI_IDLE_TIMEOUT: {ui_idle:?} is not from 1m to 8h");
        }
        let listen_raw = get(&self.listen, "listen").unwrap_or_else(|| "127.0.0.1:8080".into());
        let listen = listen_raw.parse::<SocketAddr>().map_err(|_| {
            anyhow!("HERALD_LISTEN: {listen_raw:?} is not an address like 127.0.0.1:8080")
        })?;
        let retry = RetryPolicy {
            backoff: Backoff {
                base: duration(
                    &self.backoff_base,
                    "backoff_base",
                    limits::DELIVERY_BACKOFF_BASE_DEFAULT,
                )?,
                max: duration(
                    &self.backoff_max,
                    "backoff_max",
                    limits::DELIVERY_BACKOFF_MAX_DEFAULT,
                )?,
            },
            retry_after_max: duration(
                &self.retry_after_max,
                "retry_after_max",
                limits::RETRY_AFTER_MAX_DEFAULT,
            )?,
        };
        let worker = WorkerOptions {
            slots: number(
                &self.workers,
                "workers",
                limits::WORKER_SLOTS_DEFAULT as u64,
                1..=10_000,
            )? as usize,
            lease: duration(&self.lease, "lease", limits::LEASE_DEFAULT)?,
            send_timeout: duration(
                &self.send_timeout,
                "send_timeout",
                limits::SEND_TIMEOUT_DEFAULT,
            )?,
            poll_interval: duration(
                &self.poll_interval,
                "poll_interval",
                limits::POLL_INTERVAL_DEFAULT,
            )?,
            shutdown_grace: duration(
                &self.shutdown_grace,
                "shutdown_grace",
                limits::SHUTDOWN_GRACE_DEFAULT,
            )?,
            retry,
            release: get(&self.release, "release")
                .unwrap_or_else(|| herald::RELEASE_DEFAULT.to_string()),
            wake_listen: match get(&self.wake_listen, "wake_listen").as_deref().map(str::trim) {
                None => Some(herald::WAKE_LISTEN_DEFAULT),
                Some("off") => None,
                Some(raw) => Some(raw.parse::<SocketAddr>().map_err(|_| {
                    anyhow!("HERALD_WAKE_LISTEN: {raw:?} is not an IP address and port, or off")
                })?),
            },
            wake_advertise: get(&self.wake_advertise, "wake_advertise"),
            ..WorkerOptions::default()
        };
        worker.validate().map_err(|e| anyhow!("{e}"))?;
        let http = HttpOptions {
            header_timeout: positive(
                &self.http_header_timeout,
                "http_header_timeout",
                listen::HEADER_TIMEOUT_DEFAULT,
            )?,
            body_timeout: positive(
                &self.http_body_timeout,
                "http_body_timeout",
                listen::BODY_TIMEOUT_DEFAULT,
            )?,
            connections_max: number(
                &self.http_connections_max,
                "http_connections_max",
                listen::CONNECTIONS_MAX_DEFAULT as u64,
                1..=listen::CONNECTIONS_MAX_LIMIT as u64,
            )? as usize,
            shutdown_grace: worker.shutdown_grace,
            allowed_hosts: herald_server::hosts::AllowedHosts::parse(
                get(&self.allowed_hosts, "allowed_hosts").as_deref(),
                get(&self.public_url, "public_url").as_deref(),
            )
            .map_err(|e| anyhow!(e))?,
            ui_idle,
            ..HttpOptions::default()
        };
        let reconcile_every =
            duration(&self.reconcile_every, "reconcile_every", limits::RECONCILE_EVERY_DEFAULT)?;
        if reconcile_every.is_zero() {
            bail!("HERALD_RECONCILE_EVERY must be positive");
        }
        let allow_private_targets = match get(&self.allow_private_targets, "allow_private_targets")
            .as_deref()
        {
            None | Some("false") | Some("0") | Some("no") => false,
            Some("true") | Some("1") | Some("yes") => true,
            Some(other) => bail!("HERALD_ALLOW_PRIVATE_TARGETS: {other:?} is not true or false"),
        };
        let admin_key = get(&self.admin_key, "admin_key").filter(|k| !k.is_empty());
        let viewer_key = get(&self.viewer_key, "viewer_key").filter(|k| !k.is_empty());
        for (name, key) in [("HERALD_ADMIN_KEY", &admin_key), ("HERALD_VIEWER_KEY", &viewer_key)] {
            if let Some(key) = key
                && key.chars().count() < ADMIN_KEY_CHARS_MIN
            {
                bail!(
                    "{name} is {} characters: a key must be at least {ADMIN_KEY_CHARS_MIN}, \
                     32 random bytes' worth (make one with `head -c 32 /dev/urandom | base64`)",
                    key.chars().count()
                );
            }
        }
        if admin_key.is_some() && admin_key == viewer_key {
            bail!("HERALD_VIEWER_KEY must differ from HERALD_ADMIN_KEY");
        }
        Ok(Resolved {
            db: get(&self.db, "db").unwrap_or_else(|| crate::DB_DEFAULT.into()),
            listen,
            admin_key,
            viewer_key,
            metrics_token: get(&self.metrics_token, "metrics_token").filter(|k| !k.is_empty()),
            worker,
            reconciler: ReconcilerOptions {
                every: reconcile_every,
                retry,
                ..ReconcilerOptions::default()
            },
            max_attempts: number(
                &self.max_attempts,
                "max_attempts",
                limits::DELIVERY_ATTEMPTS_DEFAULT as u64,
                1..=limits::DELIVERY_ATTEMPTS_MAX as u64,
            )? as u32,
            max_attempts_given: self.max_attempts.is_some(),
            retention: duration(&self.retention, "retention", Duration::from_secs(30 * 86_400))?,
            allow_private_targets,
            smtp_url: get(&self.smtp_url, "smtp_url"),
            smtp_from: get(&self.smtp_from, "smtp_from"),
            metrics_per_tenant: boolean(&self.metrics_per_tenant, "metrics_per_tenant")?,
            http,
            queue_wait,
            circuit,
        })
    }

    /// Where traces go: `None` when off (the default). Read on its own, before the rest,
    /// since the logging that carries spans starts before any other setting is used.
    pub fn traces(&self) -> Result<Option<crate::traces::Otlp>> {
        let file = self.file()?;
        let get = |flag: &Option<String>, key: &str| -> Option<String> {
            flag.clone().or_else(|| file.get(key).cloned())
        };
        match get(&self.traces, "traces").as_deref().map(str::trim) {
            None | Some("off") | Some("") => Ok(None),
            Some("otlp") => {
                let endpoint = get(&self.otlp_endpoint, "otlp_endpoint");
                Ok(Some(crate::traces::Otlp::new(endpoint.as_deref())?))
            }
            Some(other) => bail!("HERALD_TRACES: {other:?} is not off or otlp"),
        }
    }

    /// The settings file's keys (all values as strings).
    fn file(&self) -> Result<BTreeMap<String, String>> {
        let (path, required) = match &self.config {
            Some(p) => (p.clone(), true),
            None => (PathBuf::from("herald.toml"), false),
        };
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if !required && e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(BTreeMap::new());
            }
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        // toml's own message quotes the offending line, which can hold a secret.
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| {
            let line = e.span().map_or(1, |span| text[..span.start].matches('\n').count() + 1);
            anyhow!("{} is not valid TOML (line {line}): {}", path.display(), e.message().trim())
        })?;
        let known = [
            "db",
            "listen",
            "admin_key",
            "viewer_key",
            "release",
            "workers",
            "lease",
            "send_timeout",
            "poll_interval",
            "wake_listen",
            "wake_advertise",
            "reconcile_every",
            "max_attempts",
            "backoff_base",
            "backoff_max",
            "retry_after_max",
            "shutdown_grace",
            "retention",
            "allow_private_targets",
            "smtp_url",
            "smtp_from",
            "metrics_token",
            "metrics_per_tenant",
            "http_header_timeout",
            "http_body_timeout",
            "http_connections_max",
            "queue_wait",
            "allowed_hosts",
            "public_url",
            "ui_idle_timeout",
            "circuit_failures",
            "circuit_probe",
            "circuit_disable_after",
            "traces",
            "otlp_endpoint",
        ];
        let mut out = BTreeMap::new();
        for (key, value) in table {
            if !known.contains(&key.as_str()) {
                bail!("{}: unknown setting {key:?}", path.display());
            }
            let value = match value {
                toml::Value::String(s) => s,
                toml::Value::Integer(n) => n.to_string(),
                toml::Value::Boolean(b) => b.to_string(),
                other => bail!(
                    "{}: {key} must be a string, number or boolean, not {}",
                    path.display(),
                    other.type_str()
                ),
            };
            out.insert(key, value);
        }
        Ok(out)
    }
}

// Manual Debug: the database and SMTP URLs lose their passwords; the admin key and the
// metrics token show only whether they are set. A new setting goes here too.

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("db", &self.db.as_deref().map(redact_url))
            .field("config", &self.config)
            .field("listen", &self.listen)
            .field("admin_key", &Redacted::of(&self.admin_key))
            .field("viewer_key", &Redacted::of(&self.viewer_key))
            .field("release", &self.release)
            .field("workers", &self.workers)
            .field("lease", &self.lease)
            .field("send_timeout", &self.send_timeout)
            .field("poll_interval", &self.poll_interval)
            .field("wake_listen", &self.wake_listen)
            .field("wake_advertise", &self.wake_advertise)
            .field("reconcile_every", &self.reconcile_every)
            .field("max_attempts", &self.max_attempts)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_max", &self.backoff_max)
            .field("retry_after_max", &self.retry_after_max)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("retention", &self.retention)
            .field("allow_private_targets", &self.allow_private_targets)
            .field("smtp_url", &self.smtp_url.as_deref().map(redact_url))
            .field("smtp_from", &self.smtp_from)
            .field("metrics_token", &Redacted::of(&self.metrics_token))
            .field("queue_wait", &self.queue_wait)
            .field("allowed_hosts", &self.allowed_hosts)
            .field("public_url", &self.public_url)
            .field("ui_idle_timeout", &self.ui_idle_timeout)
            .field("circuit_failures", &self.circuit_failures)
            .field("circuit_probe", &self.circuit_probe)
            .field("circuit_disable_after", &self.circuit_disable_after)
            .field("traces", &self.traces)
            .field("otlp_endpoint", &self.otlp_endpoint.as_deref().map(redact_url))
            .finish()
    }
}

impl std::fmt::Debug for Resolved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolved")
            .field("db", &redact_url(&self.db))
            .field("listen", &self.listen)
            .field("admin_key", &Redacted::of(&self.admin_key))
            .field("viewer_key", &Redacted::of(&self.viewer_key))
            .field("metrics_token", &Redacted::of(&self.metrics_token))
            .field("worker", &self.worker)
            .field("reconciler", &self.reconciler)
            .field("max_attempts", &self.max_attempts)
            .field("retention", &self.retention)
            .field("allow_private_targets", &self.allow_private_targets)
            .field("smtp_url", &self.smtp_url.as_deref().map(redact_url))
            .field("smtp_from", &self.smtp_from)
            .field("queue_wait", &self.queue_wait)
            .field("circuit", &self.circuit)
            .finish()
    }
}
