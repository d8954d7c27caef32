//! `sbx __connect`: the client end of a CONNECT tunnel, on stdin and stdout.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};

use super::auth::base64_encode;

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
