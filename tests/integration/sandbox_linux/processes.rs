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
             # Its arguments are there once its exec is done (20 s at most).
             n=0; until seen \"49$D\" || [ $n -ge 2000 ]; do sleep 0.01; n=$((n+1)); done
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
        .own_sbx_std()
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
    // command line, not that of a bubblewrap or inner stage that holds it).
    let started = pgrep_until(Match::Exact(&needle), util::DEADLINE, |p| p.len() >= 2);
    assert_eq!(started.len(), 2, "the sandboxed sleeps never started");
    util::kill_sbx(&mut child); // SIGKILL
    child.wait().unwrap();
    let own = world.root.join("own-sbx");
    let left = until_gone(|| {
        let mut left = pgrep(Match::Contains(&needle));
        left.extend(sandbox_processes(&own));
        left
    });
    kill_all(&left);
    assert!(
        left.is_empty(),
        "sandboxed processes outlived sbx: {left:?}"
    );
}

/// Poll `find` until it finds nothing, or the deadline passes: what it
/// found last.
fn until_gone(find: impl Fn() -> Vec<u32>) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let left = find();
        if left.is_empty() || start.elapsed() > util::DEADLINE {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
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
    let own = world.root.join("own-sbx");
    let mut needles = Vec::new();
    for i in 0..32u64 {
        let duration = unique(1001);
        needles.push(format!("sleep {duration}"));
        let mut child = world
            .own_sbx_std()
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
            // Kill at staggered moments after the start: sbx's own start
            // (bubblewrap waiting for its arguments), bubblewrap's setup,
            // the inner stage's start.
            std::thread::sleep(Duration::from_micros(500 + 500 * (i / 2 % 8)));
        } else {
            // Kill once bubblewrap has its plan (it has made the sandbox's
            // first process), or reduced mode's stage runs (or sbx has
            // ended: nothing to kill then), at staggered moments after.
            let needle = needles.last().unwrap();
            let started = || {
                if util::contained() {
                    return !pgrep(Match::Both(needle, "__reduced")).is_empty();
                }
                pgrep_with(|c| {
                    c.starts_with("/usr/bin/bwrap ") && c.contains(own.to_str().unwrap())
                })
                .into_iter()
                .any(has_child)
            };
            let start = Instant::now();
            while !started()
                && child.try_wait().unwrap().is_none()
                && start.elapsed() < util::DEADLINE
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            std::thread::sleep(Duration::from_micros(250 * (i / 2 % 8)));
        }
        util::kill_sbx(&mut child);
        child.wait().unwrap();
    }
    // Every sandbox goes with its sbx: wait until none is left.
    let left = until_gone(|| {
        let mut left: Vec<u32> = needles
            .iter()
            .flat_map(|n| pgrep(Match::Contains(n)))
            .collect();
        left.extend(sandbox_processes(&own));
        left
    });
    kill_all(&left);
    assert!(left.is_empty(), "sandboxes outlived a killed sbx: {left:?}");
}

/// `sbx run ARGS` with the world's own sbx; its output once it has ended.
fn own_run(world: &World, args: &[&str]) -> Output {
    let out = world
        .own_sbx_std()
        .arg("run")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    crate::host::show(&format!("{args:?}"), &out);
    out
}

/// What bubblewrap says when it was started ahead and never killed: sbx
/// went away (or exec'd), its pipe ended, and it went on with no options.
fn assert_no_stray_bubblewrap(world: &World, out: &Output) {
    let err = stderr(out);
    assert!(
        !err.contains("bwrap:") && !err.contains("usage: "),
        "a bubblewrap outlived its sbx:\n{}",
        both(out)
    );
    let left = sandbox_processes(&world.root.join("own-sbx"));
    kill_all(&left);
    assert!(left.is_empty(), "processes of sbx left: {left:?}");
}

#[test]
fn the_sandbox_runs_from_the_bubblewrap_started_ahead() {
    require_sandbox!();
    if util::contained() {
        return; // reduced mode: no bubblewrap
    }
    let world = World::new();
    let out = own_run(
        &world,
        &["--", "sh", "-c", "tr '\\0' ' ' < /proc/1/cmdline"],
    );
    assert!(out.status.success(), "{}", both(&out));
    let pid1 = stdout(&out);
    assert!(
        pid1.contains(" __inner --args-fd ") && !pid1.contains("--ready-fd"),
        "PID 1 did not read its arguments from bubblewrap started ahead: {pid1}"
    );
    assert_no_stray_bubblewrap(&world, &out);
}

