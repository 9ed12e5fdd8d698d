//! The `herald` binary: parses the command line, runs one command, prints a human report
//! (or JSON with `--json`) and turns any error into one line on stderr and exit code 1.

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

mod audit;
mod bench;
mod channels;
mod demo;
mod holds;
mod limits;
mod migrate;
mod ops;
mod run;
mod settings;
mod traces;

/// The default database: an SQLite file in the working directory.
const DB_DEFAULT: &str = "herald.db";

#[derive(Debug, Parser)]
#[command(
    name = "herald",
    version,
    about = "A durable delivery engine: side effects that happen once and are paid for once."
)]
struct Cli {
    /// Log lines as text or as JSON objects (to stderr; never payloads, keys or secrets).
    #[arg(long, global = true, env = "HERALD_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// HTTP API, workers, reconciler and retention in one process.
    Serve(run::ServeArgs),
    /// Workers only (more send capacity next to a `serve`).
    Worker(run::ServeArgs),
    /// Re-queue or fail deliveries whose worker vanished.
    Reconcile(run::ReconcileArgs),
    /// Create or upgrade herald's schema (also done automatically on every start).
    Migrate(migrate::Args),
    /// Tenants.
    Tenant {
        #[command(flatten)]
        db: ops::Db,
        #[command(subcommand)]
        cmd: ops::TenantCmd,
    },
    /// API keys.
    Key {
        #[command(flatten)]
        db: ops::Db,
        #[command(subcommand)]
        cmd: ops::KeyCmd,
    },
    /// Quota accounts.
    Quota {
        #[command(flatten)]
        db: ops::Db,
        #[command(subcommand)]
        cmd: ops::QuotaCmd,
    },
    /// Inspect, replay and cancel deliveries.
    Deliveries {
        #[command(flatten)]
        db: ops::Db,
        #[command(subcommand)]
        cmd: ops::DeliveriesCmd,
    },
    /// The settings every process on the database shares (submit defaults).
    Settings {
        #[command(flatten)]
        db: ops::Db,
        #[command(subcommand)]
        cmd: ops::SettingsCmd,
    },
    /// The audit log: sign-ins, replays, cancels, bulk actions, tenants, keys, grants and
    /// secrets — who, on which tenant, how many, when — newest first.
    AuditLog {
        #[command(flatten)]
        db: ops::Db,
        #[command(flatten)]
        args: ops::AuditLogArgs,
    },
    /// Stop sending to a channel, a tenant or a destination (`herald hold destination
    /// hooks.example.com`): its pending deliveries wait, no attempt spent, until released.
    Hold {
        #[command(flatten)]
        db: ops::Db,
        #[command(flatten)]
        scope: holds::ScopeArgs,
    },
    /// Release a hold: what it held is due again when it was due.
    Release {
        #[command(flatten)]
        db: ops::Db,
        #[command(flatten)]
        scope: holds::ScopeArgs,
    },
    /// The holds in place.
    Holds {
        #[command(flatten)]
        db: ops::Db,
    },
    /// Limit a destination across every process (`herald limit hooks.example.com
    /// --max-in-flight 4 --per-second 10`): sends over it wait, no attempt spent.
    Limit {
        #[command(flatten)]
        db: ops::Db,
        #[command(flatten)]
        args: limits::LimitArgs,
    },
    /// The destination limits.
    Limits {
        #[command(flatten)]
        db: ops::Db,
    },
    /// A tenant's share of every worker's send slots against other tenants (1 to 100,
    /// 1 by default).
    SendWeight {
        #[command(flatten)]
        db: ops::Db,
        /// The tenant's id.
        tenant: String,
        /// Its weight.
        weight: u32,
    },
    /// The lanes (a tenant's sends to one destination) whose sends fail: failing, open
    /// (waiting for a probe) or disabled.
    Circuits {
        #[command(flatten)]
        db: ops::Db,
    },
    /// Enable a lane again (disabled, or open): what waited is due now.
    Enable {
        #[command(flatten)]
        db: ops::Db,
        /// The tenant's id.
        tenant: String,
        /// The destination (a webhook's host, `smtp`, a channel's name).
        destination: String,
    },
    /// Where a tenant hears of herald's own events (an endpoint disabled): a webhook URL;
    /// without one, nowhere.
    EventsUrl {
        #[command(flatten)]
        db: ops::Db,
        /// The tenant's id.
        tenant: String,
        url: Option<String>,
    },
    /// Who may submit through the SQL API (PostgreSQL, MariaDB), for which tenants.
    Sql {
        #[command(flatten)]
        db: ops::Db,
        #[command(subcommand)]
        cmd: ops::SqlCmd,
    },
    /// Show, with real transactions and real contention, why herald exists.
    Demo(demo::Args),
    /// Measure herald against the hand-written SQL floor on one PostgreSQL or MariaDB.
    Bench(bench::Args),
    /// Find the seeds' bugs in a PHP (Laravel) codebase: effects in retried or rolled-back
    /// transactions, dropped retries, poisoned PostgreSQL transactions, budgets outside
    /// the claim, lock waits × attempts. Exit 0 clean, 1 findings, 2 usage error.
    Audit(audit::Args),
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) => return usage(e),
    };
    // The audit reads files only: no runtime, no logs, and exit codes of its own.
    let cli = match cli.command {
        Command::Audit(args) => return audit::run(args),
        command => Cli { command, ..cli },
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let traces = match start_logs(&cli, runtime.handle()) {
        Ok(traces) => traces,
        Err(e) => {
            eprintln!("error: {}", one_line(&chain(&e)));
            return ExitCode::FAILURE;
        }
    };
    let code = match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&chain(&e)));
            ExitCode::FAILURE
        }
    };
    // The last spans batched are exported now, while the runtime that sends them runs.
    if let Some(provider) = traces
        && let Err(e) = provider.shutdown()
    {
        eprintln!("warning: the last traces may not have been exported: {e}");
    }
    code
}

