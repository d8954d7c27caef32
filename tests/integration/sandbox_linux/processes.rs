//! Namespaces, environment and processes, and the lifetime of the sandbox.

use super::*;

#[test]
fn nested_namespace_cannot_remount_root_writable() {
    require_sandbox!();
    let world = World::new();
    let target = world.home.join("remount-pwn");
    let out = Sbx.run_sh(
        &world,
        &format!(
            "export T={t}
             unshare -rm sh -c 'mount -o remount,rw / && echo pwn > \"$T\"'; echo \"unshare=$?\"
             unshare -rm true; echo \"plain-unshare=$?\"
             echo ok > control.txt",
            t = shq_path(&target)
        ),
    );
    assert!(!target.exists(), "{}", both(&out));
    assert!(stdout(&out).contains("unshare="), "{}", both(&out));
    assert_no_line_starting(&out, "unshare=0");
    assert_no_line_starting(&out, "plain-unshare=0");
    assert!(
        world.project.join("control.txt").is_file(),
        "{}",
        both(&out)
    );
}

#[test]
fn credential_env_vars_are_removed() {
    require_sandbox!();
    let jdbc = format!("jdbc:postgresql://db/x?password={SECRET}");
    let header = format!("Authorization: Bearer {SECRET}");
    scenarios::credential_env_vars_are_removed(
        &Sbx,
        &[
            ("MY_API_KEY", SECRET),
            ("AWS_BEARER_TOKEN_BEDROCK", SECRET),
            ("JDBC_URL", &jdbc),
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "http.extraHeader"),
            ("GIT_CONFIG_VALUE_0", &header),
        ],
        &[
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "MY_API_KEY",
            "AWS_BEARER_TOKEN_BEDROCK",
            "JDBC_URL",
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
        ],
    );
}

#[test]
fn env_passthrough_keeps_a_named_variable() {
    require_sandbox!();
    let world = World::new();
    world.user_config("[sandbox]\nenv_passthrough = [\"MY_API_KEY\"]\n");
    let out = Sbx.run_sh_env(
        &world,
        "env",
        &[
            ("MY_API_KEY", "passed-through-value"),
            ("GITHUB_TOKEN", SECRET),
        ],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "MY_API_KEY=passed-through-value");
    assert_no_secret(&out);
}

