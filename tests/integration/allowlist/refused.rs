//! What the allowlist refuses, and the rest of the sandbox staying closed.

use super::*;

#[test]
fn unlisted_ports_and_addresses_get_403_and_no_connection() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let listed = Server::start("127.0.0.1", Kind::Http);
    let other_port = Server::start("127.0.0.1", Kind::Http);
    // Another address on the listed port if it is free there (the sharpest
    // case), else on any port.
    let other_addr = Server::bind("127.0.0.2", listed.port, Kind::Http)
        .unwrap_or_else(|_| Server::start("127.0.0.2", Kind::Http));
    let out = sbx_sh(
        &world,
        &["--allow-domain", &listed.addr()],
        &curl_script(&[
            ("ok", &[&listed.url("/ok")]),
            ("port_plain", &[&other_port.url("/")]),
            ("port_tunnel", &["-p", &other_port.url("/")]),
            ("addr_plain", &[&other_addr.url("/")]),
            ("addr_tunnel", &["-p", &other_addr.url("/")]),
        ]),
    );
    assert_reached(&world, &out, "ok");
    for label in ["port_plain", "addr_plain"] {
        let r = curl_result(&world, &out, label);
        assert_eq!(r.code, "403", "{label}: {r:?}\n{}", both(&out));
        assert!(r.body.contains("network_allowlist"), "{label}: {r:?}");
    }
    for label in ["port_tunnel", "addr_tunnel"] {
        let r = curl_result(&world, &out, label);
        assert_eq!(r.connect, "403", "{label}: {r:?}\n{}", both(&out));
        assert_ne!(r.rc, 0, "{label}: {r:?}");
    }
    // The refusals are named on sbx's stderr.
    for server in [&other_port, &other_addr] {
        for method in ["GET", "CONNECT"] {
            assert_blocked(
                &out,
                &format!(
                    "sbx: blocked {method} {} (not in network_allowlist)",
                    server.addr()
                ),
            );
        }
    }
    other_port.assert_untouched(&out);
    other_addr.assert_untouched(&out);
    assert_eq!(listed.connections(), 1);
}

#[test]
fn other_spellings_of_unlisted_targets_are_refused() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let listed = Server::start("127.0.0.1", Kind::Http);
    let canary = Server::start("127.0.0.2", Kind::Http);
    let (l, c) = (listed.port, canary.port);
    let connect = |t: &str| format!("CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n{AUTH}\r\n");
    let reqs = [
        // Positive controls: the listed target, also spelt another way.
        connect(&format!("127.0.0.1:{l}")),
        connect(&format!("2130706433:{l}")),
        // 127.0.0.2 in decimal, hex and short forms, and IPv4-mapped IPv6.
        connect(&format!("2130706434:{c}")),
        connect(&format!("0x7f.0.0.2:{c}")),
        connect(&format!("127.2:{c}")),
        connect(&format!("[::ffff:127.0.0.2]:{c}")),
        // Smuggling attempts around the listed entry.
        connect(&format!("127.0.0.1:{l}@127.0.0.2:{c}")),
        connect(&format!("127.0.0.2%2f:{c}")),
        connect(&format!("127.0.0.2:{c}#127.0.0.1:{l}")),
        format!(
            "GET http://127.0.0.1:{l}@127.0.0.2:{c}/ HTTP/1.1\r\nHost: 127.0.0.2:{c}\r\n{AUTH}\r\n"
        ),
    ];
    let args: Vec<&str> = reqs.iter().map(String::as_str).collect();
    let out = sbx_py(&world, &["--allow-domain", &listed.addr()], PY_RAW, &args);
    assert_eq!(raw_status(&out, 0), "200", "{}", both(&out));
    assert_eq!(raw_status(&out, 1), "200", "{}", both(&out));
    for (i, req) in reqs.iter().enumerate().skip(2) {
        let status = raw_status(&out, i);
        assert!(
            status == "403" || status == "400",
            "{req:?} got {status}:\n{}",
            both(&out)
        );
    }
    canary.assert_untouched(&out);
    assert_eq!(listed.connections(), 2);
}

#[test]
fn a_listed_name_that_resolves_to_loopback_is_refused() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let canary = Server::start("127.0.0.1", Kind::Http);
    let target = format!("localhost:{}", canary.port);
    let url = format!("http://{target}/");
    let out = sbx_sh(
        &world,
        &["--allow-domain", &target],
        &curl_script(&[("plain", &[&url]), ("tunnel", &["-p", &url])]),
    );
    let plain = curl_result(&world, &out, "plain");
    assert_eq!(plain.code, "403", "{plain:?}\n{}", both(&out));
    let tunnel = curl_result(&world, &out, "tunnel");
    assert_eq!(tunnel.connect, "403", "{tunnel:?}\n{}", both(&out));
    let prefix = format!("sbx: blocked CONNECT {target} (resolves to loopback address ");
    assert!(
        stderr(&out).lines().any(|l| l.starts_with(&prefix)),
        "expected {prefix:?}...:\n{}",
        both(&out)
    );
    canary.assert_untouched(&out);
}

