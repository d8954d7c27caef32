//! `network = "allowlist"` end to end: real sandboxed clients (curl, Python)
//! talk through the per-run proxy to servers on the host's loopback. The
//! same tests run on Linux (the proxy behind PID 1's relay) and on macOS
//! (the proxy on a host port, the only one the profile lets them reach);
//! the few that look at one platform's mechanism say so.
//!
//! Every verdict rests on host-side evidence: what a host listener accepted
//! and received (a refusal must reach *no* listener, not merely fail), the
//! exact bytes a tunnel delivered, the proxy's line on sbx's stderr. Each
//! refusal runs beside a positive control in the same sandbox run, so a run
//! that could reach nothing at all cannot pass for a working filter.
//!
//! Only loopback addresses are used (127.0.0.1, and 127.0.0.2 as "another
//! address": macOS needs `ifconfig lo0 alias 127.0.0.2`, which the macOS CI
//! job does); nothing leaves the machine. Tools: /usr/bin/curl and
//! /usr/bin/python3 (`.ci/run` installs them). `SBX_TEST_SHOW=1` prints
//! every sandboxed run's output.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, UdpSocket};
#[cfg(target_os = "linux")]
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
#[cfg(target_os = "linux")]
use std::os::unix::net::UnixStream;
#[cfg(target_os = "linux")]
use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::host::{assert_line, both, show, shq, stderr, stdout, tool};
use crate::require_sandbox;
use crate::util::{self, World};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// Every sbx run is killed after this long: a hang fails the test.
const DEADLINE: Duration = Duration::from_secs(90);
const CURL: &str = "/usr/bin/curl";
const PYTHON: &str = "/usr/bin/python3";
/// What the host HTTP server answers.
const BODY: &str = "sbx-allowlist-body-7431";
/// Placeholders the raw Python client replaces with a `Proxy-Authorization`
/// header line: the run's real credential, or a wrong one.
const AUTH: &str = "{AUTH}";
const BADAUTH: &str = "{BADAUTH}";
/// The same, with the run's credential in `Authorization` (the wrong header).
const WRONG_HEADER: &str = "{WRONG_HEADER}";

/// curl and python3 are needed. Missing: skip, or fail when CI requires the
/// sandbox tests to run.
fn have_tools() -> bool {
    tool(&[CURL]).is_some() && tool(&[PYTHON]).is_some()
}

/// `sbx ARGS...` in the project, stdin closed, killed after [`DEADLINE`].
fn sbx(world: &World, args: &[&str]) -> Output {
    sbx_within(world, args, DEADLINE)
}

/// The same, killed (and failing the test) after `deadline`.
fn sbx_within(world: &World, args: &[&str], deadline: Duration) -> Output {
    let mut cmd = world.sbx_std();
    cmd.args(args).stdin(Stdio::null());
    let start = Instant::now();
    let out = assert_cmd::Command::from_std(cmd)
        .timeout(deadline)
        .output()
        .unwrap();
    show(&format!("sbx {args:?}"), &out);
    assert!(
        start.elapsed() < deadline,
        "sbx {args:?} hung and was killed after {deadline:?}:\n{}",
        both(&out)
    );
    out
}

/// `sbx run SBX_ARGS... -- ARGV...`.
fn sbx_run(world: &World, sbx_args: &[&str], argv: &[&str]) -> Output {
    let mut args = vec!["run"];
    args.extend_from_slice(sbx_args);
    args.push("--");
    args.extend_from_slice(argv);
    sbx(world, &args)
}

/// `sbx run SBX_ARGS... -- sh -c SCRIPT`.
fn sbx_sh(world: &World, sbx_args: &[&str], script: &str) -> Output {
    sbx_run(world, sbx_args, &["sh", "-c", script])
}

/// `sbx run SBX_ARGS... -- python3 -c CODE ARGS...`.
fn sbx_py(world: &World, sbx_args: &[&str], code: &str, args: &[&str]) -> Output {
    let mut argv = vec![PYTHON, "-c", code];
    argv.extend_from_slice(args);
    sbx_run(world, sbx_args, &argv)
}

fn assert_success(out: &Output) {
    assert!(out.status.success(), "the run failed:\n{}", both(out));
}