#[test]
fn a_plan_for_another_bubblewrap_gets_its_own_and_the_one_started_ahead_is_killed() {
    require_sandbox!();
    if util::contained() {
        return; // reduced mode: no bubblewrap
    }
    let world = World::new();
    // Another path for the same program: the plan's bubblewrap is not the
    // one started ahead (`/usr/bin/bwrap`).
    let other = world.root.join("bin/bwrap");
    std::fs::create_dir_all(other.parent().unwrap()).unwrap();
    std::fs::copy("/usr/bin/bwrap", &other).unwrap();
    world.user_config(&format!("[sandbox]\nbwrap = \"{}\"\n", other.display()));
    let out = own_run(
        &world,
        &[
            "--",
            "sh",
            "-c",
            "tr '\\0' ' ' < /proc/1/cmdline; echo; echo ran",
        ],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "ran");
    let pid1 = stdout(&out);
    assert!(
        pid1.contains(" __inner ") && pid1.contains("--ready-fd") && !pid1.contains("--args-fd"),
        "PID 1 was not started by the plan's own bubblewrap: {pid1}"
    );
    assert_no_stray_bubblewrap(&world, &out);
}

#[test]
fn sbx_that_runs_no_sandbox_leaves_no_bubblewrap_behind() {
    require_sandbox!();
    let world = World::new();
    let marker = world.root.join("ran");
    let touch = format!("touch {}", shq_path(&marker));
    for (config, args, status) in [
        // Run as it is: sbx execs the command.
        (
            "[sandbox]\nenabled = false\n",
            vec!["--", "sh", "-c", &touch],
            0,
        ),
        // Reduced mode runs no bubblewrap.
        (
            "[sandbox]\nbackend = \"reduced\"\n",
            vec!["--", "sh", "-c", &touch],
            0,
        ),
        // An error before any plan: nothing runs.
        (
            "[sandbox]\nno_such_key = 1\n",
            vec!["--", "sh", "-c", &touch],
            125,
        ),
        ("", vec!["--", "no-such-command-sbx"], 127),
    ] {
        let _ = std::fs::remove_file(&marker);
        world.user_config(config);
        let out = own_run(&world, &args);
        // Reduced mode may be refused where Landlock is too old: only its
        // leftovers are judged then.
        if !config.contains("reduced") || out.status.success() {
            assert_eq!(out.status.code(), Some(status), "{config}\n{}", both(&out));
            assert_eq!(marker.exists(), status == 0, "{config}\n{}", both(&out));
        }
        assert_no_stray_bubblewrap(&world, &out);
    }
}

#[test]
fn a_command_longer_than_a_pipe_reaches_the_sandbox_whole() {
    require_sandbox!();
    let world = World::new();
    // About 200 KB of arguments: more than a pipe holds, so the inner
    // stage's part is written while it reads.
    let first = format!("{}END1", "x".repeat(99_996));
    let second = format!("{}END2", "y".repeat(99_996));
    let out = own_run(
        &world,
        &[
            "--",
            "sh",
            "-c",
            "printf '%s\\n' \"${#1}\" \"${1##*x}\" \"${#2}\" \"${2##*y}\"",
            "sh",
            &first,
            &second,
        ],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(
        stdout(&out),
        "100000\nEND1\n100000\nEND2\n",
        "{}",
        both(&out)
    );
}

/// sbx killed while it resolves the policy (here: blocked reading a user
/// configuration that is a FIFO nobody writes to), with bubblewrap started
/// ahead and waiting for its arguments: bubblewrap goes with it, silently,
/// instead of going on with no options and failing on the terminal.
#[test]
fn sbx_killed_before_its_plan_leaves_no_bubblewrap_behind() {
    require_sandbox!();
    let world = World::new();
    let fifo = world.root.join("config-fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let own = world.root.join("own-sbx");
    let mut child = world
        .own_sbx_std()
        .env("SBX_CONFIG", &fifo)
        .args(["run", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let own_text = own.to_str().unwrap();
    let waiting =
        || pgrep_with(|c| c.starts_with("/usr/bin/bwrap --args ") && c.contains(own_text));
    let start = Instant::now();
    while waiting().is_empty() && start.elapsed() < util::DEADLINE {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(!waiting().is_empty(), "no bubblewrap was started ahead");
    util::kill_sbx(&mut child);
    // Read to the end: a bubblewrap left behind holds sbx's stderr.
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(
        !err.contains("bwrap"),
        "a bubblewrap outlived its sbx: {err}"
    );
    let left = until_gone(|| sandbox_processes(&own));
    kill_all(&left);
    assert!(left.is_empty(), "processes of sbx left: {left:?}");
}
