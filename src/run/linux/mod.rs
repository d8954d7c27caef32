//! The Linux run path. sbx stays the parent of bubblewrap ([`bwrap`]), whose
//! PID 1 is sbx's own inner stage ([`mod@inner`]); signals go through a
//! signalfd ([`signals`]); a sandbox that did not start is diagnosed
//! ([`probe`]); and the checks after the run are [`crate::integrity`]'s.

mod ahead;
mod bwrap;
mod cgroup;
mod copies;
mod guardian;
mod inner;
mod keeper;
mod leftovers;
mod mask_watch;
mod probe;
mod reduced;
mod reduced_run;
mod seccomp;
mod signals;
mod sockets;

use std::cell::RefCell;
use std::convert::Infallible;
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Result};

use self::bwrap::{NotStarted, Outcome};
use super::allowlist::RunningProxy;
use crate::backend::Plan;
use crate::banner::{self, Style};
use crate::cli;
use crate::config::Backend;
use crate::integrity::Checks;
use crate::policy::{Host, Policy};

/// Execute a sandbox plan. On Linux sbx stays as the parent of bubblewrap: to
/// tell a sandbox that could not start from a command that failed, and to
/// neutralise "runs later" paths that did not exist (so could not be mounted
/// read-only) if the command creates them.
pub fn run_plan(
    plan: &Plan,
    policy: &Policy,
    style: Style,
    shell_command: bool,
    proxy: Option<RunningProxy>,
    host: &Host,
) -> Result<Infallible> {
    let cache = host.cache_dir.as_deref();
    // Written down before the command starts, for the next run to check if
    // this sbx dies before it can (dropped once the checks are done).
    let checks = Checks::record(policy, cache, plan.copies.as_deref(), false)?;
    let show_banner = banner::wanted(policy.banner, shell_command);
    let on_started = || {
        if show_banner {
            banner::print_active(style, &banner::summary(policy, "bwrap"));
        }
    };
    // Prepared once the note is written, launched once bubblewrap is
    // spawned, and told "done" when dropped (after the checks); a run
    // without a note has nothing to guard. One that cannot start leaves a
    // killed run's checks to the next run.
    let guardian = cache.and_then(|c| guardian::prepare(c).ok());
    let group = memory_group(policy, style);
    let masks = watch_masks(plan, policy, style);
    let start = bwrap::Start {
        on_started: &on_started,
        guardian: guardian.as_ref(),
        group: group.as_ref(),
        masks: masks.as_ref(),
        style,
    };
    let outcome = without_copies_if_refused(
        bwrap::run_sandboxed(plan, &start),
        plan,
        &start,
        policy,
        style,
    );
    say_if_memory_stopped(policy, group);
    say_if_masks_stopped(masks.as_ref(), style);
    match outcome {
        Ok(Outcome::Exited(code)) => exit_after_run(checks, guardian, proxy, style, code),
        Ok(Outcome::NoCopies(why)) => {
            drop(checks);
            remove_copies(plan);
            drop(proxy);
            bail!("the sandbox could not be set up: {why}; the command was not run")
        }
        Ok(Outcome::NotStarted(why)) => {
            // Nothing ran: nothing for a later run to check, the copies
            // are of no use, nor the watch (see [`watch_masks`]).
            drop(masks);
            drop(checks);
            remove_copies(plan);
            drop(proxy);
            drop(guardian);
            never_started(policy, host, style, shell_command, why)
        }
        Err(e) => {
            // The command may have run: its checks are made all the same.
            let _ = check_after(checks, style, 0);
            drop(proxy);
            Err(e)
        }
    }
}

/// The sandbox ran: the after-run checks, then sbx exits with the
/// command's status (125 when a check failed).
fn exit_after_run(
    mut checks: Checks,
    guardian: Option<guardian::Guardian>,
    proxy: Option<RunningProxy>,
    style: Style,
    code: u8,
) -> ! {
    // Removing the copies can take a millisecond or more right after a
    // sandbox ends; the guardian does it once told "done".
    if guardian.as_ref().is_some_and(guardian::Guardian::launched) {
        checks.leave_copies();
    }
    // The checks come before the proxy's directory is removed: it may lie
    // in sbx's cache directory, itself watched when in a writable root, and
    // the removal would change its change time (its identity where there
    // is no birth time).
    let code = check_after(checks, style, code);
    drop(guardian);
    drop(proxy);
    std::process::exit(i32::from(code))
}

