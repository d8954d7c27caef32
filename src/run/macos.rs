//! The macOS run path. sbx stays the parent of sandbox-exec
//! ([`super::sandbox_exec`]); Seatbelt's rules follow the path, whatever is
//! there, so nothing is left to check after the run. There is no inner
//! stage: the profile is the whole sandbox.

use std::convert::Infallible;
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Result};

use super::allowlist::RunningProxy;
use super::sandbox_exec::{profile_refusal, run_seatbelt, Ended};
use crate::backend::Plan;
use crate::banner::{self, Style};
use crate::cli;
use crate::policy::Policy;

/// What sbx runs to find out whether sandbox-exec applies a profile at all.
const TRUE: &str = "/usr/bin/true";

/// Execute a Seatbelt plan. sbx stays the parent of sandbox-exec: to serve
/// the allowlist proxy, and to tell a profile sandbox-exec refused (nothing
/// ran) from a command that failed.
pub fn run_plan(
    plan: &Plan,
    policy: &Policy,
    style: Style,
    shell_command: bool,
    proxy: Option<RunningProxy>,
    _host: &crate::policy::Host,
) -> Result<Infallible> {
    let true_program = Path::new(TRUE);
    // Inside sbx's own sandbox (a tool there running `$SHELL -c` with
    // SHELL=sbx), macOS refuses a second profile: the command runs in the
    // sandbox it is in, as on Linux. The variable says it may be sbx's, the
    // refusal of a trial run proves a sandbox is there (a variable alone
    // proves nothing: anyone can set it); the trial also keeps
    // sandbox-exec's complaint off the command's stderr.
    if std::env::var_os("SBX_SANDBOX").is_some_and(|v| v == "1")
        && matches!(
            profile_refusal(plan, true_program),
            Some(Ended::Refused { nested: true, .. })
        )
    {
        return crate::exec::exec_unsandboxed(&policy.command);
    }
    if banner::wanted(policy.banner, shell_command) {
        banner::print_active(style, &banner::summary(policy, "seatbelt"));
    }
    let ended = run_seatbelt(plan, true_program, &policy.limits.values());
    drop(proxy);
    if let Some(dir) = &plan.tmpdir {
        remove_run_dir(dir, style);
    }
    match ended? {
        Ended::Exited(code) => std::process::exit(code),
        // Inside another Seatbelt sandbox (an agent's own): a fact about
        // where sbx runs, like a machine without bubblewrap.
        Ended::Refused {
            nested: true,
            words,
        } => super::unavailable(
            policy,
            style,
            &format!(
                "sbx already runs inside a Seatbelt sandbox, and macOS does not nest them ({})",
                banner::sanitize(&words)
            ),
        ),
        Ended::Refused {
            nested: false,
            words,
        } => bail!(
            "sandbox-exec refused the profile, so the command was not run ({}); `sbx profile` prints it, and this is a bug worth reporting with your macOS version",
            banner::sanitize(&words)
        ),
    }
}

/// Remove the directory this run made for the command (its `TMPDIR`), as a
/// Linux run's tmpfs goes with its sandbox. Links in it are removed, never
/// followed. What a background job of the command's still writes there is
/// lost with it.
fn remove_run_dir(dir: &Path, style: Style) {
    if let Err(e) = std::fs::remove_dir_all(dir) {
        if e.kind() != std::io::ErrorKind::NotFound {
            banner::warn(
                style,
                &format!(
                    "could not remove this run's TMPDIR {} ({e}); remove it yourself",
                    dir.display()
                ),
            );
        }
    }
}

/// Nothing is started ahead on macOS: sandbox-exec starts fast.
pub fn start_ahead(_sbx: &Path) {}

/// Nothing was started ahead.
pub fn abandon_ahead() {}

/// There is no inner stage on macOS: the command line as it is.
pub fn inner_argv(argv: Vec<OsString>) -> Result<Vec<OsString>> {
    Ok(argv)
}

/// `sbx __inner`: the inner stage exists only on Linux.
pub fn inner(_args: cli::InnerArgs) -> Result<ExitCode> {
    bail!("the inner stage exists only on Linux")
}

/// `sbx __guard`: no checks follow a run on macOS (Seatbelt's rules
/// follow the path), so there is nothing to guard.
pub fn guard(_cache: &Path) -> Result<ExitCode> {
    bail!("the guardian exists only on Linux")
}

/// `sbx __filter`: the inner stage exists only on Linux.
pub fn filter(_command: &[OsString]) -> Result<ExitCode> {
    bail!("the inner stage exists only on Linux")
}

/// Inside sbx's own sandbox, macOS refuses a second profile; that is found
/// out when the plan runs ([`run_plan`]), not here.
pub fn already_sandboxed() -> bool {
    false
}

/// Nothing to recover: no run leaves checks for the next one on macOS.
pub fn recover_killed_runs(_cache: &Path, _style: Style) -> Result<()> {
    Ok(())
}

/// No private git config copies on macOS yet: git configs stay read-only
/// there.
pub fn config_copies(_cache: &Path) -> Option<std::path::PathBuf> {
    None
}

/// The environment as the policy sees it: with the per-user temporary
/// directory as `$TMPDIR` when it is missing.
pub fn host_env(env: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
    with_darwin_tmpdir(env)
}

