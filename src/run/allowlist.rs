//! The allowlist proxy of one run: started by sbx before the sandbox, served
//! from its threads for as long as the command runs, on whichever side of
//! the sandbox each platform can reach.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};

use crate::backend;
use crate::banner;
use crate::policy::Host;

/// The allowlist proxy of one run, served by this process; its private
/// directory, if it has one, is removed when it is dropped.
pub struct RunningProxy {
    dir: Option<PathBuf>,
    pub proxy: backend::Proxy,
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Start the allowlist proxy with a random credential: for bubblewrap on a
/// Unix socket in a fresh private directory (0700, under `$XDG_RUNTIME_DIR`
/// or sbx's cache directory), bound into the sandbox; `on_loopback` (macOS,
/// Linux's reduced mode) on a port of `127.0.0.1` chosen by the system, the
/// one port the profile or the Landlock rules let the command reach. Each refusal is reported on stderr when `log` is set.
pub fn start_proxy(
    rules: &[crate::netrule::HostRule],
    host: &Host,
    on_loopback: bool,
    writable: &[PathBuf],
    log: bool,
) -> Result<RunningProxy> {
    let token = crate::proxy::random_token().context("making the proxy credential")?;
    let mut config = crate::proxy::Config::new(rules.to_vec(), token.clone(), move |line: &str| {
        if log {
            eprintln!("sbx: {}", banner::sanitize(line));
        }
    });
    if let Ok((soft, _)) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
    {
        config.fit_descriptor_limit(soft);
    }
    let config = std::sync::Arc::new(config);
    let (running, serve): (RunningProxy, Box<dyn FnOnce() + Send>) = match on_loopback {
        false => {
            let dir = proxy_dir(host, writable)?;
            let running = RunningProxy {
                dir: Some(dir.clone()),
                proxy: backend::Proxy {
                    listen: backend::Listen::UnixSocket(dir.join("proxy.sock")),
                    token,
                },
            };
            let socket = dir.join("proxy.sock");
            let listener = std::os::unix::net::UnixListener::bind(&socket)
                .with_context(|| format!("listening on {}", socket.display()))?;
            let serve = move || {
                let _ = crate::proxy::serve_unix(listener, config);
            };
            (running, Box::new(serve))
        }
        true => {
            let (v4, v6) = loopback_listeners()?;
            let port = v4.local_addr().context("reading the proxy's port")?.port();
            let running = RunningProxy {
                dir: None,
                proxy: backend::Proxy {
                    listen: backend::Listen::Loopback(port),
                    token,
                },
            };
            if let Some(v6) = v6 {
                let config = config.clone();
                crate::supervise::spawn_without_signals(move || {
                    let _ = crate::proxy::serve_tcp(v6, config);
                })
                .context("starting the proxy")?;
            }
            let serve = move || {
                let _ = crate::proxy::serve_tcp(v4, config);
            };
            (running, Box::new(serve))
        }
    };
    // Signals are for the main thread (its signalfd on Linux, its sigwait
    // thread on macOS): a SIGCHLD or SIGTERM taken by another thread would be
    // lost. The connection threads inherit the blocked mask.
    crate::supervise::spawn_without_signals(serve).context("starting the proxy")?;
    Ok(running)
}

/// The proxy's listeners on macOS: a port of 127.0.0.1 chosen by the system,
/// and the same port of `::1`. The profile's `localhost:PORT` covers both
/// addresses, so the second is taken too: held by anything else, it would
/// be reachable from the sandbox. A port whose `::1` side is taken is
/// given up for another; without IPv6 there is no second listener.
fn loopback_listeners() -> Result<(std::net::TcpListener, Option<std::net::TcpListener>)> {
    use std::net::{Ipv6Addr, TcpListener};
    for _ in 0..32 {
        let v4 = TcpListener::bind(("127.0.0.1", 0))
            .context("listening on a port of 127.0.0.1 for the allowlist proxy")?;
        let port = v4.local_addr().context("reading the proxy's port")?.port();
        match TcpListener::bind((Ipv6Addr::LOCALHOST, port)) {
            Ok(v6) => return Ok((v4, Some(v6))),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(_) => return Ok((v4, None)),
        }
    }
    bail!("no port of 127.0.0.1 is free on ::1 as well, for the allowlist proxy")
}

/// A fresh private directory (0700) for the proxy's Unix socket, under
/// `$XDG_RUNTIME_DIR` unless that lies in a writable root (where the command
/// could rename the directories above the socket), else under sbx's cache
/// directory (read-only, and pinned, inside the sandbox). Its name carries
/// nothing of the credential.
fn proxy_dir(host: &Host, writable: &[PathBuf]) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let base = host
        .var("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute() && d.is_dir())
        .filter(|d| {
            let real = std::fs::canonicalize(d).unwrap_or_else(|_| d.clone());
            !writable.iter().any(|w| real.starts_with(w))
        })
        .or_else(|| host.cache_dir.clone())
        .context("no directory for the proxy socket (set XDG_RUNTIME_DIR)")?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&base)
        .with_context(|| format!("creating {}", base.display()))?;
    let nonce = crate::proxy::random_token().context("naming the proxy directory")?;
    let dir = base.join(format!(
        "sbx-proxy-{}-{}",
        std::process::id(),
        nonce.get(..8).unwrap_or(&nonce)
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("creating the proxy directory {}", dir.display()))?;
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_macos_proxy_holds_its_port_on_both_loopback_addresses() {
        let (v4, v6) = loopback_listeners().unwrap();
        let port = v4.local_addr().unwrap().port();
        assert!(v4.local_addr().unwrap().ip().is_loopback());
        if let Some(v6) = v6 {
            assert_eq!(v6.local_addr().unwrap().port(), port);
            assert_eq!(v6.local_addr().unwrap().ip(), std::net::Ipv6Addr::LOCALHOST);
        }
        // Nothing else can take either side while the proxy holds them.
        assert!(std::net::TcpListener::bind(("127.0.0.1", port)).is_err());
    }
}