/// When the sandbox could not be set up with the private git config
/// copies (nothing ran), the plan without them: the copies are left unused
/// (removed after the run) and git configs are read-only mounts, which git
/// cannot write (`EBUSY`); once that run is over the user is told why,
/// rather than left to guess (not before: it may not start either).
fn without_copies_if_refused(
    outcome: Result<Outcome>,
    plan: &Plan,
    start: &bwrap::Start,
    policy: &Policy,
    style: Style,
) -> Result<Outcome> {
    match (&outcome, &plan.without_copies) {
        (Ok(Outcome::NoCopies(why)), Some(plain)) => {
            let outcome = bwrap::run_sandboxed(plain, start);
            if let Ok(Outcome::Exited(_)) = outcome {
                // Nor were the links on the way to git's files pinned.
                let links = if policy.pinned_links.is_empty() {
                    String::new()
                } else {
                    ", and the symbolic links on the way to git's hooks and config were not pinned (a replacement is moved aside after the run)".to_string()
                };
                banner::warn(
                    style,
                    &format!("git configs were read-only in this run (`git config` and `git remote add` cannot write them){links}: the set-up of their private copies failed: {why}"),
                );
            }
            outcome
        }
        _ => outcome,
    }
}

/// Why the watch on masked paths stopped the run, if it did: only when its
/// kill ended the sandbox (not when it had ended already).
fn say_if_masks_stopped(masks: Option<&mask_watch::MaskWatch>, style: Style) {
    let killed = signals::killed_by() == Some(nix::sys::signal::Signal::SIGKILL as i32);
    if let Some(why) = masks.and_then(mask_watch::MaskWatch::stopped_for) {
        if killed {
            banner::warn(style, &format!("the command was stopped: {why}"));
        }
    }
}

/// Watches on the directories on the way to the paths the plan masks (see
/// [`mask_watch`]); those that cannot be watched are said before the run.
/// Closed before a fallback run, which mounts no masks: a killed sbx's
/// last close of a watch takes the kernel 10 ms and more, and reduced
/// mode's keeper must see sbx's pipe break as soon as sbx dies.
fn watch_masks(plan: &Plan, policy: &Policy, style: Style) -> Option<mask_watch::MaskWatch> {
    let (watch, unwatched) = mask_watch::MaskWatch::new(&plan.masked, &policy.writable);
    if !unwatched.is_empty() {
        banner::warn(
            style,
            &format!(
                "cannot watch {} for a masked file replaced on the host during the run (it would be readable by the command)",
                unwatched.join(", ")
            ),
        );
    }
    watch
}

/// The run's own cgroup, where `max_memory` is set and this machine lets
/// sbx make one. Where it does not, sbx has said so before the run
/// (`Limits::unenforced`); a cgroup that cannot be made after all is said
/// now.
fn memory_group(policy: &Policy, style: Style) -> Option<cgroup::RunGroup> {
    let bytes = policy.limits.memory?;
    let place = cgroup::place().ok()?;
    cgroup::RunGroup::create(place, bytes)
        .map_err(|e| {
            banner::warn(
                style,
                &format!(
                    "max_memory = {} is NOT enforced: the run's cgroup could not be made ({e})",
                    crate::limits::Size(bytes)
                ),
            );
        })
        .ok()
}

/// Say so if the run's memory limit stopped the command (the kernel killed
/// one of its processes for it), then remove the run's cgroup.
fn say_if_memory_stopped(policy: &Policy, group: Option<cgroup::RunGroup>) {
    if let (Some(group), Some(bytes)) = (group, policy.limits.memory) {
        if group.limit_was_hit() {
            let shown = crate::limits::Size(bytes).to_string();
            eprintln!(
                "sbx: {}",
                crate::limits::stopped_message("max_memory", &shown)
            );
        }
    }
}

/// The command's own sockets stay in their directory: it is a mount of the
/// sandbox's, and nothing is renamed across a mount.
pub fn sockets_stay(
    _policy: &Policy,
    _host: &crate::policy::Host,
    _runs: &Path,
) -> Result<(), String> {
    Ok(())
}

/// How `max_memory` is enforced here (a cgroup of the run's own), or why it
/// is not.
pub fn memory_cap() -> Result<&'static str, &'static str> {
    cgroup::place().map(|p| p.how())
}

