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
    // The victim is this test's child: killed from inside, it would stay a
    // zombie with that signal until waited for. Ended here with a signal
    // of its own, it reports which one ended it, with no wait for time.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGUSR1,
    );
    let ended = victim.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&ended),
        Some(nix::libc::SIGUSR1),
        "a host process was killed from inside ({ended:?}):\n{}",
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
    // The job tries `late-pwn` before it writes `late-ok.txt`: once the
    // second is there, the first attempt is over.
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

/// The rlimits macOS applies reach the command; the process cap, which
/// macOS counts per user, is named as not enforced.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn file_size_and_cpu_limits_stop_the_command_and_say_so() {
    require_sandbox!();
    let world = World::new();
    let out = Seatbelt.run(
        &world,
        &["--max-file-size", "1M"],
        &["dd", "if=/dev/zero", "of=big", "bs=1048576", "count=3"],
        &[],
    );
    crate::scenarios::a_large_write_was_stopped(&world, &out);
    let spin = Seatbelt.run(
        &world,
        &["--cpu-time", "1"],
        &["sh", "-c", "while :; do :; done"],
        &[],
    );
    assert_eq!(spin.status.code(), Some(128 + 24), "{}", both(&spin));
    assert!(
        stderr(&spin).contains("stopped by the cpu_time limit (1 s)"),
        "{}",
        both(&spin)
    );
    let check = world
        .sbx()
        .args(["check", "--max-processes", "64", "--max-memory", "1G"])
        .output()
        .unwrap();
    let said = stdout(&check);
    assert!(
        said.contains("limit:    max_processes 64: NOT enforced (macOS counts processes per user"),
        "{}",
        both(&check)
    );
    assert!(
        said.contains("limit:    max_memory 1G: NOT enforced"),
        "{}",
        both(&check)
    );
}
