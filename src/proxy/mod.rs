//! The filtering proxy behind `network = "allowlist"`.
//!
//! The sandboxed command has no network of its own; the only way out is this
//! proxy, served by the outer sbx process for as long as the command runs (on
//! a per-run Unix socket bridged into the namespace on Linux, on a localhost
//! port on macOS). It speaks the two forms every HTTP client can be pointed at
//! with `HTTP(S)_PROXY`: `CONNECT host:port` (any protocol is tunnelled) and
//! absolute-form plain HTTP (`GET http://host/path`), which it forwards.
//!
//! Why it looks the way it does:
//!
//! - **One strict host parser, before any lookup.** Every target (CONNECT
//!   authority, absolute URI, `Host:` header) goes through [`decide`], which
//!   canonicalises the host with the same rules as the allowlist entries
//!   ([`crate::netrule`]: lower case, one trailing dot removed, IP literals in
//!   any WHATWG spelling canonicalised) and refuses control characters, `%`,
//!   spaces, `@`, empty labels and non-LDH characters outright. The host is
//!   matched against the rules *before* it is resolved, so a refused name never
//!   causes a DNS query (no exfiltration through query names).
//! - **IP literals only when listed as IPs**, and names only resolve to public
//!   addresses: a name whose lookup yields loopback, private, CGNAT, ULA,
//!   link-local, multicast, unspecified or cloud-metadata addresses is refused
//!   unless that very address is listed. The proxy then dials the address it
//!   checked; there is no second lookup a rebinding DNS server could answer
//!   differently.
//! - **Host and target must agree.** Plain HTTP is refused when its `Host:`
//!   header names another host than its absolute URI, and a CONNECT tunnel to a
//!   name whose first bytes are a TLS ClientHello must carry that same name as
//!   SNI (other protocols pass untouched). True domain fronting (same SNI,
//!   another `Host:` inside TLS) cannot be seen without terminating TLS.
//! - **A per-run credential** (`Proxy-Authorization: Basic sbx:TOKEN`) so that
//!   other local users and processes cannot use the proxy (it matters for the
//!   macOS localhost port).
//! - **Threads, not async.** A thread per connection (two for a tunnel) keeps
//!   the code small and obviously correct; a cap on concurrent connections and
//!   a size and time limit on request headers keep a slow or hostile client
//!   from pinning threads forever.
//! - **One request per plain-HTTP connection.** The proxy forces
//!   `Connection: close` and forwards exactly the request body its framing
//!   declares (`Content-Length` or `chunked`, never both), so a second request
//!   pipelined behind the first, perhaps with another `Host:`, never reaches
//!   the upstream server.
//!
//! Known limits: the upstream side has no idle timeout (long-lived tunnels
//! and long polls are legitimate), so a connection slot is held for as long as
//! both ends keep it open; plain HTTP inside a CONNECT tunnel is not inspected;
//! names are checked with the allowlist's own label rules, which accept `_`.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{
    IpAddr, Ipv4Addr, Ipv6Addr, Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs,
};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::netrule::{HostPattern, HostRule};

/// Concurrent connections served at once; more are answered with 503.
pub const MAX_CONNECTIONS: usize = 256;

/// Descriptors one connection may hold: the client's and its clone, the
/// upstream socket and its clone, and one more while a name is resolved.
pub const FDS_PER_CONNECTION: u64 = 5;

/// Descriptors kept free for sbx itself however many connections are open.
pub const RESERVED_FDS: u64 = 64;
/// Request line and headers together may not exceed this.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Time a client has to send its request line and headers.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(30);
/// Time to establish the upstream TCP connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The configuration key named in refusals.
pub const CONFIG_KEY: &str = "network_allowlist";
/// The user name in the proxy credential (`sbx:TOKEN`).
pub const PROXY_USER: &str = "sbx";

const MAX_HEADERS: usize = 128;
const COPY_BUF: usize = 64 * 1024;
const MAX_CLIENT_HELLO: usize = 64 * 1024;
const THREAD_STACK: usize = 256 * 1024;
const LINGER: Duration = Duration::from_secs(1);

/// Resolves a name to socket addresses (the default is [`system_resolve`]).
pub type Resolver = dyn Fn(&str, u16) -> io::Result<Vec<SocketAddr>> + Send + Sync;
/// Receives one line per refused or failed request.
pub type LogFn = dyn Fn(&str) + Send + Sync;

/// Everything one proxy instance needs; shared by all connection threads.
pub struct Config {
    /// The parsed `network_allowlist`.
    pub rules: Vec<HostRule>,
    /// The per-run secret; clients authenticate as `sbx:TOKEN`.
    pub token: String,
    /// Name resolution, injected so tests never touch real DNS.
    pub resolver: Box<Resolver>,
    /// Called with lines like `blocked CONNECT evil.example:443 (not in network_allowlist)`.
    pub log: Box<LogFn>,
    /// Connections served at once ([`MAX_CONNECTIONS`]).
    pub max_connections: usize,
    /// Time allowed for the request head ([`HEADER_TIMEOUT`]); also bounds
    /// how long a started TLS ClientHello may take to arrive.
    pub header_timeout: Duration,
    /// Time allowed to connect upstream ([`CONNECT_TIMEOUT`]).
    pub connect_timeout: Duration,
}

impl Config {
    /// A configuration with the system resolver and the default limits.
    pub fn new(
        rules: Vec<HostRule>,
        token: String,
        log: impl Fn(&str) + Send + Sync + 'static,
    ) -> Config {
        Config {
            rules,
            token,
            resolver: Box::new(system_resolve),
            log: Box::new(log),
            max_connections: MAX_CONNECTIONS,
            header_timeout: HEADER_TIMEOUT,
            connect_timeout: CONNECT_TIMEOUT,
        }
    }

    /// Lower the connection cap so that the proxy cannot use up the
    /// descriptors of the process it runs in (`limit`: its soft
    /// `RLIMIT_NOFILE`): sbx needs some of its own for what it does after
    /// the command (the post-run checks), and a connection takes up to
    /// [`FDS_PER_CONNECTION`].
    pub fn fit_descriptor_limit(&mut self, limit: u64) {
        let spare = limit.saturating_sub(RESERVED_FDS) / FDS_PER_CONNECTION;
        let spare = usize::try_from(spare).unwrap_or(usize::MAX).max(1);
        self.max_connections = self.max_connections.min(spare);
    }