/// Assert the proxy's refusal line on sbx's stderr.
fn assert_blocked(out: &Output, line: &str) {
    assert!(
        stderr(out).lines().any(|l| l == line),
        "expected {line:?} on stderr:\n{}",
        both(out)
    );
}

/// A deterministic pseudo-random payload (xorshift64*).
fn payload(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        out.extend_from_slice(&x.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
    }
    out.truncate(len);
    out
}

// ---------------------------------------------------------------------------
// Host servers
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Reads one request head, records it, answers `200 OK` with [`BODY`].
    Http,
    /// Echoes every byte until EOF (then half-closes); records them all.
    Echo,
}

/// A server on a host loopback address that counts every connection it
/// accepts and records what each one sent.
struct Server {
    ip: &'static str,
    port: u16,
    accepted: Arc<AtomicUsize>,
    received: Arc<Mutex<Vec<Vec<u8>>>>,
    stop: Arc<AtomicBool>,
}

impl Server {
    fn start(ip: &'static str, kind: Kind) -> Server {
        Server::bind(ip, 0, kind).unwrap()
    }

    fn bind(ip: &'static str, port: u16, kind: Kind) -> std::io::Result<Server> {
        let listener = TcpListener::bind((ip, port))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let server = Server {
            ip,
            port,
            accepted: Arc::default(),
            received: Arc::default(),
            stop: Arc::default(),
        };
        let (accepted, received, stop) = (
            server.accepted.clone(),
            server.received.clone(),
            server.stop.clone(),
        );
        thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        accepted.fetch_add(1, Ordering::SeqCst);
                        let received = received.clone();
                        thread::spawn(move || serve(stream, kind, &received));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Ok(server)
    }

    /// `ip:port`, as written in an allowlist entry and a URL.
    fn addr(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr())
    }

    /// Connections accepted so far, after a grace period for one that is on
    /// its way (the sandboxed command has finished when this is asked).
    fn connections(&self) -> usize {
        thread::sleep(Duration::from_millis(300));
        self.accepted.load(Ordering::SeqCst)
    }

    /// What each connection sent, in the order they finished.
    fn received(&self) -> Vec<Vec<u8>> {
        self.received.lock().unwrap().clone()
    }

    /// The recorded requests as text.
    fn requests(&self) -> Vec<String> {
        self.received()
            .iter()
            .map(|r| String::from_utf8_lossy(r).into_owned())
            .collect()
    }

    /// Assert that nothing at all reached this server.
    fn assert_untouched(&self, out: &Output) {
        let n = self.connections();
        assert_eq!(
            n,
            0,
            "{} accepted {n} connection(s), sent {:?}:\n{}",
            self.addr(),
            self.requests(),
            both(out)
        );
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn serve(mut s: TcpStream, kind: Kind, received: &Mutex<Vec<Vec<u8>>>) {
    let _ = s.set_nonblocking(false);
    let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    match kind {
        Kind::Http => {
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let complete = got.windows(4).any(|w| w == b"\r\n\r\n");
            received.lock().unwrap().push(got);
            if complete {
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{BODY}",
                    BODY.len()
                );
            }
        }
        Kind::Echo => {
            loop {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => {
                        got.extend_from_slice(&buf[..n]);
                        if s.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                }
            }
            received.lock().unwrap().push(got);
        }
    }
    let _ = s.shutdown(Shutdown::Write);
}

/// A UDP socket on the host's loopback that must receive nothing.
fn udp_canary() -> (UdpSocket, u16) {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_nonblocking(true).unwrap();
    let port = s.local_addr().unwrap().port();
    (s, port)
}

// ---------------------------------------------------------------------------
// Clients inside the sandbox
// ---------------------------------------------------------------------------

/// An argument of a curl probe that stands for the proxy's URL without its
/// credential (the port differs between runs on macOS).
const BARE_PROXY: &str = "{BARE_PROXY}";

