//! TLS to PostgreSQL through `Store::open`, against a server of the test's own: initdb'd
//! into a temporary directory, listening on a free port, `ssl = on` with a CA and a server
//! certificate made at test time (the `openssl` command), and `hostssl` as the only TCP
//! line in pg_hba.conf, so a connection that is not encrypted is refused. The shared server
//! the other tests use is never reconfigured.
//!
//! Required when `CI` is set; otherwise skipped, with the reason printed, when the
//! PostgreSQL server binaries or `openssl` are missing.

use herald_store::{Store, StoreError, StoreOptions, migrate::schema_version_known};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use tempfile::TempDir;

/// Where Debian and Ubuntu put each PostgreSQL version's server binaries.
const POSTGRES_LIB: &str = "/usr/lib/postgresql";
/// PostgreSQL refuses to run as root; as root the test runs the server as this user.
const SERVER_USER: &str = "postgres";
/// A password in the URLs, which no error may show (the server trusts, so it is unused).
const SECRET: &str = "hunter2";
/// How long `pg_ctl start` may wait for the server to accept connections.
const START_WAIT_S: &str = "30";

#[tokio::test]
async fn postgres_over_tls() {
    let Some(server) = PgServer::start_or_skip() else { return };
    let options = StoreOptions::default();
    let ca = format!("sslrootcert={}", server.ca.display());
    let other_ca = format!("sslrootcert={}", server.other_ca.display());

    // verify-full, by the name in the certificate: connects, migrates, and is encrypted.
    let url = server.url("localhost", &format!("sslmode=verify-full&{ca}"));
    let store =
        Store::open(&url, &options).await.unwrap_or_else(|e| panic!("verify-full: {}", chain(&e)));
    let known = schema_version_known(store.backend());
    let versions = store.schema_versions().await.expect("schema versions");
    assert_eq!(versions.last(), Some(&known), "verify-full: Store::open migrated to {known}");
    assert!(session_is_tls(&store).await, "verify-full: the session is not encrypted");
    store.close().await;

    // require, and prefer (no sslmode, as in libpq): encrypted, the certificate not checked.
    for (host, params) in
        [("localhost", "sslmode=require"), ("127.0.0.1", "sslmode=require"), ("localhost", "")]
    {
        let what = format!("{host} {params:?}");
        let store = Store::open(&server.url(host, params), &options)
            .await
            .unwrap_or_else(|e| panic!("{what}: {}", chain(&e)));
        assert!(session_is_tls(&store).await, "{what}: the session is not encrypted");
        store.close().await;
    }

    // verify-ca checks the issuer but not the name: the address works with our CA. (This
    // is the path on which rustls uses its process-wide provider.)
    let url = server.url("127.0.0.1", &format!("sslmode=verify-ca&{ca}"));
    let store =
        Store::open(&url, &options).await.unwrap_or_else(|e| panic!("verify-ca: {}", chain(&e)));
    assert!(session_is_tls(&store).await, "verify-ca: the session is not encrypted");
    store.close().await;

    // Failures are TLS errors that name the target, never the password.
    let failures = [
        ("verify-full, another CA", "localhost", format!("sslmode=verify-full&{other_ca}")),
        ("verify-ca, another CA", "localhost", format!("sslmode=verify-ca&{other_ca}")),
        (
            "verify-full, a name not in the certificate",
            "127.0.0.1",
            format!("sslmode=verify-full&{ca}"),
        ),
    ];
    for (what, host, params) in failures {
        let err = expect_connect_error(&server.url(host, &params), what).await;
        assert!(
            matches!(err.source, sqlx::Error::Tls(_)),
            "{what}: not a TLS error: {:?}",
            err.source
        );
        err.assert_names(host, server.port, what);
    }

    // Without TLS the server refuses: pg_hba.conf has hostssl lines only. This is what
    // makes the checks above mean "TLS", not "the server allowed whatever came".
    let what = "sslmode=disable";
    let err = expect_connect_error(&server.url("localhost", what), what).await;
    let code = match &err.source {
        sqlx::Error::Database(e) => e.code().map(|c| c.into_owned()),
        other => panic!("{what}: expected the server's refusal, got {other:?}"),
    };
    // 28000 invalid_authorization_specification: "no pg_hba.conf entry … no encryption".
    assert_eq!(code.as_deref(), Some("28000"), "{what}: {}", err.rendered);
    err.assert_names("localhost", server.port, what);

    // Where the server also takes plain sessions, a loopback host under prefer (no
    // sslmode) is plain — TLS there protects nothing and cost the drain two fifths of its
    // rate — while require still encrypts. (Above, the hostssl-only server got prefer's
    // TLS after refusing the plain attempt.)
    append(&server.data.join("pg_hba.conf"), "host all all 127.0.0.1/32 trust\n");
    let reloaded =
        server.command("pg_ctl").arg("reload").arg("-s").arg("-D").arg(&server.data).output();
    assert!(reloaded.is_ok_and(|o| o.status.success()), "pg_ctl reload");
    // The postmaster rereads pg_hba.conf on the signal, shortly after: wait for a plain
    // session to be accepted.
    let plain = server.url("127.0.0.1", "sslmode=disable");
    let started = std::time::Instant::now();
    while <sqlx::PgConnection as sqlx::Connection>::connect(&plain).await.is_err() {
        assert!(started.elapsed() < std::time::Duration::from_secs(10), "plain never allowed");
        tokio::task::yield_now().await;
    }
    for (params, tls) in [("", false), ("sslmode=prefer", false), ("sslmode=require", true)] {
        let store = Store::open(&server.url("127.0.0.1", params), &options)
            .await
            .unwrap_or_else(|e| panic!("{params:?} with plain allowed: {}", chain(&e)));
        assert_eq!(session_is_tls(&store).await, tls, "{params:?} with plain allowed");
        store.close().await;
    }
}

