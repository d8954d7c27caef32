//! Regressions: every bypass the two adversarial reviews found, replayed
//! against sbx as it is now (the "Security:" commits fixed them). A test
//! whose finding turned out not to be fixed keeps asserting the safe
//! behaviour and says so in a `BUG:` comment.
//!
//! Each test is one finding, shaped like its proof of concept, and judged by
//! host-side evidence only: a marker the command writes in HOME is absent, the
//! planted secret appears in nothing it printed, a host file is unchanged or
//! was moved aside. Where an exit status matters (125: refused, nothing ran)
//! it is checked beside that evidence, never instead of it.
//!
//! The suite runs as root and as an unprivileged user (`.ci/run`). Cases that
//! only mean something for a user the kernel holds to file permissions say so
//! loudly when run as root, and still check what root can show.
//! `SBX_TEST_SHOW=1` prints every sandboxed run's output.

use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::host::{
    assert_absent, assert_no_secret, both, diff, show, shq_path, snapshot, stderr, stdout, tool,
    unique,
};
use crate::require_sandbox;
use crate::util::{self, Runner, Sbx, World, SECRET, UID_MAP_ERROR};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// `sbx run FLAGS -- sh -c SCRIPT sh ARGS...` started in `dir`, stdin closed.
fn sbx_sh(world: &World, dir: &Path, flags: &[&str], script: &str, args: &[&str]) -> Output {
    let mut cmd = world.sbx_std();
    cmd.current_dir(dir);
    sh_in(&mut cmd, flags, script, args);
    let out = cmd.output().unwrap();
    show(script, &out);
    out
}

/// Add `run FLAGS -- sh -c SCRIPT sh ARGS...` to an sbx command.
fn sh_in(cmd: &mut Command, flags: &[&str], script: &str, args: &[&str]) {
    cmd.arg("run")
        .args(flags)
        .arg("--")
        .args(["sh", "-c", script, "sh"])
        .args(args)
        .stdin(Stdio::null());
}

