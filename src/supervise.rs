//! Waiting for a child while passing signals on: shared by the inner stage
//! (PID 1 of the sandbox) and the outer stage (the parent of bubblewrap on
//! Linux, of sandbox-exec on macOS). Linux routes signals to a signalfd;
//! macOS has none, so a thread takes them with `sigwait`.

use std::os::fd::AsFd;
#[cfg(target_os = "linux")]
use std::os::fd::BorrowedFd;

use anyhow::{Context, Result};
#[cfg(target_os = "linux")]
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signal::{kill, SigSet, Signal};
#[cfg(target_os = "linux")]
use nix::sys::signalfd::{siginfo, SfdFlags, SignalFd};
#[cfg(target_os = "linux")]
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;

/// The signals passed on to the command when a process sends them to sbx.
const FORWARDED: [Signal; 6] = [
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

#[cfg(target_os = "linux")]
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

#[cfg(target_os = "linux")]
/// Reap what has ended (every child with `reap_all`); the exit status to
/// report once `child` has ended.
pub fn reap(child: Pid, reap_all: bool) -> Result<Option<i32>> {
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

#[cfg(target_os = "linux")]
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

/// Block `set` in this thread; the mask it had before.
fn block(set: &SigSet) -> Result<SigSet> {
    let mut old = SigSet::empty();
    nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_BLOCK,
        Some(set),
        Some(&mut old),
    )
    .context("blocking signals")?;
    Ok(old)
}

/// Start a thread that blocks every signal from its first instruction: the
/// mask is set in the spawning thread around the spawn (a new thread takes
/// its creator's mask), so no signal can reach it in between.
pub fn spawn_without_signals<F>(f: F) -> std::io::Result<std::thread::JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    let mut old = SigSet::empty();
    let _ = nix::sys::signal::pthread_sigmask(
        nix::sys::signal::SigmaskHow::SIG_BLOCK,
        Some(&SigSet::all()),
        Some(&mut old),
    );
    let handle = std::thread::Builder::new().spawn(f);
    let _ = old.thread_set_mask();
    handle
}

/// Pass the signals that processes send sbx on to `child`, from a thread
/// that takes them with `sigwait` (macOS, which has no signalfd). They are
/// blocked in the calling thread, which must be the only one not blocking
/// them (threads started by [`spawn_without_signals`] block everything).
/// Call it after spawning the child, which then starts with sbx's own mask
/// (std passes the mask on to children). Dropping the returned guard stops
/// the forwarding (the child's PID may be reused once it is reaped) and
/// restores the mask, so that nothing started later inherits it.
///
/// A terminal sends SIGINT and SIGQUIT to its whole foreground process
/// group; when the child is in that group it has them already, and passing
/// them on would deliver them twice (a second Ctrl-C can interrupt a
/// program's cleanup). `sigwait` does not tell who sent a signal, so those
/// two are not passed on while the child's group is the foreground of sbx's
/// terminal. SIGHUP always is: a hang-up twice is harmless, a `kill -HUP`
/// lost (a terminal emulator closing a tab) is not.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub fn forward_signals(child: Pid) -> Result<Forwarding> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let mut set = SigSet::empty();
    for sig in FORWARDED {
        set.add(sig);
    }
    let guard = Forwarding {
        done: std::sync::Arc::new(AtomicBool::new(false)),
        old: block(&set)?,
    };
    let done = guard.done.clone();
    std::thread::Builder::new()
        .name("sbx-signals".into())
        .spawn(move || loop {
            if let Ok(sig) = set.wait() {
                if !done.load(Ordering::SeqCst) && !terminal_sent(sig, child) {
                    let _ = kill(child, sig);
                }
            }
        })
        .context("starting the signal thread")?;
    Ok(guard)
}

/// Stops [`forward_signals`] and restores the signal mask when dropped.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub struct Forwarding {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    old: SigSet,
}

impl Drop for Forwarding {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = self.old.thread_set_mask();
    }
}

/// Whether `sig` is one a terminal sends to its foreground process group
/// and `child` is in the foreground group of sbx's terminal (through its
/// standard descriptors, or its controlling terminal when they are
/// redirected).
#[cfg_attr(target_os = "linux", allow(dead_code))]
fn terminal_sent(sig: Signal, child: Pid) -> bool {
    if !matches!(sig, Signal::SIGINT | Signal::SIGQUIT) {
        return false;
    }
    let Ok(group) = nix::unistd::getpgid(Some(child)) else {
        return false;
    };
    let (stdin, stdout, stderr) = (std::io::stdin(), std::io::stdout(), std::io::stderr());
    if [stdin.as_fd(), stdout.as_fd(), stderr.as_fd()]
        .into_iter()
        .any(|fd| nix::unistd::tcgetpgrp(fd) == Ok(group))
    {
        return true;
    }
    std::fs::File::open("/dev/tty").is_ok_and(|tty| nix::unistd::tcgetpgrp(&tty) == Ok(group))
}

/// Restores the signal mask it holds when dropped.
#[cfg(target_os = "linux")]
pub struct MaskGuard(SigSet);

#[cfg(target_os = "linux")]
impl Drop for MaskGuard {
    fn drop(&mut self) {
        let _ = self.0.thread_set_mask();
    }
}

#[cfg(target_os = "linux")]
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
