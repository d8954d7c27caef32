//! The backend made unavailable: the command runs unsandboxed, provably and
//! loudly, or with `require` is refused and provably did not run.

use super::*;

#[test]
fn configured_bwrap_missing_runs_unsandboxed_loudly_or_refuses() {
    let world = World::new();
    let cause = "the configured bwrap /nonexistent/bwrap does not exist";
    unavailable_cases(
        &world,
        &|extra| config_bwrap(&world, Path::new("/nonexistent/bwrap"), extra),
        cause,
    );
}

#[test]
fn bwrap_refused_user_namespaces_names_the_cause() {
    let world = World::new();
    let ran = world.root.join("fake-ran");
    let bwrap = util::fake_bwrap(&world.root.join("fakebin"), UID_MAP_ERROR, Some(&ran));
    let cause = expected_uid_map_cause();
    unavailable_cases(&world, &|extra| config_bwrap(&world, &bwrap, extra), cause);
    // The message carries bubblewrap's own words too.
    config_bwrap(&world, &bwrap, "");
    let out = Sbx.run_sh_flags(&world, &[], WRITE_HOME_EXIT_7);
    assert!(
        stderr(&out).contains(&format!("[{UID_MAP_ERROR}]")),
        "{}",
        both(&out)
    );
    assert!(ran.exists(), "the fake bwrap was never executed");
}

#[test]
fn bwrap_lacking_an_option_names_the_cause() {
    let world = World::new();
    let bwrap = util::fake_bwrap(&world.root.join("fakebin"), UNKNOWN_OPTION_ERROR, None);
    unavailable_cases(
        &world,
        &|extra| config_bwrap(&world, &bwrap, extra),
        WHAT_OLD_BWRAP,
    );
    config_bwrap(&world, &bwrap, "");
    let out = Sbx.run_sh_flags(&world, &[], WRITE_HOME_EXIT_7);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("[{UNKNOWN_OPTION_ERROR}]")),
        "{}",
        both(&out)
    );
    assert!(
        err.contains("install bubblewrap 0.5 or newer"),
        "the fix is named\n{}",
        both(&out)
    );
}

/// On defaults (`backend = "auto"`), a bubblewrap that cannot start on
/// this machine gives way to reduced mode, never to an unsandboxed run:
/// the write in $HOME is refused, and stderr names reduced mode and why.
#[test]
fn a_bwrap_that_cannot_start_gives_way_to_reduced_mode() {
    if !util::sandbox_available() {
        return;
    }
    let world = World::new();
    let bwrap = util::fake_bwrap(&world.root.join("fakebin"), UNKNOWN_OPTION_ERROR, None);
    world.user_config(&format!("[sandbox]\nbwrap = \"{}\"\n", bwrap.display()));
    let out = Sbx.run_sh_flags(&world, &[], WRITE_HOME_EXIT_7);
    assert_eq!(out.status.code(), Some(99), "{}", both(&out));
    assert!(!marker(&world).exists(), "{}", both(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "reduced mode (bubblewrap cannot start here: {WHAT_OLD_BWRAP}"
        )),
        "{}",
        both(&out)
    );
    assert!(!err.contains("NOT sandboxed"), "{}", both(&out));
    // `require = true` refuses it, and nothing runs.
    let out = Sbx.run_sh_flags(&world, &["--require"], WRITE_HOME_EXIT_7);
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(
        stderr(&out).contains("refusing reduced mode"),
        "{}",
        both(&out)
    );
}

#[test]
fn unsandboxed_fallback_keeps_other_exit_codes() {
    let world = World::new();
    config_bwrap(&world, Path::new("/nonexistent/bwrap"), "");
    for code in [0, 1, 42] {
        let out = Sbx.run_sh_flags(&world, &[], &format!("exit {code}"));
        assert_eq!(out.status.code(), Some(code), "{}", both(&out));
        assert!(stderr(&out).contains("NOT sandboxed:"), "{}", both(&out));
    }
    // stdout stays the command's.
    let out = Sbx.run_sh_flags(&world, &[], "echo hello");
    assert_eq!(stdout(&out), "hello\n", "{}", both(&out));
}

