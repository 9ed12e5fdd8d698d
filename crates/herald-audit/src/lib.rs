//! herald audit: reads a PHP tree and reports the seeds' bugs — effects inside retried
//! or rolled-back transactions, retries silently dropped by nesting, a caught database
//! error that leaves a PostgreSQL transaction aborted, a budget moved outside the claim,
//! and lock waits multiplied by attempts. See `rules.rs` for each rule's why and fix.
//!
//! Boundaries: `php.rs` (with `php/flow.rs`) alone knows the parser; everything after it
//! reads `ir`. Nothing here panics on input: a file that does not parse (or is too large,
//! too deep, or unreadable) is listed in `Report::skipped` and the rest is still audited.
//! The configuration each application runs with is in `config.rs`; what the run assumed
//! of it is in `Report::assumed`.

mod analyze;
pub mod baseline;
mod config;
mod index;
pub mod ir;
pub mod output;
mod php;
pub mod rules;

pub use config::{AppConfig, Assume, AssumeError, Driver};
pub use rules::{RULES, Rule};

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Files larger than this are listed as skipped, not parsed.
pub const FILE_BYTES_MAX: u64 = 4 * 1024 * 1024;
/// Parsing threads (the machine's cores, at most this many).
const THREADS_MAX: usize = 8;
/// Each parsing thread's stack: deep expressions recurse.
const THREAD_STACK_BYTES: usize = 64 * 1024 * 1024;
/// Directories never descended into.
const SKIPPED_DIRS: [&str; 5] = ["vendor", "node_modules", ".git", "storage", "bootstrap"];

#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error("{0}: no such file or directory")]
    Missing(PathBuf),
}

/// One finding, as reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub rule: Rule,
    pub path: String,
    pub line: u32,
    pub col: u32,
    pub message: String,
    /// The offending line, trimmed.
    pub snippet: String,
    /// Stable across line moves: rule, path, snippet and the snippet's occurrence.
    pub fingerprint: String,
}

/// What the audit assumed of one audited path's application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assumed {
    pub path: String,
    /// One line: the drivers assumed and where each came from.
    pub summary: String,
    /// The rules this configuration leaves unchecked, and why.
    pub unchecked: Vec<String>,
}

/// How to audit: overrides of what the configuration says.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub assume: Assume,
}

/// A file that was not audited, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    pub path: String,
    pub line: u32,
    pub reason: String,
}

#[derive(Debug, Default)]
pub struct Report {
    pub files_scanned: usize,
    pub findings: Vec<Finding>,
    pub skipped: Vec<Skipped>,
    /// One entry per audited path: its configuration as assumed.
    pub assumed: Vec<Assumed>,
    /// Findings silenced by `// herald-audit-ignore RULE reason`.
    pub ignored: usize,
    /// Findings accepted by the baseline.
    pub baselined: usize,
    pub parse_time: Duration,
    pub total_time: Duration,
}

struct Source {
    path: String,
    /// Which audited PATH it came from (for its application's configuration).
    root: usize,
    text: Vec<u8>,
}

/// Audits every `.php` file under `paths` (files given directly are audited too), with
/// each application's configuration as found.
pub fn audit(paths: &[PathBuf]) -> Result<Report, AuditError> {
    audit_with(paths, &Options::default())
}

