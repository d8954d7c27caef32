//! Waiting for a child while passing signals on: shared by the inner stage
//! (PID 1 of the sandbox) and the outer stage (the parent of bubblewrap on
//! Linux, of sandbox-exec on macOS). Linux routes signals to a signalfd;
//! macOS has none, so a thread takes them with `sigwait`.
//!
//! Each platform's own wait lives with its run path: the signalfd in
//! `run::linux::signals`, the `sigwait` thread in `run::sandbox_exec`. What
//! they share is here, with the list of a process's own descriptors (which
//! the stages close or mark before they start anything).

use anyhow::{Context, Result};
use nix::sys::signal::{SigSet, Signal};

/// The signals passed on to the command when a process sends them to sbx.
pub const FORWARDED: [Signal; 6] = [
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
];

/// Block `set` in this thread; the mask it had before.
pub fn block(set: &SigSet) -> Result<SigSet> {
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

/// This process's open descriptors above 2 (from `/proc/self/fd`, or
/// `/dev/fd` where there is no `/proc`).
pub fn descriptors_above_stderr() -> std::io::Result<Vec<i32>> {
    let dir = if std::path::Path::new("/proc/self/fd").is_dir() {
        "/proc/self/fd"
    } else {
        "/dev/fd"
    };
    Ok(std::fs::read_dir(dir)?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect())
}