/// Without `$TMPDIR`, macOS programs use the per-user temporary directory
/// the system names (`confstr(_CS_DARWIN_USER_TEMP_DIR)`); it is made
/// writable like `$TMPDIR`, so it is looked up here (with `getconf`, by
/// absolute path, only when the variable is missing).
fn with_darwin_tmpdir(mut env: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
    if env.iter().any(|(k, v)| k == "TMPDIR" && !v.is_empty()) {
        return env;
    }
    let found = std::process::Command::new("/usr/bin/getconf")
        .arg("DARWIN_USER_TEMP_DIR")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| s.starts_with('/'));
    if let Some(dir) = found {
        env.retain(|(k, _)| k != "TMPDIR");
        env.push(("TMPDIR".into(), dir.into()));
    }
    env
}

/// Whether the command may have its own Unix sockets on this macOS: the
/// verdict kept for this build, or the probe's (see [`super::socket_probe`]),
/// run under this run's profile with `/private/tmp` writable. `runs` is the
/// user's directory of runs.
pub fn sockets_stay(
    policy: &Policy,
    host: &crate::policy::Host,
    runs: &Path,
) -> Result<(), String> {
    use super::socket_probe::{keep, kept, Verdict};
    let build = nix::sys::utsname::uname()
        .map(|u| u.version().to_string_lossy().into_owned())
        .map_err(|e| format!("is left unused: the macOS version is unknown ({e})"))?;
    let cache = host.cache_dir.as_deref();
    let verdict = match cache.and_then(|c| kept(c, &build)) {
        Some(v) => v,
        None => {
            let v = probe(policy, host, runs)?;
            if let Some(c) = cache {
                keep(c, &build, v);
            }
            v
        }
    };
    match verdict {
        Verdict::Stay => Ok(()),
        Verdict::Leave => Err(format!(
            "is left unused: on this macOS a rename can carry a socket out of the command's directory (found once per macOS build; remove {} to look again)",
            cache.map_or_else(|| "nothing".into(), |c| c.join("macos-sockets").display().to_string())
        )),
    }
}

/// Run `sbx __socket-probe` under the profile `policy` gives, and judge
/// where its socket ended up.
fn probe(
    policy: &Policy,
    host: &crate::policy::Host,
    runs: &Path,
) -> Result<super::socket_probe::Verdict, String> {
    use std::os::unix::fs::DirBuilderExt;
    let sbx = host
        .self_exe
        .as_deref()
        .ok_or("is left unused: sbx cannot find its own executable to check it")?;
    let token = crate::proxy::random_token().map_err(|e| format!("is left unused ({e})"))?;
    let places = super::socket_probe::Places::new(
        runs,
        nix::unistd::geteuid().as_raw(),
        token.get(..10).unwrap_or(&token),
    );
    let mut builder = std::fs::DirBuilder::new();
    builder.mode(0o700);
    let made = builder
        .create(&places.tmpdir)
        .and_then(|()| builder.create(&places.into));
    let mut probe = policy.clone();
    let private_tmp = std::path::PathBuf::from("/private/tmp");
    if !probe.writable.contains(&private_tmp) {
        probe.writable.push(private_tmp);
    }
    probe.command = vec![
        sbx.into(),
        "__socket-probe".into(),
        places.tmpdir.clone().into(),
        places.into.clone().into(),
        places.moved.clone().into(),
    ];
    let ran = made.map_err(|e| e.to_string()).and_then(|()| {
        let plan = crate::backend::seatbelt::render(&probe, sbx, None, Some(&places.tmpdir))
            .map_err(|e| format!("{e:#}"))?;
        let mut cmd = crate::exec::prepare(&plan).map_err(|e| format!("{e:#}"))?;
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map_err(|e| e.to_string())
    });
    let verdict = places.judge();
    places.remove();
    match (verdict, ran) {
        (Some(v), _) => Ok(v),
        (None, Err(e)) => Err(format!(
            "is left unused: the check that sockets stay in place could not run ({e})"
        )),
        (None, Ok(_)) => {
            Err("is left unused: the check that sockets stay in place bound no socket".into())
        }
    }
}

/// `max_memory` has no mechanism on macOS.
pub fn memory_cap() -> Result<&'static str, &'static str> {
    Err("macOS offers sbx no way to cap the memory of a process tree")
}

/// Why the probe's sandbox did not start: what sandbox-exec said (never a
/// reason to try another sandbox: macOS has one).
pub fn probe_not_started(_plan: &Plan, stderr: &str) -> (String, bool) {
    (
        format!(
            "sandbox-exec did not run the probe [{}]",
            banner::sanitize(stderr.trim())
        ),
        false,
    )
}

/// `sbx __keep`: Linux only.
pub fn keep(
    _parent_fd: i32,
    _cache: Option<&Path>,
    _limits: &[String],
    _stage: &[OsString],
) -> Result<ExitCode> {
    bail!("reduced mode (Landlock and seccomp) exists on Linux only")
}

/// `sbx __reduced`: Linux only.
pub fn reduced_stage(_args: cli::ReducedArgs) -> Result<ExitCode> {
    bail!("reduced mode (Landlock and seccomp) exists on Linux only")
}

/// Reduced mode: Linux only; on macOS the backend is Seatbelt.
pub fn run_reduced(
    _policy: &Policy,
    _host: &crate::policy::Host,
    _style: Style,
    _shell_command: bool,
    _why: &str,
) -> Result<Infallible> {
    bail!("reduced mode (Landlock and seccomp) exists on Linux only")
}

/// The reduced-mode plan: rendered on any host, like every plan.
pub fn reduced_plan(policy: &Policy, sbx: &Path, proxy: Option<&crate::backend::Proxy>) -> Plan {
    crate::backend::reduced::render(policy, sbx, proxy)
}

/// No Landlock here.
pub fn landlock() -> Option<crate::backend::reduced::Landlock> {
    None
}
