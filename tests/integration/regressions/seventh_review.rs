//! Seventh review: git config rewritten during a run, interrupted runs, and
//! limits that must refuse clearly.

use super::*;

/// git on the host rewrites `.git/config` by renaming a lock file over it,
/// which detaches the read-only mount inside a running sandbox: the command
/// could then add `core.fsmonitor` (run by the user's next `git status`), and
/// sbx exited 0 without a word. Now a replaced config is compared with what
/// it set before the run.
#[test]
fn git_config_rewritten_on_the_host_during_a_run_is_checked() {
    require_sandbox!();
    config_appended_during_a_host_rewrite(
        r"[core]\n\tfsmonitor = touch PWNED-FSMONITOR\n",
        "core.fsmonitor=touch PWNED-FSMONITOR",
    );
    // An everyday key pointing at a repository the command made: pushing
    // to it runs that repository's hooks on the host (eighth review).
    config_appended_during_a_host_rewrite(
        r#"[remote "origin"]\n\tpushurl = ./.cache-evil.git\n"#,
        "remote.origin.pushurl=./.cache-evil.git",
    );
    // A plain word is a relative path to git too (ninth review).
    config_appended_during_a_host_rewrite(
        r#"[remote "origin"]\n\tpushurl = evil.git\n"#,
        "remote.origin.pushurl=evil.git",
    );
    // git's own reading decides: an inline comment ends the value (tenth
    // review: the line scan took the part after it for an ssh host).
    config_appended_during_a_host_rewrite(
        r#"[remote "origin"]\n\tpushurl = ./evil.git #@192.0.2.1:x\n"#,
        "remote.origin.pushurl=./evil.git",
    );
}

/// The command keeps appending `printf` text `line` to `.git/config` while
/// the user's git rewrites it on the host; sbx must exit 125 naming
/// `reported`, and not the user's own change.
fn config_appended_during_a_host_rewrite(line: &str, reported: &str) {
    let world = World::new();
    world.git_repo();
    let config = world.project.join(".git/config");
    // The key's own name (fsmonitor, pushurl), which the file must show.
    let name = reported
        .split('=')
        .next()
        .unwrap()
        .rsplit('.')
        .next()
        .unwrap();
    let mut cmd = world.sbx_std();
    sh_in(
        &mut cmd,
        &[],
        &format!(
            // An append racing the host's rename can land in the old file,
            // now unlinked: the command checks that the file git reads has
            // its line, and tries again until it does (for a minute at most).
            // While `.git/config` is the link to the command's private copy
            // an append lands there: it waits for the host's rewrite, which
            // detaches the link's mount.
            "echo up > up; i=0
while [ $i -lt 3000 ]; do
  if [ ! -L .git/config ] && {{ printf '{line}' >> .git/config; }} 2>/dev/null && grep -q '{name}' .git/config; then
    echo APPENDED; break
  fi
  sleep 0.02; i=$((i+1))
done"
        ),
        &[],
    );
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_up(&world);
    // The user's everyday git on the host, meanwhile.
    util::git(&world.project, &["config", "user.name", "host-user"]);
    let out = child.wait_with_output().unwrap();
    show("git config detach", &out);
    let text = std::fs::read_to_string(&config).unwrap();
    if util::unclaimed(&out, util::RUNS_LATER_WRITABLE) {
        // Reduced mode: the config is written in place. Put back after the
        // run when it is still the file sbx read; when the host's git
        // replaced it meanwhile (copying the command's line into its new
        // file), it stays the user's, as in full mode: either way the key
        // is named and sbx exits 125. Unless the host's git read the file
        // before the append and renamed its new one over it after: the
        // line is then lost with the old file, and there is nothing to
        // report (seen once in a loaded run of the suite).
        assert!(stdout(&out).contains("APPENDED"), "{}", both(&out));
        if text.contains(name) || out.status.code() != Some(0) {
            assert_eq!(out.status.code(), Some(125), "{text}\n{}", both(&out));
            assert!(stderr(&out).contains(reported), "{}", both(&out));
        }
        return;
    }
    assert!(
        stdout(&out).contains("APPENDED") && text.contains(name),
        "the scenario did not happen (the write never got through): {}",
        both(&out)
    );
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(stderr(&out).contains(reported), "{}", both(&out));
    // The user's own change is not reported.
    assert!(!stderr(&out).contains("user.name"), "{}", both(&out));
}

