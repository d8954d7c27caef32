//! Processes: host processes out of reach, background jobs, the environment.

use super::*;

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn host_processes_cannot_be_signalled() {
    require_sandbox!();
    let world = World::new();
    let mut victim = Command::new("sleep")
        .arg(unique(60))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = victim.id();
    let out = Seatbelt.run_sh(
        &world,
        &format!(
            "kill {pid} ; echo \"kill=$?\"
             kill -9 {pid} ; echo \"kill9=$?\"
             kill -0 {pid} ; echo \"kill0=$?\"
             sleep 30 & O=$!
             kill $O && echo OWN-KILL-OK"
        ),
    );
    std::thread::sleep(Duration::from_millis(200));
    let alive = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(
        alive,
        "a host process was killed from inside:\n{}",
        both(&out)
    );
    assert_no_line_starting(&out, "kill=0");
    assert_no_line_starting(&out, "kill9=0");
    // Positive control: signals within the sandbox work.
    assert_line(&out, "OWN-KILL-OK");
    // Whether `kill -0` (existence only) is refused too is recorded, not required.
    if lines(&out).iter().any(|l| l == "kill0=0") {
        eprintln!(
            "note: kill -0 of a host process succeeds inside the sandbox (existence is visible)"
        );
    }
}

/// Nothing ties a background job to sbx on macOS (sbx becomes sandbox-exec,
/// which becomes the command): a job may outlive it, but stays sandboxed.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn background_job_that_outlives_sbx_stays_sandboxed() {
    require_sandbox!();
    let world = World::new();
    let duration = unique(1);
    let out = Seatbelt.run_sh(
        &world,
        &format!(
            "(sleep {duration}; echo late > \"$HOME/late-pwn\"; echo late > late-ok.txt) >/dev/null 2>&1 &
             echo STARTED"
        ),
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "STARTED");
    let ok = world.project.join("late-ok.txt");
    let start = Instant::now();
    while !ok.exists() && start.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    kill_all(&pids_with_args(&format!("sleep {duration}")));
    // Positive control: the job did run after sbx had exited.
    assert!(ok.exists(), "the background job never ran");
    assert!(
        !world.home.join("late-pwn").exists(),
        "a job that outlived sbx wrote outside the sandbox"
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn credential_env_vars_are_removed() {
    require_sandbox!();
    scenarios::credential_env_vars_are_removed(&Seatbelt, &[("SSH_AUTH_SOCK", SECRET)], &[]);
}
