//! Where sbx starts other programs: the sandbox (as its parent), or the
//! command itself when it runs unsandboxed.
//!
//! Trusted helpers are found here: `/usr/bin/sandbox-exec` by absolute path
//! only, and a bubblewrap that does not live where the sandboxed command could
//! have written it.

use std::convert::Infallible;
use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};

use crate::backend::Plan;
use crate::error::Failure;
use crate::policy::{EnvPlan, Kind, Policy};

/// Where bubblewrap is looked for first.
pub const SYSTEM_BWRAP: &str = "/usr/bin/bwrap";

/// Why no bubblewrap can be used.
#[derive(Debug, Clone)]
pub struct NoBwrap {
    /// None is installed (or the configured path does not exist): the
    /// machine cannot sandbox, and `require` decides what happens.
    pub missing: bool,
    pub text: String,
}

/// Find a bubblewrap sbx may trust: the configured one, else `/usr/bin/bwrap`,
/// else the first on PATH. A bubblewrap whose real path lies in a writable
/// root or the working directory is never used: the sandboxed command could
/// have put it there. When only such untrusted copies exist, that is never a
/// reason to run unsandboxed (a command could arrange it: start sbx in
/// /usr/bin, or delete a configured bwrap it can write): `missing` is false.
pub fn find_bwrap(policy: &Policy, path_var: Option<&OsStr>) -> Result<PathBuf, NoBwrap> {
    let untrusted =
        |p: &Path| policy.writable.iter().any(|w| p.starts_with(w)) || p.starts_with(&policy.cwd);
    let refuse = |text: String| NoBwrap {
        missing: false,
        text,
    };
    if let Some(configured) = &policy.bwrap {
        // Where it would be, even if it is gone now.
        let place = configured
            .parent()
            .and_then(|p| std::fs::canonicalize(p).ok())
            .map(|p| p.join(configured.file_name().unwrap_or_default()))
            .unwrap_or_else(|| configured.clone());
        let real = std::fs::canonicalize(configured).unwrap_or_else(|_| place.clone());
        if untrusted(&place) || untrusted(&real) {
            return Err(refuse(format!(
                "the configured bwrap {} lies inside a writable root or the working directory, where the sandbox could replace it (install it elsewhere)",
                real.display()
            )));
        }
        if !real.exists() {
            return Err(NoBwrap {
                missing: true,
                text: format!(
                    "the configured bwrap {} does not exist (fix `bwrap` in your configuration)",
                    configured.display()
                ),
            });
        }
        if !is_executable(&real) {
            return Err(refuse(format!(
                "the configured bwrap {} is not executable",
                real.display()
            )));
        }
        return Ok(real);
    }
    let mut candidates = vec![PathBuf::from(SYSTEM_BWRAP)];
    if let Some(path) = path_var {
        if let Ok(found) = which::which_in_all("bwrap", Some(path), &policy.cwd) {
            candidates.extend(found);
        }
    }
    let mut distrusted = None;
    for c in candidates {
        let Ok(real) = std::fs::canonicalize(&c) else {
            continue;
        };
        if !is_executable(&real) {
            continue;
        }
        if untrusted(&real) {
            distrusted.get_or_insert(real);
            continue;
        }
        return Ok(real);
    }
    if let Some(real) = distrusted {
        return Err(refuse(format!(
            "the only bubblewrap found, {}, lies inside a writable root or the working directory, where the sandbox could replace it (run sbx from another directory)",
            real.display()
        )));
    }
    let cause = crate::probe::BWRAP_MISSING;
    Err(NoBwrap {
        missing: true,
        text: format!("{} ({})", cause.what, cause.fix),
    })
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Check, before anything runs, that the command exists and is executable, so
/// that 127 and 126 come with sbx's own message.
pub fn check_command(command: &[OsString], path_var: Option<&OsStr>, cwd: &Path) -> Result<()> {
    let Some(program) = command.first() else {
        anyhow::bail!("no command given (usage: sbx run -- CMD [ARGS...])");
    };
    let name = program.to_string_lossy().into_owned();
    if program.as_encoded_bytes().contains(&b'/') {
        let path = cwd.join(program);
        return match std::fs::metadata(&path) {
            Err(_) => Err(Failure::CommandNotFound(name).into()),
            Ok(m) if m.is_dir() || m.permissions().mode() & 0o111 == 0 => {
                Err(Failure::NotExecutable(name).into())
            }
            Ok(_) => Ok(()),
        };
    }
    match which::which_in(program, path_var, cwd) {
        Ok(_) => Ok(()),
        Err(_) => {
            // `which` skips files that are not executable; tell them apart.
            let exists = path_var
                .map(std::env::split_paths)
                .into_iter()
                .flatten()
                .any(|dir| dir.join(program).is_file());
            if exists {
                Err(Failure::NotExecutable(name).into())
            } else {
                Err(Failure::CommandNotFound(name).into())
            }
        }
    }
}

/// How a run through sandbox-exec ended.
#[cfg_attr(target_os = "linux", allow(dead_code))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// The command ran: its exit status (128+N when signal N ended it).
    Exited(i32),
    /// sandbox-exec did not apply the profile, so nothing ran: what it said,
    /// and whether that was because sbx already runs inside a Seatbelt
    /// sandbox (macOS does not nest them).
    Refused { nested: bool, words: String },
}