    /// The value clients must send: `Basic base64(sbx:TOKEN)`.
    // Kept outside the tests: used by the tests (and clients of a TCP proxy).
    #[allow(dead_code)]
    pub fn authorization(&self) -> String {
        format!("Basic {}", credential(&self.token))
    }
}

/// The default resolver: the system's `getaddrinfo` through `ToSocketAddrs`.
pub fn system_resolve(host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
    Ok((host, port).to_socket_addrs()?.collect())
}

/// A fresh random token (32 hex digits from the kernel's CSPRNG); safe to put
/// in a URL's user info unescaped.
pub fn random_token() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `base64("sbx:TOKEN")`, the credential part of `Proxy-Authorization`.
// Kept outside the tests: used by the tests (and clients of a TCP proxy).
#[allow(dead_code)]
pub fn credential(token: &str) -> String {
    base64_encode(format!("{PROXY_USER}:{token}").as_bytes())
}

/// Why a target was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// Short text, e.g. `not in network_allowlist`.
    pub reason: String,
    /// 403 for a policy refusal, 502 when the name could not be resolved.
    pub status: u16,
}

impl Refusal {
    fn policy(reason: impl Into<String>) -> Refusal {
        Refusal {
            reason: reason.into(),
            status: 403,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Refusal {}

/// A validated, canonical request target host.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Target {
    Name(String),
    Ip(IpAddr),
}

/// Decide whether `host:port` may be reached, and at which address.
///
/// `host` is what the client wrote (a name, an IP literal in any spelling,
/// or a bracketed IPv6 literal). Malformed hosts and hosts that match no rule
/// are refused without calling `resolve`; a name that matches is resolved once
/// and refused if any of its addresses is internal and not listed literally.
/// The returned address is the one to dial.
pub fn decide(
    host: &str,
    port: u16,
    rules: &[HostRule],
    resolve: &dyn Fn(&str, u16) -> io::Result<Vec<SocketAddr>>,
) -> Result<SocketAddr, Refusal> {
    check(host, port, rules, resolve).map(|(_, addr)| addr)
}

fn check(
    host: &str,
    port: u16,
    rules: &[HostRule],
    resolve: &dyn Fn(&str, u16) -> io::Result<Vec<SocketAddr>>,
) -> Result<(Target, SocketAddr), Refusal> {
    let target = parse_host(host).map_err(|e| Refusal::policy(format!("invalid host: {e}")))?;
    if port == 0 {
        return Err(Refusal::policy("port 0"));
    }
    if !rules.iter().any(|r| rule_matches(r, &target, port)) {
        return Err(Refusal::policy(format!("not in {CONFIG_KEY}")));
    }
    let name = match &target {
        Target::Ip(ip) => {
            let addr = SocketAddr::new(canon_ip(*ip), port);
            return Ok((target, addr));
        }
        Target::Name(name) => name,
    };
    // A name only a `*.domain` rule allows has labels the client chose: it
    // is looked up as an absolute name (trailing dot), so the resolver's
    // search list never turns it into a query for an internal zone. A name
    // the allowlist lists exactly is looked up as written (an /etc/hosts
    // entry does not match the absolute form).
    let exact = rules
        .iter()
        .any(|r| r.host == HostPattern::Name(name.clone()) && port_allowed(r.port, port));
    let lookup = if exact {
        name.clone()
    } else {
        format!("{name}.")
    };
    let addrs = resolve(&lookup, port).map_err(|e| Refusal {
        reason: format!("cannot resolve {name}: {e}"),
        status: 502,
    })?;
    let mut chosen = None;
    for addr in &addrs {
        let ip = canon_ip(addr.ip());
        if let Some(kind) = internal_kind(ip) {
            if !ip_listed(ip, port, rules) {
                return Err(Refusal::policy(format!(
                    "resolves to {kind} address {ip}, which {CONFIG_KEY} does not list"
                )));
            }
        }
        chosen.get_or_insert(SocketAddr::new(ip, port));
    }
    match chosen {
        Some(addr) => Ok((target, addr)),
        None => Err(Refusal {
            reason: format!("{name} has no addresses"),
            status: 502,
        }),
    }
}

/// Validate and canonicalise a host as the client wrote it.
fn parse_host(host: &str) -> Result<Target, String> {
    if host.is_empty() {
        return Err("empty host".into());
    }
    if let Some(c) = host.chars().find(|&c| {
        c.is_control()
            || c.is_whitespace()
            || !c.is_ascii()
            || matches!(c, '%' | '@' | '*' | '/' | '\\' | '?' | '#' | '"' | '\'')
    }) {
        return Err(format!("character {c:?} is not allowed in a host name"));
    }
    let v6 = match host.strip_prefix('[') {
        Some(rest) => Some(rest.strip_suffix(']').ok_or("unclosed `[`")?),
        None if host.contains(':') => Some(host),
        None => None,
    };
    if let Some(v6) = v6 {
        return v6
            .parse::<Ipv6Addr>()
            .map(|ip| Target::Ip(IpAddr::V6(ip)))
            .map_err(|_| "not a valid IPv6 address".to_string());
    }
    // The allowlist's own parser, so that a target and a rule written the same
    // way are canonicalised the same way.
    match HostRule::parse(host)? {
        HostRule {
            host: HostPattern::Name(name),
            port: None,
        } => Ok(Target::Name(name)),
        HostRule {
            host: HostPattern::Ip(ip),
            port: None,
        } => Ok(Target::Ip(ip)),
        _ => Err("not a host name".into()),
    }
}

/// IPv4-mapped IPv6 addresses are their IPv4 address.
fn canon_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

fn port_allowed(rule_port: Option<u16>, port: u16) -> bool {
    match rule_port {
        Some(p) => p == port,
        None => port == 80 || port == 443,
    }
}

fn rule_matches(rule: &HostRule, target: &Target, port: u16) -> bool {
    if !port_allowed(rule.port, port) {
        return false;
    }
    match (&rule.host, target) {
        (HostPattern::Name(n), Target::Name(t)) => n == t,
        (HostPattern::Subdomains(d), Target::Name(t)) => {
            t.len() > d.len() + 1
                && t.ends_with(d.as_str())
                && t.as_bytes()[t.len() - d.len() - 1] == b'.'
        }
        (HostPattern::Ip(a), Target::Ip(b)) => canon_ip(*a) == canon_ip(*b),
        _ => false,
    }
}

fn ip_listed(ip: IpAddr, port: u16, rules: &[HostRule]) -> bool {
    rules.iter().any(|r| match r.host {
        HostPattern::Ip(listed) => canon_ip(listed) == ip && port_allowed(r.port, port),
        _ => false,
    })
}

/// What kind of internal address `ip` is, if it is one.
fn internal_kind(ip: IpAddr) -> Option<&'static str> {
    match canon_ip(ip) {
        IpAddr::V4(v4) => internal_v4(v4),
        IpAddr::V6(v6) => internal_v6(v6),
    }
}

fn internal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) {
        Some("cloud metadata")
    } else if o[0] == 0 {
        Some("unspecified")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
        Some("private (CGNAT)")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if o[0] >= 240 {
        Some("reserved")
    } else {
        None
    }
}

