//! The real-application corpus (issue 39): `tests/corpus.json` names each application,
//! its commit, what the audit assumed of its configuration and every finding with its
//! verdict, read by hand (docs/audit.md). This test always checks the file itself and
//! prints the precision it records; when HERALD_AUDIT_CORPUS names a directory with the
//! applications extracted in it (one sub-directory per name, at the recorded commits; an
//! entry's `path` is where in it the application lives), it
//! audits them again and requires the very same findings — slow, so gated by the variable.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::print_stdout)]

use herald_audit::{Rule, audit};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const APPLICATIONS_MIN: usize = 40;

fn corpus() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// (rule, path, line) → verdict, for one application.
fn findings(app: &Value) -> BTreeMap<(String, String, u64), bool> {
    app["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            let rule = f["rule"].as_str().unwrap();
            assert!(Rule::from_id(rule).is_some(), "unknown rule {rule}");
            let key = (
                rule.to_string(),
                f["path"].as_str().unwrap().to_string(),
                f["line"].as_u64().unwrap(),
            );
            (key, f["true"].as_bool().unwrap())
        })
        .collect()
}

#[test]
fn the_corpus_file_is_complete_and_says_its_precision() {
    let corpus = corpus();
    let apps = corpus["applications"].as_array().unwrap();
    assert!(apps.len() >= APPLICATIONS_MIN, "{} applications", apps.len());
    let mut names = BTreeSet::new();
    let mut per_rule: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for app in apps {
        let name = app["name"].as_str().unwrap();
        assert!(names.insert(name.to_string()), "{name} twice");
        let commit = app["commit"].as_str().unwrap();
        assert!(
            commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
            "{name}: {commit}"
        );
        assert!(app["repository"].as_str().unwrap().contains('/'), "{name}");
        assert!(!app["assumed"].as_str().unwrap().is_empty(), "{name}");
        for ((rule, _, _), verdict) in findings(app) {
            let e = per_rule.entry(rule).or_default();
            e.0 += 1;
            e.1 += usize::from(verdict);
        }
    }
    let (all, true_) = per_rule.values().fold((0, 0), |a, v| (a.0 + v.0, a.1 + v.1));
    for (rule, (n, t)) in &per_rule {
        println!("{rule}: {t} of {n} true ({:.0} %)", 100.0 * *t as f64 / *n as f64);
    }
    println!(
        "all: {true_} of {all} true ({:.1} %) in {} applications",
        100.0 * true_ as f64 / all as f64,
        apps.len()
    );
    assert!(all > 0);
}

#[test]
fn the_applications_give_the_recorded_findings() {
    let Some(root) = std::env::var_os("HERALD_AUDIT_CORPUS").map(PathBuf::from) else {
        eprintln!("skipped: HERALD_AUDIT_CORPUS is not set");
        return;
    };
    for app in corpus()["applications"].as_array().unwrap() {
        let name = app["name"].as_str().unwrap();
        // An application that lives in a sub-directory of its repository (OpnForm's `api/`).
        let dir = match app["path"].as_str() {
            Some(sub) => root.join(name).join(sub),
            None => root.join(name),
        };
        assert!(dir.is_dir(), "{} is missing", dir.display());
        let report = audit(std::slice::from_ref(&dir)).unwrap();
        let prefix = format!("{}/", dir.display());
        let found: BTreeSet<(String, String, u64)> = report
            .findings
            .iter()
            .map(|f| {
                (
                    f.rule.id().to_string(),
                    f.path.trim_start_matches(&prefix).to_string(),
                    u64::from(f.line),
                )
            })
            .collect();
        let recorded: BTreeSet<_> = findings(app).into_keys().collect();
        assert_eq!(found, recorded, "{name}");
        assert_eq!(report.assumed[0].summary, app["assumed"].as_str().unwrap(), "{name}");
    }
}
