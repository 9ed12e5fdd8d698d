//! The email channel end to end on every backend (SPEC "Channels" and guarantee 5): a
//! real SMTP relay (aiosmtpd, `tests/support/smtp_server.py`) that accepts, tempfails
//! (451), refuses a recipient (550) or refuses herald's credentials (535); messages are
//! read back with Python's email parser. Time moves by a manual clock.

use crate::common;
use herald::channels::{EmailChannel, EmailOptions};
use herald::{Channel, Delivery, DeliveryState, Payload, SubmitRequest, Worker, WorkerOptions};
use serde_json::json;
use std::collections::HashMap;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

const FROM: &str = "herald@example.com";

// ---- Python and the relay --------------------------------------------------------------

/// `tests/support/smtp_server.py` as a child process; killed when dropped.
struct Relay {
    child: Child,
    port: u16,
    messages: PathBuf,
    _dir: tempfile::TempDir,
}

impl Relay {
    fn start(auth_fail: bool) -> Relay {
        let dir = tempfile::tempdir().unwrap();
        let messages = dir.path().join("messages.jsonl");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/smtp_server.py");
        let mut command = Command::new(common::python());
        command.arg(&script).arg(&messages);
        if auth_fail {
            command.arg("--auth-fail");
        }
        // stdin stays open: the relay exits when it closes, also if this process dies.
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", script.display()));
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let Ok(port) = line.trim().parse::<u16>() else {
            let _ = child.kill();
            panic!("smtp_server.py did not print its port (got {line:?})");
        };
        Relay { child, port, messages, _dir: dir }
    }

    fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    /// Every message accepted so far (appended before the relay answered DATA).
    fn messages(&self) -> Vec<serde_json::Value> {
        let Ok(text) = std::fs::read_to_string(&self.messages) else { return Vec::new() };
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    fn with_message_id(&self, message_id: &str) -> Vec<serde_json::Value> {
        self.messages().into_iter().filter(|m| m["message_id"] == message_id).collect()
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn channel(smtp_url: String) -> Arc<dyn Channel> {
    let options = EmailOptions { smtp_url, from: FROM.into(), timeout: Duration::from_secs(5) };
    Arc::new(EmailChannel::new(&options).unwrap())
}

// ---- the operator alert counter ------------------------------------------------------------

/// A `metrics` recorder that keeps counters only, keyed `name{label=value,…}`. Installed
/// once per test process (each test is its own process under nextest; the alert reasons
/// asserted here are each produced by one test only).
#[derive(Default)]
struct Counters(Mutex<HashMap<String, Arc<AtomicU64>>>);

impl metrics::Recorder for Counters {
    fn describe_counter(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_gauge(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn describe_histogram(
        &self,
        _: metrics::KeyName,
        _: Option<metrics::Unit>,
        _: metrics::SharedString,
    ) {
    }
    fn register_counter(&self, key: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Counter {
        let mut labels: Vec<String> =
            key.labels().map(|l| format!("{}={}", l.key(), l.value())).collect();
        labels.sort();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        let counter = self.0.lock().unwrap().entry(name).or_default().clone();
        metrics::Counter::from_arc(counter)
    }
    fn register_gauge(&self, _: &metrics::Key, _: &metrics::Metadata<'_>) -> metrics::Gauge {
        metrics::Gauge::noop()
    }
    fn register_histogram(
        &self,
        _: &metrics::Key,
        _: &metrics::Metadata<'_>,
    ) -> metrics::Histogram {
        metrics::Histogram::noop()
    }
}

fn counters() -> &'static Arc<Counters> {
    static COUNTERS: OnceLock<Arc<Counters>> = OnceLock::new();
    COUNTERS.get_or_init(|| {
        let counters = Arc::new(Counters::default());
        if metrics::set_global_recorder(counters.clone()).is_err() {
            panic!("another metrics recorder is installed");
        }
        counters
    })
}

/// `herald_operator_alerts_total{reason=…}` so far.
fn alerts(reason: &str) -> u64 {
    let name = format!("herald_operator_alerts_total{{reason={reason}}}");
    counters().0.lock().unwrap().get(&name).map_or(0, |c| c.load(Ordering::Acquire))
}

// ---- an environment per backend --------------------------------------------------------

/// A `common::Env` with this file's helpers: a type of its own, because the other test
/// modules of this binary add helpers of the same names to theirs.
#[derive(Debug)]
struct Env(common::Env);

impl std::ops::Deref for Env {
    type Target = common::Env;

    fn deref(&self) -> &common::Env {
        &self.0
    }
}

async fn envs() -> Vec<Env> {
    common::envs("email").await.into_iter().map(Env).collect()
}

impl Env {
    async fn submit(&self, key: &str, to: &str, payload: serde_json::Value) -> Delivery {
        let req = SubmitRequest::new(self.tenant, key, "email", to, payload);
        self.herald
            .submit_alone(&req)
            .await
            .unwrap_or_else(|e| panic!("{}: submit failed: {e:?}", self.name))
            .delivery
    }

    fn worker(&self, channel: Arc<dyn Channel>) -> Worker {
        let options = WorkerOptions { id: "w1".into(), ..WorkerOptions::default() };
        Worker::new(self.herald.clone(), options, [("email".to_string(), channel)]).unwrap()
    }

    async fn get(&self, id: herald::DeliveryId) -> Delivery {
        self.herald.delivery(self.tenant, id).await.unwrap()
    }

    /// (outcome, error code) of each attempt, oldest first.
    async fn outcomes(&self, id: herald::DeliveryId) -> Vec<(String, Option<String>)> {
        let attempts = self.herald.attempts(self.tenant, id).await.unwrap();
        attempts
            .into_iter()
            .map(|a| (a.outcome.unwrap_or_else(|| "running".into()), a.error_code))
            .collect()
    }

    /// (granted, available, reserved, spent) on the "email" quota key.
    async fn quota(&self) -> (i64, i64, i64, i64) {
        let q = self.herald.quotas(self.tenant).await.unwrap();
        let a = q.iter().find(|a| a.quota_key == "email").unwrap();
        (a.granted, a.available, a.reserved, a.spent)
    }

    /// Moves the manual clock to the delivery's next attempt.
    async fn advance_to_due(&self, id: herald::DeliveryId) {
        let d = self.get(id).await;
        let wait = d.next_attempt_at.as_millisecond() - self.clock.now_ms().unwrap();
        if wait > 0 {
            self.clock.advance(Duration::from_millis(wait as u64));
        }
    }
}

fn outcome(kind: &str, code: &str) -> (String, Option<String>) {
    (kind.to_string(), (!code.is_empty()).then(|| code.to_string()))
}

fn payload(subject: &str, text: &str, html: Option<&str>) -> serde_json::Value {
    match html {
        Some(html) => json!({"subject": subject, "text": text, "html": html}),
        None => json!({"subject": subject, "text": text}),
    }
}

/// Line endings as SMTP carries them (CRLF) compared as LF, trailing newlines aside.
fn normalized(s: &serde_json::Value) -> String {
    s.as_str().unwrap_or_default().replace("\r\n", "\n").trim_end_matches('\n').to_string()
}

// ---- sent --------------------------------------------------------------------------------

#[tokio::test]
async fn a_message_arrives_with_the_delivery_id_as_message_id() {
    let relay = Relay::start(false);
    let channel = channel(relay.url());
    for env in envs().await {
        let subject = "Votre réparation est prête";
        let text = "Bonjour Zoë,\nyour repair #42 is ready.\n\n-- \nThe shop\n";
        let html = "<p>Bonjour Zoë, your repair <b>#42</b> is ready.</p>";
        let to = "customer@example.net";
        let rich = env.submit("op-html", to, payload(subject, text, Some(html))).await;
        let plain = env
            .submit("op-text", "Zoë <zoe@example.net>", payload("Plain", "Just text", None))
            .await;
        assert_eq!(env.quota().await, (100, 98, 2, 0), "{}: reserved at submit", env.name);

        let report = env.worker(channel.clone()).run_once().await.unwrap();
        assert_eq!((report.leased, report.sent), (2, 2), "{}: {report:?}", env.name);

        let message_id = format!("<{}@example.com>", rich.id);
        let got = relay.with_message_id(&message_id);
        assert_eq!(got.len(), 1, "{}: one message with Message-ID {message_id}", env.name);
        let m = &got[0];
        assert_eq!(m["mail_from"], FROM, "{}: envelope sender", env.name);
        assert_eq!(m["rcpt_tos"], json!([to]), "{}: envelope recipient", env.name);
        assert_eq!(m["from"], FROM, "{}: From", env.name);
        assert_eq!(m["to"], to, "{}: To", env.name);
        assert_eq!(m["subject"], subject, "{}: Subject", env.name);
        assert_eq!(m["content_type"], "multipart/alternative", "{}", env.name);
        assert_eq!(normalized(&m["text"]), text.trim_end_matches('\n'), "{}: text", env.name);
        assert_eq!(normalized(&m["html"]), html, "{}: html alternative", env.name);

        let message_id = format!("<{}@example.com>", plain.id);
        let got = relay.with_message_id(&message_id);
        assert_eq!(got.len(), 1, "{}: one message with Message-ID {message_id}", env.name);
        let m = &got[0];
        assert_eq!(m["rcpt_tos"], json!(["zoe@example.net"]), "{}", env.name);
        assert_eq!(m["to"], "Zoë <zoe@example.net>", "{}: To with its name", env.name);
        assert_eq!(m["subject"], "Plain", "{}", env.name);
        assert_eq!(m["content_type"], "text/plain", "{}: no html, one part", env.name);
        assert_eq!(normalized(&m["text"]), "Just text", "{}", env.name);
        assert_eq!(m["html"], serde_json::Value::Null, "{}", env.name);

        for d in [rich, plain] {
            let d = env.get(d.id).await;
            assert_eq!((d.state, d.attempts), (DeliveryState::Sent, 1), "{}", env.name);
            assert_eq!(env.outcomes(d.id).await, [outcome("sent", "")], "{}", env.name);
        }
        assert_eq!(env.quota().await, (100, 98, 0, 2), "{}: committed", env.name);
    }
}

/// A message the application rendered (`{"raw", "envelope"}`), past the 64 KiB payload
/// limit: it arrives byte for byte but for herald's Message-ID and the Bcc field, at every
/// envelope recipient, from the envelope's sender.
#[tokio::test]
async fn a_rendered_message_arrives_byte_for_byte_but_for_its_message_id() {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let relay = Relay::start(false);
    let channel = channel(relay.url());
    // 1.5 MiB of attachment, base64 in 76-character lines as mailers write it.
    let attachment: Vec<u8> = (0..1_572_864u64).map(|i| (i * 7919 % 251) as u8).collect();
    let lines: Vec<String> = b64
        .encode(&attachment)
        .as_bytes()
        .chunks(76)
        .map(|c| String::from_utf8(c.to_vec()).unwrap())
        .collect();
    let head = "From: Shop <shop@example.org>\r\nTo: customer@example.net\r\nCc: accounts@example.net\r\nBcc: audit@example.net\r\nSubject: =?utf-8?Q?Commande_n=C2=B017?=\r\nMessage-ID: <laravel-generated@example.org>\r\nDate: Thu, 03 Dec 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\n";
    let body = format!(
        "Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n--b1\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\nYour order =C2=B017 is confirmed.\r\n.a line that starts with a dot\r\n--b1\r\nContent-Type: application/pdf; name=invoice.pdf\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=invoice.pdf\r\n\r\n{}\r\n--b1--\r\n",
        lines.join("\r\n")
    );
    let message = format!("{head}{body}");
    assert!(message.len() > herald_core::limits::PAYLOAD_BYTES_MAX * 16);
    let envelope = json!({"from": "bounces@example.org", "to": ["customer@example.net", "accounts@example.net", "audit@example.net"]});
    for env in envs().await {
        let d = env
            .submit(
                "order-17",
                "customer@example.net",
                json!({"raw": message, "envelope": envelope}),
            )
            .await;
        let report = env.worker(channel.clone()).run_once().await.unwrap();
        assert_eq!((report.leased, report.sent), (1, 1), "{}: {report:?}", env.name);
        let message_id = format!("<{}@example.com>", d.id);
        let got = relay.with_message_id(&message_id);
        assert_eq!(got.len(), 1, "{}: one message with Message-ID {message_id}", env.name);
        let m = &got[0];
        assert_eq!(m["mail_from"], "bounces@example.org", "{}: the envelope's sender", env.name);
        assert_eq!(m["rcpt_tos"], envelope["to"], "{}: every envelope recipient", env.name);
        let expected = message
            .replace("Bcc: audit@example.net\r\n", "")
            .replace("<laravel-generated@example.org>", &message_id);
        let raw = b64.decode(m["raw"].as_str().unwrap()).unwrap();
        assert!(
            raw == expected.as_bytes(),
            "{}: the message as rendered but for Message-ID and Bcc ({} bytes sent, {} expected)",
            env.name,
            raw.len(),
            expected.len()
        );
        assert_eq!(env.outcomes(d.id).await, [outcome("sent", "")], "{}", env.name);
    }
}

/// Past the email channel's own limit (4 MiB), and past the 64 KiB of every other channel,
/// a submit is refused and writes nothing.
#[tokio::test]
async fn payload_limits_are_the_channels() {
    for env in envs().await {
        let email_max = herald_core::limits::EMAIL_PAYLOAD_BYTES_MAX;
        let message = |n: usize| format!("Subject: s\r\n\r\n{}", "x".repeat(n));
        let fits = json!({"raw": message(email_max - 64)}).to_string();
        assert!(fits.len() <= email_max);
        let req = SubmitRequest::new(
            env.tenant,
            "fits",
            "email",
            "a@example.net",
            Payload::from_text(fits),
        );
        env.herald.submit_alone(&req).await.unwrap_or_else(|e| panic!("{}: {e:?}", env.name));
        let over = json!({"raw": message(email_max)}).to_string();
        let webhook =
            json!({"blob": "x".repeat(herald_core::limits::PAYLOAD_BYTES_MAX)}).to_string();
        for (channel, to, payload) in
            [("email", "a@example.net", over), ("webhook", "https://example.net/h", webhook)]
        {
            let req =
                SubmitRequest::new(env.tenant, "over", channel, to, Payload::from_text(payload));
            let e = env.herald.submit_alone(&req).await.unwrap_err();
            assert!(
                e.to_string().contains("too_long") || format!("{e:?}").contains("too_long"),
                "{}: {channel}: {e:?}",
                env.name
            );
        }
        assert_eq!(env.quota().await.2, 1, "{}: only the one that fits is reserved", env.name);
    }
}

// ---- failures ------------------------------------------------------------------------------

#[tokio::test]
async fn a_451_is_transient_and_keeps_the_reservation() {
    let relay = Relay::start(false);
    let channel = channel(relay.url());
    for env in envs().await {
        let d = env.submit("op-1", "tempfail@example.net", payload("s", "t", None)).await;
        let worker = env.worker(channel.clone());
        let report = worker.run_once().await.unwrap();
        assert_eq!((report.leased, report.retried), (1, 1), "{}: {report:?}", env.name);
        let after = env.get(d.id).await;
        assert_eq!(after.state, DeliveryState::Pending, "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, [outcome("transient", "smtp_451")], "{}", env.name);
        assert_eq!(env.quota().await, (100, 99, 1, 0), "{}: still reserved", env.name);

        // And again on the next attempt: still transient, still reserved.
        env.advance_to_due(d.id).await;
        assert_eq!(worker.run_once().await.unwrap().retried, 1, "{}", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Pending, "{}", env.name);
        assert_eq!(env.quota().await, (100, 99, 1, 0), "{}", env.name);
    }
    assert!(relay.messages().is_empty(), "nothing was accepted: {:?}", relay.messages());
}

#[tokio::test]
async fn a_550_is_terminal_and_releases_the_quota() {
    let relay = Relay::start(false);
    let channel = channel(relay.url());
    for env in envs().await {
        let d = env.submit("op-1", "nouser@example.net", payload("s", "t", None)).await;
        let worker = env.worker(channel.clone());
        let report = worker.run_once().await.unwrap();
        assert_eq!((report.leased, report.failed), (1, 1), "{}: {report:?}", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Failed, "{}", env.name);
        assert_eq!(env.outcomes(d.id).await, [outcome("terminal", "smtp_550")], "{}", env.name);
        assert_eq!(env.quota().await, (100, 100, 0, 0), "{}: released", env.name);
        env.clock.advance(Duration::from_secs(24 * 3600));
        assert_eq!(worker.run_once().await.unwrap().leased, 0, "{}: not retried", env.name);
    }
    assert!(relay.messages().is_empty());
}

#[tokio::test]
async fn refused_credentials_are_transient_and_alert_the_operator() {
    let relay = Relay::start(true);
    let with_credentials = channel(format!("smtp://user:wrong@127.0.0.1:{}", relay.port));
    let without = channel(relay.url());
    for env in envs().await {
        // 535: the relay refuses the login.
        let d = env.submit("op-1", "customer@example.net", payload("s", "t", None)).await;
        let before = alerts("smtp_auth");
        let report = env.worker(with_credentials.clone()).run_once().await.unwrap();
        assert_eq!((report.leased, report.retried), (1, 1), "{}: {report:?}", env.name);
        let after = env.get(d.id).await;
        assert_eq!(after.state, DeliveryState::Pending, "{}: kept, not failed", env.name);
        assert_eq!(env.outcomes(d.id).await, [outcome("transient", "smtp_535")], "{}", env.name);
        assert_eq!(env.quota().await, (100, 99, 1, 0), "{}: still reserved", env.name);
        assert_eq!(alerts("smtp_auth"), before + 1, "{}: one operator alert", env.name);

        // 530: no credentials where the relay requires them.
        env.advance_to_due(d.id).await;
        let report = env.worker(without.clone()).run_once().await.unwrap();
        assert_eq!(report.retried, 1, "{}: {report:?}", env.name);
        assert_eq!(
            env.outcomes(d.id).await,
            [outcome("transient", "smtp_535"), outcome("transient", "smtp_530")],
            "{}",
            env.name
        );
        assert_eq!(env.get(d.id).await.state, DeliveryState::Pending, "{}", env.name);
        assert_eq!(alerts("smtp_auth"), before + 2, "{}: alerted again", env.name);
    }
    assert!(relay.messages().is_empty());
}

#[tokio::test]
async fn a_relay_that_is_down_is_transient_and_alerts_the_operator() {
    // A port nobody listens on: bound by the OS, then let go.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let channel = channel(format!("smtp://127.0.0.1:{port}"));
    for env in envs().await {
        let d = env.submit("op-1", "customer@example.net", payload("s", "t", None)).await;
        let before = alerts("smtp_unreachable");
        let report = env.worker(channel.clone()).run_once().await.unwrap();
        assert_eq!((report.leased, report.retried), (1, 1), "{}: {report:?}", env.name);
        assert_eq!(env.get(d.id).await.state, DeliveryState::Pending, "{}", env.name);
        assert_eq!(
            env.outcomes(d.id).await,
            [outcome("transient", "smtp_connection")],
            "{}",
            env.name
        );
        assert_eq!(env.quota().await, (100, 99, 1, 0), "{}: still reserved", env.name);
        assert_eq!(alerts("smtp_unreachable"), before + 1, "{}: one operator alert", env.name);
    }
}

// ---- configuration and validation -------------------------------------------------------

#[tokio::test]
async fn the_relay_url_forms_of_the_spec_are_accepted() {
    // SPEC "Channels": `smtp://host:port`, `smtps://user:pass@host:port`,
    // `smtp://…?tls=starttls`.
    for smtp_url in [
        "smtp://127.0.0.1:2525",
        "smtps://user:pass@smtp.example.com:465",
        "smtp://user:pass@smtp.example.com:587?tls=starttls",
    ] {
        let options = EmailOptions {
            smtp_url: smtp_url.into(),
            from: FROM.into(),
            timeout: Duration::from_secs(5),
        };
        if let Err(e) = EmailChannel::new(&options) {
            panic!("{smtp_url} is a relay URL the SPEC documents, refused: {e}");
        }
    }
    let bad = EmailOptions {
        smtp_url: "smtp://127.0.0.1:2525".into(),
        from: "not an address".into(),
        timeout: Duration::from_secs(5),
    };
    assert!(EmailChannel::new(&bad).is_err(), "a sender that is not an address");
}

#[test]
fn validate_refuses_bad_addresses_and_payloads() {
    use herald::channels::validate;
    let ok = json!({"subject": "Ready", "text": "Your repair is ready"});
    assert_eq!(validate("email", "customer@example.net", &Payload::from(&ok)), Ok(()));
    assert_eq!(validate("email", "Zoë <zoe@example.net>", &Payload::from(&ok)), Ok(()));
    let with_html = json!({"subject": "Ready", "text": "ready", "html": "<p>ready</p>"});
    assert_eq!(validate("email", "customer@example.net", &Payload::from(&with_html)), Ok(()));
    let rendered = json!({"raw": "From: a@example.org\r\nSubject: s\r\n\r\nbody", "envelope": {"to": ["b@example.net"]}});
    assert_eq!(validate("email", "b@example.net", &Payload::from(&rendered)), Ok(()));
    for to in ["not an address", "", "a@", "@example.net", "https://example.net"] {
        assert!(validate("email", to, &Payload::from(&ok)).is_err(), "to {to:?} must be refused");
    }
    for payload in [
        json!({"text": "no subject"}),
        json!({"subject": "no text"}),
        json!({}),
        json!("just a string"),
        json!({"subject": 1, "text": "x"}),
        json!({"subject": "two\r\nBcc: victim@example.net", "text": "x"}),
        json!({"raw": "not a header\r\n\r\nbody"}),
        json!({"raw": "Subject: s\r\n\r\nx", "envelope": {"to": ["nobody"]}}),
        json!({"raw": "Subject: s\r\n\r\nx", "subject": "both forms"}),
    ] {
        assert!(
            validate("email", "customer@example.net", &Payload::from(&payload)).is_err(),
            "{payload}"
        );
    }
}
