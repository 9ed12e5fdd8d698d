//! The `email` channel: SMTP through lettre, to the relay of `HERALD_SMTP_URL`
//! (`smtp://host:port`, `smtps://user:pass@host:port`, `smtp://…?tls=starttls`), from
//! `HERALD_SMTP_FROM`. Payload `{"subject", "text", "html"?}` (herald builds the message),
//! or a message the application rendered, `{"raw", "envelope"?}` (`raw_email`: sent as
//! given). The `Message-ID` is derived from the delivery id, so a re-sent attempt is
//! recognisable downstream (a clue for dedupe, not a guarantee).
//!
//! Classification: 550, 551, 553 (this recipient) terminal; 530, 535 (authentication:
//! the operator's setup, not the delivery) transient plus an operator alert; every other
//! reply and every connection error transient.

use super::raw_email::RawEmail;
use crate::BoxFuture;
use crate::channel::{Channel, Leased, Outcome};
use crate::error::Error;
use lettre::address::{Address, Envelope};
use lettre::message::{Mailbox, MultiPart, SinglePart, header::ContentType};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use std::time::Duration;

/// Settings of the email channel.
#[derive(Clone, PartialEq, Eq)]
pub struct EmailOptions {
    /// `HERALD_SMTP_URL`.
    pub smtp_url: String,
    /// `HERALD_SMTP_FROM`.
    pub from: String,
    pub timeout: Duration,
}

/// The relay's URL prints without its password.
impl std::fmt::Debug for EmailOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmailOptions")
            .field("smtp_url", &herald_core::redact_url(&self.smtp_url))
            .field("from", &self.from)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// Sends emails through one relay.
#[derive(Debug, Clone)]
pub struct EmailChannel {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    message_id_domain: String,
}

impl EmailChannel {
    pub fn new(options: &EmailOptions) -> Result<EmailChannel, Error> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let from: Mailbox = options.from.parse().map_err(|e| {
            Error::invalid(format!("HERALD_SMTP_FROM {:?} is not an address: {e}", options.from))
        })?;
        let transport =
            AsyncSmtpTransport::<Tokio1Executor>::from_url(&lettre_url(&options.smtp_url))
                .map_err(|e| {
                    Error::invalid(format!("HERALD_SMTP_URL is not a usable SMTP URL: {e}"))
                })?
                .timeout(Some(options.timeout))
                .build();
        let message_id_domain = from.email.domain().to_string();
        Ok(EmailChannel { transport, from, message_id_domain })
    }

    fn message_id(&self, d: &Leased) -> String {
        format!("<{}@{}>", d.id, self.message_id_domain)
    }

    fn message(&self, d: &Leased, parts: &EmailParts<'_>) -> Result<Message, Outcome> {
        let to: Mailbox = d.to.parse().map_err(|e| {
            Outcome::terminal("invalid_recipient", format!("`to` is not an email address: {e}"))
        })?;
        let builder = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(parts.subject)
            .message_id(Some(self.message_id(d)));
        let text =
            SinglePart::builder().header(ContentType::TEXT_PLAIN).body(parts.text.to_string());
        let built = match parts.html {
            None => builder.singlepart(text),
            Some(html) => builder.multipart(MultiPart::alternative().singlepart(text).singlepart(
                SinglePart::builder().header(ContentType::TEXT_HTML).body(html.to_string()),
            )),
        };
        built.map_err(|e| Outcome::terminal("invalid_message", e.to_string()))
    }

    /// A rendered message's envelope: its own, or (from the channel's sender) to `to`.
    fn envelope(&self, d: &Leased, raw: &RawEmail<'_>) -> Result<Envelope, Outcome> {
        let recipients = if raw.recipients.is_empty() {
            let to: Address = d.to.parse().map_err(|e| {
                Outcome::terminal("invalid_recipient", format!("`to` is not an email address: {e}"))
            })?;
            vec![to]
        } else {
            raw.recipients.clone()
        };
        let sender = raw.sender.clone().unwrap_or_else(|| self.from.email.clone());
        Envelope::new(Some(sender), recipients)
            .map_err(|e| Outcome::terminal("invalid_envelope", e.to_string()))
    }

    async fn deliver(&self, d: &Leased) -> Outcome {
        let value = match d.payload.to_value() {
            Ok(value) => value,
            Err(e) => {
                return Outcome::terminal(
                    "invalid_payload",
                    format!("the payload is not JSON: {e}"),
                );
            }
        };
        let sent = match EmailPayload::from_json(&value) {
            Err(m) => return Outcome::terminal("invalid_payload", m),
            Ok(EmailPayload::Parts(parts)) => match self.message(d, &parts) {
                Ok(message) => self.transport.send(message).await,
                Err(outcome) => return outcome,
            },
            Ok(EmailPayload::Raw(raw)) => match self.envelope(d, &raw) {
                Ok(envelope) => {
                    let date = jiff::Timestamp::now().strftime("%a, %d %b %Y %H:%M:%S +0000");
                    let message = raw.to_send(&self.message_id(d), &date.to_string());
                    self.transport.send_raw(&envelope, &message).await
                }
                Err(outcome) => return outcome,
            },
        };
        match sent {
            Ok(_) => Outcome::Sent,
            Err(e) => classify(e.status().map(u16::from), &e.to_string()),
        }
    }
}

