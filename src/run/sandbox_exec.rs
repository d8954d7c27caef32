//! sbx as the parent of sandbox-exec (macOS): it runs the plan, passes
//! signals on from a thread that takes them with `sigwait` (macOS has no
//! signalfd), and tells a profile sandbox-exec refused (nothing ran) from a
//! command that failed.
//!
//! Linux compiles it for its tests only: a shell script stands in for
//! sandbox-exec there.

use std::os::fd::AsFd;
use std::path::Path;

use anyhow::{Context, Result};
use nix::sys::signal::{kill, SigSet, Signal};
use nix::unistd::Pid;

use crate::backend::Plan;
use crate::exec::prepare;
use crate::supervise::{block, FORWARDED};

/// How a run through sandbox-exec ended.
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
///
/// `limits` (`NAME=VALUE`, see `Limits::values`) are set as rlimits on
/// sandbox-exec, which the command inherits; sbx says after the run if one
/// of them stopped the command.
pub fn run_seatbelt(plan: &Plan, true_program: &Path, limits: &[String]) -> Result<Ended> {
    use std::os::unix::process::ExitStatusExt;
    let mut cmd = prepare(plan)?;
    set_in_child(&mut cmd, crate::limits::planned(limits)?);
    // A descriptor the caller left open (a socket to a host service, say)
    // must not cross into the sandbox: Seatbelt checks only what is opened
    // after it applies.
    close_on_exec_above_stderr();
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot execute {}", plan.program.display()))?;
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let forwarding = forward_signals(pid)?;
    let status = child.wait().context("waiting for the command");
    drop(forwarding);
    let status = status?;
    let code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    if let Some(said) = status
        .signal()
        .and_then(|sig| crate::limits::stopped_by(sig, limits))
    {
        eprintln!("sbx: {said}");
    }
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

/// Set `rlimits` in the child, between its fork and its exec of
/// sandbox-exec: the command inherits them, and sbx keeps its own (its
/// proxy needs descriptors, its CPU time is not the command's).
fn set_in_child(cmd: &mut std::process::Command, rlimits: Vec<crate::limits::Rlimit>) {
    use std::os::unix::process::CommandExt;
    if rlimits.is_empty() {
        return;
    }
    let set = move || {
        for &(resource, soft, hard) in &rlimits {
            nix::sys::resource::setrlimit(resource, soft, hard).map_err(std::io::Error::from)?;
        }
        Ok(())
    };
    // SAFETY: `pre_exec` runs the closure in the forked child, where only
    // async-signal-safe work is allowed. It reads a vector built before
    // the fork and calls setrlimit(2) directly; an error becomes an
    // io::Error from its errno, which allocates nothing. No lock is taken.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(set);
    }
}

/// Mark every descriptor above 2 close-on-exec.
fn close_on_exec_above_stderr() {
    use nix::fcntl::{fcntl, FcntlArg, FdFlag};
    for fd in crate::supervise::descriptors_above_stderr().unwrap_or_default() {
        let _ = fcntl(fd, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC));
    }
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
            inner_at: None,
            copies: None,
            without_copies: None,
            tmpdir: None,
            masked: Vec::new(),
        }
    }

    #[test]
    fn a_commands_own_status_is_passed_on() {
        let ran =
            |script: &str| run_seatbelt(&fake_seatbelt(script, "cmd"), Path::new("/bin/true"), &[]);
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
            |script: &str| run_seatbelt(&fake_seatbelt(script, "cmd"), Path::new("/bin/true"), &[]);
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

    #[test]
    fn limits_are_set_for_the_command_only() {
        use nix::sys::resource::{getrlimit, Resource};
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("limits");
        let script = format!("ulimit -n > '{o}'; ulimit -t >> '{o}'", o = out.display());
        let limits = ["file-size=1048576", "open-files=64", "cpu-time=7"].map(String::from);
        let before = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        let ran = run_seatbelt(
            &fake_seatbelt(&script, "cmd"),
            Path::new("/bin/true"),
            &limits,
        );
        assert_eq!(ran.unwrap(), Ended::Exited(0));
        // (The file size limit is judged below, by what a write leaves.)
        let seen = std::fs::read_to_string(&out).unwrap();
        assert_eq!(seen.split_whitespace().collect::<Vec<_>>(), ["64", "7"]);
        // sbx's own are untouched.
        assert_eq!(getrlimit(Resource::RLIMIT_NOFILE).unwrap(), before);
        // A limit that stops the command does not change its status.
        let big = format!(
            "dd if=/dev/zero of='{}' bs=1M count=3 2>/dev/null",
            dir.path().join("big").display()
        );
        let ran = run_seatbelt(&fake_seatbelt(&big, "cmd"), Path::new("/bin/true"), &limits);
        assert_eq!(ran.unwrap(), Ended::Exited(128 + nix::libc::SIGXFSZ));
        assert!(std::fs::metadata(dir.path().join("big")).unwrap().len() <= 1 << 20);
    }
}
