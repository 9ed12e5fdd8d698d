//! Which names herald answers for (issue 37, DNS rebinding). A page on a name its author
//! controls can be made to resolve to 127.0.0.1; the browser then sends that page's
//! requests to a loopback herald as same-origin, with `Host: attacker.example`. So every
//! request naming a host must name one herald answers for: a loopback name (`localhost`,
//! `*.localhost`), a single-label name (`herald`, a service's name in a compose file or a
//! cluster: not a name on the public internet, where a rebinding page's must be), an IP
//! address (no DNS lookup, so nothing to rebind), or a name the operator gave
//! (`HERALD_ALLOWED_HOSTS`, the host of `HERALD_PUBLIC_URL`; `*` lets any through). Otherwise 421, before any route runs. A request without `Host` (HTTP/1.0, a
//! client that is not a browser) is not a browser's, and passes.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::net::IpAddr;

/// The names a request's `Host` may give besides loopback names and IP addresses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    /// Lowercase, without port or trailing dot.
    names: Vec<String>,
    any: bool,
    /// `HERALD_PUBLIC_URL`'s origin (`https://herald.example.com`), lowercase.
    public_origin: Option<String>,
}

impl AllowedHosts {
    /// From `HERALD_ALLOWED_HOSTS` (comma separated names, or `*`) and the host of
    /// `HERALD_PUBLIC_URL`; an error names the entry that is not a host name.
    pub fn parse(list: Option<&str>, public_url: Option<&str>) -> Result<AllowedHosts, String> {
        let mut hosts = AllowedHosts::default();
        for entry in list.unwrap_or("").split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if entry == "*" {
                hosts.any = true;
                continue;
            }
            let name = normalize(entry).filter(|n| valid_name(n)).ok_or_else(|| {
                format!("HERALD_ALLOWED_HOSTS: {entry:?} is not a host name (or `*`)")
            })?;
            hosts.names.push(name);
        }
        if let Some(url) = public_url.filter(|u| !u.trim().is_empty()) {
            let (origin, host) = public_host(url)?;
            hosts.names.push(host);
            hosts.public_origin = Some(origin);
        }
        Ok(hosts)
    }

    /// Whether `origin` (a request's `Origin`) is `HERALD_PUBLIC_URL`'s.
    pub fn is_public_origin(&self, origin: &str) -> bool {
        self.public_origin.as_deref().is_some_and(|o| o.eq_ignore_ascii_case(origin))
    }

    /// Whether a request whose `Host` header is `host` is for this server.
    pub fn allows(&self, host: &str) -> bool {
        if self.any {
            return true;
        }
        let Some(name) = normalize(host) else { return false };
        // A single label (`herald`, a compose or cluster service) is no name on the public
        // internet, where a rebinding page's name must be.
        if !name.contains('.') || name.ends_with(".localhost") {
            return true;
        }
        let literal = name.trim_start_matches('[').trim_end_matches(']');
        literal.parse::<IpAddr>().is_ok() || self.names.contains(&name)
    }
}

/// Whether a `Host` names this machine's loopback: `localhost` (or a name under it),
/// 127.0.0.0/8 or `[::1]` — where browsers keep Secure cookies over plain HTTP.
pub fn is_loopback_host(host: &str) -> bool {
    let Some(name) = normalize(host) else { return false };
    if name == "localhost" || name.ends_with(".localhost") {
        return true;
    }
    let literal = name.trim_start_matches('[').trim_end_matches(']');
    literal.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `HERALD_PUBLIC_URL`'s origin and host (`https://herald.example.com/x` →
/// `https://herald.example.com`, `herald.example.com`), lowercase.
fn public_host(url: &str) -> Result<(String, String), String> {
    let bad = || format!("HERALD_PUBLIC_URL: {url:?} is not an http:// or https:// URL");
    let url = url.trim();
    let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(bad());
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host =
        normalize(authority).filter(|n| valid_name(n) || n.starts_with('[')).ok_or_else(bad)?;
    Ok((format!("{scheme}://{}", authority.to_ascii_lowercase()), host))
}

/// `Host: Example.COM.:8080` → `example.com`; `[::1]:80` → `[::1]`. None for an empty or
/// malformed value.
fn normalize(host: &str) -> Option<String> {
    let host = host.trim();
    let name = if host.starts_with('[') {
        let end = host.find(']')?;
        let (literal, port) = host.split_at(end + 1);
        if !(port.is_empty() || port.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        literal
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if is_port(port) => name,
            Some(_) => return None,
            None => host,
        }
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    (!name.is_empty()).then_some(name)
}

fn is_port(s: &str) -> bool {
    !s.is_empty() && s.len() <= 5 && s.bytes().all(|b| b.is_ascii_digit())
}

fn valid_name(name: &str) -> bool {
    name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

/// The middleware: a request naming a host herald does not answer for is refused.
pub async fn check(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let host = request.headers().get(header::HOST).map(|h| h.to_str().unwrap_or(""));
    match host {
        Some(host) if !state.allowed_hosts.allows(host) => ApiError::new(
            StatusCode::MISDIRECTED_REQUEST,
            "host_not_allowed",
            "this server answers for loopback names, IP addresses and the names in \
             HERALD_ALLOWED_HOSTS or HERALD_PUBLIC_URL; the request's Host is none of them",
        )
        .into_response(),
        _ => next.run(request).await,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn loopback_hosts_are_told_apart() {
        for host in [
            "localhost",
            "LOCALHOST:8080",
            "app.localhost",
            "127.0.0.1:80",
            "127.9.9.9",
            "[::1]:8080",
        ] {
            assert!(is_loopback_host(host), "{host}");
        }
        for host in ["", "herald", "10.0.0.1", "[::2]", "localhost.example.com", "127.0.0.1.nip.io"]
        {
            assert!(!is_loopback_host(host), "{host}");
        }
    }

    #[test]
    fn loopback_names_and_addresses_pass_and_other_names_need_the_list() {
        let default = AllowedHosts::default();
        for host in [
            "localhost",
            "localhost:8080",
            "LOCALHOST.",
            "app.localhost:1",
            "127.0.0.1:8080",
            "10.0.0.5",
            "[::1]:8080",
            "[fe80::1]",
            "herald:8080",
        ] {
            assert!(default.allows(host), "{host}");
        }
        for host in [
            "attacker.example",
            "attacker.example:8080",
            "localhost.attacker.example",
            "",
            ":80",
            "a:b:c",
            "[::1]x",
        ] {
            assert!(!default.allows(host), "{host}");
        }
        let listed = AllowedHosts::parse(
            Some("herald.internal, Other.Example."),
            Some("https://pub.example.com/x"),
        )
        .unwrap();
        for host in ["herald.internal:8080", "other.example", "pub.example.com"] {
            assert!(listed.allows(host), "{host}");
        }
        assert!(!listed.allows("attacker.example"));
        assert!(listed.is_public_origin("https://PUB.example.com"));
        assert!(!listed.is_public_origin("https://pub.example.com.attacker.example"));
        assert!(AllowedHosts::parse(Some("*"), None).unwrap().allows("anything.example"));
        for (list, url) in [(Some("bad host"), None), (Some("a/b"), None), (None, Some("ftp://x"))]
        {
            assert!(AllowedHosts::parse(list, url).is_err(), "{list:?} {url:?}");
        }
    }
}
