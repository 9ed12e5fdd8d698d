//! The SSRF guard: webhooks go to the public internet only, unless the operator allows
//! private targets. Every resolved address is checked and the connection is made to a
//! checked address (the check lives inside the HTTP client's resolver, so there is no
//! window between checking a name and connecting to what it resolves to).
//!
//! An address is public when the IANA IPv4 and IPv6 special-purpose registries mark its
//! block globally reachable (or list it in no block of theirs), and, for an IPv6 form
//! that embeds an IPv4 address, when every embedded IPv4 address is public too. The
//! tables below are the registries' blocks in the order they are tried, most specific
//! first; where we refuse more than the registries do, the comment says why.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// A target the guard refused; found in an HTTP error's source chain. It names the host
/// as the URL has it and the rule, never a resolved address: tenants read this message,
/// and the addresses their names resolve to would map the operator's internal DNS.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("target {host} refused: not globally reachable ({refusal})")]
pub struct TargetRefused {
    /// The URL's host: a name, an IPv4 literal or a bracketed IPv6 literal.
    pub host: String,
    pub refusal: Refusal,
}

/// Why an address is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The address's own block is not globally reachable.
    Block(Block),
    /// An IPv6 form embeds an IPv4 address whose block is not globally reachable.
    Embedded(Form, Block),
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Block(block) => f.write_str(block.name()),
            Refusal::Embedded(form, block) => {
                write!(f, "{} embedding {}", form.name(), block.name())
            }
        }
    }
}

/// A block of addresses that is not globally reachable, named after its registry entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    Unspecified,
    ThisNetwork,
    PrivateUse,
    SharedAddressSpace,
    Loopback,
    LinkLocal,
    IetfProtocolAssignments,
    Documentation,
    Deprecated6to4RelayAnycast,
    Benchmarking,
    Multicast,
    LimitedBroadcast,
    Reserved,
    DiscardOnly,
    Srv6Sids,
    UniqueLocal,
    SiteLocal,
    /// An IPv6 form embedding a public IPv4 address, itself not globally reachable.
    Form(Form),
}

impl Block {
    /// The rule's name in messages: the registry entry's name, lowercase.
    pub fn name(self) -> &'static str {
        match self {
            Block::Unspecified => "unspecified",
            Block::ThisNetwork => "this network",
            Block::PrivateUse => "private-use",
            Block::SharedAddressSpace => "shared address space",
            Block::Loopback => "loopback",
            Block::LinkLocal => "link-local",
            Block::IetfProtocolAssignments => "ietf protocol assignments",
            Block::Documentation => "documentation",
            Block::Deprecated6to4RelayAnycast => "deprecated 6to4 relay anycast",
            Block::Benchmarking => "benchmarking",
            Block::Multicast => "multicast",
            Block::LimitedBroadcast => "limited broadcast",
            Block::Reserved => "reserved",
            Block::DiscardOnly => "discard-only",
            Block::Srv6Sids => "srv6 sids",
            Block::UniqueLocal => "unique-local",
            Block::SiteLocal => "site-local",
            Block::Form(form) => form.name(),
        }
    }
}

/// An IPv6 form that embeds IPv4 addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Mapped,
    Translated,
    Compatible,
    Nat64,
    Nat64LocalUse,
    Teredo,
    SixToFour,
}

impl Form {
    /// The form's name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Form::Mapped => "ipv4-mapped",
            Form::Translated => "ipv4-translated",
            Form::Compatible => "ipv4-compatible",
            Form::Nat64 => "nat64",
            Form::Nat64LocalUse => "nat64 local-use",
            Form::Teredo => "teredo",
            Form::SixToFour => "6to4",
        }
    }

    /// The IPv4 addresses `ip` embeds, the one it is delivered to first.
    fn embedded(self, ip: Ipv6Addr) -> Vec<Ipv4Addr> {
        let s = ip.segments();
        let v4 = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
        match self {
            // RFC 4291, RFC 2765, RFC 6052 with a /96 prefix: the last 32 bits. The local-use
            // NAT64 /48 may be cut into other prefix lengths (RFC 8215), but it is refused
            // whatever it embeds; the /96 reading only names the rule.
            Form::Mapped
            | Form::Translated
            | Form::Compatible
            | Form::Nat64
            | Form::Nat64LocalUse => vec![v4(s[6], s[7])],
            // RFC 4380 §4: the client's address, obfuscated (every bit inverted), in the
            // last 32 bits; the Teredo server's address in bits 32..64.
            Form::Teredo => vec![v4(!s[6], !s[7]), v4(s[2], s[3])],
            // RFC 3056: the site's IPv4 address in bits 16..48.
            Form::SixToFour => vec![v4(s[1], s[2])],
        }
    }
}