#[test]
fn bypassing_the_proxy_reaches_nothing() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let (udp, udp_port) = udp_canary();
    let port = server.port;
    let py = format!(
        r#"
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).sendall(b"raw-tcp\r\n\r\n")
    print("TCP-CONNECTED")
except OSError as e:
    print("TCP-FAILED", e.errno)
try:
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.sendto(b"raw-udp", ("127.0.0.1", {udp_port}))
    print("UDP-SENT")
except OSError as e:
    print("UDP-FAILED", e.errno)
"#
    );
    let script = format!(
        "{}{PYTHON} -c {}\n{}",
        curl_script(&[
            ("noproxy", &["--noproxy", "*", &server.url("/noproxy")]),
            ("emptyproxy", &["--proxy", "", &server.url("/emptyproxy")]),
        ]),
        shq(&py),
        // The positive control, last: the proxy still works in this run.
        curl_script(&[("control", &[&server.url("/control")])]),
    );
    let out = sbx_sh(&world, &["--allow-domain", &server.addr()], &script);
    assert_reached(&world, &out, "control");
    for label in ["noproxy", "emptyproxy"] {
        let r = curl_result(&world, &out, label);
        assert!(
            r.code == "000" && r.rc != 0,
            "{label}: {r:?}\n{}",
            both(&out)
        );
    }
    assert!(
        stdout(&out).lines().any(|l| l.starts_with("TCP-FAILED")),
        "{}",
        both(&out)
    );
    // Exactly one connection: the proxied control.
    assert_eq!(server.connections(), 1, "{:?}", server.requests());
    let requests = server.requests();
    assert!(
        requests[0].starts_with("GET /control "),
        "{requests:?}\n{}",
        both(&out)
    );
    let mut buf = [0u8; 64];
    match udp.recv_from(&mut buf) {
        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
        other => panic!("the UDP canary received {other:?}:\n{}", both(&out)),
    }
}

#[test]
fn requests_without_the_credential_get_407() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let t = server.addr();
    let reqs = [
        format!("CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n\r\n"),
        format!("GET http://{t}/ HTTP/1.1\r\nHost: {t}\r\n\r\n"),
        format!("CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n{BADAUTH}\r\n"),
        format!("GET http://{t}/ HTTP/1.1\r\nHost: {t}\r\n{BADAUTH}\r\n"),
        // The right credential in the wrong header.
        format!("CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n{WRONG_HEADER}\r\n"),
        // The right credential twice.
        format!("CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n{AUTH}{AUTH}\r\n"),
    ];
    let py_args: Vec<&str> = reqs.iter().map(String::as_str).collect();
    let script = format!(
        "{}{PYTHON} -c {} {}\n",
        curl_script(&[
            ("plain", &["--proxy", BARE_PROXY, &server.url("/")]),
            ("tunnel", &["-p", "--proxy", BARE_PROXY, &server.url("/")],),
            ("control", &[&server.url("/control")]),
        ]),
        shq(PY_RAW),
        py_args.iter().map(|a| shq(a)).collect::<Vec<_>>().join(" "),
    );
    let out = sbx_sh(&world, &["--allow-domain", &t], &script);
    assert_reached(&world, &out, "control");
    let plain = curl_result(&world, &out, "plain");
    assert_eq!(plain.code, "407", "{plain:?}\n{}", both(&out));
    let tunnel = curl_result(&world, &out, "tunnel");
    assert_eq!(tunnel.connect, "407", "{tunnel:?}\n{}", both(&out));
    for (i, req) in reqs.iter().enumerate() {
        assert_eq!(raw_status(&out, i), "407", "{req:?}\n{}", both(&out));
    }
    assert_eq!(server.connections(), 1, "{:?}", server.requests());
}

