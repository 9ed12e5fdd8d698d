//! Built-in channels: signed webhooks (Standard Webhooks) and SMTP email. Each adapter
//! classifies its own failures; library users add their own `Channel`s next to these.

pub mod email;
pub mod raw_email;
pub mod signature;
pub mod ssrf;
pub mod webhook;

pub use email::{EmailChannel, EmailOptions, EmailParts, EmailPayload};
pub use raw_email::RawEmail;
pub use webhook::{WebhookChannel, WebhookOptions};

use herald_core::Payload;

/// Why a built-in channel could never send a submit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Unsendable {
    /// The field at fault: `to` or `payload`.
    pub field: &'static str,
    /// Why, in the vocabulary every face shares: `not_a_url`, `not_an_address`, a
    /// payload's JSON problem (`syntax`, ...) or `not_an_email`.
    pub code: &'static str,
    pub message: String,
}

/// Checks a submit against the built-in channel it names, so a delivery that can never be
/// sent is refused up front (400) rather than accepted and failed later. Other channel
/// names are not checked here.
pub fn validate(channel: &str, to: &str, payload: &Payload) -> Result<(), Unsendable> {
    let refuse = |field, code, message| Err(Unsendable { field, code, message });
    // herald's text rule first, so the reason is the one every face gives (a NUL is a
    // control character before it is a malformed address).
    if let Err(e) = herald_core::ident::check("to", to, herald_core::limits::RECIPIENT_LEN_MAX) {
        return refuse(e.field(), e.code(), e.to_string());
    }
    match channel {
        "webhook" => match reqwest::Url::parse(to) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(()),
            _ => refuse(
                "to",
                "not_a_url",
                format!("to must be an http:// or https:// URL for a webhook, got {to:?}"),
            ),
        },
        "email" => {
            if to.parse::<lettre::message::Mailbox>().is_err() {
                return refuse(
                    "to",
                    "not_an_address",
                    format!("to must be an email address, got {to:?}"),
                );
            }
            // herald's JSON rules first, so the answer is the one a submit would give.
            if let Err(e) = payload.parse() {
                return refuse("payload", e.problem.code(), format!("payload: {e}"));
            }
            let value = match payload.to_value() {
                Ok(value) => value,
                Err(e) => return refuse("payload", "syntax", format!("payload: {e}")),
            };
            match EmailPayload::from_json(&value) {
                Ok(_) => Ok(()),
                Err(message) => refuse("payload", "not_an_email", message),
            }
        }
        _ => Ok(()),
    }
}
