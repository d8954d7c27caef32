//! Sixth review: the allowlist proxy.

use super::*;

/// PID 1 relays the proxy port to the proxy's Unix socket, and it is the one
/// process in the sandbox allowed Unix sockets. With `XDG_RUNTIME_DIR` in a
/// writable root, the command renamed the directory above the (read-only)
/// socket directory, put a link to a host socket at the old socket path, and
/// PID 1's next connection went to that host socket.
#[test]
fn proxy_relay_cannot_be_pointed_at_a_host_socket() {
    require_sandbox!();
    if util::contained() {
        // Reduced mode has no relay: the proxy listens on a loopback port
        // (see `reduced::the_allowlist_goes_through_the_proxy_only`).
        return;
    }
    let Some(python) = tool(&["/usr/bin/python3"]) else {
        return;
    };
    let world = World::new();
    let xdg = world.project.join("xdg");
    std::fs::create_dir(&xdg).unwrap();
    std::fs::set_permissions(&xdg, std::fs::Permissions::from_mode(0o700)).unwrap();
    let victim_path = world.root.join("victim.sock");
    let victim = crate::host::unix_listener(&victim_path);
    let script = format!(
        r#"SOCK=$(tr '\0' '\n' < /proc/1/cmdline | grep -m1 -A1 -- --proxy-socket | tail -1)
DIR=$(dirname "$SOCK"); BASE=$(dirname "$DIR")
mv "$BASE" "$BASE.moved" && echo MOVED
mkdir -p "$DIR" && ln -s "$1" "$SOCK" && echo LINKED
{python} -c '
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n")
print("ANSWER", s.recv(100).split(b"\r\n")[0].decode())
'"#
    );
    let mut cmd = world.sbx_std();
    cmd.env("XDG_RUNTIME_DIR", &xdg);
    sh_in(
        &mut cmd,
        &["--allow-domain", "127.0.0.1:9"],
        &script,
        &[victim_path.to_str().unwrap()],
    );
    let out = cmd.output().unwrap();
    show("relay", &out);
    let got = crate::host::unix_received(&victim, Duration::from_millis(500));
    assert!(
        got.is_none(),
        "the host socket received {got:?}:\n{}",
        both(&out)
    );
    // The relay still reaches the proxy, which wants its credential.
    assert!(
        stdout(&out).contains("ANSWER HTTP/1.1 407"),
        "{}",
        both(&out)
    );
}

/// With home writable, sbx's own cache directory (written by sbx itself:
/// the `.env` scan cache, the proxy directory) was taken for a "runs later"
/// path the command had replaced, and moved aside after every run.
#[test]
fn sbx_cache_and_host_edits_of_protected_dirs_are_not_swept() {
    require_sandbox!();
    let world = World::new();
    let home = world.home.to_str().unwrap().to_string();
    std::fs::create_dir_all(world.project.join(".vscode")).unwrap();
    std::fs::write(world.project.join(".vscode/settings.json"), "{}").unwrap();
    // The command waits (a minute at most) until the host (an editor, an
    // agent) has written into the protected, existing .vscode during the run.
    let mut cmd = world.sbx_std();
    cmd.env_remove("XDG_RUNTIME_DIR");
    sh_in(
        &mut cmd,
        &["--writable", &home, "--allow-domain", "127.0.0.1:9"],
        "echo up > up; i=0; while [ ! -e go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done",
        &[],
    );
    if util::contained() {
        // Reduced mode keeps its notes in sbx's cache, which no mount can
        // keep from a writable home: it refuses, and names the cache.
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(125), "{}", both(&out));
        assert!(stderr(&out).contains("cache directory"), "{}", both(&out));
        return;
    }
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_up(&world);
    std::fs::write(world.project.join(".vscode/extensions.json"), "{}").unwrap();
    std::fs::write(world.project.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    show("host edits", &out);
    assert!(out.status.success(), "{}", both(&out));
    assert!(!stderr(&out).contains("sbx-blocked"), "{}", both(&out));
    assert!(world.project.join(".vscode/extensions.json").exists());
    assert!(world.home.join(".cache/sbx").is_dir());
    // A second run finds the same.
    let out = sbx_sh(&world, &world.project, &["--writable", &home], "true", &[]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(!stderr(&out).contains("sbx-blocked"), "{}", both(&out));
    let blocked: Vec<_> = std::fs::read_dir(world.home.join(".cache"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().contains("sbx-blocked"))
        .collect();
    assert!(blocked.is_empty(), "{blocked:?}");
}
