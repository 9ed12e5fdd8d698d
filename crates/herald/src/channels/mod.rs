//! Built-in channels: signed webhooks (Standard Webhooks) and SMTP email. Each adapter
//! classifies its own failures; library users add their own `Channel`s next to these.

pub mod email;
pub mod signature;
pub mod ssrf;
pub mod webhook;

pub use email::{EmailChannel, EmailOptions, EmailPayload};
pub use webhook::{WebhookChannel, WebhookOptions};

/// Checks a submit against the built-in channel it names, so a delivery that can never be
/// sent is refused up front (400) rather than accepted and failed later. Other channel
/// names are not checked here.
pub fn validate(channel: &str, to: &str, payload: &serde_json::Value) -> Result<(), String> {
    match channel {
        "webhook" => match reqwest::Url::parse(to) {
            Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(()),
            _ => Err(format!("to must be an http:// or https:// URL for a webhook, got {to:?}")),
        },
        "email" => {
            to.parse::<lettre::message::Mailbox>()
                .map_err(|_| format!("to must be an email address, got {to:?}"))?;
            EmailPayload::from_json(payload).map(drop)
        }
        _ => Ok(()),
    }
}
