//! Where sbx starts other programs: the sandbox (as its parent), or the
//! command itself when it runs unsandboxed. What each platform does as the
//! sandbox's parent is in `crate::run`; what they share is here.
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

/// One reason the Linux sandbox cannot start. The diagnosis after a sandbox
/// that did not start names the others (`run::linux::probe`, Linux only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cause {
    /// Stable identifier (shown by `sbx check --format json`).
    pub id: &'static str,
    /// What is wrong, as a sentence fragment.
    pub what: &'static str,
    /// The narrowest fix.
    pub fix: &'static str,
}

/// The one cause found before any sandbox runs, by [`find_bwrap`]: wherever
/// a Linux plan is rendered (`sbx profile --platform linux` on macOS too).
pub const BWRAP_MISSING: Cause = Cause {
    id: "bwrap-missing",
    what: "bubblewrap (bwrap) is not installed",
    fix: "install it: `apt-get install bubblewrap`, `dnf install bubblewrap` or `pacman -S bubblewrap`",
};

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
    // PATH is searched only when `/usr/bin/bwrap` will not do: the first
    // candidate that does wins, and looking through PATH first cost a
    // `stat` per directory on every run.
    let on_path = path_var
        .and_then(|path| which::which_in_all("bwrap", Some(path), &policy.cwd).ok())
        .into_iter()
        .flatten();
    let candidates = std::iter::once(PathBuf::from(SYSTEM_BWRAP)).chain(on_path);
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
    let cause = BWRAP_MISSING;
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

/// Create what the plan needs on the host and build the command.
pub fn prepare(plan: &Plan) -> Result<Command> {
    prepare_host(plan)?;
    Ok(command(plan))
}

/// The plan as a command to spawn (its program, arguments and environment).
pub fn command(plan: &Plan) -> Command {
    let mut cmd = Command::new(&plan.program);
    cmd.args(&plan.args);
    if let Some(env) = &plan.env {
        apply_env(&mut cmd, env);
    }
    cmd
}

/// What the plan needs on the host before it runs: the missing "runs
/// later" paths created, the placeholder made sure of.
pub fn prepare_host(plan: &Plan) -> Result<()> {
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
    Ok(())
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

/// Run a command as it is, without any sandbox.
pub fn exec_unsandboxed(command: &[OsString]) -> Result<Infallible> {
    // A bubblewrap started ahead would outlive the exec, waiting.
    crate::run::abandon_ahead();
    // The command would inherit it as a child.
    #[cfg(target_os = "linux")]
    crate::envscan::watch::settle();
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
