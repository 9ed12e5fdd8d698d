//! The delivery channels this process is configured for: `webhook` always; `email` when
//! an SMTP relay is configured. A process leases only deliveries of these channels, and
//! its API refuses submits for any other (400).

use crate::settings::Resolved;
use anyhow::{Result, bail};
use herald::channels::{EmailChannel, EmailOptions, WebhookChannel, WebhookOptions};
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
    let mut channels: Vec<(String, Arc<dyn Channel>)> =
        vec![("webhook".to_string(), Arc::new(webhook))];
    match (&settings.smtp_url, &settings.smtp_from) {
        (Some(url), Some(from)) => {
            let options = EmailOptions {
                smtp_url: url.clone(),
                from: from.clone(),
                timeout: settings.worker.send_timeout,
            };
            channels.push(("email".to_string(), Arc::new(EmailChannel::new(&options)?)));
        }
        (None, None) => {}
        _ => bail!(
            "HERALD_SMTP_URL and HERALD_SMTP_FROM go together: set both for email, or neither"
        ),
    }
    Ok(channels)
}