/// A shell script running one curl per probe: the body goes to
/// `LABEL.body` in the project (read on the host), and the line
/// `RESULT LABEL HTTP_CODE CONNECT_CODE EXIT_STATUS` to stdout (not
/// `@LABEL`: curl reads a `-w` starting with `@` from a file).
fn curl_script(probes: &[(&str, &[&str])]) -> String {
    let mut script = String::new();
    if probes.iter().any(|(_, args)| args.contains(&BARE_PROXY)) {
        script.push_str("BARE_PROXY=\"http://${HTTP_PROXY##*@}\"\n");
    }
    for (label, args) in probes {
        let args: Vec<String> = args
            .iter()
            .map(|a| match *a {
                BARE_PROXY => "\"$BARE_PROXY\"".to_string(),
                a => shq(a),
            })
            .collect();
        script.push_str(&format!(
            "{CURL} -sS --max-time 20 -o {label}.body -w 'RESULT {label} %{{http_code}} %{{http_connect}}' {}; echo \" $?\"\n",
            args.join(" ")
        ));
    }
    script
}

/// What one curl probe reported.
#[derive(Debug)]
struct Curl {
    /// The final HTTP status (`000` when there was none).
    code: String,
    /// The proxy's answer to CONNECT (`000` without a tunnel).
    connect: String,
    /// curl's exit status.
    rc: i32,
    /// The response body, as saved in the project.
    body: String,
}

fn curl_result(world: &World, out: &Output, label: &str) -> Curl {
    let prefix = format!("RESULT {label} ");
    let line = stdout(out)
        .lines()
        .find(|l| l.starts_with(&prefix))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no result for the probe {label}:\n{}", both(out)));
    let fields: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(fields.len(), 5, "{line:?}:\n{}", both(out));
    Curl {
        code: fields[2].to_string(),
        connect: fields[3].to_string(),
        rc: fields[4].parse().unwrap(),
        body: std::fs::read_to_string(world.project.join(format!("{label}.body")))
            .unwrap_or_default(),
    }
}

/// Assert that a probe got the server's `200 OK` and body.
fn assert_reached(world: &World, out: &Output, label: &str) {
    let r = curl_result(world, out, label);
    assert!(
        r.code == "200" && r.rc == 0 && r.body == BODY,
        "{label}: expected 200 and the server's body, got {r:?}:\n{}",
        both(out)
    );
}

/// Sends each argument as one request on its own connection to the proxy
/// port, after replacing the placeholders [`AUTH`], [`BADAUTH`] and
/// [`WRONG_HEADER`] (the run's credential is read from `HTTP_PROXY`), and
/// prints `@N STATUS-LINE`.
const PY_RAW: &str = r#"
import base64, os, socket, sys, urllib.parse
u = urllib.parse.urlsplit(os.environ["HTTP_PROXY"])
good = base64.b64encode(f"{u.username}:{u.password}".encode()).decode()
bad = base64.b64encode(b"sbx:0123456789abcdef0123456789abcdef").decode()
for i, req in enumerate(sys.argv[1:]):
    req = req.replace("{AUTH}", "Proxy-Authorization: Basic " + good + "\r\n")
    req = req.replace("{BADAUTH}", "Proxy-Authorization: Basic " + bad + "\r\n")
    req = req.replace("{WRONG_HEADER}", "Authorization: Basic " + good + "\r\n")
    head = b""
    try:
        s = socket.create_connection((u.hostname, u.port), timeout=20)
        s.sendall(req.encode())
        while b"\r\n" not in head:
            c = s.recv(4096)
            if not c:
                break
            head += c
        s.close()
    except OSError as e:
        head = ("ERROR " + str(e)).encode()
    line = head.split(b"\r\n")[0].decode(errors="replace")
    print("@%d %s" % (i, line), flush=True)
"#;

/// The status code the raw client printed for request `i` (the whole line
/// when it is not a status line).
fn raw_status(out: &Output, i: usize) -> String {
    let prefix = format!("@{i} ");
    let line = stdout(out)
        .lines()
        .find(|l| l.starts_with(&prefix))
        .map(|l| l[prefix.len()..].to_string())
        .unwrap_or_else(|| panic!("no answer to request {i}:\n{}", both(out)));
    match line.strip_prefix("HTTP/1.1 ") {
        Some(rest) => rest.split(' ').next().unwrap_or_default().to_string(),
        None => line,
    }
}

