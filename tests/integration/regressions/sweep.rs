//! The post-run sweep: what the command planted is moved aside, and the
//! sweep itself cannot be turned against the host.

use super::*;

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
    // Each step waits for the one before it: A runs until told to go, after
    // B has started; B writes its `.envrc` only once A's sweep has moved
    // A's aside. Every wait is bounded (a minute), so a failed step cannot
    // hang.
    let a = spawn(
        "echo decoy > .envrc; i=0; while [ ! -e go ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done",
    );
    let envrc = p.join(".envrc");
    let a_planted = wait_for(&envrc, util::DEADLINE);
    let b = spawn(
        "touch b-started; i=0; while [ ! -e .envrc.sbx-blocked ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done; echo evil > .envrc",
    );
    let b_started = wait_for(&p.join("b-started"), util::DEADLINE);
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
/// moves a replacement aside (reduced mode); full mode now mounts the link
/// onto itself for the run, so it cannot be replaced at all. Each replacement is tried in fresh worlds until
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
    assert!(
        !planted_ran.exists(),
        "host git ran the planted hook\n{}",
        both(&out)
    );
    let aside = world.project.join(format!("{name}.sbx-blocked"));
    if !util::contained() {
        // Full mode mounts the link onto itself for the run: it could not
        // be removed, so nothing was replaced or moved aside.
        assert_eq!(
            std::fs::read_link(&link).ok().as_deref(),
            Some(target.as_path()),
            "replaced with {how}\n{}",
            both(&out)
        );
        assert!(!present(&aside), "replaced with {how}\n{}", both(&out));
        return true;
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
        // Reduced mode puts `.husky` back; what the command moved stays
        // where it put it, and is no hooks directory.
        if !util::unclaimed(&out, util::RUNS_LATER_WRITABLE) {
            assert!(
                !present(&world.project.join("h2")),
                "{name}\n{}",
                both(&out)
            );
        }
        let _ = std::fs::remove_dir_all(world.project.join("h2"));
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
    if util::unclaimed(&out, util::RUNS_LATER_WRITABLE) {
        // Reduced mode: the changed `.git` file is moved aside, not kept.
        assert!(!present(&tree.join(".git")) || read(&tree.join(".git")) == git_file);
        assert!(present(&tree.join(".git.sbx-blocked")), "{}", both(&out));
    } else {
        assert_eq!(read(&tree.join(".git")), git_file, "{}", both(&out));
    }
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
    if util::unclaimed(&out, util::ENV_READABLE) {
        return;
    }
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

/// The same in a git repository, where the inner stage pins (`--pin`:
/// bubblewrap pins only without config copies), for every directory above
/// a deep `.env`.
#[test]
fn env_directories_pinned_by_the_inner_stage_cannot_be_renamed() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let env = world.project.join("a/b/c/.env");
    util::write(&env, SECRET);
    let argv = linux_profile(&world);
    for dir in ["a", "a/b", "a/b/c"] {
        let pin = format!("--pin \\\n  {} \\", shq_path(&world.project.join(dir)));
        assert!(argv.contains(&pin), "{pin} in {argv}");
    }
    // Each rename fails (a mount point); `mv` then copies what it can read,
    // which is not the masked file.
    let out = Sbx.run_sh(
        &world,
        "mkdir -p x; for d in a a/b a/b/c; do mv $d node_modules && echo MOVED $d; mv $d x/node_modules && echo MOVED $d; done; true",
    );
    assert_ok(&out);
    if util::unclaimed(&out, util::ENV_READABLE) {
        return;
    }
    assert_no_secret(&out);
    assert_absent(&out, "MOVED");
    assert_eq!(read(&env), SECRET);
    let out = Sbx.run_sh(
        &world,
        "cat a/b/c/.env; find . -name .env -exec cat {} +; true",
    );
    assert_ok(&out);
    assert_no_secret(&out);
}

/// #17: in a git repository the inner stage masks `.env` files itself
/// (`--mask`, after its pins and config copies) instead of bubblewrap's
/// `--ro-bind`. Each mask is as strong: unreadable, unwritable, its mode
/// unchangeable (the placeholder on the host stays an empty file with mode
/// 000), not removable nor renamable; and the set-up did not fall back to
/// bubblewrap's masks (the run's private config copy is writable, which
/// only the inner stage's set-up gives: `git remote add` works).
#[test]
fn env_files_masked_by_the_inner_stage_hold() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let env = world.project.join("a/b/.env");
    util::write(&env, SECRET);
    let argv = linux_profile(&world);
    let mask = format!("--mask \\\n  {} \\", shq_path(&env));
    assert!(argv.contains(&mask), "{mask} in {argv}");
    // Named once: not also bound over by bubblewrap.
    assert_eq!(argv.matches(&shq_path(&env)).count(), 1, "{argv}");
    let out = Sbx.run_sh(
        &world,
        "cat a/b/.env; echo GONE > a/b/.env; chmod 644 a/b/.env && echo CHMODDED; \
         rm -f a/b/.env && echo REMOVED; mv a/b/.env a/b/x && echo MOVED; \
         ln a/b/.env a/hard && echo LINKED; cat a/hard 2>/dev/null; \
         git remote add probe https://example.invalid/r.git && echo CONFIG-WRITTEN; true",
    );
    assert_ok(&out);
    if util::unclaimed(&out, util::ENV_READABLE) {
        return;
    }
    assert_no_secret(&out);
    for said in ["CHMODDED", "REMOVED", "MOVED"] {
        assert_absent(&out, said);
    }
    assert_line(&out, "CONFIG-WRITTEN");
    assert_eq!(read(&env), SECRET);
    let placeholder = world.home.join(".cache/sbx/empty");
    let meta = std::fs::metadata(&placeholder).unwrap();
    assert_eq!((meta.len(), meta.permissions().mode() & 0o7777), (0, 0));
}

