//! sbx as the parent of bubblewrap: it runs the plan, tells a sandbox that
//! came up from one that never did (a byte on the ready pipe), waits with
//! signals passed on through a signalfd, and finds out why a sandbox did not
//! start.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

use anyhow::{Context, Result};
use nix::fcntl::{fcntl, FcntlArg};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::signalfd::SignalFd;
use nix::unistd::Pid;

use super::probe;
use super::signals::{on_signal, reap, route_signals};
use crate::backend::Plan;
use crate::exec::Cause;

/// How a sandboxed run ended.
pub enum Outcome {
    /// The sandbox was up and the command ran: its exit status.
    Exited(u8),
    /// The sandbox never came up; nothing ran. Why, from diagnostic runs.
    NotStarted(NotStarted),
    /// The inner stage could not set up the private git config copies
    /// (why, in its words); nothing ran. The plan without them may start.
    NoCopies(String),
}

/// What a run starts with, besides its plan.
pub struct Start<'a> {
    /// Called as soon as the sandbox is up (the banner).
    pub on_started: &'a dyn Fn(),
    /// The run's guardian (full mode), if one could be started.
    pub guardian: Option<&'a super::guardian::Guardian>,
    /// The run's own cgroup (`max_memory`), where the sandbox is born.
    pub group: Option<&'a super::cgroup::RunGroup>,
    /// The directories of the masked paths, watched for the host's changes
    /// (the run is stopped when one lifts a mask).
    pub masks: Option<&'a super::mask_watch::MaskWatch>,
    /// How sbx writes on stderr.
    pub style: crate::banner::Style,
}

/// Run the plan as a child of sbx and wait for it, forwarding signals.
///
/// The inner stage writes a byte on the plan's ready descriptor once the
/// sandbox is up; if bubblewrap exits without it, the sandbox never started
/// and nothing ran, which is reported as [`Outcome::NotStarted`] with a cause.
/// `on_started` runs as soon as the sandbox is up (the banner).
///
/// The run's `guardian` learns the ready pipe before bubblewrap starts
/// (every process of the sandbox that is not the command holds it), and is
/// launched once bubblewrap is spawned.
pub fn run_sandboxed(plan: &Plan, start: &Start) -> Result<Outcome> {
    super::signals::forget_killed_by();
    crate::exec::prepare_host(plan)?;
    // The bubblewrap started ahead, once its ready pipe is known to the
    // guardian; one that could not take the plan's arguments is killed
    // (nothing ran) and the plan spawned as before.
    if let Some(ahead) = super::ahead::take(plan, start.group.is_some()) {
        if let (Some(guardian), Some(ready)) = (start.guardian, ahead.ready()) {
            guardian.watch(ready)?;
        }
        if let Some((child, ready_r)) = ahead.send(plan) {
            return after_spawn(child, ready_r, plan, start);
        }
    }
    let mut cmd = crate::exec::command(plan);
    let ready_fd = plan.ready_fd.context("the plan has no ready descriptor")?;
    let ready_r = ready_pipe(ready_fd)?;
    if let Some(guardian) = start.guardian {
        guardian.watch(&ready_r)?;
    }

    let child = match start.group {
        Some(group) => group
            .born_inside(|| cmd.spawn())
            .context("entering the run's cgroup")
            .and_then(|spawned| Ok(spawned?)),
        None => cmd.spawn().map_err(anyhow::Error::from),
    }
    .with_context(|| format!("cannot execute {}", plan.program.display()));
    // Our copy of the write end must go, or the pipe never reports EOF.
    let _ = nix::unistd::close(ready_fd);
    after_spawn(child?, ready_r, plan, start)
}

