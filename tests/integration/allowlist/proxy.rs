//! The proxy itself: its socket on the host, and its robustness.

use super::*;

/// Start `sbx run --allow-domain SERVER -- sh -c 'SETUP; wait for go'`
/// (a minute at most; without `XDG_RUNTIME_DIR`), wait until the command
/// has made `ready` in the project, run `checks` while it runs, then let it
/// finish; its status. A failed check still ends the run first.
fn during_a_run(
    world: &World,
    server: &Server,
    setup: &str,
    ready: &str,
    checks: impl FnOnce(),
) -> std::process::ExitStatus {
    let mut cmd = world.sbx_std();
    cmd.env_remove("XDG_RUNTIME_DIR")
        .args(["run", "--allow-domain", &server.addr(), "--", "sh", "-c"])
        .arg(format!(
            "{setup}; i=0; while [ ! -e go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done"
        ))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while !world.project.join(ready).exists() {
        if start.elapsed() > DEADLINE || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            panic!("the sandboxed command did not start");
        }
        thread::sleep(Duration::from_millis(20));
    }
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(checks));
    util::write(&world.project.join("go"), "");
    let deadline = Instant::now() + DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("sbx did not finish after the command was told to");
        }
        thread::sleep(Duration::from_millis(20));
    };
    if let Err(e) = result {
        std::panic::resume_unwind(e);
    }
    status
}

/// Send a `CONNECT` to the server without the proxy credential on `stream`
/// (which has a read timeout) and return everything that comes back.
fn ask_without_credential<S: Read + Write>(mut stream: S, server: &Server) -> String {
    let t = server.addr();
    let _ = write!(stream, "CONNECT {t} HTTP/1.1\r\nHost: {t}\r\n\r\n");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

/// The per-run proxy directories under sbx's cache directory (where they go
/// without `XDG_RUNTIME_DIR`, which the test removes).
#[cfg(target_os = "linux")]
fn proxy_dirs(world: &World) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(world.home.join(".cache/sbx")) else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("sbx-proxy-"))
        })
        .collect()
}

#[cfg(target_os = "linux")]
#[test]
fn the_proxy_socket_is_private_and_gone_after_the_run() {
    require_sandbox!();
    // Reduced mode's proxy listens on a loopback port: there is no socket
    // (see `reduced::the_allowlist_goes_through_the_proxy_only`).
    if !have_tools() || crate::util::contained() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let status = during_a_run(&world, &server, "echo READY > ready", "ready", || {
        let dirs = proxy_dirs(&world);
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        let mode = std::fs::metadata(&dirs[0]).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dirs[0].display());
        let sock = dirs[0].join("proxy.sock");
        assert!(std::fs::metadata(&sock).unwrap().file_type().is_socket());
        // Even from the host, the socket serves nobody without the credential.
        let s = UnixStream::connect(&sock).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let answer = ask_without_credential(s, &server);
        assert!(answer.starts_with("HTTP/1.1 407 "), "{answer:?}");
    });
    assert!(status.success(), "{status:?}");
    assert_eq!(proxy_dirs(&world), Vec::<PathBuf>::new());
    server.assert_untouched(&Output {
        status,
        stdout: Vec::new(),
        stderr: Vec::new(),
    });
}

// ---------------------------------------------------------------------------
// Robustness
// ---------------------------------------------------------------------------

#[test]
fn blocked_lines_on_stderr_are_escaped() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let t = server.addr();
    // U+202E (right-to-left override) and U+009B (the 8-bit CSI) would
    // rewrite what the user sees in the terminal.
    let reqs = [
        format!("CONNECT evil\u{202e}.example:443 HTTP/1.1\r\n{AUTH}\r\n"),
        format!("CONNECT evil\u{9b}31m.example:443 HTTP/1.1\r\n{AUTH}\r\n"),
        format!("GET http://{t}/ HTTP/1.1\r\nHost: evil\u{202e}.example\r\n{AUTH}\r\n"),
    ];
    let args: Vec<&str> = reqs.iter().map(String::as_str).collect();
    let out = sbx_py(&world, &["--allow-domain", &t], PY_RAW, &args);
    for (i, req) in reqs.iter().enumerate() {
        let status = raw_status(&out, i);
        assert!(
            status == "403" || status == "400",
            "{req:?} got {status}:\n{}",
            both(&out)
        );
    }
    let err = &out.stderr;
    for bad in ["\u{202e}", "\u{9b}", "\x1b"] {
        assert!(
            !err.windows(bad.len()).any(|w| w == bad.as_bytes()),
            "{bad:?} reached sbx's stderr raw:\n{}",
            both(&out)
        );
    }
    assert!(
        stderr(&out).contains("sbx: blocked CONNECT evil\\u{202e}.example:443 ("),
        "{}",
        both(&out)
    );
    server.assert_untouched(&out);
}

