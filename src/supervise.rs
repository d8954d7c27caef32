//! Waiting for a child while passing signals on: shared by the inner stage
//! (PID 1 of the sandbox) and the outer stage (the parent of bubblewrap).

use anyhow::{Context, Result};
use nix::sys::signal::{kill, Signal};
use nix::sys::signalfd::{siginfo, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// Handle one signal read from a signalfd. On `SIGCHLD`, reap (every child
/// with `reap_all`, as PID 1 must) and return the exit status to report once
/// `child` has ended: its code, or 128+N when signal N killed it. Any other
/// signal a process sent us is forwarded to `child`.
pub fn on_signal(info: &siginfo, child: Pid, reap_all: bool) -> Result<Option<i32>> {
    let signo = info.ssi_signo as i32;
    if signo == Signal::SIGCHLD as i32 {
        let target = if reap_all { None } else { Some(child) };
        loop {
            match waitpid(target, Some(WaitPidFlag::WNOHANG)) {
                Ok(WaitStatus::Exited(pid, code)) if pid == child => return Ok(Some(code)),
                Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                    return Ok(Some(128 + sig as i32))
                }
                Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::ECHILD) => return Ok(None),
                Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e).context("waiting for the command"),
            }
        }
    }
    // Signals a terminal sends (Ctrl-C, Ctrl-\, window size) reach the
    // command's process group directly; forwarding them would deliver them
    // twice. Only signals sent to us by a process are forwarded.
    const SI_KERNEL: i32 = 0x80;
    if info.ssi_code != SI_KERNEL {
        if let Ok(sig) = Signal::try_from(signo) {
            let _ = kill(child, sig);
        }
    }
    Ok(None)
}

/// Wait for `child`, forwarding signals (which must be blocked and routed to
/// `signals`). Returns the exit status to report.
pub fn wait_forwarding(child: Pid, signals: &SignalFd, reap_all: bool) -> Result<i32> {
    loop {
        if let Some(info) = signals.read_signal().context("reading the signalfd")? {
            if let Some(code) = on_signal(&info, child, reap_all)? {
                return Ok(code);
            }
        }
    }
}
