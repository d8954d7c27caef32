//! What is allowed: the grants beside the denials of the other modules.

use super::*;

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn writes_in_project_and_tmp_reach_the_host_but_not_the_users_tmpdir() {
    require_sandbox!();
    let world = World::new();
    let tmpdir = std::env::var_os("TMPDIR").map(PathBuf::from);
    // `/tmp` is a symlink to `/private/tmp`: the write lands at the real path.
    // `$TMPDIR` inside is the run's own directory (its Unix sockets are
    // made there), not the user's: nothing lands in the user's.
    scenarios::writes_in_project_and_tmp_reach_the_host(
        &Seatbelt,
        &world,
        Path::new("/private/tmp"),
        |out, name| match &tmpdir {
            Some(t) => {
                let there = std::fs::canonicalize(t).unwrap().join(name);
                let landed = there.exists();
                let _ = std::fs::remove_file(&there);
                assert!(!landed, "the user's TMPDIR was written:\n{}", both(out));
            }
            None => loud_skip("the $TMPDIR check", "TMPDIR is not set in the test process"),
        },
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn project_and_ordinary_home_files_are_readable() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join("notes.txt"), "project notes 123\n");
    let out = Seatbelt.run_sh(&world, "cat notes.txt; cat \"$HOME/.gitconfig\"; ls -la");
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "project notes 123");
    // Broad read: an ordinary dotfile outside the project is readable.
    assert_line(&out, "\temail = t@example.invalid");
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn system_git_init_status_and_commit_work() {
    require_sandbox!();
    let Some(git) = tool(&["/usr/bin/git"]) else {
        return;
    };
    let world = World::new();
    let out = Seatbelt.run_sh_env(
        &world,
        &format!(
            "set -e
             {git} init -q
             {git} status --short
             echo hello > README
             {git} add README
             {git} commit -q -m 'from the sandbox'
             {git} status --short
             echo DONE"
        ),
        GIT_IDENTITY,
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "DONE");
    // Host side: the repository and the commit exist.
    let log = Command::new("git")
        .args(["log", "--format=%s", "-1"])
        .current_dir(&world.project)
        .output()
        .unwrap();
    assert_eq!(stdout(&log), "from the sandbox\n", "{}", both(&log));
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn exit_code_comes_back() {
    require_sandbox!();
    scenarios::exit_code_comes_back(&Seatbelt);
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn sandbox_execs_own_exit_codes_are_the_commands_when_it_ran() {
    require_sandbox!();
    let world = World::new();
    // 65 and 71 are also what sandbox-exec exits with when it cannot apply
    // the profile or start the command: sbx checks, and passes them on.
    for code in [65, 71] {
        let out = Seatbelt.run_sh(&world, &format!("echo ran > ran-{code}; exit {code}"));
        assert_eq!(out.status.code(), Some(code), "{}", both(&out));
        assert!(world.project.join(format!("ran-{code}")).exists());
        assert!(!both(&out).contains("refused"), "{}", both(&out));
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn signals_sent_to_sbx_reach_the_command() {
    require_sandbox!();
    let world = World::new();
    // sbx stays the parent of sandbox-exec (it serves the allowlist proxy
    // and checks sandbox-exec's exit): a supervisor's SIGTERM to sbx must
    // still reach the command, which can then clean up.
    let mut child = Seatbelt.sbx_cmd(&world)
        .args(["run", "--", "/bin/sh", "-c"])
        .arg("trap 'echo term > got-term; exit 9' TERM; echo up > up; i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !world.project.join("up").exists() {
        assert!(start.elapsed() < LIMIT, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("/bin/kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(9), "{status:?}");
    assert!(world.project.join("got-term").exists());
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn sbx_inside_sbx_runs_the_command_in_the_outer_sandbox() {
    require_sandbox!();
    let world = World::new();
    // A tool in the sandbox that runs `$SHELL -c` with SHELL=sbx starts sbx
    // again inside: the command runs in the sandbox it is already in, with
    // no warning, even with --require.
    let sbx = crate::util::sbx_path();
    let out = Seatbelt.run(
        &world,
        &[],
        &[
            sbx.to_str().unwrap(),
            "run",
            "--require",
            "--",
            "/bin/sh",
            "-c",
            "echo ran > inner-ran; echo x > \"$HOME/inner-outside\"; echo INNER-DONE",
        ],
        &[],
    );
    assert_line(&out, "INNER-DONE");
    assert!(world.project.join("inner-ran").exists(), "{}", both(&out));
    assert!(!world.home.join("inner-outside").exists(), "{}", both(&out));
    assert_absent(&out, "NOT sandboxed");
    assert_absent(&out, "refused");
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn inside_another_seatbelt_sandbox_require_refuses() {
    require_sandbox!();
    let world = World::new();
    // An agent that runs its tools in its own Seatbelt sandbox runs sbx in
    // it. Whatever macOS does with a second profile there, a command run
    // with --require is either sandboxed by sbx or not run at all.
    let outside = world.home.join("nested-outside");
    let mut cmd = world.host_cmd("/usr/bin/sandbox-exec");
    cmd.args(["-p", "(version 1)(allow default)", "--"])
        .arg(crate::util::sbx_path())
        .args(["run", "--require", "--", "/bin/sh", "-c"])
        .arg(format!(
            "echo ran > ran-marker; echo x > {} && echo WROTE",
            shq_path(&outside)
        ));
    let out = output_within(cmd, LIMIT, false);
    show("nested", &out);
    assert!(
        !outside.exists(),
        "the nested run wrote outside: {}",
        both(&out)
    );
    assert_no_line_starting(&out, "WROTE");
    let ran = world.project.join("ran-marker").exists();
    if out.status.code() == Some(125) {
        // Refused: said why, and nothing ran.
        assert!(
            both(&out).contains("Seatbelt sandbox"),
            "refused without saying why: {}",
            both(&out)
        );
        assert!(!ran, "refused, yet the command ran: {}", both(&out));
    } else {
        // macOS applied the second profile: the command ran in it, and its
        // write outside was refused.
        assert!(ran, "neither refused nor run: {}", both(&out));
        assert!(!both(&out).contains("sandbox_apply"), "{}", both(&out));
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn check_runs_the_live_self_test() {
    require_sandbox!();
    let world = World::new();
    for flags in [&[][..], &["--read-only"][..]] {
        let mut cmd = Seatbelt.sbx_cmd(&world);
        cmd.arg("check").args(flags);
        let out = output_within(cmd, LIMIT, false);
        show("check", &out);
        assert!(out.status.success(), "{flags:?}: {}", both(&out));
        for test in [
            "write outside the writable roots",
            "read of a credential",
            "network to the host's loopback",
        ] {
            assert_line(&out, &format!("test:     {test}: enforced"));
        }
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn stdin_reaches_the_command() {
    require_sandbox!();
    scenarios::stdin_reaches_the_command(&Seatbelt);
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn user_lookup_works() {
    require_sandbox!();
    let world = World::new();
    let expected = stdout(&Command::new("id").arg("-un").output().unwrap());
    let expected = expected.trim();
    assert!(!expected.is_empty());
    let out = Seatbelt.run_sh(
        &world,
        "echo \"id=$(id -un)\"; echo \"whoami=$(whoami)\"; echo \"tilde=$(cd ~ && pwd)\"",
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, &format!("id={expected}"));
    assert_line(&out, &format!("whoami={expected}"));
    assert_line(&out, &format!("tilde={}", world.home.display()));
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn job_control_signals_work_inside() {
    require_sandbox!();
    let world = World::new();
    let start = Instant::now();
    let out = Seatbelt.run(
        &world,
        &[],
        &[
            "/bin/bash",
            "-c",
            "sleep 5 & kill %1 && echo KILLED; wait; echo WAITED",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "KILLED");
    assert_line(&out, "WAITED");
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "the killed job ran to its end: {:?}\n{}",
        start.elapsed(),
        both(&out)
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn python_multiprocessing_lock_works() {
    require_sandbox!();
    let Some(py) = tool(&[PYTHON]) else {
        return;
    };
    let world = World::new();
    let out = Seatbelt.run(
        &world,
        &[],
        &[
            py,
            "-c",
            "import multiprocessing as m; l = m.Lock(); l.acquire(); l.release(); print('LOCK-OK')",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "LOCK-OK");
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn pty_and_raw_mode_work() {
    require_sandbox!();
    let Some(script) = tool(&["/usr/bin/script"]) else {
        return;
    };
    let world = World::new();
    let mut cmd = Seatbelt.sbx_cmd(&world);
    cmd.args([
        "run",
        "--",
        script,
        "-q",
        "/dev/null",
        "/bin/bash",
        "-c",
        "[ -t 0 ] && echo IS-TTY; stty raw -echo && G=$(stty -g) && echo \"STTY-OK $G\"",
    ]);
    // `script` reads its stdin: keep it open (and empty) until it is done.
    let out = output_within(cmd, LIMIT, true);
    show("script", &out);
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "IS-TTY");
    assert!(
        lines(&out).iter().any(|l| l.starts_with("STTY-OK ")),
        "stty could not set raw mode on the pty:\n{}",
        both(&out)
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn awkward_project_path_works() {
    require_sandbox!();
    let world = World::new();
    // Space, quote, backslash, parentheses, semicolon, non-ASCII: proves the
    // paths reach the profile as parameters, not as text.
    let project = world.home.join("p q\"r\\s (x);é");
    std::fs::create_dir_all(&project).unwrap();
    let project = std::fs::canonicalize(project).unwrap();
    let mut cmd = Seatbelt.sbx_cmd(&world);
    cmd.current_dir(&project).args([
        "run",
        "--",
        "/bin/sh",
        "-c",
        "echo inside > inside.txt; echo outside > ../outside.txt; pwd",
    ]);
    let out = output_within(cmd, LIMIT, false);
    show("awkward", &out);
    assert_eq!(
        std::fs::read_to_string(project.join("inside.txt")).unwrap_or_default(),
        "inside\n",
        "{}",
        both(&out)
    );
    assert!(!world.home.join("outside.txt").exists(), "{}", both(&out));
}
