//! Files: writes outside the writable roots, credentials, files that run
//! later, agent state and tool caches, and nothing else changing on the host.

use super::*;

#[test]
fn writes_outside_writable_roots_are_refused() {
    require_sandbox!();
    let world = World::new();
    scenarios::writes_outside_writable_roots_are_refused(&Sbx, &world, "", |_| {});
}

// ---------------------------------------------------------------------------
// Credentials
// ---------------------------------------------------------------------------

#[test]
fn credentials_are_unreadable_directly() {
    require_sandbox!();
    let world = World::new();
    let files = secret_files(&world);
    let mut paths: Vec<String> = files
        .iter()
        .map(|f| world.home.join(f).to_str().unwrap().to_string())
        .collect();
    // Positive control: an ordinary file in the same home is readable.
    paths.push(world.home.join(".bashrc").to_str().unwrap().to_string());
    let mut script = cat_each(&paths);
    // Listing and searching the directories must not leak either.
    script
        .push_str("grep -r . \"$HOME\" 2>/dev/null | grep -v '^Binary' ; ls -laR \"$HOME\" 2>&1\n");
    let out = Sbx.run_sh(&world, &script);
    assert_no_secret(&out);
    assert_line(&out, "# rc");
    assert_eq!(
        stdout(&out).matches("attempted").count(),
        paths.len(),
        "{}",
        both(&out)
    );
}

#[test]
fn credentials_are_unreadable_through_a_project_symlink() {
    require_sandbox!();
    let world = World::new();
    scenarios::credentials_are_unreadable_through_a_project_symlink(&Sbx, &world, &[]);
}

#[test]
fn credentials_are_unreadable_through_proc_self_root() {
    require_sandbox!();
    let world = World::new();
    let files = secret_files(&world);
    let mut paths: Vec<String> = files
        .iter()
        .map(|f| format!("/proc/self/root{}", world.home.join(f).display()))
        .collect();
    paths.push(format!(
        "/proc/self/root{}",
        world.home.join(".bashrc").display()
    ));
    // Also through PID 1's root (the inner stage's view).
    paths.extend(
        files
            .iter()
            .map(|f| format!("/proc/1/root{}", world.home.join(f).display())),
    );
    let out = Sbx.run_sh(&world, &cat_each(&paths));
    assert_no_secret(&out);
    assert_line(&out, "# rc");
}

#[test]
fn credentials_cannot_be_moved_copied_or_linked_into_the_project() {
    require_sandbox!();
    let world = World::new();
    let out = Sbx.run_sh(
        &world,
        "mv \"$HOME/.aws/credentials\" ./moved ; cat ./moved
         mv \"$HOME/.aws\" ./aws-dir ; cat ./aws-dir/credentials
         ln \"$HOME/.git-credentials\" ./hardlink ; cat ./hardlink
         ln -s \"$HOME/.netrc\" ./softlink ; cat ./softlink
         cp \"$HOME/.pypirc\" ./copied ; cat ./copied
         cp -r \"$HOME/.ssh\" ./ssh-copy ; cat ./ssh-copy/*
         echo ok > control.txt",
    );
    assert_no_secret(&out);
    // Host side: the originals are intact and no copy in the project holds the secret.
    assert_eq!(
        std::fs::read_to_string(world.home.join(".aws/credentials")).unwrap(),
        SECRET
    );
    assert_eq!(
        std::fs::read_to_string(world.home.join(".git-credentials")).unwrap(),
        SECRET
    );
    // Whatever the command created, make it readable to look inside.
    Command::new("chmod")
        .args(["-R", "u+rwX"])
        .arg(&world.project)
        .status()
        .unwrap();
    for (path, body) in snapshot(&world.project) {
        assert!(
            !body.contains(SECRET),
            "{} holds the secret",
            path.display()
        );
    }
    assert!(world.project.join("control.txt").is_file());
}

