//! README's "Quick start with curl", exactly as written, run with bash against a real
//! `herald serve` (the block reads `HERALD_URL`, defaulting to the server's default
//! address): every command must succeed and every answer be what the comments say.

use crate::support::{Server, run};
use serde_json::Value;
use std::time::Duration;
use tokio::process::Command;

/// The admin key the quick start reads from `HERALD_ADMIN_KEY` (README makes one of 32
/// random bytes in base64, as this one is).
const ADMIN_KEY: &str = "Yq3Jm0xw6R0b2f8ZcT1kV5uN9sA4eH7dL2pG6iK8oQw=";
/// The quick start's webhook target. The test points it at a loopback address instead,
/// which the server refuses to send to (private targets are not allowed), so running the
/// block sends nothing off this machine.
const TARGET: &str = "https://example.com/hooks";
const TARGET_LOCAL: &str = "https://localhost/hooks";

/// The first ```sh block after the "Quick start with curl" heading, then the batch one
/// after it ("Many at once") and the bulk replay ("After an outage"), which go on in the
/// same shell.
fn quick_start_block() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md");
    let readme = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let (_, after) = readme.split_once("### Quick start with curl").expect("the heading");
    let first = sh_block(after);
    let (_, after) = after.split_once("Many at once").expect("the batch paragraph");
    let batch = sh_block(after);
    let (_, after) = after.split_once("After an outage").expect("the bulk paragraph");
    format!("{first}\n{batch}\n{}", sh_block(after))
}

/// The first ```sh block in `text`.
fn sh_block(text: &str) -> &str {
    let (_, block) = text.split_once("```sh\n").expect("a ```sh block");
    let (block, _) = block.split_once("\n```").expect("the block's end");
    block
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readme_quick_start_runs_as_pasted() {
    let block = quick_start_block();
    assert_eq!(block.matches(TARGET).count(), 3, "the quick start's target moved:\n{block}");
    assert!(!block.contains('<'), "a placeholder is left in the quick start:\n{block}");
    let block = block.replace(TARGET, TARGET_LOCAL);
    let server = Server::start(ADMIN_KEY).await;
    let mut bash = Command::new("bash");
    bash.args(["-e", "-u", "-o", "pipefail", "-c", &block])
        .env("HERALD_URL", server.url())
        .env("HERALD_ADMIN_KEY", ADMIN_KEY)
        .current_dir(server.dir.path());
    let (ok, out) = run(bash, Duration::from_secs(60)).await;
    assert!(ok, "the quick start failed:\n{out}\nserver log:\n{}", server.log());

    let answers: Vec<Value> = out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}\n{out}")))
        .collect();
    let [tenant, grant, created, shown, attempts, quotas, batch, counted, replayed] =
        answers.as_slice()
    else {
        panic!("expected nine answers, got {}:\n{out}", answers.len());
    };
    // The bulk replay: the two deliveries go to a target herald refuses (localhost), so
    // each is failed or about to be; the dry run changes nothing, the run replays what
    // it matched (or skips one a worker holds at that moment).
    let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k}: {v}"));
    assert_eq!((counted["dry_run"].clone(), n(counted, "changed")), (true.into(), 0), "{counted}");
    assert!(n(counted, "matched") <= 2, "{counted}");
    assert_eq!(replayed["dry_run"], false, "{replayed}");
    assert!(n(replayed, "matched") <= 2, "{replayed}");
    assert_eq!(
        n(replayed, "changed") + n(replayed, "skipped"),
        n(replayed, "matched"),
        "{replayed}"
    );
    assert_eq!(tenant["name"], "acme", "{tenant}");
    assert!(tenant["api_key"].as_str().is_some_and(|k| k.starts_with("hk_")), "{tenant}");
    assert_eq!((grant["applied"].clone(), grant["granted"].clone()), (true.into(), 100.into()));
    assert_eq!(created["duplicate"], false, "{created}");
    assert_eq!(created["operation_key"], "order-42-ready", "{created}");
    assert_eq!(created["tenant"], tenant["id"], "{created}");
    assert_eq!(shown["id"], created["id"], "{shown}");
    assert!(attempts["attempts"].is_array(), "{attempts}");
    // The batch: a new delivery, then the first one again (a duplicate), each its own.
    assert_eq!(batch["results"][0]["status"], 201, "{batch}");
    assert_eq!(batch["results"][1]["status"], 200, "{batch}");
    assert_eq!(batch["results"][1]["delivery"]["id"], created["id"], "{batch}");
    let webhook = &quotas["quotas"][0];
    assert_eq!(
        (webhook["quota_key"].clone(), webhook["granted"].clone()),
        ("webhook".into(), 100.into())
    );
}