fn internal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    if ip == Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254) {
        Some("cloud metadata")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if (s[0] & 0xfe00) == 0xfc00 {
        Some("private (ULA)")
    } else if (s[0] & 0xffc0) == 0xfe80 {
        Some("link-local")
    } else if (s[0] & 0xffc0) == 0xfec0 {
        Some("site-local")
    } else if (s[0] & 0xff00) == 0xff00 {
        Some("multicast")
    } else if s[..6] == [0; 6] || (s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0; 4]) {
        // IPv4-compatible and NAT64 addresses carry an IPv4 address.
        let [a, b, c, d] = ip.octets()[12..] else {
            return None;
        };
        internal_v4(Ipv4Addr::new(a, b, c, d))
    } else {
        None
    }
}

// ---------------------------------------------------------------------------
// Serving.

/// Serve the proxy on a Unix socket until a non-transient accept error.
pub fn serve_unix(listener: UnixListener, config: Arc<Config>) -> io::Result<()> {
    serve_loop(|| listener.accept().map(|(s, _)| s), config)
}

/// Serve the proxy on a TCP socket until a non-transient accept error.
pub fn serve_tcp(listener: TcpListener, config: Arc<Config>) -> io::Result<()> {
    serve_loop(|| listener.accept().map(|(s, _)| s), config)
}

/// The socket operations the proxy needs from a client connection.
trait Stream: Read + Write + Send + Sized + 'static {
    fn dup(&self) -> io::Result<Self>;
    fn shut(&self, how: Shutdown) -> io::Result<()>;
    fn read_timeout(&self, t: Option<Duration>) -> io::Result<()>;
}

