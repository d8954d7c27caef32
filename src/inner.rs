//! The second stage on Linux: `sbx __inner`, run by bubblewrap as PID 1 of the
//! sandbox.
//!
//! bubblewrap builds the filesystem view and the namespaces; this stage makes
//! sure nothing is left that the command could use to step outside them:
//!
//! 1. it checks that no capability survived (`--cap-drop ALL`), and refuses to
//!    run the command otherwise;
//! 2. it sets `PR_SET_NO_NEW_PRIVS` (no setuid gains) and `PR_SET_DUMPABLE=0`
//!    (the command cannot ptrace it or write its `/proc/1/mem`);
//! 3. it closes every inherited descriptor above 2, so a socket or file that
//!    the caller left open cannot cross the sandbox boundary;
//! 4. it installs the seccomp filter on itself, tells the outer stage that
//!    the sandbox is up, and forks the command, which inherits the filter:
//!    no process in the sandbox is ever without it;
//! 5. it stays as PID 1: reaps orphans, forwards signals sent to it, and exits
//!    with the command's status (128+N for signal N). When it exits the kernel
//!    kills everything left in the sandbox.
//!
//! bubblewrap's own init is not used (`--as-pid-1`): it carries no seccomp
//! filter and stays ptrace-able by the sandboxed command.

use std::convert::Infallible;
use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;

use anyhow::{bail, Context, Result};
use nix::sys::signal::{SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::unistd::{execvp, ForkResult, Pid};

use crate::seccomp;

/// Run the second stage. Returns only on failure; on success the process exits
/// with the command's status.
///
/// `ready_fd`, when given, is a pipe to the outer stage: one byte is written
/// to it once every check has passed, so the outer stage can tell "the sandbox
/// could not start" (it may then diagnose, refuse or fall back) from "the
/// command ran and failed" (never a reason to run anything again).
pub fn run(
    command: &[OsString],
    opts: seccomp::Options,
    ready_fd: Option<i32>,
) -> Result<Infallible> {
    check_no_capabilities()?;
    nix::sys::prctl::set_no_new_privs().context("setting PR_SET_NO_NEW_PRIVS")?;
    nix::sys::prctl::set_dumpable(false).context("setting PR_SET_DUMPABLE")?;
    // Build everything the child needs before forking, so the child only
    // installs the filter and execs.
    let programs = seccomp::programs(opts)?;
    let argv = command
        .iter()
        .map(|a| CString::new(a.as_bytes()).context("an argument contains a NUL byte"))
        .collect::<Result<Vec<_>>>()?;
    let Some(program) = argv.first().cloned() else {
        bail!("no command given to the inner stage");
    };
    // The filter is installed here, in PID 1, and inherited by the command:
    // no process in the sandbox is ever without it.
    seccomp::apply(&programs)?;
    if let Some(fd) = ready_fd {
        // Best effort: a pasted `sbx profile` command line has no such pipe.
        // Reopening the pipe through /proc avoids adopting a raw descriptor.
        if let Ok(mut pipe) = std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/self/fd/{fd}"))
        {
            let _ = std::io::Write::write_all(&mut pipe, b"1");
        }
    }
    close_inherited_fds()?;

    let mut blocked = SigSet::all();
    blocked.remove(Signal::SIGKILL);
    blocked.remove(Signal::SIGSTOP);
    blocked.thread_block().context("blocking signals")?;
    let signals =
        SignalFd::with_flags(&blocked, SfdFlags::SFD_CLOEXEC).context("creating a signalfd")?;

    // SAFETY: the inner stage is single-threaded (it starts no thread, and
    // std starts none on its own), so the child of `fork` is a full copy of a
    // single-threaded process and may run any code, allocation included.
    #[allow(unsafe_code)]
    let fork = unsafe { nix::unistd::fork() }.context("forking the command")?;
    match fork {
        ForkResult::Child => {
            drop(signals);
            let code = exec_command(&program, &argv);
            std::process::exit(code);
        }
        ForkResult::Parent { child } => supervise(child, &signals),
    }
}

/// In the child: restore the signal mask and exec (the filter is inherited).
/// Returns the exit status to use when exec fails.
fn exec_command(program: &CString, argv: &[CString]) -> i32 {
    if let Err(e) = SigSet::empty().thread_set_mask() {
        eprintln!("sbx: error: restoring the signal mask: {e}");
        return 125;
    }
    let err = match execvp(program, argv) {
        Ok(never) => match never {},
        Err(e) => e,
    };
    let name = program.to_string_lossy();
    match err {
        nix::errno::Errno::ENOENT => {
            eprintln!("sbx: {name}: command not found inside the sandbox");
            127
        }
        other => {
            eprintln!("sbx: {name}: cannot execute: {}", other.desc());
            126
        }
    }
}

/// PID 1: reap every child, forward signals sent to us, exit with the
/// command's status.
fn supervise(child: Pid, signals: &SignalFd) -> Result<Infallible> {
    let code = crate::supervise::wait_forwarding(child, signals, true)?;
    std::process::exit(code)
}

/// Refuse to go on if any capability survived bubblewrap's `--cap-drop ALL`.
fn check_no_capabilities() -> Result<()> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    for line in status.lines() {
        for field in ["CapInh:", "CapPrm:", "CapEff:", "CapAmb:"] {
            if let Some(value) = line.strip_prefix(field) {
                let value = u64::from_str_radix(value.trim(), 16)
                    .with_context(|| format!("parsing {field} in /proc/self/status"))?;
                if value != 0 {
                    bail!(
                        "the sandbox still holds capabilities ({field} {value:#x}); the command was not run (is the bubblewrap in use patched or too old?)"
                    );
                }
            }
        }
    }
    Ok(())
}

/// Close every descriptor above 2.
fn close_inherited_fds() -> Result<()> {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .context("listing /proc/self/fd")?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        match nix::unistd::close(fd) {
            Ok(()) | Err(nix::errno::Errno::EBADF) => {}
            Err(e) => return Err(e).with_context(|| format!("closing inherited descriptor {fd}")),
        }
    }
    Ok(())
}