/// IPv4 blocks that are not globally reachable, most specific first. Blocks the
/// registry marks globally reachable — 192.31.196.0/24 AS112-v4 (RFC 7535) and
/// 192.52.193.0/24 AMT (RFC 7450) — are public and absent.
const V4_REFUSED: &[(Ipv4Addr, u8, Block)] = &[
    // 0.0.0.0/32, "this host on this network" (RFC 1122).
    (Ipv4Addr::new(0, 0, 0, 0), 32, Block::Unspecified),
    // 0.0.0.0/8, "this network" (RFC 791); Linux connects it to the local host.
    (Ipv4Addr::new(0, 0, 0, 0), 8, Block::ThisNetwork),
    // 10.0.0.0/8, private-use (RFC 1918).
    (Ipv4Addr::new(10, 0, 0, 0), 8, Block::PrivateUse),
    // 100.64.0.0/10, shared address space, carrier-grade NAT (RFC 6598).
    (Ipv4Addr::new(100, 64, 0, 0), 10, Block::SharedAddressSpace),
    // 127.0.0.0/8, loopback (RFC 1122).
    (Ipv4Addr::new(127, 0, 0, 0), 8, Block::Loopback),
    // 169.254.0.0/16, link-local (RFC 3927): cloud metadata services live here.
    (Ipv4Addr::new(169, 254, 0, 0), 16, Block::LinkLocal),
    // 172.16.0.0/12, private-use (RFC 1918).
    (Ipv4Addr::new(172, 16, 0, 0), 12, Block::PrivateUse),
    // 192.0.0.0/24, IETF protocol assignments (RFC 6890): DS-Lite 192.0.0.0/29, the dummy
    // 192.0.0.8, NAT64 discovery 192.0.0.170-171. The registry marks two of its
    // addresses globally reachable, PCP anycast 192.0.0.9 (RFC 7723) and TURN anycast
    // 192.0.0.10 (RFC 8155); we refuse them too: an anycast service address is answered
    // by its nearest instance, for these the sender's own NAT or relay, never a receiver.
    (Ipv4Addr::new(192, 0, 0, 0), 24, Block::IetfProtocolAssignments),
    // 192.0.2.0/24, documentation TEST-NET-1 (RFC 5737).
    (Ipv4Addr::new(192, 0, 2, 0), 24, Block::Documentation),
    // 192.88.99.0/24, the deprecated 6to4 relay anycast (RFC 7526), with the 6a44 relay
    // 192.88.99.2 (RFC 6751) that the registry marks not globally reachable.
    (Ipv4Addr::new(192, 88, 99, 0), 24, Block::Deprecated6to4RelayAnycast),
    // 192.168.0.0/16, private-use (RFC 1918).
    (Ipv4Addr::new(192, 168, 0, 0), 16, Block::PrivateUse),
    // 198.18.0.0/15, benchmarking (RFC 2544).
    (Ipv4Addr::new(198, 18, 0, 0), 15, Block::Benchmarking),
    // 198.51.100.0/24, documentation TEST-NET-2 (RFC 5737).
    (Ipv4Addr::new(198, 51, 100, 0), 24, Block::Documentation),
    // 203.0.113.0/24, documentation TEST-NET-3 (RFC 5737).
    (Ipv4Addr::new(203, 0, 113, 0), 24, Block::Documentation),
    // 224.0.0.0/4, multicast (RFC 5771; its own registry): never one receiver.
    (Ipv4Addr::new(224, 0, 0, 0), 4, Block::Multicast),
    // 255.255.255.255/32, limited broadcast (RFC 919), inside 240.0.0.0/4.
    (Ipv4Addr::new(255, 255, 255, 255), 32, Block::LimitedBroadcast),
    // 240.0.0.0/4, reserved (RFC 1112).
    (Ipv4Addr::new(240, 0, 0, 0), 4, Block::Reserved),
];