#[test]
fn env_files_are_unreadable_but_templates_are() {
    require_sandbox!();
    let world = World::new();
    let secret_envs = scenarios::plant_env_files(&world);
    let mut paths: Vec<String> = secret_envs.iter().map(|s| s.to_string()).collect();
    paths.push(".env.example".into());
    let script = cat_each(&paths)
        + "grep -r TOKEN . 2>&1
           echo overwritten > .env ; echo overwritten > sub/.env.local
           mv a/b/c/d/.env.production moved ; cat moved 2>&1
           echo ok > control.txt";
    let out = Sbx.run_sh(&world, &script);
    if util::unclaimed(&out, util::ENV_READABLE) {
        return;
    }
    assert_no_secret(&out);
    assert_line(&out, "TOKEN=example-value");
    // Host side: the files are unchanged, the control write worked.
    for f in secret_envs {
        assert_eq!(
            std::fs::read_to_string(world.project.join(f)).unwrap(),
            format!("TOKEN={SECRET}\n"),
            "{f}"
        );
    }
    assert!(world.project.join("control.txt").is_file());
}

#[test]
fn symlinked_credential_dir_is_masked_at_both_spellings() {
    require_sandbox!();
    scenarios::symlinked_credential_dir_is_unreadable_at_both_spellings(&Sbx);
}

// ---------------------------------------------------------------------------
// Files that run later
// ---------------------------------------------------------------------------

#[test]
fn runs_later_files_are_read_only() {
    require_sandbox!();
    scenarios::runs_later_files_are_read_only(&Sbx);
}

#[test]
fn missing_git_hooks_cannot_be_created() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    std::fs::remove_dir_all(world.project.join(".git/hooks")).unwrap();
    let status = || {
        let out = Command::new("git")
            .args(["status", "--porcelain", "--ignored"])
            .current_dir(&world.project)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", both(&out));
        stdout(&out)
    };
    let before = status();
    let out = Sbx.run_sh(
        &world,
        "mkdir -p .git/hooks ; touch .git/hooks/pre-push
         printf '#!/bin/sh\\ntouch \"$HOME/SBX_PWN\"\\n' > .git/hooks/pre-commit
         chmod +x .git/hooks/pre-commit
         mv .git/hooks .git/h2 ; mkdir .git/hooks/sub
         echo ok > .git/control",
    );
    let hooks = world.project.join(".git/hooks");
    if hooks.exists() {
        let entries: Vec<_> = std::fs::read_dir(&hooks)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            entries.is_empty(),
            "hooks were created: {entries:?}\n{}",
            both(&out)
        );
    }
    // Reduced mode puts `.git/hooks` back after the run; what the command
    // moved elsewhere in `.git` stays there (git runs nothing from it).
    if !util::unclaimed(&out, util::RUNS_LATER_WRITABLE) {
        assert!(!world.project.join(".git/h2").exists());
    }
    assert_eq!(status(), before, "the working tree changed");
    // Positive control: .git itself is writable (git needs it).
    assert!(
        world.project.join(".git/control").is_file(),
        "{}",
        both(&out)
    );
}

// ---------------------------------------------------------------------------
// Nothing else changes on the host
// ---------------------------------------------------------------------------

