//! Reduced mode, the outer side: sbx stays the parent of the stage
//! (`reduced.rs`), which becomes the command.
//!
//! There is no PID namespace to end with the command, so sbx is a child
//! subreaper: whatever the command leaves running (a daemon it forked, a
//! process that double-forked away) is re-parented to sbx, which kills it
//! once the command has ended, before the checks after the run look at the
//! project; otherwise a leftover could plant a git hook after them. There
//! is no read-only mount either: the "runs later" paths are snapshotted
//! before the run and put back after it (`integrity`, after the fact).

use std::convert::Infallible;
use std::path::Path;

use anyhow::{bail, Context, Result};

use super::bwrap::{self, Outcome};
use super::{check_after, reduced};
use crate::backend::{self, Plan};
use crate::banner::{self, Style};
use crate::config::Require;
use crate::integrity::Checks;
use crate::policy::{Host, Network, Policy};

/// Run the command in reduced mode; `why` says why (bubblewrap's failure,
/// or `backend = "reduced"`), `fix` how the full sandbox could run here.
pub fn run(
    policy: &Policy,
    host: &Host,
    style: Style,
    shell_command: bool,
    why: &str,
    fix: &str,
) -> Result<Infallible> {
    let fix = if fix.is_empty() {
        String::new()
    } else {
        format!(" ({fix})")
    };
    let Some(landlock) = reduced::probe() else {
        return super::super::unavailable(
            policy,
            style,
            &format!("{why}{fix}, and reduced mode needs Landlock ABI 3 (Linux 6.2) or newer, which this kernel does not offer"),
        );
    };
    if policy.require == Require::Full {
        bail!("cannot run the full sandbox: {why}{fix}; refusing reduced mode because `require = true` (set require = \"reduced\" to accept Landlock and seccomp here); the command was not run");
    }
    let cache = host.cache_dir.as_deref();
    cache_out_of_reach(policy, cache)?;
    let proxy = start_proxy(policy, host, landlock)?;
    let sbx = std::env::current_exe().context("finding sbx")?;
    let plan = backend::reduced::render(policy, &sbx, proxy.as_ref().map(|p| &p.proxy));
    say_what_is_not_enforced(policy, style, why, landlock);
    let checks = Checks::record(policy, cache, None, true)?;
    let show_banner = banner::wanted(policy.banner, shell_command);
    let on_started = || {
        if show_banner {
            banner::print_active(style, &banner::summary(policy, "reduced"));
        }
    };
    // A subreaper too: if the keeper itself is killed, its orphans come
    // here (a watcher this run started is on its own by then).
    crate::envscan::watch::settle();
    nix::sys::prctl::set_child_subreaper(true).context("becoming a child subreaper")?;
    let kept = kept(&plan, &sbx, cache, &policy.limits.inner_args());
    let parent = parent_pipe()?;
    let group = super::memory_group(policy, style);
    let start = bwrap::Start {
        on_started: &on_started,
        guardian: None,
        group: group.as_ref(),
        // Reduced mode mounts no masks.
        masks: None,
        style,
    };
    let outcome = bwrap::run_sandboxed(&kept, &start);
    // sbx's own group holds its caller: never stopped.
    super::leftovers::kill_all(nix::unistd::getpgrp().as_raw() as u32);
    drop(parent);
    super::say_if_memory_stopped(policy, group);
    match outcome {
        Ok(Outcome::Exited(code)) => {
            let code = check_after(checks, style, code);
            drop(proxy);
            std::process::exit(i32::from(code))
        }
        Ok(Outcome::NotStarted(_) | Outcome::NoCopies(_)) => {
            // The stage said why on stderr; nothing ran.
            drop(checks);
            drop(proxy);
            bail!("reduced mode could not be set up (see above); the command was not run")
        }
        Err(e) => {
            let _ = check_after(checks, style, 0);
            drop(proxy);
            Err(e)
        }
    }
}