/// What the first IPv6 prefix an address falls in decides.
#[derive(Debug, Clone, Copy)]
enum V6Rule {
    Refused(Block),
    /// Globally reachable (a registry exception inside a refused block, or global unicast).
    Reachable,
    /// Decided by the IPv4 addresses it embeds; `reachable` when the form's own block is.
    Embeds {
        form: Form,
        reachable: bool,
    },
}

const fn embeds(form: Form, reachable: bool) -> V6Rule {
    V6Rule::Embeds { form, reachable }
}

/// IPv6 prefixes, most specific first; the last one catches everything else.
const V6_RULES: &[(Ipv6Addr, u8, V6Rule)] = &[
    // ::/128, unspecified (RFC 4291).
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 0), 128, V6Rule::Refused(Block::Unspecified)),
    // ::1/128, loopback (RFC 4291).
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 1), 128, V6Rule::Refused(Block::Loopback)),
    // ::ffff:0:0/96, IPv4-mapped (RFC 4291): a socket connects to the IPv4 address.
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0xffff, 0, 0), 96, embeds(Form::Mapped, false)),
    // ::ffff:0:0:0/96, IPv4-translated (RFC 2765, SIIT); not in the registry, never routed.
    (Ipv6Addr::new(0, 0, 0, 0, 0xffff, 0, 0, 0), 96, embeds(Form::Translated, false)),
    // ::/96, IPv4-compatible, deprecated (RFC 4291 §2.5.5.1); old stacks tunnel it to IPv4.
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 0), 96, embeds(Form::Compatible, false)),
    // 64:ff9b::/96, the NAT64 well-known prefix (RFC 6052): globally reachable, but the
    // translator connects to the embedded address, so that address decides.
    (Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96, embeds(Form::Nat64, true)),
    // 64:ff9b:1::/48, local-use IPv4/IPv6 translation (RFC 8215).
    (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48, embeds(Form::Nat64LocalUse, false)),
    // 100::/64, discard-only (RFC 6666).
    (Ipv6Addr::new(0x100, 0, 0, 0, 0, 0, 0, 0), 64, V6Rule::Refused(Block::DiscardOnly)),
    // 2001::/32, Teredo (RFC 4380): "N/A" in the registry, not marked globally reachable.
    (Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0), 32, embeds(Form::Teredo, false)),
    // 2001:2::/48, benchmarking (RFC 5180).
    (Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 0), 48, V6Rule::Refused(Block::Benchmarking)),
    // 2001:3::/32, AMT (RFC 7450): globally reachable.
    (Ipv6Addr::new(0x2001, 3, 0, 0, 0, 0, 0, 0), 32, V6Rule::Reachable),
    // 2001:4:112::/48, AS112-v6 (RFC 7535): globally reachable.
    (Ipv6Addr::new(0x2001, 4, 0x112, 0, 0, 0, 0, 0), 48, V6Rule::Reachable),
    // 2001:20::/28, ORCHIDv2 (RFC 7343): globally reachable.
    (Ipv6Addr::new(0x2001, 0x20, 0, 0, 0, 0, 0, 0), 28, V6Rule::Reachable),
    // 2001:30::/28, drone remote ID entity tags (RFC 9374): globally reachable.
    (Ipv6Addr::new(0x2001, 0x30, 0, 0, 0, 0, 0, 0), 28, V6Rule::Reachable),
    // 2001::/23, IETF protocol assignments (RFC 2928), with the deprecated ORCHID
    // 2001:10::/28. The anycast addresses 2001:1::1 (PCP), 2001:1::2 (TURN) and 2001:1::3
    // (DNS-SD SRP) are marked globally reachable; refused as their IPv4 peers are.
    (
        Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, 0, 0),
        23,
        V6Rule::Refused(Block::IetfProtocolAssignments),
    ),
    // 2001:db8::/32, documentation (RFC 3849).
    (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0), 32, V6Rule::Refused(Block::Documentation)),
    // 2002::/16, 6to4 (RFC 3056): "N/A" in the registry, not marked globally reachable.
    (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16, embeds(Form::SixToFour, false)),
    // 3fff::/20, documentation (RFC 9637).
    (Ipv6Addr::new(0x3fff, 0, 0, 0, 0, 0, 0, 0), 20, V6Rule::Refused(Block::Documentation)),
    // 2000::/3, global unicast (RFC 4291), with 2620:4f:8000::/48 AS112 (RFC 7534).
    (Ipv6Addr::new(0x2000, 0, 0, 0, 0, 0, 0, 0), 3, V6Rule::Reachable),
    // 5f00::/16, segment routing (SRv6) SIDs (RFC 9602).
    (Ipv6Addr::new(0x5f00, 0, 0, 0, 0, 0, 0, 0), 16, V6Rule::Refused(Block::Srv6Sids)),
    // fc00::/7, unique-local (RFC 4193).
    (Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0), 7, V6Rule::Refused(Block::UniqueLocal)),
    // fe80::/10, link-local (RFC 4291).
    (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10, V6Rule::Refused(Block::LinkLocal)),
    // fec0::/10, site-local, deprecated (RFC 3879) and gone from the registry; refused
    // because stacks still route it inside a site.
    (Ipv6Addr::new(0xfec0, 0, 0, 0, 0, 0, 0, 0), 10, V6Rule::Refused(Block::SiteLocal)),
    // ff00::/8, multicast (RFC 4291).
    (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8, V6Rule::Refused(Block::Multicast)),
    // ::/0: the rest lies outside 2000::/3, reserved by the IETF (IANA's IPv6 address
    // space registry); nothing is allocated or routed there.
    (Ipv6Addr::new(0, 0, 0, 0, 0, 0, 0, 0), 0, V6Rule::Refused(Block::Reserved)),
];

