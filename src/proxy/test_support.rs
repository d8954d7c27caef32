//! End to end, on loopback only: a proxy with a fake resolver, upstream
//! servers that record what reaches them, and small clients.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::netrule::HostRule;

use super::{credential, serve_tcp, serve_unix, Config};

pub(super) const TOKEN: &str = "test-token";

pub(super) fn auth() -> String {
    format!("Proxy-Authorization: Basic {}\r\n", credential(TOKEN))
}

pub(super) type Logs = Arc<Mutex<Vec<String>>>;

pub(super) fn config(list: &[String], tweak: impl FnOnce(&mut Config)) -> (Arc<Config>, Logs) {
    let logs = Logs::default();
    let sink = logs.clone();
    let parsed = list.iter().map(|s| HostRule::parse(s).unwrap()).collect();
    let mut cfg = Config::new(parsed, TOKEN.into(), move |line| {
        sink.lock().unwrap().push(line.to_string())
    });
    // Never real DNS: test names map to loopback, everything else fails.
    cfg.resolver = Box::new(|host, port| match host {
        "upstream.test" => Ok(vec![SocketAddr::from(([127, 0, 0, 1], port))]),
        _ => Err(io::Error::new(
            io::ErrorKind::NotFound,
            "test resolver: unknown name",
        )),
    });
    tweak(&mut cfg);
    (Arc::new(cfg), logs)
}

pub(super) fn tcp_proxy(cfg: Arc<Config>) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    thread::spawn(move || serve_tcp(l, cfg));
    a
}

pub(super) fn unix_proxy(cfg: Arc<Config>) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("proxy.sock");
    let l = UnixListener::bind(&path).unwrap();
    thread::spawn(move || serve_unix(l, cfg));
    (dir, path)
}

/// What each connection carried, by the order it was accepted in.
type Received = Mutex<BTreeMap<usize, Vec<u8>>>;

pub(super) struct Upstream {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    received: Arc<Received>,
}

impl Upstream {
    pub(super) fn port(&self) -> u16 {
        self.addr.port()
    }
    pub(super) fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Everything the `n`th connection (from 0) carried, waiting (a minute
    /// at most) until it is recorded: that is when the proxy closes it,
    /// which may come just after its client has read the response.
    pub(super) fn request(&self, n: usize) -> String {
        let start = Instant::now();
        loop {
            if let Some(got) = self.received.lock().unwrap().get(&n) {
                return String::from_utf8(got.clone()).unwrap();
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "connection {n} to the upstream was never recorded"
            );
            thread::sleep(Duration::from_millis(5));
        }
    }
}

fn upstream(serve: fn(TcpStream, usize, &Received)) -> Upstream {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let up = Upstream {
        addr: l.local_addr().unwrap(),
        accepted: Arc::default(),
        received: Arc::default(),
    };
    let (accepted, received) = (up.accepted.clone(), up.received.clone());
    thread::spawn(move || {
        for s in l.incoming() {
            let s = s.unwrap();
            let n = accepted.fetch_add(1, Ordering::SeqCst);
            let received = received.clone();
            thread::spawn(move || serve(s, n, &received));
        }
    });
    up
}

/// Echoes everything, half-closes on EOF.
pub(super) fn echo_upstream() -> Upstream {
    upstream(|mut s, _, _| {
        let mut r = s.try_clone().unwrap();
        let _ = io::copy(&mut r, &mut s);
        let _ = s.shutdown(Shutdown::Write);
    })
}

/// Answers `hello` (and closes its side) once a whole request has arrived,
/// then records everything the connection carried until the proxy closes
/// it: bytes sent after the declared body are recorded too.
pub(super) fn http_upstream() -> Upstream {
    upstream(|mut s, n, received| {
        // Only a bound for a proxy that stalls: every read waits for bytes
        // or the close that follows them.
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let mut answered = false;
        loop {
            if !answered && request_complete(&got) {
                let _ = s.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
                );
                let _ = s.shutdown(Shutdown::Write);
                answered = true;
            }
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(k) => got.extend_from_slice(&buf[..k]),
            }
        }
        received.lock().unwrap().insert(n, got);
    })
}

/// Whether `buf` holds a whole request: its head, and the body that its
/// `Content-Length` or chunked `Transfer-Encoding` declares.
fn request_complete(buf: &[u8]) -> bool {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let header = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    let body = &buf[end + 4..];
    if header("transfer-encoding:").is_some_and(|v| v.ends_with("chunked")) {
        return chunked_complete(body);
    }
    let len = header("content-length:").map_or(0, |v| v.parse().unwrap_or(0));
    body.len() >= len
}

/// Whether a chunked body is whole: its chunks up to the last (size 0) and
/// the empty line that ends the trailers.
fn chunked_complete(mut body: &[u8]) -> bool {
    loop {
        let Some(eol) = body.windows(2).position(|w| w == b"\r\n") else {
            return false;
        };
        let size = String::from_utf8_lossy(&body[..eol]);
        let size = size.split(';').next().unwrap_or_default().trim();
        // A malformed size: whole as far as this server can tell.
        let Ok(size) = usize::from_str_radix(size, 16) else {
            return true;
        };
        body = &body[eol + 2..];
        if size == 0 {
            return body.starts_with(b"\r\n") || body.windows(4).any(|w| w == b"\r\n\r\n");
        }
        if body.len() < size + 2 {
            return false;
        }
        body = &body[size + 2..];
    }
}

pub(super) fn head_of<R: Read>(r: &mut R) -> String {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match r.read(&mut b) {
            Ok(1) => head.push(b[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

pub(super) fn status(head: &str) -> u16 {
    head.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub(super) fn tcp_client(proxy: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(proxy).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Send `request`, return the whole response (the proxy closes after it).
pub(super) fn exchange(proxy: SocketAddr, request: &[u8]) -> String {
    let mut s = tcp_client(proxy);
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

pub(super) fn client_hello(sni: Option<&str>) -> Vec<u8> {
    let mut exts = Vec::new();
    // An unrelated extension first (supported_versions).
    exts.extend([0x00, 0x2b, 0x00, 0x03, 0x02, 0x03, 0x04]);
    if let Some(name) = sni {
        let name = name.as_bytes();
        let mut list = vec![0u8];
        list.extend((name.len() as u16).to_be_bytes());
        list.extend(name);
        exts.extend(0u16.to_be_bytes());
        exts.extend((list.len() as u16 + 2).to_be_bytes());
        exts.extend((list.len() as u16).to_be_bytes());
        exts.extend(list);
    }
    let mut body = vec![3, 3];
    body.extend([7u8; 32]);
    body.push(0);
    body.extend([0, 2, 0x13, 0x01, 1, 0]);
    body.extend((exts.len() as u16).to_be_bytes());
    body.extend(exts);
    let mut hs = vec![1, 0];
    hs.extend((body.len() as u16).to_be_bytes());
    hs.extend(body);
    let mut rec = vec![0x16, 3, 1];
    rec.extend((hs.len() as u16).to_be_bytes());
    rec.extend(hs);
    rec
}
