//! The PHP package (`clients/php`) on real Laravel: Debian's Laravel 8.83 and PHPUnit, the
//! application's own connection to PostgreSQL or MariaDB, a running `herald serve`
//! sending webhooks to a real receiver. This file sets the stage — herald's schema (or
//! database) migrated and granted to the application's role, the application's own schema
//! (or database), the server, the receiver — runs the PHPUnit suite with environment
//! variables naming all of it, requires it to pass, and then checks the receiver: every
//! delivery the suite expects arrived exactly once, and nothing a rolled-back transaction
//! submitted ever did.
//!
//! The suite itself (clients/php/tests) is where seeds 000, 001 and 004 are played: a real
//! deadlock under `DB::transaction($fn, 5)`, 16 PHP processes submitting one status change,
//! a PHP process SIGKILLed right after its commit, receipts across processes, the webhook
//! receiver helper under `php -S` given the same webhook twice.

use crate::support::*;
use base64::Engine as _;

/// Bound on one PHPUnit run (it takes a few seconds; the deadlock waits out
/// PostgreSQL's one-second deadlock_timeout).
const SUITE_BOUND: Duration = Duration::from_secs(180);

/// The PHP extensions each backend's half of the suite loads.
const PHP_EXTENSIONS_PG: [&str; 3] = ["pdo_pgsql", "pgsql", "posix"];
const PHP_EXTENSIONS_MY: [&str; 3] = ["pdo_mysql", "mysqli", "posix"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_package_on_laravel_with_postgres() {
    let Some(base) = postgres_url() else {
        eprintln!("skipped: {POSTGRES_ENV} is not set");
        return;
    };
    let Some(phpunit) = php_tools(&PHP_EXTENSIONS_PG) else { return };
    let herald_schema = PgSchema::create(&base).await;
    let app_schema = PgSchema::create(&base).await;
    let url = Parts::of(&base);
    let env = vec![
        ("HERALD_TEST_DB_DRIVER", "pgsql".to_string()),
        ("HERALD_TEST_DB_NAME", url.database.clone()),
        ("HERALD_TEST_APP_SCHEMA", app_schema.schema.clone()),
        ("HERALD_TEST_HERALD_NAMESPACE", herald_schema.schema.clone()),
    ];
    let db = SharedDb::Postgres(herald_schema);
    run_suite(&phpunit, &db, &url, env).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn php_package_on_laravel_with_mariadb() {
    let Some(base) = mysql_url() else {
        eprintln!("skipped: {MYSQL_ENV} is not set");
        return;
    };
    let Some(phpunit) = php_tools(&PHP_EXTENSIONS_MY) else { return };
    let herald_db = MyDatabase::create(&base).await;
    let app_db = MyDatabase::create(&base).await;
    let url = Parts::of(&base);
    let env = vec![
        ("HERALD_TEST_DB_DRIVER", "mysql".to_string()),
        ("HERALD_TEST_DB_NAME", app_db.name.clone()),
        ("HERALD_TEST_HERALD_NAMESPACE", herald_db.name.clone()),
    ];
    let db = SharedDb::MySql(herald_db);
    run_suite(&phpunit, &db, &url, env).await;
}

/// Migrates, grants, starts the server and the receiver, runs PHPUnit, checks the receiver.
async fn run_suite(phpunit: &Path, db: &SharedDb, url: &Parts, backend_env: Vec<(&str, String)>) {
    let cwd = tempfile::tempdir().expect("tempdir");
    let work = tempfile::tempdir().expect("tempdir for the suite's files");
    let name = db.name();
    expect_exit_0(&herald(cwd.path(), &["migrate", "--db", db.url()], &[]).await, "herald migrate");
    // The application's role (the URL's user) may submit for every tenant the suite makes.
    let grant =
        herald(cwd.path(), &["sql", "grant", &url.user, "--all-tenants", "--db", db.url()], &[])
            .await;
    expect_exit_0(&grant, "herald sql grant");

    let mut receiver = Receiver::start(false).await;
    let relay = SmtpRelay::start(work.path());
    let smtp_url = format!("smtp://127.0.0.1:{}", relay.port);
    let mut env: Vec<(&str, &str)> = FAST.to_vec();
    env.extend([("HERALD_SMTP_URL", smtp_url.as_str()), ("HERALD_SMTP_FROM", MAIL_FROM)]);
    let server = Proc::serve("serve", cwd.path(), &["--db", db.url()], &env).await;

    let mut cmd = Command::new(phpunit);
    cmd.current_dir(clients_php())
        .env("HERALD_TEST_DB_HOST", &url.host)
        .env("HERALD_TEST_DB_PORT", &url.port)
        .env("HERALD_TEST_DB_USER", &url.user)
        .env("HERALD_TEST_DB_PASSWORD", &url.password)
        .env("HERALD_TEST_URL", format!("http://{}", server.addr))
        .env("HERALD_TEST_ADMIN_KEY", ADMIN_KEY)
        .env("HERALD_TEST_RECEIVER_URL", format!("http://{}/hooks", receiver.addr))
        .env("HERALD_TEST_WORK_DIR", work.path())
        .env("HERALD_TEST_SMTP_MESSAGES", &relay.messages)
        .env("HERALD_TEST_MAIL_FROM", MAIL_FROM)
        .envs(backend_env.iter().map(|(k, v)| (*k, v.as_str())));
    let started = Instant::now();
    let (passed, output) = run_in_group(cmd).await;
    assert!(
        passed,
        "the PHP suite failed on {name}:\n{output}\nherald serve's stderr:\n{}\nphp -S log:\n{}",
        server.stderr(),
        std::fs::read_to_string(work.path().join("php-server.log")).unwrap_or_default()
    );
    assert!(
        output.contains("OK (") && !output.contains("Skipped") && !output.contains("Incomplete"),
        "the PHP suite on {name} must pass whole, nothing skipped:\n{output}"
    );
    eprintln!(
        "PHP suite on {name}: {} in {:?}",
        output.lines().last().unwrap_or(""),
        started.elapsed()
    );

    // Every delivery the suite committed reaches the receiver, once.
    let once = read_lines(&work.path().join("expect-once.jsonl"));
    let never = read_lines(&work.path().join("expect-never.jsonl"));
    let expected: BTreeMap<String, String> = once
        .iter()
        .map(|l| (l["id"].as_str().unwrap().to_string(), l["case"].as_str().unwrap().to_string()))
        .collect();
    assert!(expected.len() >= 8, "the suite recorded too few deliveries to check: {expected:?}");
    let mut seen = BTreeSet::new();
    while !expected.keys().all(|id| seen.contains(id)) {
        seen.insert(receiver.next(DELIVERY_BOUND, &server).await.id);
    }
    // Then the queue drains (nothing pending or sending), so a late duplicate would show.
    let queued = "SELECT count(*) FROM deliveries WHERE state IN ('pending', 'sending')";
    let drained = tokio::time::timeout(DELIVERY_BOUND, async {
        while db.count(queued, None).await > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(drained.is_ok(), "{name}: deliveries still queued: {:?}", db.states().await);

    let hits = receiver.all();
    let mut per_id: BTreeMap<&str, usize> = BTreeMap::new();
    for hit in &hits {
        *per_id.entry(hit.id.as_str()).or_default() += 1;
    }
    for (id, case) in &expected {
        assert_eq!(
            per_id.get(id.as_str()),
            Some(&1),
            "{name}: {case} ({id}) must arrive exactly once"
        );
    }
    // Every mail the suite committed reached the relay once (byte for byte: the suite checks
    // each message's bytes as it arrives), and no rolled-back one ever did.
    let mails = read_lines(&relay.messages);
    for line in read_lines(&work.path().join("expect-mail.jsonl")) {
        let (id, case) = (line["id"].as_str().unwrap(), line["case"].as_str().unwrap());
        let message_id = format!("<{id}@{}>", MAIL_FROM.split('@').nth(1).unwrap());
        let copies = mails.iter().filter(|m| m["message_id"] == message_id.as_str()).count();
        assert_eq!(copies, 1, "{name}: the mail {case} ({id}) must reach the relay exactly once");
    }
    for line in &never {
        let marker = line["marker"].as_str().unwrap();
        let leaked = mails.iter().filter(|m| {
            m["raw"].as_str().is_some_and(|raw| {
                let bytes =
                    base64::engine::general_purpose::STANDARD.decode(raw).unwrap_or_default();
                // Quoted-printable text breaks lines anywhere with `=` CRLF; a marker's own
                // characters (letters, digits, `-`) are never encoded.
                String::from_utf8_lossy(&bytes).replace("=\r\n", "").contains(marker)
            })
        });
        assert_eq!(leaked.count(), 0, "{name}: a rolled-back mail ({marker}) was sent");
    }
    let unexpected: Vec<_> = per_id.keys().filter(|id| !expected.contains_key(**id)).collect();
    assert!(unexpected.is_empty(), "{name}: deliveries the suite did not commit: {unexpected:?}");
    assert!(!never.is_empty(), "the suite recorded no rolled-back submit to check");
    for line in &never {
        let marker = line["marker"].as_str().unwrap();
        let leaked: Vec<_> = hits.iter().filter(|h| h.body.contains(marker)).collect();
        assert!(leaked.is_empty(), "{name}: a rolled-back submit was sent: {leaked:?}");
    }
}

/// herald's sender in the suite (`HERALD_SMTP_FROM`): Message-IDs end in its domain.
const MAIL_FROM: &str = "herald@shop.example";

/// The SMTP relay of the herald crate's email tests (aiosmtpd), writing every accepted
/// message to `messages` as one JSON line (envelope, Message-ID, raw bytes in base64).
struct SmtpRelay {
    child: std::process::Child,
    port: u16,
    messages: PathBuf,
}

impl SmtpRelay {
    fn start(dir: &Path) -> SmtpRelay {
        let python = python_with(&["aiosmtpd"]).expect("the PHP suite needs aiosmtpd");
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../herald/tests/support/smtp_server.py");
        let messages = dir.join("smtp-messages.jsonl");
        let mut child = std::process::Command::new(python)
            .arg(&script)
            .arg(&messages)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the SMTP relay");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().expect("piped")),
            &mut line,
        )
        .expect("the relay's port");
        let port = line.trim().parse().unwrap_or_else(|_| panic!("the relay printed {line:?}"));
        SmtpRelay { child, port, messages }
    }
}

impl Drop for SmtpRelay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs PHPUnit to its end within SUITE_BOUND in a process group of its own, which is
/// SIGKILLed whole when this returns or panics: the suite's `php -S` receiver and worker
/// processes go with it, also when PHPUnit itself is killed before it could stop them.
async fn run_in_group(mut cmd: Command) -> (bool, String) {
    struct Group(u32);
    impl Drop for Group {
        fn drop(&mut self) {
            let _ = std::process::Command::new("kill")
                .args(["-s", "KILL", "--", &format!("-{}", self.0)])
                .stderr(Stdio::null())
                .status();
        }
    }
    cmd.process_group(0).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.kill_on_drop(true).spawn().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let pid = child.id().expect("a running child has an id");
    // Never 0 or 1: `kill -- -0` would be this test's own group, `-1` every process.
    assert!(pid > 1, "phpunit's pid {pid}");
    let _group = Group(pid);
    let out = tokio::time::timeout(SUITE_BOUND, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("the PHP suite did not finish within {SUITE_BOUND:?}"))
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let text =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// phpunit and a php with `extensions` and Debian's Laravel, or a skip (a failure under CI).
fn php_tools(extensions: &[&str]) -> Option<PathBuf> {
    let skip = |why: String| {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but {why}: apt-get install php-cli php-pgsql php-mysql phpunit php-laravel-framework"
        );
        eprintln!("skipped: {why}");
        None
    };
    let phpunit = std::env::var("HERALD_TEST_PHPUNIT").unwrap_or_else(|_| "phpunit".to_string());
    let php = std::env::var("HERALD_TEST_PHP").unwrap_or_else(|_| "php".to_string());
    let check = extensions
        .iter()
        .map(|e| format!("extension_loaded('{e}') || exit(3);"))
        .chain(["stream_resolve_include_path('Illuminate/Foundation/Application.php') || exit(4);"
            .to_string()])
        .collect::<String>();
    match std::process::Command::new(&php).args(["-r", &check]).status() {
        Ok(s) if s.success() => {}
        Ok(s) if s.code() == Some(3) => return skip(format!("{php} lacks one of {extensions:?}")),
        Ok(s) if s.code() == Some(4) => {
            return skip("Laravel (php-laravel-framework) is missing".into());
        }
        Ok(s) => return skip(format!("{php} -r failed: {s}")),
        Err(e) => return skip(format!("no {php}: {e}")),
    }
    match std::process::Command::new(&phpunit).arg("--version").output() {
        Ok(out) if out.status.success() => Some(PathBuf::from(phpunit)),
        Ok(out) => {
            skip(format!("{phpunit} --version failed: {}", String::from_utf8_lossy(&out.stderr)))
        }
        Err(e) => skip(format!("no {phpunit}: {e}")),
    }
}

fn clients_php() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/php")
}

fn expect_exit_0(run: &Run, what: &str) {
    assert_eq!(run.code, Some(0), "{what}: {run:#?}");
}

fn read_lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: {l:?}: {e}", path.display()))
        })
        .collect()
}