/// Logs to stderr (`RUST_LOG`, default warnings), and for `serve` and `worker` with
/// `HERALD_TRACES=otlp` spans to an OTLP collector: the provider to flush at exit.
fn start_logs(
    cli: &Cli,
    runtime: &tokio::runtime::Handle,
) -> anyhow::Result<Option<opentelemetry_sdk::trace::SdkTracerProvider>> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,sqlx::query=error"));
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match cli.log_format {
        LogFormat::Text => logs.with_filter(filter).boxed(),
        LogFormat::Json => logs.json().with_filter(filter).boxed(),
    };
    let otlp = match &cli.command {
        Command::Serve(args) | Command::Worker(args) => args.traces()?,
        _ => None,
    };
    let (spans, provider) = match otlp {
        Some(otlp) => {
            let (layer, provider) = otlp.install(runtime.clone())?;
            (Some(layer), Some(provider))
        }
        None => (None, None),
    };
    tracing_subscriber::registry().with(logs).with(spans).init();
    Ok(provider)
}

/// The command line as clap sees it, with every env value hidden from `--help`. Values
/// such as `HERALD_DB` (a password), `HERALD_ADMIN_KEY` or `HERALD_SMTP_URL` are secrets,
/// and one rule for every setting also covers the ones added later, which a per-setting
/// `hide_env_values` would leave to memory. `--help` still names each env var.
fn command() -> clap::Command {
    hide_env_values(Cli::command())
}

fn hide_env_values(command: clap::Command) -> clap::Command {
    command.mut_args(|arg| arg.hide_env_values(true)).mut_subcommands(hide_env_values)
}

fn parse() -> Result<Cli, clap::Error> {
    let mut matches = command().try_get_matches()?;
    Cli::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut command()))
}

