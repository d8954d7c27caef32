//! Waiting for a child on Linux, for the inner stage (PID 1 of the sandbox)
//! and the outer stage (the parent of bubblewrap): the signals to pass on,
//! and SIGCHLD, are routed to a signalfd, which the waiter polls together
//! with whatever else it watches (the ready pipe, the lifeline).

use std::os::fd::{AsFd, BorrowedFd};

use anyhow::{Context, Result};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, SigSet, Signal};
use nix::sys::signalfd::{siginfo, SfdFlags, SignalFd};
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

use crate::supervise::{block, FORWARDED};

/// Handle one signal read from a signalfd. On `SIGCHLD`, reap (every child
/// with `reap_all`, as PID 1 must) and return the exit status to report once
/// `child` has ended: its code, or 128+N when signal N killed it. Any other
/// signal a process sent us is forwarded to `child`.
pub fn on_signal(info: &siginfo, child: Pid, reap_all: bool) -> Result<Option<i32>> {
    let signo = info.ssi_signo as i32;
    if signo == Signal::SIGCHLD as i32 {
        return reap(child, reap_all);
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

/// The signal that ended the waited-for child, if one did (0: none).
static KILLED_BY: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The signal that killed the child the last wait was for, if one did (an
/// exit status of 128+N alone cannot tell it from `exit N+128`).
pub fn killed_by() -> Option<i32> {
    match KILLED_BY.load(std::sync::atomic::Ordering::Relaxed) {
        0 => None,
        sig => Some(sig),
    }
}

/// Forget which signal ended the last child waited for (before another
/// wait: a plan tried again must not report the first one's end).
pub fn forget_killed_by() {
    KILLED_BY.store(0, std::sync::atomic::Ordering::Relaxed);
}

/// Reap what has ended (every child with `reap_all`); the exit status to
/// report once `child` has ended.
pub fn reap(child: Pid, reap_all: bool) -> Result<Option<i32>> {
    let target = if reap_all { None } else { Some(child) };
    loop {
        match waitpid(target, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::Exited(pid, code)) if pid == child => return Ok(Some(code)),
            Ok(WaitStatus::Signaled(pid, sig, _)) if pid == child => {
                KILLED_BY.store(sig as i32, std::sync::atomic::Ordering::Relaxed);
                return Ok(Some(128 + sig as i32));
            }
            Ok(WaitStatus::StillAlive) | Err(nix::errno::Errno::ECHILD) => return Ok(None),
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e).context("waiting for the command"),
        }
    }
}

/// Block the signals to forward (and SIGCHLD) and route them to a signalfd.
/// Call this after spawning the child, so the child starts with the mask sbx
/// was started with (std does not reset it), then call [`reap`] once: a
/// child that ended before the mask was in place sent a SIGCHLD nobody saw.
/// Dropping the guard unblocks them again.
pub fn route_signals(all: bool) -> Result<(SignalFd, MaskGuard)> {
    let mut set = if all { SigSet::all() } else { SigSet::empty() };
    if all {
        set.remove(Signal::SIGKILL);
        set.remove(Signal::SIGSTOP);
    } else {
        set.add(Signal::SIGCHLD);
        for sig in FORWARDED {
            set.add(sig);
        }
    }
    let guard = MaskGuard(block(&set)?);
    let fd = SignalFd::with_flags(&set, SfdFlags::SFD_CLOEXEC).context("creating a signalfd")?;
    Ok((fd, guard))
}

/// Restores the signal mask it holds when dropped.
pub struct MaskGuard(SigSet);

impl Drop for MaskGuard {
    fn drop(&mut self) {
        let _ = self.0.thread_set_mask();
    }
}

/// Wait for `child`, forwarding signals (which must be blocked and routed to
/// `signals`). Returns the exit status to report. When `lifeline` (the write
/// end of a pipe) reports that its reader is gone, waiting ends with 137: the
/// caller exits, and as PID 1 takes the whole sandbox with it.
pub fn wait_forwarding(
    child: Pid,
    signals: &SignalFd,
    reap_all: bool,
    lifeline: Option<BorrowedFd<'_>>,
) -> Result<i32> {
    if let Some(code) = reap(child, reap_all)? {
        return Ok(code);
    }
    loop {
        let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        if let Some(l) = lifeline {
            // POLLERR and POLLHUP are always reported; nothing else is asked.
            fds.push(PollFd::new(l, PollFlags::empty()));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e).context("waiting for the command"),
        }
        if fds
            .get(1)
            .and_then(|f| f.revents())
            .is_some_and(|r| !r.is_empty())
        {
            return Ok(137);
        }
        if fds[0].revents().is_some_and(|r| !r.is_empty()) {
            if let Some(info) = signals.read_signal().context("reading the signalfd")? {
                if let Some(code) = on_signal(&info, child, reap_all)? {
                    return Ok(code);
                }
            }
        }
    }
}
