//! Bugs planted in real applications of the corpus (`tests/planted_in_apps.json`, issue
//! 39 point 5): each application is copied to a temporary directory, the planted methods
//! are appended to its classes, and the audit must find every `// PLANT: RULE` line and
//! stay silent on every `// OK: RULE` line. Needs the applications, so it runs when
//! HERALD_AUDIT_CORPUS names the corpus directory (as `tests/corpus.rs`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::print_stdout)]

use herald_audit::{Assume, Options, audit_with};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        let kind = entry.file_type().unwrap();
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// Appends `code` before the class's closing brace and `imports` after the namespace.
fn plant(file: &Path, code: &str, imports: &[String]) {
    let mut text = std::fs::read_to_string(file).unwrap();
    let end = text.trim_end().rfind('}').expect("a closing brace");
    text.insert_str(end, code);
    for import in imports {
        if !text.contains(import.as_str()) {
            let ns_end =
                text.find("namespace ").and_then(|i| text[i..].find(';').map(|j| i + j + 1));
            let at = ns_end.expect("a namespace");
            text.insert_str(at, &format!("\n\n{import}"));
        }
    }
    std::fs::write(file, text).unwrap();
}

/// (kind, rule, path, line) of every marker in the planted files.
fn markers(root: &Path, files: &[String]) -> Vec<(String, String, String, u32)> {
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(root.join(f)).unwrap();
        for (i, line) in text.lines().enumerate() {
            for kind in ["PLANT", "OK"] {
                if let Some(at) = line.find(&format!("// {kind}: ")) {
                    let rule = line[at + kind.len() + 4..].trim().to_string();
                    out.push((kind.to_string(), rule, f.clone(), u32::try_from(i + 1).unwrap()));
                }
            }
        }
    }
    out
}

fn findings(root: &Path, assume: &[&str]) -> BTreeSet<(String, String, u32)> {
    let assume = Assume::parse(&assume.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
    let report = audit_with(&[root.to_path_buf()], &Options { assume }).unwrap();
    let prefix = format!("{}/", root.display());
    report
        .findings
        .iter()
        .map(|f| (f.rule.id().to_string(), f.path.trim_start_matches(&prefix).to_string(), f.line))
        .collect()
}

#[test]
fn bugs_planted_in_real_applications_are_found() {
    let Some(corpus) = std::env::var_os("HERALD_AUDIT_CORPUS").map(PathBuf::from) else {
        eprintln!("skipped: HERALD_AUDIT_CORPUS is not set");
        return;
    };
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/planted_in_apps.json");
    let plants: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let (mut planted, mut found, mut correct, mut alarms) = (0, 0, 0, 0);
    let mut missed = Vec::new();
    for app in plants["applications"].as_array().unwrap() {
        let name = app["name"].as_str().unwrap();
        let dir = tempfile::tempdir().unwrap();
        copy_tree(&corpus.join(name), dir.path());
        let mut files = Vec::new();
        for (file, code) in app["methods"].as_object().unwrap() {
            let imports: Vec<String> = app["imports"][file.as_str()]
                .as_array()
                .map(|a| a.iter().map(|v| v.as_str().unwrap().to_string()).collect())
                .unwrap_or_default();
            plant(&dir.path().join(file), code.as_str().unwrap(), &imports);
            files.push(file.clone());
        }
        let default = findings(dir.path(), &[]);
        let pgsql = findings(dir.path(), &["db=pgsql"]);
        for (kind, rule, file, line) in markers(dir.path(), &files) {
            let set = if rule == "poisoned-transaction" { &pgsql } else { &default };
            if kind == "PLANT" {
                planted += 1;
                if set.contains(&(rule.clone(), file.clone(), line)) {
                    found += 1;
                } else {
                    missed.push(format!("{name}/{file}:{line} {rule}"));
                }
            } else {
                correct += 1;
                if set.iter().any(|(_, p, l)| *p == file && *l == line) {
                    alarms += 1;
                    missed.push(format!("false alarm: {name}/{file}:{line} {rule}"));
                }
            }
        }
    }
    println!(
        "planted in real applications: {found} of {planted} found; {alarms} false alarms on {correct} correct variants"
    );
    assert!(planted >= 20, "{planted} planted");
    assert!(found * 10 >= planted * 9, "recall under 90 %: {missed:#?}");
    assert!(alarms * 30 <= correct.max(30), "{missed:#?}");
}
