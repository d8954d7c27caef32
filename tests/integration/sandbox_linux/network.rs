//! Network: the host's loopback and Unix sockets, denied and allowed.

use super::*;

fn tcp_probe_script(port: u16) -> String {
    format!(
        "bash -c 'echo hi-bash > /dev/tcp/127.0.0.1/{port}' && echo BASH-CONNECTED
         {py} -c 'import socket; s = socket.create_connection((\"127.0.0.1\", {port}), timeout=2); s.sendall(b\"hi-py\"); s.close()' && echo PY-CONNECTED
         echo RAN",
        py = shq_path(&python())
    )
}

#[test]
fn host_loopback_is_unreachable() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    let (listener, port) = tcp_listener();
    let out = Sbx.run_sh(&world, &tcp_probe_script(port));
    assert_line(&out, "RAN");
    let got = tcp_received(&listener, LISTEN_GRACE);
    assert!(
        got.is_none(),
        "the host listener received {got:?}:\n{}",
        both(&out)
    );
    assert_no_line_starting(&out, "BASH-CONNECTED");
    assert_no_line_starting(&out, "PY-CONNECTED");
}

#[test]
fn network_allow_reaches_host_loopback() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    world.user_config("[sandbox]\nnetwork = \"allow\"\n");
    let (listener, port) = tcp_listener();
    let out = Sbx.run_sh(
        &world,
        &format!("bash -c 'echo hi-bash > /dev/tcp/127.0.0.1/{port}' && echo BASH-CONNECTED"),
    );
    let got = tcp_received(&listener, LISTEN_GRACE);
    assert_eq!(got.as_deref(), Some(&b"hi-bash\n"[..]), "{}", both(&out));
    assert_line(&out, "BASH-CONNECTED");
}

struct UnixSockets {
    in_project: (PathBuf, UnixListener),
    in_tmp: (PathBuf, UnixListener),
    abstract_name: String,
    abstract_l: UnixListener,
}

impl UnixSockets {
    fn new(world: &World) -> UnixSockets {
        let p = world.project.join("sub/agent.sock");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let lp = unix_listener(&p);
        let t = PathBuf::from(format!("/tmp/sbx-test-{}.sock", unique(2)));
        let lt = unix_listener(&t);
        let name = format!("sbx-test-{}", unique(3));
        let la = abstract_listener(&name);
        UnixSockets {
            in_project: (p, lp),
            in_tmp: (t, lt),
            abstract_name: name,
            abstract_l: la,
        }
    }

    fn args(&self) -> Vec<String> {
        vec![
            self.in_project.0.to_str().unwrap().to_string(),
            self.in_tmp.0.to_str().unwrap().to_string(),
            format!("@{}", self.abstract_name),
        ]
    }
}

impl Drop for UnixSockets {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.in_tmp.0);
    }
}

/// `unix_sockets = "deny"` in the user's config: no Unix socket at all
/// (the defaults' own sockets: `unix_sockets.rs`).
#[test]
fn host_unix_sockets_are_unreachable() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    world.user_config("[sandbox]\nunix_sockets = \"deny\"\n");
    let socks = UnixSockets::new(&world);
    let args = socks.args();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_py(&world, PY_UNIX_CONNECT, &argv);
    // Positive control: Python ran and a stream socketpair works.
    assert_line(&out, "PAIR-OK");
    assert_no_line_starting(&out, "CONNECTED");
    for (name, l) in [
        ("project", &socks.in_project.1),
        ("/tmp", &socks.in_tmp.1),
        ("abstract", &socks.abstract_l),
    ] {
        let got = unix_received(l, LISTEN_GRACE);
        assert!(
            got.is_none(),
            "the {name} socket received {got:?}:\n{}",
            both(&out)
        );
    }
    // The refusal is the filter's (EPERM), not a missing path.
    for a in &args {
        assert_line(&out, &format!("REFUSED {a} 1"));
    }
}

/// With `unix_sockets = "allow"` path sockets connect. The abstract one stays
/// unreachable: abstract names belong to a network namespace, and the
/// sandbox has its own.
#[test]
fn unix_sockets_allow_connects_path_sockets_only() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    world.user_config("[sandbox]\nunix_sockets = \"allow\"\n");
    let socks = UnixSockets::new(&world);
    let args = socks.args();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_py(&world, PY_UNIX_CONNECT, &argv);
    assert_line(&out, &format!("CONNECTED {}", args[0]));
    assert_line(&out, &format!("CONNECTED {}", args[1]));
    assert_eq!(
        unix_received(&socks.in_project.1, LISTEN_GRACE).as_deref(),
        Some(&b"hi"[..]),
        "{}",
        both(&out)
    );
    assert_eq!(
        unix_received(&socks.in_tmp.1, LISTEN_GRACE).as_deref(),
        Some(&b"hi"[..]),
        "{}",
        both(&out)
    );
    // The abstract socket: the network namespace keeps it out of reach.
    assert!(
        unix_received(&socks.abstract_l, LISTEN_GRACE).is_none(),
        "{}",
        both(&out)
    );
    assert_no_line_starting(&out, &format!("CONNECTED {}", args[2]));
}

/// With the network denied, a package manager fails in seconds, not in a
/// minute or more (npm retried for 70 s here), and sbx says what blocked
/// it and the flag that opens it. A command that fails without touching
/// the network gets no such line.
#[test]
fn a_denied_network_fails_fast_and_says_so() {
    require_sandbox!();
    let Some(npm) = crate::host::tool(&["/usr/bin/npm"]) else {
        return;
    };
    let world = World::new();
    crate::util::write(
        &world.project.join("package.json"),
        r#"{"name":"t","version":"1.0.0","dependencies":{"left-pad":"1.3.0"}}"#,
    );
    let start = Instant::now();
    let out = Sbx.run_sh(
        &world,
        &format!("{} install --no-audit --no-fund", shq_path(Path::new(npm))),
    );
    let took = start.elapsed();
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        took < Duration::from_secs(10),
        "took {took:?}: {}",
        both(&out)
    );
    // Reduced mode fails as fast (no socket at all), but has no network
    // namespace whose counters show that the command tried: no hint line.
    if crate::util::contained() {
        return;
    }
    assert!(
        crate::host::stderr(&out).contains("the network is denied")
            && crate::host::stderr(&out).contains("--network allow"),
        "{}",
        both(&out)
    );
    let out = Sbx.run_sh(&world, "echo no network here >&2; exit 3");
    assert_eq!(out.status.code(), Some(3), "{}", both(&out));
    assert!(
        !crate::host::stderr(&out).contains("the network is denied"),
        "{}",
        both(&out)
    );
}
