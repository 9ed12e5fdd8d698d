//! Built-in channels: signed webhooks (Standard Webhooks) and SMTP email. Each adapter
//! classifies its own failures; library users add their own `Channel`s next to these.

pub mod email;
pub mod signature;
pub mod ssrf;
pub mod webhook;

pub use email::{EmailChannel, EmailOptions, EmailPayload};
pub use webhook::{WebhookChannel, WebhookOptions};

use herald_core::Payload;

/// Why a built-in channel could never send a submit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Unsendable {
    /// The field at fault: `to` or `payload`.
    pub field: &'static str,
    pub message: String,
}

/// Checks a submit against the built-in channel it names, so a delivery that can never be
/// sent is refused up front (400) rather than accepted and failed later. Other channel
/// names are not checked here.
pub fn validate(channel: &str, to: &str, payload: &Payload) -> Result<(), Unsendable> {
    let refuse = |field, message| Err(Unsendable { field, message });
    match channel {
        "webhook" => match reqwest::Url::parse(to) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(()),
            _ => refuse(
                "to",
                format!("to must be an http:// or https:// URL for a webhook, got {to:?}"),
            ),
        },
        "email" => {
            if to.parse::<lettre::message::Mailbox>().is_err() {
                return refuse("to", format!("to must be an email address, got {to:?}"));
            }
            // herald's JSON rules first, so the answer is the one a submit would give.
            if let Err(e) = payload.parse() {
                return refuse("payload", format!("payload: {e}"));
            }
            let value = match payload.to_value() {
                Ok(value) => value,
                Err(e) => return refuse("payload", format!("payload: {e}")),
            };
            match EmailPayload::from_json(&value) {
                Ok(_) => Ok(()),
                Err(message) => refuse("payload", message),
            }
        }
        _ => Ok(()),
    }
}
