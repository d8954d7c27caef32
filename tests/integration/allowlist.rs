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
    /// How many times the accepting thread has found no connection waiting.
    idle_polls: Arc<AtomicUsize>,
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
            idle_polls: Arc::default(),
            received: Arc::default(),
            stop: Arc::default(),
        };
        let (accepted, idle_polls, received, stop) = (
            server.accepted.clone(),
            server.idle_polls.clone(),
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
                    Err(_) => {
                        idle_polls.fetch_add(1, Ordering::SeqCst);
                        thread::sleep(Duration::from_millis(5));
                    }
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

    /// Connections accepted so far, asked once the sandboxed command has
    /// finished: every connection it made is then in the listener's backlog,
    /// so this waits until the accepting thread has emptied it (an accept
    /// that began after this call found nothing waiting).
    fn connections(&self) -> usize {
        let seen = self.idle_polls.load(Ordering::SeqCst);
        let start = Instant::now();
        // The next idle poll may be one that began before this call.
        while self.idle_polls.load(Ordering::SeqCst) < seen + 2 {
            assert!(
                start.elapsed() < DEADLINE,
                "the server at {} stopped accepting",
                self.addr()
            );
            thread::sleep(Duration::from_millis(5));
        }
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
// The tests, by topic
// ---------------------------------------------------------------------------

mod allowed;
mod proxy;
mod refused;
