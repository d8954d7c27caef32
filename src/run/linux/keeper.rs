//! Reduced mode's keeper: `sbx __keep --parent-fd N [--cache DIR] -- STAGE`.
//!
//! Full mode ends the sandbox with its PID namespace: when sbx dies, the
//! sandbox's PID 1 sees its lifeline break and takes every process with it.
//! Reduced mode has no namespace, so something outside the sandbox must
//! find every process the command left behind, even one that called
//! `setsid` and closed every descriptor, and even when sbx is killed with
//! its whole process group (an agent's timeout). That is the keeper:
//!
//! - it is started by sbx and starts the stage, in sbx's process group (the
//!   terminal's foreground group: job control and Ctrl-C work as without
//!   it), while it moves to a group of its own, out of the reach of a
//!   signal for that group;
//! - it is a child subreaper: every orphan of the sandbox becomes its
//!   child, wherever the command tried to send it;
//! - it passes on the signals sbx passes to it, and exits with the
//!   command's status once it has killed whatever the command left;
//! - when the pipe from sbx breaks (sbx is gone), it kills the stage and
//!   every leftover, then makes the checks sbx could not make (as the
//!   guardian does in full mode), so nothing the command left can plant a
//!   file after them.
//!
//! The command cannot signal the keeper where Landlock scopes signals
//! (ABI 6); below that, reduced mode says on every run that it can.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use nix::unistd::Pid;

use super::guardian::broken;

/// Run the keeper; the exit status is the command's.
pub fn keep(
    parent_fd: i32,
    cache: Option<&Path>,
    limits: &[String],
    stage: &[OsString],
) -> Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    let Some((program, args)) = stage.split_first() else {
        bail!("no stage given to the keeper");
    };
    // The pipe from sbx stays ours alone.
    nix::fcntl::fcntl(
        parent_fd,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .context("the pipe from sbx")?;
    // sbx's key, which sbx wrote first (read before the stage starts): the
    // checks after a killed sbx wait for it to be gone.
    let sbx_key = std::fs::File::open(format!("/proc/self/fd/{parent_fd}"))
        .ok()
        .and_then(|pipe| super::guardian::read_run_line(pipe.as_fd()));
    let group = nix::unistd::getpgrp();
    nix::unistd::setpgid(Pid::from_raw(0), Pid::from_raw(0))
        .context("moving the keeper to a process group of its own")?;
    nix::sys::prctl::set_child_subreaper(true).context("becoming a child subreaper")?;
    let child = Command::new(program)
        .args(args)
        .process_group(group.as_raw())
        .spawn()
        .with_context(|| format!("starting {}", program.to_string_lossy()))?;
    let pid = Pid::from_raw(child.id() as i32);
    // What sbx handed down for the stage is the stage's alone now. The
    // pipe from sbx is reopened through /proc (a new descriptor on it, so
    // that no raw descriptor is adopted) and its inherited number closed.
    super::inner::close_inherited_fds(&[parent_fd])?;
    let parent = std::fs::File::open(format!("/proc/self/fd/{parent_fd}"))
        .context("reopening the pipe from sbx")?;
    nix::unistd::close(parent_fd).context("closing the pipe from sbx")?;
    let (signals, _mask) = super::signals::route_signals(true)?;
    let code = super::signals::wait_forwarding(pid, &signals, true, Some(parent.as_fd()))?;
    let sbx_gone = broken(parent.as_fd());
    // Marked checking the moment sbx is seen gone, before the leftovers are
    // killed (a while, for a fork storm): the next run may start as soon as
    // sbx is reaped, and must wait for the checks.
    let early = cache
        .filter(|_| sbx_gone)
        .map(crate::integrity::journal::begin_checking);
    // The stage runs in sbx's group (the caller's): never stopped.
    super::leftovers::kill_all(group.as_raw() as u32);
    // sbx may have been killed while the leftovers were (a fork storm
    // takes a while): its checks are then the keeper's.
    let sbx_gone = sbx_gone || broken(parent.as_fd());
    if let Some(said) =
        super::signals::killed_by().and_then(|sig| crate::limits::stopped_by(sig, limits))
    {
        eprintln!("sbx: {said}");
    }
    if sbx_gone {
        if let Some(cache) = cache {
            let checking =
                early.unwrap_or_else(|| crate::integrity::journal::begin_checking(cache));
            super::guardian::check_for_a_dead_run(cache, sbx_key.as_deref(), checking)?;
        }
        return Ok(ExitCode::from(137));
    }
    Ok(ExitCode::from(u8::try_from(code).unwrap_or(255)))
}
