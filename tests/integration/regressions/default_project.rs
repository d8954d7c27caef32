//! What the default project may be.

use super::*;

/// A directory outside HOME in no git repository: the world's root, unless
/// the worlds live inside a checkout (cargo's target directory), then a
/// fresh one in /var/tmp.
fn outside_dir(world: &World) -> (PathBuf, Option<tempfile::TempDir>) {
    let in_repo = |p: &Path| p.ancestors().any(|a| a.join(".git").exists());
    if !in_repo(&world.root) {
        let dir = world.root.join("outside");
        std::fs::create_dir_all(&dir).unwrap();
        return (dir, None);
    }
    let tmp = tempfile::Builder::new()
        .prefix("sbx-test-outside-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let dir = std::fs::canonicalize(tmp.path()).unwrap();
    assert!(!in_repo(&dir), "{} is in a git repository", dir.display());
    (dir, Some(tmp))
}

/// Round 1 and 2: with the default `writable = ["."]`, sbx made whatever
/// directory it was started in writable when there was no project: HOME (a
/// planted ~/.local/bin/git), a hidden directory (sbx's own cache), a PATH
/// directory, or /usr/bin as root. Now none of these is writable by
/// default, a warning says why, and `--project DIR` still makes it writable.
#[test]
fn default_project_is_not_writable_outside_a_project() {
    require_sandbox!();
    let world = World::new();
    let (outside, _keep) = outside_dir(&world);
    let on_path = world.home.join("tools");
    let path = format!(
        "{}:{}",
        on_path.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let cases = [
        (world.home.clone(), "it is your home directory"),
        (world.home.join(".config"), "hidden directory of your home"),
        (
            world.home.join(".cache/sbx"),
            "hidden directory of your home",
        ),
        (
            outside.clone(),
            "outside your home directory and not a git repository",
        ),
        (on_path.clone(), "it is a directory on PATH"),
    ];
    for (dir, why) in &cases {
        std::fs::create_dir_all(dir).unwrap();
        let mut cmd = world.sbx_std();
        cmd.current_dir(dir).env("PATH", &path);
        sh_in(&mut cmd, &[], "touch probe; true", &[]);
        let out = cmd.output().unwrap();
        show(&dir.display().to_string(), &out);
        assert_ok(&out);
        assert!(
            !present(&dir.join("probe")),
            "{}: the default project was writable\n{}",
            dir.display(),
            both(&out)
        );
        let err = stderr(&out);
        assert!(
            err.contains(&format!("{} is not made writable", dir.display())) && err.contains(why),
            "{}: no warning saying {why:?}\n{}",
            dir.display(),
            both(&out)
        );
    }
    // Named explicitly, a directory is writable (sbx's cache never: see
    // `a_path_kept_read_only_is_never_a_writable_root`).
    for (dir, _) in cases.iter().filter(|(d, _)| !d.ends_with(".cache/sbx")) {
        let mut cmd = world.sbx_std();
        cmd.current_dir(dir).env("PATH", &path);
        sh_in(
            &mut cmd,
            &["--project", dir.to_str().unwrap()],
            "touch probe",
            &[],
        );
        let out = cmd.output().unwrap();
        show(&dir.display().to_string(), &out);
        if util::contained() && world.home.join(".cache/sbx").starts_with(dir) {
            // Reduced mode cannot keep sbx's cache out of a writable home:
            // it refuses, naming it.
            assert_eq!(out.status.code(), Some(125), "{}", both(&out));
            assert!(stderr(&out).contains("cache directory"), "{}", both(&out));
            continue;
        }
        assert_ok(&out);
        assert!(
            dir.join("probe").exists(),
            "{}\n{}",
            dir.display(),
            both(&out)
        );
    }
}

/// Round 2, cc0f54e: a path sbx keeps read-only (its own configuration and
/// cache, a hooks directory outside the project) that was itself named as a
/// writable root was silently left writable. Now that refuses with 125.
#[test]
fn a_path_kept_read_only_is_never_a_writable_root() {
    require_sandbox!();
    let world = World::new();
    world.user_config("# mine\n");
    let user_config = world.home.join(".config/sbx/config.toml");
    let sbx_config = world.home.join(".config/sbx");
    let out = sbx_sh(
        &world,
        &world.project,
        &["--writable", sbx_config.to_str().unwrap()],
        &format!(
            "echo '[sandbox]' > {}; {}",
            shq_path(&user_config),
            victim(&world)
        ),
        &[],
    );
    assert_not_run(&world, &out);
    assert_eq!(read(&user_config), "# mine\n");

    // sbx's cache as the project: the PoC poisoned other projects' .env
    // scan results from there.
    let cache = world.home.join(".cache/sbx");
    std::fs::create_dir_all(&cache).unwrap();
    let before = snapshot(&cache);
    let out = sbx_sh(
        &world,
        &cache,
        &["--project", cache.to_str().unwrap()],
        &format!("touch envscan-poison; {}", victim(&world)),
        &[],
    );
    assert_not_run(&world, &out);
    assert!(diff(&before, &snapshot(&cache)).is_empty());

    // A hooks directory outside the project, named writable.
    world.git_repo();
    let hooks = world.root.join("hooks");
    util::write(&hooks.join("pre-commit"), "#!/bin/sh\n");
    util::git(
        &world.project,
        &["config", "core.hooksPath", hooks.to_str().unwrap()],
    );
    let out = sbx_sh(
        &world,
        &world.project,
        &["--writable", hooks.to_str().unwrap()],
        &format!(
            "echo evil > {}; {}",
            shq_path(&hooks.join("pre-commit")),
            victim(&world)
        ),
        &[],
    );
    assert_not_run(&world, &out);
    assert_eq!(read(&hooks.join("pre-commit")), "#!/bin/sh\n");
}
