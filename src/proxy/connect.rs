//! CONNECT: check the target, dial the checked address, and relay bytes both
//! ways, holding back a TLS ClientHello until its server name matches.

use std::io::{self, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use super::client_hello::{parse_client_hello, Hello};
use super::hosts::{check, split_authority, Target};
use super::listener::Stream;
use super::respond::{printable, refuse, reply, show_target};
use super::{Config, Refusal, COPY_BUF, THREAD_STACK};

const MAX_CLIENT_HELLO: usize = 64 * 1024;

pub(super) fn connect<S: Stream>(client: S, cfg: &Config, authority: &str, early: Vec<u8>) {
    let (host, port) = match split_authority(authority) {
        Ok((h, Some(p))) => (h, p),
        Ok((_, None)) => {
            return reply(client, 400, "", "sbx proxy: CONNECT needs host:port\n");
        }
        Err(e) => {
            let body = format!("sbx proxy: bad CONNECT target: {e}\n");
            return reply(client, 400, "", &body);
        }
    };
    let shown = show_target(host, port);
    let (target, addr) = match check(host, port, &cfg.rules, &*cfg.resolver) {
        Ok(v) => v,
        Err(why) => return refuse(client, cfg, "CONNECT", &shown, &why),
    };
    let upstream = match dial(addr, cfg.connect_timeout) {
        Ok(s) => s,
        Err(why) => return refuse(client, cfg, "CONNECT", &shown, &why),
    };
    let mut client = client;
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
    {
        return;
    }
    let sni = match target {
        Target::Name(name) => Some(name),
        Target::Ip(_) => None,
    };
    tunnel(client, upstream, early, sni, cfg, &shown);
}

/// Connect to the address that was checked; a failure is a 502.
pub(super) fn dial(addr: SocketAddr, timeout: Duration) -> Result<TcpStream, Refusal> {
    TcpStream::connect_timeout(&addr, timeout).map_err(|e| Refusal {
        reason: format!("connecting to {addr}: {e}"),
        status: 502,
    })
}

/// Relay both ways until both sides have finished; a clean EOF on one side is
/// passed on as a half-close, an error tears down both.
fn tunnel<S: Stream>(
    client: S,
    upstream: TcpStream,
    early: Vec<u8>,
    sni: Option<String>,
    cfg: &Config,
    shown: &str,
) {
    let (Ok(client_w), Ok(upstream_r)) = (client.dup(), upstream.dup()) else {
        return;
    };
    let down = thread::Builder::new()
        .name("sbx-proxy-down".into())
        .stack_size(THREAD_STACK)
        .spawn(move || pump(upstream_r, client_w));
    if down.is_err() {
        abort(&client, &upstream);
        return;
    }
    let first = match sni {
        Some(name) => match check_sni(&client, early, &name, cfg.header_timeout) {
            Ok(bytes) => Some(bytes),
            Err(why) => {
                (cfg.log)(&format!("blocked CONNECT {shown} ({why})"));
                None
            }
        },
        None => Some(early),
    };
    let mut up = &upstream;
    match first {
        Some(bytes) if bytes.is_empty() || up.write_all(&bytes).is_ok() => pump(client, upstream),
        _ => abort(&client, &upstream),
    }
    if let Ok(down) = down {
        let _ = down.join();
    }
}

pub(super) fn abort<S: Stream>(client: &S, upstream: &TcpStream) {
    let _ = client.shut(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
}

/// Copy `from` to `to` until EOF (then half-close `to`) or an error (then shut
/// both down, which also ends the copy in the other direction).
pub(super) fn pump<R: Stream, W: Stream>(mut from: R, mut to: W) {
    let mut buf = vec![0u8; COPY_BUF];
    loop {
        match from.read(&mut buf) {
            Ok(0) => {
                let _ = to.shut(Shutdown::Write);
                return;
            }
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = from.shut(Shutdown::Both);
    let _ = to.shut(Shutdown::Both);
}

/// If the tunnel starts with a TLS handshake, read the whole ClientHello and
/// require its server name to be the CONNECT host. Returns the bytes read so
/// far, to be sent upstream. Other protocols pass unchecked; a client that
/// sends nothing (server-speaks-first protocols) is simply waited for.
fn check_sni<S: Stream>(
    client: &S,
    mut buf: Vec<u8>,
    expected: &str,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let mut reader = client.dup().map_err(|e| e.to_string())?;
    let mut chunk = vec![0u8; 16 * 1024];
    let mut deadline = None;
    loop {
        if !buf.is_empty() {
            if buf[0] != 0x16 {
                return Ok(buf);
            }
            match parse_client_hello(&buf) {
                Hello::More if buf.len() < MAX_CLIENT_HELLO => {}
                Hello::More => return Err("TLS ClientHello too large".into()),
                Hello::Bad(why) => return Err(why.into()),
                Hello::Done(None) => {
                    return Err(format!(
                        "TLS ClientHello without a server name for {expected}"
                    ))
                }
                Hello::Done(Some(name)) => {
                    let lower = name.to_ascii_lowercase();
                    let canonical = lower.strip_suffix('.').unwrap_or(&lower);
                    if canonical != expected {
                        return Err(format!(
                            "TLS server name {} does not match",
                            printable(&name)
                        ));
                    }
                    reader.read_timeout(None).map_err(|e| e.to_string())?;
                    return Ok(buf);
                }
            }
            // A handshake has begun: the rest of it must follow promptly.
            let end = *deadline.get_or_insert_with(|| Instant::now() + timeout);
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("TLS ClientHello took too long".into());
            }
            reader.read_timeout(Some(left)).map_err(|e| e.to_string())?;
        }
        match reader.read(&mut chunk) {
            Ok(0) if buf.is_empty() => return Ok(buf),
            Ok(0) => return Err("connection closed inside the TLS ClientHello".into()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading the TLS ClientHello: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::test_support::{
        auth, client_hello, config, echo_upstream, exchange, head_of, status, tcp_client,
        tcp_proxy, unix_proxy,
    };
    use std::io::Read;
    use std::net::TcpListener;
    use std::os::unix::net::UnixStream;

    // End to end, on loopback only.

    fn pseudo_random(len: usize) -> Vec<u8> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 32) as u8
            })
            .collect()
    }

    fn fnv(data: &[u8]) -> u64 {
        data.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        })
    }

    /// CONNECT, then push `len` bytes through the echo server and check they
    /// come back intact; the client half-closes and reads until the echo's EOF.
    fn roundtrip<S: Stream>(mut s: S, target: &str, len: usize) {
        write!(
            s,
            "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{}\r\n",
            auth()
        )
        .unwrap();
        assert_eq!(
            head_of(&mut s),
            "HTTP/1.1 200 Connection established\r\n\r\n"
        );
        let data = pseudo_random(len);
        let sum = fnv(&data);
        let mut w = s.dup().unwrap();
        let send = thread::spawn(move || {
            w.write_all(&data).unwrap();
            w.shut(Shutdown::Write).unwrap();
        });
        let mut back = Vec::new();
        s.read_to_end(&mut back).unwrap();
        send.join().unwrap();
        assert_eq!(back.len(), len);
        assert_eq!(fnv(&back), sum);
    }

    #[test]
    fn connect_tunnels_bytes_both_ways_over_tcp() {
        let up = echo_upstream();
        let (cfg, logs) = config(&[format!("127.0.0.1:{}", up.port())], |_| {});
        let proxy = tcp_proxy(cfg);
        roundtrip(
            tcp_client(proxy),
            &format!("127.0.0.1:{}", up.port()),
            8 << 20,
        );
        // Shorthand spellings reach the same listed address.
        roundtrip(tcp_client(proxy), &format!("127.1:{}", up.port()), 1000);
        roundtrip(
            tcp_client(proxy),
            &format!("[::ffff:127.0.0.1]:{}", up.port()),
            1000,
        );
        assert!(logs.lock().unwrap().is_empty());
        assert_eq!(up.accepted(), 3);
    }

    /// A gigabyte each way, streamed (run with `--ignored`; slow in debug).
    #[test]
    #[ignore]
    fn connect_tunnel_moves_a_gigabyte() {
        const LEN: usize = 1 << 30;
        let up = echo_upstream();
        let target = format!("127.0.0.1:{}", up.port());
        let (cfg, _) = config(std::slice::from_ref(&target), |_| {});
        let mut s = tcp_client(tcp_proxy(cfg));
        write!(s, "CONNECT {target} HTTP/1.1\r\n{}\r\n", auth()).unwrap();
        assert_eq!(status(&head_of(&mut s)), 200);
        let mut w = s.try_clone().unwrap();
        let send = thread::spawn(move || {
            let chunk = pseudo_random(1 << 20);
            let mut sum = 0u64;
            for i in 0..LEN >> 20 {
                sum = sum.wrapping_add(fnv(&chunk) ^ i as u64);
                w.write_all(&chunk).unwrap();
            }
            w.shutdown(Shutdown::Write).unwrap();
            sum
        });
        let mut buf = vec![0u8; 1 << 20];
        let (mut got, mut sum, mut i) = (0usize, 0u64, 0u64);
        loop {
            let mut filled = 0;
            while filled < buf.len() {
                match s.read(&mut buf[filled..]).unwrap() {
                    0 => break,
                    n => filled += n,
                }
            }
            if filled == 0 {
                break;
            }
            got += filled;
            sum = sum.wrapping_add(fnv(&buf[..filled]) ^ i);
            i += 1;
        }
        assert_eq!(got, LEN);
        assert_eq!(sum, send.join().unwrap());
    }

    #[test]
    fn connect_tunnels_bytes_both_ways_over_unix_socket_by_name() {
        let up = echo_upstream();
        let port = up.port();
        // The name resolves to loopback, so the address must be listed too.
        let (cfg, _) = config(
            &[format!("upstream.test:{port}"), format!("127.0.0.1:{port}")],
            |_| {},
        );
        let (_dir, path) = unix_proxy(cfg);
        let s = UnixStream::connect(&path).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        roundtrip(s, &format!("UPSTREAM.test.:{port}"), 4 << 20);
    }

    #[test]
    fn connect_to_unlisted_targets_is_refused_before_any_connection() {
        let up = echo_upstream();
        let canary = TcpListener::bind("127.0.0.1:0").unwrap();
        canary.set_nonblocking(true).unwrap();
        let cport = canary.local_addr().unwrap().port();
        let (cfg, logs) = config(
            &[
                format!("127.0.0.1:{}", up.port()),
                format!("upstream.test:{cport}"),
            ],
            |_| {},
        );
        let proxy = tcp_proxy(cfg);
        let response = exchange(
            proxy,
            format!("CONNECT 127.0.0.1:{cport} HTTP/1.1\r\n{}\r\n", auth()).as_bytes(),
        );
        assert_eq!(status(&response), 403, "{response}");
        assert!(
            response.contains(&format!("127.0.0.1:{cport}")),
            "{response}"
        );
        assert!(response.contains("network_allowlist"), "{response}");
        // Listed by name, but the name resolves to unlisted loopback.
        let response = exchange(
            proxy,
            format!("CONNECT upstream.test:{cport} HTTP/1.1\r\n{}\r\n", auth()).as_bytes(),
        );
        assert_eq!(status(&response), 403, "{response}");
        assert!(response.contains("loopback"), "{response}");
        // Malformed names.
        for host in [
            "upstream.test%00.evil",
            "upstream.test\x01",
            "user@upstream.test",
        ] {
            let req = format!("CONNECT {host}:{cport} HTTP/1.1\r\n{}\r\n", auth());
            let response = exchange(proxy, req.as_bytes());
            assert!(
                matches!(status(&response), 400 | 403),
                "{host:?}: {response}"
            );
        }
        assert_eq!(
            canary.accept().unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        assert_eq!(up.accepted(), 0);
        let logs = logs.lock().unwrap();
        assert_eq!(
            logs[0],
            format!("blocked CONNECT 127.0.0.1:{cport} (not in network_allowlist)")
        );
        assert!(logs[1].starts_with(&format!(
            "blocked CONNECT upstream.test:{cport} (resolves to loopback"
        )));
    }

    #[test]
    fn tls_server_name_must_match_the_connect_host() {
        let up = echo_upstream();
        let port = up.port();
        let (cfg, logs) = config(
            &[format!("upstream.test:{port}"), format!("127.0.0.1:{port}")],
            |_| {},
        );
        let proxy = tcp_proxy(cfg);
        let connect = format!("CONNECT upstream.test:{port} HTTP/1.1\r\n{}\r\n", auth());

        for sni in [Some("evil.test"), Some("upstream.test.evil.test"), None] {
            let mut s = tcp_client(proxy);
            s.write_all(connect.as_bytes()).unwrap();
            assert_eq!(status(&head_of(&mut s)), 200);
            s.write_all(&client_hello(sni)).unwrap();
            let mut back = Vec::new();
            let _ = s.read_to_end(&mut back);
            assert!(back.is_empty(), "{sni:?}: the ClientHello was forwarded");
        }
        let logs = logs.lock().unwrap().clone();
        assert!(
            logs[0].contains("TLS server name evil.test does not match"),
            "{logs:?}"
        );
        assert!(logs[2].contains("without a server name"), "{logs:?}");

        // A matching name (any case, trailing dot), even sent together with
        // the CONNECT request, goes through byte for byte.
        let hello = client_hello(Some("UPSTREAM.test."));
        let mut s = tcp_client(proxy);
        let mut first = connect.into_bytes();
        first.extend(&hello);
        s.write_all(&first).unwrap();
        assert_eq!(status(&head_of(&mut s)), 200);
        let mut back = vec![0u8; hello.len()];
        s.read_exact(&mut back).unwrap();
        assert_eq!(back, hello);
    }

    #[test]
    fn non_tls_tunnels_are_not_inspected() {
        // A server-speaks-first protocol: nothing is sent by the client first.
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            s.write_all(b"SSH-2.0-test\r\n").unwrap();
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
        });
        let (cfg, _) = config(
            &[format!("upstream.test:{port}"), format!("127.0.0.1:{port}")],
            |_| {},
        );
        let proxy = tcp_proxy(cfg);
        let mut s = tcp_client(proxy);
        write!(s, "CONNECT upstream.test:{port} HTTP/1.1\r\n{}\r\n", auth()).unwrap();
        assert_eq!(status(&head_of(&mut s)), 200);
        let mut banner = [0u8; 14];
        s.read_exact(&mut banner).unwrap();
        assert_eq!(&banner, b"SSH-2.0-test\r\n");
        s.write_all(b"ping").unwrap();
        let mut back = [0u8; 4];
        s.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"ping");
    }
}
