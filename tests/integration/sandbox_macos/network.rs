//! Network: denied, allowed, and the allowlist.

use super::*;

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn network_deny_refuses_dns_loopback_and_unix_sockets() {
    require_sandbox!();
    let world = World::new();
    let (tcp, port) = tcp_listener();
    let sock = SocketFile::tmp(8);
    // A socket in the project too, when the path fits in `sun_path`.
    let in_project = world.project.join("p.sock");
    let project_listener = (in_project.as_os_str().len() < 100).then(|| unix_listener(&in_project));
    let script = format!(
        "/usr/bin/curl -sS -m 20 https://example.com/ && echo CURL-INTERNET
         {py} -c 'import socket; socket.getaddrinfo(\"example.com\", 443); print(\"RESOLVED\")'
         {connect}
         echo hi | /usr/bin/nc -U -w 3 {p} && echo PROJECT-SOCK-CONNECTED",
        py = PYTHON,
        connect = connect_script(port, &sock.path),
        p = shq_path(&in_project),
    );
    let out = Seatbelt.run_sh(&world, &script);
    assert_line(&out, "RAN");
    let got = tcp_received(&tcp, LISTEN_GRACE);
    assert!(
        got.is_none(),
        "the host TCP listener received {got:?}:\n{}",
        both(&out)
    );
    let got = unix_received(&sock.listener, LISTEN_GRACE);
    assert!(
        got.is_none(),
        "the /tmp socket received {got:?}:\n{}",
        both(&out)
    );
    let got = project_listener
        .as_ref()
        .and_then(|l| unix_received(l, LISTEN_GRACE));
    assert!(
        got.is_none(),
        "the project socket received {got:?}:\n{}",
        both(&out)
    );
    for l in [
        "CURL-INTERNET",
        "RESOLVED",
        "NC-CONNECTED",
        "CURL-CONNECTED",
        "BASH-CONNECTED",
        "NCU-CONNECTED",
        "CONNECTED",
        "PROJECT-SOCK-CONNECTED",
    ] {
        assert_no_line_starting(&out, l);
    }
    // Positive control: the same probes, run on the host, reach both listeners.
    let host_out = host("/bin/sh", &["-c", &connect_script(port, &sock.path)], LIMIT);
    assert!(
        tcp_received(&tcp, LISTEN_GRACE).is_some(),
        "host control: {}",
        both(&host_out)
    );
    assert!(
        unix_received(&sock.listener, LISTEN_GRACE).is_some(),
        "host control: {}",
        both(&host_out)
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn network_allow_reaches_the_internet_and_loopback_but_not_unix_sockets() {
    require_sandbox!();
    let world = World::new();
    let (tcp, port) = tcp_listener();
    let sock = SocketFile::tmp(9);
    let out = Seatbelt.run_sh_flags(
        &world,
        &["--network", "allow"],
        &format!(
            "/usr/bin/curl -sS -m 30 -o /dev/null https://example.com/ && echo CURL-INTERNET
             echo hi-loopback | /usr/bin/nc -w 3 127.0.0.1 {port} && echo LOOPBACK-CONNECTED
             echo hi | /usr/bin/nc -U -w 3 {u} && echo NCU-CONNECTED
             {py} -c {code} {u}
             echo RAN",
            u = shq_path(&sock.path),
            py = PYTHON,
            code = shq(PY_UNIX_CONNECT),
        ),
    );
    assert_line(&out, "RAN");
    // Loopback TCP is reachable (`remote ip "*:*"`): host-side evidence.
    let got = tcp_received(&tcp, LISTEN_GRACE);
    assert!(
        got.as_deref()
            .is_some_and(|b| b.starts_with(b"hi-loopback")),
        "the host TCP listener received {got:?}:\n{}",
        both(&out)
    );
    // Unix sockets stay shut: `remote ip` does not cover them.
    let got = unix_received(&sock.listener, LISTEN_GRACE);
    assert!(
        got.is_none(),
        "the /tmp socket received {got:?}:\n{}",
        both(&out)
    );
    assert_no_line_starting(&out, "NCU-CONNECTED");
    assert_no_line_starting(&out, "CONNECTED");
    // The internet, if the host has it (GitHub runners do).
    let host_curl = host(
        "/usr/bin/curl",
        &["-sS", "-m", "30", "-o", "/dev/null", "https://example.com/"],
        LIMIT,
    );
    if host_curl.status.success() {
        assert_line(&out, "CURL-INTERNET");
    } else {
        loud_skip(
            "the internet half of network allow",
            &format!(
                "the host itself cannot reach example.com\n{}",
                both(&host_curl)
            ),
        );
    }
}

/// A Go program that fetches a URL and prints `STATUS <code>` or `ERR ...`.
const GO_GET: &str = r#"package main

import (
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	c := &http.Client{Timeout: 30 * time.Second}
	r, err := c.Get(os.Args[1])
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("STATUS", r.StatusCode)
}
"#;

const NODE_GET: &str = "require('https').get(process.argv[1], r => { console.log('STATUS', r.statusCode); process.exit(0); }).on('error', e => { console.log('ERR', e.message); process.exit(1); });";

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn network_allow_lets_node_and_go_verify_tls() {
    require_sandbox!();
    // Go verifies certificates through Security.framework (trustd), Node
    // with its own store: the two ways TLS is checked on macOS.
    let host_curl = host(
        "/usr/bin/curl",
        &["-sS", "-m", "30", "-o", "/dev/null", "https://example.com/"],
        LIMIT,
    );
    if !host_curl.status.success() {
        loud_skip(
            "HTTPS from node and go",
            &format!(
                "the host itself cannot reach example.com\n{}",
                both(&host_curl)
            ),
        );
        return;
    }
    let world = World::new();
    let url = "https://example.com/";
    if let Some(node) = on_path("node") {
        let node = node.to_str().unwrap();
        let out = Seatbelt.run(
            &world,
            &["--network", "allow"],
            &[node, "-e", NODE_GET, url],
            &[],
        );
        assert_line(&out, "STATUS 200");
        let denied = Seatbelt.run(&world, &[], &[node, "-e", NODE_GET, url], &[]);
        assert_no_line_starting(&denied, "STATUS");
    }
    if let Some(go) = on_path("go") {
        // Built on the host (the build cache lives outside the sandbox).
        let dir = world.root.join("goget");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("main.go"), GO_GET).unwrap();
        let bin = dir.join("goget");
        let built = Command::new(&go)
            .args(["build", "-o"])
            .arg(&bin)
            .arg("main.go")
            .current_dir(&dir)
            .env("GO111MODULE", "off")
            .output()
            .unwrap();
        assert!(built.status.success(), "go build: {}", both(&built));
        let bin = bin.to_str().unwrap();
        let out = Seatbelt.run(&world, &["--network", "allow"], &[bin, url], &[]);
        assert_line(&out, "STATUS 200");
        let denied = Seatbelt.run(&world, &[], &[bin, url], &[]);
        assert_no_line_starting(&denied, "STATUS");
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn network_allowlist_refuses_dns_and_direct_connections() {
    require_sandbox!();
    let world = World::new();
    let (listed, listed_port) = tcp_listener();
    let (other, other_port) = tcp_listener();
    // The listed listener is reached through the proxy (positive control);
    // DNS, a direct connection to it, and any other port are not.
    let out = Seatbelt.run_sh_flags(
        &world,
        &[
            "--network",
            "allowlist",
            "--allow-domain",
            &format!("127.0.0.1:{listed_port}"),
        ],
        &format!(
            "/usr/bin/curl -sS -m 5 -o /dev/null http://127.0.0.1:{listed_port}/via-proxy; echo CURL-PROXY=$?
             /usr/bin/curl --noproxy '*' -sS -m 20 -o /dev/null https://example.com/ && echo CURL-DIRECT
             {py} -c 'import socket; socket.getaddrinfo(\"example.com\", 443); print(\"RESOLVED\")'
             /usr/bin/nc -z -w 3 127.0.0.1 {other_port} && echo NC-CONNECTED
             /usr/bin/curl --noproxy '*' -sS -m 5 -o /dev/null http://127.0.0.1:{other_port}/direct && echo CURL-DIRECT-LOOPBACK
             echo RAN",
            py = PYTHON,
        ),
    );
    assert_line(&out, "RAN");
    let got = tcp_received(&listed, LISTEN_GRACE);
    assert!(
        got.as_deref()
            .is_some_and(|b| b.starts_with(b"GET /via-proxy HTTP/1.1")),
        "the listed listener received {got:?}:\n{}",
        both(&out)
    );
    assert!(
        tcp_received(&other, LISTEN_GRACE).is_none(),
        "{}",
        both(&out)
    );
    for l in [
        "CURL-DIRECT",
        "RESOLVED",
        "NC-CONNECTED",
        "CURL-DIRECT-LOOPBACK",
    ] {
        assert_no_line_starting(&out, l);
    }
}
