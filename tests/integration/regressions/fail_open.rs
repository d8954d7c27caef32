//! Fail-open: the command must never run without the sandbox.

use super::*;

/// Round 2, F1: started in /usr/bin, the only bubblewrap lay in the working
/// directory, was distrusted, reported "not installed", and the command ran
/// unsandboxed. An untrusted configured one did the same. Now every
/// bubblewrap that exists but cannot be trusted refuses with 125.
#[test]
fn untrusted_bubblewrap_is_refused_never_a_fallback() {
    require_sandbox!();
    let world = World::new();
    let ran = world.root.join("fake-ran");
    let project = world.project.to_str().unwrap();
    let config = |bwrap: &Path| {
        world.user_config(&format!("[sandbox]\nbwrap = \"{}\"\n", bwrap.display()));
    };

    // The only configured bubblewrap lies in the working directory (outside
    // /tmp, outside the project), the project named with --project.
    let here = world.root.join("here");
    config(&util::fake_bwrap(&here, UID_MAP_ERROR, Some(&ran)));
    let out = sbx_sh(&world, &here, &["--project", project], &victim(&world), &[]);
    assert_not_run(&world, &out);

    // In the project, a writable root the command could have written it to.
    config(&util::fake_bwrap(
        &world.project.join("bin"),
        UID_MAP_ERROR,
        Some(&ran),
    ));
    let out = Sbx.run_sh(&world, &victim(&world));
    assert_not_run(&world, &out);

    // Configured in the project and deleted by an earlier run: still not
    // "missing" (which may fall back), because the command could delete it.
    config(&world.project.join("bin/gone"));
    let out = Sbx.run_sh(&world, &victim(&world));
    assert_not_run(&world, &out);
    assert!(!ran.exists(), "an untrusted bubblewrap was executed");

    // The real bubblewrap, with sbx started in its directory (the PoC ran
    // in /usr/bin) and nothing else on PATH.
    std::fs::remove_file(world.home.join(".config/sbx/config.toml")).unwrap();
    let Ok(real) = std::fs::canonicalize("/usr/bin/bwrap") else {
        eprintln!("NOTE: no /usr/bin/bwrap; the 'started in its directory' case is skipped");
        return;
    };
    let dir = real.parent().unwrap().to_path_buf();
    let others: Vec<PathBuf> = ["/usr/bin/bwrap", "/bin/bwrap"]
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .filter(|p| !p.starts_with(&dir))
        .collect();
    if !others.is_empty() {
        eprintln!("NOTE: another bubblewrap ({others:?}) is trusted from {}; the 'started in its directory' case is skipped", dir.display());
        return;
    }
    let mut cmd = world.sbx_std();
    cmd.current_dir(&dir)
        .env("PATH", format!("{}:/usr/bin:/bin", dir.display()));
    sh_in(&mut cmd, &["--project", project], &victim(&world), &[]);
    let out = cmd.output().unwrap();
    show("started in the directory of bwrap", &out);
    assert_not_run(&world, &out);
    assert!(
        stderr(&out).contains("lies inside a writable root or the working directory"),
        "{}",
        both(&out)
    );
}