/// Remove the private config copies of a plan that never ran its command.
fn remove_copies(plan: &Plan) {
    if let Some(dir) = &plan.copies {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Make the checks after a command that ran; the exit status to report.
///
/// What the checks after the command find is said once they are all
/// done: the command may have stopped the terminal's output (`tcflow`),
/// and a warning blocking on it must not keep a planted file in place.
fn check_after(checks: Checks, style: Style, code: u8) -> u8 {
    let said = RefCell::new(Vec::<String>::new());
    let clean = checks.verify(&|text: &str| said.borrow_mut().push(text.to_string()));
    let said = said.take();
    if !said.is_empty() {
        resume_terminal_output();
    }
    for text in said {
        banner::warn(style, &text);
    }
    if clean {
        code
    } else {
        crate::error::EXIT_SBX_FAILED
    }
}

/// The sandbox never came up, so nothing ran: run the command without it
/// (loudly) or refuse, as the cause allows.
fn never_started(
    policy: &Policy,
    host: &Host,
    style: Style,
    shell_command: bool,
    why: NotStarted,
) -> Result<Infallible> {
    match why {
        // This machine cannot run bubblewrap: reduced mode where it is
        // wanted and accepted.
        NotStarted::Environment(cause, detail) if policy.backend == Backend::Auto => {
            reduced_run::run(
                policy,
                host,
                style,
                shell_command,
                &format!(
                    "bubblewrap cannot start here: {}{}",
                    cause.what,
                    bracket(&detail)
                ),
                cause.fix,
            )
        }
        NotStarted::Environment(cause, detail) => super::unavailable(
            policy,
            style,
            &format!("{}{} ({})", cause.what, bracket(&detail), cause.fix),
        ),
        // A sandbox starts here, just not this one: whatever broke it
        // (a project file, a planted path) may be the command's doing,
        // so it never earns an unsandboxed run.
        NotStarted::Policy(detail) => bail!(
            "the sandbox could not be set up for this project{}; the command was not run (sbx never falls back to running unsandboxed when only this project's sandbox fails: check the paths named above and the project's .sbx.toml)",
            bracket(&detail)
        ),
    }
}

/// Restart output on sbx's terminal if the command stopped it
/// (`tcflow(TCOOFF)`), so that what sbx has to say is not left blocking.
fn resume_terminal_output() {
    use std::os::fd::AsFd;
    let stderr = std::io::stderr();
    if stderr.is_terminal() {
        let _ = nix::sys::termios::tcflow(stderr.as_fd(), nix::sys::termios::FlowArg::TCOON);
    }
}

/// ` [text]`, or nothing for empty text.
fn bracket(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(" [{text}]")
    }
}

/// Where this run's private git config copies go in sbx's cache directory
/// (see `integrity::copies`), by its real path: bubblewrap cannot make a
/// bind's destination through a symbolic link (a home reached through
/// one), and the run would fall back to read-only configs every time.
pub fn config_copies(cache: &Path) -> Option<std::path::PathBuf> {
    let real = std::fs::canonicalize(cache).unwrap_or_else(|_| cache.to_path_buf());
    crate::integrity::copies::dir(&real)
}

/// `sbx __guard`: see [`guardian`].
pub fn guard(cache: &Path) -> Result<ExitCode> {
    guardian::guard(cache)
}

/// `sbx __keep`: reduced mode's keeper (see [`keeper`]).
pub fn keep(
    parent_fd: i32,
    cache: Option<&Path>,
    limits: &[String],
    stage: &[OsString],
) -> Result<ExitCode> {
    keeper::keep(parent_fd, cache, limits, stage)
}

/// `sbx __reduced`: reduced mode's stage, which becomes the command.
pub fn reduced_stage(args: cli::ReducedArgs) -> Result<ExitCode> {
    reduced::run(args).map(|never| match never {})
}

/// Run the command in reduced mode (`backend = "reduced"`, or no
/// bubblewrap on this machine); `why` is said on every run.
pub fn run_reduced(
    policy: &Policy,
    host: &Host,
    style: Style,
    shell_command: bool,
    why: &str,
) -> Result<Infallible> {
    ahead::abandon();
    reduced_run::run(policy, host, style, shell_command, why, "")
}

/// The reduced-mode plan, for `sbx profile --backend reduced`.
pub fn reduced_plan(policy: &Policy, sbx: &Path, proxy: Option<&crate::backend::Proxy>) -> Plan {
    reduced_run::plan(policy, sbx, proxy)
}

/// Reduced mode's Landlock here, when it has ABI 3 or newer.
pub fn landlock() -> Option<crate::backend::reduced::Landlock> {
    reduced::probe()
}

/// Start bubblewrap ahead of the plan, with `sbx` as its inner stage
/// (see [`ahead`]); a plan rendered later uses it if it can.
pub fn start_ahead(sbx: &Path) {
    ahead::start(sbx);
}

/// Kill the bubblewrap started ahead, if no plan took it: sbx goes on
/// without it, or ends.
pub fn abandon_ahead() {
    ahead::abandon();
}

/// The command line of an inner stage started ahead (`sbx __inner
/// --args-fd FD`) with the arguments it reads from `FD`; any other as it
/// is.
pub fn inner_argv(argv: Vec<OsString>) -> Result<Vec<OsString>> {
    ahead::inner_argv(argv)
}

/// `sbx __inner`: the second stage, PID 1 of the sandbox.
pub fn inner(args: cli::InnerArgs) -> Result<ExitCode> {
    let opts = seccomp::Options {
        unix: match (args.unix_sockets, &args.socket_dir) {
            (cli::UnixSocketsArg::Own, Some(_)) => seccomp::Unix::Own,
            (cli::UnixSocketsArg::Allow, _) => seccomp::Unix::Allow,
            _ => seccomp::Unix::Deny,
        },
        network: seccomp::NetFilter::Namespace,
    };
    inner::run(
        &args.command,
        opts,
        args.socket_dir
            .as_deref()
            .map(|dir| (dir, args.symlinks_in.as_slice())),
        args.ready_fd,
        args.proxy_socket.as_deref(),
        &args.limits,
        args.network_hint.as_deref(),
        args.config_copies.as_deref().map(|dir| copies::Setup {
            dir,
            configs: &args.private_configs,
            pins: &args.pins,
            links: &args.pinned_links,
            masks: args.mask_with.as_deref().map(|with| copies::Masks {
                with,
                files: &args.masks,
                if_present: &args.masks_if_present,
            }),
        }),
    )
    .map(|never| match never {})
}

/// `sbx __filter -- CMD`: in allowlist mode with Unix sockets denied, PID
/// 1 keeps Unix sockets (to reach the proxy), so the command gets the
/// Unix-socket rule from here.
pub fn filter(command: &[OsString]) -> Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    seccomp::apply(&[seccomp::command_program(seccomp::Unix::Deny)?])?;
    let Some((program, args)) = command.split_first() else {
        bail!("no command given");
    };
    let err = std::process::Command::new(program).args(args).exec();
    Ok(ExitCode::from(spawn_failure(program, &err)))
}

