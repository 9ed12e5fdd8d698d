//! The fixture trees under tests/fixtures: every line marked `// expect: RULE` must be
//! reported with exactly that rule on exactly that line, and nothing else may be
//! reported. Negative cases are the unmarked lines next to them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use herald_audit::{Rule, audit};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// (rule, path relative to the fixture, line) for every `// expect:` marker.
fn expected(root: &Path) -> BTreeSet<(String, String, u32)> {
    let mut out = BTreeSet::new();
    for (relative, line, rules) in common::marker_lines(root, "// expect: ") {
        for rule in rules.split(',') {
            let rule = rule.trim();
            assert!(
                Rule::from_id(rule).is_some(),
                "{}:{line}: unknown rule {rule}",
                root.join(&relative).display()
            );
            out.insert((rule.to_string(), relative.clone(), line));
        }
    }
    out
}

fn check(name: &str) {
    let root = fixture(name);
    let report = audit(std::slice::from_ref(&root)).expect("audits");
    assert!(report.skipped.is_empty(), "{name}: skipped {:?}", report.skipped);
    let prefix = format!("{}/", root.display());
    let found: BTreeSet<(String, String, u32)> = report
        .findings
        .iter()
        .map(|f| (f.rule.id().to_string(), f.path.trim_start_matches(&prefix).to_string(), f.line))
        .collect();
    assert_eq!(found.len(), report.findings.len(), "{name}: two findings on one line and rule");
    let expected = expected(&root);
    let missing: Vec<_> = expected.difference(&found).collect();
    let unexpected: Vec<_> = found.difference(&expected).collect();
    let messages: Vec<String> = report
        .findings
        .iter()
        .map(|f| format!("{}:{} {} {}", f.path, f.line, f.rule.id(), f.message))
        .collect();
    assert!(
        missing.is_empty() && unexpected.is_empty(),
        "{name}:\nmissing: {missing:#?}\nunexpected: {unexpected:#?}\nall: {messages:#?}"
    );
    assert!(!expected.is_empty(), "{name}: a fixture without a positive case");
}

#[test]
fn mysql_app() {
    check("mysql-app");
}

#[test]
fn pgsql_app() {
    check("pgsql-app");
}

#[test]
fn false_positives_from_real_applications() {
    check("from-apps");
}

/// Every rule has a positive case somewhere in the fixtures.
#[test]
fn every_rule_is_exercised() {
    let mut rules = BTreeSet::new();
    for name in ["mysql-app", "pgsql-app", "from-apps"] {
        for (rule, _, _) in expected(&fixture(name)) {
            rules.insert(rule);
        }
    }
    for rule in herald_audit::RULES {
        assert!(rules.contains(rule.id()), "no positive fixture for {}", rule.id());
    }
}

#[test]
fn messages_name_the_transaction_and_the_path_followed() {
    let report = audit(&[fixture("mysql-app")]).unwrap();
    let find = |file: &str, line: u32| {
        report
            .findings
            .iter()
            .find(|f| f.path.ends_with(file) && f.line == line)
            .unwrap_or_else(|| panic!("{file}:{line}"))
    };
    let via = find("Controllers/CheckoutController.php", 28);
    assert!(via.message.contains("InventoryService::decrement()"), "{}", via.message);
    assert!(via.message.contains("attempts: 5"), "{}", via.message);
    let lock = find("Services/Checkout.php", 39);
    assert!(lock.message.contains("5 × 20 s = 100 s"), "{}", lock.message);
    assert_eq!(
        lock.snippet.split(" //").next().unwrap(),
        "$seat = DB::table('seats')->where('id', $seatId)->lockForUpdate()->first();"
    );
}