/// Round 1, F1b: a narrowing-only project file that breaks the sandbox
/// (`deny_read = ["/proc"]`, or the sbx binary itself) made sbx run the
/// command unsandboxed. Planted in a subdirectory by an earlier run (where
/// the sweep does not look), it now makes every run there exit 125.
#[test]
fn project_file_that_breaks_the_sandbox_refuses() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let sub = world.project.join("sub");
    let out = Sbx.run_sh(
        &world,
        r#"mkdir -p sub && printf '[sandbox]\ndeny_read = ["/proc"]\n' > sub/.sbx.toml"#,
    );
    assert_ok(&out);
    assert!(sub.join(".sbx.toml").is_file(), "{}", both(&out));
    let out = sbx_sh(&world, &sub, &[], &victim(&world), &[]);
    if util::contained() {
        // Reduced mode has no mount for such a file to break: the command
        // runs, sandboxed.
        assert_ran_sandboxed(&world, &out);
        return;
    }
    assert_not_run(&world, &out);

    // sbx's own binary: bubblewrap's mask over it stops the inner stage
    // from starting, outside a git repository (no config copies)...
    let sbx = std::fs::canonicalize(util::sbx_path()).unwrap();
    let deny_sbx = format!("[sandbox]\ndeny_read = [\"{}\"]\n", sbx.display());
    let plain = World::new();
    let plain_sub = plain.project.join("sub");
    util::write(&plain_sub.join(".sbx.toml"), &deny_sbx);
    let out = sbx_sh(&plain, &plain_sub, &[], &victim(&plain), &[]);
    assert_not_run(&plain, &out);
    // ... while in one the inner stage, already running, masks it itself
    // (#17): the command runs sandboxed, and the binary is unreadable.
    util::write(&sub.join(".sbx.toml"), &deny_sbx);
    let script = format!("{}; cat {} | wc -c", victim(&world), shq_path(&sbx));
    let out = sbx_sh(&world, &sub, &[], &script, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert!(!marker(&world).exists(), "{}", both(&out));
    assert_absent(&out, "NOT sandboxed");
    assert_no_secret(&out);
    assert_line(&out, "0");
}

/// A relative directory below the project, `deep/...`, such that
/// `PROJECT/deep/.../.env` is exactly `total` bytes long.
fn long_relative_dir(project: &Path, total: usize) -> String {
    let mut rel = String::from("deep");
    let fixed = project.as_os_str().len() + 1 + rel.len() + "/.env".len();
    let mut remaining = total.checked_sub(fixed).unwrap();
    while remaining > 0 {
        // Each component is "/" and 1..=200 bytes; never leave 1 byte over.
        let mut n = (remaining - 1).min(200);
        if remaining - (n + 1) == 1 {
            n -= 1;
        }
        rel.push('/');
        rel.push_str(&"d".repeat(n));
        remaining -= n + 1;
    }
    rel
}

/// Round 1, F1a: one sandboxed run planted a `.env` whose real path was just
/// under PATH_MAX; bubblewrap could not mount over it, and every later run
/// fell back to no sandbox. Now such a run exits 125 (or, below the limit,
/// runs sandboxed with the `.env` masked); the HOME write never lands.
#[test]
fn env_file_with_a_path_near_path_max_never_unsandboxes() {
    require_sandbox!();
    let world = World::new();
    for total in [4000, 4088, 4090, 4095] {
        let rel = long_relative_dir(&world.project, total);
        let env = world.project.join(&rel).join(".env");
        assert_eq!(env.as_os_str().len(), total);
        let out = sbx_sh(
            &world,
            &world.project,
            &[],
            r#"mkdir -p "$1" && echo "$2" > "$1/.env""#,
            &[&rel, SECRET],
        );
        assert_ok(&out);
        assert_eq!(read(&env).trim(), SECRET, "length {total}");

        let script = format!("{}; cat \"$1/.env\"", victim(&world));
        let out = sbx_sh(&world, &world.project, &[], &script, &[&rel]);
        assert!(
            !marker(&world).exists(),
            "length {total}: the command ran unsandboxed\n{}",
            both(&out)
        );
        assert_absent(&out, "NOT sandboxed");
        // Reduced mode runs it, sandboxed; the `.env` lies in the project,
        // where it cannot be hidden, and the run says so.
        if !util::unclaimed(&out, util::ENV_READABLE) {
            assert_no_secret(&out);
        }
        assert!(
            out.status.code() == Some(125) || stdout(&out).contains("VICTIM-RAN"),
            "length {total}: neither refused nor run sandboxed\n{}",
            both(&out)
        );
        if out.status.code() == Some(125) {
            assert_absent(&out, "VICTIM-RAN");
        }
        std::fs::remove_dir_all(world.project.join("deep")).unwrap();
    }
}
