//! Plain HTTP: an absolute-form request is forwarded in origin form, one per
//! connection, once its URI, its `Host:` header and its body framing agree.

use std::io::Write;
use std::net::{Shutdown, TcpStream};
use std::thread;

use super::body::{body_framing, send_body, Body};
use super::connect::{abort, dial, pump};
use super::hosts::{canon_ip, parse_host, split_authority, Target};
use super::listener::Stream;
use super::respond::{printable, refuse, reply, show_target};
use super::{decide, Config, Refusal, THREAD_STACK};

pub(super) struct Plain<'r, 'h> {
    pub(super) method: &'r str,
    pub(super) uri: &'r str,
    pub(super) version: u8,
    pub(super) headers: &'r [httparse::Header<'h>],
}

/// The parts of an absolute-form `http://` request URI.
struct Uri<'r> {
    authority: &'r str,
    host: &'r str,
    port: u16,
    /// The origin form sent upstream: the path and query, no fragment.
    path: String,
}

/// Why a plain request is turned away before anything is sent upstream.
enum Rejected {
    /// A malformed request: answered with this status and body.
    Bad(u16, String),
    /// A policy refusal: logged and answered.
    Refused(Refusal),
}

pub(super) fn plain<S: Stream>(client: S, cfg: &Config, req: &Plain, early: Vec<u8>) {
    let uri = match absolute_uri(req.uri) {
        Ok(uri) => uri,
        Err(body) => return reply(client, 400, "", &body),
    };
    let shown = show_target(uri.host, uri.port);
    let method = req.method;
    let (has_host, body) = match vet(req, &uri) {
        Ok(v) => v,
        Err(Rejected::Bad(status, body)) => return reply(client, status, "", &body),
        Err(Rejected::Refused(why)) => return refuse(client, cfg, method, &shown, &why),
    };
    let head = upstream_head(req, &uri, has_host);
    let upstream = match open_upstream(cfg, &uri, &head) {
        Ok(s) => s,
        Err(why) => return refuse(client, cfg, method, &shown, &why),
    };
    relay(client, upstream, early, body);
}

/// Split an absolute `http://` URI; the error is the body of a 400 answer.
fn absolute_uri(uri: &str) -> Result<Uri<'_>, String> {
    let Some(rest) = uri
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("http://"))
        .map(|_| &uri[7..])
    else {
        let body = if uri.starts_with('/') {
            "sbx proxy: this is a proxy; send the absolute URI (GET http://host/path) or CONNECT\n"
        } else if uri
            .get(..8)
            .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
        {
            "sbx proxy: use CONNECT for https\n"
        } else {
            "sbx proxy: only http:// URIs and CONNECT are supported\n"
        };
        return Err(body.into());
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let path = path.split('#').next().unwrap_or("");
    let path = match path.chars().next() {
        None => "/".to_string(),
        Some('?') => format!("/{path}"),
        Some(_) => path.to_string(),
    };
    let (host, port) = match split_authority(authority) {
        Ok((h, p)) => (h, p.unwrap_or(80)),
        Err(e) => return Err(format!("sbx proxy: bad request URI: {e}\n")),
    };
    Ok(Uri {
        authority,
        host,
        port,
        path,
    })
}

/// Everything checked before the host is resolved: a valid host, at most one
/// `Host:` header and one that agrees with the URI, unambiguous body framing.
/// Returns whether the client sent a `Host:` header, and the body's framing.
fn vet(req: &Plain, uri: &Uri) -> Result<(bool, Body), Rejected> {
    if let Err(e) = parse_host(uri.host) {
        let why = Refusal::policy(format!("invalid host: {e}"));
        return Err(Rejected::Refused(why));
    }
    let mut host_headers = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("host"));
    let host_header = host_headers.next();
    if host_headers.next().is_some() {
        let body = "sbx proxy: more than one Host header\n";
        return Err(Rejected::Bad(400, body.into()));
    }
    if let Some(h) = host_header {
        let value = String::from_utf8_lossy(h.value);
        if let Err(why) = host_agrees(value.trim(), uri.host, uri.port) {
            return Err(Rejected::Refused(Refusal::policy(why)));
        }
    }
    match body_framing(req) {
        Ok(body) => Ok((host_header.is_some(), body)),
        Err((status, why)) => Err(Rejected::Bad(status, format!("sbx proxy: {why}\n"))),
    }
}