impl Stream for TcpStream {
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

impl Stream for UnixStream {
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

/// `Proxy-Authorization: Basic base64(sbx:TOKEN)`, exactly once.
fn authorized(headers: &[httparse::Header], token: &str) -> bool {
    let mut values = headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("proxy-authorization"));
    let (Some(value), None) = (values.next(), values.next()) else {
        return false;
    };
    let Ok(value) = std::str::from_utf8(value.value) else {
        return false;
    };
    let value = value.trim_matches([' ', '\t']);
    let Some((scheme, cred)) = value.split_once([' ', '\t']) else {
        return false;
    };
    if token.is_empty() || !scheme.eq_ignore_ascii_case("basic") {
        return false;
    }
    let Some(decoded) = base64_decode(cred.trim_matches([' ', '\t'])) else {
        return false;
    };
    let expected = format!("{PROXY_USER}:{token}");
    constant_time_eq(&decoded, expected.as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Write a complete response, then close gracefully (see [`linger_close`]).
fn reply<S: Stream>(mut client: S, status: u16, extra_headers: &str, body: &str) {
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
fn printable(s: &str) -> String {
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

fn show_target(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{}]:{port}", printable(host))
    } else {
        format!("{}:{port}", printable(host))
    }
}

/// Log a refusal and answer it.
fn refuse<S: Stream>(client: S, cfg: &Config, method: &str, shown: &str, why: &Refusal) {
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

/// Split `host:port` or `[v6]:port`; the port must be decimal, 1 to 65535.
fn split_authority(authority: &str) -> Result<(&str, Option<u16>), String> {
    let (host, port) = if authority.starts_with('[') {
        let end = authority.find(']').ok_or("unclosed `[`")?;
        let (host, after) = authority.split_at(end + 1);
        match after {
            "" => (host, None),
            _ => (host, Some(after.strip_prefix(':').ok_or("text after `]`")?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, _)) if h.contains(':') => {
                return Err("an IPv6 address must be in brackets".into())
            }
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        None => None,
        Some(p) => {
            let ok = !p.is_empty() && p.len() <= 5 && p.bytes().all(|b| b.is_ascii_digit());
            match p.parse::<u16>() {
                Ok(n) if ok && n > 0 => Some(n),
                _ => return Err(format!("bad port {:?}", printable(p))),
            }
        }
    };
    Ok((host, port))
}

// ---------------------------------------------------------------------------
// CONNECT.

fn connect<S: Stream>(client: S, cfg: &Config, authority: &str, early: Vec<u8>) {
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
    let upstream = match TcpStream::connect_timeout(&addr, cfg.connect_timeout) {
        Ok(s) => s,
        Err(e) => {
            let why = Refusal {
                reason: format!("connecting to {addr}: {e}"),
                status: 502,
            };
            return refuse(client, cfg, "CONNECT", &shown, &why);
        }
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

fn abort<S: Stream>(client: &S, upstream: &TcpStream) {
    let _ = client.shut(Shutdown::Both);
    let _ = upstream.shutdown(Shutdown::Both);
}

/// Copy `from` to `to` until EOF (then half-close `to`) or an error (then shut
/// both down, which also ends the copy in the other direction).
fn pump<R: Stream, W: Stream>(mut from: R, mut to: W) {
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

#[derive(Debug, PartialEq, Eq)]
enum Hello {
    More,
    Done(Option<String>),
    Bad(&'static str),
}

/// Reassemble the first handshake message from TLS records and extract the
/// `server_name` (RFC 6066) of a ClientHello.
fn parse_client_hello(data: &[u8]) -> Hello {
    let mut msg = Vec::new();
    let mut at = 0;
    loop {
        if !msg.is_empty() && msg[0] != 1 {
            return Hello::Bad("TLS handshake does not start with a ClientHello");
        }
        if msg.len() >= 4 {
            let need = 4 + ((msg[1] as usize) << 16 | (msg[2] as usize) << 8 | msg[3] as usize);
            if msg.len() >= need {
                return match hello_server_name(&msg[4..need]) {
                    Some(name) => Hello::Done(name),
                    None => Hello::Bad("malformed TLS ClientHello"),
                };
            }
        }
        let Some(header) = data.get(at..at + 5) else {
            return Hello::More;
        };
        if header[0] != 0x16 || header[1] != 3 {
            return Hello::Bad("TLS record is not a handshake");
        }
        let len = (header[3] as usize) << 8 | header[4] as usize;
        if len == 0 || len > 16 * 1024 {
            return Hello::Bad("bad TLS record length");
        }
        let Some(fragment) = data.get(at + 5..at + 5 + len) else {
            return Hello::More;
        };
        msg.extend_from_slice(fragment);
        at += 5 + len;
    }
}

struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| b[0] as usize)
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2).map(|b| (b[0] as usize) << 8 | b[1] as usize)
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// `Some(None)`: a well-formed ClientHello without a host name.
fn hello_server_name(body: &[u8]) -> Option<Option<String>> {
    let mut c = Cursor(body);
    c.take(2 + 32)?; // legacy_version, random
    c.vec8()?; // session id
    c.vec16()?; // cipher suites
    c.vec8()?; // compression methods
    if c.0.is_empty() {
        return Some(None);
    }
    let mut exts = Cursor(c.vec16()?);
    while !exts.0.is_empty() {
        let kind = exts.u16()?;
        let data = exts.vec16()?;
        if kind != 0 {
            continue;
        }
        let mut list = Cursor(Cursor(data).vec16()?);
        while !list.0.is_empty() {
            let name_type = list.u8()?;
            let name = list.vec16()?;
            if name_type == 0 {
                return std::str::from_utf8(name).ok().map(|s| Some(s.to_string()));
            }
        }
        return Some(None);
    }
    Some(None)
}

// ---------------------------------------------------------------------------
// Plain HTTP.

struct Plain<'r, 'h> {
    method: &'r str,
    uri: &'r str,
    version: u8,
    headers: &'r [httparse::Header<'h>],
}

/// How the request body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Body {
    Empty,
    Length(u64),
    Chunked,
}

fn plain<S: Stream>(client: S, cfg: &Config, req: &Plain, early: Vec<u8>) {
    let uri = req.uri;
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
        return reply(client, 400, "", body);
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
        Err(e) => {
            let body = format!("sbx proxy: bad request URI: {e}\n");
            return reply(client, 400, "", &body);
        }
    };
    let shown = show_target(host, port);
    let method = req.method;
    if let Err(e) = parse_host(host) {
        let why = Refusal::policy(format!("invalid host: {e}"));
        return refuse(client, cfg, method, &shown, &why);
    }

    let mut host_headers = req
        .headers
        .iter()
        .filter(|h| h.name.eq_ignore_ascii_case("host"));
    let host_header = host_headers.next();
    if host_headers.next().is_some() {
        return reply(client, 400, "", "sbx proxy: more than one Host header\n");
    }
    if let Some(h) = host_header {
        let value = String::from_utf8_lossy(h.value);
        if let Err(why) = host_agrees(value.trim(), host, port) {
            return refuse(client, cfg, method, &shown, &Refusal::policy(why));
        }
    }
    let body = match body_framing(req) {
        Ok(b) => b,
        Err((status, why)) => return reply(client, status, "", &format!("sbx proxy: {why}\n")),
    };
    let addr = match decide(host, port, &cfg.rules, &*cfg.resolver) {
        Ok(a) => a,
        Err(why) => return refuse(client, cfg, method, &shown, &why),
    };
    let upstream = match TcpStream::connect_timeout(&addr, cfg.connect_timeout) {
        Ok(s) => s,
        Err(e) => {
            let why = Refusal {
                reason: format!("connecting to {addr}: {e}"),
                status: 502,
            };
            return refuse(client, cfg, method, &shown, &why);
        }
    };

    let mut head = format!("{method} {path} HTTP/1.{}\r\n", req.version).into_bytes();
    if host_header.is_none() {
        head.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
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
    let mut up = &upstream;
    if up.write_all(&head).is_err() {
        let why = Refusal {
            reason: format!("writing to {addr} failed"),
            status: 502,
        };
        return refuse(client, cfg, method, &shown, &why);
    }

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

fn body_framing(req: &Plain) -> Result<Body, (u16, &'static str)> {
    let values = |name: &str| -> Vec<String> {
        req.headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
            .collect()
    };
    let te = values("transfer-encoding");
    let cl = values("content-length");
    if !te.is_empty() {
        if !cl.is_empty() {
            return Err((400, "both Transfer-Encoding and Content-Length"));
        }
        if req.version == 0 {
            return Err((400, "Transfer-Encoding in an HTTP/1.0 request"));
        }
        if te.len() != 1 || te[0] != "chunked" {
            return Err((501, "only Transfer-Encoding: chunked is supported"));
        }
        return Ok(Body::Chunked);
    }
    let Some(first) = cl.first() else {
        return Ok(Body::Empty);
    };
    let valid =
        |v: &String| !v.is_empty() && v.len() <= 18 && v.bytes().all(|b| b.is_ascii_digit());
    if !cl.iter().all(|v| valid(v) && v == first) {
        return Err((400, "bad Content-Length"));
    }
    match first.parse::<u64>() {
        Ok(0) => Ok(Body::Empty),
        Ok(n) => Ok(Body::Length(n)),
        Err(_) => Err((400, "bad Content-Length")),
    }
}

/// Forward exactly the declared body; bytes after it are dropped.
fn send_body<S: Stream>(mut client: S, mut upstream: TcpStream, early: Vec<u8>, body: Body) {
    let mut chunked = Chunked::default();
    let mut remaining = match body {
        Body::Length(n) => n,
        _ => 0,
    };
    // Returns how much of `data` belongs to the body, and whether it ended.
    let mut take = |data: &[u8]| -> Result<(usize, bool), ()> {
        match body {
            Body::Empty => Ok((0, true)),
            Body::Length(_) => {
                let n = data
                    .len()
                    .min(usize::try_from(remaining).unwrap_or(usize::MAX));
                remaining -= n as u64;
                Ok((n, remaining == 0))
            }
            Body::Chunked => chunked.feed(data).map(|n| (n, chunked.done())),
        }
    };
    let mut buf = vec![0u8; COPY_BUF];
    let mut early = Some(early).filter(|e| !e.is_empty());
    loop {
        let owned;
        let data: &[u8] = match early.take() {
            Some(e) => {
                owned = e;
                &owned
            }
            None => match client.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => &buf[..n],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            },
        };
        let Ok((n, done)) = take(data) else {
            break;
        };
        if upstream.write_all(&data[..n]).is_err() {
            break;
        }
        if done {
            return;
        }
    }
    // The body ended early or was malformed: the request cannot complete.
    let _ = upstream.shutdown(Shutdown::Both);
    let _ = client.shut(Shutdown::Both);
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    #[default]
    SizeStart,
    Size,
    Ext,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    TrailerStart,
    Trailer,
    TrailerLf,
    FinalLf,
    Done,
}

/// A strict scanner for a chunked body (RFC 9112 §7.1) that passes bytes
/// through unchanged and says where the body ends. Bare LFs, whitespace in
/// sizes and oversized lines are refused: they are how request smuggling
/// starts.
#[derive(Debug, Default)]
struct Chunked {
    state: ChunkState,
    size: u64,
    digits: usize,
    line: usize,
}

impl Chunked {
    fn done(&self) -> bool {
        self.state == ChunkState::Done
    }

    /// Consume from `data`; returns how many bytes belong to the body (all of
    /// them unless the body ends inside `data`).
    fn feed(&mut self, data: &[u8]) -> Result<usize, ()> {
        use ChunkState::*;
        let mut i = 0;
        while i < data.len() && self.state != Done {
            if self.state == Data {
                let n = (data.len() - i).min(usize::try_from(self.size).unwrap_or(usize::MAX));
                self.size -= n as u64;
                i += n;
                if self.size == 0 {
                    self.state = DataCr;
                }
                continue;
            }
            let b = data[i];
            i += 1;
            self.line += 1;
            if self.line > 4096 {
                return Err(());
            }
            self.state = match (self.state, b) {
                (SizeStart | Size, b) if b.is_ascii_hexdigit() => {
                    self.digits += 1;
                    if self.digits > 15 {
                        return Err(());
                    }
                    let d = (b as char).to_digit(16).unwrap_or(0) as u64;
                    self.size = self.size * 16 + d;
                    Size
                }
                (Size, b';') => Ext,
                (Size | Ext, b'\r') => SizeLf,
                (Ext, b) if b == b'\t' || (b' '..0x7f).contains(&b) || b >= 0x80 => Ext,
                (SizeLf, b'\n') => {
                    self.line = 0;
                    self.digits = 0;
                    if self.size == 0 {
                        TrailerStart
                    } else {
                        Data
                    }
                }
                (DataCr, b'\r') => DataLf,
                (DataLf, b'\n') => {
                    self.line = 0;
                    SizeStart
                }
                (TrailerStart, b'\r') => FinalLf,
                (Trailer, b'\r') => TrailerLf,
                (TrailerStart | Trailer, b)
                    if b == b'\t' || (b' '..0x7f).contains(&b) || b >= 0x80 =>
                {
                    Trailer
                }
                (TrailerLf, b'\n') => {
                    self.line = 0;
                    TrailerStart
                }
                (FinalLf, b'\n') => Done,
                _ => return Err(()),
            };
        }
        Ok(i)
    }
}

// ---------------------------------------------------------------------------
// Base64 (standard alphabet), for the credential only.

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for chunk in data.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.as_bytes();
    if !s.len().is_multiple_of(4) {
        return None;
    }
    let pad = s.iter().rev().take_while(|&&b| b == b'=').count();
    if pad > 2 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in &s[..s.len() - pad] {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

/// `sbx __connect HOST PORT`, inside the sandbox: open a CONNECT tunnel
/// through the proxy named by `HTTPS_PROXY` (with its credential) and relay
/// stdin and stdout through it. Used as ssh's ProxyCommand for git over ssh.
pub fn connect_stdio(host: &str, port: u16) -> anyhow::Result<std::process::ExitCode> {
    use anyhow::{bail, Context};
    let proxy =
        std::env::var("HTTPS_PROXY").context("HTTPS_PROXY is not set: no allowlist proxy here")?;
    let rest = proxy
        .strip_prefix("http://")
        .context("HTTPS_PROXY is not an http:// proxy URL")?;
    let (userinfo, addr) = rest
        .trim_end_matches('/')
        .rsplit_once('@')
        .context("HTTPS_PROXY carries no credential")?;
    let (user, token) = userinfo
        .split_once(':')
        .context("HTTPS_PROXY carries no credential")?;
    if host.chars().any(|c| c.is_control() || c.is_whitespace()) {
        bail!("invalid host {host:?}");
    }
    let mut upstream =
        TcpStream::connect(addr).with_context(|| format!("connecting to the proxy at {addr}"))?;
    let auth = base64_encode(format!("{user}:{token}").as_bytes());
    let target = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    write!(
        upstream,
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\nProxy-Authorization: Basic {auth}\r\n\r\n"
    )
    .context("writing to the proxy")?;
    // Read the response head byte by byte so nothing of the tunnel is consumed.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if upstream
            .read(&mut byte)
            .context("reading the proxy's answer")?
            == 0
            || head.len() > 16 * 1024
        {
            bail!("the proxy closed the connection");
        }
        head.push(byte[0]);
    }
    let status = String::from_utf8_lossy(&head);
    let line = status.lines().next().unwrap_or("");
    if line.split_whitespace().nth(1) != Some("200") {
        bail!("the proxy refused {target}: {line}");
    }
    let mut down = upstream.try_clone().context("cloning the tunnel")?;
    let up = std::thread::spawn(move || {
        let _ = io::copy(&mut io::stdin().lock(), &mut upstream);
        let _ = upstream.shutdown(Shutdown::Write);
    });
    let _ = io::copy(&mut down, &mut io::stdout().lock());
    drop(up);
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::Mutex;

    fn rules(list: &[&str]) -> Vec<HostRule> {
        list.iter().map(|s| HostRule::parse(s).unwrap()).collect()
    }

    /// A resolver over a fixed table that records every name it is asked.
    struct FakeDns {
        table: HashMap<String, Vec<IpAddr>>,
        asked: Mutex<Vec<String>>,
    }

    impl FakeDns {
        fn new(entries: &[(&str, &[&str])]) -> FakeDns {
            let table = entries
                .iter()
                .map(|(name, ips)| {
                    let ips = ips.iter().map(|ip| ip.parse().unwrap()).collect();
                    (name.to_string(), ips)
                })
                .collect();
            FakeDns {
                table,
                asked: Mutex::new(Vec::new()),
            }
        }
        fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
            self.asked.lock().unwrap().push(host.to_string());
            let _ = port;
            // An absolute name (trailing dot) is the same name to DNS.
            match self.table.get(host.strip_suffix('.').unwrap_or(host)) {
                // A port the proxy must ignore: it dials the requested one.
                Some(ips) => Ok(ips.iter().map(|ip| SocketAddr::new(*ip, 1)).collect()),
                None => Err(io::Error::new(io::ErrorKind::NotFound, "no such host")),
            }
        }
        fn asked(&self) -> Vec<String> {
            self.asked.lock().unwrap().clone()
        }
    }

    fn run(list: &[&str], dns: &FakeDns, host: &str, port: u16) -> Result<SocketAddr, Refusal> {
        decide(host, port, &rules(list), &|h, p| dns.resolve(h, p))
    }

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    const PUBLIC: &str = "93.184.216.34";

    fn public_dns() -> FakeDns {
        FakeDns::new(&[
            ("allowed.com", &[PUBLIC]),
            ("a.example.com", &[PUBLIC]),
            ("a.b.example.com", &[PUBLIC]),
            ("example.com", &[PUBLIC]),
            ("allowed.com.evil.com", &[PUBLIC]),
            ("evilallowed.com", &[PUBLIC]),
            ("badexample.com", &[PUBLIC]),
        ])
    }

    #[test]
    fn connection_cap_fits_the_descriptor_limit() {
        let cap = |limit| {
            let mut c = Config::new(Vec::new(), TOKEN.into(), |_| {});
            c.fit_descriptor_limit(limit);
            c.max_connections
        };
        assert_eq!(cap(1024), (1024 - 64) / 5);
        assert!(cap(1024) as u64 * FDS_PER_CONNECTION + RESERVED_FDS <= 1024);
        assert_eq!(cap(1 << 20), MAX_CONNECTIONS);
        assert_eq!(cap(10), 1);
    }

    #[test]
    fn exact_names_and_default_ports() {
        let dns = public_dns();
        let r = &["allowed.com"];
        assert_eq!(
            run(r, &dns, "allowed.com", 443),
            Ok(addr("93.184.216.34:443"))
        );
        assert_eq!(
            run(r, &dns, "allowed.com", 80),
            Ok(addr("93.184.216.34:80"))
        );
        let refused = run(r, &dns, "allowed.com", 8443).unwrap_err();
        assert_eq!(refused.reason, "not in network_allowlist");
        assert_eq!(refused.status, 403);
        assert!(run(r, &dns, "allowed.com", 22).is_err());
        assert_eq!(dns.asked(), ["allowed.com", "allowed.com"]);

        let r = &["allowed.com:8443"];
        assert!(run(r, &dns, "allowed.com", 8443).is_ok());
        assert!(run(r, &dns, "allowed.com", 443).is_err());
        assert!(run(r, &dns, "allowed.com", 0).is_err());
    }

    #[test]
    fn case_and_trailing_dot_are_canonicalised() {
        let dns = public_dns();
        for host in ["ALLOWED.COM.", "Allowed.Com", "allowed.com."] {
            assert!(run(&["allowed.com"], &dns, host, 443).is_ok(), "{host}");
        }
        assert!(dns.asked().iter().all(|h| h == "allowed.com"));
        assert!(run(&["allowed.com"], &dns, "allowed.com..", 443).is_err());
    }

    #[test]
    fn classic_tricks_are_refused_without_a_lookup() {
        let dns = public_dns();
        for host in [
            "allowed.com.evil.com",
            "evilallowed.com",
            "allowed.com%00.evil",
            "allowed.com%2e",
            "allowed.com\0.evil",
            "allowed.com\r\n.evil",
            "allowed.com\n",
            "allowed.com\t",
            "allowed .com",
            " allowed.com",
            "user@allowed.com",
            "allowed.com@evil.com",
            "allowed.com:443",
            "*.allowed.com",
            "*",
            "allowed..com",
            ".allowed.com",
            "allowed.com/",
            "allowed.com\\evil",
            "allowed.com?",
            "allowed.com#",
            "allowéd.com",
            "xn--allowed.com\u{200b}",
            "[allowed.com]",
            "[::1",
            "",
            "-allowed.com",
            &"a".repeat(300),
        ] {
            let refused = run(&["allowed.com", "*.allowed.com"], &dns, host, 443).unwrap_err();
            assert_eq!(refused.status, 403, "{host:?}");
        }
        assert_eq!(
            dns.asked(),
            Vec::<String>::new(),
            "a refused name was looked up"
        );
    }

    #[test]
    fn wildcard_matches_strict_subdomains_only() {
        let dns = public_dns();
        let r = &["*.example.com"];
        assert!(run(r, &dns, "a.example.com", 443).is_ok());
        assert!(run(r, &dns, "a.b.example.com", 80).is_ok());
        for host in [
            "example.com",
            "badexample.com",
            "a.example.com.evil",
            "example.com.a",
        ] {
            assert!(run(r, &dns, host, 443).is_err(), "{host}");
        }
        // Labels the client chose are looked up as absolute names, so the
        // resolver's search list never adds an internal domain to them.
        assert_eq!(dns.asked(), ["a.example.com.", "a.b.example.com."]);
        // A name listed exactly is looked up as written (/etc/hosts).
        let r = &["a.example.com", "*.example.com"];
        assert!(run(r, &dns, "a.example.com", 443).is_ok());
        assert_eq!(
            dns.asked().last().map(String::as_str),
            Some("a.example.com")
        );
    }

    #[test]
    fn ip_literals_in_every_spelling_match_only_listed_ips() {
        let dns = public_dns();
        let r = &["127.0.0.1:8080", "[2001:db8::1]:443"];
        for host in [
            "127.0.0.1",
            "127.1",
            "0x7f.1",
            "0x7f.0.0.1",
            "2130706433",
            "0x7f000001",
            "0177.0.0.1",
            "127.0.0.1.",
            "[::ffff:127.0.0.1]",
            "::ffff:127.0.0.1",
            "[::FFFF:7f00:1]",
        ] {
            assert_eq!(
                run(r, &dns, host, 8080),
                Ok(addr("127.0.0.1:8080")),
                "{host}"
            );
        }
        assert_eq!(
            run(r, &dns, "[2001:DB8:0::1]", 443),
            Ok(addr("[2001:db8::1]:443"))
        );
        for (host, port) in [
            ("127.0.0.2", 8080),
            ("127.1", 8081),
            ("0x7f.2", 8080),
            ("[::1]", 8080),
            ("2001:db8::2", 443),
            ("999.1.1.1", 8080),
            ("1.2.3.4.5", 8080),
        ] {
            assert!(run(r, &dns, host, port).is_err(), "{host}:{port}");
        }
        // A listed name does not allow the address it resolves to.
        assert!(run(&["allowed.com"], &dns, PUBLIC, 443).is_err());
        // IP literals are never looked up.
        assert_eq!(dns.asked(), Vec::<String>::new());
    }

    #[test]
    fn names_resolving_to_internal_addresses_are_refused() {
        for (ip, kind) in [
            ("127.0.0.1", "loopback"),
            ("127.8.9.10", "loopback"),
            ("169.254.169.254", "cloud metadata"),
            ("169.254.1.1", "link-local"),
            ("10.0.0.1", "private"),
            ("172.16.0.1", "private"),
            ("192.168.1.1", "private"),
            ("100.64.0.1", "CGNAT"),
            ("100.127.255.254", "CGNAT"),
            ("0.0.0.0", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "reserved"),
            ("::1", "loopback"),
            ("::", "unspecified"),
            ("fd00:ec2::254", "cloud metadata"),
            ("fc00::1", "ULA"),
            ("fd12:3456::1", "ULA"),
            ("fe80::1", "link-local"),
            ("ff02::1", "multicast"),
            ("::ffff:10.0.0.1", "private"),
            ("::ffff:127.0.0.1", "loopback"),
            ("64:ff9b::a9fe:a9fe", "cloud metadata"),
        ] {
            let dns = FakeDns::new(&[("allowed.com", &[ip])]);
            let refused = run(&["allowed.com"], &dns, "allowed.com", 443).unwrap_err();
            assert_eq!(refused.status, 403, "{ip}");
            assert!(refused.reason.contains(kind), "{ip}: {}", refused.reason);
            assert!(
                refused.reason.contains("network_allowlist"),
                "{}",
                refused.reason
            );
        }
        // Public addresses pass.
        for ip in ["8.8.8.8", "100.128.0.1", "172.32.0.1", "2606:4700::1111"] {
            let dns = FakeDns::new(&[("allowed.com", &[ip])]);
            assert!(
                run(&["allowed.com"], &dns, "allowed.com", 443).is_ok(),
                "{ip}"
            );
        }
    }

    #[test]
    fn one_internal_address_among_several_refuses_the_name() {
        let dns = FakeDns::new(&[("allowed.com", &[PUBLIC, "10.0.0.1", "8.8.8.8"])]);
        assert!(run(&["allowed.com"], &dns, "allowed.com", 443).is_err());
    }

    #[test]
    fn listed_internal_addresses_are_allowed_for_listed_ports() {
        let dns = FakeDns::new(&[
            ("db.test", &["127.0.0.1"]),
            ("meta.test", &["::ffff:169.254.169.254"]),
        ]);
        let r = &["db.test:5432", "127.0.0.1:5432"];
        assert_eq!(run(r, &dns, "db.test", 5432), Ok(addr("127.0.0.1:5432")));
        let r = &["db.test:5432", "127.0.0.1:6543"];
        assert!(run(r, &dns, "db.test", 5432).is_err());
        // An IPv4-mapped answer is dialled as the IPv4 address.
        let r = &["meta.test", "169.254.169.254"];
        assert_eq!(
            run(r, &dns, "meta.test", 80),
            Ok(addr("169.254.169.254:80"))
        );
    }

    #[test]
    fn resolution_failures_are_502_and_the_checked_address_is_dialled() {
        let dns = FakeDns::new(&[("empty.test", &[]), ("two.test", &["8.8.8.8", "1.1.1.1"])]);
        let r = &["missing.test", "empty.test", "two.test"];
        assert_eq!(run(r, &dns, "missing.test", 443).unwrap_err().status, 502);
        assert_eq!(run(r, &dns, "empty.test", 443).unwrap_err().status, 502);
        // The first checked address, with the requested port.
        assert_eq!(run(r, &dns, "two.test", 443), Ok(addr("8.8.8.8:443")));
    }

    #[test]
    fn authorities_split_strictly() {
        assert_eq!(split_authority("a.com:443"), Ok(("a.com", Some(443))));
        assert_eq!(split_authority("a.com"), Ok(("a.com", None)));
        assert_eq!(split_authority("[::1]:80"), Ok(("[::1]", Some(80))));
        assert_eq!(split_authority("[::1]"), Ok(("[::1]", None)));
        for bad in [
            "a.com:",
            "a.com:0",
            "a.com:65536",
            "a.com:+443",
            "a.com: 443",
            "::1:80",
            "[::1]x",
            "[::1",
            "a.com:0x1bb",
        ] {
            assert!(split_authority(bad).is_err(), "{bad}");
        }
    }

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

    #[test]
    fn base64_and_credentials() {
        assert_eq!(base64_encode(b""), "");
        assert_eq!(base64_encode(b"f"), "Zg==");
        assert_eq!(base64_encode(b"fo"), "Zm8=");
        assert_eq!(base64_encode(b"foo"), "Zm9v");
        assert_eq!(base64_encode(b"sbx:abc"), "c2J4OmFiYw==");
        for s in ["", "f", "fo", "foo", "foob", "sbx:0123456789abcdef"] {
            assert_eq!(
                base64_decode(&base64_encode(s.as_bytes())).unwrap(),
                s.as_bytes()
            );
        }
        assert!(base64_decode("Zg=").is_none());
        assert!(base64_decode("Z===").is_none());
        assert!(base64_decode("Zm9v!").is_none());

        let ok = format!("Basic {}", credential("tok"));
        let check = |values: &[&str]| {
            let hs: Vec<httparse::Header> = values
                .iter()
                .map(|v| httparse::Header {
                    name: "Proxy-Authorization",
                    value: v.as_bytes(),
                })
                .collect();
            authorized(&hs, "tok")
        };
        assert!(check(&[&ok]));
        assert!(check(&[&format!("basic  {}", credential("tok"))]));
        assert!(!check(&[]));
        assert!(!check(&[&ok, &ok]));
        assert!(!check(&[&format!("Basic {}", credential("tok2"))]));
        assert!(!check(&[&format!("Basic {}", base64_encode(b"root:tok"))]));
        assert!(!check(&[&format!("Bearer {}", credential("tok"))]));
        assert!(!check(&["Basic"]));
        let hs = [httparse::Header {
            name: "Proxy-Authorization",
            value: ok.as_bytes(),
        }];
        assert!(!authorized(&hs, ""), "an empty token must never authorise");

        let token = random_token().unwrap();
        assert_eq!(token.len(), 32);
        assert_ne!(token, random_token().unwrap());
    }

    #[test]
    fn chunked_bodies_end_where_their_framing_says() {
        let body =
            b"5\r\nhello\r\n1;ext=1\r\n!\r\n0\r\nTrailer: x\r\n\r\nGET /smuggled HTTP/1.1\r\n";
        let mut c = Chunked::default();
        let n = c.feed(body).unwrap();
        assert!(c.done());
        assert!(body[..n].ends_with(b"Trailer: x\r\n\r\n"));
        // Byte by byte gives the same answer.
        let mut c = Chunked::default();
        let mut total = 0;
        for b in body.iter() {
            if c.done() {
                break;
            }
            total += c.feed(std::slice::from_ref(b)).unwrap();
        }
        assert_eq!(total, n);
        for bad in [
            &b"5\nhello\r\n0\r\n\r\n"[..],
            b"5 \r\nhello\r\n0\r\n\r\n",
            b"-5\r\n",
            b"5\r\nhelloX\r\n",
            b"0\r\n\n",
            b"10000000000000000\r\n",
            b"\r\n",
        ] {
            let mut c = Chunked::default();
            assert!(c.feed(bad).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }

    fn client_hello(sni: Option<&str>) -> Vec<u8> {
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

    #[test]
    fn client_hello_server_name_is_extracted() {
        let hello = client_hello(Some("Example.com"));
        assert_eq!(
            parse_client_hello(&hello),
            Hello::Done(Some("Example.com".into()))
        );
        assert_eq!(parse_client_hello(&client_hello(None)), Hello::Done(None));
        for cut in [1, 5, 20, hello.len() - 1] {
            assert_eq!(parse_client_hello(&hello[..cut]), Hello::More, "{cut}");
        }
        // The same handshake split over two records.
        let hs = &hello[5..];
        let (a, b) = hs.split_at(10);
        let mut two = vec![0x16, 3, 1, 0, a.len() as u8];
        two.extend(a);
        two.extend([0x16, 3, 1, 0, b.len() as u8]);
        two.extend(b);
        assert_eq!(
            parse_client_hello(&two),
            Hello::Done(Some("Example.com".into()))
        );
        assert!(matches!(
            parse_client_hello(b"\x17\x03\x01\x00\x05hello"),
            Hello::Bad(_)
        ));
        assert!(matches!(
            parse_client_hello(b"\x16\x03\x01\x00\x04\x02\x00\x00\x00"),
            Hello::Bad(_)
        ));
    }

    // -----------------------------------------------------------------------
    // End to end, on loopback only.

    const TOKEN: &str = "test-token";

    fn auth() -> String {
        format!("Proxy-Authorization: Basic {}\r\n", credential(TOKEN))
    }

    type Logs = Arc<Mutex<Vec<String>>>;

    fn config(list: &[String], tweak: impl FnOnce(&mut Config)) -> (Arc<Config>, Logs) {
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

    fn tcp_proxy(cfg: Arc<Config>) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        thread::spawn(move || serve_tcp(l, cfg));
        a
    }

    fn unix_proxy(cfg: Arc<Config>) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("proxy.sock");
        let l = UnixListener::bind(&path).unwrap();
        thread::spawn(move || serve_unix(l, cfg));
        (dir, path)
    }

    struct Upstream {
        addr: SocketAddr,
        accepted: Arc<AtomicUsize>,
        received: Arc<Mutex<Vec<Vec<u8>>>>,
    }

    impl Upstream {
        fn port(&self) -> u16 {
            self.addr.port()
        }
        fn accepted(&self) -> usize {
            self.accepted.load(Ordering::SeqCst)
        }
    }

    fn upstream(serve: fn(TcpStream, &Mutex<Vec<Vec<u8>>>)) -> Upstream {
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
                accepted.fetch_add(1, Ordering::SeqCst);
                let received = received.clone();
                thread::spawn(move || serve(s, &received));
            }
        });
        up
    }

    /// Echoes everything, half-closes on EOF.
    fn echo_upstream() -> Upstream {
        upstream(|mut s, _| {
            let mut r = s.try_clone().unwrap();
            let _ = io::copy(&mut r, &mut s);
            let _ = s.shutdown(Shutdown::Write);
        })
    }

    /// Records everything sent until 300 ms of silence, then answers `hello`.
    fn http_upstream() -> Upstream {
        upstream(|mut s, received| {
            s.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            received.lock().unwrap().push(got);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
            );
        })
    }

    fn head_of<R: Read>(r: &mut R) -> String {
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

    fn status(head: &str) -> u16 {
        head.split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    fn tcp_client(proxy: SocketAddr) -> TcpStream {
        let s = TcpStream::connect(proxy).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        s
    }

    /// Send `request`, return the whole response (the proxy closes after it).
    fn exchange(proxy: SocketAddr, request: &[u8]) -> String {
        let mut s = tcp_client(proxy);
        s.write_all(request).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

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
        let got = String::from_utf8(up.received.lock().unwrap()[0].clone()).unwrap();
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
        let got = String::from_utf8(up.received.lock().unwrap()[1].clone()).unwrap();
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
        thread::sleep(Duration::from_millis(50));
        write!(s, " world{smuggled}").unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).unwrap();
        assert!(response.ends_with("hello"), "{response}");
        let got = String::from_utf8(up.received.lock().unwrap()[0].clone()).unwrap();
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
        let got = String::from_utf8(up.received.lock().unwrap()[1].clone()).unwrap();
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
        let mut idle = tcp_client(proxy);
        idle.write_all(b"G").unwrap();
        thread::sleep(Duration::from_millis(200));
        let response = exchange(
            proxy,
            format!("CONNECT a.test:443 HTTP/1.1\r\n{}\r\n", auth()).as_bytes(),
        );
        assert_eq!(status(&response), 503, "{response}");
        drop(idle);
        thread::sleep(Duration::from_millis(200));
        let response = exchange(
            proxy,
            format!("CONNECT a.test:443 HTTP/1.1\r\n{}\r\n", auth()).as_bytes(),
        );
        assert_eq!(status(&response), 403, "{response}");
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
