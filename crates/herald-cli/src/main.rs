//! The `herald` binary: parses the command line, runs one command, prints a human report
//! (or JSON with `--json`) and turns any error into one line on stderr and exit code 1.

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

mod bench;
mod channels;
mod demo;
mod migrate;
mod ops;
mod run;
mod settings;

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
    /// Show, with real transactions and real contention, why herald exists.
    Demo(demo::Args),
    /// Measure herald against the hand-written SQL floor on one PostgreSQL.
    Bench(bench::Args),
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(e) => return usage(e),
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,sqlx::query=error"));
    let logs = tracing_subscriber::fmt().with_writer(std::io::stderr).with_env_filter(filter);
    match cli.log_format {
        LogFormat::Text => logs.init(),
        LogFormat::Json => logs.json().init(),
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", one_line(&chain(&e)));
            ExitCode::FAILURE
        }
    }
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
            ExitCode::FAILURE
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
        Command::Demo(args) => demo::run(args).await,
        Command::Bench(args) => bench::run(args).await,
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
}
