//! The `webhook` channel: an HTTP POST of the payload, signed per Standard Webhooks.
//!
//! Classification (SPEC "Channels"): 2xx sent; 400, 410, 413, 415, 422 terminal (the
//! request itself is refused); everything else — 401/403/404 during a receiver's deploy,
//! 408, 409, 429, 3xx (redirects are not followed), 5xx, timeouts, connection errors —
//! transient, with Retry-After (seconds or an HTTP date) passed on. A target the SSRF
//! guard refuses is terminal (`target_refused`): retrying cannot make it public. Its
//! message, which the tenant reads, names the host and the rule, never an address a name
//! resolved to.

use super::signature::sign;
use super::ssrf::{GuardedResolver, TargetRefused, check};
use crate::BoxFuture;
use crate::channel::{Channel, Leased, Outcome};
use crate::error::Error;
use crate::handle::Herald;
use herald_store::tenants::tenant_get;
use std::sync::Arc;
use std::time::Duration;

/// Settings of the webhook channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WebhookOptions {
    /// `HERALD_ALLOW_PRIVATE_TARGETS`.
    pub allow_private_targets: bool,
    /// Per request; keep it within the worker's send timeout.
    pub timeout: Duration,
}

impl Default for WebhookOptions {
    fn default() -> Self {
        WebhookOptions {
            allow_private_targets: false,
            timeout: herald_core::limits::SEND_TIMEOUT_DEFAULT,
        }
    }
}

/// Sends webhooks for every tenant, signed with the tenant's secret(s).
#[derive(Debug, Clone)]
pub struct WebhookChannel {
    herald: Herald,
    client: reqwest::Client,
    options: WebhookOptions,
}

impl WebhookChannel {
    pub fn new(herald: Herald, options: WebhookOptions) -> Result<WebhookChannel, Error> {
        // reqwest is built without a bundled crypto provider; use ring's (first one wins).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(options.timeout)
            .no_proxy()
            .user_agent(concat!("herald/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(Arc::new(GuardedResolver {
                allow_private: options.allow_private_targets,
            }))
            .build()
            .map_err(|e| {
                // reqwest's own text is "builder error": the cause is in its sources.
                let mut why = e.to_string();
                let mut source = std::error::Error::source(&e);
                while let Some(s) = source {
                    why.push_str(&format!(": {s}"));
                    source = s.source();
                }
                Error::app(format!(
                    "cannot build the webhooks' HTTP client ({why}); HTTPS needs the system's \
                     CA certificates (/etc/ssl/certs; Debian: the ca-certificates package)"
                ))
            })?;
        Ok(WebhookChannel { herald, client, options })
    }

    async fn deliver(&self, d: &Leased) -> Outcome {
        let parsed = reqwest::Url::parse(&d.to)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https"))
            .and_then(|url| Some((url.host_str()?.to_string(), url)));
        let Some((host, url)) = parsed else {
            return Outcome::terminal("invalid_url", "`to` must be an http:// or https:// URL");
        };
        // IP literals never reach the resolver: check them here. Like the resolver's, this
        // refusal names the URL's host: for a literal, what the tenant wrote (as the URL
        // parser normalises it), which tells them nothing they did not know.
        let literal = host.trim_start_matches('[').trim_end_matches(']').parse().ok();
        if let Some(ip) = literal
            && let Err(refused) = check(&host, [ip], self.options.allow_private_targets)
        {
            return Outcome::terminal("target_refused", refused.to_string());
        }
        let tenant = d.tenant;
        let secrets = self
            .herald
            .read(|conn, _| Box::pin(async move { tenant_get(conn, tenant.as_uuid()).await }))
            .await;
        let secrets = match secrets {
            Ok(row) => match row {
                Some(t) => t,
                None => return Outcome::terminal("unknown_tenant", "the tenant no longer exists"),
            },
            Err(e) => {
                return Outcome::transient(
                    "database",
                    format!("cannot read the signing secret: {e}"),
                );
            }
        };
        let mut keys = vec![secrets.webhook_secret.as_str()];
        keys.extend(secrets.webhook_secret_previous.as_deref());
        // The payload's text exactly as it was submitted: every digit, every byte.
        let body = d.payload.as_str().as_bytes().to_vec();
        let id = d.id.to_string();
        let timestamp = jiff::Timestamp::now().as_second();
        let signature = match sign(&keys, &id, timestamp, &body) {
            Ok(s) => s,
            Err(e) => return Outcome::transient("bad_secret", e.to_string()),
        };
        let mut request = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header("webhook-id", &id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature);
        // The attempt's span, so that the receiver's work joins the submit's trace (not
        // signed: tracing context is the receiver's to trust or not, as W3C says).
        if let Some(traceparent) = &d.traceparent {
            request = request.header("traceparent", traceparent);
        }
        let response = request.body(body).send().await;
        match response {
            Ok(r) => {
                let outcome = classify(
                    r.status().as_u16(),
                    r.headers().get("retry-after").and_then(|v| v.to_str().ok()),
                );
                match outcome {
                    Outcome::Sent => Outcome::Sent,
                    failed => with_excerpt(failed, body_excerpt(r).await),
                }
            }
            Err(e) => {
                if let Some(refused) = find_source::<TargetRefused>(&e) {
                    return Outcome::terminal("target_refused", refused.to_string());
                }
                let code = if e.is_timeout() { "timeout" } else { "connection" };
                Outcome::transient(code, error_chain(&e))
            }
        }
    }
}

