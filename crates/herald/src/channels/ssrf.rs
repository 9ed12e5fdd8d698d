//! The SSRF guard: webhooks go to the public internet only, unless the operator allows
//! private targets. Every resolved address is checked and the connection is made to a
//! checked address (the check lives inside the HTTP client's resolver, so there is no
//! window between checking a name and connecting to what it resolves to).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// A target the guard refused; found in an HTTP error's source chain.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("target {0} is a private, loopback, link-local, multicast or unspecified address")]
pub struct TargetRefused(pub IpAddr);

fn v4_public(ip: Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_multicast()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || a == 0 // "this network"
        || (a == 100 && (64..128).contains(&b)) // carrier-grade NAT, 100.64.0.0/10
        || (a == 198 && (b == 18 || b == 19)) // benchmarking, 198.18.0.0/15
        || a >= 240) // reserved
}

fn v6_public(ip: Ipv6Addr) -> bool {
    if let Some(v4) = ip.to_ipv4_mapped() {
        return v4_public(v4);
    }
    let first = ip.segments()[0];
    !(ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_multicast()
        || (first & 0xfe00) == 0xfc00 // unique local, fc00::/7
        || (first & 0xffc0) == 0xfe80) // link-local, fe80::/10
}

/// Whether `ip` may be a webhook target by default.
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4_public(v4),
        IpAddr::V6(v6) => v6_public(v6),
    }
}

/// Checks every address; refuses all of them if any is not public (a name that resolves
/// to both a public and a private address is not trusted with either).
pub fn check(addrs: &[SocketAddr], allow_private: bool) -> Result<(), TargetRefused> {
    if allow_private {
        return Ok(());
    }
    match addrs.iter().find(|a| !is_public(a.ip())) {
        Some(bad) => Err(TargetRefused(bad.ip())),
        None => Ok(()),
    }
}

/// The HTTP client's resolver: the system resolver, then the guard.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow_private = self.allow_private;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            check(&addrs, allow_private)?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        let refused = [
            "127.0.0.1",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "100.64.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
        ];
        for ip in refused {
            let ip: IpAddr = ip.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
            assert!(!is_public(ip), "{ip} must be refused");
        }
        for ip in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"] {
            let ip: IpAddr = ip.parse().unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
            assert!(is_public(ip), "{ip} must be allowed");
        }
        let mixed = [SocketAddr::from(([1, 1, 1, 1], 443)), SocketAddr::from(([10, 0, 0, 1], 443))];
        assert_eq!(check(&mixed, false), Err(TargetRefused(IpAddr::from([10, 0, 0, 1]))));
        assert_eq!(check(&mixed, true), Ok(()));
    }
}