/// `--help` and `--version` print as usual; a usage error is one line, exit code 1, like
/// every other error.
fn usage(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand | ErrorKind::MissingSubcommand => {
            eprintln!("error: a command is required (see --help)");
            ExitCode::FAILURE
        }
        _ => {
            let text = e.to_string();
            let first = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("invalid arguments");
            let first = first.trim_start_matches("error: ");
            eprintln!("error: {} (see --help)", one_line(first));
            // `herald audit` follows the linters' convention: 2 is a usage error.
            if std::env::args().skip(1).any(|a| a == "audit") {
                ExitCode::from(audit::EXIT_USAGE)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}

async fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve(args) => run::serve(args, run::Role::Serve).await,
        Command::Worker(args) => run::serve(args, run::Role::Worker).await,
        Command::Reconcile(args) => run::reconcile(args).await,
        Command::Migrate(args) => migrate::run(args).await,
        Command::Tenant { db, cmd } => ops::tenant(db, cmd).await,
        Command::Key { db, cmd } => ops::key(db, cmd).await,
        Command::Quota { db, cmd } => ops::quota(db, cmd).await,
        Command::Deliveries { db, cmd } => ops::deliveries(db, cmd).await,
        Command::Settings { db, cmd } => ops::settings(db, cmd).await,
        Command::Sql { db, cmd } => ops::sql(db, cmd).await,
        Command::AuditLog { db, args } => ops::audit_log(db, args).await,
        Command::Hold { db, scope } => holds::change(db, scope, false).await,
        Command::Release { db, scope } => holds::change(db, scope, true).await,
        Command::Holds { db } => holds::list(db).await,
        Command::Limit { db, args } => limits::change(db, args).await,
        Command::Limits { db } => limits::list(db).await,
        Command::Circuits { db } => limits::circuits(db).await,
        Command::Enable { db, tenant, destination } => {
            limits::enable(db, &tenant, &destination).await
        }
        Command::EventsUrl { db, tenant, url } => {
            limits::events_url(db, &tenant, url.as_deref()).await
        }
        Command::SendWeight { db, tenant, weight } => {
            limits::send_weight(db, &tenant, weight).await
        }
        Command::Demo(args) => demo::run(args).await,
        Command::Bench(args) => bench::run(args).await,
        // main() runs the audit before the runtime starts (it has exit codes of its own);
        // this arm only keeps the match whole.
        Command::Audit(args) => {
            audit::run(args);
            Ok(())
        }
    }
}

/// The error and its causes joined with ": ", skipping a cause whose text the message
/// already carries (sqlx repeats its source's text in its own message).
fn chain(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}