impl Channel for WebhookChannel {
    fn send<'a>(&'a self, delivery: &'a Leased) -> BoxFuture<'a, Outcome> {
        Box::pin(self.deliver(delivery))
    }
}

/// The outcome of an HTTP status (and its Retry-After).
pub fn classify(status: u16, retry_after: Option<&str>) -> Outcome {
    match status {
        200..=299 => Outcome::Sent,
        400 | 410 | 413 | 415 | 422 => Outcome::terminal(
            format!("http_{status}"),
            format!("the receiver refused the request ({status})"),
        ),
        _ => Outcome::Transient {
            retry_after: retry_after.and_then(parse_retry_after),
            code: format!("http_{status}"),
            message: format!("the receiver answered {status}"),
        },
    }
}

/// Bytes of a refusing receiver's answer kept in the attempt's error message.
pub const EXCERPT_MAX: usize = 256;

/// The start of a receiver's answer, as text: at most `EXCERPT_MAX` bytes read (a longer
/// body is not waited for), invalid UTF-8 replaced, control characters as spaces. The
/// receiver wrote it, so whoever shows it treats it as hostile text.
async fn body_excerpt(mut r: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < EXCERPT_MAX {
        match r.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    excerpt(&bytes)
}

/// `EXCERPT_MAX` bytes of `bytes` as one line of text, cut at a character boundary.
pub fn excerpt(bytes: &[u8]) -> String {
    let cut = bytes.len() > EXCERPT_MAX;
    let text = String::from_utf8_lossy(&bytes[..bytes.len().min(EXCERPT_MAX)]);
    // A character the cut split in two is dropped, not shown as a replacement.
    let text = if cut { text.trim_end_matches('\u{FFFD}') } else { &text };
    let mut line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    if cut {
        line.push('…');
    }
    line.trim().to_string()
}

/// A refusal's message with what the receiver said, when it said anything.
fn with_excerpt(outcome: Outcome, said: String) -> Outcome {
    if said.is_empty() {
        return outcome;
    }
    match outcome {
        Outcome::Transient { retry_after, code, message } => {
            Outcome::Transient { retry_after, code, message: format!("{message}: {said}") }
        }
        Outcome::Terminal { code, message } => {
            Outcome::Terminal { code, message: format!("{message}: {said}") }
        }
        Outcome::Sent => Outcome::Sent,
    }
}

/// Retry-After as delay-seconds or an HTTP date.
pub fn parse_retry_after(value: &str) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let date = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let delta = date.duration_since(jiff::Timestamp::now());
    Some(Duration::try_from(delta).unwrap_or(Duration::ZERO))
}

fn find_source<'e, T: std::error::Error + 'static>(
    e: &'e (dyn std::error::Error + 'static),
) -> Option<&'e T> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(found) = c.downcast_ref::<T>() {
            return Some(found);
        }
        cause = c.source();
    }
    None
}

fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![e.to_string()];
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cause = c.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receivers_answer_is_kept_short_and_on_one_line() {
        assert_eq!(excerpt(b""), "");
        assert_eq!(
            excerpt(b"  <b>down</b>\r\n\tfor\x00maintenance\n"),
            "<b>down</b>   for maintenance"
        );
        assert_eq!(excerpt(&[0xff, b'o', b'k']), "\u{FFFD}ok");
        let long = "é".repeat(EXCERPT_MAX);
        let cut = excerpt(long.as_bytes());
        assert!(cut.ends_with("é…") && cut.len() <= EXCERPT_MAX + '…'.len_utf8(), "{cut}");
        let failed = with_excerpt(classify(503, None), excerpt(b"busy"));
        assert!(
            matches!(&failed, Outcome::Transient { message, .. } if message == "the receiver answered 503: busy"),
            "{failed:?}"
        );
    }

    #[test]
    fn statuses() {
        let kind = |o: Outcome| match o {
            Outcome::Sent => "sent",
            Outcome::Transient { .. } => "transient",
            Outcome::Terminal { .. } => "terminal",
        };
        let cases = [
            (200, "sent"),
            (204, "sent"),
            (301, "transient"),
            (302, "transient"),
            (400, "terminal"),
            (401, "transient"),
            (403, "transient"),
            (404, "transient"),
            (408, "transient"),
            (409, "transient"),
            (410, "terminal"),
            (413, "terminal"),
            (415, "terminal"),
            (422, "terminal"),
            (429, "transient"),
            (500, "transient"),
            (503, "transient"),
        ];
        for (status, expect) in cases {
            assert_eq!(kind(classify(status, None)), expect, "{status}");
        }
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), Some(Duration::ZERO));
        assert_eq!(parse_retry_after("soon"), None);
        let retry_after = match classify(429, Some("7")) {
            Outcome::Transient { retry_after, .. } => retry_after,
            _ => None,
        };
        assert_eq!(retry_after, Some(Duration::from_secs(7)));
    }
}