/// Wait until the sandboxed command has written `up` in the project (it
/// has started), failing the test after the deadline.
fn wait_for_up(world: &World) {
    let start = Instant::now();
    while !world.project.join("up").exists() {
        assert!(
            start.elapsed() < util::DEADLINE,
            "the command never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The file the victim command writes in HOME: it can only land without a
/// sandbox.
fn marker(world: &World) -> PathBuf {
    world.home.join("PWNED")
}

/// What the attacks of both reviews ran once the sandbox was gone: write in
/// HOME, print a credential, and say it ran.
fn victim(world: &World) -> String {
    format!(
        "touch {}; cat {}; echo VICTIM-RAN",
        shq_path(&marker(world)),
        shq_path(&world.home.join(".netrc"))
    )
}

/// Refused before anything ran: 125, no marker, the command never started,
/// no secret, and no "NOT sandboxed" fallback.
fn assert_not_run(world: &World, out: &Output) {
    assert_eq!(out.status.code(), Some(125), "{}", both(out));
    assert!(
        !marker(world).exists(),
        "the command ran unsandboxed (it wrote {})\n{}",
        marker(world).display(),
        both(out)
    );
    assert_absent(out, "VICTIM-RAN");
    assert_absent(out, "NOT sandboxed");
    assert_no_secret(out);
}

/// A successful sandboxed run (a positive control or a setup step).
fn assert_ok(out: &Output) {
    assert!(out.status.success(), "{}", both(out));
    assert_absent(out, "NOT sandboxed");
}

/// Whether anything exists at `p`, a dangling or planted link included.
fn present(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok()
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Poll until `p` exists; false after `timeout`.
fn wait_for(p: &Path, timeout: Duration) -> bool {
    let start = Instant::now();
    while !present(p) {
        if start.elapsed() > timeout {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// HOME as the host sees it, minus the project and sbx's cache (which a run
/// legitimately changes).
fn home_snapshot(world: &World) -> BTreeMap<PathBuf, String> {
    snapshot(&world.home)
        .into_iter()
        .filter(|(p, _)| !p.starts_with("my project") && !p.starts_with(".cache"))
        .collect()
}

// ---------------------------------------------------------------------------
// Fail-open: the command must never run without the sandbox
// ---------------------------------------------------------------------------

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
    assert_not_run(&world, &out);

    let sbx = std::fs::canonicalize(util::sbx_path()).unwrap();
    util::write(
        &sub.join(".sbx.toml"),
        &format!("[sandbox]\ndeny_read = [\"{}\"]\n", sbx.display()),
    );
    let out = sbx_sh(&world, &sub, &[], &victim(&world), &[]);
    assert_not_run(&world, &out);
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
        assert_no_secret(&out);
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

// ---------------------------------------------------------------------------
// The post-run sweep
// ---------------------------------------------------------------------------

/// Round 1, F3: a project file with `deny_write = ["y/.netrc"]` (missing
/// parent) and then `ln -s ~ y`: the sweep renamed through the link and moved
/// the real `~/.netrc` aside. Now nothing outside the project is touched.
#[test]
fn sweep_never_renames_through_a_planted_link() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let out = Sbx.run_sh(
        &world,
        r#"mkdir -p sub && printf '[sandbox]\ndeny_write = ["y/.netrc", "y/.git-credentials"]\n' > sub/.sbx.toml"#,
    );
    assert_ok(&out);
    let before = home_snapshot(&world);
    let link = world.project.join("y");
    let out = sbx_sh(
        &world,
        &world.project.join("sub"),
        &[],
        &format!("ln -s {} ../y", shq_path(&world.home)),
        &[],
    );
    assert_absent(&out, "NOT sandboxed");
    let changed = diff(&before, &home_snapshot(&world));
    assert!(
        changed.is_empty(),
        "the sweep changed HOME: {changed:#?}\n{}",
        both(&out)
    );
    assert_eq!(read(&world.home.join(".netrc")), SECRET);
    assert_eq!(read(&world.home.join(".git-credentials")), SECRET);
    assert!(!present(&world.home.join(".netrc.sbx-blocked")));
    assert!(!present(&world.home.join(".git-credentials.sbx-blocked")));
    // The planted link itself was neutralised, or sbx said it could not.
    assert!(
        !present(&link) || out.status.code() == Some(125),
        "{} was left in place without a 125\n{}",
        link.display(),
        both(&out)
    );
}

/// Round 1, F4b: two overlapping runs. A creates `.envrc` and is still
/// running when B starts; A's sweep moves it aside; B then writes a new one,
/// which the old sweep (watching only paths missing at B's start) left in
/// place. Now every `.envrc` either run planted is moved aside.
#[test]
fn overlapping_runs_leave_no_envrc_in_place() {
    require_sandbox!();
    let world = World::new();
    let p = &world.project;
    let spawn = |script: &str| -> Child {
        let mut cmd = world.sbx_std();
        sh_in(&mut cmd, &[], script, &[]);
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    // Every wait inside is bounded (4 s), so a failed step cannot hang.
    let a = spawn(
        "echo decoy > .envrc; i=0; while [ ! -e go ] && [ $i -lt 200 ]; do sleep 0.02; i=$((i+1)); done",
    );
    let envrc = p.join(".envrc");
    let a_planted = wait_for(&envrc, Duration::from_secs(10));
    let b = spawn(
        "touch b-started; i=0; while [ ! -e .envrc.sbx-blocked ] && [ $i -lt 200 ]; do sleep 0.02; i=$((i+1)); done; echo evil > .envrc",
    );
    let b_started = wait_for(&p.join("b-started"), Duration::from_secs(10));
    std::fs::write(p.join("go"), "").unwrap();
    let a = a.wait_with_output().unwrap();
    let b = b.wait_with_output().unwrap();
    show("run A", &a);
    show("run B", &b);
    assert!(a_planted && b_started, "{}\n{}", both(&a), both(&b));
    assert!(
        !present(&envrc),
        ".envrc left in place: {:?}\nA: {}\nB: {}",
        std::fs::read_to_string(&envrc),
        both(&a),
        both(&b)
    );
    // Both were moved aside, nothing deleted: A's decoy, then B's.
    let blocked = |n: &str| std::fs::read_to_string(p.join(n)).unwrap_or_default();
    let aside = [
        blocked(".envrc.sbx-blocked"),
        blocked(".envrc.sbx-blocked-2"),
    ];
    assert!(
        aside.contains(&"decoy\n".to_string()) && aside.contains(&"evil\n".to_string()),
        "moved aside: {aside:?}\nA: {}\nB: {}",
        both(&a),
        both(&b)
    );
}

/// Round 2, F8 (side effect of the commondir fix): `.git/commondir` was
/// watched even where there was no `.git`, so a legitimate `git init` in the
/// sandbox got its new `.git` moved aside.
#[test]
fn git_init_in_a_project_without_git_is_left_in_place() {
    require_sandbox!();
    let world = World::new();
    let out = Sbx.run_sh(&world, "git init -q && echo INIT-OK");
    assert_ok(&out);
    assert!(stdout(&out).contains("INIT-OK"), "{}", both(&out));
    assert!(world.project.join(".git").is_dir(), "{}", both(&out));
    assert!(world.project.join(".git/HEAD").is_file(), "{}", both(&out));
    assert!(
        !present(&world.project.join(".git.sbx-blocked")),
        "{}",
        both(&out)
    );
    assert_absent(&out, "sbx-blocked");
}

/// Round 1, git: a repository created inside the sandbox is reported for
/// any config key `git init` does not write, not a list of known ones.
#[test]
fn git_init_with_keys_git_runs_is_reported() {
    require_sandbox!();
    let world = World::new();
    let out = Sbx.run_sh(
        &world,
        "git init -q && git config diff.x.textconv 'touch /x' && git config core.sshCommand 'touch /y'",
    );
    assert_ok(&out);
    let err = stderr(&out);
    assert!(
        err.contains("created the git repository")
            && err.contains("textconv")
            && err.to_lowercase().contains("core.sshcommand"),
        "{}",
        both(&out)
    );
}

/// Replaces the link `$1` with a directory of the command's own holding an
/// executable `$2` that touches `$3`, the way the PoC did (`rm`, `mkdir`).
/// It keeps trying (up to 50 times, parking misses in `junk-N`) until the new
/// directory has the inode number the link had, which ext4 hands out again
/// when the directory lands in the same block group. Prints `REUSED-INODE
/// yes|no`.
const REPLACE_LINK_WITH_DIR: &str = r#"
i=$(stat -c %i "$1"); rm "$1" || exit 1; n=0
while mkdir "$1" && [ "$(stat -c %i "$1")" != "$i" ] && [ $n -lt 50 ]; do
  n=$((n+1)); mv "$1" "junk-$n"
done
[ "$(stat -c %i "$1")" = "$i" ] && echo "REUSED-INODE yes" || echo "REUSED-INODE no"
printf '#!/bin/sh\ntouch "%s"\n' "$3" > "$1/$2" && chmod +x "$1/$2"
"#;

/// The same, but the replacement is a new link to a directory the command
/// made in the project (a freed link's inode number usually goes to the
/// next link made in the same directory; misses are parked the same way).
const REPLACE_LINK_WITH_LINK: &str = r#"
i=$(stat -c %i "$1")
mkdir mine && printf '#!/bin/sh\ntouch "%s"\n' "$3" > "mine/$2" && chmod +x "mine/$2"
rm "$1" || exit 1; n=0
while ln -s mine "$1" && [ "$(stat -c %i "$1")" != "$i" ] && [ $n -lt 50 ]; do
  n=$((n+1)); mv "$1" "junk-$n"
done
[ "$(stat -c %i "$1")" = "$i" ] && echo "REUSED-INODE yes" || echo "REUSED-INODE no"
"#;

/// Round 2, F7: a protected path that is a symlink to outside the writable
/// roots (`.vscode -> ~/dotfiles/vscode`, a hooks directory linked to
/// dotfiles) was silently skipped, and the command could replace the link.
/// The fix watches the link by its identity (device and inode number) and
/// moves a replacement aside. Each replacement is tried in fresh worlds until
/// one gets the link's inode number back (concurrent tests can take it
/// first; a file system that never reuses numbers, like tmpfs, never does).
fn replaced_protected_link_is_moved_aside(name: &str, file: &str, hooks_path: bool) {
    for (how, replace) in [
        ("a directory", REPLACE_LINK_WITH_DIR),
        ("a link to its own directory", REPLACE_LINK_WITH_LINK),
    ] {
        if !(0..5).any(|_| replace_protected_link(name, file, hooks_path, how, replace)) {
            eprintln!(
                "NOTE: replacing {name} with {how} never reused the link's inode number here; \
                 only the plain replacement was checked"
            );
        }
    }
}

/// One world: `name` is a link to dotfiles, the command replaces it with
/// `replace`. Judged on the host: afterwards `name` is gone or still the
/// user's link, the replacement sits in `NAME.sbx-blocked`, the link's target
/// is unchanged, the warning names both, and for a hooks directory a host
/// `git commit` does not run the planted hook. True when the replacement
/// got the link's inode number.
fn replace_protected_link(
    name: &str,
    file: &str,
    hooks_path: bool,
    how: &str,
    replace: &str,
) -> bool {
    let world = World::new();
    world.git_repo();
    let target = world.root.join("dotfiles").join(name);
    util::write(&target.join(file), "original\n");
    let link = world.project.join(name);
    symlink(&target, &link).unwrap();
    if hooks_path {
        util::git(&world.project, &["config", "core.hooksPath", name]);
    }
    let before = snapshot(&target);
    let planted_ran = world.home.join("PLANTED-RAN");
    // Writing through the link first: refused, the target is read-only.
    let script = format!("echo through > {name}/{file}; {replace}");
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        &script,
        &[name, file, planted_ran.to_str().unwrap()],
    );
    assert_absent(&out, "NOT sandboxed");
    let changed = diff(&before, &snapshot(&target));
    assert!(changed.is_empty(), "the link's target changed: {changed:?}");
    let reused = stdout(&out).contains("REUSED-INODE yes");
    if hooks_path {
        util::git(
            &world.project,
            &["commit", "-q", "--allow-empty", "-m", "x"],
        );
    }
    // Regression: the identity sbx compared was (device, inode number)
    // alone, and a replacement that got the deleted link's inode number (a
    // new link nearly always, a directory often, on ext4) was left in place;
    // the identity now also holds the change time, the type and the target.
    assert!(
        !planted_ran.exists(),
        "replaced with {how}: host git ran the hook the command planted (inode number reused: {reused})\n{}",
        both(&out)
    );
    let kept = std::fs::read_link(&link).ok();
    assert!(
        !present(&link) || kept.as_deref() == Some(target.as_path()),
        "replaced with {how}: the command's {name} was left in place, {kept:?} (inode number reused: {reused})\n{}",
        both(&out)
    );
    let aside = world.project.join(format!("{name}.sbx-blocked"));
    assert!(aside.join(file).is_file(), "{how}\n{}", both(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&link.display().to_string()) && err.contains(&aside.display().to_string()),
        "replaced with {how}: the warning does not name it\n{}",
        both(&out)
    );
    reused
}

/// `.vscode -> ~/dotfiles/vscode`, replaced so that `.vscode/tasks.json`
/// is the command's (VS Code runs folder-open tasks on the host).
#[test]
fn symlinked_vscode_replaced_by_the_command_is_moved_aside() {
    require_sandbox!();
    replaced_protected_link_is_moved_aside(".vscode", "tasks.json", false);
}

/// `core.hooksPath = .githooks`, a link to dotfiles, replaced so that
/// `.githooks/pre-commit` is the command's.
#[test]
fn symlinked_hooks_dir_replaced_by_the_command_is_moved_aside() {
    require_sandbox!();
    replaced_protected_link_is_moved_aside(".githooks", "pre-commit", true);
}

// ---------------------------------------------------------------------------
// git's "runs later" surface
// ---------------------------------------------------------------------------

/// Round 1 and 2, F8: the directory `core.hooksPath` names (husky) is
/// read-only like .git/hooks, however the key is spelled: `git config`,
/// `[core] hooksPath = x` on the section line, a trailing `; comment`, or in
/// the user's own ~/.gitconfig.
#[test]
fn hooks_path_directory_is_read_only_in_every_spelling() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let config = world.project.join(".git/config");
    let pristine = read(&config);
    let hook = world.project.join(".husky/pre-commit");
    util::write(&hook, "#!/bin/sh\necho original\n");
    let gitconfig = world.home.join(".gitconfig");
    let user = read(&gitconfig);
    for (name, repo_extra, user_extra) in [
        ("git config", "[core]\n\thooksPath = .husky\n", ""),
        ("section line", "[core] hooksPath = .husky\n", ""),
        ("comment", "[core]\n\thooksPath = .husky ; husky\n", ""),
        ("~/.gitconfig", "", "[core]\n\thooksPath = .husky\n"),
    ] {
        std::fs::write(&config, format!("{pristine}{repo_extra}")).unwrap();
        std::fs::write(&gitconfig, format!("{user}{user_extra}")).unwrap();
        // git itself reads this spelling as .husky (else the case is moot).
        let seen = world
            .host_cmd("git")
            .args(["config", "core.hooksPath"])
            .output()
            .unwrap();
        assert_eq!(stdout(&seen).trim(), ".husky", "{name}: {}", both(&seen));
        let out = Sbx.run_sh(
            &world,
            "echo evil > .husky/pre-commit; echo evil >> .husky/pre-commit; rm -f .husky/pre-commit; mv .husky h2; echo new > .husky/post-checkout; true",
        );
        assert_ok(&out);
        assert_eq!(
            std::fs::read_to_string(&hook).ok().as_deref(),
            Some("#!/bin/sh\necho original\n"),
            "{name}: the hook changed\n{}",
            both(&out)
        );
        assert!(
            !present(&world.project.join(".husky/post-checkout")),
            "{name}: a new hook landed\n{}",
            both(&out)
        );
        assert!(
            !present(&world.project.join("h2")),
            "{name}\n{}",
            both(&out)
        );
    }
}

/// Round 2, F8 (b): a hooks directory named in ~/.gitconfig that does not
/// exist yet is created by the command: moved aside after the run.
#[test]
fn missing_hooks_path_directory_created_by_the_command_is_moved_aside() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let gitconfig = world.home.join(".gitconfig");
    std::fs::write(
        &gitconfig,
        format!("{}[core]\n\thooksPath = .githooks\n", read(&gitconfig)),
    )
    .unwrap();
    let out = Sbx.run_sh(
        &world,
        "mkdir .githooks && printf '#!/bin/sh\\ntouch /x\\n' > .githooks/pre-commit && chmod +x .githooks/pre-commit",
    );
    assert_absent(&out, "NOT sandboxed");
    assert!(!present(&world.project.join(".githooks")), "{}", both(&out));
    assert!(
        world
            .project
            .join(".githooks.sbx-blocked/pre-commit")
            .is_file(),
        "{}",
        both(&out)
    );
}

/// Round 1, git: `.git/commondir` sends git to another directory for its
/// config and hooks. Created inside, it is moved aside after the run.
#[test]
fn git_commondir_created_inside_is_moved_aside() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let evil = world.project.join("evilgit");
    let out = Sbx.run_sh(
        &world,
        &format!(
            "mkdir -p evilgit/hooks && printf '[core]\\n\\tfsmonitor = \"touch /x; echo\"\\n' > evilgit/config && echo {} > .git/commondir",
            shq_path(&evil)
        ),
    );
    assert_absent(&out, "NOT sandboxed");
    let commondir = world.project.join(".git/commondir");
    assert!(!present(&commondir), "{}", both(&out));
    assert_eq!(
        read(&world.project.join(".git/commondir.sbx-blocked")).trim(),
        evil.to_str().unwrap()
    );
    assert!(
        stderr(&out).contains(&commondir.display().to_string()),
        "{}",
        both(&out)
    );
}

/// Round 2, F8 (e): a linked worktree's `commondir`, `gitdir` and
/// `config.worktree` under .git/worktrees, and the worktree's own `.git`
/// file (round 1), all point git elsewhere: read-only, or moved aside.
#[test]
fn linked_worktree_files_cannot_redirect_git() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let tree = world.home.join("feat");
    util::git(
        &world.project,
        &["worktree", "add", "-q", tree.to_str().unwrap()],
    );
    let admin = world.project.join(".git/worktrees/feat");
    let before = snapshot(&admin);
    let out = Sbx.run_sh(
        &world,
        "cd .git/worktrees/feat && echo /tmp/evil > commondir; echo /tmp/evil > gitdir; printf '[core]\\n\\tfsmonitor = x\\n' > config.worktree; true",
    );
    assert_absent(&out, "NOT sandboxed");
    let after = snapshot(&admin);
    for f in ["commondir", "gitdir"] {
        assert_eq!(
            before.get(Path::new(f)),
            after.get(Path::new(f)),
            "{f}\n{}",
            both(&out)
        );
    }
    assert!(!present(&admin.join("config.worktree")), "{}", both(&out));

    let git_file = read(&tree.join(".git"));
    let out = sbx_sh(
        &world,
        &tree,
        &[],
        "echo 'gitdir: /tmp/evil' > .git; touch made-in-worktree",
        &[],
    );
    assert_absent(&out, "NOT sandboxed");
    assert_eq!(read(&tree.join(".git")), git_file, "{}", both(&out));
    // The worktree itself is a writable project (positive control).
    assert!(tree.join("made-in-worktree").exists(), "{}", both(&out));
}

// ---------------------------------------------------------------------------
// .env masking
// ---------------------------------------------------------------------------

/// Round 1, F5: renaming the directory that holds a masked `.env` to a
/// name the scan prunes (`node_modules`) hid it from the next scan. Now that
/// directory is a mount point: the rename fails, and a later run still
/// cannot read the file.
#[test]
fn env_directory_cannot_be_renamed_out_of_the_scan() {
    require_sandbox!();
    let world = World::new();
    let env = world.project.join("config/.env");
    util::write(&env, SECRET);
    let out = Sbx.run_sh(
        &world,
        "cat config/.env; mv config node_modules && echo MOVED; true",
    );
    assert_ok(&out);
    assert_no_secret(&out);
    assert_absent(&out, "MOVED");
    assert_eq!(read(&env), SECRET);
    assert!(
        !present(&world.project.join("node_modules")),
        "{}",
        both(&out)
    );
    let out = Sbx.run_sh(&world, "cat node_modules/.env config/.env; true");
    assert_ok(&out);
    assert_no_secret(&out);
}

/// Round 1, F5 and round 2, F3: a directory made unreadable (`chmod 000`,
/// `311`) or listable but not searchable (`444`) hid the `.env` below it from
/// the next scan (sbx runs as the user, who is held to those bits); the next
/// run restored the bits and read it. Now such a directory is masked whole.
#[test]
fn env_directory_made_unreadable_stays_masked() {
    require_sandbox!();
    if util::euid_is_root() {
        eprintln!(
            "NOTE: running as root: sbx's scan reads directories whatever their mode, so this \
             only checks that the .env stays masked; the unprivileged run (.ci/run) is the real test"
        );
    }
    for mode in [0o000, 0o311, 0o444] {
        let world = World::new();
        let app = world.project.join("app");
        util::write(&app.join(".env"), SECRET);
        util::write(&app.join("sub/.env"), SECRET);
        let first = Sbx.run_sh(&world, &format!("cat app/.env; chmod {mode:o} app; true"));
        let landed = std::fs::metadata(&app).unwrap().permissions().mode() & 0o777;
        let second = Sbx.run_sh(&world, "chmod 755 app; cat app/.env app/sub/.env; true");
        // Restored before any assertion, so the world can be removed.
        std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_ok(&first);
        assert_no_secret(&first);
        assert_eq!(landed, mode, "mode {mode:o}: the chmod did not land");
        assert_ok(&second);
        assert!(
            !both(&second).contains(SECRET),
            "mode {mode:o}: the .env was read after the chmod\n{}",
            both(&second)
        );
    }
}

/// Round 2, F4: a `.env` that is a link to the user's own file outside the
/// project (`.env -> ~/secrets/app.env`) was not masked; nor was a link the
/// command planted (`.env -> /tmp/x`) once the user filled in `.env`. Now the
/// target is masked, through the link and by its own path.
#[test]
fn env_symlink_to_a_file_outside_the_project_is_masked() {
    require_sandbox!();
    let world = World::new();
    let target = world.home.join("secrets/app.env");
    util::write(&target, SECRET);
    symlink(&target, world.project.join(".env")).unwrap();
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"cat .env; cat "$1"; echo READ-DONE"#,
        &[target.to_str().unwrap()],
    );
    assert_ok(&out);
    assert!(stdout(&out).contains("READ-DONE"), "{}", both(&out));
    assert_no_secret(&out);

    // Planted by the command, filled in by the user.
    std::fs::remove_file(world.project.join(".env")).unwrap();
    let stash = PathBuf::from(format!("/tmp/sbx-test-stash-{}", unique(1)));
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"ln -s "$1" .env"#,
        &[stash.to_str().unwrap()],
    );
    assert_ok(&out);
    std::fs::write(world.project.join(".env"), SECRET).unwrap();
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"cat .env; cat "$1"; true"#,
        &[stash.to_str().unwrap()],
    );
    let _ = std::fs::remove_file(&stash);
    assert_ok(&out);
    assert_no_secret(&out);
}

