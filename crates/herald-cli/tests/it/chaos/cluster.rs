//! PostgreSQL servers of the suite's own (`initdb`, `pg_ctl`, `pg_basebackup` from the
//! machine's PostgreSQL, run as the `postgres` user): the shared server the other tests
//! use is never stopped or reconfigured. Each cluster lives in a temporary directory and
//! is stopped (immediately) and removed when dropped.

use crate::support::*;

/// The newest PostgreSQL's binaries on this machine, if any.
pub fn pg_bin() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file())
        .collect();
    versions.sort();
    versions.pop()
}

/// The binaries, or `None` (a skip) outside CI; in CI their absence fails the test.
pub fn pg_bin_or_skip() -> Option<PathBuf> {
    let bin = pg_bin();
    if bin.is_none() && std::env::var_os("CI").is_some() {
        panic!("CI is set but no PostgreSQL binaries (initdb) are under /usr/lib/postgresql");
    }
    bin
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// One PostgreSQL cluster of the suite's own.
pub struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    pub port: u16,
}

impl Cluster {
    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    async fn as_postgres(bin: &Path, tool: &str, args: &[&str]) {
        let tool = bin.join(tool);
        let out = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(&tool)
            .args(args)
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap_or_else(|e| panic!("run {}: {e}", tool.display()));
        assert!(
            out.status.success(),
            "{} {args:?}: {}\n{}",
            tool.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn new_dir() -> tempfile::TempDir {
        let dir = tempfile::Builder::new().prefix("herald-pg-").tempdir().expect("tempdir");
        let status = std::process::Command::new("chown")
            .args(["postgres:postgres"])
            .arg(dir.path())
            .status()
            .expect("chown");
        assert!(status.success(), "chown the cluster's directory to postgres");
        dir
    }

    fn configure(&self, extra: &str) {
        let conf = self.data().join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("postgresql.conf");
        text.push_str(&format!(
            "\n# herald's fault suite\nport = {}\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\nmax_connections = 100\n{extra}\n",
            self.port,
            self.dir.path().display()
        ));
        std::fs::write(&conf, text).expect("write postgresql.conf");
    }

    /// A fresh primary, started; `extra` is appended to its `postgresql.conf`.
    pub async fn primary(bin: &Path, extra: &str) -> Cluster {
        let cluster =
            Cluster { bin: bin.to_path_buf(), dir: Cluster::new_dir(), port: free_port() };
        let data = cluster.data();
        let data = data.to_str().expect("utf-8 path");
        Cluster::as_postgres(
            bin,
            "initdb",
            &["-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"],
        )
        .await;
        cluster.configure(&format!("wal_level = replica\nmax_wal_senders = 4\n{extra}"));
        cluster.start().await;
        cluster
    }

    /// A streaming standby of `primary` (`pg_basebackup -R`), started.
    pub async fn standby_of(primary: &Cluster) -> Cluster {
        let cluster =
            Cluster { bin: primary.bin.clone(), dir: Cluster::new_dir(), port: free_port() };
        let data = cluster.data();
        let data = data.to_str().expect("utf-8 path");
        let port = primary.port.to_string();
        Cluster::as_postgres(
            &primary.bin,
            "pg_basebackup",
            &["-h", "127.0.0.1", "-p", &port, "-U", "postgres", "-D", data, "-R", "-X", "stream"],
        )
        .await;
        // pg_basebackup copied the primary's settings; a promoted standby with no standby of
        // its own must not wait for one, or every COMMIT after the failover would hang.
        cluster.configure("hot_standby = on\nsynchronous_standby_names = ''");
        cluster.start().await;
        cluster
    }

    pub async fn start(&self) {
        let (data, log) = (self.data(), self.dir.path().join("log"));
        let (data, log) = (data.to_str().expect("utf-8"), log.to_str().expect("utf-8"));
        Cluster::as_postgres(&self.bin, "pg_ctl", &["-D", data, "-l", log, "-w", "start"]).await;
    }

    /// `pg_ctl stop -m immediate`: a crash, as of a killed server or a lost machine.
    pub async fn crash(&self) {
        let data = self.data();
        let data = data.to_str().expect("utf-8");
        Cluster::as_postgres(&self.bin, "pg_ctl", &["-D", data, "-m", "immediate", "-w", "stop"])
            .await;
    }

    /// Promotes a standby to primary.
    pub async fn promote(&self) {
        let data = self.data();
        let data = data.to_str().expect("utf-8");
        Cluster::as_postgres(&self.bin, "pg_ctl", &["-D", data, "-w", "promote"]).await;
    }

    /// One value from `sql` on this cluster's `postgres` database.
    pub async fn scalar(&self, sql: &str) -> String {
        let mut conn = PgConnection::connect(&self.url()).await.expect("connect to the cluster");
        let value: String = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
            .fetch_one(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
        conn.close().await.ok();
        value
    }

    /// Terminates every other client backend; returns how many.
    pub async fn terminate_backends(&self) -> usize {
        let n = self
            .scalar(
                "SELECT count(pg_terminate_backend(pid))::text FROM pg_stat_activity
                 WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()",
            )
            .await;
        n.parse().unwrap_or(0)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let data = self.data();
        let _ = std::process::Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join("pg_ctl"))
            .args(["-D"])
            .arg(&data)
            .args(["-m", "immediate", "-w", "stop"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A MariaDB server of the suite's own: `mariadb-install-db` into a temporary directory,
/// `mariadbd` on a free port as the `mysql` user. Killed and removed when dropped.
pub struct Maria {
    dir: tempfile::TempDir,
    pub port: u16,
    server: Option<std::process::Child>,
}

/// `mariadb-install-db` and `mariadbd`, or `None` (a skip) outside CI.
pub fn maria_or_skip() -> Option<()> {
    let found = Path::new("/usr/bin/mariadb-install-db").is_file()
        && Path::new("/usr/sbin/mariadbd").is_file();
    if !found && std::env::var_os("CI").is_some() {
        panic!("CI is set but mariadb-install-db or mariadbd is missing");
    }
    found.then_some(())
}

impl Maria {
    /// A fresh server, started, with a `test` database; root without a password.
    pub async fn start_new() -> Maria {
        let dir = tempfile::Builder::new().prefix("herald-maria-").tempdir().expect("tempdir");
        let status = std::process::Command::new("chown")
            .args(["mysql:mysql"])
            .arg(dir.path())
            .status()
            .expect("chown");
        assert!(status.success(), "chown the server's directory to mysql");
        let out = Command::new("/usr/bin/mariadb-install-db")
            .arg(format!("--datadir={}", dir.path().join("data").display()))
            .args(["--user=mysql", "--auth-root-authentication-method=normal", "--skip-test-db"])
            .stdin(Stdio::null())
            .output()
            .await
            .expect("run mariadb-install-db");
        assert!(
            out.status.success(),
            "mariadb-install-db: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut maria = Maria { dir, port: free_port(), server: None };
        maria.start().await;
        let mut conn = maria.connect("").await;
        sqlx::raw_sql("CREATE DATABASE test").execute(&mut conn).await.expect("create test");
        conn.close().await.ok();
        maria
    }

    /// `mysql://root@127.0.0.1:PORT/test`
    pub fn url(&self) -> String {
        format!("mysql://root@127.0.0.1:{}/test", self.port)
    }

    async fn connect(&self, db: &str) -> sqlx::MySqlConnection {
        let url = format!("mysql://root@127.0.0.1:{}/{db}", self.port);
        sqlx::MySqlConnection::connect(&url).await.expect("connect to the suite's MariaDB")
    }

    /// Starts `mariadbd` and waits until it accepts connections.
    pub async fn start(&mut self) {
        let data = self.dir.path().join("data");
        let child = std::process::Command::new("/usr/sbin/mariadbd")
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", self.dir.path().join("sock").display()))
            .arg(format!("--port={}", self.port))
            .args(["--bind-address=127.0.0.1", "--user=mysql", "--skip-log-bin"])
            .arg(format!("--log-error={}", self.dir.path().join("error.log").display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start mariadbd");
        self.server = Some(child);
        let url = format!("mysql://root@127.0.0.1:{}/", self.port);
        let by = Instant::now() + Duration::from_secs(60);
        loop {
            if let Ok(conn) = sqlx::MySqlConnection::connect(&url).await {
                conn.close().await.ok();
                return;
            }
            assert!(Instant::now() < by, "mariadbd did not accept connections within 60 s");
            // Polls the new server; it has no readiness signal to wait on.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// SIGKILL: a crash, as of a killed server or a lost machine (InnoDB recovers).
    pub async fn crash(&mut self) {
        if let Some(mut child) = self.server.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills every other connection (`KILL CONNECTION`); returns how many.
    pub async fn kill_connections(&self) -> usize {
        let mut conn = self.connect("").await;
        let ids: Vec<i64> = sqlx::query_scalar(
            "SELECT CAST(id AS SIGNED) FROM information_schema.processlist
             WHERE id <> connection_id() AND command <> 'Daemon' AND user = 'root'",
        )
        .fetch_all(&mut conn)
        .await
        .expect("list connections");
        let mut killed = 0;
        for id in ids {
            let sql = format!("KILL CONNECTION {id}");
            killed += usize::from(
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await.is_ok(),
            );
        }
        conn.close().await.ok();
        killed
    }
}

impl Drop for Maria {
    fn drop(&mut self) {
        if let Some(mut child) = self.server.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
