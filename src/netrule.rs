//! Entries of `network_allowlist`: `host`, `host:port`, `*.domain`, IP literals.
//!
//! Parsing is strict because a rule that means something other than what its
//! author read is a hole: hosts are lower-cased, a trailing dot is removed, IP
//! literals are canonicalised by the WHATWG URL parser (so `127.1` and
//! `0x7f.0.0.1` both become `127.0.0.1`), and anything with a scheme, a path,
//! user info, `%`, control characters or an empty label is refused. `*` alone and
//! `*.tld` (a wildcard over a whole top-level domain) are refused too.

use std::fmt;
use std::net::IpAddr;

/// What a rule matches on the host side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// Exactly this DNS name (lower case, no trailing dot).
    Name(String),
    /// Any strict subdomain of this name (`*.example.com`), never the name itself.
    Subdomains(String),
    /// Exactly this IP address.
    Ip(IpAddr),
}

/// One allowlist entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    pub host: HostPattern,
    /// `None` allows ports 80 and 443.
    pub port: Option<u16>,
}

impl HostRule {
    /// Parse one allowlist entry; the error says what is wrong with it.
    pub fn parse(entry: &str) -> Result<HostRule, String> {
        if entry.is_empty() {
            return Err("an empty entry".into());
        }
        if entry.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err("control characters or spaces are not allowed".into());
        }
        if entry.contains("://") {
            return Err("write a host, not a URL (no scheme)".into());
        }
        if entry.contains(['/', '?', '#', '@', '%', '\\']) {
            return Err("write a host, not a URL (no path, user info or %-escapes)".into());
        }
        let (host, port) = split_port(entry)?;
        let port = match port {
            None => None,
            Some(p) => Some(parse_port(p)?),
        };
        if let Some(domain) = host.strip_prefix("*.") {
            let name = canonical_name(domain)?;
            if !name.contains('.') {
                return Err(format!(
                    "`*.{name}` would allow a whole top-level domain; list the domains you need"
                ));
            }
            return Ok(HostRule {
                host: HostPattern::Subdomains(name),
                port,
            });
        }
        if host.contains('*') {
            return Err("`*` is only allowed as a leading `*.` before a domain".into());
        }
        if let Some(ip) = parse_ip(host)? {
            return Ok(HostRule {
                host: HostPattern::Ip(ip),
                port,
            });
        }
        Ok(HostRule {
            host: HostPattern::Name(canonical_name(host)?),
            port,
        })
    }
}

impl fmt::Display for HostRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            HostPattern::Name(n) => write!(f, "{n}")?,
            HostPattern::Subdomains(n) => write!(f, "*.{n}")?,
            HostPattern::Ip(IpAddr::V4(ip)) => write!(f, "{ip}")?,
            HostPattern::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
        }
        match self.port {
            Some(p) => write!(f, ":{p}"),
            None => Ok(()),
        }
    }
}

/// Split `host[:port]`, `[v6][:port]`; a bare IPv6 literal has no port.
fn split_port(entry: &str) -> Result<(&str, Option<&str>), String> {
    if let Some(rest) = entry.strip_prefix('[') {
        let Some(end) = rest.find(']') else {
            return Err("unclosed `[` in an IPv6 literal".into());
        };
        let (inside, after) = (&rest[..end], &rest[end + 1..]);
        return match after {
            "" => Ok((inside, None)),
            _ => match after.strip_prefix(':') {
                Some(port) => Ok((inside, Some(port))),
                None => Err("unexpected text after `]`".into()),
            },
        };
    }
    match entry.matches(':').count() {
        0 => Ok((entry, None)),
        1 => {
            let (h, p) = entry.split_once(':').unwrap_or((entry, ""));
            Ok((h, Some(p)))
        }
        // A bare IPv6 literal such as ::1.
        _ => Ok((entry, None)),
    }
}

fn parse_port(port: &str) -> Result<u16, String> {
    match port.parse::<u16>() {
        Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) => Ok(p),
        _ => Err(format!("`{port}` is not a port number from 1 to 65535")),
    }
}

/// An IP literal in any spelling the URL standard accepts, canonicalised.
fn parse_ip(host: &str) -> Result<Option<IpAddr>, String> {
    if host.contains(':') {
        return host
            .parse::<std::net::Ipv6Addr>()
            .map(|ip| Some(IpAddr::V6(ip)))
            .map_err(|_| format!("`{host}` is not a valid IPv6 address"));
    }
    // Only hosts whose last label is numeric (or hex) can be IPv4 to the URL
    // standard; everything else is a name.
    let last = host.trim_end_matches('.').rsplit('.').next().unwrap_or("");
    let numeric = !last.is_empty()
        && (last.bytes().all(|b| b.is_ascii_digit())
            || (last.len() > 2 && last[..2].eq_ignore_ascii_case("0x")));
    if !numeric {
        return Ok(None);
    }
    match url::Host::parse(host) {
        Ok(url::Host::Ipv4(ip)) => Ok(Some(IpAddr::V4(ip))),
        Ok(url::Host::Ipv6(ip)) => Ok(Some(IpAddr::V6(ip))),
        _ => Err(format!("`{host}` is not a valid IPv4 address")),
    }
}

/// A DNS name: lower case, one trailing dot removed, LDH labels only.
fn canonical_name(name: &str) -> Result<String, String> {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if name.is_empty() || name.len() > 253 {
        return Err("a host name must have 1 to 253 characters".into());
    }
    for label in name.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!(
                "`{name}` is not a valid host name (letters, digits and `-` in non-empty labels)"
            ));
        }
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> String {
        HostRule::parse(s).unwrap().to_string()
    }

    #[test]
    fn names_are_canonicalised() {
        assert_eq!(ok("GitHub.COM."), "github.com");
        assert_eq!(ok("registry.npmjs.org:443"), "registry.npmjs.org:443");
        assert_eq!(ok("*.example.com"), "*.example.com");
    }

    #[test]
    fn ip_spellings_are_canonicalised() {
        assert_eq!(ok("127.1"), "127.0.0.1");
        assert_eq!(ok("0x7f.0.0.1:8080"), "127.0.0.1:8080");
        assert_eq!(ok("2130706433"), "127.0.0.1");
        assert_eq!(ok("[::1]:443"), "[::1]:443");
        assert_eq!(ok("::ffff:127.0.0.1"), "[::ffff:127.0.0.1]");
    }

    #[test]
    fn dangerous_entries_are_refused() {
        for bad in [
            "*",
            "*.com",
            "*.",
            "a*.example.com",
            "https://github.com",
            "github.com/path",
            "user@github.com",
            "allowed.com%00.evil",
            "a..b",
            ".example.com",
            "host:0",
            "host:65536",
            "host:http",
            "has space.com",
            "nul\0.com",
            "",
            "[::1",
            "999.1.1.1",
        ] {
            assert!(HostRule::parse(bad).is_err(), "accepted {bad:?}");
        }
    }
}
