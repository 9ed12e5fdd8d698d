//! herald installed without Rust (issue 35, point 4): README's install lines — `scripts/deb`
//! packaging this build's binary, then `apt-get install` of the package — into a clean
//! Debian 12 root made by Debian's `debootstrap` (minbase, with `ca-certificates`, which
//! apt would fetch for the package's Depends), and `herald serve` runs from that root — as
//! the `herald` user the package made, with the settings file it installed — on its
//! default SQLite file and against the machine's PostgreSQL and MariaDB, answers
//! `/readyz`, and stops on SIGTERM. The systemd unit is checked by `systemd-analyze
//! verify` and its hardening by `systemd-analyze security` (the machine runs no systemd
//! to start it).
//!
//! The root is made once and kept as a tarball outside the checkout
//! (`/var/tmp/herald-debian12-root.tar`, or `HERALD_TEST_DEBIAN_ROOT`): debootstrap
//! fetches about 50 MB from deb.debian.org the first time. Needs root (chroot); without
//! debootstrap or root it skips, which CI does not allow.

use crate::support::*;
use std::process::Command as StdCommand;

const ROOT_CACHE: &str = "/var/tmp/herald-debian12-root.tar";
const MIRROR: &str = "http://deb.debian.org/debian";

fn checkout() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn sh(cmd: &mut StdCommand, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Whether this machine can run the test; if not, why (a skip, refused under CI).
fn missing() -> Option<String> {
    let euid = StdCommand::new("id").arg("-u").output();
    if !euid.is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0") {
        return Some("not root (chroot needs it)".into());
    }
    for tool in ["debootstrap", "dpkg-deb", "strip", "systemd-analyze"] {
        let found = StdCommand::new("sh").args(["-c", &format!("command -v {tool}")]).output();
        if !found.is_ok_and(|o| o.status.success()) {
            return Some(format!("no {tool} (apt-get install debootstrap binutils systemd)"));
        }
    }
    None
}

/// A fresh copy of the cached Debian 12 root in `dir`, debootstrapped first if need be.
fn debian_root(dir: &Path) -> PathBuf {
    let cache = std::env::var("HERALD_TEST_DEBIAN_ROOT").unwrap_or_else(|_| ROOT_CACHE.into());
    if !Path::new(&cache).is_file() {
        let fresh = tempfile::tempdir_in("/var/tmp").expect("tempdir");
        sh(
            StdCommand::new("debootstrap").args([
                "--variant=minbase",
                "--include=ca-certificates",
                "bookworm",
                fresh.path().to_str().unwrap(),
                MIRROR,
            ]),
            "debootstrap",
        );
        let partial = format!("{cache}.{}", std::process::id());
        sh(
            StdCommand::new("tar").args([
                "-C",
                fresh.path().to_str().unwrap(),
                "-cf",
                &partial,
                ".",
            ]),
            "tar",
        );
        std::fs::rename(&partial, &cache).expect("keep the root");
    }
    let root = dir.join("root");
    std::fs::create_dir(&root).expect("root dir");
    sh(StdCommand::new("tar").args(["-C", root.to_str().unwrap(), "-xf", &cache]), "untar");
    root
}

/// The two lines of README's ```sh block under "## Install".
fn readme_install_lines() -> (String, String) {
    let readme = std::fs::read_to_string(checkout().join("README.md")).expect("README.md");
    let (_, after) = readme.split_once("## Install\n").expect("an Install section");
    let (_, block) = after.split_once("```sh\n").expect("a ```sh block");
    let (block, _) = block.split_once("\n```").expect("its end");
    let lines: Vec<&str> = block.lines().collect();
    assert_eq!(lines.len(), 2, "build, then install: {block}");
    assert!(lines[0].starts_with("scripts/deb ") && lines[1].starts_with("apt-get install"));
    (lines[0].to_string(), lines[1].to_string())
}

/// `herald serve` from the root, as its `herald` user, with /etc/herald/herald.env read as
/// systemd's EnvironmentFile would be, and `db` (if any) in place of its HERALD_DB.
async fn serve_in(root: &Path, name: &str, db: Option<&str>) -> Proc {
    let mut cmd = Command::new("chroot");
    cmd.arg("--userspec=herald:herald").arg(root).args([
        "/usr/bin/env",
        "-i",
        "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
        &format!("DB={}", db.unwrap_or("")),
        "/bin/sh",
        "-c",
        "cd /var/lib/herald && set -a && . /etc/herald/herald.env && set +a && \
         if [ -n \"$DB\" ]; then HERALD_DB=\"$DB\"; fi; unset DB; \
         exec /usr/bin/herald serve --listen 127.0.0.1:0",
    ]);
    Proc::spawn(name, cmd).await
}

