//! Input never reaches a panic: every prefix of the fixture files (cut mid-token,
//! mid-string, mid-closure) and a few hostile files are either audited or listed as
//! skipped with a reason, and the parser's panic guard is never the one that caught it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use herald_audit::audit;
use std::path::Path;

/// The reason a file gets when the parser panicked (a bug this test exists to catch).
const PARSER_PANIC: &str = "the PHP parser failed on this file";

fn sources() -> Vec<Vec<u8>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mysql-app/app/Services");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root).unwrap() {
        out.push(std::fs::read(entry.unwrap().path()).unwrap());
    }
    out
}

#[test]
fn every_prefix_of_a_real_file_is_audited_or_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let mut written = 0;
    for (i, source) in sources().iter().enumerate() {
        for cut in (0..source.len()).step_by(37) {
            std::fs::write(dir.path().join(format!("f{i}_{cut}.php")), &source[..cut]).unwrap();
            written += 1;
        }
    }
    let report = audit(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(report.files_scanned + report.skipped.len(), written);
    assert!(
        report.skipped.len() > written / 2,
        "most prefixes do not parse: {}",
        report.skipped.len()
    );
    for s in &report.skipped {
        assert_ne!(s.reason, PARSER_PANIC, "{}", s.path);
        assert!(!s.reason.is_empty(), "{}: no reason", s.path);
    }
}

#[test]
fn hostile_files_are_skipped_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let deep = format!("<?php\n$x = {}1{};\n", "(".repeat(5000), ")".repeat(5000));
    let calls = format!("<?php\n{}\n", "f(".repeat(3000));
    let cases: [(&str, Vec<u8>); 5] = [
        ("binary.php", (0..=255u8).cycle().take(4096).collect()),
        ("deep.php", deep.into_bytes()),
        ("calls.php", calls.into_bytes()),
        ("latin1.php", b"<?php\n$s = '\xe9t\xe9';\n".to_vec()),
        ("empty.php", Vec::new()),
    ];
    for (name, text) in &cases {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    let report = audit(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(report.files_scanned + report.skipped.len(), cases.len());
    for s in &report.skipped {
        assert_ne!(s.reason, PARSER_PANIC, "{}", s.path);
    }
    let skipped: Vec<&str> =
        report.skipped.iter().map(|s| s.path.rsplit('/').next().unwrap()).collect();
    assert!(skipped.contains(&"deep.php") && skipped.contains(&"calls.php"), "{skipped:?}");
}

#[test]
fn an_unparsable_file_is_named_and_the_rest_still_audited() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("broken.php"), "<?php\n\nclass {\n").unwrap();
    std::fs::write(
        dir.path().join("bug.php"),
        "<?php\nuse Illuminate\\Support\\Facades\\DB;\nDB::transaction(fn () => \\Illuminate\\Support\\Facades\\Http::post('https://x'), 3);\n",
    )
    .unwrap();
    let report = audit(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(report.skipped.len(), 1);
    assert!(report.skipped[0].path.ends_with("broken.php"));
    assert_eq!(report.skipped[0].line, 3);
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    assert_eq!((report.findings[0].rule.id(), report.findings[0].line), ("retried-effect", 3));
}

/// Issue 39: a flat concatenation of 250 parts skipped its whole file as "nested deeper
/// than 400 levels"; its operands are now lowered side by side and the file is audited.
#[test]
fn a_long_flat_expression_is_parsed_not_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let parts: Vec<String> = (0..2000).map(|i| format!("'p{i}'")).collect();
    let source = format!(
        "<?php\nuse Illuminate\\Support\\Facades\\DB;\nuse Illuminate\\Support\\Facades\\Http;\n$sql = {};\nDB::transaction(fn () => Http::post('https://x', [$sql]), 3);\n",
        parts.join(" . ")
    );
    std::fs::write(dir.path().join("flat.php"), source).unwrap();
    let report = audit(&[dir.path().to_path_buf()]).unwrap();
    assert!(report.skipped.is_empty(), "{:?}", report.skipped);
    assert_eq!(report.findings.len(), 1, "{:?}", report.findings);
    assert_eq!((report.findings[0].rule.id(), report.findings[0].line), ("retried-effect", 5));
}

/// A transaction closure that reaches itself through a variable (seen in phpvms) is walked
/// once, not until the stack overflows.
#[test]
fn a_transaction_closure_that_reaches_itself_ends() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("again.php"),
        "<?php\nuse Illuminate\\Support\\Facades\\DB;\nuse Illuminate\\Support\\Facades\\Http;\nfunction again() {\n    $work = function () use (&$work) {\n        DB::table('t')->insert(['a' => 1]);\n        Http::post('https://x');\n        DB::transaction($work);\n    };\n    DB::transaction($work);\n}\n",
    )
    .unwrap();
    let report = audit(&[dir.path().to_path_buf()]).unwrap();
    let found: Vec<(&str, u32)> = report.findings.iter().map(|f| (f.rule.id(), f.line)).collect();
    assert_eq!(found, [("stranded-effect", 7)], "{:?}", report.findings);
}

/// A query builder chain of hundreds of calls inside a transaction (UNIT3D's search DTO
/// has 90) is typed once per call, not twice: 2^n would never end.
#[test]
fn a_long_call_chain_is_typed_in_linear_time() {
    let dir = tempfile::tempdir().unwrap();
    let chain: String =
        (0..300).map(|i| format!("->when($f{i}, fn ($q) => $q->where('c{i}', 1))")).collect();
    std::fs::write(
        dir.path().join("chain.php"),
        format!(
            "<?php\nuse Illuminate\\Support\\Facades\\DB;\nuse Illuminate\\Support\\Facades\\Http;\nDB::transaction(function () {{\n    DB::table('t'){chain}->update(['a' => 1]);\n    Http::post('https://x');\n}}, 3);\n"
        ),
    )
    .unwrap();
    let report = audit(&[dir.path().to_path_buf()]).unwrap();
    let found: Vec<(&str, u32)> = report.findings.iter().map(|f| (f.rule.id(), f.line)).collect();
    assert_eq!(found, [("retried-effect", 6)], "{:?}", report.findings);
}
