//! Host-side evidence for the enforcement suites (`sandbox_linux`,
//! `sandbox_macos`) and their neighbours: what a command printed, what a
//! host listener received, what changed in a host directory, and the small
//! shell and process helpers they share. Every item here is used by
//! `sandbox_macos`, which compiles on every platform, so nothing is dead on
//! either.

use std::collections::BTreeMap;
use std::io::{ErrorKind, Read};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::util::{World, SECRET};

// ---------------------------------------------------------------------------
// What the command printed
// ---------------------------------------------------------------------------

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// stdout lines, without the `\r` a terminal adds.
pub fn lines(out: &Output) -> Vec<String> {
    stdout(out)
        .lines()
        .map(|l| l.trim_end_matches('\r').to_string())
        .collect()
}

/// stdout and stderr together, for messages.
pub fn both(out: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// With `SBX_TEST_SHOW=1`, print what a run printed, under `what`.
pub fn show(what: &str, out: &Output) {
    if std::env::var_os("SBX_TEST_SHOW").is_some() {
        eprintln!("=== {what}\n{}", both(out));
    }
}

/// Assert a line printed by the command (a positive control).
pub fn assert_line(out: &Output, line: &str) {
    assert!(
        lines(out).iter().any(|l| l == line),
        "expected the line {line:?}:\n{}",
        both(out)
    );
}

pub fn assert_no_line_starting(out: &Output, prefix: &str) {
    assert!(
        !lines(out).iter().any(|l| l.starts_with(prefix)),
        "unexpected line starting with {prefix:?}:\n{}",
        both(out)
    );
}

/// The planted secret must not appear anywhere in what the command printed.
pub fn assert_no_secret(out: &Output) {
    assert_absent(out, SECRET);
}

/// `text` must appear in neither stdout nor stderr.
pub fn assert_absent(out: &Output, text: &str) {
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!all.contains(text), "{text:?} leaked:\n{}", both(out));
}

// ---------------------------------------------------------------------------
// Shell words, names, tools, processes
// ---------------------------------------------------------------------------

/// Quote for `sh`.
pub fn shq(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

pub fn shq_path(p: &Path) -> String {
    shq(p.to_str().unwrap())
}

/// A string no other test (or earlier run) uses: `BASE.<pid><n>`, usable as
/// a `sleep` duration (so a process search finds only this test's
/// processes) and in file names.
pub fn unique(base: u32) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    format!("{base}.{}{n:03}", std::process::id())
}

/// A tool the test needs: the first of `candidates` that is a file. Missing:
/// skip, or fail when CI requires the sandbox tests to run.
pub fn tool<'a>(candidates: &[&'a str]) -> Option<&'a str> {
    if let Some(p) = candidates.iter().find(|p| Path::new(p).is_file()) {
        return Some(p);
    }
    if std::env::var_os("SBX_TEST_REQUIRE_SANDBOX").is_some_and(|v| v == "1") {
        panic!("SBX_TEST_REQUIRE_SANDBOX=1 but none of {candidates:?} is installed");
    }
    eprintln!("skipped: none of {candidates:?} is installed");
    None
}

/// SIGKILL each PID (cleanup after a failed check).
pub fn kill_all(pids: &[u32]) {
    for pid in pids {
        let _ = Command::new("/bin/sh")
            .args(["-c", &format!("kill -9 {pid}")])
            .stderr(Stdio::null())
            .status();
    }
}

/// A Python client for the sandbox: prints `PY-RAN` first (the control
/// that Python runs), checks that a stream socketpair works (`PAIR-OK`: the
/// filters are narrow), then connects to each Unix socket given (a leading
/// `@` means abstract, on Linux), sends `hi`, and prints `CONNECTED name` or
/// `REFUSED name errno`.
pub const PY_UNIX_CONNECT: &str = r#"
import socket, sys
print("PY-RAN", flush=True)
try:
    a, b = socket.socketpair()
    a.sendall(b"p")
    if b.recv(1) == b"p":
        print("PAIR-OK")
except OSError as e:
    print("PAIR-REFUSED", e.errno)
for name in sys.argv[1:]:
    addr = "\0" + name[1:] if name.startswith("@") else name
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(addr)
        s.sendall(b"hi")
        s.close()
        print("CONNECTED", name)
    except OSError as e:
        print("REFUSED", name, e.errno)
"#;

// ---------------------------------------------------------------------------
// Files on the host
// ---------------------------------------------------------------------------