/// The main worktree's `.git/config.worktree` (read when
/// `extensions.worktreeConfig` is set, as `git sparse-checkout` does) was
/// writable: a hook or `core.fsmonitor` there runs on the host.
#[test]
fn main_worktree_config_worktree_is_protected() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    util::git(
        &world.project,
        &["config", "extensions.worktreeConfig", "true"],
    );
    let out = Sbx.run_sh(
        &world,
        r#"printf '[core]\n\thooksPath = evil-hooks\n' > .git/config.worktree; echo DONE"#,
    );
    let planted = world.project.join(".git/config.worktree");
    assert!(
        !planted.exists(),
        "{} left in place: {}",
        planted.display(),
        both(&out)
    );
    assert!(
        world
            .project
            .join(".git/config.worktree.sbx-blocked")
            .exists(),
        "{}",
        both(&out)
    );
    // An existing one is read-only, and its hooksPath directory too.
    std::fs::write(&planted, "[core]\n\thooksPath = githooks\n").unwrap();
    std::fs::create_dir_all(world.project.join("githooks")).unwrap();
    let out = Sbx.run_sh(
        &world,
        r#"echo x >> .git/config.worktree; echo '#!/bin/sh' > githooks/pre-commit; ls githooks"#,
    );
    assert_eq!(
        std::fs::read_to_string(&planted).unwrap(),
        "[core]\n\thooksPath = githooks\n",
        "{}",
        both(&out)
    );
    assert!(
        !world.project.join("githooks/pre-commit").exists(),
        "{}",
        both(&out)
    );
}

/// An agent's timeout kills sbx with SIGKILL: the sweep after the command
/// never happened, and the next run took a planted `.envrc` for one that had
/// always been there (mounted read-only, no word). Now the next run finds
/// the killed run's note and sweeps in its place (when the run's guardian
/// was killed too; otherwise that sweeps at once, see below).
#[test]
fn a_killed_sbx_leaves_its_sweep_to_the_next_run() {
    require_sandbox!();
    let world = World::new();
    let sleep = format!("sleep {}", unique(30));
    let mut child = killed_with_its_guardian_after_up(
        &world,
        &format!("echo 'touch \"$HOME/PWNED\"' > .envrc; echo up > up; {sleep}"),
        &[],
    );
    let _ = child.wait();
    let envrc = world.project.join(".envrc");
    // The sandbox dies with sbx (--die-with-parent): wait until it has.
    wait_until_no_process_has(&sleep);
    assert!(envrc.exists(), "the scenario did not happen");
    let out = Sbx.run_sh(&world, "cat .envrc 2>/dev/null; echo NEXT-RAN");
    assert!(stdout(&out).contains("NEXT-RAN"), "{}", both(&out));
    assert!(!envrc.exists(), ".envrc left in place: {}", both(&out));
    assert!(
        world.project.join(".envrc.sbx-blocked").exists(),
        "{}",
        both(&out)
    );
    assert!(stderr(&out).contains("earlier sbx run"), "{}", both(&out));
    // Said once: the run after that has nothing to report.
    let again = Sbx.run_sh(&world, "true");
    assert!(
        !stderr(&again).contains("earlier sbx run"),
        "{}",
        both(&again)
    );
}