#[test]
fn a_tunnel_left_open_does_not_keep_sbx_running() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    // The echo server sends nothing unless sent something: the tunnel idles.
    let echo = Server::start("127.0.0.1", Kind::Echo);
    let py = r#"
import base64, os, socket, sys, time, urllib.parse
u = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
cred = base64.b64encode(f"{u.username}:{u.password}".encode()).decode()
s = socket.create_connection((u.hostname, u.port))
s.sendall(("CONNECT %s HTTP/1.1\r\nProxy-Authorization: Basic %s\r\n\r\n" % (sys.argv[1], cred)).encode())
print(s.recv(4096).split(b"\r\n")[0].decode(), flush=True)
time.sleep(600)
"#;
    // On macOS the background client outlives sbx (nothing ties it to the
    // command there): its output goes to a file, and it is killed at the end
    // by the unique argument it carries.
    let tag = format!("sbx-tunnel-{}", std::process::id());
    let script = format!(
        "{PYTHON} -c {} {} {tag} > tunnel.out 2>&1 < /dev/null &\n\
         i=0; while ! grep -q ' 200 ' tunnel.out && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done\n\
         cat tunnel.out\n",
        shq(py),
        shq(&echo.addr())
    );
    struct KillTagged(String);
    impl Drop for KillTagged {
        fn drop(&mut self) {
            let _ = std::process::Command::new("pkill")
                .args(["-f", &self.0])
                .status();
        }
    }
    let _cleanup = KillTagged(tag.clone());
    let start = Instant::now();
    let out = sbx_sh(&world, &["--allow-domain", &echo.addr()], &script);
    let elapsed = start.elapsed();
    assert_success(&out);
    assert_line(&out, "HTTP/1.1 200 Connection established");
    assert!(
        elapsed < Duration::from_secs(30),
        "sbx took {elapsed:?} with a tunnel left open:\n{}",
        both(&out)
    );
    assert_eq!(echo.connections(), 1);
    // The upstream side of the tunnel was closed too.
    let deadline = Instant::now() + DEADLINE;
    while echo.received().is_empty() && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(echo.received(), vec![Vec::<u8>::new()]);
}

#[test]
fn every_run_ends_when_its_command_does() {
    require_sandbox!();
    // PID 1 runs the relay thread beside the one that waits for the command:
    // a SIGCHLD taken by the relay thread would be lost, and sbx would wait
    // forever for a command that has long exited (an earlier build did so in
    // about two runs out of three). Commands that exit at once and a little
    // later, many times over.
    let world = World::new();
    for i in 0..12 {
        let script = if i % 2 == 0 {
            "exit 3"
        } else {
            "sleep 0.2; exit 3"
        };
        let out = sbx_run(
            &world,
            &["--allow-domain", "127.0.0.1:1"],
            &["sh", "-c", script],
        );
        assert_eq!(out.status.code(), Some(3), "run {i}:\n{}", both(&out));
    }
}

#[cfg(target_os = "macos")]
#[test]
fn the_proxy_port_serves_nobody_without_the_credential_and_closes_after_the_run() {
    require_sandbox!();
    if !have_tools() {
        return;
    }
    let world = World::new();
    let server = Server::start("127.0.0.1", Kind::Http);
    let port_file = world.project.join("port");
    let port = std::cell::Cell::new(0u16);
    let status = during_a_run(
        &world,
        &server,
        "echo \"${HTTP_PROXY##*:}\" > port.tmp && mv port.tmp port",
        "port",
        || {
            port.set(
                std::fs::read_to_string(&port_file)
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap(),
            );
            // From the host, the port answers only with 407 without the
            // credential.
            let s = TcpStream::connect(("127.0.0.1", port.get())).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            let answer = ask_without_credential(s, &server);
            assert!(answer.starts_with("HTTP/1.1 407 "), "{answer:?}");
            assert_eq!(server.connections(), 0);
        },
    );
    assert!(status.success(), "{status:?}");
    let port = port.get();
    // The proxy lived as long as the command, and no longer (a parallel
    // test's listener may have taken the freed port since: it is no proxy).
    if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let answer = ask_without_credential(s, &server);
        assert!(!answer.starts_with("HTTP/1.1 407 "), "{answer:?}");
    }
}