/// Whether this process already runs inside an sbx sandbox. Decided from
/// what the sandbox cannot fake away and the host cannot fake into existence
/// for sbx: this process is filtered, and PID 1 is sbx's inner stage (full
/// mode) or one of its ancestors is reduced mode's keeper.
pub fn already_sandboxed() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let filtered = status
        .lines()
        .any(|l| l.starts_with("Seccomp:") && l.trim_end().ends_with('2'))
        && status
            .lines()
            .any(|l| l.starts_with("NoNewPrivs:") && l.trim_end().ends_with('1'));
    if !filtered {
        return false;
    }
    let second_arg = |pid: u32| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        cmdline.split(|&b| b == 0).nth(1).map(<[u8]>::to_vec)
    };
    if second_arg(1).as_deref() == Some(b"__inner".as_slice()) {
        return true;
    }
    // Reduced mode: the keeper is the command's parent, or an ancestor
    // (a bounded walk up the parents).
    let mut pid = std::process::id();
    for _ in 0..64 {
        let Some(parent) = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|stat| leftovers::parent_in_stat(&stat))
        else {
            return false;
        };
        if parent <= 1 {
            return false;
        }
        if second_arg(parent).as_deref() == Some(b"__keep".as_slice()) {
            return true;
        }
        pid = parent;
    }
    false
}

/// Make the checks of earlier runs whose sbx was killed before it could
/// (see [`crate::integrity`]); an error when they found something.
pub fn recover_killed_runs(cache: &Path, style: Style) -> Result<()> {
    if !crate::integrity::journal::recover(cache, &|text: &str| banner::warn(style, text)) {
        bail!("an earlier sbx run was killed before its checks, and they found what is named above; review it, then run the command again");
    }
    Ok(())
}

/// The environment as the policy sees it: on Linux, as it is.
pub fn host_env(env: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
    env
}

/// Why the probe's sandbox did not start, and whether that is this
/// machine's doing (no sandbox of this kind starts here) rather than the
/// policy's.
pub fn probe_not_started(plan: &Plan, _stderr: &str) -> (String, bool) {
    match bwrap::diagnose(plan) {
        NotStarted::Environment(cause, detail) => {
            (format!("{} [{detail}] ({})", cause.what, cause.fix), true)
        }
        NotStarted::Policy(detail) => (format!(
            "the sandbox cannot be set up for this project [{detail}] (a sandbox does start here: check the paths named and the project's .sbx.toml)"
        ), false),
    }
}

/// Report a command that could not be started, the way a shell does, and
/// return its exit status: 127 when it does not exist, 126 otherwise.
pub(super) fn spawn_failure(program: &std::ffi::OsStr, err: &std::io::Error) -> u8 {
    let name = program.to_string_lossy();
    if err.kind() == std::io::ErrorKind::NotFound {
        eprintln!("sbx: {name}: command not found inside the sandbox");
        crate::error::EXIT_NOT_FOUND
    } else {
        eprintln!("sbx: {name}: cannot execute: {err}");
        crate::error::EXIT_NOT_EXECUTABLE
    }
}