/// Once bubblewrap is spawned, with the read end of its ready pipe: launch
/// the guardian, route signals, wait, and say how the run ended.
fn after_spawn(
    child: std::process::Child,
    ready_r: OwnedFd,
    plan: &Plan,
    start: &Start,
) -> Result<Outcome> {
    if let Some(guardian) = start.guardian {
        guardian.launch(
            start
                .masks
                .and_then(super::mask_watch::MaskWatch::duplicate),
        );
    }
    let pid = Pid::from_raw(child.id() as i32);
    // After the spawn, so bubblewrap starts with sbx's own signal mask.
    let (signals, mask) = route_signals(false)?;

    let mut ready = Ready {
        watched: Some(ready_r),
        lifeline: None,
        started: false,
        no_copies: None,
        refused: None,
    };
    let code = wait(pid, &signals, &mut ready, start)?;
    // Whatever of the sandbox outlived bubblewrap is ended first (see
    // `end_what_outlived`). Then the byte, written before the command
    // starts, is in the pipe if the sandbox ever came up, and no process is
    // left to write it later: never decide "not started" without this last
    // look (a command that ran must never run again unsandboxed).
    if let Some(r) = ready.watched.as_ref().or(ready.lifeline.as_ref()) {
        end_what_outlived(r)?;
    }
    if let Some(r) = ready.watched.take() {
        match read_byte(&r) {
            Some(READY) => ready.started = true,
            Some(NO_COPIES) => ready.no_copies = Some(read_rest(&r)),
            Some(REFUSED) => ready.refused = Some(read_rest(&r)),
            _ => {}
        }
    }
    let (started, no_copies, refused) =
        (ready.started, ready.no_copies.take(), ready.refused.take());
    drop(ready);
    drop(signals);
    drop(mask);
    let stopped = super::signals::killed_by().filter(|&sig| stopped_from_outside(sig));
    if let (false, Some(sig)) = (started, stopped) {
        // Stopped (a signal sbx passed on, Ctrl-C, a kill) before its
        // sandbox was up: the run ends as bubblewrap did, and nothing is
        // tried again, neither another plan nor a diagnosis. A signal the
        // user sent says it all; SIGKILL may come from the kernel's
        // out-of-memory killer, and is named.
        if sig == nix::sys::signal::Signal::SIGKILL as i32 {
            crate::banner::warn(
                start.style,
                "the sandbox was killed (SIGKILL) before it was up: nothing ran, and nothing else is tried",
            );
        }
        return Ok(Outcome::Exited(u8::try_from(code).unwrap_or(255)));
    }
    if let Some(why) = refused {
        return Ok(Outcome::NotStarted(NotStarted::Policy(why)));
    }
    if let Some(why) = no_copies {
        return Ok(Outcome::NoCopies(why));
    }
    if !started && plan.without_copies.is_some() {
        // Whatever stopped it (a setuid bubblewrap refuses `--cap-add`),
        // the plan without the copies is tried before any diagnosis.
        return Ok(Outcome::NoCopies(
            "bubblewrap did not start with them".into(),
        ));
    }
    if !started {
        return Ok(Outcome::NotStarted(diagnose(plan)));
    }
    Ok(Outcome::Exited(u8::try_from(code).unwrap_or(255)))
}

/// How long sbx waits for the processes of a sandbox that outlived its
/// bubblewrap to be gone once it has killed them.
const OUTLIVED_WITHIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Once bubblewrap has exited, end every process that still holds the
/// write end of the sandbox's ready pipe (`ready`, its read end). There is
/// none when the sandbox ended with bubblewrap. One killed between its
/// clone and releasing its child leaves that child waiting for good, and
/// one killed a moment later lets it go on to start the command: it sets
/// its parent-death signal only before its exec. An error when one is
/// still there after [`OUTLIVED_WITHIN`] (sbx may not kill it): what it
/// did or will do cannot be told, so nothing else is tried.
fn end_what_outlived(ready: &OwnedFd) -> Result<()> {
    if writers_gone(ready, std::time::Duration::ZERO) {
        return Ok(());
    }
    let inode = nix::sys::stat::fstat(ready.as_raw_fd())
        .context("reading the ready pipe")?
        .st_ino;
    let ended = super::guardian::end_holders(&[inode], OUTLIVED_WITHIN);
    if ended && writers_gone(ready, OUTLIVED_WITHIN) {
        return Ok(());
    }
    anyhow::bail!(
        "bubblewrap ended, but a process of its sandbox is still there and could not be ended; whether the command started cannot be told, so nothing else is tried (end the processes that hold pipe:[{inode}])"
    )
}

/// Whether no process holds the write end of `pipe` any more, waiting up
/// to `within` for the last one to close it.
fn writers_gone(pipe: &OwnedFd, within: std::time::Duration) -> bool {
    let deadline = std::time::Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let timeout = PollTimeout::try_from(left).unwrap_or(PollTimeout::MAX);
        // POLLHUP is reported whatever is asked; data alone does not end it.
        let mut fds = [PollFd::new(pipe.as_fd(), PollFlags::empty())];
        match poll(&mut fds, timeout) {
            Ok(_)
                if fds[0]
                    .revents()
                    .is_some_and(|r| r.contains(PollFlags::POLLHUP)) =>
            {
                return true
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(_) => return false,
        }
        if left.is_zero() {
            return false;
        }
    }
}

/// Signals that end bubblewrap from outside (passed on by sbx, sent by a
/// terminal or a kill), as opposed to a crash of its own.
fn stopped_from_outside(sig: i32) -> bool {
    use nix::sys::signal::Signal;
    Signal::try_from(sig)
        .is_ok_and(|s| crate::supervise::FORWARDED.contains(&s) || s == Signal::SIGKILL)
}