/// A killed sbx whose parent does not reap it (a container's PID 1,
/// `Popen.kill()` without `wait()`) stays a zombie with its `/proc` entry:
/// the next run took it for a live run and swept nothing, so a planted
/// `.envrc` stayed. Now the run's guardian sweeps as soon as the sandbox is
/// gone, while sbx is still unreaped and before any next run; that run
/// shows what it found.
#[test]
fn a_killed_sbx_not_yet_reaped_is_swept_at_once_by_its_guardian() {
    require_sandbox!();
    let world = World::new();
    let mut child = killed_after_up(
        &world,
        "echo 'touch \"$HOME/PWNED\"' > .envrc; echo up > up; sleep 30",
        &[],
    );
    let envrc = world.project.join(".envrc");
    let blocked = world.project.join(".envrc.sbx-blocked");
    let start = Instant::now();
    while !blocked.exists() || envrc.exists() {
        assert!(
            start.elapsed() < util::DEADLINE,
            "the guardian never swept the planted .envrc"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // sbx has not been reaped: its /proc entry is a zombie's.
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).unwrap();
    assert!(stat.contains(") Z "), "{stat}");
    let out = Sbx.run_sh(&world, "echo NEXT-RAN");
    let _ = child.wait();
    assert!(stdout(&out).contains("NEXT-RAN"), "{}", both(&out));
    assert!(
        stderr(&out).contains("earlier sbx run was killed"),
        "{}",
        both(&out)
    );
    assert!(stderr(&out).contains(".envrc"), "{}", both(&out));
    assert!(!world.home.join("PWNED").exists());
}

/// The git config check was not in the killed run's note: a config the
/// host's git rewrote, which the command then extended, went unreported
/// when sbx was killed after the command had done it (eighth review).
#[test]
fn a_killed_sbx_leaves_its_git_config_check_to_the_next_run() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let sleep = format!("sleep {}", unique(30));
    let mut cmd = world.sbx_std();
    // The appends keep failing (read-only) until the host's git has
    // replaced the file: tried for a minute at most.
    sh_in(
        &mut cmd,
        &[],
        &format!(
            r#"echo up > up; i=0
while [ $i -lt 3000 ]; do
  if [ ! -L .git/config ] && {{ printf '[core]\n\tfsmonitor = touch PWNED-FSMONITOR\n' >> .git/config; }} 2>/dev/null && grep -q fsmonitor .git/config; then echo done > appended; break; fi
  sleep 0.02; i=$((i+1))
done
{sleep}"#
        ),
        &[],
    );
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    wait_for_up(&world);
    util::git(&world.project, &["config", "user.name", "host-user"]);
    while !world.project.join("appended").exists() {
        assert!(
            start.elapsed() < util::DEADLINE,
            "the scenario did not happen (the write never got through)"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status();
    let _ = child.wait();
    // The sandbox dies with sbx (--die-with-parent): wait until it has.
    wait_until_no_process_has(&sleep);
    let out = Sbx.run_sh(&world, "echo NEXT-RAN");
    if util::unclaimed(&out, util::RUNS_LATER_WRITABLE) {
        // Reduced mode's keeper made the killed run's checks at once: the
        // config is put back (the changed one kept aside, never applied),
        // which the next run reports.
        let text = std::fs::read_to_string(world.project.join(".git/config")).unwrap();
        assert!(!text.contains("fsmonitor"), "{text}");
        assert!(stderr(&out).contains(".git/config"), "{}", both(&out));
        return;
    }
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!stdout(&out).contains("NEXT-RAN"), "{}", both(&out));
    assert!(
        stderr(&out).contains("core.fsmonitor=touch PWNED-FSMONITOR"),
        "{}",
        both(&out)
    );
}

/// Thousands of directories under `.git/modules` (made by one run) made
/// every later run fail at bubblewrap's argument limit, or crawl (tenth
/// review). Now a clear refusal, naming the directory.
#[test]
fn too_many_submodule_git_dirs_are_refused_clearly() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    for i in 0..600 {
        let m = world.project.join(format!(".git/modules/m{i}"));
        std::fs::create_dir_all(m.join("hooks")).unwrap();
        std::fs::write(m.join("config"), "").unwrap();
    }
    let start = Instant::now();
    let out = Sbx.run_sh(&world, "echo RAN");
    assert!(start.elapsed() < Duration::from_secs(20), "{}", both(&out));
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!stdout(&out).contains("RAN"), "{}", both(&out));
    assert!(stderr(&out).contains(".git/modules"), "{}", both(&out));
}