/// A server that answers "no" to the TLS request, as PostgreSQL with `ssl = off` does.
/// Needs no binaries, so it always runs.
#[tokio::test]
async fn require_against_a_server_without_tls_fails_naming_the_target() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("address").port();
    let server = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (mut socket, _) = listener.accept().await.expect("accept");
        // SSLRequest: length 8, code 80877103.
        let mut request = [0u8; 8];
        socket.read_exact(&mut request).await.expect("read the SSLRequest");
        assert_eq!(request, [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f], "not an SSLRequest");
        socket.write_all(b"N").await.expect("answer N");
    });
    let url = format!("postgres://postgres:{SECRET}@127.0.0.1:{port}/herald?sslmode=require");
    let what = "require against a server without TLS";
    let err = expect_connect_error(&url, what).await;
    assert!(matches!(err.source, sqlx::Error::Tls(_)), "{what}: not a TLS error: {:?}", err.source);
    assert!(err.rendered.contains("TLS"), "{what}: the message should say TLS: {}", err.rendered);
    err.assert_names("127.0.0.1", port, what);
    server.await.expect("the fake server saw the SSLRequest");
}

/// A `StoreError::Connect`, taken apart.
struct ConnectError {
    target: String,
    source: sqlx::Error,
    /// The message with its causes, as the CLI prints it.
    rendered: String,
}

impl ConnectError {
    fn assert_names(&self, host: &str, port: u16, what: &str) {
        let at = format!("@{host}:{port}/");
        assert!(self.target.contains(&at), "{what}: the target {:?} should name {at}", self.target);
        assert!(self.rendered.contains(&self.target), "{what}: {}", self.rendered);
        assert!(!self.rendered.contains(SECRET), "{what}: the password leaked: {}", self.rendered);
    }
}

async fn expect_connect_error(url: &str, what: &str) -> ConnectError {
    let err = match Store::open(url, &StoreOptions::default()).await {
        Ok(_) => panic!("{what}: connected, expected a refusal"),
        Err(err) => err,
    };
    let rendered = chain(&err);
    match err {
        StoreError::Connect { target, source } => ConnectError { target, source, rendered },
        other => panic!("{what}: expected a connect error, got {other:?}"),
    }
}

/// The error and its causes, `: `-separated.
fn chain(err: &dyn std::error::Error) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        out.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    out
}

async fn session_is_tls(store: &Store) -> bool {
    let pool = store.postgres_pool().expect("a PostgreSQL store");
    sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(pool)
        .await
        .expect("pg_stat_ssl")
}

/// A PostgreSQL server in a temporary directory, stopped when dropped (also when the test
/// panics): `pg_ctl stop -m immediate`, before the directory is removed.
struct PgServer {
    bin: PathBuf,
    as_root: bool,
    data: PathBuf,
    port: u16,
    ca: PathBuf,
    /// A CA that did not sign the server's certificate.
    other_ca: PathBuf,
    _dir: TempDir,
}

impl PgServer {
    fn start_or_skip() -> Option<PgServer> {
        let required = std::env::var_os("CI").is_some();
        let missing = match (postgres_bin(), openssl_present()) {
            (Some(bin), true) => return Some(PgServer::start(bin)),
            (None, _) => format!("no PostgreSQL server binaries ({POSTGRES_LIB}/*/bin/initdb)"),
            (_, false) => "no openssl command".to_string(),
        };
        assert!(!required, "CI is set but there are {missing}: the TLS test must run in CI");
        println!("skipped: {missing}");
        None
    }

