//! Which targets may be reached: the strict host parser, matching against
//! the rules, internal address classes, and the one lookup whose answer is
//! dialled.

use std::fmt;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use crate::netrule::{HostPattern, HostRule};

use super::respond::printable;
use super::CONFIG_KEY;

/// The default resolver: the system's `getaddrinfo` through `ToSocketAddrs`.
pub fn system_resolve(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    Ok((host, port).to_socket_addrs()?.collect())
}

/// Why a target was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Short text, e.g. `not in network_allowlist`.
    pub reason: String,
    /// 403 for a policy refusal, 502 when the name could not be resolved.
    pub status: u16,
}

impl Refusal {
    pub(super) fn policy(reason: impl Into<String>) -> Refusal {
        Refusal {
            reason: reason.into(),
            status: 403,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Refusal {}

/// A validated, canonical request target host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Target {
    Name(String),
    Ip(IpAddr),
}

/// Decide whether `host:port` may be reached, and at which address.
///
/// `host` is what the client wrote (a name, an IP literal in any spelling,
/// or a bracketed IPv6 literal). Malformed hosts and hosts that match no rule
/// are refused without calling `resolve`; a name that matches is resolved once
/// and refused if any of its addresses is internal and not listed literally.
/// The returned address is the one to dial.
pub fn decide(
    host: &str,
    port: u16,
    rules: &[HostRule],
    resolve: &dyn Fn(&str, u16) -> io::Result<Vec<SocketAddr>>,
) -> Result<SocketAddr, Refusal> {
    check(host, port, rules, resolve).map(|(_, addr)| addr)
}

pub(super) fn check(
    host: &str,
    port: u16,
    rules: &[HostRule],
    resolve: &dyn Fn(&str, u16) -> io::Result<Vec<SocketAddr>>,
) -> Result<(Target, SocketAddr), Refusal> {
    let target = parse_host(host).map_err(|e| Refusal::policy(format!("invalid host: {e}")))?;
    if port == 0 {
        return Err(Refusal::policy("port 0"));
    }
    if !rules.iter().any(|r| rule_matches(r, &target, port)) {
        return Err(Refusal::policy(format!("not in {CONFIG_KEY}")));
    }
    let name = match &target {
        Target::Ip(ip) => {
            let addr = SocketAddr::new(canon_ip(*ip), port);
            return Ok((target, addr));
        }
        Target::Name(name) => name,
    };
    // A name only a `*.domain` rule allows has labels the client chose: it
    // is looked up as an absolute name (trailing dot), so the resolver's
    // search list never turns it into a query for an internal zone. A name
    // the allowlist lists exactly is looked up as written (an /etc/hosts
    // entry does not match the absolute form).
    let exact = rules
        .iter()
        .any(|r| r.host == HostPattern::Name(name.clone()) && port_allowed(r.port, port));
    let lookup = if exact {
        name.clone()
    } else {
        format!("{name}.")
    };
    let addrs = resolve(&lookup, port).map_err(|e| Refusal {
        reason: format!("cannot resolve {name}: {e}"),
        status: 502,
    })?;
    let mut chosen = None;
    for addr in &addrs {
        let ip = canon_ip(addr.ip());
        if let Some(kind) = internal_kind(ip) {
            if !ip_listed(ip, port, rules) {
                return Err(Refusal::policy(format!(
                    "resolves to {kind} address {ip}, which {CONFIG_KEY} does not list"
                )));
            }
        }
        chosen.get_or_insert(SocketAddr::new(ip, port));
    }
    match chosen {
        Some(addr) => Ok((target, addr)),
        None => Err(Refusal {
            reason: format!("{name} has no addresses"),
            status: 502,
        }),
    }
}

/// Validate and canonicalise a host as the client wrote it.
pub(super) fn parse_host(host: &str) -> Result<Target, String> {
    if host.is_empty() {
        return Err("empty host".into());
    }
    if let Some(c) = host.chars().find(|&c| {
        c.is_control()
            || c.is_whitespace()
            || !c.is_ascii()
            || matches!(c, '%' | '@' | '*' | '/' | '\\' | '?' | '#' | '"' | '\'')
    }) {
        return Err(format!("character {c:?} is not allowed in a host name"));
    }
    let v6 = match host.strip_prefix('[') {
        Some(rest) => Some(rest.strip_suffix(']').ok_or("unclosed `[`")?),
        None if host.contains(':') => Some(host),
        None => None,
    };
    if let Some(v6) = v6 {
        return v6
            .parse::<Ipv6Addr>()
            .map(|ip| Target::Ip(IpAddr::V6(ip)))
            .map_err(|_| "not a valid IPv6 address".to_string());
    }
    // The allowlist's own parser, so that a target and a rule written the same
    // way are canonicalised the same way.
    match HostRule::parse(host)? {
        HostRule {
            host: HostPattern::Name(name),
            port: None,
        } => Ok(Target::Name(name)),
        HostRule {
            host: HostPattern::Ip(ip),
            port: None,
        } => Ok(Target::Ip(ip)),
        _ => Err("not a host name".into()),
    }
}

/// IPv4-mapped IPv6 addresses are their IPv4 address.
pub(super) fn canon_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

fn port_allowed(rule_port: Option<u16>, port: u16) -> bool {
    match rule_port {
        Some(p) => p == port,
        None => port == 80 || port == 443,
    }
}

fn rule_matches(rule: &HostRule, target: &Target, port: u16) -> bool {
    if !port_allowed(rule.port, port) {
        return false;
    }
    match (&rule.host, target) {
        (HostPattern::Name(n), Target::Name(t)) => n == t,
        (HostPattern::Subdomains(d), Target::Name(t)) => {
            t.len() > d.len() + 1
                && t.ends_with(d.as_str())
                && t.as_bytes()[t.len() - d.len() - 1] == b'.'
        }
        (HostPattern::Ip(a), Target::Ip(b)) => canon_ip(*a) == canon_ip(*b),
        _ => false,
    }
}

fn ip_listed(ip: IpAddr, port: u16, rules: &[HostRule]) -> bool {
    rules.iter().any(|r| match r.host {
        HostPattern::Ip(listed) => canon_ip(listed) == ip && port_allowed(r.port, port),
        _ => false,
    })
}

/// What kind of internal address `ip` is, if it is one.
fn internal_kind(ip: IpAddr) -> Option<&'static str> {
    match canon_ip(ip) {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => internal_v6(v6),
    }
}

fn internal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) {
        Some("cloud metadata")
    } else if o[0] == 0 {
        Some("unspecified")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
        Some("private (CGNAT)")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if o[0] >= 240 {
        Some("reserved")
    } else {
        None
    }
}

