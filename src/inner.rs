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
//! 4. it forks the command, which installs the seccomp filter on itself and
//!    `exec`s: no process without the filter remains reachable by it;
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
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::{SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::{execvp, ForkResult, Pid};

use crate::seccomp;

/// Run the second stage. Returns only on failure; on success the process exits
/// with the command's status.
pub fn run(command: &[OsString], opts: seccomp::Options) -> Result<Infallible> {
    check_no_capabilities()?;
    nix::sys::prctl::set_no_new_privs().context("setting PR_SET_NO_NEW_PRIVS")?;
    nix::sys::prctl::set_dumpable(false).context("setting PR_SET_DUMPABLE")?;
    close_inherited_fds()?;
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
            let code = exec_filtered(&program, &argv, &programs);
            std::process::exit(code);
        }
        ForkResult::Parent { child } => supervise(child, &signals),
    }
}

/// In the child: unblock signals, install the filter, exec. Returns the exit
/// status to use when exec fails.
fn exec_filtered(program: &CString, argv: &[CString], programs: &[seccompiler::BpfProgram]) -> i32 {
    if let Err(e) = SigSet::empty().thread_set_mask() {
        eprintln!("sbx: error: restoring the signal mask: {e}");
        return 125;
    }
    if let Err(e) = seccomp::apply(programs) {
        eprintln!("sbx: error: {e:#}; the command was not run");
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
    let code = wait_forwarding(child, signals, true)?;
    std::process::exit(code)
}

/// Wait for `child` while forwarding to it the signals a process sent us
/// (the signals in `signals` must be blocked). With `reap_all`, also reap
/// every other child (PID 1 inherits orphans). Returns the exit status to
/// report: the child's code, or 128+N when signal N killed it.
pub fn wait_forwarding(child: Pid, signals: &SignalFd, reap_all: bool) -> Result<i32> {
    loop {
        let Some(info) = signals.read_signal().context("reading the signalfd")? else {
            continue;
        };
        let signo = info.ssi_signo as i32;
        if signo == Signal::SIGCHLD as i32 {
            let target = if reap_all { None } else { Some(child) };
            loop {
                match waitpid(target, Some(WaitPidFlag::WNOHANG)) {
                    Ok(WaitStatus::Exited(pid, code)) if pid == child => return Ok(code),
                    Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                        return Ok(128 + sig as i32)
                    }
                    Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::ECHILD) => break,
                    Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => return Err(e).context("waiting for the command"),
                }
            }
            continue;
        }
        // Signals a terminal sends (Ctrl-C, Ctrl-\, window size) reach the
        // command's process group directly; forwarding them would deliver
        // them twice. Only signals sent to us by a process are forwarded.
        const SI_KERNEL: i32 = 0x80;
        if info.ssi_code == SI_KERNEL {
            continue;
        }
        if let Ok(sig) = Signal::try_from(signo) {
            let _ = kill(child, sig);
        }
    }
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