async fn ready(proc: &Proc) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(r) = try_request_text(proc.addr, "GET", "/readyz", None, None).await
            && r.status == 200
        {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "not ready: {}", proc.stderr());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_deb_installs_into_a_clean_debian_12_and_serves() {
    if let Some(why) = missing() {
        assert!(std::env::var_os("CI").is_none(), "CI is set but {why}");
        eprintln!("skipped: {why}");
        return;
    }
    let work = tempfile::tempdir_in("/var/tmp").expect("tempdir");
    // README's install lines as written: the first here (this build's binary in the
    // package, not a release build of its own), the second as root in the Debian root.
    let (build, install) = readme_install_lines();
    let built = sh(
        StdCommand::new("bash")
            .args(["-c", &build])
            .current_dir(checkout())
            .env("HERALD_DEB_BINARY", env!("CARGO_BIN_EXE_herald")),
        "README's scripts/deb line",
    );
    let deb = PathBuf::from(built.trim());
    assert!(deb.starts_with("/tmp") && deb.is_file(), "{built}");
    let depends = sh(StdCommand::new("dpkg-deb").args(["-f"]).arg(&deb).arg("Depends"), "-f");
    assert!(depends.contains("ca-certificates"), "HTTPS webhooks need CA roots: {depends}");

    let root = debian_root(work.path());
    std::fs::copy(&deb, root.join("tmp").join(deb.file_name().unwrap())).expect("copy the .deb");
    std::fs::remove_file(&deb).ok();
    sh(StdCommand::new("chroot").arg(&root).args(["/bin/sh", "-c", &install]), &install);
    let user =
        sh(StdCommand::new("chroot").arg(&root).args(["getent", "passwd", "herald"]), "user");
    assert!(user.contains("/var/lib/herald:/usr/sbin/nologin"), "{user}");
    let modes = sh(
        StdCommand::new("chroot").arg(&root).args([
            "stat",
            "-c",
            "%U:%G %a",
            "/etc/herald/herald.env",
            "/var/lib/herald",
        ]),
        "stat",
    );
    assert_eq!(modes, "root:herald 640\nherald:herald 750\n", "secrets readable by herald only");

    // The unit, with its ExecStart pointed at the root's binary (verify checks it exists).
    let unit = std::fs::read_to_string(root.join("lib/systemd/system/herald.service")).unwrap();
    let unit = unit.replace("/usr/bin/herald", root.join("usr/bin/herald").to_str().unwrap());
    let unit_dir = work.path().join("unit");
    std::fs::create_dir(&unit_dir).unwrap();
    std::fs::write(unit_dir.join("herald.service"), unit).unwrap();
    let verify = StdCommand::new("systemd-analyze")
        .args(["verify", "--man=no"])
        .arg(unit_dir.join("herald.service"))
        .output()
        .expect("systemd-analyze");
    let said = String::from_utf8_lossy(&verify.stderr);
    // (The machine has no `herald` user and no /etc/herald: not the unit's to say.)
    let complaints: Vec<&str> = said
        .lines()
        .filter(|l| !l.contains("herald.env") && !l.contains("User=") && !l.trim().is_empty())
        .collect();
    assert!(verify.status.success() || complaints.is_empty(), "systemd-analyze verify: {said}");
    assert!(complaints.is_empty(), "systemd-analyze verify: {said}");
    // The hardening, as systemd scores it: exposure at most 2.0 of 10 ("OK"; 1.2 when
    // written).
    let security = StdCommand::new("systemd-analyze")
        .args(["security", "--offline=true", "--threshold=20"])
        .arg(unit_dir.join("herald.service"))
        .output()
        .expect("systemd-analyze security");
    assert!(security.status.success(), "{}", String::from_utf8_lossy(&security.stdout));

    // The default settings: SQLite in the state directory.
    let mut server = serve_in(&root, "serve (SQLite)", None).await;
    ready(&server).await;
    server.stop(Duration::from_secs(20)).await;
    assert!(root.join("var/lib/herald/herald.db").is_file());

    // Without CA certificates (the package's Depends removed by hand) herald says what is
    // missing instead of reqwest's "builder error".
    let certs = root.join("etc/ssl/certs");
    std::fs::rename(&certs, root.join("etc/ssl/certs.off")).expect("hide the certificates");
    let out = StdCommand::new("chroot")
        .arg("--userspec=herald:herald")
        .arg(&root)
        .args(["/usr/bin/herald", "serve", "--db", "/var/lib/herald/herald.db"])
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .expect("run herald serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("ca-certificates"), "{stderr}");
    std::fs::rename(root.join("etc/ssl/certs.off"), &certs).expect("put them back");

    // The machine's servers.
    if let Some(base) = postgres_url() {
        let schema = PgSchema::create(&base).await;
        let mut server = serve_in(&root, "serve (PostgreSQL)", Some(&schema.url)).await;
        ready(&server).await;
        server.stop(Duration::from_secs(20)).await;
    }
    if let Some(base) = mysql_url() {
        let db = MyDatabase::create(&base).await;
        let mut server = serve_in(&root, "serve (MariaDB)", Some(&db.url)).await;
        ready(&server).await;
        server.stop(Duration::from_secs(20)).await;
    }
}
