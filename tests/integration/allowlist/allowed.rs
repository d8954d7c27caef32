//! What the allowlist lets through, and how it is configured.

use super::*;

#[test]
fn plain_http_reaches_a_listed_server_without_the_credential() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let url = server.url("/some/path?q=1");
    let out = sbx_sh(
        &world,
        &["--allow-domain", &server.addr()],
        &curl_script(&[("plain", &[&url])]),
    );
    assert_success(&out);
    assert_reached(&world, &out, "plain");
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    let req = &requests[0];
    // Forwarded in origin form, with its own Host header, and the proxy
    // credential stays with the proxy.
    assert!(
        req.starts_with("GET /some/path?q=1 HTTP/1.1\r\n"),
        "{req:?}"
    );
    assert!(
        req.contains(&format!("\r\nHost: {}\r\n", server.addr())),
        "{req:?}"
    );
    assert!(
        !req.to_ascii_lowercase().contains("proxy-authorization"),
        "the credential reached the upstream: {req:?}"
    );
    assert_eq!(server.connections(), 1);
}

#[test]
fn connect_tunnel_reaches_a_listed_server() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let url = server.url("/tunnelled");
    let out = sbx_sh(
        &world,
        &["--allow-domain", &server.addr()],
        &curl_script(&[("tunnel", &["--proxytunnel", &url])]),
    );
    assert_success(&out);
    assert_reached(&world, &out, "tunnel");
    let r = curl_result(&world, &out, "tunnel");
    assert_eq!(r.connect, "200", "{r:?}");
    // Through a tunnel the server sees exactly what curl sent: an
    // origin-form request, and nothing meant for the proxy.
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{requests:?}");
    assert!(
        requests[0].starts_with("GET /tunnelled HTTP/1.1\r\n"),
        "{requests:?}"
    );
    assert!(
        !requests[0].to_ascii_lowercase().contains("proxy-"),
        "{requests:?}"
    );
}

#[test]
fn connect_tunnel_carries_megabytes_intact_both_ways() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let echo = Server::start("127.0.0.1", Kind::Echo);
    let data = payload(8 << 20);
    std::fs::write(world.project.join("payload.bin"), &data).unwrap();
    let out = sbx_py(
        &world,
        &["--allow-domain", &echo.addr()],
        PY_TUNNEL,
        &[&echo.addr(), "payload.bin", "echoed.bin"],
    );
    assert_success(&out);
    assert_line(&out, "HTTP/1.1 200 Connection established");
    // Up: the host server received the payload byte for byte.
    let received = echo.received();
    assert_eq!(received.len(), 1, "{} connections", received.len());
    assert!(
        received[0] == data,
        "the server received {} bytes, not the {} sent (or other bytes):\n{}",
        received[0].len(),
        data.len(),
        both(&out)
    );
    // Down: the client got it all back, byte for byte.
    let back = std::fs::read(world.project.join("echoed.bin")).unwrap();
    assert!(
        back == data,
        "the client got {} bytes back, not {}:\n{}",
        back.len(),
        data.len(),
        both(&out)
    );
    // And the client's own hashes agree.
    let text = stdout(&out);
    let sent = text.lines().find_map(|l| l.strip_prefix("sent "));
    let got = text.lines().find_map(|l| l.strip_prefix("back "));
    assert!(sent.is_some() && sent == got, "{}", both(&out));
    assert!(sent.unwrap().starts_with(&format!("{} ", data.len())));
}

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

#[test]
fn user_config_allowlist_works_like_the_flag() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let listed = Server::start("127.0.0.1", Kind::Http);
    let other = Server::start("127.0.0.1", Kind::Http);
    world.user_config(&format!(
        "[sandbox]\nnetwork = \"allowlist\"\nnetwork_allowlist = [\"{}\"]\n",
        listed.addr()
    ));
    let out = sbx_sh(
        &world,
        &[],
        &curl_script(&[
            ("plain", &[&listed.url("/plain")]),
            ("tunnel", &["-p", &listed.url("/tunnel")]),
            ("other", &[&other.url("/")]),
            ("other_tunnel", &["-p", &other.url("/")]),
        ]),
    );
    assert_success(&out);
    assert_reached(&world, &out, "plain");
    assert_reached(&world, &out, "tunnel");
    assert_eq!(curl_result(&world, &out, "other").code, "403");
    assert_eq!(curl_result(&world, &out, "other_tunnel").connect, "403");
    assert_blocked(
        &out,
        &format!(
            "sbx: blocked CONNECT {} (not in network_allowlist)",
            other.addr()
        ),
    );
    assert_eq!(listed.connections(), 2);
    other.assert_untouched(&out);
}

#[test]
fn a_project_file_cannot_widen_the_allowlist() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let listed = Server::start("127.0.0.1", Kind::Http);
    let added = Server::start("127.0.0.1", Kind::Http);
    world.user_config(&format!(
        "[sandbox]\nnetwork = \"allowlist\"\nnetwork_allowlist = [\"{}\"]\n",
        listed.addr()
    ));
    util::write(
        &world.project.join(".sbx.toml"),
        &format!(
            "[sandbox]\nnetwork_allowlist = [\"{}\", \"{}\"]\n",
            listed.addr(),
            added.addr()
        ),
    );
    let out = sbx_sh(
        &world,
        &[],
        &curl_script(&[
            ("listed", &[&listed.url("/")]),
            ("added", &[&added.url("/")]),
            ("added_tunnel", &["-p", &added.url("/")]),
        ]),
    );
    assert_reached(&world, &out, "listed");
    assert_eq!(
        curl_result(&world, &out, "added").code,
        "403",
        "{}",
        both(&out)
    );
    assert_eq!(
        curl_result(&world, &out, "added_tunnel").connect,
        "403",
        "{}",
        both(&out)
    );
    let warning = format!(
        "ignored `network_allowlist = [\"{}\"]`: the host is not in your own allowlist",
        added.addr()
    );
    assert!(stderr(&out).contains(&warning), "{}", both(&out));
    assert!(stderr(&out).contains(".sbx.toml"), "{}", both(&out));
    added.assert_untouched(&out);
    assert_eq!(listed.connections(), 1);
}

#[cfg(target_os = "linux")]
#[test]
fn check_reports_the_network_enforced_in_allowlist_mode() {
    require_sandbox!();
    let world = World::new();
    let out = sbx(&world, &["check", "--allow-domain", "127.0.0.1:1"]);
    assert_success(&out);
    let text = stdout(&out);
    assert!(
        text.contains("network allowlist (1 hosts, via proxy)"),
        "{}",
        both(&out)
    );
    assert!(
        text.lines()
            .any(|l| l.ends_with("network to the host's loopback: enforced")),
        "{}",
        both(&out)
    );
    // (Limits have lines of their own: as root the process cap is not
    // enforced, which is said, and is not what this test is about. Reduced
    // mode's unenforced items too, among them the proxy port's reach.)
    if crate::util::contained() {
        assert!(
            text.lines()
                .any(|l| l.starts_with("reduced:") && l.contains("proxy's port")),
            "{}",
            both(&out)
        );
    }
    let said_elsewhere = |l: &str| {
        l.starts_with("limit:")
            || l.starts_with("reduced:")
            || (crate::util::contained() && l.starts_with("result:   reduced mode"))
    };
    assert!(
        !text
            .lines()
            .any(|l| !said_elsewhere(l) && l.contains("NOT enforced")),
        "{}",
        both(&out)
    );
}