/// Round 2, F5: a `.git` planted in a subdirectory made it the project for
/// runs started there, and the real project's `.env` above it was no longer
/// masked. The scan now starts at the outermost repository.
#[test]
fn git_planted_in_a_subdirectory_does_not_unmask_the_parent_env() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    util::write(&world.project.join(".env"), SECRET);
    let out = Sbx.run_sh(
        &world,
        "mkdir -p sub && git init -q sub && mkdir -p empty/.git",
    );
    assert_ok(&out);
    assert!(world.project.join("sub/.git").is_dir(), "{}", both(&out));
    for dir in ["sub", "empty"] {
        let out = sbx_sh(
            &world,
            &world.project.join(dir),
            &[],
            "cat ../.env; echo READ-DONE",
            &[],
        );
        assert_ok(&out);
        assert!(stdout(&out).contains("READ-DONE"), "{dir}: {}", both(&out));
        assert_no_secret(&out);
    }
}

// ---------------------------------------------------------------------------
// What the default project may be
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Kernel interfaces and credentials
// ---------------------------------------------------------------------------

/// Tries each datagram-like socketpair type and, if one is created, sends
/// through it to the path in argv[1]; then checks stream and seqpacket pairs.
const PY_SOCKETPAIR: &str = r#"
import socket, sys
for name, t in [("RAW", socket.SOCK_RAW), ("DGRAM", socket.SOCK_DGRAM),
                 ("DGRAM-CLOEXEC", socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)]:
    try:
        a, b = socket.socketpair(socket.AF_UNIX, t)
    except OSError as e:
        print("REFUSED", name, e.errno)
        continue
    try:
        a.sendto(b"leak-" + name.encode(), sys.argv[1])
        print("SENT", name)
    except OSError as e:
        print("CREATED", name, e.errno)