/// The same where sbx's cache lies in a writable root: the placeholder is
/// `/dev/null`, whose mount the inner stage makes read-only and `nodev`
/// itself (`mount_setattr`). Not even a root sandbox can change the
/// host's `/dev/null` through it (its change time stays), nor read the file.
#[test]
fn env_masks_of_dev_null_are_read_only_and_nodev() {
    use std::os::unix::fs::MetadataExt;
    require_sandbox!();
    if util::contained() {
        // Reduced mode has no inner stage that mounts, and refuses a cache
        // in a writable root.
        return;
    }
    let world = World::new();
    world.git_repo();
    let env = world.project.join("a/.env");
    util::write(&env, SECRET);
    let cache = world.project.join(".cache");
    let before = std::fs::metadata("/dev/null").unwrap();
    let out = world
        .sbx()
        .env("XDG_CACHE_HOME", &cache)
        .args(["run", "--", "sh", "-c"])
        .arg(
            "cat a/.env; echo x > a/.env; chmod 666 a/.env && echo CHMODDED; \
             grep -F '/a/.env ' /proc/self/mountinfo; \
             git remote add probe https://example.invalid/r.git && echo CONFIG-WRITTEN; true",
        )
        .output()
        .unwrap();
    assert_ok(&out);
    if util::unclaimed(&out, util::ENV_READABLE) {
        return;
    }
    assert_no_secret(&out);
    assert_absent(&out, "CHMODDED");
    assert_line(&out, "CONFIG-WRITTEN");
    let line = stdout(&out)
        .lines()
        .find(|l| l.contains("/a/.env "))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no mount on the .env: {}", both(&out)));
    let options = line.split(' ').nth(5).unwrap_or_default();
    for flag in ["ro", "nodev", "nosuid"] {
        assert!(options.split(',').any(|o| o == flag), "{flag} in {line}");
    }
    let after = std::fs::metadata("/dev/null").unwrap();
    assert_eq!(
        (before.mode(), before.ctime(), before.ctime_nsec()),
        (after.mode(), after.ctime(), after.ctime_nsec())
    );
    assert_eq!(read(&env), SECRET);
}

/// #17 review: only the directories above a `.env` were pinned, so a
/// command renamed the directory of a file `deny_read` names (`sec` to
/// `sec2`) and the next run read it at its new path. Every masked path in
/// a writable root is pinned now, with config copies (the inner stage
/// pins) and without (bubblewrap does).
#[test]
fn directories_above_a_denied_file_cannot_be_renamed() {
    require_sandbox!();
    for git in [true, false] {
        let world = World::new();
        if git {
            world.git_repo();
        }
        util::write(&world.project.join("sec/key.pem"), SECRET);
        util::write(
            &world.project.join(".sbx.toml"),
            "[sandbox]\ndeny_read = [\"sec/key.pem\"]\n",
        );
        let out = Sbx.run_sh(
            &world,
            "cat sec/key.pem; mv sec sec2 && echo RENAMED; mkdir -p x && mv sec x/ && echo MOVED; true",
        );
        assert_ok(&out);
        if util::unclaimed(&out, util::ENV_READABLE) {
            return;
        }
        assert_no_secret(&out);
        assert_absent(&out, "RENAMED");
        assert_absent(&out, "MOVED");
        assert_eq!(
            read(&world.project.join("sec/key.pem")),
            SECRET,
            "git: {git}"
        );
        let out = Sbx.run_sh(&world, "cat sec/key.pem sec2/key.pem x/sec/key.pem; true");
        assert_ok(&out);
        assert_no_secret(&out);
    }
}

