//! Regressions: every bypass the two adversarial reviews found, replayed
//! against sbx as it is now (the "Security:" commits fixed them). A test
//! whose finding turned out not to be fixed keeps asserting the safe
//! behaviour and says so in a `BUG:` comment.
//!
//! Each test is one finding, shaped like its proof of concept, and judged by
//! host-side evidence only: a marker the command writes in HOME is absent, the
//! planted secret appears in nothing it printed, a host file is unchanged or
//! was moved aside. Where an exit status matters (125: refused, nothing ran)
//! it is checked beside that evidence, never instead of it.
//!
//! The suite runs as root and as an unprivileged user (`.ci/run`). Cases that
//! only mean something for a user the kernel holds to file permissions say so
//! loudly when run as root, and still check what root can show.
//! `SBX_TEST_SHOW=1` prints every sandboxed run's output.

use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::host::{
    assert_absent, assert_line, assert_no_secret, both, diff, show, shq_path, snapshot, stderr,
    stdout, tool, unique,
};
use crate::require_sandbox;
use crate::util::{self, Runner, Sbx, World, SECRET, UID_MAP_ERROR};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// `sbx run FLAGS -- sh -c SCRIPT sh ARGS...` started in `dir`, stdin closed.
fn sbx_sh(world: &World, dir: &Path, flags: &[&str], script: &str, args: &[&str]) -> Output {
    let mut cmd = world.sbx_std();
    cmd.current_dir(dir);
    sh_in(&mut cmd, flags, script, args);
    let out = cmd.output().unwrap();
    show(script, &out);
    out
}

/// Add `run FLAGS -- sh -c SCRIPT sh ARGS...` to an sbx command.
fn sh_in(cmd: &mut Command, flags: &[&str], script: &str, args: &[&str]) {
    cmd.arg("run")
        .args(flags)
        .arg("--")
        .args(["sh", "-c", script, "sh"])
        .args(args)
        .stdin(Stdio::null());
}