/// Make the ready pipe, its write end on `ready_fd`; its read end.
pub(super) fn ready_pipe(ready_fd: i32) -> Result<OwnedFd> {
    let (r0, w0) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("creating a pipe")?;
    // Move both ends above the ready descriptor, then put the write end on it
    // (without close-on-exec, so bubblewrap and the inner stage inherit it).
    let above = |fd: &OwnedFd| -> Result<OwnedFd> {
        let raw = fcntl(fd.as_raw_fd(), FcntlArg::F_DUPFD_CLOEXEC(ready_fd + 1))
            .context("moving a descriptor")?;
        // SAFETY: `raw` was just returned by F_DUPFD_CLOEXEC: a new descriptor
        // that nothing else owns.
        #[allow(unsafe_code)]
        Ok(unsafe { OwnedFd::from_raw_fd(raw) })
    };
    let ready_r = above(&r0)?;
    let ready_w = above(&w0)?;
    drop((r0, w0));
    nix::unistd::dup2(ready_w.as_raw_fd(), ready_fd).context("placing the ready pipe")?;
    drop(ready_w);
    Ok(ready_r)
}

/// The read end of the ready pipe, and what it said.
struct Ready {
    /// Watched until the byte comes (or bubblewrap exits).
    watched: Option<OwnedFd>,
    /// The read end once the byte came, open until bubblewrap exits.
    lifeline: Option<OwnedFd>,
    started: bool,
    /// Why the inner stage could not set up the private config copies.
    no_copies: Option<String>,
    /// Why the inner stage refused to go on (no plan is tried after it).
    refused: Option<String>,
}

