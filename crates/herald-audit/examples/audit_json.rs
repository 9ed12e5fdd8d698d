//! `cargo run --release -p herald-audit --example audit_json -- [--assume KEY=VALUE]… PATH…`: the audit's JSON
//! report for PATH, without building the whole CLI (sqlx and the rest). How the corpus in
//! docs/audit.md was measured on a shared machine.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut assume: Vec<String> = Vec::new();
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--assume" {
            let Some(value) = args.next() else {
                eprintln!("usage: audit_json [--assume KEY=VALUE]… PATH…");
                return ExitCode::from(2);
            };
            assume.push(value.to_string_lossy().into_owned());
        } else {
            paths.push(PathBuf::from(arg));
        }
    }
    if paths.is_empty() {
        eprintln!("usage: audit_json [--assume KEY=VALUE]… PATH…");
        return ExitCode::from(2);
    }
    let assume = match herald_audit::Assume::parse(&assume) {
        Ok(assume) => assume,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match herald_audit::audit_with(&paths, &herald_audit::Options { assume }) {
        Ok(report) => {
            println!("{:#}", herald_audit::output::json(&report));
            eprintln!(
                "{} files, {} skipped, {} findings, {:.3} s",
                report.files_scanned,
                report.skipped.len(),
                report.findings.len(),
                report.total_time.as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