/// A database URL's parts, as PHP's connection config takes them.
struct Parts {
    user: String,
    password: String,
    host: String,
    port: String,
    database: String,
}

impl Parts {
    /// `scheme://user[:password]@host[:port]/database[?…]`.
    fn of(url: &str) -> Parts {
        let (_, rest) = url.split_once("://").unwrap_or_else(|| panic!("not a URL: {url}"));
        let rest = rest.split('?').next().unwrap_or_default();
        let (authority, database) = rest.split_once('/').unwrap_or((rest, ""));
        let (credentials, address) = authority.rsplit_once('@').unwrap_or(("", authority));
        let (user, password) = credentials.split_once(':').unwrap_or((credentials, ""));
        let default_port = if url.starts_with("postgres") { "5432" } else { "3306" };
        let (host, port) = address.rsplit_once(':').unwrap_or((address, default_port));
        assert!(
            !user.is_empty() && !database.is_empty(),
            "the URL needs a user and a database: {url}"
        );
        Parts {
            user: user.to_string(),
            password: password.to_string(),
            host: host.to_string(),
            port: port.to_string(),
            database: database.to_string(),
        }
    }
}

/// The example application (examples/laravel-shop, issue 35): its one command, on each
/// server, must end with every placed order's mail and webhook arrived once and nothing for
/// the declined one (the script checks that itself and exits 1 otherwise).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_shop_runs_on_postgres_and_mariadb() {
    let servers =
        [("pgsql", postgres_url(), &PHP_EXTENSIONS_PG), ("mysql", mysql_url(), &PHP_EXTENSIONS_MY)];
    for (driver, url, extensions) in servers {
        let Some(url) = url else {
            eprintln!("skipped {driver}: its URL is not set");
            continue;
        };
        if php_tools(extensions).is_none() {
            return;
        }
        let parts = Parts::of(&url);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/laravel-shop/run");
        let mut cmd = Command::new(script);
        cmd.env("HERALD_BIN", BIN)
            .env("DB_CONNECTION", driver)
            .env("DB_HOST", &parts.host)
            .env("DB_PORT", &parts.port)
            .env("DB_DATABASE", &parts.database)
            .env("DB_USERNAME", &parts.user)
            .env("DB_PASSWORD", &parts.password);
        let (passed, output) = run_in_group(cmd).await;
        assert!(passed, "examples/laravel-shop/run on {driver}:\n{output}");
        for line in [
            "order 1001: one confirmation mail",
            "order 1002: the partner applied its webhook once",
            "the shop works",
        ] {
            assert!(output.contains(line), "{driver}: the run must print {line:?}:\n{output}");
        }
    }
}