/// `CONNECT TARGET` with the run's credential, then streams the file SRC
/// through the tunnel (from a second thread) while reading everything that
/// comes back into DST; prints the proxy's status line and the length and
/// SHA-256 of what was sent and what came back.
const PY_TUNNEL: &str = r#"
import base64, hashlib, os, socket, sys, threading, urllib.parse
target, src, dst = sys.argv[1:4]
u = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
cred = base64.b64encode(f"{u.username}:{u.password}".encode()).decode()
s = socket.create_connection((u.hostname, u.port), timeout=60)
s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\nProxy-Authorization: Basic %s\r\n\r\n" % (target, target, cred)).encode())
head = b""
while not head.endswith(b"\r\n\r\n"):
    c = s.recv(1)  # one byte at a time: no tunnel byte is taken as head
    if not c:
        sys.exit("the proxy closed after %r" % head)
    head += c
print(head.split(b"\r\n")[0].decode(), flush=True)
data = open(src, "rb").read()
def send():
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
t = threading.Thread(target=send)
t.start()
got = bytearray()
while True:
    c = s.recv(1 << 16)
    if not c:
        break
    got += c
t.join()
open(dst, "wb").write(got)
print("sent", len(data), hashlib.sha256(data).hexdigest())
print("back", len(got), hashlib.sha256(got).hexdigest())
"#;

// ---------------------------------------------------------------------------
// What the allowlist lets through
// ---------------------------------------------------------------------------

#[test]
fn plain_http_reaches_a_listed_server_without_the_credential() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let url = server.url("/some/path?q=1");
    let out = sbx_sh(
        &world,
        &["--allow-domain", &server.addr()],
        &curl_script(&[("plain", &[&url])]),
    );
    assert_success(&out);
    assert_reached(&world, &out, "plain");
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let req = &requests[0];
    // Forwarded in origin form, with its own Host header, and the proxy
    // credential stays with the proxy.
    assert!(
        req.starts_with("GET /some/path?q=1 HTTP/1.1\r\n"),
        "{req:?}"
    );
    assert!(
        req.contains(&format!("\r\nHost: {}\r\n", server.addr())),
        "{req:?}"
    );
    assert!(
        !req.to_ascii_lowercase().contains("proxy-authorization"),
        "the credential reached the upstream: {req:?}"
    );
    assert_eq!(server.connections(), 1);
}

#[test]
fn connect_tunnel_reaches_a_listed_server() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let url = server.url("/tunnelled");
    let out = sbx_sh(
        &world,
        &["--allow-domain", &server.addr()],
        &curl_script(&[("tunnel", &["--proxytunnel", &url])]),
    );
    assert_success(&out);
    assert_reached(&world, &out, "tunnel");
    let r = curl_result(&world, &out, "tunnel");
    assert_eq!(r.connect, "200", "{r:?}");
    // Through a tunnel the server sees exactly what curl sent: an
    // origin-form request, and nothing meant for the proxy.
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(
        requests[0].starts_with("GET /tunnelled HTTP/1.1\r\n"),
        "{requests:?}"
    );
    assert!(
        !requests[0].to_ascii_lowercase().contains("proxy-"),
        "{requests:?}"
    );
}

#[test]
fn connect_tunnel_carries_megabytes_intact_both_ways() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let echo = Server::start("127.0.0.1", Kind::Echo);
    let data = payload(8 << 20);
    std::fs::write(world.project.join("payload.bin"), &data).unwrap();
    let out = sbx_py(
        &world,
        &["--allow-domain", &echo.addr()],
        PY_TUNNEL,
        &[&echo.addr(), "payload.bin", "echoed.bin"],
    );
    assert_success(&out);
    assert_line(&out, "HTTP/1.1 200 Connection established");
    // Up: the host server received the payload byte for byte.
    let received = echo.received();
    assert_eq!(received.len(), 1, "{} connections", received.len());
    assert!(
        received[0] == data,
        "the server received {} bytes, not the {} sent (or other bytes):\n{}",
        received[0].len(),
        data.len(),
        both(&out)
    );
    // Down: the client got it all back, byte for byte.
    let back = std::fs::read(world.project.join("echoed.bin")).unwrap();
    assert!(
        back == data,
        "the client got {} bytes back, not {}:\n{}",
        back.len(),
        data.len(),
        both(&out)
    );
    // And the client's own hashes agree.
    let text = stdout(&out);
    let sent = text.lines().find_map(|l| l.strip_prefix("sent "));
    let got = text.lines().find_map(|l| l.strip_prefix("back "));
    assert!(sent.is_some() && sent == got, "{}", both(&out));
    assert!(sent.unwrap().starts_with(&format!("{} ", data.len())));
}

