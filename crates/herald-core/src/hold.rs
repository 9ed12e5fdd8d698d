//! Holds: an operator's "stop sending" for a channel, a tenant or a destination, with or
//! without a tenant to narrow it. Pending deliveries in a held scope wait — no attempt is
//! spent — until the hold is released; then they are due again at the time they were due.
//!
//! A destination is where a send goes: a webhook's host (lowercase, without port), the
//! SMTP relay (`smtp`) for every email, the channel's own name for a channel of the
//! library user's.

use uuid::Uuid;

/// What a hold covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HoldKind {
    Channel,
    Tenant,
    Destination,
}

impl HoldKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HoldKind::Channel => "channel",
            HoldKind::Tenant => "tenant",
            HoldKind::Destination => "destination",
        }
    }

    pub fn parse(text: &str) -> Option<HoldKind> {
        match text {
            "channel" => Some(HoldKind::Channel),
            "tenant" => Some(HoldKind::Tenant),
            "destination" => Some(HoldKind::Destination),
            _ => None,
        }
    }
}

impl std::fmt::Display for HoldKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A scope held: `kind` = `value` (a channel name, a tenant id, a destination), and only
/// `tenant`'s deliveries when given (a tenant hold names its tenant in `value`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct HoldScope {
    pub kind: HoldKind,
    pub value: String,
    pub tenant: Option<Uuid>,
}

impl HoldScope {
    /// Whether a delivery of `tenant` on `channel` to `to` is in this scope.
    pub fn covers(&self, tenant: Uuid, channel: &str, to: &str) -> bool {
        if self.tenant.is_some_and(|t| t != tenant) {
            return false;
        }
        match self.kind {
            HoldKind::Channel => self.value == channel,
            HoldKind::Tenant => self.value == tenant.to_string(),
            HoldKind::Destination => destination_of(channel, to) == self.value,
        }
    }
}

/// The destination of a send: a webhook URL's host, lowercase, without port or brackets'
/// contents changed (`[::1]` stays as written, lowercased); `smtp` for an email; the
/// channel's name for any other channel. A `to` that is no URL is its own destination.
pub fn destination_of(channel: &str, to: &str) -> String {
    match channel {
        "email" => "smtp".to_string(),
        "webhook" => url_host(to).unwrap_or(to).to_ascii_lowercase(),
        other => other.to_string(),
    }
}

/// The host of an `http://` or `https://` URL, without userinfo and port.
pub fn url_host(url: &str) -> Option<&str> {
    let (scheme, rest) = url.split_once("://")?;
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if host_port.starts_with('[') {
        return host_port.find(']').map(|end| &host_port[..=end]);
    }
    let host = host_port.split(':').next().unwrap_or("");
    (!host.is_empty()).then_some(host)
}

/// A destination as an operator may name it: 1 to 255 bytes of a host's characters
/// (letters, digits, `.`, `-`, `_`, `:` and brackets for IPv6), or `smtp`.
pub fn check_destination(value: &str) -> Result<String, String> {
    let lower = value.trim().to_ascii_lowercase();
    let ok = !lower.is_empty()
        && lower.len() <= 255
        && lower.bytes().all(|b| b.is_ascii_alphanumeric() || b".-_:[]".contains(&b));
    if ok {
        Ok(lower)
    } else {
        Err(format!(
            "a destination is a host name such as hooks.example.com (or smtp), got {value:?}"
        ))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn destinations() {
        let cases = [
            ("webhook", "https://Hooks.Example.com/a?b", "hooks.example.com"),
            ("webhook", "http://hooks.example.com:8443", "hooks.example.com"),
            ("webhook", "HTTPS://user:pw@hooks.example.com/x", "hooks.example.com"),
            ("webhook", "https://[::1]:9000/x", "[::1]"),
            ("webhook", "https://example.com#frag", "example.com"),
            ("email", "a@example.com", "smtp"),
            ("sms", "+33600000000", "sms"),
        ];
        for (channel, to, want) in cases {
            assert_eq!(destination_of(channel, to), want, "{channel} {to}");
        }
    }

    #[test]
    fn scopes() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let host = HoldScope {
            kind: HoldKind::Destination,
            value: "hooks.example.com".into(),
            tenant: None,
        };
        assert!(host.covers(a, "webhook", "https://hooks.example.com/x"));
        assert!(host.covers(b, "webhook", "https://hooks.example.com/y"));
        assert!(!host.covers(a, "webhook", "https://other.example.com/x"));
        let mine = HoldScope { tenant: Some(a), ..host.clone() };
        assert!(mine.covers(a, "webhook", "https://hooks.example.com/x"));
        assert!(!mine.covers(b, "webhook", "https://hooks.example.com/x"));
        let tenant = HoldScope { kind: HoldKind::Tenant, value: a.to_string(), tenant: None };
        assert!(tenant.covers(a, "email", "x@example.com") && !tenant.covers(b, "email", "x"));
        let channel = HoldScope { kind: HoldKind::Channel, value: "email".into(), tenant: None };
        assert!(channel.covers(b, "email", "x@example.com") && !channel.covers(b, "webhook", "x"));
        assert!(check_destination("Hooks.Example.com").is_ok());
        assert!(check_destination("a/b").is_err() && check_destination("").is_err());
    }
}
