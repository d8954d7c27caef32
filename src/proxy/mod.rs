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

mod auth;
mod body;
mod client_hello;
mod connect;
mod hosts;
mod listener;
mod plain;
mod respond;
mod stdio;
#[cfg(test)]
mod test_support;

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use crate::netrule::HostRule;

#[cfg(test)]
pub use auth::credential;
pub use auth::random_token;
pub use hosts::{decide, system_resolve, Refusal};
pub use listener::{serve_tcp, serve_unix};
pub use stdio::connect_stdio;

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

const COPY_BUF: usize = 64 * 1024;
const THREAD_STACK: usize = 256 * 1024;

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
}

#[cfg(test)]
mod tests {
    use super::test_support::TOKEN;
    use super::*;

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
}