#[test]
fn nothing_changes_on_the_host_but_allowed_writes() {
    require_sandbox!();
    let world = World::new();
    // sbx's own first-run files (its cache) are written by the trusted outer
    // stage; let a first run create them so the diff shows only the command.
    let warmup = || {
        let warmup = Sbx.run_sh(&world, "true");
        assert!(warmup.status.success(), "{}", both(&warmup));
    };
    // A new `.sbx.toml` in the project can only narrow the policy. sbx's own
    // cache (outside every writable root) is refreshed by the trusted outer
    // stage on each run: existing entries may change, nothing may be added,
    // and none may hold what the command tried to write.
    let after = scenarios::nothing_changes_on_the_host_but_allowed_writes(
        &Sbx,
        &world,
        warmup,
        "mkdir -p \"$HOME/.config/autostart\"
         echo x > .env ; rm -f .env ; echo x > .sbx.toml
         unshare -rm sh -c 'mount -o remount,rw / && touch \"$HOME/SBX_PWN\"'
         mkdir -p \"$HOME/.cache/sbx\" ; echo evil > \"$HOME/.cache/sbx/planted\"
         for f in \"$HOME\"/.cache/sbx/*; do echo evil > \"$f\"; done",
        &["+ home/my project/.sbx.toml"],
        Some("~ home/.cache/sbx/"),
    );
    for (path, body) in &after {
        if path.starts_with("home/.cache/sbx") {
            assert!(
                !body.contains("evil"),
                "the command wrote {}",
                path.display()
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Agent state and tool caches
// ---------------------------------------------------------------------------

/// An agent's token is hidden from the commands it runs, and readable (with
/// its state writable) only when the user gives the agent its own state
/// directory: `sbx run --writable ~/.claude -- claude`. Neither a broader
/// grant (all of home) nor a project file can make it readable.
#[test]
fn agent_tokens_are_readable_only_when_the_agents_directory_is_granted() {
    require_sandbox!();
    let world = World::new();
    let token = world.home.join(".claude/.credentials.json");
    let state = world.home.join(".claude");
    let home = world.home.to_str().unwrap().to_string();
    let read = format!(
        "cat {} ; echo ; echo > {}/settings.json && echo STATE-WRITTEN",
        shq(token.to_str().unwrap()),
        shq(state.to_str().unwrap())
    );
    let sbx = |flags: &[&str]| {
        let mut cmd = world.sbx_std();
        cmd.arg("run")
            .args(flags)
            .args(["--", "sh", "-c", &read])
            .stdin(Stdio::null());
        cmd.output().unwrap()
    };
    // Given the agent's directory: its token and state are the agent's.
    let given = sbx(&["--writable", state.to_str().unwrap()]);
    assert!(stdout(&given).contains(SECRET), "{}", both(&given));
    assert_line(&given, "STATE-WRITTEN");
    // Home writable, which holds the directory: still hidden.
    let home_out = sbx(&["--writable", &home]);
    if util::contained() {
        // Reduced mode refuses a writable home, which holds sbx's cache.
        assert_eq!(home_out.status.code(), Some(125), "{}", both(&home_out));
        assert!(
            crate::host::stderr(&home_out).contains("cache directory"),
            "{}",
            both(&home_out)
        );
    } else {
        assert_no_secret(&home_out);
        assert_line(&home_out, "STATE-WRITTEN");
    }
    // A project file narrowing that grant to the agent's directory: hidden.
    util::write(
        &world.project.join(".sbx.toml"),
        &format!("[sandbox]\nwritable = [{:?}]\n", state.to_str().unwrap()),
    );
    let narrowed = sbx(&["--writable", &home]);
    if util::contained() {
        // Reduced mode refuses the writable home first (sbx's cache).
        assert_eq!(narrowed.status.code(), Some(125), "{}", both(&narrowed));
        assert!(
            crate::host::stderr(&narrowed).contains("cache directory"),
            "{}",
            both(&narrowed)
        );
    } else {
        assert_no_secret(&narrowed);
    }
    // Nothing given: hidden, and the state read-only as any other file
    // outside the project.
    std::fs::remove_file(world.project.join(".sbx.toml")).unwrap();
    let none = sbx(&[]);
    assert_no_secret(&none);
    assert_no_line_starting(&none, "STATE-WRITTEN");
}

/// npm, go's build and module caches, uv and pip fail (or, pip, run
/// without a cache) without a writable cache. When theirs
/// in home is not writable, each project gets one of sbx's: writable, seen
/// by no other project, while the user's own cache stays read-only.
#[test]
fn tools_get_a_per_project_cache_when_theirs_is_read_only() {
    require_sandbox!();
    let world = World::new();
    std::fs::create_dir_all(world.home.join(".npm")).unwrap();
    let script =
        "echo \"npm=$npm_config_cache\"; echo \"go=$GOCACHE\"; echo \"uv=$UV_CACHE_DIR\"; \
                  echo \"pip=$PIP_CACHE_DIR\"; echo \"gomod=$GOMODCACHE\"; echo \"hist=$HISTFILE\"; echo \"gradle=$GRADLE_USER_HOME\"; \
                  touch \"$npm_config_cache/written\" && echo CACHE-WRITTEN; \
                  touch \"$HOME/.npm/written\" && echo OWN-WRITTEN";
    let out = Sbx.run_sh(&world, script);
    let text = stdout(&out);
    let npm = text
        .lines()
        .find_map(|l| l.strip_prefix("npm="))
        .unwrap_or_default()
        .to_string();
    let cache = world.home.join(".cache/sbx/projects");
    assert!(
        std::path::Path::new(&npm).starts_with(&cache),
        "{}",
        both(&out)
    );
    for var in ["go=", "uv=", "pip=", "gomod=", "hist=", "gradle="] {
        let line = text
            .lines()
            .find(|l| l.starts_with(var))
            .unwrap_or_default();
        assert!(
            line.contains("/.cache/sbx/projects/"),
            "{var}: {}",
            both(&out)
        );
    }
    assert_line(&out, "CACHE-WRITTEN");
    assert!(std::path::Path::new(&npm).join("written").exists());
    assert_no_line_starting(&out, "OWN-WRITTEN");
    assert!(!world.home.join(".npm/written").exists());
    // Another project: another cache.
    let other = world.home.join("other project");
    std::fs::create_dir_all(&other).unwrap();
    util::git(&other, &["init", "-q"]);
    let mut cmd = world.sbx_std();
    cmd.current_dir(&other)
        .args(["run", "--", "sh", "-c", "echo \"npm=$npm_config_cache\""])
        .stdin(Stdio::null());
    let out2 = cmd.output().unwrap();
    let npm2 = stdout(&out2)
        .lines()
        .find_map(|l| l.strip_prefix("npm=").map(str::to_string))
        .unwrap_or_default();
    assert!(
        std::path::Path::new(&npm2).starts_with(&cache),
        "{}",
        both(&out2)
    );
    assert_ne!(npm, npm2);
    // With its own cache made writable, the tool keeps it.
    let mut cmd = world.sbx_std();
    cmd.args(["run", "--writable"])
        .arg(world.home.join(".npm"))
        .args(["--", "sh", "-c", "echo \"npm=${npm_config_cache:-unset}\""])
        .stdin(Stdio::null());
    let out3 = cmd.output().unwrap();
    assert_line(&out3, "npm=unset");
    // The cache directory says whose it is.
    let owner = std::path::Path::new(&npm).parent().unwrap().join("PROJECT");
    assert_eq!(
        std::fs::read(&owner).unwrap(),
        world.project.as_os_str().as_encoded_bytes()
    );
    // sbx's cache directory inside a writable root is read-only, so its
    // caches would be too: no redirect then.
    let mut cmd = world.sbx_std();
    cmd.env("XDG_CACHE_HOME", world.project.join("cache"))
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "echo \"npm=${npm_config_cache:-unset}\"",
        ])
        .stdin(Stdio::null());
    let out4 = cmd.output().unwrap();
    if util::contained() {
        // Reduced mode refuses a cache it cannot keep out of reach.
        assert_eq!(out4.status.code(), Some(125), "{}", both(&out4));
        assert!(
            crate::host::stderr(&out4).contains("cache directory"),
            "{}",
            both(&out4)
        );
        return;
    }
    assert_line(&out4, "npm=unset");
}

/// An interactive shell's history was silently not saved (`~/.bash_history`
/// is read-only): it goes to the project's own history file in sbx's
/// cache, and the user's own file is untouched.
#[test]
fn an_interactive_shells_history_is_saved_per_project() {
    require_sandbox!();
    let world = World::new();
    let own = world.home.join(".bash_history");
    util::write(&own, "echo the-users-own\n");
    let mut child = world
        .sbx_std()
        .current_dir(&world.project)
        .args(["run", "--", "bash", "-i"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"echo history-marker-7\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(stdout(&out).contains("history-marker-7"), "{}", both(&out));
    let saved: Vec<PathBuf> = std::fs::read_dir(world.home.join(".cache/sbx/projects"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("shell/history"))
        .filter(|p| p.is_file())
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}: {}", both(&out));
    let text = std::fs::read_to_string(&saved[0]).unwrap();
    assert!(text.contains("echo history-marker-7"), "{text}");
    assert_eq!(
        std::fs::read_to_string(&own).unwrap(),
        "echo the-users-own\n"
    );
}

// ---------------------------------------------------------------------------
// Masks the host lifts during a run
// ---------------------------------------------------------------------------

/// `sbx run -- sh -c SCRIPT` in the project, once the command has made the
/// file `started` there (a minute at most).
fn start_in_project(world: &World, script: &str) -> std::process::Child {
    let child = world
        .sbx_std()
        .current_dir(&world.project)
        .args(["run", "--", "sh", "-c", script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = world.project.join("started");
    let start = Instant::now();
    while !started.exists() {
        assert!(
            start.elapsed() < util::DEADLINE,
            "the command did not start"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// The run's output once it has ended (a minute at most: then it is killed
/// and the test fails).
fn ended(mut child: std::process::Child) -> Output {
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > util::DEADLINE {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("the run was not stopped: {}", both(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A program on the host that renames a file over a masked `.env` (an
/// editor saving through a temporary file), removes it and writes a new
/// one, or moves a directory on the way aside and makes a new one in its
/// place, lifts the mask inside the running sandbox: the run is stopped.
#[test]
fn a_masked_file_replaced_on_the_host_stops_the_run() {
    require_sandbox!();
    if util::contained() {
        eprintln!("NOTE: reduced mode mounts no masks (it says .env files stay readable)");
        return;
    }
    let world = World::new();
    let sub = world.project.join("sub");
    let env = sub.join(".env");
    for replace in ["rename over", "remove and write", "directory made again"] {
        let _ = std::fs::remove_dir_all(world.root.join("sub-old"));
        util::write(&env, SECRET);
        let _ = std::fs::remove_file(world.project.join("started"));
        let child = start_in_project(&world, ": > started; exec sleep 600");
        let said = match replace {
            "rename over" => {
                util::write(&sub.join(".env.tmp"), "NEW-SECRET");
                std::fs::rename(sub.join(".env.tmp"), &env).unwrap();
                format!("{} was replaced on the host", env.display())
            }
            "remove and write" => {
                std::fs::remove_file(&env).unwrap();
                util::write(&env, "NEW-SECRET");
                format!("{} was replaced on the host", env.display())
            }
            _ => {
                std::fs::rename(&sub, world.root.join("sub-old")).unwrap();
                util::write(&env, "NEW-SECRET");
                format!(
                    "{}, on the way to a masked path, was moved or removed on the host",
                    sub.display()
                )
            }
        };
        let out = ended(child);
        assert_eq!(out.status.code(), Some(137), "{replace}: {}", both(&out));
        assert!(
            stderr(&out).contains(&format!("the command was stopped: {said}")),
            "{replace}: {}",
            both(&out)
        );
    }
}

/// Control: an edit in place keeps the mask (the same file), and other
/// names made or renamed beside it change nothing; the run goes on.
#[test]
fn edits_in_place_and_files_beside_a_mask_do_not_stop_the_run() {
    require_sandbox!();
    let world = World::new();
    let env = world.project.join(".env");
    util::write(&env, SECRET);
    let child = start_in_project(
        &world,
        ": > started; while [ ! -e go ]; do sleep 0.02; done; cat .env; echo; echo finished",
    );
    std::fs::write(&env, format!("EDITED-{SECRET}")).unwrap();
    util::write(&world.project.join("notes.txt"), "notes");
    std::fs::rename(
        world.project.join("notes.txt"),
        world.project.join("notes2.txt"),
    )
    .unwrap();
    util::write(&world.project.join("go"), "");
    let out = ended(child);
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "finished");
    assert!(!stderr(&out).contains("stopped"), "{}", both(&out));
    if !util::unclaimed(&out, util::ENV_READABLE) {
        assert_no_secret(&out);
    }
}