/// Wait for bubblewrap to exit, passing signals on and noting the byte on
/// the ready pipe when it comes; bubblewrap's exit status. Once the sandbox
/// is up, a change on the host that lifts a mask stops it (bubblewrap is
/// killed, and the sandbox with it).
fn wait(pid: Pid, signals: &SignalFd, ready: &mut Ready, start: &Start) -> Result<i32> {
    loop {
        if let Some(code) = reap(pid, false)? {
            // Catches a child that ended before its SIGCHLD could be routed.
            return Ok(code);
        }
        let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        if let Some(r) = &ready.watched {
            fds.push(PollFd::new(r.as_fd(), PollFlags::POLLIN));
        }
        // Only once the masks are in place: what changed before is queued,
        // and read then.
        let masks = start
            .masks
            .filter(|m| ready.started && m.stopped_for().is_none());
        if let Some(m) = masks {
            fds.push(PollFd::new(m.fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e).context("waiting for the sandbox"),
        }
        let event = |i: usize| {
            fds.get(i)
                .and_then(|f| f.revents())
                .is_some_and(|r| !r.is_empty())
        };
        let ready_event = ready.watched.is_some() && event(1);
        let signal_event = event(0);
        if let Some(m) = masks.filter(|_| event(fds.len() - 1)) {
            if let Some(why) = m.lifted() {
                m.stop(why);
                let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            }
        }
        if ready_event {
            // Stop watching, but keep the read end open until bubblewrap
            // exits: the inner stage holds the write end as its lifeline.
            if let Some(r) = ready.watched.take() {
                match read_byte(&r) {
                    Some(READY) => {
                        ready.started = true;
                        (start.on_started)();
                        ready.lifeline = Some(r);
                    }
                    Some(NO_COPIES) => ready.no_copies = Some(read_rest(&r)),
                    Some(REFUSED) => ready.refused = Some(read_rest(&r)),
                    _ => ready.lifeline = Some(r),
                }
            }
        }
        if signal_event {
            if let Some(info) = signals.read_signal().context("reading the signalfd")? {
                if let Some(code) = on_signal(&info, pid, false)? {
                    return Ok(code);
                }
            }
        }
    }
}

/// The inner stage's byte: the sandbox is up and the command starts.
pub const READY: u8 = b'1';
/// The inner stage's byte: the private git config copies could not be set
/// up, nothing ran; the reason follows, up to the end of the pipe.
pub const NO_COPIES: u8 = b'0';

/// The inner stage's byte: its set-up found the sandbox could not be made
/// as planned (a file to mask moved away meanwhile), nothing ran, and no
/// other plan is to be tried; the reason follows, as after [`NO_COPIES`].
pub const REFUSED: u8 = b'2';

/// The byte on `pipe`, if one can be read.
fn read_byte(pipe: &OwnedFd) -> Option<u8> {
    let mut byte = [0u8; 1];
    matches!(nix::unistd::read(pipe.as_raw_fd(), &mut byte), Ok(1)).then_some(byte[0])
}

/// The reason after [`NO_COPIES`] or [`REFUSED`]: written with the byte in one write (so
/// it is there already) and never empty (so this read does not wait).
fn read_rest(pipe: &OwnedFd) -> String {
    let mut buf = [0u8; 512];
    let n = nix::unistd::read(pipe.as_raw_fd(), &mut buf).unwrap_or(0);
    crate::banner::sanitize(String::from_utf8_lossy(&buf[..n]).trim())
}

/// Why a sandbox did not start.
#[derive(Debug, Clone)]
pub enum NotStarted {
    /// This machine cannot run any sandbox: the cause and bubblewrap's words.
    Environment(Cause, String),
    /// A sandbox runs here, but not with this policy (bubblewrap's words).
    /// Project files and project contents shape the policy, and the command
    /// can write both: never a reason to run without a sandbox.
    Policy(String),
}

/// Find out why a sandbox did not start. First a sandbox that nothing from
/// the project or its configuration shapes (the host root read-only, fresh
/// /dev and /proc, the inner stage running `sbx --version`): if that fails,
/// this machine cannot sandbox and the cause is mapped from what bubblewrap
/// said. If it starts, the failure belongs to this policy: the same plan is
/// run with `true` as the command to capture bubblewrap's words.
pub fn diagnose(plan: &Plan) -> NotStarted {
    // The inner stage is `SBX __inner [OPTIONS] -- CMD`: SBX is just before
    // `__inner`, and its own `--` is the first one after it.
    let inner = plan.args.iter().position(|a| a == "__inner");
    let sbx = inner
        .and_then(|i| i.checked_sub(1))
        .and_then(|i| plan.args.get(i));
    let sep = inner.and_then(|i| {
        plan.args
            .iter()
            .skip(i)
            .position(|a| a == "--")
            .map(|p| p + i)
    });
    let (Some(sbx), Some(sep)) = (sbx, sep) else {
        return NotStarted::Environment(probe::UNKNOWN, String::new());
    };
    let (ok, stderr) = run_for_stderr(&minimal(plan, sbx));
    if !ok {
        let facts = probe::Facts::read();
        let root = nix::unistd::geteuid().is_root();
        let cause = probe::diagnose(&stderr, &facts, root);
        // Only a cause sbx recognises (no user namespaces, no seccomp, an old
        // bubblewrap, ...) says this machine cannot sandbox. A timeout, a
        // spawn error or an unknown message could be the command's doing (a
        // process storm from a concurrent run): never a fallback.
        if cause != probe::UNKNOWN {
            return NotStarted::Environment(cause, first_line(&stderr));
        }
        return NotStarted::Policy(format!(
            "the diagnostic sandbox failed too, for no reason sbx recognises: {}",
            first_line(&stderr)
        ));
    }
    let mut args: Vec<OsString> = plan.args[..=sep].to_vec();
    args.push("true".into());
    let full = Plan {
        args,
        ..plan.clone()
    };
    let (_, stderr) = run_for_stderr(&full);
    NotStarted::Policy(first_line(&stderr))
}

/// A sandbox that nothing from the project or its configuration shapes,
/// with the bubblewrap of `plan`: the inner stage `sbx` runs `sbx --version`.
fn minimal(plan: &Plan, sbx: &OsString) -> Plan {
    Plan {
        program: plan.program.clone(),
        args: crate::backend::bwrap::NAMESPACE_FLAGS
            .iter()
            .chain(&[
                "--unshare-net",
                "--ro-bind",
                "/",
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--perms",
                "0700",
                "--tmpfs",
                "/tmp",
                "--cap-drop",
                "ALL",
                "--",
            ])
            .map(OsString::from)
            .chain([
                sbx.clone(),
                "__inner".into(),
                "--".into(),
                sbx.clone(),
                "--version".into(),
            ])
            .collect(),
        env: None,
        placeholder: None,
        create: Vec::new(),
        profile: None,
        ready_fd: None,
        inner_at: None,
        copies: None,
        without_copies: None,
        tmpdir: None,
        masked: Vec::new(),
    }
}

fn first_line(text: &str) -> String {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Run a plan with stdin and stdout closed and stderr captured, for at most
/// five seconds; whether it succeeded, and what it printed on stderr.
fn run_for_stderr(plan: &Plan) -> (bool, String) {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let spawned = crate::exec::prepare(plan).and_then(|mut cmd| {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting the diagnostic run")
    });
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return (false, format!("{e:#}")),
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(10)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut pipe, &mut stderr);
    }
    match status.map(|s| std::os::unix::process::ExitStatusExt::signal(&s)) {
        None => stderr = "the diagnostic run did not finish within 5 seconds".into(),
        // Killed (a crash, the out-of-memory killer): what it printed, or
        // its silence, says nothing of this machine, and must not read as
        // a refusal that makes sbx fall back.
        Some(Some(sig)) => stderr = format!("the diagnostic run was killed by signal {sig}"),
        Some(None) => {}
    }
    (status.is_some_and(|s| s.success()), stderr)
}
