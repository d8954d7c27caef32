//! Serving: accept connections up to the cap, read each request head within
//! its size and time limits, authenticate it, and hand it to CONNECT or plain
//! HTTP.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use super::auth::authorized;
use super::connect::connect;
use super::plain::{plain, Plain};
use super::respond::reply;
use super::{Config, MAX_HEADER_BYTES, THREAD_STACK};

const MAX_HEADERS: usize = 128;

/// Serve the proxy on a Unix socket until a non-transient accept error.
pub fn serve_unix(listener: UnixListener, config: Arc<Config>) -> io::Result<()> {
    serve_loop(|| listener.accept().map(|(s, _)| s), config)
}

/// Serve the proxy on a TCP socket until a non-transient accept error.
pub fn serve_tcp(listener: TcpListener, config: Arc<Config>) -> io::Result<()> {
    serve_loop(|| listener.accept().map(|(s, _)| s), config)
}

/// The socket operations the proxy needs from a client connection.
pub(super) trait Stream: Read + Write + Send + Sized + 'static {
    fn dup(&self) -> io::Result<Self>;
    fn shut(&self, how: Shutdown) -> io::Result<()>;
    fn read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
}

/// TCP and Unix streams have the same three methods under these names.
macro_rules! impl_stream {
    ($($t:ty),*) => {$(
        impl Stream for $t {
            fn dup(&self) -> io::Result<Self> {
                self.try_clone()
            }
            fn shut(&self, how: Shutdown) -> io::Result<()> {
                self.shutdown(how)
            }
            fn read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
                self.set_read_timeout(t)
            }
        }
    )*};
}

impl_stream!(TcpStream, UnixStream);

/// Decrements the live-connection count when a connection thread ends.
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn serve_loop<S: Stream>(
    mut accept: impl FnMut() -> io::Result<S>,
    config: Arc<Config>,
) -> io::Result<()> {
    let live = Arc::new(AtomicUsize::new(0));
    loop {
        let mut stream = match accept() {
            Ok(s) => s,
            Err(e) if accept_error_is_transient(&e) => {
                thread::sleep(Duration::from_millis(50));
                continue;
            }
            Err(e) => return Err(e),
        };
        if live.load(Ordering::SeqCst) >= config.max_connections {
            // A fresh socket's send buffer is empty: this write cannot block.
            let _ = stream.write_all(
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            continue;
        }
        live.fetch_add(1, Ordering::SeqCst);
        let slot = Slot(live.clone());
        let config = config.clone();
        // If the thread cannot be spawned the closure, and with it the
        // connection and its slot, is dropped.
        let _ = thread::Builder::new()
            .name("sbx-proxy".into())
            .stack_size(THREAD_STACK)
            .spawn(move || {
                let _slot = slot;
                handle(stream, &config);
            });
    }
}

fn accept_error_is_transient(e: &io::Error) -> bool {
    use nix::errno::Errno;
    matches!(
        e.kind(),
        io::ErrorKind::Interrupted
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::WouldBlock
            | io::ErrorKind::OutOfMemory
    ) || e.raw_os_error().is_some_and(|n| {
        [Errno::EMFILE, Errno::ENFILE, Errno::ENOBUFS, Errno::ENOMEM]
            .iter()
            .any(|&x| x as i32 == n)
    })
}

enum HeadError {
    TooLarge,
    TooManyHeaders,
    Timeout,
    Malformed,
    Gone,
}

/// Read until the request head is complete; returns the buffer and the head's
/// length (bytes after it are the start of the body or tunnel).
fn read_head<S: Stream>(client: &mut S, timeout: Duration) -> Result<(Vec<u8>, usize), HeadError> {
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; MAX_HEADER_BYTES];
    let mut len = 0;
    loop {
        if len == buf.len() {
            return Err(HeadError::TooLarge);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(HeadError::Timeout);
        }
        client
            .read_timeout(Some(left.max(Duration::from_millis(1))))
            .map_err(|_| HeadError::Gone)?;
        let n = match client.read(&mut buf[len..]) {
            Ok(0) => return Err(HeadError::Gone),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(HeadError::Timeout)
            }
            Err(_) => return Err(HeadError::Gone),
        };
        let from = len.saturating_sub(3);
        len += n;
        // Parse only once a blank line may have arrived, so that a client
        // sending one byte at a time costs linear, not quadratic, work.
        let window = &buf[from..len];
        let maybe_end =
            window.windows(2).any(|w| w == b"\n\n") || window.windows(3).any(|w| w == b"\n\r\n");
        if !maybe_end {
            continue;
        }
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        match httparse::Request::new(&mut headers).parse(&buf[..len]) {
            Ok(httparse::Status::Complete(head)) => {
                buf.truncate(len);
                return Ok((buf, head));
            }
            Ok(httparse::Status::Partial) => continue,
            Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooManyHeaders),
            Err(_) => return Err(HeadError::Malformed),
        }
    }
}

