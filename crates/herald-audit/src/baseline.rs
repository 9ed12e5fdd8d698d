//! `--baseline FILE`: today's findings, accepted, so that only new ones are reported.
//! A finding is known by its fingerprint (rule, file, the offending line's text and
//! which occurrence of that text it is), so that lines moving up or down do not make an
//! accepted finding new again.

use crate::{Finding, Rule};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::path::Path;

/// The baseline file's format version.
const VERSION: u32 = 1;

#[derive(Debug, Serialize, Deserialize)]
struct File {
    version: u32,
    findings: Vec<Entry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    rule: String,
    path: String,
    line: u32,
    fingerprint: String,
}

#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    #[error("cannot read the baseline {path}")]
    Read { path: String, source: std::io::Error },
    #[error("the baseline {path} is not a herald audit baseline")]
    Format { path: String, source: serde_json::Error },
    #[error("the baseline {path} has version {found}; this herald reads version {VERSION}")]
    Version { path: String, found: u32 },
    #[error("cannot write the baseline {path}")]
    Write { path: String, source: std::io::Error },
}

/// FNV-1a (64-bit) of the parts, hex: stable across releases and platforms.
pub fn fingerprint(rule: Rule, path: &str, snippet: &str, occurrence: u32) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [rule.id(), "\0", path, "\0", snippet, "\0", &occurrence.to_string()] {
        for b in part.bytes() {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

pub fn read(path: &Path) -> Result<HashSet<String>, BaselineError> {
    let shown = path.display().to_string();
    let text = std::fs::read(path)
        .map_err(|source| BaselineError::Read { path: shown.clone(), source })?;
    let file: File = serde_json::from_slice(&text)
        .map_err(|source| BaselineError::Format { path: shown.clone(), source })?;
    if file.version != VERSION {
        return Err(BaselineError::Version { path: shown, found: file.version });
    }
    Ok(file.findings.into_iter().map(|e| e.fingerprint).collect())
}

pub fn write(path: &Path, findings: &[Finding]) -> Result<(), BaselineError> {
    let file = File {
        version: VERSION,
        findings: findings
            .iter()
            .map(|f| Entry {
                rule: f.rule.id().to_string(),
                path: f.path.clone(),
                line: f.line,
                fingerprint: f.fingerprint.clone(),
            })
            .collect(),
    };
    let mut text = serde_json::to_string_pretty(&file).unwrap_or_default();
    text.push('\n');
    std::fs::write(path, text)
        .map_err(|source| BaselineError::Write { path: path.display().to_string(), source })
}

/// Drops the findings the baseline accepts; returns how many.
pub fn apply(report: &mut crate::Report, accepted: &HashSet<String>) {
    let before = report.findings.len();
    report.findings.retain(|f| !accepted.contains(&f.fingerprint));
    report.baselined += before - report.findings.len();
}