#[test]
fn plain_http_whose_host_header_disagrees_is_refused() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let t = server.addr();
    let other = format!("127.0.0.1:{}", server.port.wrapping_add(1).max(1));
    let script = format!(
        "{}{PYTHON} -c {} {} {}\n",
        curl_script(&[
            ("evil", &["-H", "Host: evil.example", &server.url("/")]),
            (
                "addr",
                &[
                    "-H",
                    &format!("Host: 127.0.0.2:{}", server.port),
                    &server.url("/")
                ]
            ),
            ("control", &[&server.url("/control")]),
        ]),
        shq(PY_RAW),
        shq(&format!(
            "GET http://{t}/ HTTP/1.1\r\nHost: {other}\r\n{AUTH}\r\n"
        )),
        shq(&format!(
            "GET http://{t}/ HTTP/1.1\r\nHost: {t}\r\nHost: evil.example\r\n{AUTH}\r\n"
        )),
    );
    let out = sbx_sh(&world, &["--allow-domain", &t], &script);
    assert_reached(&world, &out, "control");
    for label in ["evil", "addr"] {
        let r = curl_result(&world, &out, label);
        assert!(
            r.code == "403" || r.code == "400",
            "{label}: {r:?}\n{}",
            both(&out)
        );
        assert!(!r.body.contains(BODY), "{label}: {r:?}");
    }
    for i in 0..2 {
        let status = raw_status(&out, i);
        assert!(
            status == "403" || status == "400",
            "{i}: {status}\n{}",
            both(&out)
        );
    }
    let prefix = format!("sbx: blocked GET {t} (Host header evil.example does not match");
    assert!(
        stderr(&out).lines().any(|l| l.starts_with(&prefix)),
        "expected {prefix:?}...:\n{}",
        both(&out)
    );
    // Only the control reached the server.
    assert_eq!(server.connections(), 1, "{:?}", server.requests());
}

// ---------------------------------------------------------------------------
// The rest of the sandbox stays closed
// ---------------------------------------------------------------------------

#[test]
fn dns_does_not_resolve_inside() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let py = r#"
import socket
try:
    print("RESOLVED", socket.getaddrinfo("example.com", 443))
except OSError as e:
    print("PY-DNS-FAILED", type(e).__name__)
"#;
    let script = format!(
        "{}{PYTHON} -c {}\n{}",
        if cfg!(target_os = "linux") {
            "getent hosts example.com || echo GETENT-FAILED\n"
        } else {
            "/usr/bin/dscacheutil -q host -a name example.com | grep -q . || echo GETENT-FAILED\n"
        },
        shq(py),
        curl_script(&[("control", &[&server.url("/")])])
    );
    let out = sbx_sh(&world, &["--allow-domain", &server.addr()], &script);
    assert_reached(&world, &out, "control");
    assert_line(&out, "GETENT-FAILED");
    assert_line(&out, "PY-DNS-FAILED gaierror");
}

#[cfg(target_os = "linux")]
#[test]
fn unix_sockets_stay_refused_inside() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    // PID 1 holds Unix sockets to the proxy; the command may not take PID
    // 1's. Its own are stream and seqpacket ones (a datagram socket could
    // send to any socket file); with `--unix-sockets deny`, none.
    let py = r#"
import ctypes, os, socket
for kind in ("SOCK_STREAM", "SOCK_DGRAM", "SOCK_SEQPACKET"):
    try:
        socket.socket(socket.AF_UNIX, getattr(socket, kind))
        print("UNIX-OK", kind)
    except OSError as e:
        print("UNIX-REFUSED", kind, e.errno)
socket.socket(socket.AF_INET, socket.SOCK_STREAM)
print("INET-OK")
libc = ctypes.CDLL(None, use_errno=True)
pidfd = libc.syscall(434, 1, 0)  # pidfd_open(1)
taken = [fd for fd in range(64) if pidfd >= 0 and libc.syscall(438, pidfd, fd, 0) >= 0]
print("TAKEN", taken)
"#;
    let script = format!(
        "{PYTHON} -c {}\n{}",
        shq(py),
        curl_script(&[("control", &[&server.url("/")])])
    );
    let out = sbx_sh(&world, &["--allow-domain", &server.addr()], &script);
    assert_reached(&world, &out, "control");
    if crate::util::contained() {
        for kind in ["SOCK_STREAM", "SOCK_DGRAM", "SOCK_SEQPACKET"] {
            assert_line(&out, &format!("UNIX-REFUSED {kind} 1"));
        }
    } else {
        assert_line(&out, "UNIX-OK SOCK_STREAM");
        assert_line(&out, "UNIX-REFUSED SOCK_DGRAM 1");
        assert_line(&out, "UNIX-OK SOCK_SEQPACKET");
    }
    assert_line(&out, "INET-OK");
    assert_line(&out, "TAKEN []");
    let out = sbx_sh(
        &world,
        &["--allow-domain", &server.addr(), "--unix-sockets", "deny"],
        &script,
    );
    assert_reached(&world, &out, "control");
    for kind in ["SOCK_STREAM", "SOCK_DGRAM", "SOCK_SEQPACKET"] {
        assert_line(&out, &format!("UNIX-REFUSED {kind} 1"));
    }
    assert_line(&out, "TAKEN []");
}
