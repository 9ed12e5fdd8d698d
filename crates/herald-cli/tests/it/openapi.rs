//! herald's OpenAPI document against a real `herald serve`: schemathesis's positive-data
//! check (every request valid by the document is accepted, every answer is one the
//! document lists, in the shape it gives), and a client generated from the document by
//! openapi-python-client running README's quick start. Both from PyPI, installed by
//! `scripts/test-deps`; required when `CI` is set, skipped with a reason otherwise.

use crate::support::{BIN, Server, bin_dir, python_with, run};
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::process::Command;

const ADMIN_KEY: &str = "openapi-admin-key-9e2b7c41d0a85f36e1c4b7a92d08f5";
/// One schemathesis run: a few hundred requests; well under a minute here.
const SCHEMATHESIS_BOUND: Duration = Duration::from_secs(120);
/// Test cases per operation and phase: enough to reach every constraint's edges.
const MAX_EXAMPLES: &str = "30";

fn support() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openapi")
}

/// A command from the virtualenv, with its scripts first on PATH (the generator calls ruff).
fn venv_command(python: &Path, program: &str) -> Command {
    let bin = bin_dir(python);
    let mut cmd = Command::new(bin.join(program));
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin];
    dirs.extend(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(dirs).unwrap());
    cmd
}

/// `herald …` on the server's database, as an operator would; returns stdout as JSON.
async fn herald_json(server: &Server, args: &[&str]) -> serde_json::Value {
    let db = server.dir.path().join("herald.db");
    let mut cmd = Command::new(BIN);
    cmd.args(args).args(["--json", "--db"]).arg(&db).env_remove("HERALD_DB");
    let (ok, out) = run(cmd, Duration::from_secs(30)).await;
    assert!(ok, "herald {args:?}: {out}");
    serde_json::from_str(out.lines().next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("herald {args:?}: not JSON ({e}): {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_accepts_every_valid_request_and_a_generated_client_runs_the_quick_start() {
    let Some(python) = python_with(&["schemathesis", "openapi_python_client"]) else { return };
    let server = Server::start(ADMIN_KEY).await;
    let url = server.url();

    // A client generated from the served document (OpenAPI 3.1), offline: the document
    // comes from this server.
    let out_dir = tempfile::tempdir().unwrap();
    let client = out_dir.path().join("herald_client");
    let mut generate = venv_command(&python, "openapi-python-client");
    generate
        .args(["generate", "--meta", "none", "--url"])
        .arg(format!("{url}/openapi.json"))
        .arg("--output-path")
        .arg(&client)
        .current_dir(out_dir.path());
    let (ok, out) = run(generate, Duration::from_secs(120)).await;
    assert!(ok && client.join("api").is_dir(), "openapi-python-client failed:\n{out}");
    assert!(!out.contains("Endpoint will not be generated"), "an endpoint is missing:\n{out}");
    assert!(!out.contains("Unable to process schema"), "a schema is missing:\n{out}");
    let mut quickstart = Command::new(&python);
    quickstart.arg(support().join("quickstart.py")).arg(out_dir.path()).arg(&url).arg(ADMIN_KEY);
    let (ok, out) = run(quickstart, Duration::from_secs(60)).await;
    assert!(ok, "the quick start through the generated client failed:\n{out}\n{}", server.log());

    // schemathesis, once as a tenant (its calls) and once as the admin (the rest).
    let tenant = herald_json(&server, &["tenant", "create", "schemathesis"]).await;
    let (id, key) = (tenant["id"].as_str().unwrap(), tenant["api_key"].as_str().unwrap());
    herald_json(&server, &["quota", "grant", id, "webhook", "1000000"]).await;
    for (token, operations) in [
        (key, "^/v1/(deliveries|quotas)"),
        (ADMIN_KEY, "^/(v1/tenants|healthz|readyz|metrics|openapi)"),
    ] {
        let mut st = venv_command(&python, "schemathesis");
        st.arg("--config-file")
            .arg(support().join("schemathesis.toml"))
            .arg("run")
            .arg(format!("{url}/openapi.json"))
            .args(["--mode", "positive", "--max-examples", MAX_EXAMPLES, "--no-color"])
            .args(["--generation-database", "none", "--include-path-regex", operations])
            .args([
                "--checks",
                "not_a_server_error,status_code_conformance,content_type_conformance,\
                 response_schema_conformance,positive_data_acceptance",
            ])
            .arg("--header")
            .arg(format!("Authorization: Bearer {token}"))
            // schemathesis keeps a cache in its working directory: not in the sources.
            .current_dir(out_dir.path())
            .env("PYTHONPATH", support())
            .env("SCHEMATHESIS_HOOKS", "hooks");
        let (ok, out) = run(st, SCHEMATHESIS_BOUND).await;
        assert!(
            ok,
            "schemathesis found requests the document allows and herald refuses ({operations}):\n{out}"
        );
        assert!(
            out.contains("Tested:") && !out.contains("Tested: 0"),
            "schemathesis tested nothing ({operations}):\n{out}"
        );
    }
}