/// Errors from drivers sometimes carry newlines; an operator's terminal gets one line.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
#[allow(clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    /// Every setting read from the environment, in every (nested) subcommand, keeps its
    /// value out of `--help`.
    #[test]
    fn help_hides_every_env_value() {
        fn check(command: &clap::Command, path: &str, seen: &mut usize) {
            for arg in command.get_arguments().filter(|a| a.get_env().is_some()) {
                *seen += 1;
                assert!(arg.is_hide_env_values_set(), "{path} --{}", arg.get_id());
            }
            for sub in command.get_subcommands() {
                check(sub, &format!("{path} {}", sub.get_name()), seen);
            }
        }
        let mut command = command();
        command.build();
        let mut seen = 0;
        check(&command, "herald", &mut seen);
        assert!(seen > 20, "only {seen} env settings found");
    }

    const DB: &str = "postgres://u:s3cr3t@h/db";
    const SMTP: &str = "smtps://u:smtpp4ss@h:465";
    /// An admin key long enough to be taken, with the planted secret in it.
    const ADMIN: &str = "adm1nsecret-0123456789abcdefghijklmnopqrstuvwxyz";
    /// Each secret text planted in a setting.
    const SECRETS: [&str; 4] = ["s3cr3t", "adm1nsecret", "smtpp4ss", "m3trics"];

    fn assert_no_secret(what: &str, shown: &str) {
        for secret in SECRETS {
            assert!(!shown.contains(secret), "{what}: shows {secret:?}: {shown}");
        }
    }

    #[test]
    fn debug_of_every_command_line_hides_secrets() {
        let settings = [
            "--db",
            DB,
            "--admin-key",
            "adm1nsecret",
            "--smtp-url",
            SMTP,
            "--metrics-token",
            "m3trics",
        ];
        let cases: [Vec<&str>; 8] = [
            [&["herald", "serve"][..], &settings].concat(),
            [&["herald", "worker"][..], &settings].concat(),
            [&["herald", "reconcile"][..], &settings].concat(),
            vec!["herald", "migrate", "--db", DB],
            vec!["herald", "tenant", "--db", DB, "create", "acme"],
            vec!["herald", "deliveries", "--db", DB, "list", "acme"],
            vec!["herald", "demo", "--db", DB],
            vec!["herald", "bench", "--db", DB],
        ];
        for args in cases {
            let mut matches = command().try_get_matches_from(&args).expect("parses");
            let cli = Cli::from_arg_matches_mut(&mut matches).expect("parses");
            let shown = format!("{cli:?}");
            assert!(shown.contains("postgres://u:***@h/db"), "{args:?}: no database in {shown}");
            assert_no_secret(&format!("{args:?}"), &shown);
        }
    }

    /// Only the settings, parsed as `serve` parses them.
    #[derive(Parser)]
    struct SettingsOnly {
        #[command(flatten)]
        settings: settings::Settings,
    }

    fn settings_file(text: &str) -> (tempfile::TempDir, settings::Settings) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("herald.toml");
        std::fs::write(&path, text).expect("write herald.toml");
        let path = path.to_str().expect("utf-8 path").to_string();
        let only = SettingsOnly::try_parse_from(["herald", "--config", &path]).expect("parses");
        (dir, only.settings)
    }

    #[test]
    fn debug_of_settings_from_the_file_hides_secrets() {
        let text = format!(
            "db = \"{DB}\"\nadmin_key = \"{ADMIN}\"\nsmtp_url = \"{SMTP}\"\n\
             smtp_from = \"herald@example.com\"\nmetrics_token = \"m3trics\"\n"
        );
        let (_dir, settings) = settings_file(&text);
        let resolved = settings.resolve().expect("resolves");
        assert_eq!(resolved.admin_key.as_deref(), Some(ADMIN), "read from the file");
        let shown = format!("{resolved:?}");
        for visible in ["postgres://u:***@h/db", "smtps://u:***@h:465", "herald@example.com"] {
            assert!(shown.contains(visible), "{visible:?} missing from {shown}");
        }
        assert_no_secret("Resolved", &shown);
        assert_no_secret("Settings", &format!("{settings:?}"));
    }

    #[test]
    fn errors_about_the_file_do_not_quote_its_values() {
        // (herald.toml, text the error must contain)
        let cases = [
            ("listen = \"127.0.0.1:1\"\nadmin_key = adm1nsecret\n", "line 2"),
            ("admin_key = [\"adm1nsecret\"]\n", "admin_key must be a string"),
            ("metrics_token = { t = \"m3trics\" }\n", "metrics_token must be a string"),
            ("smtp_url = \"{SMTP}\"\nsmtp_url = \"{SMTP}\"\n", "line 2"),
        ];
        for (text, expect) in cases {
            let text = text.replace("{SMTP}", SMTP);
            let (_dir, settings) = settings_file(&text);
            let error = match settings.resolve() {
                Ok(_) => panic!("{text:?}: accepted"),
                Err(e) => chain(&e),
            };
            assert!(error.contains(expect), "{text:?}: expected {expect:?} in {error}");
            assert_no_secret(&text, &error);
        }
    }
}