// ---------------------------------------------------------------------------
// What it refuses
// ---------------------------------------------------------------------------

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
    // PID 1 holds Unix sockets to the proxy; the command may neither make its
    // own nor take PID 1's.
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
    for kind in ["SOCK_STREAM", "SOCK_DGRAM", "SOCK_SEQPACKET"] {
        assert_line(&out, &format!("UNIX-REFUSED {kind} 1"));
    }
    assert_line(&out, "INET-OK");
    assert_line(&out, "TAKEN []");
}

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

#[test]
fn user_config_allowlist_works_like_the_flag() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let listed = Server::start("127.0.0.1", Kind::Http);
    let other = Server::start("127.0.0.1", Kind::Http);
    world.user_config(&format!(
        "[sandbox]\nnetwork = \"allowlist\"\nnetwork_allowlist = [\"{}\"]\n",
        listed.addr()
    ));
    let out = sbx_sh(
        &world,
        &[],
        &curl_script(&[
            ("plain", &[&listed.url("/plain")]),
            ("tunnel", &["-p", &listed.url("/tunnel")]),
            ("other", &[&other.url("/")]),
            ("other_tunnel", &["-p", &other.url("/")]),
        ]),
    );
    assert_success(&out);
    assert_reached(&world, &out, "plain");
    assert_reached(&world, &out, "tunnel");
    assert_eq!(curl_result(&world, &out, "other").code, "403");
    assert_eq!(curl_result(&world, &out, "other_tunnel").connect, "403");
    assert_blocked(
        &out,
        &format!(
            "sbx: blocked CONNECT {} (not in network_allowlist)",
            other.addr()
        ),
    );
    assert_eq!(listed.connections(), 2);
    other.assert_untouched(&out);
}

#[test]
fn a_project_file_cannot_widen_the_allowlist() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let listed = Server::start("127.0.0.1", Kind::Http);
    let added = Server::start("127.0.0.1", Kind::Http);
    world.user_config(&format!(
        "[sandbox]\nnetwork = \"allowlist\"\nnetwork_allowlist = [\"{}\"]\n",
        listed.addr()
    ));
    util::write(
        &world.project.join(".sbx.toml"),
        &format!(
            "[sandbox]\nnetwork_allowlist = [\"{}\", \"{}\"]\n",
            listed.addr(),
            added.addr()
        ),
    );
    let out = sbx_sh(
        &world,
        &[],
        &curl_script(&[
            ("listed", &[&listed.url("/")]),
            ("added", &[&added.url("/")]),
            ("added_tunnel", &["-p", &added.url("/")]),
        ]),
    );
    assert_reached(&world, &out, "listed");
    assert_eq!(
        curl_result(&world, &out, "added").code,
        "403",
        "{}",
        both(&out)
    );
    assert_eq!(
        curl_result(&world, &out, "added_tunnel").connect,
        "403",
        "{}",
        both(&out)
    );
    let warning = format!(
        "ignored `network_allowlist = [\"{}\"]`: the host is not in your own allowlist",
        added.addr()
    );
    assert!(stderr(&out).contains(&warning), "{}", both(&out));
    assert!(stderr(&out).contains(".sbx.toml"), "{}", both(&out));
    added.assert_untouched(&out);
    assert_eq!(listed.connections(), 1);
}

