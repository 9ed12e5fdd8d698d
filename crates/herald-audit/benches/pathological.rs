//! `cargo bench -p herald-audit --bench pathological`: inputs made to be costly (issue 39),
//! each generated into a temporary directory and audited three times; prints the median
//! wall time beside the time to merely read the same files, as a ratio measured in the
//! same run. The bar is 2 s each on this project's shared machine.
//!
//! - one generated file with 18,745 findings (each needs its line's text);
//! - 80 methods that call each other inside transactions (every call followed);
//! - a flat concatenation of 5,000 parts (parsed, not skipped as too deep).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::path::Path;
use std::time::{Duration, Instant};

const RUNS: usize = 3;

fn many_findings(dir: &Path) {
    let mut s = String::from(
        "<?php\nuse Illuminate\\Support\\Facades\\DB;\nuse Illuminate\\Support\\Facades\\Http;\n\nDB::transaction(function () {\n",
    );
    for i in 0..18_745 {
        s.push_str(&format!("    Http::post('https://x.example/{i}');\n"));
    }
    s.push_str("}, 3);\n");
    std::fs::write(dir.join("generated.php"), s).unwrap();
}

/// Every method opens a transaction and calls every other method; each of those calls
/// every other method again.
fn calling_each_other(dir: &Path, methods: usize) {
    let mut s = String::from(
        "<?php\nnamespace App;\nuse Illuminate\\Support\\Facades\\DB;\nuse Illuminate\\Support\\Facades\\Http;\n\nclass Mesh\n{\n",
    );
    for i in 0..methods {
        s.push_str(&format!(
            "    public function m{i}()\n    {{\n        DB::transaction(function () {{\n"
        ));
        for j in 0..methods {
            if j != i {
                s.push_str(&format!("            $this->m{j}();\n"));
            }
        }
        s.push_str(&format!(
            "        }}, 3);\n        Http::post('https://x.example/{i}');\n    }}\n"
        ));
    }
    s.push_str("}\n");
    std::fs::write(dir.join("Mesh.php"), s).unwrap();
}

fn flat(dir: &Path) {
    let parts: Vec<String> = (0..5_000).map(|i| format!("'p{i}'")).collect();
    std::fs::write(dir.join("flat.php"), format!("<?php\n$s = {};\n", parts.join(" . "))).unwrap();
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn measure(name: &str, make: impl Fn(&Path)) {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    let root = dir.path().to_path_buf();
    let mut audit = Vec::new();
    let mut read = Vec::new();
    let mut last = None;
    for _ in 0..RUNS {
        let started = Instant::now();
        for entry in std::fs::read_dir(&root).unwrap() {
            assert!(!std::fs::read(entry.unwrap().path()).unwrap().is_empty());
        }
        read.push(started.elapsed());
        let started = Instant::now();
        last = Some(herald_audit::audit(std::slice::from_ref(&root)).expect("audits"));
        audit.push(started.elapsed());
    }
    let report = last.expect("ran");
    let (audit_median, read_median) = (median(audit), median(read));
    println!(
        "{name}: {} findings, {} skipped; audit median {:.3} s over {RUNS} runs (reading alone {:.4} s, {:.0}×)",
        report.findings.len(),
        report.skipped.len(),
        audit_median.as_secs_f64(),
        read_median.as_secs_f64(),
        audit_median.as_secs_f64() / read_median.as_secs_f64().max(1e-9)
    );
}

fn main() {
    measure("generated file, 18,745 findings", many_findings);
    measure("80 methods calling each other in transactions", |d| calling_each_other(d, 80));
    measure("flat concatenation of 5,000 parts", flat);
}