/// Whether the first `len` bits of `a` and `b` are equal (`bits` wide).
fn same_prefix(a: u128, b: u128, len: u8, bits: u32) -> bool {
    (a ^ b).checked_shr(bits - u32::from(len)).unwrap_or(0) == 0
}

fn v4_refusal(ip: Ipv4Addr) -> Option<Block> {
    let n = u128::from(u32::from(ip));
    V4_REFUSED
        .iter()
        .find(|(net, len, _)| same_prefix(n, u128::from(u32::from(*net)), *len, 32))
        .map(|(_, _, block)| *block)
}

fn v6_refusal(ip: Ipv6Addr) -> Option<Refusal> {
    let n = u128::from(ip);
    let rule = V6_RULES
        .iter()
        .find(|(net, len, _)| same_prefix(n, u128::from(*net), *len, 128))
        .map_or(V6Rule::Refused(Block::Reserved), |(_, _, rule)| *rule);
    match rule {
        V6Rule::Refused(block) => Some(Refusal::Block(block)),
        V6Rule::Reachable => None,
        V6Rule::Embeds { form, reachable } => {
            match form.embedded(ip).into_iter().find_map(v4_refusal) {
                Some(block) => Some(Refusal::Embedded(form, block)),
                None if reachable => None,
                None => Some(Refusal::Block(Block::Form(form))),
            }
        }
    }
}

/// Why `ip` may not be a webhook target by default; `None` for a public address.
pub fn refusal(ip: IpAddr) -> Option<Refusal> {
    match ip {
        IpAddr::V4(v4) => v4_refusal(v4).map(Refusal::Block),
        IpAddr::V6(v6) => v6_refusal(v6),
    }
}