impl Channel for EmailChannel {
    fn send<'a>(&'a self, delivery: &'a Leased) -> BoxFuture<'a, Outcome> {
        Box::pin(self.deliver(delivery))
    }
}

/// herald's documented `?tls=starttls` is lettre's `?tls=required` (STARTTLS, and refuse
/// to go on without it); every other form passes through unchanged.
fn lettre_url(url: &str) -> String {
    url.replace("tls=starttls", "tls=required")
}

/// The outcome of an SMTP reply code (`None`: no reply — a connection error).
pub fn classify(code: Option<u16>, message: &str) -> Outcome {
    match code {
        Some(550 | 551 | 553) => Outcome::terminal(format!("smtp_{}", code.unwrap_or(0)), message),
        Some(c @ (530 | 535)) => {
            crate::alerts::raise("smtp_auth");
            tracing::error!(
                code = c,
                "the SMTP relay refused herald's credentials: fix HERALD_SMTP_URL"
            );
            Outcome::transient(format!("smtp_{c}"), message)
        }
        Some(c) => Outcome::transient(format!("smtp_{c}"), message),
        None => {
            crate::alerts::raise("smtp_unreachable");
            Outcome::transient("smtp_connection", message)
        }
    }
}

/// An email payload: the parts of a message herald builds, or a rendered one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EmailPayload<'a> {
    /// `{"subject", "text", "html"?}`.
    Parts(EmailParts<'a>),
    /// `{"raw" | "raw_base64", "envelope"?}`.
    Raw(RawEmail<'a>),
}

/// `{"subject", "text", "html"?}`: herald writes the message, from `HERALD_SMTP_FROM`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmailParts<'a> {
    pub subject: &'a str,
    pub text: &'a str,
    pub html: Option<&'a str>,
}

impl<'a> EmailPayload<'a> {
    /// Checks the shape; the message says what is wrong.
    pub fn from_json(payload: &'a serde_json::Value) -> Result<EmailPayload<'a>, String> {
        let object = payload.as_object().ok_or(
            "an email payload is an object: {subject, text, html?} or a rendered message {raw, envelope?}",
        )?;
        if object.contains_key("raw") || object.contains_key("raw_base64") {
            return RawEmail::from_json(object).map(EmailPayload::Raw);
        }
        if let Some(unknown) =
            object.keys().find(|k| !matches!(k.as_str(), "subject" | "text" | "html"))
        {
            return Err(format!(
                "an email payload has no field {unknown:?} (subject, text, html; or raw, envelope)"
            ));
        }
        let text_field = |name: &str| -> Result<Option<&'a str>, String> {
            match object.get(name) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::String(s)) => Ok(Some(s.as_str())),
                Some(_) => Err(format!("{name} must be a string")),
            }
        };
        let subject = text_field("subject")?.ok_or("subject is required")?;
        let text = text_field("text")?.ok_or("text is required")?;
        if subject.contains(['\r', '\n']) {
            return Err("subject must be one line".into());
        }
        Ok(EmailPayload::Parts(EmailParts { subject, text, html: text_field("html")? }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn debug_hides_the_smtp_password() {
        let options = EmailOptions {
            smtp_url: "smtps://mailer:smtpp4ss@relay.example:465".into(),
            from: "herald@example.com".into(),
            timeout: Duration::from_secs(5),
        };
        // The channel's transport holds the credentials lettre parsed from the URL (its
        // pool needs a runtime, even unused).
        let channel = match EmailChannel::new(&options) {
            Ok(channel) => format!("{channel:?}"),
            Err(e) => e.to_string(),
        };
        for shown in [format!("{options:?}"), channel] {
            assert!(shown.contains("relay.example") && !shown.contains("smtpp4ss"), "{shown}");
        }
    }

    #[test]
    fn replies_classify() {
        let kind = |o: Outcome| match o {
            Outcome::Sent => "sent",
            Outcome::Transient { .. } => "transient",
            Outcome::Terminal { .. } => "terminal",
        };
        let cases = [
            (Some(550), "terminal"),
            (Some(551), "terminal"),
            (Some(553), "terminal"),
            (Some(552), "transient"),
            (Some(554), "transient"),
            (Some(421), "transient"),
            (Some(450), "transient"),
            (Some(530), "transient"),
            (Some(535), "transient"),
            (None, "transient"),
        ];
        for (code, expect) in cases {
            assert_eq!(kind(classify(code, "x")), expect, "{code:?}");
        }
    }

    #[test]
    fn payloads() {
        let ok = serde_json::json!({"subject": "Ready", "text": "Your repair is ready", "html": "<p>Ready</p>"});
        assert!(EmailPayload::from_json(&ok).is_ok());
        for bad in [
            serde_json::json!("text"),
            serde_json::json!({"text": "no subject"}),
            serde_json::json!({"subject": "no text"}),
            serde_json::json!({"subject": 1, "text": "x"}),
            serde_json::json!({"subject": "a\nb", "text": "x"}),
            serde_json::json!({"subject": "s", "text": "x", "attachments": []}),
        ] {
            assert!(EmailPayload::from_json(&bad).is_err(), "{bad}");
        }
    }
}