/// The notes and snapshots the checks after the run rely on live in sbx's
/// cache directory: without a mount to keep it read-only, it must lie
/// outside every writable root. Compared by its real path, as the writable
/// roots are (a home reached through a link would otherwise hide it).
fn cache_out_of_reach(policy: &Policy, cache: Option<&Path>) -> Result<()> {
    let Some(cache) = cache else {
        return Ok(());
    };
    let real = std::fs::canonicalize(cache).unwrap_or_else(|_| cache.to_path_buf());
    if let Some(root) = policy.writable.iter().find(|w| real.starts_with(w)) {
        bail!(
            "reduced mode cannot keep sbx's cache directory ({}) out of the command's reach: it lies in the writable root {}; make narrower paths writable, or set XDG_CACHE_HOME to a directory outside every writable root; the command was not run",
            cache.display(),
            root.display()
        );
    }
    Ok(())
}

/// The allowlist proxy, on a loopback port, where Landlock can confine
/// the command to that port (ABI 4); without it the allowlist is denied.
fn start_proxy(
    policy: &Policy,
    host: &Host,
    landlock: backend::reduced::Landlock,
) -> Result<Option<super::super::allowlist::RunningProxy>> {
    match &policy.network {
        Network::Allowlist(rules) if landlock.network() => {
            Ok(Some(super::super::allowlist::start_proxy(
                rules,
                host,
                true,
                &policy.writable,
                policy.banner != crate::config::BannerMode::Never,
            )?))
        }
        _ => Ok(None),
    }
}

/// Say, on every run, that this is reduced mode, why, and what it does not
/// enforce here.
fn say_what_is_not_enforced(
    policy: &Policy,
    style: Style,
    why: &str,
    landlock: backend::reduced::Landlock,
) {
    let unenforced = backend::reduced::unenforced(policy, landlock);
    banner::warn(
        style,
        &format!(
            "reduced mode ({why}): Landlock ABI {}{} and seccomp; not enforced here: {}",
            landlock.abi,
            if landlock.scopes() { " or later" } else { "" },
            unenforced.join("; ")
        ),
    );
}

/// The descriptor on which the keeper inherits the pipe from sbx.
const PARENT_FD: i32 = 101;

/// The stage's plan, run by the keeper (`keeper.rs`), which is told the
/// limits too (`--limit` arguments), to say which one stopped the command.
fn kept(plan: &Plan, sbx: &Path, cache: Option<&Path>, limits: &[String]) -> Plan {
    let mut args: Vec<std::ffi::OsString> = vec![
        "__keep".into(),
        "--parent-fd".into(),
        PARENT_FD.to_string().into(),
    ];
    if let Some(cache) = cache {
        args.push("--cache".into());
        args.push(cache.as_os_str().to_owned());
    }
    args.extend(limits.iter().map(std::ffi::OsString::from));
    args.push("--".into());
    args.push(plan.program.as_os_str().to_owned());
    args.extend(plan.args.iter().cloned());
    Plan {
        program: sbx.to_path_buf(),
        args,
        ..plan.clone()
    }
}

/// The pipe whose breaking tells the keeper that sbx is gone: its read end
/// on [`PARENT_FD`] for the keeper to inherit, its write end (returned)
/// sbx's alone, closed when sbx exits however it exits.
fn parent_pipe() -> Result<std::os::fd::OwnedFd> {
    use std::os::fd::AsRawFd;
    let (read, write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("creating the keeper's pipe")?;
    // dup2 leaves the copy without close-on-exec: the keeper inherits it.
    nix::unistd::dup2(read.as_raw_fd(), PARENT_FD).context("placing the keeper's pipe")?;
    // Which process sbx is, first: the keeper's checks after a killed sbx
    // wait for it to be gone.
    if let Some(line) = super::guardian::run_line() {
        nix::unistd::write(&write, line.as_bytes()).context("writing to the keeper's pipe")?;
    }
    Ok(write)
}

/// The plan of `sbx profile --backend reduced` (also shown on a host where
/// bubblewrap works).
pub fn plan(policy: &Policy, sbx: &Path, proxy: Option<&backend::Proxy>) -> Plan {
    backend::reduced::render(policy, sbx, proxy)
}