/// Checks every address `host` stands for; refuses all of them if any is not public (a
/// name that resolves to both a public and a private address is not trusted with
/// either).
pub fn check(
    host: &str,
    addrs: impl IntoIterator<Item = IpAddr>,
    allow_private: bool,
) -> Result<(), TargetRefused> {
    if allow_private {
        return Ok(());
    }
    for ip in addrs {
        if let Some(refusal) = refusal(ip) {
            // The operator may see the address; the tenant-visible error never names it.
            tracing::debug!(host, address = %ip, %refusal, "webhook target refused");
            return Err(TargetRefused { host: host.to_string(), refusal });
        }
    }
    Ok(())
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
            check(&host, addrs.iter().map(SocketAddr::ip), allow_private)?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The classifier's verdict on `text`: `Ok(None)` for public, else the rule's name.
    fn verdict(text: &str) -> Result<Option<String>, std::net::AddrParseError> {
        text.parse::<IpAddr>().map(|ip| refusal(ip).map(|r| r.to_string()))
    }

    #[test]
    fn ssrf_classifier() {
        let table: &[(&str, Option<&str>)] = &[
            // Public IPv4, including the registry's globally reachable blocks.
            ("8.8.8.8", None),
            ("1.1.1.1", None),
            ("93.184.216.34", None),
            ("100.63.255.255", None),
            ("100.128.0.0", None),
            ("172.15.255.255", None),
            ("172.32.0.0", None),
            ("192.0.1.1", None),
            ("192.31.196.1", None),
            ("192.52.193.1", None),
            ("198.17.255.255", None),
            ("198.20.0.0", None),
            ("223.255.255.255", None),
            // Every IPv4 block that is not globally reachable.
            ("0.0.0.0", Some("unspecified")),
            ("0.1.2.3", Some("this network")),
            ("10.0.0.1", Some("private-use")),
            ("10.255.255.255", Some("private-use")),
            ("100.64.0.1", Some("shared address space")),
            ("100.127.255.255", Some("shared address space")),
            ("127.0.0.1", Some("loopback")),
            ("127.255.255.254", Some("loopback")),
            ("169.254.169.254", Some("link-local")),
            ("172.16.5.4", Some("private-use")),
            ("172.31.255.255", Some("private-use")),
            ("192.0.0.1", Some("ietf protocol assignments")),
            ("192.0.0.8", Some("ietf protocol assignments")),
            ("192.0.0.9", Some("ietf protocol assignments")),
            ("192.0.0.10", Some("ietf protocol assignments")),
            ("192.0.0.170", Some("ietf protocol assignments")),
            ("192.0.2.1", Some("documentation")),
            ("192.88.99.1", Some("deprecated 6to4 relay anycast")),
            ("192.88.99.2", Some("deprecated 6to4 relay anycast")),
            ("192.168.1.1", Some("private-use")),
            ("198.18.0.1", Some("benchmarking")),
            ("198.19.255.255", Some("benchmarking")),
            ("198.51.100.7", Some("documentation")),
            ("203.0.113.9", Some("documentation")),
            ("224.0.0.1", Some("multicast")),
            ("239.255.255.250", Some("multicast")),
            ("240.0.0.1", Some("reserved")),
            ("254.1.2.3", Some("reserved")),
            ("255.255.255.255", Some("limited broadcast")),
            // Public IPv6, including the registry's globally reachable blocks.
            ("2606:4700::1", None),
            ("2606:4700:4700::1111", None),
            ("2001:4860:4860::8888", None),
            ("2001:200::1", None),
            ("2001:3::1", None),
            ("2001:4:112::1", None),
            ("2001:20::1", None),
            ("2001:30::1", None),
            ("2620:4f:8000::1", None),
            ("3fff:1000::1", None),
            // Every IPv6 block that is not globally reachable.
            ("::", Some("unspecified")),
            ("::1", Some("loopback")),
            ("100::1", Some("discard-only")),
            ("100::1:0:0:1", Some("discard-only")),
            ("2001:1::1", Some("ietf protocol assignments")),
            ("2001:1::2", Some("ietf protocol assignments")),
            ("2001:1::3", Some("ietf protocol assignments")),
            ("2001:2::1", Some("benchmarking")),
            ("2001:10::1", Some("ietf protocol assignments")),
            ("2001:1ff::1", Some("ietf protocol assignments")),
            ("2001:db8::1", Some("documentation")),
            ("3fff::1", Some("documentation")),
            ("3fff:fff::1", Some("documentation")),
            ("5f00::1", Some("srv6 sids")),
            ("fc00::1", Some("unique-local")),
            ("fd00::1", Some("unique-local")),
            ("fe80::1", Some("link-local")),
            ("febf::1", Some("link-local")),
            ("fec0::1", Some("site-local")),
            ("feff::1", Some("site-local")),
            ("ff02::1", Some("multicast")),
            ("ff0e::1", Some("multicast")),
            ("::1:0:0:0", Some("reserved")),
            ("1::1", Some("reserved")),
            ("4000::1", Some("reserved")),
            ("64:ff9b:2::1", Some("reserved")),
            // Each form embedding IPv4: a private address names the form and the embedded
            // block; a public one passes only where the form itself is globally reachable.
            ("::ffff:127.0.0.1", Some("ipv4-mapped embedding loopback")),
            ("::ffff:10.0.0.1", Some("ipv4-mapped embedding private-use")),
            ("::ffff:8.8.8.8", Some("ipv4-mapped")),
            ("::ffff:0:127.0.0.1", Some("ipv4-translated embedding loopback")),
            ("::ffff:0:8.8.8.8", Some("ipv4-translated")),
            ("::127.0.0.1", Some("ipv4-compatible embedding loopback")),
            ("::169.254.169.254", Some("ipv4-compatible embedding link-local")),
            ("::8.8.8.8", Some("ipv4-compatible")),
            ("64:ff9b::127.0.0.1", Some("nat64 embedding loopback")),
            ("64:ff9b::7f00:1", Some("nat64 embedding loopback")),
            ("64:ff9b::192.168.0.1", Some("nat64 embedding private-use")),
            ("64:ff9b::100.64.0.1", Some("nat64 embedding shared address space")),
            ("64:ff9b::192.0.2.1", Some("nat64 embedding documentation")),
            ("64:ff9b::8.8.8.8", None),
            ("64:ff9b::1.1.1.1", None),
            ("64:ff9b:1::10.0.0.1", Some("nat64 local-use embedding private-use")),
            ("64:ff9b:1::8.8.8.8", Some("nat64 local-use")),
            ("2002:7f00:1::1", Some("6to4 embedding loopback")),
            ("2002:c0a8:101::1", Some("6to4 embedding private-use")),
            ("2002:a9fe:a9fe::", Some("6to4 embedding link-local")),
            ("2002:808:808::1", Some("6to4")),
            // Teredo: server 65.54.227.120 (public); the client is stored inverted.
            ("2001:0:4136:e378:8000:63bf:80ff:fffe", Some("teredo embedding loopback")),
            ("2001:0:4136:e378:8000:63bf:f5ff:fffe", Some("teredo embedding private-use")),
            ("2001:0:4136:e378:8000:63bf:f7f7:f7f7", Some("teredo")),
            // Teredo with a private server and a public client (8.8.8.8).
            ("2001:0:a00:1:8000:63bf:f7f7:f7f7", Some("teredo embedding private-use")),
        ];
        for (ip, expect) in table {
            assert_eq!(verdict(ip), Ok(expect.map(str::to_string)), "{ip}");
        }
    }

    #[test]
    fn ssrf_check_refuses_a_name_with_any_private_address_and_names_no_address() {
        let mixed = [IpAddr::from([1, 1, 1, 1]), IpAddr::from([10, 0, 0, 1])];
        let refused = check("hooks.example", mixed, false);
        assert_eq!(
            refused,
            Err(TargetRefused {
                host: "hooks.example".into(),
                refusal: Refusal::Block(Block::PrivateUse)
            })
        );
        let message = refused.map_err(|e| e.to_string()).err().unwrap_or_default();
        assert_eq!(message, "target hooks.example refused: not globally reachable (private-use)");
        assert_eq!(check("hooks.example", mixed, true), Ok(()));
        assert_eq!(check("hooks.example", [IpAddr::from([1, 1, 1, 1])], false), Ok(()));
    }
}