#[test]
fn the_warning_cannot_be_silenced() {
    let world = World::new();
    let cause = "the configured bwrap /nonexistent/bwrap does not exist";
    config_bwrap(
        &world,
        Path::new("/nonexistent/bwrap"),
        "banner = \"never\"\n",
    );
    // `--quiet` and `banner = "never"` silence the banner, never this line.
    let out = Sbx.run_sh_flags(&world, &["--quiet"], WRITE_HOME_EXIT_7);
    assert_ran_unsandboxed(&world, &out, cause);
    std::fs::remove_file(marker(&world)).unwrap();
    // Shell mode (`sbx -c`, as agents call it) says it too.
    let out = world
        .sbx_std()
        .args(["-c", WRITE_HOME_EXIT_7])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ran_unsandboxed(&world, &out, cause);
    std::fs::remove_file(marker(&world)).unwrap();
    // Without a UTF-8 locale, with the plain prefix.
    let out = world
        .sbx_std()
        .env("LANG", "C")
        .args(["run", "--", "sh", "-c", WRITE_HOME_EXIT_7])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ran_unsandboxed(&world, &out, cause);
    assert!(
        stderr(&out).contains("[sbx WARNING] NOT sandboxed:"),
        "{}",
        both(&out)
    );
    std::fs::remove_file(marker(&world)).unwrap();
    // And shell mode refuses with `require = true` like `run` does.
    config_bwrap(&world, Path::new("/nonexistent/bwrap"), "require = true\n");
    let out = world
        .sbx_std()
        .args(["-c", WRITE_HOME_EXIT_7])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_refused(&world, &out, cause);
}

#[test]
fn configured_bwrap_in_the_project_is_never_used() {
    let world = World::new();
    let ran = world.root.join("fake-ran");
    let bwrap = util::fake_bwrap(&world.project.join("bin"), UID_MAP_ERROR, Some(&ran));
    let cause = format!(
        "the configured bwrap {} lies inside a writable root",
        bwrap.display()
    );
    refused_cases(&world, &|extra| config_bwrap(&world, &bwrap, extra), &cause);
    assert!(!ran.exists(), "a bwrap inside the project was executed");
}

#[test]
fn configured_bwrap_in_an_extra_writable_root_is_never_used() {
    let world = World::new();
    let ran = world.root.join("fake-ran");
    let extra_root = world.root.join("scratch");
    let bwrap = util::fake_bwrap(&extra_root, UID_MAP_ERROR, Some(&ran));
    let cause = format!(
        "the configured bwrap {} lies inside a writable root",
        bwrap.display()
    );
    refused_cases(
        &world,
        &|extra| {
            config_bwrap(
                &world,
                &bwrap,
                &format!("writable = [\".\", \"{}\"]\n{extra}", extra_root.display()),
            )
        },
        &cause,
    );
    assert!(!ran.exists(), "a bwrap inside a writable root was executed");
}

#[test]
fn configured_bwrap_reached_through_a_symlink_into_the_project_is_never_used() {
    let world = World::new();
    let ran = world.root.join("fake-ran");
    let real = util::fake_bwrap(&world.project.join("bin"), UID_MAP_ERROR, Some(&ran));
    let link = world.root.join("fakebin/bwrap-link");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let cause = format!(
        "the configured bwrap {} lies inside a writable root",
        real.display()
    );
    refused_cases(&world, &|extra| config_bwrap(&world, &link, extra), &cause);
    assert!(!ran.exists(), "a bwrap inside the project was executed");
}

#[test]
fn configured_bwrap_in_the_working_directory_is_never_used() {
    let world = World::new();
    let ran = world.root.join("fake-ran");
    // The project is not writable here: only the working directory rule
    // keeps this bwrap out.
    let bwrap = util::fake_bwrap(&world.project, UID_MAP_ERROR, Some(&ran));
    let cause = format!("the configured bwrap {}", bwrap.display());
    refused_cases(
        &world,
        &|extra| config_bwrap(&world, &bwrap, &format!("writable = [\"/tmp\"]\n{extra}")),
        &cause,
    );
    assert!(
        !ran.exists(),
        "a bwrap in the working directory was executed"
    );
}