for name, t in [("STREAM", socket.SOCK_STREAM), ("SEQPACKET", socket.SOCK_SEQPACKET)]:
    a, b = socket.socketpair(socket.AF_UNIX, t)
    a.sendall(b"p")
    print("PAIR-OK" if b.recv(1) == b"p" else "PAIR-BAD", name)
"#;

/// Everything a non-blocking datagram socket holds, after a short grace.
fn datagrams(sock: &UnixDatagram) -> Vec<String> {
    std::thread::sleep(Duration::from_millis(200));
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while let Ok(n) = sock.recv(&mut buf) {
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    got
}

/// Round 1: seccomp refused `socket(AF_UNIX)` but not `socketpair(AF_UNIX,
/// SOCK_RAW)`, which the kernel turns into a datagram socket that can
/// `sendto` any host socket by path. Now every socketpair type but stream
/// and seqpacket is EPERM; a host datagram socket receives nothing.
#[test]
fn datagram_socketpairs_are_refused() {
    require_sandbox!();
    let Some(python) = tool(&["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]) else {
        return;
    };
    let world = World::new();
    let path = world.project.join("d.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_nonblocking(true).unwrap();
    let mut cmd = world.sbx_std();
    cmd.arg("run")
        .arg("--")
        .args([python, "-c", PY_SOCKETPAIR, path.to_str().unwrap()])
        .stdin(Stdio::null());
    let out = cmd.output().unwrap();
    show("socketpair", &out);
    assert_ok(&out);
    let got = datagrams(&sock);
    assert!(
        got.is_empty(),
        "the host socket received {got:?}\n{}",
        both(&out)
    );
    let lines: Vec<String> = stdout(&out).lines().map(String::from).collect();
    for want in [
        "REFUSED RAW 1",
        "REFUSED DGRAM 1",
        "REFUSED DGRAM-CLOEXEC 1",
        "PAIR-OK STREAM",
        "PAIR-OK SEQPACKET",
    ] {
        assert!(
            lines.iter().any(|l| l == want),
            "no {want:?}\n{}",
            both(&out)
        );
    }
    // Positive control: unsandboxed, the same script reaches the listener.
    let host = Command::new(python)
        .args(["-c", PY_SOCKETPAIR, path.to_str().unwrap()])
        .output()
        .unwrap();
    let got = datagrams(&sock);
    assert!(
        got.iter().any(|g| g == "leak-RAW"),
        "the control did not reach the listener: {got:?}\n{}",
        both(&host)
    );
}

/// Rounds 1 and 2: more credential variables (`*_PASS`, `*PASSPHRASE`,
/// `*APIKEY`, `*_JWT`, `*WEBHOOK_URL`, `*TOKEN`, `*_DSN`, a URL with a
/// password, ...) and files (~/.pgpass, git's ~/.config/git/credentials)
/// reached the command.
#[test]
fn credential_variables_and_files_added_by_the_reviews_are_hidden() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.home.join(".pgpass"), SECRET);
    util::write(&world.home.join(".config/git/credentials"), SECRET);
    let mut cmd = world.sbx_std();
    for name in [
        "DB_PASS",
        "GPG_PASSPHRASE",
        "STRIPE_APIKEY",
        "SESSION_JWT",
        "SLACK_WEBHOOK_URL",
        "TEAMS_WEBHOOK",
        "GITHUB_TOKEN",
        "MYSQL_PASSWORD",
        "SENTRY_DSN",
        "GL_PAT",
        "NPM_AUTH",
        "X_AUTH_HEADER",
        "ADMIN_PWD",
        "KUBECONFIG",
    ] {
        cmd.env(name, SECRET);
    }
    cmd.env("DATABASE_URL", format!("postgres://app:{SECRET}@db/app"))
        .env("KEEP_ME", "visible");
    sh_in(
        &mut cmd,
        &[],
        "env; cat ~/.pgpass ~/.config/git/credentials; true",
        &[],
    );
    let out = cmd.output().unwrap();
    show("credentials", &out);
    assert_ok(&out);
    assert!(
        stdout(&out).lines().any(|l| l == "KEEP_ME=visible"),
        "{}",
        both(&out)
    );
    assert_no_secret(&out);
}

/// Round 3, F1: a protected path that is a symlink to a directory inside the
/// project (`.git/hooks -> ../githooks`, hooks kept in the tree) protects its
/// target too: the command cannot plant a hook there, and host git runs none.
#[test]
fn linked_hooks_directory_target_is_read_only() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let hooks = world.project.join("githooks");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::remove_dir_all(world.project.join(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("../githooks", world.project.join(".git/hooks")).unwrap();
    let planted = world.home.join("R3_linked_hooks");
    let out = Sbx.run_sh(
        &world,
        &format!(
            "printf '#!/bin/sh\\ntouch {}\\n' > githooks/pre-commit && chmod +x githooks/pre-commit && echo planted",
            shq_path(&planted)
        ),
    );
    assert_absent(&out, "NOT sandboxed");
    assert!(!stdout(&out).contains("planted"), "{}", both(&out));
    assert!(!present(&hooks.join("pre-commit")), "{}", both(&out));
    util::git(
        &world.project,
        &["commit", "-q", "--allow-empty", "-m", "x"],
    );
    assert!(
        !present(&planted),
        "host git ran a hook the command planted"
    );
}

/// Round 3, F2: a `.git` the command creates is caught in both shapes it
/// slipped through: a risky key written on the section line of a new
/// repository's config is reported, and a `.git` *file* pointing git at a
/// repository prepared elsewhere is moved aside.
#[test]
fn new_git_with_same_line_key_or_gitdir_file_is_caught() {
    require_sandbox!();
    let world = World::new();
    let out = Sbx.run_sh(
        &world,
        "git init -q . && printf '[core] fsmonitor = \"touch /x; false\"\\n' >> .git/config",
    );
    assert!(
        stderr(&out).contains("core.fsmonitor"),
        "a same-line key went unreported\n{}",
        both(&out)
    );
    let other = World::new();
    let out = Sbx.run_sh(&other, "echo 'gitdir: /tmp/somewhere' > .git");
    assert!(
        !present(&other.project.join(".git")),
        "a .git file was left in place\n{}",
        both(&out)
    );
    assert!(
        present(&other.project.join(".git.sbx-blocked")),
        "{}",
        both(&out)
    );
}

/// Round 4, F1: when the project's `.git` is a symlink to a separate git
/// directory, the command cannot swap the link for a repository of its own
/// whose hooks and config host git would run: the replacement is moved aside.
#[test]
fn linked_git_directory_cannot_be_swapped() {
    require_sandbox!();
    let world = World::new();
    let gitdir = world.home.join("gitdirs/p.git");
    std::fs::create_dir_all(gitdir.parent().unwrap()).unwrap();
    util::git(
        &world.project,
        &[
            "init",
            "-q",
            "-b",
            "main",
            "--separate-git-dir",
            gitdir.to_str().unwrap(),
        ],
    );
    // `--separate-git-dir` leaves a `.git` file; make it the symlink layout.
    std::fs::remove_file(world.project.join(".git")).unwrap();
    std::os::unix::fs::symlink(&gitdir, world.project.join(".git")).unwrap();
    let planted = world.home.join("R4_gitlink_hook");
    let out = Sbx.run_sh(
        &world,
        &format!(
            "rm .git && git init -q . && printf '#!/bin/sh\\ntouch {}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
            shq_path(&planted)
        ),
    );
    assert_absent(&out, "NOT sandboxed");
    let now = std::fs::symlink_metadata(world.project.join(".git")).ok();
    assert!(
        now.is_none(),
        "the command's .git was left in place\n{}",
        both(&out)
    );
    assert!(
        present(&world.project.join(".git.sbx-blocked")),
        "{}",
        both(&out)
    );
    assert!(
        gitdir.join("HEAD").is_file(),
        "the real git directory must be untouched"
    );
    assert!(!present(&planted));
}

/// Round 4, F2: a `.env` in a directory above the project (python-dotenv's
/// find_dotenv walks up to it) is masked like the project's own.
#[test]
fn env_file_above_the_project_is_masked() {
    require_sandbox!();
    let world = World::new();
    let parent_env = world.project.parent().unwrap().join(".env");
    util::write(&parent_env, &format!("TOKEN={}\n", util::SECRET));
    let out = Sbx.run_sh(&world, "cat ../.env; cat \"$HOME/.env\"; echo done");
    assert_no_secret(&out);
    assert!(stdout(&out).contains("done"), "{}", both(&out));
}

// ---------------------------------------------------------------------------
// Sixth review: the allowlist proxy
// ---------------------------------------------------------------------------

/// PID 1 relays the proxy port to the proxy's Unix socket, and it is the one
/// process in the sandbox allowed Unix sockets. With `XDG_RUNTIME_DIR` in a
/// writable root, the command renamed the directory above the (read-only)
/// socket directory, put a link to a host socket at the old socket path, and
/// PID 1's next connection went to that host socket.
#[test]
fn proxy_relay_cannot_be_pointed_at_a_host_socket() {
    require_sandbox!();
    let Some(python) = tool(&["/usr/bin/python3"]) else {
        return;
    };
    let world = World::new();
    let xdg = world.project.join("xdg");
    std::fs::create_dir(&xdg).unwrap();
    std::fs::set_permissions(&xdg, std::fs::Permissions::from_mode(0o700)).unwrap();
    let victim_path = world.root.join("victim.sock");
    let victim = crate::host::unix_listener(&victim_path);
    let script = format!(
        r#"SOCK=$(tr '\0' '\n' < /proc/1/cmdline | grep -m1 -A1 -- --proxy-socket | tail -1)
DIR=$(dirname "$SOCK"); BASE=$(dirname "$DIR")
mv "$BASE" "$BASE.moved" && echo MOVED
mkdir -p "$DIR" && ln -s "$1" "$SOCK" && echo LINKED
{python} -c '
import socket
s = socket.create_connection(("127.0.0.1", 3128), timeout=10)
s.sendall(b"CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n")
print("ANSWER", s.recv(100).split(b"\r\n")[0].decode())
'"#
    );
    let mut cmd = world.sbx_std();
    cmd.env("XDG_RUNTIME_DIR", &xdg);
    sh_in(
        &mut cmd,
        &["--allow-domain", "127.0.0.1:9"],
        &script,
        &[victim_path.to_str().unwrap()],
    );
    let out = cmd.output().unwrap();
    show("relay", &out);
    let got = crate::host::unix_received(&victim, Duration::from_millis(500));
    assert!(
        got.is_none(),
        "the host socket received {got:?}:\n{}",
        both(&out)
    );
    // The relay still reaches the proxy, which wants its credential.
    assert!(
        stdout(&out).contains("ANSWER HTTP/1.1 407"),
        "{}",
        both(&out)
    );
}

/// With home writable, sbx's own cache directory (written by sbx itself:
/// the `.env` scan cache, the proxy directory) was taken for a "runs later"
/// path the command had replaced, and moved aside after every run.
#[test]
fn sbx_cache_and_host_edits_of_protected_dirs_are_not_swept() {
    require_sandbox!();
    let world = World::new();
    let home = world.home.to_str().unwrap().to_string();
    std::fs::create_dir_all(world.project.join(".vscode")).unwrap();
    std::fs::write(world.project.join(".vscode/settings.json"), "{}").unwrap();
    // The command waits until the host (an editor, an agent) has written
    // into the protected, existing .vscode during the run.
    let mut cmd = world.sbx_std();
    cmd.env_remove("XDG_RUNTIME_DIR");
    sh_in(
        &mut cmd,
        &["--writable", &home, "--allow-domain", "127.0.0.1:9"],
        "echo up > up; i=0; while [ ! -e go ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done",
        &[],
    );
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_up(&world);
    std::fs::write(world.project.join(".vscode/extensions.json"), "{}").unwrap();
    std::fs::write(world.project.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    show("host edits", &out);
    assert!(out.status.success(), "{}", both(&out));
    assert!(!stderr(&out).contains("sbx-blocked"), "{}", both(&out));
    assert!(world.project.join(".vscode/extensions.json").exists());
    assert!(world.home.join(".cache/sbx").is_dir());
    // A second run finds the same.
    let out = sbx_sh(&world, &world.project, &["--writable", &home], "true", &[]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(!stderr(&out).contains("sbx-blocked"), "{}", both(&out));
    let blocked: Vec<_> = std::fs::read_dir(world.home.join(".cache"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n.to_string_lossy().contains("sbx-blocked"))
        .collect();
    assert!(blocked.is_empty(), "{blocked:?}");
}

// ---------------------------------------------------------------------------
// Seventh review
// ---------------------------------------------------------------------------

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
    let mut cmd = world.sbx_std();
    sh_in(
        &mut cmd,
        &[],
        &format!(
            "echo up > up; i=0
while [ $i -lt 300 ]; do
  if printf '{line}' >> .git/config 2>/dev/null; then echo APPENDED; break; fi
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
    // The key's own name (fsmonitor, pushurl) is in the file.
    let name = reported
        .split('=')
        .next()
        .unwrap()
        .rsplit('.')
        .next()
        .unwrap();
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
/// the killed run's note and sweeps in its place.
#[test]
fn a_killed_sbx_leaves_its_sweep_to_the_next_run() {
    require_sandbox!();
    let world = World::new();
    let mut cmd = world.sbx_std();
    sh_in(
        &mut cmd,
        &[],
        "echo 'touch \"$HOME/PWNED\"' > .envrc; echo up > up; sleep 30",
        &[],
    );
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_up(&world);
    let _ = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status();
    let _ = child.wait();
    let envrc = world.project.join(".envrc");
    // The sandbox dies with sbx (--die-with-parent); give it a moment.
    std::thread::sleep(Duration::from_millis(300));
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

/// The command stopped its terminal's output (`tcflow(TCOOFF)`, which no
/// filter refuses): sbx moved the first planted path aside, then blocked
/// writing its warning, and the user's Ctrl-C killed it before the second
/// was swept. Now every path is swept first, and output is restarted before
/// sbx says anything.
#[test]
fn a_stopped_terminal_does_not_stall_the_sweep() {
    require_sandbox!();
    let Some(script) = tool(&["/usr/bin/script"]) else {
        return;
    };
    let Some(python) = tool(&["/usr/bin/python3"]) else {
        return;
    };
    let world = World::new();
    let inner = format!(
        "{} run -- {python} -c {}",
        shq_path(&util::sbx_path()),
        crate::host::shq(
            "import os, termios; open('.envrc', 'w').write('x'); os.makedirs('.vscode'); open('.vscode/tasks.json', 'w').write('x'); termios.tcflow(2, termios.TCOOFF)"
        )
    );
    let mut cmd = world.host_cmd(script);
    cmd.args(["-qec", &inner, "/dev/null"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.is_some(), "sbx blocked on the stopped terminal");
    for planted in [".envrc", ".vscode"] {
        assert!(
            !world.project.join(planted).exists(),
            "{planted} left in place"
        );
        assert!(
            world
                .project
                .join(format!("{planted}.sbx-blocked"))
                .exists(),
            "{planted} not moved aside"
        );
    }
}

/// The git config check was not in the killed run's note: a config the
/// host's git rewrote, which the command then extended, went unreported
/// when sbx was killed after the command had done it (eighth review).
#[test]
fn a_killed_sbx_leaves_its_git_config_check_to_the_next_run() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let mut cmd = world.sbx_std();
    sh_in(
        &mut cmd,
        &[],
        r#"echo up > up; i=0
while [ $i -lt 300 ]; do
  if printf '[core]\n\tfsmonitor = touch PWNED-FSMONITOR\n' >> .git/config 2>/dev/null; then echo done > appended; break; fi
  sleep 0.02; i=$((i+1))
done
sleep 30"#,
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
    std::thread::sleep(Duration::from_millis(300));
    let out = Sbx.run_sh(&world, "echo NEXT-RAN");
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
