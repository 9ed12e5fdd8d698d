//! The PHP package as a Composer package (issue 35, point 5), with Debian's `composer`:
//! its composer.json passes `composer validate --strict`, and the install its README
//! gives — a path repository and one `require` line — works in a fresh project with no
//! network (Packagist turned off, as it must be offline), after which the package's
//! classes load through Composer's autoloader.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn clients_php() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/php")
}

/// Composer and PHP, or None (a skip, which CI does not allow).
fn composer() -> Option<PathBuf> {
    let composer = std::env::var("HERALD_TEST_COMPOSER").unwrap_or_else(|_| "composer".into());
    match Command::new(&composer).arg("--version").env("COMPOSER_ALLOW_SUPERUSER", "1").output() {
        Ok(out) if out.status.success() => Some(PathBuf::from(composer)),
        other => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set but there is no {composer} ({other:?}): apt-get install composer"
            );
            eprintln!("skipped: no {composer}");
            None
        }
    }
}

/// `composer …` in `dir`, offline, with a home of its own under `home`.
fn run(composer: &Path, dir: &Path, home: &Path, args: &[&str]) -> Output {
    Command::new(composer)
        .args(args)
        .arg("--no-interaction")
        .current_dir(dir)
        .env("COMPOSER_ALLOW_SUPERUSER", "1")
        .env("COMPOSER_HOME", home)
        .env("COMPOSER_CACHE_DIR", home.join("cache"))
        .env("COMPOSER_DISABLE_NETWORK", "1")
        .output()
        .expect("run composer")
}

fn expect_ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The first ```json block after "## Install" in the package's README.
fn readme_install_json() -> serde_json::Value {
    let readme = std::fs::read_to_string(clients_php().join("README.md")).expect("README.md");
    let install = readme.split("## Install").nth(1).expect("an Install section");
    let block = install.split("```json").nth(1).and_then(|b| b.split("```").next());
    serde_json::from_str(block.expect("a json block")).expect("the block is JSON")
}

#[test]
fn the_package_validates_and_installs_offline_as_its_readme_says() {
    let Some(composer) = composer() else { return };
    let home = tempfile::tempdir().expect("tempdir");
    let validate = run(&composer, &clients_php(), home.path(), &["validate", "--strict"]);
    expect_ok(&validate, "composer validate --strict");

    // The README's composer.json, its path made this checkout's and Packagist turned off.
    let mut json = readme_install_json();
    let repositories = json["repositories"].as_array_mut().expect("repositories");
    assert_eq!(repositories[0]["type"], "path", "the README installs from a path repository");
    let package = clients_php().canonicalize().expect("clients/php");
    repositories[0]["url"] = package.to_string_lossy().into_owned().into();
    repositories[0]["options"] = serde_json::json!({"symlink": false});
    repositories.push(serde_json::json!({"packagist.org": false}));
    let app = tempfile::tempdir().expect("tempdir");
    std::fs::write(app.path().join("composer.json"), json.to_string()).expect("composer.json");
    expect_ok(&run(&composer, app.path(), home.path(), &["install"]), "composer install");

    let check = r#"require 'vendor/autoload.php';
        $print = bin2hex(Herald\Fingerprint::of('webhook', 'https://example.com/h', '{}', 8));
        echo class_exists(Herald\Herald::class) ? $print : 'no Herald\Herald';"#;
    let out = Command::new("php").args(["-r", check]).current_dir(app.path()).output();
    let out = out.expect("run php");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        // herald_core's fingerprint of the same request.
        herald_core::fingerprint::fingerprint(&herald_core::fingerprint::Resolved {
            channel: "webhook",
            to: "https://example.com/h",
            payload: &herald_core::json::parse("{}").unwrap(),
            quota_key: "webhook",
            cost: 1,
            send_at_ms: None,
            max_attempts: 8,
        })
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
