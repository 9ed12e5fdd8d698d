//! The three outputs: human (file:line:col, rule, why, fix, the offending line), JSON,
//! and SARIF 2.1.0 for code-scanning UIs.

use crate::{RULES, Report};
use serde_json::{Value, json};

/// One header line per audited path: the configuration assumed and where it came from,
/// then a line per rule it leaves unchecked.
pub fn header(report: &Report) -> String {
    let mut out = String::new();
    for a in &report.assumed {
        out.push_str(&format!("herald audit {}: {}\n", a.path, a.summary));
        for u in &a.unchecked {
            out.push_str(&format!("  note: {u}\n"));
        }
    }
    out
}

pub fn human(report: &Report) -> String {
    let mut out = String::new();
    for f in &report.findings {
        out.push_str(&format!(
            "{}:{}:{}: {} [{}]: {}\n  why: {}\n  fix: {}\n  | {}\n\n",
            f.path,
            f.line,
            f.col,
            f.rule.title(),
            f.rule.id(),
            f.message,
            f.rule.why(),
            f.rule.fix(),
            f.snippet
        ));
    }
    for s in &report.skipped {
        out.push_str(&format!("{}:{}: not parsed, skipped: {}\n", s.path, s.line, s.reason));
    }
    out.push_str(&format!(
        "{} finding(s) in {} file(s); {} skipped (not parsed); {} ignored by comment; {} accepted by the baseline\n",
        report.findings.len(),
        report.files_scanned,
        report.skipped.len(),
        report.ignored,
        report.baselined
    ));
    out
}

pub fn json(report: &Report) -> Value {
    json!({
        "findings": report.findings.iter().map(|f| json!({
            "rule": f.rule.id(),
            "title": f.rule.title(),
            "path": f.path,
            "line": f.line,
            "column": f.col,
            "message": f.message,
            "why": f.rule.why(),
            "fix": f.rule.fix(),
            "snippet": f.snippet,
            "fingerprint": f.fingerprint,
        })).collect::<Vec<_>>(),
        "skipped": report.skipped.iter().map(|s| json!({
            "path": s.path, "line": s.line, "reason": s.reason,
        })).collect::<Vec<_>>(),
        "assumed": report.assumed.iter().map(|a| json!({
            "path": a.path, "configuration": a.summary, "unchecked": a.unchecked,
        })).collect::<Vec<_>>(),
        "files_scanned": report.files_scanned,
        "ignored": report.ignored,
        "baselined": report.baselined,
    })
}

/// A relative URI reference for a path: forward slashes, and the characters a URI
/// cannot hold percent-encoded.
fn uri(path: &str) -> String {
    let mut out = String::new();
    for b in path.replace('\\', "/").bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub fn sarif(report: &Report) -> Value {
    let rules: Vec<Value> = RULES
        .iter()
        .map(|r| {
            json!({
                "id": r.id(),
                "name": r.title(),
                "shortDescription": { "text": r.title() },
                "fullDescription": { "text": r.why() },
                "help": { "text": format!("{} Fix: {}", r.why(), r.fix()) },
                "defaultConfiguration": { "level": r.level() },
            })
        })
        .collect();
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            let index = RULES.iter().position(|r| *r == f.rule).unwrap_or(0);
            json!({
                "ruleId": f.rule.id(),
                "ruleIndex": index,
                "level": f.rule.level(),
                "message": { "text": format!("{}. Why: {} Fix: {}", f.message, f.rule.why(), f.rule.fix()) },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri(&f.path) },
                        "region": {
                            "startLine": f.line,
                            "startColumn": f.col,
                            "snippet": { "text": f.snippet },
                        },
                    },
                }],
                "partialFingerprints": { "heraldAudit/v1": f.fingerprint },
            })
        })
        .collect();
    let notifications: Vec<Value> = report
        .skipped
        .iter()
        .map(|s| {
            json!({
                "level": "warning",
                "message": { "text": format!("not parsed, skipped: {}", s.reason) },
                "locations": [{
                    "physicalLocation": {
                        "artifactLocation": { "uri": uri(&s.path) },
                        "region": { "startLine": s.line.max(1) },
                    },
                }],
            })
        })
        .collect();
    // What was assumed of each application goes in the run's property bag: it is not a
    // problem with the run, so not a notification.
    let assumed: Vec<Value> = report
        .assumed
        .iter()
        .map(|a| json!({ "path": a.path, "configuration": a.summary, "unchecked": a.unchecked }))
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "herald-audit",
                    "version": env!("CARGO_PKG_VERSION"),
                    "rules": rules,
                },
            },
            "invocations": [{
                "executionSuccessful": true,
                "toolExecutionNotifications": notifications,
            }],
            "results": results,
            "properties": { "heraldAudit/assumed": assumed },
        }],
    })
}