/// The line sandbox-exec prints when the process is already sandboxed.
const NESTED_REFUSAL: &str = "sandbox-exec: sandbox_apply: Operation not permitted";

/// Run a sandbox-exec plan as a child of sbx and wait for it, passing
/// signals on. sbx stays the parent, rather than replacing itself, to serve
/// the allowlist proxy for as long as the command runs, and to tell
/// sandbox-exec's own failures from the command's: it exits 65 when it
/// cannot apply the profile and 71 when it cannot start the command, codes
/// any command may also return. On those two, the same profile is applied
/// once more to `/usr/bin/true` with its stderr captured: if that fails as
/// well, the profile never applied and the command never ran.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub fn run_seatbelt(plan: &Plan, true_program: &Path) -> Result<Ended> {
    use std::os::unix::process::ExitStatusExt;
    let mut cmd = prepare(plan)?;
    // A descriptor the caller left open (a socket to a host service, say)
    // must not cross into the sandbox: Seatbelt checks only what is opened
    // after it applies.
    close_on_exec_above_stderr();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot execute {}", plan.program.display()))?;
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let forwarding = crate::supervise::forward_signals(pid)?;
    let status = child.wait().context("waiting for the command");
    drop(forwarding);
    let status = status?;
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    if code != 65 && code != 71 {
        return Ok(Ended::Exited(code));
    }
    // If the check cannot run, the status is taken as the command's:
    // reporting "nothing ran" for a command that may have run is the worse
    // mistake (sandbox-exec either applied the profile or ran nothing).
    Ok(profile_refusal(plan, true_program).unwrap_or(Ended::Exited(code)))
}

/// Apply the plan's profile to `true_program` instead of the command, with
/// its stderr captured: `None` when it applied (or the check could not be
/// made), else sandbox-exec's refusal.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub fn profile_refusal(plan: &Plan, true_program: &Path) -> Option<Ended> {
    // The arguments up to the first `--` are sandbox-exec's own (the profile
    // is one argument after `-p`, each parameter one after `-D`).
    let sep = plan.args.iter().position(|a| a == "--")?;
    let mut again = prepare(&Plan {
        args: plan.args[..=sep]
            .iter()
            .cloned()
            .chain([true_program.as_os_str().to_owned()])
            .collect(),
        ..plan.clone()
    })
    .ok()?;
    let out = again
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .output()
        .ok()?;
    if out.status.success() {
        return None;
    }
    let words = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Some(Ended::Refused {
        nested: words.lines().any(|l| l.trim() == NESTED_REFUSAL),
        words,
    })
}

/// Create what the plan needs on the host and build the command.
fn prepare(plan: &Plan) -> Result<Command> {
    for (path, kind) in &plan.create {
        let made = match kind {
            Kind::Dir => std::fs::create_dir(path),
            _ => std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
                .map(drop),
        };
        match made {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("creating {} so it can be made read-only", path.display())
                })
            }
        }
    }
    if let Some(placeholder) = &plan.placeholder {
        ensure_placeholder(placeholder)?;
    }
    let mut cmd = Command::new(&plan.program);
    cmd.args(&plan.args);
    if let Some(env) = &plan.env {
        apply_env(&mut cmd, env);
    }
    Ok(cmd)
}