/// The request head sent upstream: the request line in origin form, a `Host:`
/// header if the client sent none, the client's end-to-end headers, and
/// `Connection: close`.
fn upstream_head(req: &Plain, uri: &Uri, has_host: bool) -> Vec<u8> {
    let mut head = format!("{} {} HTTP/1.{}\r\n", req.method, uri.path, req.version).into_bytes();
    if !has_host {
        head.extend_from_slice(format!("Host: {}\r\n", uri.authority).as_bytes());
    }
    for h in req.headers {
        if is_hop_by_hop(h.name) {
            continue;
        }
        head.extend_from_slice(h.name.as_bytes());
        head.extend_from_slice(b": ");
        head.extend_from_slice(h.value);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head
}

/// Decide on the URI's host, connect to the address checked, and send `head`.
fn open_upstream(cfg: &Config, uri: &Uri, head: &[u8]) -> Result<TcpStream, Refusal> {
    let addr = decide(uri.host, uri.port, &cfg.rules, &*cfg.resolver)?;
    let upstream = dial(addr, cfg.connect_timeout)?;
    let mut up = &upstream;
    if up.write_all(head).is_err() {
        return Err(Refusal {
            reason: format!("writing to {addr} failed"),
            status: 502,
        });
    }
    Ok(upstream)
}

/// Send the declared body upstream (on a thread of its own) while the
/// response is copied back.
fn relay<S: Stream>(client: S, upstream: TcpStream, early: Vec<u8>, body: Body) {
    let sender = match body {
        Body::Empty => None,
        _ => {
            let (Ok(reader), Ok(writer)) = (client.dup(), upstream.dup()) else {
                return abort(&client, &upstream);
            };
            let spawned = thread::Builder::new()
                .name("sbx-proxy-body".into())
                .stack_size(THREAD_STACK)
                .spawn(move || send_body(reader, writer, early, body));
            match spawned {
                Ok(t) => Some(t),
                Err(_) => return abort(&client, &upstream),
            }
        }
    };
    // The response: everything upstream sends until it closes (it was asked
    // to with `Connection: close`).
    let Ok(client_w) = client.dup() else {
        return abort(&client, &upstream);
    };
    pump(upstream, client_w);
    // Ends a body upload the server did not wait for.
    let _ = client.shut(Shutdown::Both);
    if let Some(t) = sender {
        let _ = t.join();
    }
}

/// The `Host:` header must name the URI's host and port (default 80).
fn host_agrees(value: &str, uri_host: &str, uri_port: u16) -> Result<(), String> {
    let mismatch = || {
        format!(
            "Host header {} does not match the request URI host {}",
            printable(value),
            show_target(uri_host, uri_port)
        )
    };
    let (h, p) = split_authority(value).map_err(|_| mismatch())?;
    let header = parse_host(h).map_err(|_| mismatch())?;
    let uri = parse_host(uri_host).map_err(|_| mismatch())?;
    let same = match (&header, &uri) {
        (Target::Ip(a), Target::Ip(b)) => canon_ip(*a) == canon_ip(*b),
        (a, b) => a == b,
    };
    if same && p.unwrap_or(80) == uri_port {
        Ok(())
    } else {
        Err(mismatch())
    }
}

fn is_hop_by_hop(name: &str) -> bool {
    [
        "proxy-authorization",
        "proxy-connection",
        "connection",
        "keep-alive",
        "upgrade",
        "te",
    ]
    .iter()
    .any(|h| name.eq_ignore_ascii_case(h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::test_support::{
        auth, config, exchange, http_upstream, status, tcp_client, tcp_proxy,
    };
    use std::io::Read;
    use std::time::Duration;

    #[test]
    fn host_header_must_agree_with_the_uri() {
        assert!(host_agrees("allowed.com", "allowed.com", 80).is_ok());
        assert!(host_agrees("ALLOWED.com.:80", "allowed.com", 80).is_ok());
        assert!(host_agrees("127.1:8080", "127.0.0.1", 8080).is_ok());
        assert!(host_agrees("allowed.com", "allowed.com", 8080).is_err());
        assert!(host_agrees("allowed.com:8080", "allowed.com", 80).is_err());
        assert!(host_agrees("evil.com", "allowed.com", 80).is_err());
        assert!(host_agrees("allowed.com.evil.com", "allowed.com", 80).is_err());
        assert!(host_agrees("allowed.com@evil.com", "allowed.com", 80).is_err());
    }

    // End to end, on loopback only.

    #[test]
    fn plain_http_is_forwarded_in_origin_form() {
        let up = http_upstream();
        let target = format!("127.0.0.1:{}", up.port());
        let (cfg, _) = config(std::slice::from_ref(&target), |_| {});
        let proxy = tcp_proxy(cfg);
        let response = exchange(
            proxy,
            format!(
                "GET http://{target}/path?q=1 HTTP/1.1\r\nHost: {target}\r\n{}Proxy-Connection: keep-alive\r\nConnection: keep-alive\r\nUser-Agent: t\r\n\r\n",
                auth()
            )
            .as_bytes(),
        );
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.ends_with("\r\n\r\nhello"), "{response}");
        let got = up.request(0);
        assert!(got.starts_with("GET /path?q=1 HTTP/1.1\r\n"), "{got}");
        assert!(got.contains(&format!("\r\nHost: {target}\r\n")), "{got}");
        assert!(got.contains("\r\nUser-Agent: t\r\n"), "{got}");
        assert!(got.ends_with("\r\nConnection: close\r\n\r\n"), "{got}");
        let lower = got.to_ascii_lowercase();
        assert!(!lower.contains("proxy-"), "{got}");
        assert!(!lower.contains("keep-alive"), "{got}");

        // No path, no Host header (HTTP/1.0): both are supplied.
        let response = exchange(
            proxy,
            format!("GET http://{target} HTTP/1.0\r\n{}\r\n", auth()).as_bytes(),
        );
        assert!(response.ends_with("hello"), "{response}");
        let got = up.request(1);
        assert!(
            got.starts_with(&format!("GET / HTTP/1.0\r\nHost: {target}\r\n")),
            "{got}"
        );
    }

    #[test]
    fn plain_http_bodies_are_forwarded_and_nothing_after_them() {
        let up = http_upstream();
        let target = format!("127.0.0.1:{}", up.port());
        let (cfg, _) = config(std::slice::from_ref(&target), |_| {});
        let proxy = tcp_proxy(cfg);
        let smuggled = "GET http://127.0.0.1/smuggled HTTP/1.1\r\nHost: evil.test\r\n\r\n";
        let mut s = tcp_client(proxy);
        write!(
            s,
            "POST http://{target}/up HTTP/1.1\r\nHost: {target}\r\n{}Content-Length: 11\r\n\r\nhello",
            auth()
        )
        .unwrap();
        // Not a wait for anything: the pause makes the body likely to reach
        // the proxy in two reads, which it must join (one read passes too).
        thread::sleep(Duration::from_millis(50));
        write!(s, " world{smuggled}").unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).unwrap();
        assert!(response.ends_with("hello"), "{response}");
        let got = up.request(0);
        assert!(got.ends_with("\r\n\r\nhello world"), "{got}");

        let response = exchange(
            proxy,
            format!(
                "POST http://{target}/up HTTP/1.1\r\nHost: {target}\r\n{}Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n{smuggled}",
                auth()
            )
            .as_bytes(),
        );
        assert!(response.ends_with("hello"), "{response}");
        let got = up.request(1);
        assert!(got.ends_with("\r\n\r\n5\r\nhello\r\n0\r\n\r\n"), "{got}");

        // Ambiguous framing never reaches the upstream.
        for framing in [
            "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
            "Content-Length: 5\r\nContent-Length: 6\r\n",
            "Content-Length: +5\r\n",
            "Transfer-Encoding: gzip, chunked\r\n",
        ] {
            let response = exchange(
                proxy,
                format!(
                    "POST http://{target}/ HTTP/1.1\r\nHost: {target}\r\n{}{framing}\r\nhello",
                    auth()
                )
                .as_bytes(),
            );
            assert!(
                matches!(status(&response), 400 | 501),
                "{framing}: {response}"
            );
        }
        assert_eq!(up.accepted(), 2);
    }

    #[test]
    fn plain_http_host_header_must_match_the_uri() {
        let up = http_upstream();
        let target = format!("127.0.0.1:{}", up.port());
        let (cfg, logs) = config(std::slice::from_ref(&target), |_| {});
        let proxy = tcp_proxy(cfg);
        for host in ["evil.test", "127.0.0.1", "127.0.0.1:1", "upstream.test"] {
            let response = exchange(
                proxy,
                format!(
                    "GET http://{target}/ HTTP/1.1\r\nHost: {host}\r\n{}\r\n",
                    auth()
                )
                .as_bytes(),
            );
            assert_eq!(status(&response), 403, "{host}: {response}");
        }
        // Userinfo in the URI, unlisted targets, two Host headers.
        let response = exchange(
            proxy,
            format!("GET http://{target}@evil.test/ HTTP/1.1\r\n{}\r\n", auth()).as_bytes(),
        );
        assert!(matches!(status(&response), 400 | 403), "{response}");
        let response = exchange(
            proxy,
            format!(
                "GET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n{}\r\n",
                auth()
            )
            .as_bytes(),
        );
        assert_eq!(status(&response), 403, "{response}");
        let response = exchange(
            proxy,
            format!(
                "GET http://{target}/ HTTP/1.1\r\nHost: {target}\r\nHost: evil.test\r\n{}\r\n",
                auth()
            )
            .as_bytes(),
        );
        assert_eq!(status(&response), 400, "{response}");
        assert_eq!(up.accepted(), 0);
        assert!(logs.lock().unwrap()[0]
            .starts_with(&format!("blocked GET {target} (Host header evil.test")));
    }
}