#[cfg(target_os = "linux")]
#[test]
fn check_reports_the_network_enforced_in_allowlist_mode() {
    require_sandbox!();
    let world = World::new();
    let out = sbx(&world, &["check", "--allow-domain", "127.0.0.1:1"]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(
        text.contains("network allowlist (1 hosts, via proxy)"),
        "{}",
        both(&out)
    );
    assert!(
        text.lines()
            .any(|l| l.ends_with("network to the host's loopback: enforced")),
        "{}",
        both(&out)
    );
    assert!(!text.contains("NOT enforced"), "{}", both(&out));
}

// ---------------------------------------------------------------------------
// The proxy's socket on the host
// ---------------------------------------------------------------------------

/// Start `sbx run --allow-domain SERVER -- sh -c 'SETUP; wait for go'`
/// (without `XDG_RUNTIME_DIR`), wait until the command has made `ready`
/// in the project, run `checks` while it runs, then let it finish; its
/// status. A failed check still ends the run first.
fn during_a_run(
    world: &World,
    server: &Server,
    setup: &str,
    ready: &str,
    checks: impl FnOnce(),
) -> std::process::ExitStatus {
    let mut cmd = world.sbx_std();
    cmd.env_remove("XDG_RUNTIME_DIR")
        .args(["run", "--allow-domain", &server.addr(), "--", "sh", "-c"])
        .arg(format!(
            "{setup}; i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while !world.project.join(ready).exists() {
        if start.elapsed() > DEADLINE || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("the sandboxed command did not start");
        }
        thread::sleep(Duration::from_millis(20));
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(checks));
    util::write(&world.project.join("go"), "");
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("sbx did not finish after the command was told to");
        }
        thread::sleep(Duration::from_millis(20));
    };
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    status
}

/// Send a `CONNECT` to the server without the proxy credential on `stream`
/// (which has a read timeout) and return everything that comes back.
fn ask_without_credential<S: Read + Write>(mut stream: S, server: &Server) -> String {
    let t = server.addr();
    let _ = write!(stream, "CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n\r\n");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

/// The per-run proxy directories under sbx's cache directory (where they go
/// without `XDG_RUNTIME_DIR`, which the test removes).
#[cfg(target_os = "linux")]
fn proxy_dirs(world: &World) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(world.home.join(".cache/sbx")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("sbx-proxy-"))
        })
        .collect()
}

#[cfg(target_os = "linux")]
#[test]
fn the_proxy_socket_is_private_and_gone_after_the_run() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let status = during_a_run(&world, &server, "echo READY > ready", "ready", || {
        let dirs = proxy_dirs(&world);
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        let mode = std::fs::metadata(&dirs[0]).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dirs[0].display());
        let sock = dirs[0].join("proxy.sock");
        assert!(std::fs::metadata(&sock).unwrap().file_type().is_socket());
        // Even from the host, the socket serves nobody without the credential.
        let s = UnixStream::connect(&sock).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let answer = ask_without_credential(s, &server);
        assert!(answer.starts_with("HTTP/1.1 407 "), "{answer:?}");
    });
    assert!(status.success(), "{status:?}");
    assert_eq!(proxy_dirs(&world), Vec::<PathBuf>::new());
    server.assert_untouched(&Output {
        status,
        stdout: Vec::new(),
        stderr: Vec::new(),
    });
}

// ---------------------------------------------------------------------------
// Robustness
// ---------------------------------------------------------------------------

#[test]
fn blocked_lines_on_stderr_are_escaped() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let t = server.addr();
    // U+202E (right-to-left override) and U+009B (the 8-bit CSI) would
    // rewrite what the user sees in the terminal.
    let reqs = [
        format!("CONNECT evil\u{202e}.example:443 HTTP/1.1\r\n{AUTH}\r\n"),
        format!("CONNECT evil\u{9b}31m.example:443 HTTP/1.1\r\n{AUTH}\r\n"),
        format!("GET http://{t}/ HTTP/1.1\r\nHost: evil\u{202e}.example\r\n{AUTH}\r\n"),
    ];
    let args: Vec<&str> = reqs.iter().map(String::as_str).collect();
    let out = sbx_py(&world, &["--allow-domain", &t], PY_RAW, &args);
    for (i, req) in reqs.iter().enumerate() {
        let status = raw_status(&out, i);
        assert!(
            status == "403" || status == "400",
            "{req:?} got {status}:\n{}",
            both(&out)
        );
    }
    let err = &out.stderr;
    for bad in ["\u{202e}", "\u{9b}", "\x1b"] {
        assert!(
            !err.windows(bad.len()).any(|w| w == bad.as_bytes()),
            "{bad:?} reached sbx's stderr raw:\n{}",
            both(&out)
        );
    }
    assert!(
        stderr(&out).contains("sbx: blocked CONNECT evil\\u{202e}.example:443 ("),
        "{}",
        both(&out)
    );
    server.assert_untouched(&out);
}