/// Run a plan with stdout and stderr captured (stdin closed), for at most
/// `limit`; returns what it printed on each. The output must be small: it is
/// read once the plan has ended.
pub fn run_captured(plan: &Plan, limit: std::time::Duration) -> Result<(String, String)> {
    use std::process::Stdio;
    let spawned = prepare(plan).and_then(|mut cmd| {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot execute {}", plan.program.display()))
    });
    let mut child = spawned?;
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait()?.is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let out = child
        .wait_with_output()
        .context("reading the sandbox's output")?;
    Ok((
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// How a sandboxed run ended.
#[cfg(target_os = "linux")]
pub enum Outcome {
    /// The sandbox was up and the command ran: its exit status.
    Exited(u8),
    /// The sandbox never came up; nothing ran. Why, from diagnostic runs.
    NotStarted(NotStarted),
}

/// Run the plan as a child of sbx and wait for it, forwarding signals.
///
/// The inner stage writes a byte on the plan's ready descriptor once the
/// sandbox is up; if bubblewrap exits without it, the sandbox never started
/// and nothing ran, which is reported as [`Outcome::NotStarted`] with a cause.
/// `on_started` runs as soon as the sandbox is up (the banner).
#[cfg(target_os = "linux")]
pub fn run_sandboxed(plan: &Plan, on_started: &dyn Fn()) -> Result<Outcome> {
    use nix::fcntl::{fcntl, FcntlArg};
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

    let mut cmd = prepare(plan)?;
    let ready_fd = plan.ready_fd.context("the plan has no ready descriptor")?;
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

    let child = cmd
        .spawn()
        .with_context(|| format!("cannot execute {}", plan.program.display()));
    // Our copy of the write end must go, or the pipe never reports EOF.
    let _ = nix::unistd::close(ready_fd);
    let child = child?;
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    // After the spawn, so bubblewrap starts with sbx's own signal mask.
    let (signals, mask) = crate::supervise::route_signals(false)?;

    let mut started = false;
    let mut ready = Some(ready_r);
    let mut lifeline: Option<OwnedFd> = None;
    let code = 'wait: loop {
        if let Some(code) = crate::supervise::reap(pid, false)? {
            // Catches a child that ended before its SIGCHLD could be routed.
            break 'wait code;
        }
        let mut fds = vec![PollFd::new(signals.as_fd(), PollFlags::POLLIN)];
        if let Some(r) = &ready {
            fds.push(PollFd::new(r.as_fd(), PollFlags::POLLIN));
        }
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e).context("waiting for the sandbox"),
        }
        let ready_event = fds
            .get(1)
            .and_then(|f| f.revents())
            .is_some_and(|r| !r.is_empty());
        let signal_event = fds[0].revents().is_some_and(|r| !r.is_empty());
        if ready_event {
            // Stop watching, but keep the read end open until bubblewrap
            // exits: the inner stage holds the write end as its lifeline.
            if let Some(r) = ready.take() {
                let mut byte = [0u8; 1];
                if matches!(nix::unistd::read(r.as_raw_fd(), &mut byte), Ok(1)) {
                    started = true;
                    on_started();
                }
                lifeline = Some(r);
            }
        }
        if signal_event {
            if let Some(info) = signals.read_signal().context("reading the signalfd")? {
                if let Some(code) = crate::supervise::on_signal(&info, pid, false)? {
                    break 'wait code;
                }
            }
        }
    };
    // The byte is written before the command starts, so once bubblewrap
    // has exited it is in the pipe if the sandbox ever came up: never decide
    // "not started" without this last look (a command that ran must never
    // run again unsandboxed).
    if let Some(r) = ready.take() {
        let mut byte = [0u8; 1];
        if matches!(nix::unistd::read(r.as_raw_fd(), &mut byte), Ok(1)) {
            started = true;
        }
    }
    drop(lifeline);
    drop(signals);
    drop(mask);
    if !started {
        return Ok(Outcome::NotStarted(diagnose(plan)));
    }
    Ok(Outcome::Exited(u8::try_from(code).unwrap_or(255)))
}