#[test]
fn bwrap_on_path_in_the_project_is_never_used() {
    require_sandbox!();
    let world = World::new();
    let ran = world.root.join("fake-ran");
    let bin = world.project.join("bin");
    util::fake_bwrap(&bin, UID_MAP_ERROR, Some(&ran));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = world
        .sbx_std()
        .env("PATH", &path)
        .args(["run", util::require(), "--"])
        .args([
            "sh",
            "-c",
            "touch ok-in-project; touch \"$HOME/marker\"; exit 0",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        !ran.exists(),
        "the bwrap on PATH in the project was executed"
    );
    assert!(!stderr(&out).contains("NOT sandboxed"), "{}", both(&out));
    // Sandboxed by the real bwrap: the project write landed, the $HOME one did not.
    assert!(
        world.project.join("ok-in-project").exists(),
        "{}",
        both(&out)
    );
    assert!(!marker(&world).exists(), "{}", both(&out));
}

/// Where bubblewrap refuses what the private git config copies need (a
/// setuid bubblewrap refuses `--cap-add`), the run goes on with git configs
/// read-only, and now says so: `git config` failing with "Device or
/// resource busy" was left unexplained.
#[test]
fn a_sandbox_without_config_copies_says_git_configs_are_read_only() {
    require_sandbox!();
    if util::contained() {
        // Reduced mode makes no copies.
        return;
    }
    let world = World::new();
    world.git_repo();
    let bwrap = world.root.join("fakebin/bwrap");
    util::install_script(
        &bwrap,
        "#!/bin/sh\ncase \" $* \" in *' --cap-add '*)\n  echo 'bwrap: --cap-add in setuid mode can be used only by root' >&2; exit 1;;\nesac\nexec /usr/bin/bwrap \"$@\"\n",
    );
    world.user_config(&format!("[sandbox]\nbwrap = \"{}\"\n", bwrap.display()));
    let out = Sbx.run_sh(
        &world,
        "git config user.email me@example.invalid; echo rc=$?",
    );
    assert!(
        stderr(&out).contains("git configs were read-only in this run"),
        "{}",
        both(&out)
    );
    assert!(
        stdout(&out).contains("rc=") && !stdout(&out).contains("rc=0"),
        "{}",
        both(&out)
    );
    let config = std::fs::read_to_string(world.project.join(".git/config")).unwrap();
    assert!(!config.contains("me@example.invalid"), "{config}");
    assert!(!stderr(&out).contains("not pinned"), "{}", both(&out));
    // With a linked hooks directory, which that set-up would have pinned,
    // the line says the link was not.
    let hooks = world.project.join(".git/hooks");
    std::fs::rename(&hooks, world.project.join("githooks")).unwrap();
    std::os::unix::fs::symlink("../githooks", &hooks).unwrap();
    let out = Sbx.run_sh(&world, "true");
    assert!(
        stderr(&out)
            .contains("symbolic links on the way to git's hooks and config were not pinned"),
        "{}",
        both(&out)
    );
}

/// A fake bwrap that does what a real one does when it ends between its
/// clone and releasing its child: that child, which holds the ready pipe
/// (descriptor 100), is left waiting for good (a `sleep`, whose PID goes
/// to `dir/holder`); then `end` (shell) ends the fake itself.
fn bwrap_leaving_its_child(dir: &Path, end: &str) -> PathBuf {
    let path = dir.join("bwrap");
    let holder = crate::host::shq_path(&dir.join("holder"));
    util::install_script(
        &path,
        &format!(
            "#!/bin/sh\nif [ -e /dev/fd/100 ]; then\n  sleep 600 </dev/null >/dev/null 2>&1 &\n  echo $! > {holder}\nfi\n{end}\n"
        ),
    );
    path
}

/// `sbx run -- sh -c SCRIPT` in the project, failing the test if it has
/// not returned within a minute.
fn sbx_run_within_a_minute(world: &World, script: &str) -> Output {
    let mut cmd = world.sbx_std();
    cmd.args(["run", "--", "sh", "-c", script])
        .stdin(Stdio::null());
    let start = std::time::Instant::now();
    let limit = std::time::Duration::from_secs(60);
    let out = assert_cmd::Command::from_std(cmd)
        .timeout(limit)
        .output()
        .unwrap();
    assert!(
        start.elapsed() < limit,
        "sbx hung behind the child its bubblewrap left:\n{}",
        both(&out)
    );
    out
}

/// The `sleep` a fake from [`bwrap_leaving_its_child`] left is gone (or a
/// zombie, nothing left of it but its exit status), within a minute.
fn assert_holder_ended(dir: &Path) {
    let pid = std::fs::read_to_string(dir.join("holder")).unwrap();
    let stat = format!("/proc/{}/stat", pid.trim());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let state = std::fs::read_to_string(&stat)
            .ok()
            .and_then(|s| s.rsplit(')').next().map(|r| r.trim().to_string()));
        if state.as_deref().is_none_or(|s| s.starts_with('Z')) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the child its bubblewrap left still runs ({stat})"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A bubblewrap stopped by a signal before its sandbox was up (sbx's
/// SIGTERM passed on at that moment, Ctrl-C): sbx does not wait for the
/// child it left, ends it, exits as bubblewrap did, and tries nothing else
/// (neither the plan without git config copies, nor reduced mode, nor an
/// unsandboxed run): the command never runs.
#[test]
fn a_bubblewrap_stopped_before_its_sandbox_was_up_ends_the_run() {
    let out = run_with_bwrap_ending_by("TERM");
    assert_eq!(out.status.code(), Some(143), "{}", both(&out));
}

/// `sbx run` in a git repository with a fake from [`bwrap_leaving_its_child`]
/// that then kills itself with `SIGNAL`: the command never ran, and the
/// child was ended. What sbx said and its status, for the caller to judge.
fn run_with_bwrap_ending_by(signal: &str) -> Output {
    let world = World::new();
    world.git_repo();
    let dir = world.root.join("fakebin");
    let bwrap = bwrap_leaving_its_child(&dir, &format!("kill -{signal} $$"));
    world.user_config(&format!("[sandbox]\nbwrap = \"{}\"\n", bwrap.display()));
    let out = sbx_run_within_a_minute(&world, "touch ran; touch \"$HOME/marker\"");
    assert!(!world.project.join("ran").exists(), "{}", both(&out));
    assert!(!marker(&world).exists(), "{}", both(&out));
    assert_holder_ended(&dir);
    out
}

/// A bubblewrap that fails between its clone and releasing its child (a
/// setuid one that cannot write the uid map): sbx does not wait for that
/// child for good either; it ends it, and the failure is diagnosed as
/// when no child is left.
#[test]
fn a_bubblewrap_that_failed_leaving_its_child_does_not_hang_sbx() {
    let world = World::new();
    let dir = world.root.join("fakebin");
    let end = format!("echo '{UID_MAP_ERROR}' >&2\nexit 1");
    let bwrap = bwrap_leaving_its_child(&dir, &end);
    config_bwrap(&world, &bwrap, "");
    let out = sbx_run_within_a_minute(&world, WRITE_HOME_EXIT_7);
    assert_ran_unsandboxed(&world, &out, expected_uid_map_cause());
    assert_holder_ended(&dir);
}

/// A bubblewrap killed with SIGKILL before its sandbox was up (the
/// out-of-memory killer, say): the run ends with its status, nothing else
/// is tried, and sbx says what happened, as no signal of the user's did.
#[test]
fn a_bubblewrap_killed_before_its_sandbox_was_up_is_named() {
    let out = run_with_bwrap_ending_by("KILL");
    assert_eq!(out.status.code(), Some(137), "{}", both(&out));
    assert!(
        stderr(&out).contains("killed (SIGKILL) before it was up"),
        "{}",
        both(&out)
    );
}

/// A bubblewrap that crashes, diagnostic runs included, after printing
/// what would otherwise name a cause that allows a fallback: a crash says
/// nothing of the machine, so sbx neither runs the command unsandboxed
/// nor in reduced mode; it refuses.
#[test]
fn a_crashing_bubblewrap_never_earns_a_fallback() {
    let world = World::new();
    let dir = world.root.join("fakebin");
    let bwrap = dir.join("bwrap");
    util::install_script(
        &bwrap,
        &format!("#!/bin/sh\necho '{UNKNOWN_OPTION_ERROR}' >&2\nulimit -c 0\nkill -SEGV $$\n"),
    );
    for backend in ["bwrap", "auto"] {
        world.user_config(&format!(
            "[sandbox]\nbwrap = \"{}\"\nbackend = \"{backend}\"\n",
            bwrap.display()
        ));
        let out = sbx_run_within_a_minute(&world, WRITE_HOME_EXIT_7);
        assert_eq!(out.status.code(), Some(125), "{backend}: {}", both(&out));
        assert!(
            stderr(&out).contains("killed by signal 11"),
            "{backend}: {}",
            both(&out)
        );
        assert!(!marker(&world).exists(), "{backend}: {}", both(&out));
    }
}
