//! `cargo bench -p herald-audit`: the audit over Debian's Laravel framework source
//! (`/usr/share/php/Illuminate`, or the directory in HERALD_AUDIT_BENCH_PATH), five
//! runs; prints the median and best wall time, and, as a ratio measured in the same run,
//! against the floor of reading the same files.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const RUNS: usize = 5;

fn php_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            php_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "php") {
            out.push(path);
        }
    }
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn main() {
    let root = PathBuf::from(
        std::env::var("HERALD_AUDIT_BENCH_PATH")
            .unwrap_or_else(|_| "/usr/share/php/Illuminate".into()),
    );
    if !root.is_dir() {
        println!("skipped: {} is missing (apt-get install php-laravel-framework)", root.display());
        return;
    }
    let mut files = Vec::new();
    php_files(&root, &mut files);
    let mut read = Vec::new();
    let mut audit = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let started = Instant::now();
        let bytes: usize = files.iter().map(|f| std::fs::read(f).map_or(0, |b| b.len())).sum();
        read.push(started.elapsed());
        assert!(bytes > 0);
        let started = Instant::now();
        let report = herald_audit::audit(std::slice::from_ref(&root)).expect("audits");
        audit.push(started.elapsed());
        last = Some(report);
    }
    let report = last.expect("ran");
    let (audit_best, audit_median) = (*audit.iter().min().unwrap(), median(audit));
    let read_median = median(read);
    println!(
        "herald audit {}: {} files ({} parsed, {} skipped), {} findings",
        root.display(),
        files.len(),
        report.files_scanned,
        report.skipped.len(),
        report.findings.len()
    );
    println!(
        "audit: median {:.3} s, best {:.3} s over {RUNS} runs; reading the files alone: median {:.3} s (audit = {:.1}× the read floor)",
        audit_median.as_secs_f64(),
        audit_best.as_secs_f64(),
        read_median.as_secs_f64(),
        audit_median.as_secs_f64() / read_median.as_secs_f64().max(1e-9)
    );
}