/// `audit`, with overrides of the configuration.
pub fn audit_with(paths: &[PathBuf], options: &Options) -> Result<Report, AuditError> {
    let started = Instant::now();
    let mut report = Report::default();
    let mut sources = Vec::new();
    let mut configs = Vec::new();
    for (root, path) in paths.iter().enumerate() {
        if !path.exists() {
            return Err(AuditError::Missing(path.clone()));
        }
        let config = AppConfig::discover(path, &options.assume);
        report.assumed.push(Assumed {
            path: path.to_string_lossy().into_owned(),
            summary: config.summary(),
            unchecked: config.unchecked(),
        });
        configs.push(config);
        let mut found = Vec::new();
        collect(path, true, &mut found);
        found.sort();
        for file in found {
            let display = file.to_string_lossy().into_owned();
            match std::fs::metadata(&file) {
                Ok(m) if m.len() > FILE_BYTES_MAX => {
                    report.skipped.push(Skipped {
                        path: display,
                        line: 0,
                        reason: format!("larger than {} MiB", FILE_BYTES_MAX / 1024 / 1024),
                    });
                    continue;
                }
                Ok(_) => {}
                Err(e) => {
                    report.skipped.push(Skipped {
                        path: display,
                        line: 0,
                        reason: format!("unreadable: {e}"),
                    });
                    continue;
                }
            }
            match std::fs::read(&file) {
                Ok(text) => sources.push(Source { path: display, root, text }),
                Err(e) => report.skipped.push(Skipped {
                    path: display,
                    line: 0,
                    reason: format!("unreadable: {e}"),
                }),
            }
        }
    }
    let parse_started = Instant::now();
    let parsed = parse_all(&sources);
    report.parse_time = parse_started.elapsed();
    let mut files = Vec::new();
    for (i, result) in parsed.iter().enumerate() {
        match result {
            Ok(file) => files.push((i, file)),
            Err(e) => report.skipped.push(Skipped {
                path: sources[i].path.clone(),
                line: e.pos.line,
                reason: e.message.clone(),
            }),
        }
    }
    report.files_scanned = files.len();
    let file_config: Vec<usize> = sources.iter().map(|s| s.root).collect();
    let index = index::Index::build(&files);
    let mut analysis = analyze::Analysis::new(&index, &files, &configs, &file_config);
    analysis.run();
    let mut occurrences = std::collections::HashMap::new();
    // Each file's lines are split once, however many findings it has (issue 39: a
    // generated file with 18,745 findings re-split its text per finding).
    let mut line_tables: std::collections::HashMap<usize, Vec<&[u8]>> =
        std::collections::HashMap::new();
    for raw in analysis.findings {
        let source = &sources[raw.file];
        let lines = line_tables
            .entry(raw.file)
            .or_insert_with(|| source.text.split(|b| *b == b'\n').collect());
        let line_text = |n: u32| -> String {
            n.checked_sub(1)
                .and_then(|i| lines.get(i as usize))
                .map(|l| String::from_utf8_lossy(l).trim().to_string())
                .unwrap_or_default()
        };
        if ignored(&line_text(raw.pos.line.saturating_sub(1)), raw.rule) {
            report.ignored += 1;
            continue;
        }
        let snippet = line_text(raw.pos.line);
        let n = occurrences.entry((raw.rule, source.path.clone(), snippet.clone())).or_insert(0u32);
        *n += 1;
        let fingerprint = baseline::fingerprint(raw.rule, &source.path, &snippet, *n);
        report.findings.push(Finding {
            rule: raw.rule,
            path: source.path.clone(),
            line: raw.pos.line,
            col: raw.pos.col,
            message: raw.message,
            snippet,
            fingerprint,
        });
    }
    report.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    report.total_time = started.elapsed();
    Ok(report)
}

/// `// herald-audit-ignore RULE reason` (a reason is required).
fn ignored(line: &str, rule: Rule) -> bool {
    let Some(at) = line.find("herald-audit-ignore") else { return false };
    let mut words = line[at + "herald-audit-ignore".len()..].split_whitespace();
    words.next() == Some(rule.id()) && words.next().is_some()
}

fn collect(path: &Path, given: bool, out: &mut Vec<PathBuf>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else { return };
    if meta.is_dir() {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !given && SKIPPED_DIRS.contains(&name) {
            return;
        }
        let Ok(entries) = std::fs::read_dir(path) else { return };
        for entry in entries.flatten() {
            collect(&entry.path(), false, out);
        }
    } else if meta.is_file() || (given && path.is_file()) {
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if given || (name.ends_with(".php") && !name.ends_with(".blade.php")) {
            out.push(path.to_path_buf());
        }
    } else if meta.file_type().is_symlink() && path.is_file() {
        // A symlinked file is read; a symlinked directory is not followed (no cycles).
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with(".php") && !name.ends_with(".blade.php") {
            out.push(path.to_path_buf());
        }
    }
}

/// Parses every source on a few threads; a parser panic becomes a skipped file.
fn parse_all(sources: &[Source]) -> Vec<Result<ir::File, php::Unparsable>> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, THREADS_MAX);
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<Result<ir::File, php::Unparsable>>> =
        (0..sources.len()).map(|_| None).collect();
    let chunks: Vec<Vec<(usize, Result<ir::File, php::Unparsable>)>> =
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .filter_map(|_| {
                    std::thread::Builder::new()
                        .stack_size(THREAD_STACK_BYTES)
                        .spawn_scoped(scope, || {
                            let mut out = Vec::new();
                            loop {
                                let i = next.fetch_add(1, Ordering::Relaxed);
                                let Some(source) = sources.get(i) else { break };
                                out.push((i, parse_one(&source.text)));
                            }
                            out
                        })
                        .ok()
                })
                .collect();
            handles.into_iter().filter_map(|h| h.join().ok()).collect()
        });
    for (i, r) in chunks.into_iter().flatten() {
        results[i] = Some(r);
    }
    results
        .into_iter()
        .map(|r| {
            r.unwrap_or_else(|| {
                Err(php::Unparsable {
                    pos: ir::Pos::default(),
                    message: "not parsed (a parsing thread failed)".into(),
                })
            })
        })
        .collect()
}

fn parse_one(text: &[u8]) -> Result<ir::File, php::Unparsable> {
    match std::panic::catch_unwind(|| php::parse(text)) {
        Ok(r) => r,
        Err(_) => Err(php::Unparsable {
            pos: ir::Pos::default(),
            message: "the PHP parser failed on this file".into(),
        }),
    }
}