#[test]
fn host_processes_are_invisible_and_unkillable() {
    require_sandbox!();
    let world = World::new();
    let duration = unique(60);
    let mut host = Command::new("sleep")
        .arg(&duration)
        .env("SBX_HOST_ONLY", SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = host.id();
    let out = Sbx.run_sh(
        &world,
        &format!(
            "P={pid} D={frac}
             # Durations are split so this script's own command line does not
             # contain them; `case` runs in the shell, spawning nothing.
             seen() {{
               for f in /proc/[0-9]*/cmdline; do
                 c=$(tr '\\0' ' ' < \"$f\"); case \"$c\" in *\"$1\"*) return 0;; esac
               done
               return 1
             }}
             ls /proc | grep -qx $P && echo VISIBLE-PROC
             if command -v ps >/dev/null; then ps -eo pid= | tr -d ' ' | grep -qx $P && echo VISIBLE-PS; fi
             seen \"{int}$D\" && echo VISIBLE-ARGS
             cat /proc/$P/environ ; echo \"environ=$?\"
             kill $P ; echo \"kill=$?\"
             kill -9 $P ; echo \"kill9=$?\"
             # Positive controls: the same probes work on a sandboxed process.
             sleep 49$D & O=$!
             ls /proc | grep -qx $O && echo OWN-PID-SEEN
             seen \"49$D\" && echo OWN-ARGS-SEEN
             cat /proc/$O/environ >/dev/null && echo OWN-ENVIRON-OK
             kill $O && echo OWN-KILL-OK",
            int = duration.split('.').next().unwrap(),
            frac = shq(&duration[duration.find('.').unwrap()..]),
        ),
    );
    // The command has finished, so every kill(2) it made has returned: a
    // signal that got through has ended the process or is still pending.
    let untouched = host.try_wait().unwrap().is_none() && no_signal_pending(pid);
    let _ = host.kill();
    let _ = host.wait();
    assert!(
        untouched,
        "the host process was signalled from inside:\n{}",
        both(&out)
    );
    assert_no_secret(&out);
    // Reduced mode has no PID namespace: the host's processes are listed,
    // with their command lines, and it says so; their environment and
    // signals stay out of reach.
    if !util::unclaimed(&out, util::PROCESSES_VISIBLE) {
        assert_no_line_starting(&out, "VISIBLE");
    }
    assert_no_line_starting(&out, "environ=0");
    assert_no_line_starting(&out, "kill=0");
    assert_no_line_starting(&out, "kill9=0");
    for control in [
        "OWN-PID-SEEN",
        "OWN-ARGS-SEEN",
        "OWN-ENVIRON-OK",
        "OWN-KILL-OK",
    ] {
        assert_line(&out, control);
    }
}

/// Whether no signal is pending for the (unreaped) process `pid`. A fatal
/// signal stays in its shared pending set (`ShdPnd`) until it is reaped,
/// even once it is a zombie.
fn no_signal_pending(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let pending: Vec<&str> = status
        .lines()
        .filter(|l| l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
        .collect();
    assert_eq!(pending.len(), 2, "{status}");
    pending.iter().all(|l| {
        l.split_whitespace()
            .nth(1)
            .unwrap()
            .bytes()
            .all(|b| b == b'0')
    })
}

// ---------------------------------------------------------------------------
// Process lifetime
// ---------------------------------------------------------------------------

#[test]
fn background_jobs_die_with_the_command() {
    require_sandbox!();
    let world = World::new();
    // Longer than the bound below: sbx must not wait for it.
    let duration = unique(300);
    let needle = format!("sleep {duration}");
    let start = Instant::now();
    let out = Sbx.run_sh(
        &world,
        &format!("sleep {duration} >/dev/null 2>&1 & echo $!"),
    );
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        stdout(&out).trim().parse::<u32>().is_ok(),
        "the job did not start: {}",
        both(&out)
    );
    assert!(
        start.elapsed() < util::DEADLINE,
        "sbx waited for the background job"
    );
    let left = pgrep_until(Match::Contains(&needle), util::DEADLINE, |p| p.is_empty());
    kill_all(&left);
    assert!(
        left.is_empty(),
        "background job survived the sandbox: {left:?}"
    );
}

#[test]
fn killing_sbx_kills_the_whole_sandbox() {
    require_sandbox!();
    let world = World::new();
    let duration = unique(1000);
    let needle = format!("sleep {duration}");
    let mut child = world
        .sbx_std()
        .args([
            "run",
            "--",
            "sh",
            "-c",
            &format!("sleep {duration} & sleep {duration}; wait"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the command itself runs: both `sleep` processes (the exact
    // command line, not bwrap's or the inner stage's, which contain it too).
    let started = pgrep_until(Match::Exact(&needle), util::DEADLINE, |p| p.len() >= 2);
    assert_eq!(started.len(), 2, "the sandboxed sleeps never started");
    util::kill_sbx(&mut child); // SIGKILL
    child.wait().unwrap();
    let left = pgrep_until(Match::Contains(&needle), util::DEADLINE, |p| p.is_empty());
    kill_all(&left);
    assert!(
        left.is_empty(),
        "sandboxed processes outlived sbx: {left:?}"
    );
}

/// The same, with sbx killed while the sandbox is still being set up (an
/// agent's timeout can strike at any moment).
// Regression: a SIGKILL to sbx in its first milliseconds once left the
// sandbox running, orphaned: sbx died before bubblewrap's `--die-with-parent`
// held, or bubblewrap died before its child's did. The inner stage now holds
// a pipe to sbx as a lifeline and ends the sandbox when sbx is gone.
#[test]
fn killing_sbx_during_setup_kills_the_sandbox() {
    require_sandbox!();
    let world = World::new();
    let mut needles = Vec::new();
    for i in 0..32u64 {
        let duration = unique(1001);
        needles.push(format!("sleep {duration}"));
        let mut child = world
            .sbx_std()
            .args(["run", "--", "sleep", &duration])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The sleeps below are not waits for anything: they spread the kill
        // over moments of the setup on purpose, and whichever moment it
        // lands at (a busy machine shifts them all), nothing may survive.
        if i % 2 == 0 {
            // Kill at staggered moments after the start: sbx's own start,
            // bubblewrap's start, its clone, the inner stage's start.
            std::thread::sleep(Duration::from_micros(500 + 500 * (i / 2 % 8)));
        } else {
            // Kill once bubblewrap runs (or sbx has ended: nothing to kill
            // then), at staggered moments of its setup.
            let needle = needles.last().unwrap();
            let start = Instant::now();
            // Full mode's bubblewrap, or reduced mode's stage.
            let stage = if util::contained() {
                "__reduced"
            } else {
                "--as-pid-1"
            };
            while pgrep(Match::Both(needle, stage)).is_empty()
                && child.try_wait().unwrap().is_none()
                && start.elapsed() < util::DEADLINE
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            std::thread::sleep(Duration::from_micros(250 * (i / 2 % 8)));
        }
        util::kill_sbx(&mut child);
        child.wait().unwrap();
    }
    // Every sandbox goes with its sbx: wait until none is left.
    let start = Instant::now();
    let left = loop {
        let left: Vec<u32> = needles
            .iter()
            .flat_map(|n| pgrep(Match::Contains(n)))
            .collect();
        if left.is_empty() || start.elapsed() > util::DEADLINE {
            break left;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    kill_all(&left);
    assert!(left.is_empty(), "sandboxes outlived a killed sbx: {left:?}");
}