fn handle<S: Stream>(mut client: S, cfg: &Config) {
    let (buf, head_len) = match read_head(&mut client, cfg.header_timeout) {
        Ok(v) => v,
        Err(HeadError::TooLarge) => {
            let body = format!("sbx proxy: request headers exceed {MAX_HEADER_BYTES} bytes\n");
            return reply(client, 431, "", &body);
        }
        Err(HeadError::TooManyHeaders) => {
            return reply(client, 431, "", "sbx proxy: too many request headers\n");
        }
        Err(HeadError::Timeout) => {
            return reply(
                client,
                408,
                "",
                "sbx proxy: request headers took too long\n",
            );
        }
        Err(HeadError::Malformed) => {
            return reply(client, 400, "", "sbx proxy: malformed request\n");
        }
        Err(HeadError::Gone) => return,
    };
    if client.read_timeout(None).is_err() {
        return;
    }
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut headers);
    if !matches!(
        req.parse(&buf[..head_len]),
        Ok(httparse::Status::Complete(_))
    ) {
        return reply(client, 400, "", "sbx proxy: malformed request\n");
    }
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return reply(client, 400, "", "sbx proxy: malformed request\n");
    };
    let early = buf[head_len..].to_vec();
    if !authorized(req.headers, &cfg.token) {
        return reply(
            client,
            407,
            "Proxy-Authenticate: Basic realm=\"sbx\"\r\n",
            "sbx proxy: proxy authentication required\n",
        );
    }
    if method == "CONNECT" {
        connect(client, cfg, target, early);
    } else {
        let req = Plain {
            method,
            uri: target,
            version,
            headers: req.headers,
        };
        plain(client, cfg, &req, early);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::auth::{base64_encode, credential};
    use crate::proxy::test_support::{
        auth, config, echo_upstream, exchange, http_upstream, status, tcp_client, tcp_proxy, TOKEN,
    };

    // End to end, on loopback only.

    #[test]
    fn missing_or_wrong_credentials_get_407() {
        let up = echo_upstream();
        let (cfg, _) = config(&[format!("127.0.0.1:{}", up.port())], |_| {});
        let proxy = tcp_proxy(cfg);
        let target = format!("127.0.0.1:{}", up.port());
        for auth in [
            String::new(),
            format!("Proxy-Authorization: Basic {}\r\n", credential("wrong")),
            format!(
                "Proxy-Authorization: Basic {}\r\n",
                base64_encode(format!("root:{TOKEN}").as_bytes())
            ),
            format!("Authorization: Basic {}\r\n", credential(TOKEN)),
        ] {
            for req in [
                format!("CONNECT {target} HTTP/1.1\r\n{auth}\r\n"),
                format!("GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\n{auth}\r\n"),
            ] {
                let response = exchange(proxy, req.as_bytes());
                assert_eq!(status(&response), 407, "{response}");
                assert!(response.contains("Proxy-Authenticate: Basic realm=\"sbx\"\r\n"));
            }
        }
        assert_eq!(up.accepted(), 0);
    }

    #[test]
    fn non_proxy_requests_are_refused() {
        let (cfg, _) = config(&[], |_| {});
        let proxy = tcp_proxy(cfg);
        for line in [
            "GET /path HTTP/1.1",
            "GET https://allowed.test/ HTTP/1.1",
            "GET ftp://allowed.test/ HTTP/1.1",
            "OPTIONS * HTTP/1.1",
            "CONNECT allowed.test HTTP/1.1",
            "CONNECT allowed.test:https HTTP/1.1",
        ] {
            let response = exchange(
                proxy,
                format!("{line}\r\nHost: x\r\n{}\r\n", auth()).as_bytes(),
            );
            assert_eq!(status(&response), 400, "{line}: {response}");
        }
        let response = exchange(proxy, b"\x16\x03\x01\x00\x05hello\r\n\r\n");
        assert_eq!(status(&response), 400, "{response}");
    }

    #[test]
    fn oversized_headers_are_refused_and_the_connection_closed() {
        let up = http_upstream();
        let target = format!("127.0.0.1:{}", up.port());
        let (cfg, _) = config(std::slice::from_ref(&target), |_| {});
        let proxy = tcp_proxy(cfg);
        let big = "a".repeat(20 * 1024);
        let mut s = tcp_client(proxy);
        write!(
            s,
            "GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\n{}X-Big: {big}\r\n\r\n",
            auth()
        )
        .unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).unwrap(); // returns: closed
        assert_eq!(status(&response), 431, "{response}");
        assert_eq!(up.accepted(), 0);
    }

    #[test]
    fn slow_headers_time_out() {
        let (cfg, _) = config(&[], |c| c.header_timeout = Duration::from_millis(300));
        let proxy = tcp_proxy(cfg);
        let mut s = tcp_client(proxy);
        let start = Instant::now();
        s.write_all(b"GET http://").unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).unwrap();
        assert_eq!(status(&response), 408, "{response}");
        assert!(start.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn connections_beyond_the_cap_get_503() {
        let (cfg, _) = config(&[], |c| c.max_connections = 1);
        let proxy = tcp_proxy(cfg);
        let request = format!("CONNECT a.test:443 HTTP/1.1\r\n{}\r\n", auth());
        // One thread accepts, in order: the idle connection, made first,
        // holds the one slot before the next is accepted.
        let mut idle = tcp_client(proxy);
        idle.write_all(b"G").unwrap();
        let response = exchange(proxy, request.as_bytes());
        assert_eq!(status(&response), 503, "{response}");
        // Its slot is freed when its thread has seen the close: ask until
        // then (a minute at most).
        drop(idle);
        let start = Instant::now();
        let response = loop {
            let response = exchange(proxy, request.as_bytes());
            if status(&response) != 503 || start.elapsed() > Duration::from_secs(60) {
                break response;
            }
            thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status(&response), 403, "{response}");
    }
}
