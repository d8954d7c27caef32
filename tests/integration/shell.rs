//! Shell mode as clients use it: agents and editors set `SHELL` to sbx and
//! run `$SHELL -c CMD`, `$SHELL -lc CMD`, a script on stdin, or an
//! interactive login shell in a terminal. sbx must then behave exactly like
//! bash (stdin, stdout, stderr, exit status), only sandboxed.
//!
//! Where it can, each test compares sbx with `/bin/bash` (the default inner
//! shell, so `$0` and bash's own messages are spelt the same) run directly on
//! the host with the same environment, working directory and stdin.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use crate::host::{both, shq, shq_path};
use crate::require_sandbox;
use crate::util::{self, sbx_path, World, DEADLINE, SECRET};

/// The inner shell sbx runs by default, used as the reference.
const BASH: &str = "/bin/bash";

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// `program` with exactly the World's environment and working directory (the
/// ones `World::sbx_std` uses), plus `SHELL` naming sbx, as a client that
/// uses sbx as its shell has it.
fn client(world: &World, program: impl AsRef<OsStr>) -> Command {
    let mut cmd = world.host_cmd(program);
    cmd.env("SHELL", sbx_path());
    cmd
}

/// `$SHELL ARGS...` with `SHELL` naming sbx.
fn sbx(world: &World, args: &[&str]) -> Command {
    let mut cmd = client(world, sbx_path());
    cmd.args(args);
    cmd
}

/// The same arguments given to bash directly, outside the sandbox.
fn bash(world: &World, args: &[&str]) -> Command {
    let mut cmd = client(world, BASH);
    cmd.args(args);
    cmd
}

/// `/bin/sh -c SCRIPT` on the host, for scripts that run `"$SHELL"` exactly
/// as a client's own shell code would.
fn host_sh(world: &World, script: &str) -> Command {
    let mut cmd = client(world, "/bin/sh");
    cmd.arg("-c").arg(script);
    cmd
}

/// Run to completion with `stdin` (closed when `None`), capturing stdout and
/// stderr; panic if it takes longer than `DEADLINE`.
fn output(cmd: Command, stdin: Option<&[u8]>) -> Output {
    output_within(cmd, stdin, DEADLINE)
}

/// The same with a deadline of `limit`.
fn output_within(mut cmd: Command, stdin: Option<&[u8]>, limit: Duration) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let shown = format!("{cmd:?}");
    let mut child = cmd.spawn().unwrap();
    let input = stdin.map(<[u8]>::to_vec);
    let pipe = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let (Some(mut pipe), Some(data)) = (pipe, input) {
            // The command may exit without reading everything.
            let _ = pipe.write_all(&data);
        }
    });
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let status = wait_within(&mut child, limit)
        .unwrap_or_else(|| panic!("{shown} did not finish within {limit:?}"));
    writer.join().unwrap();
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Wait for `child` at most `limit`; on timeout kill it and return `None`.
fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The status as a calling shell reports it in `$?`: the exit code, or
/// 128+N for a process killed by signal N. (sbx reports a command killed by
/// signal N as exit code 128+N, by design; bash itself dies of the signal.)
fn shell_status(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A host tool the test needs; `None` (and a note) when it is missing, so the
/// test is skipped rather than failed on a machine without it.
/// A tool the test needs: skipped loudly when missing, and a failure when
/// SBX_TEST_REQUIRE_SANDBOX=1 (CI installs every one of them).
fn tool(path: &str) -> Option<PathBuf> {
    crate::host::tool(&[path]).map(PathBuf::from)
}

/// A number no other test in this run uses, to tell our processes apart:
/// [`unique`](crate::host::unique) without its dot, so that, as a `sleep`
/// duration, it outlasts the test.
fn unique(base: u32) -> String {
    crate::host::unique(base).replace('.', "")
}

/// Host PIDs of processes whose argv is exactly `argv`.
fn pids_with_argv(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if std::fs::read(entry.path().join("cmdline")).is_ok_and(|c| c == want) {
            found.push(pid);
        }
    }
    found
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// Poll `probe` until it returns `Some`, at most `limit`.
fn poll<T>(limit: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = probe() {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills a spawned process on drop, so a failing test leaves nothing behind
/// (sbx runs bubblewrap with `--die-with-parent`: the sandbox goes with it).
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------
// The tests, by topic
// ---------------------------------------------------------------------------

mod clients;
mod invocations;
mod like_bash;
mod terminals;
