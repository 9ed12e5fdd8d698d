//! Built-in channels: signed webhooks (Standard Webhooks) and SMTP email. Each adapter
//! classifies its own failures; library users add their own `Channel`s next to these.

pub mod signature;
pub mod ssrf;
pub mod webhook;

pub use webhook::{WebhookChannel, WebhookOptions};