/// #17 review: a file to mask that is gone at set-up refuses the run
/// (another sandbox may have moved it; `copies::mask`'s unit test shows
/// the refusal), but one under the command's own socket directory is
/// hidden by that directory's fresh tmpfs, never there: such a file
/// (named by `deny_read`, or planted by a command and linked as `.env`)
/// refused every later run. Skipped now, and the runs go on.
#[test]
fn a_masked_file_under_the_own_socket_directory_refuses_no_run() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let uid = nix::unistd::getuid().as_raw();
    let dir = PathBuf::from(format!("/tmp/sbx-{uid}"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("sbx-test-planted-{}", std::process::id()));
    util::write(&file, SECRET);
    util::write(
        &world.project.join(".sbx.toml"),
        &format!("[sandbox]\ndeny_read = [\"{}\"]\n", file.display()),
    );
    symlink(&file, world.project.join(".env")).unwrap();
    let out = Sbx.run_sh(&world, "cat .env; echo; echo RAN");
    let _ = std::fs::remove_file(&file);
    assert_ok(&out);
    assert_line(&out, "RAN");
    if util::unclaimed(&out, util::ENV_READABLE) {
        return;
    }
    assert_no_secret(&out);
}

/// Round 2 review: a `.env` link's target was masked only while the link
/// led to it. The command removed the link, or moved its directory where
/// the walk does not look (`target`), and the next run read the target.
/// Now a target once reached through a link stays masked, and sbx says so.
#[test]
fn a_env_links_target_stays_masked_when_the_link_goes() {
    require_sandbox!();
    let world = World::new();
    let outside = world.home.join("secrets/prod.env");
    util::write(&outside, SECRET);
    let inside = world.project.join("secrets/app.cfg");
    util::write(&inside, "INSIDE-SECRET-77");
    // And one in a directory the walk prunes.
    let pruned = world.project.join("node_modules/.cache/.env.local");
    util::write(&pruned, "PRUNED-SECRET-78");
    std::fs::create_dir_all(world.project.join("app")).unwrap();
    symlink(&outside, world.project.join("app/.env")).unwrap();
    symlink(&inside, world.project.join("app/.env.local")).unwrap();
    symlink(&pruned, world.project.join("app/.env.test")).unwrap();
    // A link to sbx itself is never followed by a mask: every later run
    // would fail.
    symlink(util::sbx_path(), world.project.join(".env.sbx")).unwrap();
    let targets = crate::scenarios::cat_each(&[
        outside.to_str().unwrap().to_string(),
        inside.to_str().unwrap().to_string(),
        pruned.to_str().unwrap().to_string(),
    ]);
    let out = Sbx.run_sh(
        &world,
        &format!("{targets} rm app/.env && mkdir -p target && mv app target/ && echo GONE"),
    );
    assert_ok(&out);
    crate::host::assert_line(&out, "GONE");
    assert_no_secret(&out);
    // Reduced mode cannot hide the file inside the project (said); the one
    // outside it hides.
    let reduced = util::unclaimed(&out, util::ENV_READABLE);
    if !reduced {
        assert_absent(&out, "INSIDE-SECRET-77");
        assert_absent(&out, "PRUNED-SECRET-78");
    }
    assert!(!world.project.join("app").exists());
    for _ in 0..2 {
        let out = Sbx.run_sh(&world, &targets);
        assert_ok(&out);
        assert_no_secret(&out);
        if !reduced {
            assert_absent(&out, "INSIDE-SECRET-77");
            assert_absent(&out, "PRUNED-SECRET-78");
        }
        assert!(
            stderr(&out).contains(&format!("still masking {}", outside.display())),
            "{}",
            both(&out)
        );
    }
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
        if util::unclaimed(&first, util::ENV_READABLE) {
            std::fs::set_permissions(&app, std::fs::Permissions::from_mode(0o755)).unwrap();
            return;
        }
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
    // The link points into /tmp, a writable root: reduced mode cannot hide
    // a file there, and says so.
    if !util::unclaimed(&out, util::ENV_READABLE) {
        assert_no_secret(&out);
    }
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

/// Round 2 review: a `.env` deeper than PATH_MAX (a chain the command can
/// make) could not be resolved and was taken for no `.env` at all; masking
/// its directory by that path would make bubblewrap fail on every run. It
/// is masked at its deepest ancestor a mount can name, and runs go on.
#[test]
fn a_env_deeper_than_path_max_stays_hidden_and_runs_go_on() {
    require_sandbox!();
    let world = World::new();
    let py = "import os,sys\n\
              os.chdir(sys.argv[1])\n\
              for _ in range(160):\n    os.makedirs('e' * 30, exist_ok=True); os.chdir('e' * 30)\n\
              open('.env', 'w').write(sys.argv[2])\n";
    let made = Command::new("/usr/bin/python3")
        .args(["-c", py, world.project.to_str().unwrap(), SECRET])
        .status()
        .unwrap();
    assert!(made.success());
    let read = "import os\n\
                try:\n    \
                    for _ in range(160): os.chdir('e' * 30)\n    \
                    print(open('.env').read())\n\
                except OSError as e:\n    print('refused', e.errno)\n";
    for _ in 0..2 {
        let out = Sbx.run(&world, &[], &["/usr/bin/python3", "-c", read], &[]);
        assert_ok(&out);
        if util::unclaimed(&out, util::ENV_READABLE) {
            return;
        }
        assert_no_secret(&out);
        assert!(stdout(&out).starts_with("refused"), "{}", both(&out));
    }
}
