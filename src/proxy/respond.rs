//! Answers to the client: complete responses, logged refusals, and the
//! sanitised text they show.

use std::net::Shutdown;
use std::time::{Duration, Instant};

use super::listener::Stream;
use super::{Config, Refusal, CONFIG_KEY};

const LINGER: Duration = Duration::from_secs(1);

/// Write a complete response, then close gracefully (see [`linger_close`]).
pub(super) fn reply<S: Stream>(mut client: S, status: u16, extra_headers: &str, body: &str) {
    let msg = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n{extra_headers}\r\n{body}",
        reason_phrase(status),
        body.len()
    );
    if client.write_all(msg.as_bytes()).is_ok() && client.flush().is_ok() {
        linger_close(client);
    }
}

/// Half-close and drain briefly, so that unread request bytes do not turn the
/// close into a reset that destroys the response before the client reads it.
fn linger_close<S: Stream>(mut s: S) {
    let _ = s.shut(Shutdown::Write);
    let deadline = Instant::now() + LINGER;
    let mut buf = [0u8; 4096];
    let mut drained = 0usize;
    while drained < 256 * 1024 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || s.read_timeout(Some(left)).is_err() {
            break;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => drained += n,
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        405 => "Method Not Allowed",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

/// Client-supplied text made safe for a terminal line: no control or
/// non-ASCII characters, bounded length.
pub(super) fn printable(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars().take(200) {
        if c.is_ascii_graphic() {
            out.push(c);
        } else {
            out.extend(c.escape_default());
        }
    }
    if s.chars().count() > 200 {
        out.push_str("...");
    }
    out
}

pub(super) fn show_target(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{}]:{port}", printable(host))
    } else {
        format!("{}:{port}", printable(host))
    }
}

/// Log a refusal and answer it.
pub(super) fn refuse<S: Stream>(client: S, cfg: &Config, method: &str, shown: &str, why: &Refusal) {
    let method = printable(method);
    if why.status == 403 {
        (cfg.log)(&format!("blocked {method} {shown} ({})", why.reason));
        let body = format!(
            "sbx: blocked {method} {shown}: {}.\nTo allow it, add the host to {CONFIG_KEY} in the sbx configuration.\n",
            why.reason
        );
        reply(client, 403, "", &body);
    } else {
        (cfg.log)(&format!("failed {method} {shown} ({})", why.reason));
        let body = format!("sbx: cannot reach {shown}: {}.\n", why.reason);
        reply(client, why.status, "", &body);
    }
}
