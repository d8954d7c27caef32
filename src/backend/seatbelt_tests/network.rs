//! The network section in each network mode, and the allowlist proxy.

use super::*;
use crate::netrule::HostRule;

#[test]
fn network_allow_profile() {
    let mut policy = default_policy();
    policy.network = Network::Allow;
    let p = plan(&policy);
    let (forms, argv) = check(&p, true);
    let text = &argv.profile;
    assert!(text.contains("\n(allow network-outbound (remote ip \"*:*\"))\n"));
    assert!(text.contains("(allow network-outbound (literal \"/private/var/run/mDNSResponder\"))"));
    assert!(text.contains("(allow network-bind (local ip \"*:*\"))"));
    assert!(text.contains("(allow network-inbound (local ip \"*:*\"))"));
    let mach = mach_allowed(&forms);
    for name in [
        "com.apple.dnssd.service",
        "com.apple.trustd",
        "com.apple.SecurityServer",
    ] {
        assert!(mach.iter().any(|m| m == name), "{name}");
    }
    // Outbound only by remote IP or the resolver socket.
    for form in network_allows(&forms) {
        if form.ops().contains(&"network-outbound") {
            let f = &form.filters()[0];
            let ok = matches!(f.list(), [Sx::Atom(r), Sx::Atom(ip), Sx::Str(_)] if r == "remote" && ip == "ip")
                || f.texts() == vec!["/private/var/run/mDNSResponder"]
                || checks::is_own_socket_filter(f);
            assert!(ok, "{form:?}");
        }
    }
    golden("seatbelt-network-allow.sb", &p);
}

#[test]
fn network_allowlist_without_its_proxy_is_deny() {
    let mut policy = default_policy();
    policy.network = Network::Allowlist(vec![HostRule::parse("example.com").unwrap()]);
    let p = plan(&policy);
    let (forms, argv) = check(&p, true);
    assert!(network_allows(&forms).is_empty());
    assert!(!argv.profile.contains("*:*"));
    assert!(!argv.profile.contains("dnssd"));
    assert!(!argv.profile.contains("mDNSResponder"));
    assert_eq!(p, plan(&default_policy()));
}

fn test_proxy(port: u16) -> Proxy {
    Proxy {
        listen: crate::backend::Listen::Loopback(port),
        token: "T0KEN".into(),
    }
}

#[test]
fn network_allowlist_reaches_only_the_proxy_port() {
    let mut policy = default_policy();
    policy.network = Network::Allowlist(vec![HostRule::parse("example.com").unwrap()]);
    let proxy = test_proxy(49152);
    let p = render(
        &policy,
        Path::new(SBX),
        Some(&proxy),
        Some(Path::new(RUN_DIR)),
    )
    .unwrap();
    let (forms, argv) = check(&p, true);
    // Exactly one network rule, the proxy's port, by remote address.
    let allows = network_allows(&forms);
    assert_eq!(allows.len(), 1, "{allows:?}");
    assert_eq!(allows[0].ops(), vec!["network-outbound"]);
    let filter = allows[0].filters()[0].list().to_vec();
    assert_eq!(
        filter,
        vec![
            Sx::Atom("remote".into()),
            Sx::Atom("tcp".into()),
            Sx::Str("localhost:49152".into())
        ]
    );
    // No name resolution, no trust daemon (it fetches URLs for its caller).
    for absent in [
        "*:*",
        ":53",
        "dnssd",
        "mDNSResponder",
        "trustd",
        "ocspd",
        "configd",
        "SecurityServer",
        "(local ip",
        "AF_SYSTEM",
    ] {
        assert!(!argv.profile.contains(absent), "{absent}");
    }
    // The command is pointed at the proxy with the credential; nothing else
    // in its environment changes.
    let env = p.env.as_ref().unwrap();
    let get = |k: &str| {
        env.set
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    let url = "http://sbx:T0KEN@127.0.0.1:49152";
    for k in ["HTTP_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"] {
        assert_eq!(get(k), Some(url), "{k}");
    }
    assert_eq!(get("NO_PROXY"), Some(""));
    assert_eq!(
        get("GIT_SSH_COMMAND"),
        Some("ssh -o ProxyCommand='/Users/t/.cargo/bin/sbx __connect %h %p'")
    );
    assert!(get("JAVA_TOOL_OPTIONS")
        .unwrap()
        .contains("-Dhttps.proxyPort=49152"));
    // Apart from the network section, the profile is the deny profile's.
    let deny = plan(&default_policy());
    let strip = |t: &str| {
        t.lines()
            .filter(|l| !l.contains("network"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        strip(&argv.profile),
        strip(deny.profile.as_deref().unwrap())
    );
    golden("seatbelt-network-allowlist.sb", &p);
}

#[test]
fn network_allowlist_in_read_only_mode_keeps_the_proxy() {
    let mut policy = read_only_policy();
    policy.network = Network::Allowlist(vec![HostRule::parse("example.com").unwrap()]);
    let p = render(&policy, Path::new(SBX), Some(&test_proxy(50000)), None).unwrap();
    let (forms, argv) = check(&p, true);
    assert_eq!(network_allows(&forms).len(), 1);
    assert!(argv.profile.contains(r#"(remote tcp "localhost:50000")"#));
    // Still no service beyond the user lookup.
    assert!(!argv.profile.contains("trustd"));
}

#[test]
fn network_allowlist_needs_a_real_port() {
    let mut policy = default_policy();
    policy.network = Network::Allowlist(vec![HostRule::parse("example.com").unwrap()]);
    assert!(render(&policy, Path::new(SBX), Some(&test_proxy(0)), None).is_err());
    // A proxy given outside allowlist mode changes nothing.
    let p = render(
        &default_policy(),
        Path::new(SBX),
        Some(&test_proxy(50000)),
        Some(Path::new(RUN_DIR)),
    )
    .unwrap();
    assert_eq!(p, plan(&default_policy()));
}