#[test]
fn a_tunnel_left_open_does_not_keep_sbx_running() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    // The echo server sends nothing unless sent something: the tunnel idles.
    let echo = Server::start("127.0.0.1", Kind::Echo);
    let py = r#"
import base64, os, socket, sys, time, urllib.parse
u = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
cred = base64.b64encode(f"{u.username}:{u.password}".encode()).decode()
s = socket.create_connection((u.hostname, u.port))
s.sendall(("CONNECT %s HTTP/1.1\r\nProxy-Authorization: Basic %s\r\n\r\n" % (sys.argv[1], cred)).encode())
print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
time.sleep(600)
"#;
    // On macOS the background client outlives sbx (nothing ties it to the
    // command there): its output goes to a file, and it is killed at the end
    // by the unique argument it carries.
    let tag = format!("sbx-tunnel-{}", std::process::id());
    let script = format!(
        "{PYTHON} -c {} {} {tag} > tunnel.out 2>&1 < /dev/null &\n\
         i=0; while ! grep -q ' 200 ' tunnel.out && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done\n\
         cat tunnel.out\n",
        shq(py),
        shq(&echo.addr())
    );
    struct KillTagged(String);
    impl Drop for KillTagged {
        fn drop(&mut self) {
            let _ = std::process::Command::new("pkill")
                .args(["-f", &self.0])
                .status();
        }
    }
    let _cleanup = KillTagged(tag.clone());
    let start = Instant::now();
    let out = sbx_sh(&world, &["--allow-domain", &echo.addr()], &script);
    let elapsed = start.elapsed();
    assert_success(&out);
    assert_line(&out, "HTTP/1.1 200 Connection established");
    assert!(
        elapsed < Duration::from_secs(30),
        "sbx took {elapsed:?} with a tunnel left open:\n{}",
        both(&out)
    );
    assert_eq!(echo.connections(), 1);
    // The upstream side of the tunnel was closed too.
    let deadline = Instant::now() + Duration::from_secs(10);
    while echo.received().is_empty() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(echo.received(), vec![Vec::<u8>::new()]);
}

#[test]
fn every_run_ends_when_its_command_does() {
    require_sandbox!();
    // PID 1 runs the relay thread beside the one that waits for the command:
    // a SIGCHLD taken by the relay thread would be lost, and sbx would wait
    // forever for a command that has long exited (an earlier build did so in
    // about two runs out of three). Commands that exit at once and a little
    // later, many times over.
    let world = World::new();
    for i in 0..12 {
        let script = if i % 2 == 0 {
            "exit 3"
        } else {
            "sleep 0.2; exit 3"
        };
        let out = sbx_within(
            &world,
            &[
                "run",
                "--allow-domain",
                "127.0.0.1:1",
                "--",
                "sh",
                "-c",
                script,
            ],
            Duration::from_secs(20),
        );
        assert_eq!(out.status.code(), Some(3), "run {i}:\n{}", both(&out));
    }
}

#[cfg(target_os = "macos")]
#[test]
fn the_proxy_port_serves_nobody_without_the_credential_and_closes_after_the_run() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let port_file = world.project.join("port");
    let port = std::cell::Cell::new(0u16);
    let status = during_a_run(
        &world,
        &server,
        "echo \"${HTTP_PROXY##*:}\" > port.tmp && mv port.tmp port",
        "port",
        || {
            port.set(
                std::fs::read_to_string(&port_file)
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap(),
            );
            // From the host, the port answers only with 407 without the
            // credential.
            let s = TcpStream::connect(("127.0.0.1", port.get())).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let answer = ask_without_credential(s, &server);
            assert!(answer.starts_with("HTTP/1.1 407 "), "{answer:?}");
            assert_eq!(server.connections(), 0);
        },
    );
    assert!(status.success(), "{status:?}");
    let port = port.get();
    // The proxy lived as long as the command, and no longer (a parallel
    // test's listener may have taken the freed port since: it is no proxy).
    if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let answer = ask_without_credential(s, &server);
        assert!(!answer.starts_with("HTTP/1.1 407 "), "{answer:?}");
    }
}
