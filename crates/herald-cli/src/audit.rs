//! `herald audit [PATH…]`: the PHP checker (crate herald-audit) as a command. Exit codes:
//! 0 clean, 1 findings or a file that could not be parsed (unless `--allow-skipped`),
//! 2 usage errors (a missing path, an unreadable baseline, a wrong `--assume`).

use herald_audit::{Assume, Options, Report, baseline, output};
use std::path::PathBuf;
use std::process::ExitCode;

/// The exit code for a usage error, as linters use it (findings are 1).
pub const EXIT_USAGE: u8 = 2;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// PHP files or directories (default: the current directory). `vendor/`,
    /// `node_modules/`, `storage/`, `bootstrap/` and Blade templates are not read.
    paths: Vec<PathBuf>,
    /// Print JSON.
    #[arg(long, conflicts_with = "sarif")]
    json: bool,
    /// Print SARIF 2.1.0 (for code-scanning UIs).
    #[arg(long)]
    sarif: bool,
    /// Accept the findings in FILE (written by --write-baseline); report only new ones.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Write today's findings to FILE as a baseline (after --baseline is applied).
    #[arg(long, value_name = "FILE")]
    write_baseline: Option<PathBuf>,
    /// Print files, parse time and total time to stderr.
    #[arg(long)]
    stats: bool,
    /// Override the configuration read from the application, for its default
    /// connection: db=pgsql|mysql|sqlite|sqlsrv, queue=sync|database|redis|sqs|…,
    /// after_commit=true|false, lock_wait=SECONDS. Repeatable.
    #[arg(long, value_name = "KEY=VALUE")]
    assume: Vec<String>,
    /// Exit 0 even when a file could not be parsed (it is still listed as skipped).
    #[arg(long)]
    allow_skipped: bool,
}

pub fn run(args: Args) -> ExitCode {
    let paths = if args.paths.is_empty() { vec![PathBuf::from(".")] } else { args.paths };
    let assume = match Assume::parse(&args.assume) {
        Ok(assume) => assume,
        Err(e) => return usage(&e.to_string()),
    };
    let mut report: Report = match herald_audit::audit_with(&paths, &Options { assume }) {
        Ok(report) => report,
        Err(e) => return usage(&e.to_string()),
    };
    if let Some(path) = &args.baseline {
        match baseline::read(path) {
            Ok(accepted) => baseline::apply(&mut report, &accepted),
            Err(e) => return usage(&crate::one_line(&error_chain(&e))),
        }
    }
    if let Some(path) = &args.write_baseline
        && let Err(e) = baseline::write(path, &report.findings)
    {
        return usage(&crate::one_line(&error_chain(&e)));
    }
    // What was assumed of each application, one line each, on stderr so that the
    // outputs stay what their readers parse.
    eprint!("{}", output::header(&report));
    if args.sarif {
        println!("{:#}", output::sarif(&report));
    } else if args.json {
        println!("{:#}", output::json(&report));
    } else {
        print!("{}", output::human(&report));
    }
    if args.stats {
        eprintln!(
            "stats: {} files parsed and audited, {} skipped; parse {:.3} s; total {:.3} s",
            report.files_scanned,
            report.skipped.len(),
            report.parse_time.as_secs_f64(),
            report.total_time.as_secs_f64()
        );
    }
    // A tree whose only buggy file was skipped must not pass as clean (issue 39).
    let skipped = !report.skipped.is_empty() && !args.allow_skipped;
    if report.findings.is_empty() && !skipped { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

fn usage(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(EXIT_USAGE)
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