/// Wait until the sandboxed command has written `up` in the project (it
/// has started), failing the test after the deadline.
fn wait_for_up(world: &World) {
    let start = Instant::now();
    while !world.project.join("up").exists() {
        assert!(
            start.elapsed() < util::DEADLINE,
            "the command never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Start `sbx run -- sh -c SCRIPT sh ARGS...` in the project, wait until
/// the command has written `up`, and SIGKILL sbx, as an agent's timeout
/// does. The child is returned unreaped: the caller waits for it (or, to
/// leave a zombie, does not yet).
fn killed_after_up(world: &World, script: &str, args: &[&str]) -> Child {
    let child = started_and_up(world, script, args);
    let _ = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status();
    child
}

/// `sbx run -- sh -c SCRIPT sh ARGS...`, output discarded, once its
/// command has written `up`.
fn started_and_up(world: &World, script: &str, args: &[&str]) -> Child {
    use std::os::unix::process::CommandExt;
    let mut cmd = world.sbx_std();
    sh_in(&mut cmd, &[], script, args);
    // In a process group of its own, as an agent's job is: the test stops
    // sbx below, and a stopped process in the test runner's group, were
    // that group orphaned (a CI runner started under `setsid`), would make
    // the kernel hang up the whole runner when the command dies.
    let child = cmd
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_up(world);
    child
}

/// [`killed_after_up`], with the run's guardian killed first: what an agent
/// that kills every process of the session does. The next run is then the
/// one that makes the killed run's checks.
fn killed_with_its_guardian_after_up(world: &World, script: &str, args: &[&str]) -> Child {
    let child = started_and_up(world, script, args);
    let cache = world.home.join(".cache/sbx");
    let guardians: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
            // Reduced mode's keeper is its run's guardian.
            (args.contains(&b"__guard".as_slice()) || args.contains(&b"__keep".as_slice()))
                && args.contains(&cache.as_os_str().as_encoded_bytes())
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(guardians.len(), 1, "the run's guardian: {guardians:?}");
    if util::contained() {
        // Reduced mode's keeper is the command's parent, and sbx the
        // keeper's: killing every process of the session kills the command
        // too (a keeper killed alone leaves it running, which reduced mode
        // names). sbx and the keeper are stopped first, so that neither
        // sees the command end and makes the checks this test leaves to
        // the next run.
        let parent_of = |pid: &str| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
                .map(str::to_string)
        };
        let keeper = guardians[0].as_str();
        let sbx = parent_of(keeper).unwrap_or_default();
        let _ = Command::new("kill").args(["-STOP", keeper, &sbx]).status();
        // Every descendant of the keeper, at any depth.
        let all: Vec<(String, Option<String>)> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .map(|pid| {
                let parent = parent_of(&pid);
                (pid, parent)
            })
            .collect();
        let mut tree = vec![keeper.to_string()];
        let mut i = 0;
        while i < tree.len() {
            let parent = tree[i].clone();
            tree.extend(
                all.iter()
                    .filter(|(_, p)| p.as_deref() == Some(parent.as_str()))
                    .map(|(pid, _)| pid.clone()),
            );
            i += 1;
        }
        let _ = Command::new("kill").arg("-KILL").args(&tree[1..]).status();
        // The keeper before sbx: a stopped keeper whose parent dies is in
        // an orphaned process group with a stopped process, which the
        // kernel wakes with SIGHUP and SIGCONT; it would make the checks
        // in the moment before it is killed.
        let _ = Command::new("kill").args(["-KILL", keeper]).status();
        let _ = Command::new("kill").args(["-KILL", &sbx]).status();
    }
    let _ = Command::new("kill").args(["-KILL", &guardians[0]]).status();
    let _ = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status();
    child
}

/// Wait until no host process has `needle` in its command line, failing the
/// test after the deadline. With a `sleep` duration from [`unique`] in a
/// killed run's script, this is the event "its sandbox is gone": bubblewrap,
/// the inner stage and the command all carry the script's words.
fn wait_until_no_process_has(needle: &str) {
    let start = Instant::now();
    loop {
        let left: Vec<String> = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .filter(|e| {
                std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                    String::from_utf8_lossy(&c)
                        .replace('\0', " ")
                        .contains(needle)
                })
            })
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            start.elapsed() < util::DEADLINE,
            "processes with {needle:?} still run: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The file the victim command writes in HOME: it can only land without a
/// sandbox.
/// The bwrap argv `sbx profile --platform linux` prints in the project.
fn linux_profile(world: &World) -> String {
    let out = world
        .sbx()
        .args(["profile", "--platform", "linux"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", both(&out));
    stdout(&out)
}

fn marker(world: &World) -> PathBuf {
    world.home.join("PWNED")
}

/// What the attacks of both reviews ran once the sandbox was gone: write in
/// HOME, print a credential, and say it ran.
fn victim(world: &World) -> String {
    format!(
        "touch {}; cat {}; echo VICTIM-RAN",
        shq_path(&marker(world)),
        shq_path(&world.home.join(".netrc"))
    )
}

/// Run in reduced mode, sandboxed: no marker in HOME, no secret, no
/// "NOT sandboxed".
fn assert_ran_sandboxed(world: &World, out: &Output) {
    assert!(stderr(out).contains("reduced mode ("), "{}", both(out));
    assert!(!marker(world).exists(), "{}", both(out));
    assert_absent(out, "NOT sandboxed");
    assert_no_secret(out);
}

/// Refused before anything ran: 125, no marker, the command never started,
/// no secret, and no "NOT sandboxed" fallback.
fn assert_not_run(world: &World, out: &Output) {
    assert_eq!(out.status.code(), Some(125), "{}", both(out));
    assert!(
        !marker(world).exists(),
        "the command ran unsandboxed (it wrote {})\n{}",
        marker(world).display(),
        both(out)
    );
    assert_absent(out, "VICTIM-RAN");
    assert_absent(out, "NOT sandboxed");
    assert_no_secret(out);
}

/// A successful sandboxed run (a positive control or a setup step).
fn assert_ok(out: &Output) {
    assert!(out.status.success(), "{}", both(out));
    assert_absent(out, "NOT sandboxed");
}

/// Whether anything exists at `p`, a dangling or planted link included.
fn present(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Poll until `p` exists; false after `timeout`.
fn wait_for(p: &Path, timeout: Duration) -> bool {
    let start = Instant::now();
    while !present(p) {
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// HOME as the host sees it, minus the project and sbx's cache (which a run
/// legitimately changes).
fn home_snapshot(world: &World) -> BTreeMap<PathBuf, String> {
    snapshot(&world.home)
        .into_iter()
        .filter(|(p, _)| !p.starts_with("my project") && !p.starts_with(".cache"))
        .collect()
}

// ---------------------------------------------------------------------------
// The tests, by topic
// ---------------------------------------------------------------------------

mod default_project;
mod fail_open;
mod home;
mod kernel_and_credentials;
mod proxy;
mod repositories;
mod seventh_review;
mod sweep;
