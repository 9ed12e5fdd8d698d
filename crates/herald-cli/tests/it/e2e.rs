//! End to end through `herald serve` as a real process: a webhook and an email submitted
//! over HTTP both arrive (at a real HTTP receiver and a real SMTP relay), both end `sent`,
//! and the ledger shows them charged.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

const ADMIN: &str = "e2e-admin-key-5c0e8a7b3f1d92e64a08c7b5d1f3e29a";
const WAIT: Duration = Duration::from_secs(20);

/// Kills the child when the test ends, however it ends.
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn python() -> String {
    if let Ok(p) = std::env::var("HERALD_TEST_PYTHON") {
        return p;
    }
    assert!(std::env::var_os("CI").is_none(), "CI is set but HERALD_TEST_PYTHON is not");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(root.join("scripts/test-deps")).output().expect("scripts/test-deps");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// The SMTP relay; every accepted message comes as one JSON line on the receiver.
fn smtp_relay() -> (Guard, u16, mpsc::Receiver<Value>) {
    let script =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../herald/tests/support/smtp_server.py");
    let mut child = Command::new(python())
        .arg(script)
        .arg("/dev/stdout")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the SMTP relay");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let port: u16 = lines.next().unwrap().unwrap().trim().parse().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    (Guard(child), port, rx)
}

/// A minimal HTTP receiver: answers 200 and reports (webhook-id, body).
fn webhook_receiver() -> (SocketAddr, mpsc::Receiver<(String, String)>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            let (head, body) = read_http(&stream);
            let id = head
                .lines()
                .find_map(|l| {
                    l.strip_prefix("webhook-id: ").or_else(|| l.strip_prefix("Webhook-Id: "))
                })
                .unwrap_or("")
                .trim()
                .to_string();
            let mut stream = stream;
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            let _ = tx.send((id, body));
        }
    });
    (addr, rx)
}

/// Reads one HTTP message: (head, body).
fn read_http(stream: &TcpStream) -> (String, String) {
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let length = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
        })
        .unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    (head, String::from_utf8_lossy(&body).into_owned())
}

/// One request to the API over a fresh connection: (status, JSON body).
fn call(addr: &str, method: &str, path: &str, key: &str, body: Option<Value>) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {key}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let (head, body) = read_http(&stream);
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    (status, serde_json::from_str(&body).unwrap_or(Value::Null))
}

fn herald(dir: &std::path::Path, args: &[&str]) -> Value {
    let out =
        Command::new(env!("CARGO_BIN_EXE_herald")).current_dir(dir).args(args).output().unwrap();
    assert!(out.status.success(), "herald {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_webhook_and_an_email_submitted_over_http_arrive_and_are_charged() {
    let dir = tempfile::tempdir().unwrap();
    let (_relay, smtp_port, mail) = smtp_relay();
    let (receiver, hooks) = webhook_receiver();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_herald"))
        .current_dir(dir.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("HERALD_ADMIN_KEY", ADMIN)
        .env("HERALD_ALLOW_PRIVATE_TARGETS", "true")
        .env("HERALD_SMTP_URL", format!("smtp://127.0.0.1:{smtp_port}"))
        .env("HERALD_SMTP_FROM", "herald@example.com")
        .env_remove("HERALD_DB")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = serve.stderr.take().unwrap();
    let serve = Guard(serve);
    let (ready_tx, ready) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("herald listening on http://") {
                let _ = ready_tx.send(addr.trim().to_string());
            }
        }
    });
    let api = ready.recv_timeout(WAIT).expect("herald serve did not start");

    let (status, tenant) = call(&api, "POST", "/v1/tenants", ADMIN, Some(json!({"name": "acme"})));
    assert_eq!(status, 201, "{tenant}");
    let (id, key) =
        (tenant["id"].as_str().unwrap(), tenant["api_key"].as_str().unwrap().to_string());
    for quota in ["webhook", "email"] {
        let (status, body) = call(
            &api,
            "POST",
            &format!("/v1/tenants/{id}/quotas/{quota}/grant"),
            ADMIN,
            Some(json!({"amount": 5})),
        );
        assert_eq!(status, 200, "{body}");
    }
    let (status, hook) = call(
        &api,
        "POST",
        "/v1/deliveries",
        &key,
        Some(json!({"operation_key": "order-1-hook", "channel": "webhook",
                    "to": format!("http://{receiver}/hooks"), "payload": {"event": "order.ready"}})),
    );
    assert_eq!(status, 201, "{hook}");
    let (status, email) = call(
        &api,
        "POST",
        "/v1/deliveries",
        &key,
        Some(
            json!({"operation_key": "order-1-mail", "channel": "email", "to": "customer@example.com",
                    "payload": {"subject": "Your repair is ready", "text": "Come and get it."}}),
        ),
    );
    assert_eq!(status, 201, "{email}");

    let (hook_id, hook_body) = hooks.recv_timeout(WAIT).expect("the webhook never arrived");
    assert_eq!(hook_id, hook["id"].as_str().unwrap());
    assert_eq!(serde_json::from_str::<Value>(&hook_body).unwrap(), json!({"event": "order.ready"}));
    let message = mail.recv_timeout(WAIT).expect("the email never arrived");
    assert_eq!(message["subject"], "Your repair is ready");
    assert_eq!(
        message["message_id"].as_str().unwrap(),
        format!("<{}@example.com>", email["id"].as_str().unwrap())
    );

    // SIGTERM: started sends finish and are recorded before the process exits.
    let mut serve = serve;
    let pid = serve.0.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let exit = serve.0.wait().unwrap();
    assert!(exit.success(), "herald serve exited with {exit}");

    for d in [&hook, &email] {
        let shown =
            herald(dir.path(), &["deliveries", "show", d["id"].as_str().unwrap(), "--json"]);
        assert_eq!(shown["state"], "sent", "{shown}");
    }
    // Each attempt names the release that ran it: herald's version when HERALD_RELEASE is
    // not set, as here.
    let attempts =
        herald(dir.path(), &["deliveries", "attempts", hook["id"].as_str().unwrap(), "--json"]);
    let attempts = attempts["attempts"].as_array().unwrap_or_else(|| panic!("{attempts}"));
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(attempts[0]["outcome"], "sent", "{attempts:?}");
    assert_eq!(attempts[0]["release"], env!("CARGO_PKG_VERSION"), "{attempts:?}");
    // A bulk replay's dry run counts what its filter matches and changes nothing.
    let bulk =
        ["deliveries", "replay", "--tenant", id, "--channel", "webhook", "--dry-run", "--json"];
    assert_eq!(
        herald(dir.path(), &bulk),
        json!({"dry_run": true, "matched": 1, "changed": 0, "skipped": 0, "more": false})
    );
    let quotas = herald(dir.path(), &["quota", "show", id, "--json"]);
    for q in quotas["quotas"].as_array().unwrap() {
        assert_eq!(
            (q["granted"].as_i64(), q["spent"].as_i64(), q["reserved"].as_i64()),
            (Some(5), Some(1), Some(0)),
            "{q}"
        );
    }
}
