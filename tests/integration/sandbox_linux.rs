//! The enforcement suite: real bubblewrap runs, each grant beside its denial.
//!
//! Every verdict rests on host-side evidence: does the file exist on the host
//! afterwards, did a host listener receive a connection, is a host file or
//! process unchanged. Exit codes alone prove nothing (a command can fail for
//! an unrelated reason), so each refusal runs beside a positive control that
//! shows the same kind of action works where it is allowed, and every
//! refusal that touches a credential also checks that the planted secret text
//! appears in neither stdout nor stderr.
//!
//! Tools used inside: sh, bash, git, unshare, `/usr/bin/python3` (for raw
//! syscalls and sockets) and `script` (for a terminal); `.ci/run` installs
//! them. `SBX_TEST_SHOW=1` prints every sandboxed run's output, to see why
//! a check holds.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::host::{
    assert_line, assert_no_line_starting, assert_no_secret, both, kill_all, secret_files, shq,
    shq_path, snapshot, started_until, stderr, stdout, tcp_listener, tcp_received, tool, unique,
    unix_listener, unix_received, SocketFile, PY_UNIX_CONNECT,
};
use crate::require_sandbox;
use crate::scenarios::{self, cat_each};
use crate::util::{self, Runner, Sbx, World, SECRET};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// `sbx run -- python3 -c CODE ARGS...`.
fn run_py(world: &World, code: &str, args: &[&str]) -> Output {
    let py = python();
    let mut argv = vec![py.to_str().unwrap(), "-c", code];
    argv.extend_from_slice(args);
    Sbx.run(world, &[], &argv, &[])
}

/// How a host process's command line (arguments joined by spaces) is matched.
#[derive(Clone, Copy)]
enum Match<'a> {
    /// The needle appears anywhere (where bubblewrap was not started ahead,
    /// its command line and the inner stage's contain the command too).
    Contains(&'a str),
    /// The whole command line is the needle.
    Exact(&'a str),
    /// Both needles appear.
    Both(&'a str, &'a str),
}

/// PIDs of host processes whose command line matches, read from `/proc` (so
/// the suite does not depend on procps being installed).
fn pgrep(m: Match) -> Vec<u32> {
    pgrep_with(|cmdline| match m {
        Match::Contains(n) => cmdline.contains(n),
        Match::Exact(n) => cmdline == n,
        Match::Both(a, b) => cmdline.contains(a) && cmdline.contains(b),
    })
}

/// PIDs of host processes whose command line (arguments joined by spaces)
/// `hit` accepts.
fn pgrep_with(hit: impl Fn(&str) -> bool) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw)
            .trim_end_matches('\0')
            .replace('\0', " ");
        if hit(&cmdline) {
            pids.push(pid);
        }
    }
    pids
}

/// The processes of the sandboxes started by the sbx at `sbx` (a world's
/// own, see `World::own_sbx_std`): bubblewrap and the inner stage, named by
/// that path whether or not their command lines hold the command
/// (bubblewrap started ahead reads it from a pipe). Not its guardian, which
/// outlives a killed sbx to make its checks, nor an `.env` watcher.
fn sandbox_processes(sbx: &Path) -> Vec<u32> {
    let sbx = sbx.to_str().unwrap();
    pgrep_with(|c| c.contains(sbx) && !c.contains(" __guard ") && !c.contains(" __watch "))
}

/// Whether the process `pid` has a child.
fn has_child(pid: u32) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read_to_string(e.path().join("stat"))
            .ok()
            // PID (COMM) STATE PPID ...: COMM may hold spaces and parentheses.
            .and_then(|stat| stat.rsplit_once(')').map(|(_, rest)| rest.to_string()))
            .and_then(|rest| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
            == Some(pid)
    })
}

/// Poll until `want(pids)` holds or `timeout` passes; the last PIDs.
fn pgrep_until(m: Match, timeout: Duration, want: impl Fn(&[u32]) -> bool) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let pids = pgrep(m);
        if want(&pids) || start.elapsed() > timeout {
            return pids;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How long a host listener waits for a connection that may still be in
/// flight once the sandboxed command has exited (a margin for a check that
/// expects none: see `host::received`).
const LISTEN_GRACE: Duration = Duration::from_millis(300);

/// Where the system Python is looked for (never a pyenv shim on PATH: it
/// needs the real HOME).
const PYTHONS: &[&str] = &["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"];

fn python() -> PathBuf {
    PathBuf::from(tool(PYTHONS).unwrap())
}

fn have_python() -> bool {
    tool(PYTHONS).is_some()
}

/// A Unix listener in the abstract namespace of the host's network namespace.
fn abstract_listener(name: &str) -> UnixListener {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let l = UnixListener::bind_addr(&addr).unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

// ---------------------------------------------------------------------------
// The tests, by topic
// ---------------------------------------------------------------------------

mod allowed;
mod env_watch;
mod files;
mod network;
mod processes;
mod seccomp;
mod toolchains;
mod unix_sockets;