fn internal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        Some("cloud metadata")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if (s[0] & 0xfe00) == 0xfc00 {
        Some("private (ULA)")
    } else if (s[0] & 0xffc0) == 0xfe80 {
        Some("link-local")
    } else if (s[0] & 0xffc0) == 0xfec0 {
        Some("site-local")
    } else if (s[0] & 0xff00) == 0xff00 {
        Some("multicast")
    } else if s[..6] == [0; 6] || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4]) {
        // IPv4-compatible and NAT64 addresses carry an IPv4 address.
        let [a, b, c, d] = ip.octets()[12..] else {
            return None;
        };
        internal_v4(Ipv4Addr::new(a, b, c, d))
    } else {
        None
    }
}

/// Split `host:port` or `[v6]:port`; the port must be decimal, 1 to 65535.
pub(super) fn split_authority(authority: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if authority.starts_with('[') {
        let end = authority.find(']').ok_or("unclosed `[`")?;
        let (host, after) = authority.split_at(end + 1);
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':').ok_or("text after `]`")?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err("an IPv6 address must be in brackets".into())
            }
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => {
            let ok = !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit());
            match p.parse::<u16>() {
                Ok(n) if ok && n > 0 => Some(n),
                _ => return Err(format!("bad port {:?}", printable(p))),
            }
        }
    };
    Ok((host, port))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::sync::Mutex;

    fn rules(list: &[&str]) -> Vec<HostRule> {
        list.iter().map(|s| HostRule::parse(s).unwrap()).collect()
    }

    /// A resolver over a fixed table that records every name it is asked.
    struct FakeDns {
        table: HashMap<String, Vec<IpAddr>>,
        asked: Mutex<Vec<String>>,
    }

    impl FakeDns {
        fn new(entries: &[(&str, &[&str])]) -> FakeDns {
            let table = entries
                .iter()
                .map(|(name, ips)| {
                    let ips = ips.iter().map(|ip| ip.parse().unwrap()).collect();
                    (name.to_string(), ips)
                })
                .collect();
            FakeDns {
                table,
                asked: Mutex::new(Vec::new()),
            }
        }
        fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
            self.asked.lock().unwrap().push(host.to_string());
            let _ = port;
            // An absolute name (trailing dot) is the same name to DNS.
            match self.table.get(host.strip_suffix('.').unwrap_or(host)) {
                // A port the proxy must ignore: it dials the requested one.
                Some(ips) => Ok(ips.iter().map(|ip| SocketAddr::new(*ip, 1)).collect()),
                None => Err(io::Error::new(io::ErrorKind::NotFound, "no such host")),
            }
        }
        fn asked(&self) -> Vec<String> {
            self.asked.lock().unwrap().clone()
        }
    }

    fn run(list: &[&str], dns: &FakeDns, host: &str, port: u16) -> Result<SocketAddr, Refusal> {
        decide(host, port, &rules(list), &|h, p| dns.resolve(h, p))
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    const PUBLIC: &str = "93.184.216.34";

    fn public_dns() -> FakeDns {
        FakeDns::new(&[
            ("allowed.com", &[PUBLIC]),
            ("a.example.com", &[PUBLIC]),
            ("a.b.example.com", &[PUBLIC]),
            ("example.com", &[PUBLIC]),
            ("allowed.com.evil.com", &[PUBLIC]),
            ("evilallowed.com", &[PUBLIC]),
            ("badexample.com", &[PUBLIC]),
        ])
    }

    #[test]
    fn exact_names_and_default_ports() {
        let dns = public_dns();
        let r = &["allowed.com"];
        assert_eq!(
            run(r, &dns, "allowed.com", 443),
            Ok(addr("93.184.216.34:443"))
        );
        assert_eq!(
            run(r, &dns, "allowed.com", 80),
            Ok(addr("93.184.216.34:80"))
        );
        let refused = run(r, &dns, "allowed.com", 8443).unwrap_err();
        assert_eq!(refused.reason, "not in network_allowlist");
        assert_eq!(refused.status, 403);
        assert!(run(r, &dns, "allowed.com", 22).is_err());
        assert_eq!(dns.asked(), ["allowed.com", "allowed.com"]);

        let r = &["allowed.com:8443"];
        assert!(run(r, &dns, "allowed.com", 8443).is_ok());
        assert!(run(r, &dns, "allowed.com", 443).is_err());
        assert!(run(r, &dns, "allowed.com", 0).is_err());
    }

    #[test]
    fn case_and_trailing_dot_are_canonicalised() {
        let dns = public_dns();
        for host in ["ALLOWED.COM.", "Allowed.Com", "allowed.com."] {
            assert!(run(&["allowed.com"], &dns, host, 443).is_ok(), "{host}");
        }
        assert!(dns.asked().iter().all(|h| h == "allowed.com"));
        assert!(run(&["allowed.com"], &dns, "allowed.com..", 443).is_err());
    }

    #[test]
    fn classic_tricks_are_refused_without_a_lookup() {
        let dns = public_dns();
        for host in [
            "allowed.com.evil.com",
            "evilallowed.com",
            "allowed.com%00.evil",
            "allowed.com%2e",
            "allowed.com\0.evil",
            "allowed.com\r\n.evil",
            "allowed.com\n",
            "allowed.com\t",
            "allowed .com",
            " allowed.com",
            "user@allowed.com",
            "allowed.com@evil.com",
            "allowed.com:443",
            "*.allowed.com",
            "*",
            "allowed..com",
            ".allowed.com",
            "allowed.com/",
            "allowed.com\\evil",
            "allowed.com?",
            "allowed.com#",
            "allowéd.com",
            "xn--allowed.com\u{200b}",
            "[allowed.com]",
            "[::1",
            "",
            "-allowed.com",
            &"a".repeat(300),
        ] {
            let refused = run(&["allowed.com", "*.allowed.com"], &dns, host, 443).unwrap_err();
            assert_eq!(refused.status, 403, "{host:?}");
        }
        assert_eq!(
            dns.asked(),
            Vec::<String>::new(),
            "a refused name was looked up"
        );
    }

    #[test]
    fn wildcard_matches_strict_subdomains_only() {
        let dns = public_dns();
        let r = &["*.example.com"];
        assert!(run(r, &dns, "a.example.com", 443).is_ok());
        assert!(run(r, &dns, "a.b.example.com", 80).is_ok());
        for host in [
            "example.com",
            "badexample.com",
            "a.example.com.evil",
            "example.com.a",
        ] {
            assert!(run(r, &dns, host, 443).is_err(), "{host}");
        }
        // Labels the client chose are looked up as absolute names, so the
        // resolver's search list never adds an internal domain to them.
        assert_eq!(dns.asked(), ["a.example.com.", "a.b.example.com."]);
        // A name listed exactly is looked up as written (/etc/hosts).
        let r = &["a.example.com", "*.example.com"];
        assert!(run(r, &dns, "a.example.com", 443).is_ok());
        assert_eq!(
            dns.asked().last().map(String::as_str),
            Some("a.example.com")
        );
    }

    #[test]
    fn ip_literals_in_every_spelling_match_only_listed_ips() {
        let dns = public_dns();
        let r = &["127.0.0.1:8080", "[2001:db8::1]:443"];
        for host in [
            "127.0.0.1",
            "127.1",
            "0x7f.1",
            "0x7f.0.0.1",
            "2130706433",
            "0x7f000001",
            "0177.0.0.1",
            "127.0.0.1.",
            "[::ffff:127.0.0.1]",
            "::ffff:127.0.0.1",
            "[::FFFF:7f00:1]",
        ] {
            assert_eq!(
                run(r, &dns, host, 8080),
                Ok(addr("127.0.0.1:8080")),
                "{host}"
            );
        }
        assert_eq!(
            run(r, &dns, "[2001:DB8:0::1]", 443),
            Ok(addr("[2001:db8::1]:443"))
        );
        for (host, port) in [
            ("127.0.0.2", 8080),
            ("127.1", 8081),
            ("0x7f.2", 8080),
            ("[::1]", 8080),
            ("2001:db8::2", 443),
            ("999.1.1.1", 8080),
            ("1.2.3.4.5", 8080),
        ] {
            assert!(run(r, &dns, host, port).is_err(), "{host}:{port}");
        }
        // A listed name does not allow the address it resolves to.
        assert!(run(&["allowed.com"], &dns, PUBLIC, 443).is_err());
        // IP literals are never looked up.
        assert_eq!(dns.asked(), Vec::<String>::new());
    }

    #[test]
    fn names_resolving_to_internal_addresses_are_refused() {
        for (ip, kind) in [
            ("127.0.0.1", "loopback"),
            ("127.8.9.10", "loopback"),
            ("169.254.169.254", "cloud metadata"),
            ("169.254.1.1", "link-local"),
            ("10.0.0.1", "private"),
            ("172.16.0.1", "private"),
            ("192.168.1.1", "private"),
            ("100.64.0.1", "CGNAT"),
            ("100.127.255.254", "CGNAT"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "reserved"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fd00:ec2::254", "cloud metadata"),
            ("fc00::1", "ULA"),
            ("fd12:3456::1", "ULA"),
            ("fe80::1", "link-local"),
            ("ff02::1", "multicast"),
            ("::ffff:10.0.0.1", "private"),
            ("::ffff:127.0.0.1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "cloud metadata"),
        ] {
            let dns = FakeDns::new(&[("allowed.com", &[ip])]);
            let refused = run(&["allowed.com"], &dns, "allowed.com", 443).unwrap_err();
            assert_eq!(refused.status, 403, "{ip}");
            assert!(refused.reason.contains(kind), "{ip}: {}", refused.reason);
            assert!(
                refused.reason.contains("network_allowlist"),
                "{}",
                refused.reason
            );
        }
        // Public addresses pass.
        for ip in ["8.8.8.8", "100.128.0.1", "172.32.0.1", "2606:4700::1111"] {
            let dns = FakeDns::new(&[("allowed.com", &[ip])]);
            assert!(
                run(&["allowed.com"], &dns, "allowed.com", 443).is_ok(),
                "{ip}"
            );
        }
    }

    #[test]
    fn one_internal_address_among_several_refuses_the_name() {
        let dns = FakeDns::new(&[("allowed.com", &[PUBLIC, "10.0.0.1", "8.8.8.8"])]);
        assert!(run(&["allowed.com"], &dns, "allowed.com", 443).is_err());
    }

    #[test]
    fn listed_internal_addresses_are_allowed_for_listed_ports() {
        let dns = FakeDns::new(&[
            ("db.test", &["127.0.0.1"]),
            ("meta.test", &["::ffff:169.254.169.254"]),
        ]);
        let r = &["db.test:5432", "127.0.0.1:5432"];
        assert_eq!(run(r, &dns, "db.test", 5432), Ok(addr("127.0.0.1:5432")));
        let r = &["db.test:5432", "127.0.0.1:6543"];
        assert!(run(r, &dns, "db.test", 5432).is_err());
        // An IPv4-mapped answer is dialled as the IPv4 address.
        let r = &["meta.test", "169.254.169.254"];
        assert_eq!(
            run(r, &dns, "meta.test", 80),
            Ok(addr("169.254.169.254:80"))
        );
    }

    #[test]
    fn resolution_failures_are_502_and_the_checked_address_is_dialled() {
        let dns = FakeDns::new(&[("empty.test", &[]), ("two.test", &["8.8.8.8", "1.1.1.1"])]);
        let r = &["missing.test", "empty.test", "two.test"];
        assert_eq!(run(r, &dns, "missing.test", 443).unwrap_err().status, 502);
        assert_eq!(run(r, &dns, "empty.test", 443).unwrap_err().status, 502);
        // The first checked address, with the requested port.
        assert_eq!(run(r, &dns, "two.test", 443), Ok(addr("8.8.8.8:443")));
    }

    #[test]
    fn authorities_split_strictly() {
        assert_eq!(split_authority("a.com:443"), Ok(("a.com", Some(443))));
        assert_eq!(split_authority("a.com"), Ok(("a.com", None)));
        assert_eq!(split_authority("[::1]:80"), Ok(("[::1]", Some(80))));
        assert_eq!(split_authority("[::1]"), Ok(("[::1]", None)));
        for bad in [
            "a.com:",
            "a.com:0",
            "a.com:65536",
            "a.com:+443",
            "a.com: 443",
            "::1:80",
            "[::1]x",
            "[::1",
            "a.com:0x1bb",
        ] {
            assert!(split_authority(bad).is_err(), "{bad}");
        }
    }
}