/// Why a sandbox did not start.
#[cfg(target_os = "linux")]
#[derive(Debug, Clone)]
pub enum NotStarted {
    /// This machine cannot run any sandbox: the cause and bubblewrap's words.
    Environment(crate::probe::Cause, String),
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
#[cfg(target_os = "linux")]
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
        return NotStarted::Environment(crate::probe::UNKNOWN, String::new());
    };
    let minimal = Plan {
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
    };
    let (ok, stderr) = run_for_stderr(&minimal);
    if !ok {
        let facts = crate::probe::Facts::read();
        let root = nix::unistd::geteuid().is_root();
        let cause = crate::probe::diagnose(&stderr, &facts, root);
        // Only a cause sbx recognises (no user namespaces, no seccomp, an old
        // bubblewrap, ...) says this machine cannot sandbox. A timeout, a
        // spawn error or an unknown message could be the command's doing (a
        // process storm from a concurrent run): never a fallback.
        if cause != crate::probe::UNKNOWN {
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

#[cfg(target_os = "linux")]
fn first_line(text: &str) -> String {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_string()
}

/// Run a plan with stdin and stdout closed and stderr captured, for at most
/// five seconds; whether it succeeded, and what it printed on stderr.
#[cfg(target_os = "linux")]
fn run_for_stderr(plan: &Plan) -> (bool, String) {
    use std::process::Stdio;
    use std::time::{Duration, Instant};
    let spawned = prepare(plan).and_then(|mut cmd| {
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
    if status.is_none() {
        stderr = "the diagnostic run did not finish within 5 seconds".into();
    }
    (status.is_some_and(|s| s.success()), stderr)
}

/// Mark every descriptor above 2 close-on-exec.
fn close_on_exec_above_stderr() {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    let dir = if Path::new("/proc/self/fd").is_dir() {
        "/proc/self/fd"
    } else {
        "/dev/fd"
    };
    let fds: Vec<i32> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .filter(|&fd| fd > 2)
        .collect();
    for fd in fds {
        let _ = fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
    }
}

/// Run a command as it is, without any sandbox.
pub fn exec_unsandboxed(command: &[OsString]) -> Result<Infallible> {
    let Some((program, args)) = command.split_first() else {
        anyhow::bail!("no command given");
    };
    let err = Command::new(program).args(args).exec();
    Err(err).with_context(|| format!("cannot execute {}", program.to_string_lossy()))
}

fn apply_env(cmd: &mut Command, env: &EnvPlan) {
    if env.clear {
        cmd.env_clear();
    }
    for name in &env.unset {
        cmd.env_remove(name);
    }
    for (k, v) in &env.set {
        cmd.env(k, v);
    }
}

/// Make sure the placeholder bound over credential files is an empty regular
/// file with mode 000 owned by us; anything else there is replaced. Its
/// directory is created 0700.
fn ensure_placeholder(path: &Path) -> Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    let good = |m: &std::fs::Metadata| {
        m.file_type().is_file()
            && m.len() == 0
            && m.permissions().mode() & 0o7777 == 0
            && m.uid() == nix::unistd::geteuid().as_raw()
    };
    if path == Path::new("/dev/null") || std::fs::symlink_metadata(path).is_ok_and(|m| good(&m)) {
        return Ok(());
    }
    let context = || format!("preparing the credential placeholder {}", path.display());
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(context)?;
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(context),
    }
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o000)
        .open(path)
        .with_context(context)?;
    let meta = std::fs::symlink_metadata(path).with_context(context)?;
    if !good(&meta) {
        anyhow::bail!(
            "{}: the credential placeholder is not an empty mode-000 file after creating it",
            path.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in for sandbox-exec: `sh -c SCRIPT -- CMD...`, where SCRIPT
    /// sees the command as `$1`.
    fn fake_seatbelt(script: &str, command: &str) -> Plan {
        Plan {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into(), "--".into(), command.into()],
            env: None,
            placeholder: None,
            create: Vec::new(),
            profile: None,
            ready_fd: None,
        }
    }

    #[test]
    fn a_commands_own_status_is_passed_on() {
        let ran =
            |script: &str| run_seatbelt(&fake_seatbelt(script, "cmd"), Path::new("/bin/true"));
        assert_eq!(ran("exit 0").unwrap(), Ended::Exited(0));
        assert_eq!(ran("exit 3").unwrap(), Ended::Exited(3));
        // After the runs above, whose forwarding blocked signals in this
        // thread while they lasted: the mask was restored, or this child
        // (which inherits it) would ignore its SIGTERM.
        assert_eq!(ran("kill -TERM $$").unwrap(), Ended::Exited(128 + 15));
        // 65 and 71 are also sandbox-exec's own: they count as the command's
        // only when the same profile applies to `true`.
        let only_cmd = r#"[ "$1" = /bin/true ] && exit 0; exit 65"#;
        assert_eq!(ran(only_cmd).unwrap(), Ended::Exited(65));
        let only_cmd = r#"[ "$1" = /bin/true ] && exit 0; exit 71"#;
        assert_eq!(ran(only_cmd).unwrap(), Ended::Exited(71));
    }

    #[test]
    fn a_refused_profile_is_told_apart() {
        let ran =
            |script: &str| run_seatbelt(&fake_seatbelt(script, "cmd"), Path::new("/bin/true"));
        let bad = "echo 'sandbox-exec: unbound variable: x' >&2; exit 65";
        assert_eq!(
            ran(bad).unwrap(),
            Ended::Refused {
                nested: false,
                words: "sandbox-exec: unbound variable: x".into()
            }
        );
        let nested = "echo 'sandbox-exec: sandbox_apply: Operation not permitted' >&2; exit 71";
        assert!(matches!(
            ran(nested).unwrap(),
            Ended::Refused { nested: true, .. }
        ));
        // The trial run alone, as sbx makes it before running a command when
        // it may be inside its own sandbox.
        let trial =
            |script: &str| profile_refusal(&fake_seatbelt(script, "cmd"), Path::new("/bin/true"));
        assert!(matches!(
            trial(nested),
            Some(Ended::Refused { nested: true, .. })
        ));
        assert_eq!(trial(r#"[ "$1" = /bin/true ]"#), None);
        // Only sandbox-exec's own line counts, not text that contains it.
        let quoted = "echo 'x sandbox-exec: sandbox_apply: Operation not permitted' >&2; exit 65";
        assert!(matches!(
            trial(quoted),
            Some(Ended::Refused { nested: false, .. })
        ));
    }
}