/// Files under HOME that hold the planted secret (every credential file the
/// harness plants, plus the ones a test adds), as paths relative to HOME.
pub fn secret_files(world: &World) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![world.home.clone()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file()
                && std::fs::read_to_string(e.path()).is_ok_and(|s| s.contains(SECRET))
            {
                out.push(e.path().strip_prefix(&world.home).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    assert!(
        out.len() >= 10,
        "the harness planted fewer secrets than expected: {out:?}"
    );
    out
}

/// Every entry under `root` (not following symlinks): kind, mode and content.
/// A directory that cannot be listed (mode 000, or `root` itself missing) is
/// recorded as such, so its appearing or disappearing shows in a [`diff`].
pub fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut map = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            map.insert(
                dir.strip_prefix(root).unwrap().join("(unlistable)"),
                String::new(),
            );
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            let desc = if meta.file_type().is_symlink() {
                format!("link -> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                stack.push(path.clone());
                format!("dir {mode:o}")
            } else {
                match std::fs::read(&path) {
                    Ok(body) => format!("file {mode:o} {}", String::from_utf8_lossy(&body)),
                    Err(e) => format!("file {mode:o} (unreadable: {e})"),
                }
            };
            map.insert(rel, desc);
        }
    }
    map
}

/// Entries added, removed or changed between two snapshots.
pub fn diff(before: &BTreeMap<PathBuf, String>, after: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let mut out = Vec::new();
    for (p, d) in after {
        match before.get(p) {
            None => out.push(format!("+ {} ({d})", p.display())),
            Some(old) if old != d => out.push(format!("~ {} ({old} => {d})", p.display())),
            _ => {}
        }
    }
    for p in before.keys().filter(|p| !after.contains_key(*p)) {
        out.push(format!("- {}", p.display()));
    }
    out
}

// ---------------------------------------------------------------------------
// Host listeners
// ---------------------------------------------------------------------------

/// A loopback TCP listener that never blocks the test.
pub fn tcp_listener() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    (l, port)
}

/// A non-blocking Unix listener on a path (keep it short: `sun_path` holds
/// 108 bytes on Linux, 104 on macOS).
pub fn unix_listener(path: &Path) -> UnixListener {
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path).unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

/// A host Unix listener on a socket file, the file removed on drop.
pub struct SocketFile {
    pub path: PathBuf,
    pub listener: UnixListener,
}

impl SocketFile {
    /// A listener at `path` (see [`unix_listener`]).
    pub fn at(path: PathBuf) -> SocketFile {
        let listener = unix_listener(&path);
        SocketFile { path, listener }
    }

    /// A listener in `/tmp` (a writable root: only the network rules can
    /// keep a connect out).
    pub fn tmp(base: u32) -> SocketFile {
        SocketFile::at(PathBuf::from(format!("/tmp/sbx-{}.sock", unique(base))))
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// What a non-blocking TCP listener received, once the sandboxed command has
/// finished: a completed connection waits in the backlog even if never
/// accepted, so `None` after `grace` means nobody connected. `Some(bytes)`:
/// what the connection carried.
pub fn tcp_received(l: &TcpListener, grace: Duration) -> Option<Vec<u8>> {
    let blocking = |s: &TcpStream| {
        s.set_nonblocking(false)
            .and(s.set_read_timeout(READ_TIMEOUT))
    };
    received(grace, || l.accept().map(|(s, _)| s), blocking)
}

/// The same for a Unix listener.
pub fn unix_received(l: &UnixListener, grace: Duration) -> Option<Vec<u8>> {
    let blocking = |s: &UnixStream| {
        s.set_nonblocking(false)
            .and(s.set_read_timeout(READ_TIMEOUT))
    };
    received(grace, || l.accept().map(|(s, _)| s), blocking)
}

/// How long an accepted connection may stay silent before it counts as done.
const READ_TIMEOUT: Option<Duration> = Some(Duration::from_secs(2));

/// Poll `accept` (a non-blocking accept) until it yields a connection, or
/// `grace` has passed with nobody waiting; then make the connection
/// `blocking` (with a read timeout) and read it to its end.
///
/// The grace is no wait for an event: connect(2) has returned in a command
/// that has exited, so a connection it made is already in the backlog and a
/// check that expects one takes it at once. It is only the margin a check
/// that expects none gives a connection still on its way.
fn received<S: Read>(
    grace: Duration,
    accept: impl Fn() -> std::io::Result<S>,
    blocking: impl Fn(&S) -> std::io::Result<()>,
) -> Option<Vec<u8>> {
    let start = Instant::now();
    loop {
        match accept() {
            Ok(mut s) => {
                blocking(&s).unwrap();
                let mut buf = Vec::new();
                // Everything the peer sends until it closes (or the timeout).
                let _ = s.read_to_end(&mut buf);
                return Some(buf);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock && start.elapsed() < grace => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
            Err(e) => panic!("accept: {e}"),
        }
    }
}

/// Start `cmd` (stdin closed, output captured) and wait until `path`
/// exists, the command's sign that it is ready, up to the deadline.
pub fn started_until(mut cmd: Command, path: &Path) -> std::process::Child {
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !path.exists() && start.elapsed() < crate::util::DEADLINE {
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}