    fn start(bin: PathBuf) -> PgServer {
        let as_root = is_root();
        let dir = tempfile::tempdir().expect("tempdir");
        let tls = dir.path().join("tls");
        std::fs::create_dir(&tls).expect("tls dir");
        make_certificates(&tls);
        if as_root {
            run(Command::new("chown").arg("-R").arg(SERVER_USER).arg(dir.path()), "chown");
        }
        let data = dir.path().join("data");
        let mut server = PgServer {
            bin,
            as_root,
            data,
            port: 0,
            ca: tls.join("ca.pem"),
            other_ca: tls.join("other-ca.pem"),
            _dir: dir,
        };
        run(
            server.command("initdb").arg("-D").arg(&server.data).args([
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ]),
            "initdb",
        );
        // Free now; the server takes it a moment later. Collisions are unlikely and loud.
        server.port =
            TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let socket_dir = server.data.parent().expect("parent").to_path_buf();
        append(
            &server.data.join("postgresql.conf"),
            &format!(
                "\nlisten_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{sockets}'\n\
                 ssl = on\nssl_cert_file = '{cert}'\nssl_key_file = '{key}'\nfsync = off\n",
                port = server.port,
                sockets = socket_dir.display(),
                cert = tls.join("server.crt").display(),
                key = tls.join("server.key").display(),
            ),
        );
        std::fs::write(
            server.data.join("pg_hba.conf"),
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\nhostssl all all ::1/128 trust\n",
        )
        .expect("pg_hba.conf");
        let log = socket_dir.join("server.log");
        let started = server
            .command("pg_ctl")
            .arg("start")
            .args(["-w", "-t", START_WAIT_S, "-s", "-D"])
            .arg(&server.data)
            .arg("-l")
            .arg(&log)
            .output()
            .expect("pg_ctl start");
        assert!(
            started.status.success(),
            "pg_ctl start failed: {}\n{}",
            String::from_utf8_lossy(&started.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        server
    }

    fn url(&self, host: &str, params: &str) -> String {
        format!("postgres://postgres:{SECRET}@{host}:{}/postgres?{params}", self.port)
    }

    /// One of the server's programs, run as the server's user.
    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        let mut command = if self.as_root {
            let mut c = Command::new("runuser");
            c.args(["-u", SERVER_USER, "--"]).arg(program);
            c
        } else {
            Command::new(program)
        };
        // The server's user may not be allowed into the test's working directory.
        command.current_dir(self.data.parent().expect("parent"));
        command
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = self
            .command("pg_ctl")
            .args(["stop", "-m", "immediate", "-s", "-D"])
            .arg(&self.data)
            .output();
    }
}

/// Two CAs, and a certificate for `localhost` (the name only, no address) from the first.
fn make_certificates(dir: &Path) {
    let openssl =
        |args: &[&str], what: &str| run(Command::new("openssl").current_dir(dir).args(args), what);
    let key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2"];
    for (name, subject) in [("ca", "/CN=herald test CA"), ("other-ca", "/CN=herald other CA")] {
        let (key_file, cert_file) = (format!("{name}.key"), format!("{name}.pem"));
        let mut args = vec!["req", "-x509", "-subj", subject];
        args.extend(["-keyout", key_file.as_str(), "-out", cert_file.as_str()]);
        args.extend(key);
        args.extend([
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
        ]);
        openssl(&args, "make a CA");
    }
    let mut args =
        vec!["req", "-x509", "-CA", "ca.pem", "-CAkey", "ca.key", "-subj", "/CN=localhost"];
    args.extend(["-keyout", "server.key", "-out", "server.crt"]);
    args.extend(key);
    args.extend([
        "-addext",
        "subjectAltName=DNS:localhost",
        "-addext",
        "basicConstraints=critical,CA:FALSE",
        "-addext",
        "extendedKeyUsage=serverAuth",
    ]);
    openssl(&args, "make the server certificate");
    // PostgreSQL refuses a key that others can read.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir.join("server.key"), std::fs::Permissions::from_mode(0o600))
        .expect("chmod");
}

/// The newest installed version's bin directory that has initdb.
fn postgres_bin() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir(POSTGRES_LIB)
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn openssl_present() -> bool {
    Command::new("openssl").arg("version").output().is_ok_and(|o| o.status.success())
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("id -u");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

fn run(command: &mut Command, what: &str) {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(out.status.success(), "{what} failed: {}", String::from_utf8_lossy(&out.stderr));
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).expect("open");
    file.write_all(text.as_bytes()).expect("append");
}
