//! `cargo run --release -p herald-audit --example audit_json -- PATH…`: the audit's JSON
//! report for PATH, without building the whole CLI (sqlx and the rest). How the corpus in
//! docs/audit.md was measured on a shared machine.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let paths: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
    if paths.is_empty() {
        eprintln!("usage: audit_json PATH…");
        return ExitCode::from(2);
    }
    match herald_audit::audit(&paths) {
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
