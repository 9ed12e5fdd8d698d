//! The PHP package's submit, measured as an application makes it (issue 35's acceptance):
//! C PHP processes (`clients/php/bench/submit.php`), each on its own PDO connection,
//! submitting through `Herald\Herald::submit` one autocommitted call at a time — v2 with
//! the fingerprint computed in PHP, or v1 with it left to the database. The clock runs
//! from the moment every process has connected and said `ready` to the last `done`, so
//! PHP's start and the connections are not in it (as the pool is filled before the other
//! phases). Skipped, saying so, without `php` and the backend's PDO driver.

use anyhow::{Context, Result, bail};
use herald::TenantId;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

/// The script each process runs, in this checkout.
fn script() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../clients/php/bench/submit.php"))
}

/// How the PHP processes reach the bench's database: PDO's DSN, user, password, and
/// herald's namespace (the schema on PostgreSQL, the database on MariaDB).
#[derive(Debug)]
pub(super) struct PhpTarget {
    dsn: String,
    user: String,
    password: String,
    namespace: String,
    driver: &'static str,
}

impl PhpTarget {
    /// From the bench's URL (`BenchSchema::url`: the schema as the `search_path` option on
    /// PostgreSQL, the URL's database on MariaDB).
    pub(super) fn of(url: &str) -> Result<PhpTarget> {
        let u = url::Url::parse(url).context("the bench's database URL")?;
        let decode = |s: &str| {
            url::form_urlencoded::parse(format!("x={s}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        };
        let host = u.host_str().unwrap_or("localhost").to_string();
        let database = u.path().trim_start_matches('/').to_string();
        let (driver, dsn, namespace) = if u.scheme().starts_with("postgres") {
            let options = u.query_pairs().find(|(k, _)| k == "options").map(|(_, v)| v);
            let schema = options
                .as_deref()
                .and_then(|o| o.split("search_path=").nth(1))
                .map(|s| s.split_whitespace().next().unwrap_or(s).to_string())
                .context("the bench's URL names no schema")?;
            let port = u.port().unwrap_or(5432);
            ("pdo_pgsql", format!("pgsql:host={host};port={port};dbname={database}"), schema)
        } else {
            let port = u.port().unwrap_or(3306);
            let dsn = format!("mysql:host={host};port={port};dbname={database};charset=utf8mb4");
            ("pdo_mysql", dsn, database)
        };
        Ok(PhpTarget {
            dsn,
            user: decode(u.username()),
            password: decode(u.password().unwrap_or("")),
            namespace,
            driver,
        })
    }

    /// Whether PHP with this backend's PDO driver and the script are here; if not, why.
    pub(super) async fn missing(&self) -> Option<String> {
        if !script().is_file() {
            return Some(format!("{} not found (a source checkout has it)", script().display()));
        }
        let probe = Command::new("php")
            .args(["-r", &format!("exit(extension_loaded('{}') ? 0 : 1);", self.driver)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .await;
        match probe {
            Ok(s) if s.success() => None,
            Ok(_) => Some(format!("php has no {} extension", self.driver)),
            Err(_) => Some("no php on PATH (Debian: php-cli php-pgsql php-mysql)".into()),
        }
    }

    /// `n` submits of `payload` from `processes` PHP processes (`v2`: the fingerprint
    /// computed in PHP), keys `prefix-i`, spread over `tenants`: the time from every
    /// process ready to the last one done.
    pub(super) async fn submit(
        &self,
        processes: usize,
        n: usize,
        prefix: &str,
        payload: &str,
        v2: bool,
        tenants: &[TenantId],
    ) -> Result<Duration> {
        let dir = tempfile_dir()?;
        let payload_file = dir.join(format!("{prefix}.json"));
        std::fs::write(&payload_file, payload)?;
        let tenants = tenants.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(",");
        let mut children = Vec::new();
        for process in 0..processes {
            let mut child = self
                .php()
                .args([process.to_string(), processes.to_string(), n.to_string()])
                .arg(prefix)
                .arg(&payload_file)
                .arg(if v2 { "v2" } else { "v1" })
                .env("HERALD_BENCH_TENANTS", &tenants)
                .spawn()
                .context("starting php")?;
            let stdout = BufReader::new(child.stdout.take().context("php's stdout")?);
            children.push((child, stdout.lines()));
        }
        for (_, lines) in &mut children {
            expect_line(lines, "ready").await?;
        }
        let started = Instant::now();
        for (child, _) in &mut children {
            let stdin = child.stdin.as_mut().context("php's stdin")?;
            stdin.write_all(b"go\n").await?;
            stdin.flush().await?;
        }
        let mut submitted = 0;
        for (_, lines) in &mut children {
            let done = expect_line(lines, "done").await?;
            submitted += done.trim_start_matches("done ").parse::<usize>().unwrap_or(0);
        }
        let elapsed = started.elapsed();
        for (child, _) in &mut children {
            wait_ok(child).await?;
        }
        let _ = std::fs::remove_dir_all(&dir);
        if submitted != n {
            bail!("the PHP processes submitted {submitted} of {n}");
        }
        Ok(elapsed)
    }
}

/// One PHP process submitting on request (`submit.php latency`): the commit-to-start
/// phase's application, one autocommitted submit per [`PhpSession::submit`].
pub(super) struct PhpSession {
    child: Child,
    io: tokio::sync::Mutex<(
        tokio::process::ChildStdin,
        tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    )>,
}

impl PhpTarget {
    /// `php submit.php`, its connection in the environment, stdin and stdout piped: the
    /// caller adds the arguments.
    fn php(&self) -> Command {
        let mut php = Command::new("php");
        php.arg(script())
            .env("HERALD_BENCH_DSN", &self.dsn)
            .env("HERALD_BENCH_USER", &self.user)
            .env("HERALD_BENCH_PASSWORD", &self.password)
            .env("HERALD_BENCH_NAMESPACE", &self.namespace)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        php
    }

    pub(super) async fn session(&self) -> Result<PhpSession> {
        let mut child = self.php().arg("latency").spawn().context("starting php")?;
        let stdin = child.stdin.take().context("php's stdin")?;
        let mut lines = BufReader::new(child.stdout.take().context("php's stdout")?).lines();
        expect_line(&mut lines, "ready").await?;
        Ok(PhpSession { child, io: tokio::sync::Mutex::new((stdin, lines)) })
    }
}

impl PhpSession {
    /// Submits `key` for `tenant`; returns once PHP has it committed (and, on MariaDB,
    /// has sent its wake-ups): the delivery's id.
    pub(super) async fn submit(&self, key: &str, tenant: TenantId) -> Result<herald::DeliveryId> {
        let mut io = self.io.lock().await;
        let (stdin, lines) = &mut *io;
        stdin.write_all(format!("{key} {tenant}\n").as_bytes()).await?;
        stdin.flush().await?;
        let ok = expect_line(lines, "ok").await?;
        let id = ok.trim_start_matches("ok ").trim();
        Ok(herald::DeliveryId::from(
            uuid::Uuid::parse_str(id).with_context(|| format!("PHP answered {ok:?}"))?,
        ))
    }

    /// Ends the process (its stdin closed) and checks that it exited cleanly.
    pub(super) async fn finish(self) -> Result<()> {
        let PhpSession { mut child, io } = self;
        drop(io.into_inner());
        wait_ok(&mut child).await
    }
}

/// The next line of a process's stdout, which must start with `word`.
async fn expect_line(
    lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    word: &str,
) -> Result<String> {
    let line = tokio::time::timeout(Duration::from_secs(300), lines.next_line())
        .await
        .with_context(|| format!("a PHP process did not say {word} within 300 s"))??;
    match line {
        Some(line) if line.starts_with(word) => Ok(line),
        other => bail!("a PHP process said {other:?} where {word} was due (its stderr is above)"),
    }
}

async fn wait_ok(child: &mut Child) -> Result<()> {
    let status = child.wait().await?;
    if !status.success() {
        bail!("a PHP process ended with {status}");
    }
    Ok(())
}

/// A fresh directory for the payload file.
fn tempfile_dir() -> Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("herald-bench-php-{}", uuid::Uuid::now_v7()));
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}
