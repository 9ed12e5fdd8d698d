//! What the documentation tests share: a real `herald serve` on a fresh SQLite file and
//! the Python interpreter with the tests' PyPI packages.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const BIN: &str = env!("CARGO_BIN_EXE_herald");
/// Start-up includes creating and migrating the database.
pub const STARTUP: Duration = Duration::from_secs(30);

/// A running `herald serve` in its own directory. Dropping it SIGKILLs the process.
pub struct Server {
    pub addr: SocketAddr,
    pub dir: tempfile::TempDir,
    child: Child,
    stderr: Arc<Mutex<String>>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

impl Server {
    /// `herald serve --listen 127.0.0.1:0` with this admin key, on `herald.db` in a fresh
    /// directory, with none of the test runner's `HERALD_*` settings; waits for its
    /// "listening" line.
    pub async fn start(admin_key: &str) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut cmd = Command::new(BIN);
        cmd.current_dir(dir.path()).stdin(Stdio::null()).kill_on_drop(true);
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if k.starts_with("HERALD_") || k == "RUST_LOG" {
                cmd.env_remove(&key);
            }
        }
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .env("HERALD_ADMIN_KEY", admin_key)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("spawn {BIN}: {e}"));
        let mut lines = BufReader::new(child.stderr.take().expect("piped stderr")).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let listening = tokio::time::timeout(STARTUP, async {
            while let Ok(Some(line)) = lines.next_line().await {
                stderr.lock().unwrap().push_str(&format!("{line}\n"));
                if let Some(addr) = line.split("herald listening on http://").nth(1) {
                    return addr.trim().parse::<SocketAddr>().ok();
                }
            }
            None
        })
        .await;
        let Ok(Some(addr)) = listening else {
            panic!("herald serve did not say it listens:\n{}", stderr.lock().unwrap());
        };
        // Keep draining stderr, so the server never blocks on a full pipe.
        let all = stderr.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                all.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        Server { addr, dir, child, stderr }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// What the server has logged so far.
    pub fn log(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

/// The virtualenv python of `scripts/test-deps` (`HERALD_TEST_PYTHON`) if it has every
/// module in `modules`. Without it the test is skipped with a printed reason, unless `CI`
/// is set: then it fails.
pub fn python_with(modules: &[&str]) -> Option<PathBuf> {
    let skip = |why: String| {
        assert!(std::env::var_os("CI").is_none(), "CI is set but {why}");
        eprintln!("skipped: {why} (export HERALD_TEST_PYTHON=$(scripts/test-deps))");
        None
    };
    let python = match std::env::var("HERALD_TEST_PYTHON") {
        Ok(p) if !p.trim().is_empty() => PathBuf::from(p),
        _ => return skip("HERALD_TEST_PYTHON is not set".into()),
    };
    let imports = format!("import {}", modules.join(", "));
    let ok = std::process::Command::new(&python)
        .args(["-c", &imports])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        return skip(format!("{} cannot `{imports}`", python.display()));
    }
    Some(python)
}

/// The directory of the virtualenv's scripts (`schemathesis`, `ruff`, …).
pub fn bin_dir(python: &Path) -> PathBuf {
    python.parent().expect("python lives in a bin directory").to_path_buf()
}

/// Runs a command to its end within `bound`; returns (success, stdout + stderr).
pub async fn run(mut cmd: Command, bound: Duration) -> (bool, String) {
    cmd.stdin(Stdio::null()).kill_on_drop(true);
    let out = tokio::time::timeout(bound, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("{cmd:?} did not finish within {bound:?}"))
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}
