//! Every git repository under the project, not only the project's own:
//! nested ones at any depth, submodule checkouts, `.git/modules`, linked
//! worktrees inside the project, repositories in `--writable` paths. Judged
//! by the host's own git afterwards: its `status` and `commit` must run
//! nothing the command planted (a marker in HOME).

use super::*;

/// The marker a planted fsmonitor or hook would write on the host.
fn git_marker(world: &World) -> PathBuf {
    world.home.join("PWNED-GIT")
}

/// A fresh world whose project is a repository, and `sbx run -- sh -c
/// SCRIPT sh PLANTED` run in it (`$1`: the command that writes the marker).
fn in_a_repository(script: &str) -> (World, Output) {
    let world = World::new();
    world.git_repo();
    let planted = planted(&world);
    let out = sbx_sh(&world, &world.project, &[], script, &[&planted]);
    (world, out)
}

/// A repository the command prepares outside the project, in the host's
/// /tmp (writable in the sandbox): a name of its own per test, removed
/// when the test ends.
struct Elsewhere(String);

impl Elsewhere {
    fn new() -> Elsewhere {
        Elsewhere(format!("/tmp/sbx-evil-{}.git", unique(41)))
    }

    /// `script` with `EVIL` standing for the repository's path.
    fn put(&self, script: &str) -> String {
        script.replace("EVIL", &self.0)
    }
}

impl Drop for Elsewhere {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `core.fsmonitor` / hook text that writes the marker.
fn planted(world: &World) -> String {
    format!("touch {}", shq_path(&git_marker(world)))
}

/// What the command says it wrote during the run (`said`): full mode
/// refuses each write; reduced mode lets them happen, says so in its
/// banner, and puts things back after the run (the end state and the
/// host's git are checked by the caller either way).
fn assert_not_written(out: &Output, said: &[&str]) {
    if util::unclaimed(out, util::RUNS_LATER_WRITABLE) {
        return;
    }
    for s in said {
        assert!(!stdout(out).contains(s), "{s}: {}", both(out));
    }
}

/// The command's `core.fsmonitor` went to its private copy of `config`
/// only: the host's file never has it, and sbx exits 125 naming it.
fn assert_fsmonitor_refused(out: &Output, config: &Path) {
    assert_eq!(out.status.code(), Some(125), "{}", both(out));
    // In reduced mode a config the command moved away along with its
    // `.git` is not read at its place: the moved one is set aside instead.
    let named = stderr(out).contains("core.fsmonitor=")
        || (util::contained() && stderr(out).contains(".sbx-blocked"));
    assert!(named, "{}", both(out));
    let text = std::fs::read_to_string(config).unwrap();
    assert!(!text.contains("fsmonitor"), "{text}");
}

/// The user's everyday git on the host in `dir`: `status` (runs
/// fsmonitor), and `commit` (runs hooks). Its outcome does not matter, only
/// what it runs.
fn host_git(world: &World, dir: &Path) {
    for args in [
        &["status"][..],
        &["commit", "-q", "--allow-empty", "-m", "host"][..],
    ] {
        let _ = world
            .host_cmd("git")
            .args(args)
            .current_dir(dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
    }
    assert!(
        !git_marker(world).exists(),
        "git on the host ran what the command planted (in {})",
        dir.display()
    );
}

#[test]
fn a_nested_repository_the_command_creates_is_moved_aside() {
    require_sandbox!();
    let (world, out) = in_a_repository(
        r#"set -e
git init -q -b main sub
git -C sub config core.fsmonitor "$1"
echo x > sub/f && git -C sub add f && git -C sub commit -q -m x
git add sub
git init -q plain && git -C plain remote add origin https://example.invalid/r.git
echo DONE"#,
    );
    assert!(stdout(&out).contains("DONE"), "{}", both(&out));
    assert!(!present(&world.project.join("sub/.git")), "{}", both(&out));
    assert!(
        present(&world.project.join("sub/.git.sbx-blocked")),
        "{}",
        both(&out)
    );
    assert!(stderr(&out).contains("core.fsmonitor"), "{}", both(&out));
    // A plain new repository (or a clone over HTTPS) runs nothing, and stays.
    assert!(world.project.join("plain/.git").is_dir(), "{}", both(&out));
    host_git(&world, &world.project);
    host_git(&world, &world.project.join("sub"));
}

#[test]
fn an_existing_nested_repository_is_protected_like_the_project() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let inner = world.project.join("libs/deep/inner");
    util::repo_with_commit(&inner);
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"cd libs/deep/inner
git config core.fsmonitor "$1" 2>/dev/null && echo CONFIG-WRITTEN
printf '#!/bin/sh\n%s\n' "$1" > .git/hooks/post-commit 2>/dev/null && echo HOOK-WRITTEN
mv .git .git.old 2>/dev/null && echo MOVED
echo x > f && echo TREE-WRITTEN"#,
        &[&planted(&world)],
    );
    assert!(stdout(&out).contains("TREE-WRITTEN"), "{}", both(&out));
    assert_not_written(&out, &["HOOK-WRITTEN", "MOVED"]);
    assert_fsmonitor_refused(&out, &inner.join(".git/config"));
    assert!(!present(&inner.join(".git/hooks/post-commit")));
    host_git(&world, &inner);
}

/// A project with a submodule at `vendor/lib`.
fn with_submodule(world: &World) -> PathBuf {
    world.git_repo();
    world.add_submodule()
}

#[test]
fn a_submodule_checkout_cannot_be_repointed() {
    require_sandbox!();
    let world = World::new();
    let sub = with_submodule(&world);
    let before = read(&sub.join(".git"));
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"git init -q evil && git -C evil config core.fsmonitor "$1"
printf 'gitdir: ../../evil/.git\n' > vendor/lib/.git 2>/dev/null && echo REPOINTED
mv vendor/lib vendor/lib2 2>/dev/null && echo RENAMED
echo DONE"#,
        &[&planted(&world)],
    );
    assert!(stdout(&out).contains("DONE"), "{}", both(&out));
    assert_not_written(&out, &["REPOINTED", "RENAMED"]);
    assert_eq!(read(&sub.join(".git")), before);
    host_git(&world, &world.project);
    host_git(&world, &sub);
}

#[test]
fn a_commondir_under_git_modules_is_moved_aside() {
    require_sandbox!();
    let world = World::new();
    let sub = with_submodule(&world);
    let module = world.project.join(".git/modules/vendor/lib");
    assert!(
        module.join("config").is_file(),
        "the scenario did not happen"
    );
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"git init -q --bare .cache-evil.git && git --git-dir=.cache-evil.git config core.fsmonitor "$1"
echo ../../../../.cache-evil.git > .git/modules/vendor/lib/commondir && echo PLANTED"#,
        &[&planted(&world)],
    );
    if stdout(&out).contains("PLANTED") {
        assert!(!present(&module.join("commondir")), "{}", both(&out));
        assert!(
            present(&module.join("commondir.sbx-blocked")),
            "{}",
            both(&out)
        );
    }
    host_git(&world, &world.project);
    host_git(&world, &sub);
}

#[test]
fn a_linked_worktree_inside_the_project_cannot_be_repointed() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    util::git(
        &world.project,
        &["worktree", "add", "-q", "-b", "topic", "trees/topic"],
    );
    let wt = world.project.join("trees/topic");
    let before = read(&wt.join(".git"));
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"git init -q evil && git -C evil config core.fsmonitor "$1"
printf 'gitdir: ../../evil/.git\n' > trees/topic/.git 2>/dev/null && echo REPOINTED
echo DONE"#,
        &[&planted(&world)],
    );
    assert!(stdout(&out).contains("DONE"), "{}", both(&out));
    assert_not_written(&out, &["REPOINTED"]);
    assert_eq!(read(&wt.join(".git")), before);
    host_git(&world, &wt);
}

#[test]
fn a_repository_made_writable_keeps_its_hooks_and_config_read_only() {
    require_sandbox!();
    let world = World::new();
    let other = world.home.join("other");
    util::repo_with_commit(&other);
    for writable in [other.clone(), other.join(".git")] {
        let out = sbx_sh(
            &world,
            &world.project,
            &["--writable", writable.to_str().unwrap()],
            r#"cd "$2"
git config core.fsmonitor "$1" 2>/dev/null && echo CONFIG-WRITTEN
printf '#!/bin/sh\n%s\n' "$1" > .git/hooks/post-commit 2>/dev/null && echo HOOK-WRITTEN
echo x > g && echo TREE-WRITTEN"#,
            &[&planted(&world), other.to_str().unwrap()],
        );
        assert_absent(&out, "NOT sandboxed");
        assert_fsmonitor_refused(&out, &other.join(".git/config"));
        assert_not_written(&out, &["HOOK-WRITTEN"]);
        if writable == other {
            // Positive control: the working tree is writable.
            assert!(stdout(&out).contains("TREE-WRITTEN"), "{}", both(&out));
        }
        host_git(&world, &other);
    }
}

#[test]
fn a_nested_repository_made_by_a_killed_run_is_moved_aside_by_the_next() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let mut child = killed_after_up(
        &world,
        r#"git init -q sub && git -C sub config core.fsmonitor "$1"; echo up > up; sleep 30"#,
        &[&planted(&world)],
    );
    let _ = child.wait();
    assert!(
        world.project.join("sub/.git").is_dir()
            || present(&world.project.join("sub/.git.sbx-blocked")),
        "the scenario did not happen"
    );
    let out = Sbx.run_sh(&world, "echo NEXT-RAN");
    assert!(stdout(&out).contains("NEXT-RAN"), "{}", both(&out));
    assert!(!present(&world.project.join("sub/.git")), "{}", both(&out));
    host_git(&world, &world.project.join("sub"));
}

/// In a project that is not a repository, a `.git` file the command wrote
/// (pointing git at a repository it prepared) was moved aside by a run that
/// finished, but not by the next run after a SIGKILL: the killed run's note
/// did not say to look.
#[test]
fn a_git_file_made_by_a_killed_run_in_a_plain_project_is_moved_aside() {
    require_sandbox!();
    let world = World::new();
    let evil = Elsewhere::new();
    let mut child = killed_after_up(
        &world,
        &evil.put(
            r#"git init -q --bare EVIL && git --git-dir=EVIL config core.fsmonitor "$1"
printf 'gitdir: EVIL\n' > .git; echo up > up; sleep 30"#,
        ),
        &[&planted(&world)],
    );
    let _ = child.wait();
    // The killed run's guardian (or keeper) may have swept it already:
    // either way the command did write it.
    assert!(
        world.project.join(".git").is_file() || present(&world.project.join(".git.sbx-blocked")),
        "the scenario did not happen"
    );
    let out = Sbx.run_sh(&world, "echo NEXT-RAN");
    assert!(stdout(&out).contains("NEXT-RAN"), "{}", both(&out));
    assert!(!present(&world.project.join(".git")), "{}", both(&out));
    assert!(
        present(&world.project.join(".git.sbx-blocked")),
        "{}",
        both(&out)
    );
    host_git(&world, &world.project);
}

/// Agents work in linked worktrees (one per task): there `git add` and
/// `git commit` failed (`index.lock: Read-only file system`), because git
/// writes in the main repository's git directory, outside the project.
/// That directory is now writable with the project, and its hooks, config
/// and the other worktrees' files stay read-only.
#[test]
fn a_linked_worktree_commits_while_the_main_repository_stays_protected() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let remote = world.root.join("remote.git");
    util::git(
        &world.root,
        &[
            "clone",
            "-q",
            "--bare",
            world.project.to_str().unwrap(),
            remote.to_str().unwrap(),
        ],
    );
    util::git(
        &world.project,
        &["remote", "add", "origin", remote.to_str().unwrap()],
    );
    util::git(
        &world.project,
        &["worktree", "add", "-q", "-b", "other", "../wt-other"],
    );
    util::git(
        &world.project,
        &["worktree", "add", "-q", "-b", "task", "../wt-task"],
    );
    let wt = world.home.join("wt-task");
    let main_git = world.project.join(".git");
    let out = sbx_sh(
        &world,
        &wt,
        &[],
        r#"set -e
echo a > a && git add a && git commit -q -m a
echo b > b && git stash -q -u && git stash pop -q && git add b && git commit -q -m b
git branch side && git tag v1
git fetch -q origin
git rebase -q main
git worktree list >/dev/null
echo WORKFLOW-OK
set +e
printf '#!/bin/sh\n%s\n' "$1" > "$2/hooks/post-commit" 2>/dev/null && echo HOOK-WRITTEN
git config core.fsmonitor "$1" 2>/dev/null && echo CONFIG-WRITTEN
echo x >> "$2/worktrees/wt-other/gitdir" 2>/dev/null && echo OTHER-WRITTEN
echo x > "$3/main-tree-file" 2>/dev/null && echo MAIN-TREE-WRITTEN
true"#,
        &[
            &planted(&world),
            main_git.to_str().unwrap(),
            world.project.to_str().unwrap(),
        ],
    );
    assert!(stdout(&out).contains("WORKFLOW-OK"), "{}", both(&out));
    assert_not_written(
        &out,
        &["HOOK-WRITTEN", "OTHER-WRITTEN", "MAIN-TREE-WRITTEN"],
    );
    assert_fsmonitor_refused(&out, &main_git.join("config"));
    // The commits are in the main repository, as git made them.
    let log = world
        .host_cmd("git")
        .args(["log", "--format=%s", "task"])
        .current_dir(&world.project)
        .output()
        .unwrap();
    let subjects = String::from_utf8_lossy(&log.stdout).to_string();
    assert!(subjects.starts_with("b\na\n"), "{subjects}");
    host_git(&world, &wt);
    host_git(&world, &world.project);
}

/// Ways a new repository's config hid from the check (twelfth review):
/// a config that is a link reading differently for git than for sbx
/// (`/proc/self/cwd`), a FIFO that hung sbx's check (and every later run),
/// a `config.worktree` the check never read, a branch pushing to a path.
#[test]
fn a_new_repository_cannot_hide_its_config_from_the_check() {
    require_sandbox!();
    for (name, script) in [
        (
            "link",
            r#"cp .git/config .cfg && printf '[core]\n\tfsmonitor = "%s"\n' "$1" >> .cfg
rm .git/config && ln -s /proc/self/cwd/.cfg .git/config"#,
        ),
        (
            "worktree-config",
            r#"git config core.repositoryformatversion 1 && git config extensions.worktreeConfig true
printf '[core]\n\tfsmonitor = "%s"\n' "$1" > .git/config.worktree"#,
        ),
        (
            "pushremote",
            r#"git init -q --bare EVIL && printf '#!/bin/sh\n%s\n' "$1" > EVIL/hooks/pre-receive && chmod +x EVIL/hooks/pre-receive
git remote add origin https://example.invalid/r.git && git config branch.main.remote origin && git config branch.main.pushremote EVIL"#,
        ),
    ] {
        let world = World::new();
        world.git_repo();
        let evil = Elsewhere::new();
        let script = evil.put(script);
        let out = sbx_sh(
            &world,
            &world.project,
            &[],
            &format!(
                "set -e; mkdir -p lib/y; cd lib/y; git init -q -b main .; git commit -q --allow-empty -m x\n{script}\ncd ../..; git add lib/y; git commit -q -m a; echo DONE"
            ),
            &[&planted(&world)],
        );
        assert!(stdout(&out).contains("DONE"), "{name}: {}", both(&out));
        assert!(
            !present(&world.project.join("lib/y/.git")),
            "{name}: {}",
            both(&out)
        );
        host_git(&world, &world.project);
        let _ = world
            .host_cmd("git")
            .args(["push", "-q"])
            .current_dir(world.project.join("lib/y"))
            .output()
            .unwrap();
        assert!(!git_marker(&world).exists(), "{name}: git push ran it");
    }
}

#[test]
fn a_fifo_in_a_new_repository_does_not_hang_sbx() {
    require_sandbox!();
    let (world, out) =
        in_a_repository("git init -q a && rm a/.git/config && mkfifo a/.git/config && echo DONE");
    assert!(stdout(&out).contains("DONE"), "{}", both(&out));
    assert!(!present(&world.project.join("a/.git")), "{}", both(&out));
    // And the next run is not held either.
    let next = Sbx.run_sh(&world, "echo NEXT");
    assert!(stdout(&next).contains("NEXT"), "{}", both(&next));
    // Nor by the project's own index made a FIFO (read for gitlinks).
    let out = Sbx.run_sh(&world, "rm .git/index && mkfifo .git/index && echo DONE");
    assert!(stdout(&out).contains("DONE"), "{}", both(&out));
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(
        stderr(&out).contains("not a regular file"),
        "{}",
        both(&out)
    );
}

/// A linked worktree's submodules keep their git directories under
/// `.git/worktrees/NAME/modules`: those were writable (twelfth review).
#[test]
fn a_worktrees_submodules_are_protected_too() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    world.add_submodule();
    util::git(
        &world.project,
        &["worktree", "add", "-q", "-b", "wt", "../wt"],
    );
    let wt = world.home.join("wt");
    util::git(
        &wt,
        &[
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "update",
            "-q",
            "--init",
        ],
    );
    let module = world.project.join(".git/worktrees/wt/modules/vendor/lib");
    assert!(
        module.join("config").is_file(),
        "the scenario did not happen"
    );
    for dir in [&wt, &world.project] {
        let out = sbx_sh(
            &world,
            dir,
            &[],
            r#"printf '[core]\n\tfsmonitor = "%s"\n' "$1" >> "$2/config" 2>/dev/null && echo CONFIG-WRITTEN
printf '#!/bin/sh\n%s\n' "$1" > "$2/hooks/post-checkout" 2>/dev/null && echo HOOK-WRITTEN
true"#,
            &[&planted(&world), module.to_str().unwrap()],
        );
        assert_fsmonitor_refused(&out, &module.join("config"));
        assert_not_written(&out, &["HOOK-WRITTEN"]);
    }
    host_git(&world, &wt);
}

/// A repository hidden in a directory the command made unreadable: git
/// still reaches it by the path the index names (twelfth review).
#[test]
fn a_repository_in_a_directory_made_unreadable_is_not_missed() {
    require_sandbox!();
    let (world, out) = in_a_repository(
        r#"set -e; mkdir -p d/sub; cd d/sub; git init -q -b main .; git config core.fsmonitor "$1"
git commit -q --allow-empty -m x; cd ../..; git add d/sub; git commit -q -m a; chmod 111 d; echo DONE"#,
    );
    assert!(stdout(&out).contains("DONE"), "{}", both(&out));
    // sbx makes the directory readable again (as root it always was), finds
    // the repository and moves it aside; failing that, it says so and fails.
    let moved = !present(&world.project.join("d/sub/.git"));
    let said = out.status.code() == Some(125) && stderr(&out).contains("cannot be searched");
    assert!(moved || said, "{}", both(&out));
    host_git(&world, &world.project);
    let _ = std::fs::set_permissions(
        world.project.join("d"),
        std::fs::Permissions::from_mode(0o755),
    );
}

/// Submodule git directories the command adds under `.git/modules`: the
/// walk does not enter `.git`, so they were never checked (twelfth review).
#[test]
fn a_submodule_git_directory_the_command_adds_is_checked() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    world.add_submodule();
    util::git(
        &world.project,
        &["submodule", "deinit", "-q", "-f", "vendor/lib"],
    );
    std::fs::remove_dir_all(world.project.join(".git/modules")).unwrap();
    // Planted: a module whose worktree is home, with a hook.
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"set -e; m=.git/modules/vendor/lib; mkdir -p .git/modules/vendor
git clone -q --bare "$2" $m; git --git-dir=$m config core.worktree ../../../../..
printf '#!/bin/sh\n%s\n' "$1" > $m/hooks/post-checkout; chmod +x $m/hooks/post-checkout; echo PLANTED"#,
        &[
            &planted(&world),
            world.root.join("sub-origin").to_str().unwrap(),
        ],
    );
    assert!(stdout(&out).contains("PLANTED"), "{}", both(&out));
    assert!(
        !present(&world.project.join(".git/modules/vendor/lib")),
        "{}",
        both(&out)
    );
    let _ = world
        .host_cmd("git")
        .args([
            "-c",
            "protocol.file.allow=always",
            "submodule",
            "update",
            "-q",
            "--init",
        ])
        .current_dir(&world.project)
        .output()
        .unwrap();
    assert!(!git_marker(&world).exists(), "the planted hook ran");
}

/// What git itself writes stays: a linked worktree the command adds inside
/// the project (`.worktrees/NAME`, as agents do) keeps its `.git` file.
#[test]
fn a_worktree_the_command_adds_inside_the_project_stays() {
    require_sandbox!();
    let (world, out) = in_a_repository(
        "git worktree add -q -b task .worktrees/task && cd .worktrees/task && echo x > x && git add x && git commit -q -m x && echo WT-OK",
    );
    assert!(stdout(&out).contains("WT-OK"), "{}", both(&out));
    let wt = world.project.join(".worktrees/task");
    assert!(wt.join(".git").is_file(), "{}", both(&out));
    assert!(!stderr(&out).contains("sbx-blocked"), "{}", both(&out));
    let status = world
        .host_cmd("git")
        .args(["status", "--short"])
        .current_dir(&wt)
        .output()
        .unwrap();
    assert!(status.status.success(), "{status:?}");
}

/// A link on the way to a protected config (`cfg` in `.git/config ->
/// ../../../cfg/config`) was neither pinned nor watched: a run could point
/// it at a config with `core.fsmonitor` (twelfth review).
#[test]
fn a_link_on_the_way_to_a_protected_config_is_watched() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let z = world.project.join("lib/z");
    util::repo_with_commit(&z);
    let config = read(&z.join(".git/config"));
    util::write(&world.project.join("cfgA/config"), &config);
    util::write(
        &world.project.join("cfgB/config"),
        &format!("{config}[core]\n\tfsmonitor = \"{}\"\n", planted(&world)),
    );
    std::fs::remove_file(z.join(".git/config")).unwrap();
    symlink("../../../cfg/config", z.join(".git/config")).unwrap();
    symlink("cfgA", world.project.join("cfg")).unwrap();
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        "ln -sfn cfgB cfg; echo DONE",
        &[],
    );
    assert!(stdout(&out).contains("DONE"), "{}", both(&out));
    let now = std::fs::read_link(world.project.join("cfg")).ok();
    assert_ne!(now.as_deref(), Some(Path::new("cfgB")), "{}", both(&out));
    host_git(&world, &z);
}

/// A repository under a directory the walk skips (`node_modules`), added
/// to the index as a gitlink: the user's `git status` at the top enters it
/// (twelfth review). An index the run changed is read for gitlinks.
#[test]
fn a_gitlinked_repository_in_a_skipped_directory_is_checked() {
    require_sandbox!();
    let (world, out) = in_a_repository(
        r#"set -e; mkdir -p node_modules/x; cd node_modules/x; git init -q -b main .; git config core.fsmonitor "$1"
git commit -q --allow-empty -m x; cd ../..; git add -f node_modules/x; git commit -q -m add; echo DONE"#,
    );
    assert!(stdout(&out).contains("DONE"), "{}", both(&out));
    assert!(
        !present(&world.project.join("node_modules/x/.git")),
        "{}",
        both(&out)
    );
    host_git(&world, &world.project);
}

/// git's older remote files (`.git/remotes/NAME`, `.git/branches/NAME`)
/// give `git push NAME` a URL when the config has none: a local repository
/// there has its hooks run on the host by the push.
#[test]
fn git_s_older_remote_files_are_protected() {
    require_sandbox!();
    let evil = Elsewhere::new();
    let (world, out) = in_a_repository(&evil.put(
        r#"git init -q --bare EVIL && printf '#!/bin/sh\n%s\n' "$1" > EVIL/hooks/pre-receive && chmod +x EVIL/hooks/pre-receive
mkdir -p .git/remotes 2>/dev/null; printf 'URL: EVIL\n' > .git/remotes/evil 2>/dev/null
printf 'EVIL\n' > .git/branches/evil2 2>/dev/null
echo DONE"#,
    ));
    assert!(stdout(&out).contains("DONE"), "{}", both(&out));
    for remote in ["evil", "evil2"] {
        let _ = world
            .host_cmd("git")
            .args(["push", "-q", remote, "main"])
            .current_dir(&world.project)
            .output()
            .unwrap();
    }
    assert!(
        !git_marker(&world).exists(),
        "a push ran the planted hook: {}",
        both(&out)
    );
}

/// The host's view of a key in a repository's config: its values.
fn host_config(world: &World, repo: &Path, key: &str) -> Vec<String> {
    let out = world
        .host_cmd("git")
        .args(["config", "--file", ".git/config", "--get-all", key])
        .current_dir(repo)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The private config copies are all gone from sbx's cache directory: a
/// run's guardian removes them once the run is done, so this waits for
/// that.
fn assert_copies_gone(world: &World) {
    let left = util::wait_until_config_copies_are_removed(&world.home);
    assert!(left.is_empty(), "{left:?}");
}

/// `.git/config` was read-only: `git remote add`, `git switch -c --track`,
/// `git config --local` failed with git's "Device or resource busy". They
/// now write a private copy, and after the run the everyday settings reach
/// the real file through git, while `core.fsmonitor` is refused by name.
/// The command runs as the user it is on the host, with no capability.
#[test]
fn everyday_git_config_writes_reach_the_real_config_after_the_run() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"set -e
git remote add origin https://example.invalid/r.git
git update-ref refs/remotes/origin/main HEAD
git switch -q -c topic --track origin/main
git config --local user.email me@example.invalid
echo "UID=$(id -u)"
grep '^Cap' /proc/self/status
echo DONE"#,
        &[&planted(&world)],
    );
    assert!(stdout(&out).contains("DONE"), "{}", both(&out));
    let uid = nix_uid();
    assert!(
        stdout(&out).contains(&format!("UID={uid}\n")),
        "{}",
        both(&out)
    );
    for cap in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        assert!(
            stdout(&out).contains(&format!("{cap}:\t0000000000000000")),
            "{cap}: {}",
            both(&out)
        );
    }
    let repo = &world.project;
    assert_eq!(
        host_config(&world, repo, "remote.origin.url"),
        ["https://example.invalid/r.git"]
    );
    assert_eq!(host_config(&world, repo, "branch.topic.remote"), ["origin"]);
    assert_eq!(
        host_config(&world, repo, "branch.topic.merge"),
        ["refs/heads/main"]
    );
    assert_eq!(
        host_config(&world, repo, "user.email"),
        ["me@example.invalid"]
    );
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert_copies_gone(&world);
    // One setting that is not everyday stops the run's changes, all of
    // them, named.
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"git config user.name Someone && git config core.fsmonitor "$1" && echo DONE"#,
        &[&planted(&world)],
    );
    assert!(stdout(&out).contains("DONE"), "{}", both(&out));
    assert_fsmonitor_refused(&out, &repo.join(".git/config"));
    assert!(host_config(&world, repo, "user.name").is_empty());
    assert_copies_gone(&world);
    host_git(&world, repo);
}

/// The host's file never holds what the command wrote to its copy, not
/// while it runs and not after sbx is killed: a killed run's copy is
/// removed by the next run, never applied.
#[test]
fn a_killed_runs_config_copy_never_reaches_the_host() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let sleep = format!("sleep {}", unique(30));
    let mut child = started_and_up(
        &world,
        &format!(
            r#"git config core.fsmonitor "$1" && git config user.email x@example.invalid && echo up > up; {sleep}"#
        ),
        &[&planted(&world)],
    );
    let config = world.project.join(".git/config");
    let during = std::fs::read_to_string(&config).unwrap();
    // Reduced mode has no copies: the config is written in place during
    // the run (its banner, checked below, says so) and put back after.
    if !util::contained() {
        assert!(!during.contains("fsmonitor"), "{during}");
        assert_eq!(
            util::config_copies_left(&world.home).len(),
            1,
            "the scenario did not happen"
        );
    }
    let _ = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status();
    let _ = child.wait();
    wait_until_no_process_has(&sleep);
    let out = Sbx.run_sh(&world, "echo NEXT-RAN");
    assert!(stdout(&out).contains("NEXT-RAN"), "{}", both(&out));
    util::unclaimed(&out, util::RUNS_LATER_WRITABLE);
    let after = std::fs::read_to_string(&config).unwrap();
    assert!(!after.contains("fsmonitor"), "{after}");
    assert!(!after.contains("x@example.invalid"), "{after}");
    assert_copies_gone(&world);
    host_git(&world, &world.project);
}

/// This process's user id.
fn nix_uid() -> u32 {
    std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
        .unwrap()
}

/// Review of the config copies: a setting that names a remote can point
/// git at a path when no remote of that (case-sensitive) name has a URL;
/// a push there runs the hooks of a bare repository the command made.
/// Each way is refused whole (exit 125) and the user's `git push` runs
/// nothing.
#[test]
fn config_changes_never_leave_git_pushing_to_a_path() {
    require_sandbox!();
    for (name, change) in [
        (
            "ORIGIN",
            "git config branch.main.remote ORIGIN && git config branch.main.merge refs/heads/main",
        ),
        ("origin", "git config --unset remote.origin.url"),
        (
            "evil",
            "git config remote.evil.url ./evil && git config branch.main.pushRemote ./evil",
        ),
    ] {
        let world = World::new();
        world.git_repo();
        util::git(
            &world.project,
            &["remote", "add", "origin", "https://example.invalid/r.git"],
        );
        let before = read(&world.project.join(".git/config"));
        let out = sbx_sh(
            &world,
            &world.project,
            &[],
            &format!(
                r#"git init -q --bare "{name}" && printf '#!/bin/sh\n%s\n' "$1" > "{name}/hooks/pre-receive" && chmod +x "{name}/hooks/pre-receive" && {change} && echo CHANGED"#
            ),
            &[&planted(&world)],
        );
        assert!(stdout(&out).contains("CHANGED"), "{name}: {}", both(&out));
        let _ = world
            .host_cmd("git")
            .args(["push", "-q", "origin", "main"])
            .env("GIT_TERMINAL_PROMPT", "0")
            .current_dir(&world.project)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let _ = world
            .host_cmd("git")
            .args(["push", "-q"])
            .env("GIT_TERMINAL_PROMPT", "0")
            .current_dir(&world.project)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            !git_marker(&world).exists(),
            "{name}: a push ran the planted hook"
        );
        assert_eq!(read(&world.project.join(".git/config")), before, "{name}");
        assert_eq!(out.status.code(), Some(125), "{name}: {}", both(&out));
    }
}

/// A repository deeper inside a `--writable` directory than the directory
/// itself was left with writable hooks and config (review finding): the
/// other writable roots are walked for repositories like the project.
#[test]
fn repositories_deep_in_another_writable_root_are_protected_too() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let other = world.home.join("src");
    let deep = other.join("team/app");
    util::repo_with_commit(&deep);
    let out = sbx_sh(
        &world,
        &world.project,
        &["--writable", other.to_str().unwrap()],
        r#"printf '#!/bin/sh\n%s\n' "$1" > "$2/.git/hooks/post-commit" 2>/dev/null && echo HOOK-WRITTEN
git -C "$2" config core.fsmonitor "$1"
git init -q "$3/new" && git -C "$3/new" config core.fsmonitor "$1"
echo x > "$2/f" && echo TREE-WRITTEN"#,
        &[
            &planted(&world),
            deep.to_str().unwrap(),
            other.to_str().unwrap(),
        ],
    );
    assert!(stdout(&out).contains("TREE-WRITTEN"), "{}", both(&out));
    assert_not_written(&out, &["HOOK-WRITTEN"]);
    assert_fsmonitor_refused(&out, &deep.join(".git/config"));
    assert!(!present(&other.join("new/.git")), "{}", both(&out));
    host_git(&world, &deep);
    host_git(&world, &other.join("new"));
}

/// A bare repository under the project (review finding: only `.git`
/// entries were looked for): git runs its hooks for whoever pushes there.
/// One the command makes with a hook is moved aside after the run; an
/// existing one keeps its hooks and config read-only.
#[test]
fn bare_repositories_in_the_project_are_protected_and_checked() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let existing = world.project.join("mirror.git");
    util::git(
        &world.project,
        &["init", "-q", "--bare", existing.to_str().unwrap()],
    );
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"printf '#!/bin/sh\n%s\n' "$1" > mirror.git/hooks/pre-receive 2>/dev/null && echo EXISTING-HOOK-WRITTEN
git init -q --bare planted.git && printf '#!/bin/sh\n%s\n' "$1" > planted.git/hooks/pre-receive && chmod +x planted.git/hooks/pre-receive
git init -q --bare plain.git
echo DONE"#,
        &[&planted(&world)],
    );
    assert!(stdout(&out).contains("DONE"), "{}", both(&out));
    // The user pushes to each: nothing planted runs.
    for target in ["mirror.git", "planted.git", "plain.git"] {
        let _ = world
            .host_cmd("git")
            .args(["push", "-q", target, "main"])
            .current_dir(&world.project)
            .stdin(Stdio::null())
            .output()
            .unwrap();
    }
    assert!(!git_marker(&world).exists(), "a push ran a planted hook");
    assert_not_written(&out, &["EXISTING-HOOK-WRITTEN"]);
    assert!(
        present(&world.project.join("planted.git/HEAD.sbx-blocked")),
        "{}",
        both(&out)
    );
    assert!(world.project.join("plain.git/HEAD").is_file());
}

/// Review of the bare-repository check: git also takes a directory for a
/// repository when its `HEAD` is a link into `refs/`, its `objects` a link,
/// or a `commondir` supplies them; the command turned the project's own
/// `src/` into one, whose `core.sshCommand` the user's `git fetch` there ran.
#[test]
fn a_directory_turned_into_a_git_directory_any_way_git_accepts_is_caught() {
    require_sandbox!();
    for (name, script) in [
        (
            "head-link",
            "cd src && mkdir -p objects refs/heads && ln -s refs/heads/main HEAD",
        ),
        (
            "objects-link",
            "mkdir .o && cd src && ln -s ../.o objects && mkdir -p refs/heads && echo 'ref: refs/heads/main' > HEAD",
        ),
        (
            "commondir",
            "mkdir -p lib/x/objects lib/x/refs/heads && cd src && echo 'ref: refs/heads/main' > HEAD && echo ../lib/x > commondir && cd ../lib/x",
        ),
    ] {
        let world = World::new();
        world.git_repo();
        std::fs::create_dir_all(world.project.join("src")).unwrap();
        util::write(&world.project.join("src/main.c"), "int main;\n");
        let out = sbx_sh(
            &world,
            &world.project,
            &[],
            &format!(
                r#"set -e; {script}
printf '[core]\n\tbare = true\n\tsshCommand = "%s; false"\n[remote "origin"]\n\turl = ssh://example.invalid/r.git\n' "$1" > config
echo PLANTED"#
            ),
            &[&planted(&world)],
        );
        assert!(stdout(&out).contains("PLANTED"), "{name}: {}", both(&out));
        // The user fetches there: git runs core.sshCommand to reach the
        // remote, no working tree needed.
        let _ = world
            .host_cmd("git")
            .args(["fetch", "-q", "origin"])
            .current_dir(world.project.join("src"))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!git_marker(&world).exists(), "{name}: {}", both(&out));
        // The user's files stay where they are.
        assert!(world.project.join("src/main.c").is_file(), "{name}");
    }
}

/// Review finding: every repository in another writable root cost its own
/// mounts, and a few hundred made each run take seconds, then refused
/// (500). Past 64 in one root they are not kept read-only, and sbx says so,
/// naming the root; the run goes on.
#[test]
fn a_writable_root_full_of_repositories_is_named_not_refused() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let many = world.home.join("many");
    for i in 0..65 {
        util::git(
            &world.home,
            &["init", "-q", many.join(format!("r{i}")).to_str().unwrap()],
        );
    }
    let out = sbx_sh(
        &world,
        &world.project,
        &["--writable", many.to_str().unwrap()],
        "echo RAN",
        &[],
    );
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert!(stdout(&out).contains("RAN"), "{}", both(&out));
    assert!(
        stderr(&out).contains("holds 65 git repositories") && stderr(&out).contains("/many"),
        "{}",
        both(&out)
    );
}

/// A git project inside a directory the walk prunes, in an outer
/// repository (pip's editable installs clone into `.venv/src/PKG`; a
/// dependency checked out in `node_modules/dep`): the walk started at the
/// outer repository and never entered it, so the project's own `.env`
/// files were readable, the hooks of the repositories inside it writable,
/// and a repository the command made there stayed (found by stop 32's
/// review).
#[test]
fn a_project_inside_a_pruned_directory_of_an_outer_repository_is_walked() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let dep = world.project.join(".venv/src/pkg");
    let inner = dep.join("lib/inner");
    std::fs::create_dir_all(&inner).unwrap();
    util::repo_with_commit(&dep);
    util::repo_with_commit(&inner);
    for rel in [".env", "lib/.env.local"] {
        util::write(&dep.join(rel), &format!("TOKEN={SECRET}\n"));
    }
    // Run from a repository inside that checkout (a submodule), the walk
    // still starts at the checkout: its other `.env` files stay masked.
    let from_inner = sbx_sh(
        &world,
        &inner,
        &[],
        "cat ../.env.local ../../.env 2>&1; echo DONE",
        &[],
    );
    assert_line(&from_inner, "DONE");
    // Outside that run's writable root: hidden in reduced mode too.
    assert_no_secret(&from_inner);
    let out = sbx_sh(
        &world,
        &dep,
        &[],
        r#"cat .env lib/.env.local 2>&1
printf '#!/bin/sh\n' > lib/inner/.git/hooks/pre-commit 2>&1
mkdir -p made && cd made && git init -q && printf '#!/bin/sh\n' > .git/hooks/post-checkout
echo DONE"#,
        &[],
    );
    assert_line(&out, "DONE");
    let hook = inner.join(".git/hooks/pre-commit");
    assert!(!hook.exists(), "{} planted: {}", hook.display(), both(&out));
    assert!(
        dep.join("made/.git.sbx-blocked").exists() && !dep.join("made/.git").exists(),
        "the repository made with a hook stayed: {}",
        both(&out)
    );
    if util::unclaimed(&out, util::ENV_READABLE) {
        return;
    }
    assert_no_secret(&out);
}

/// `.git/hooks -> ../tools/hooks` and a linked `.git/config`: the target is
/// read-only, but the link lives in `.git`, which git needs writable. The
/// command pointed it elsewhere (`ln -sfn`), and until sbx moved it aside
/// after the run, git on the host followed it (an editor's `git status`
/// ran a planted `core.fsmonitor`); the move then left the repository
/// without its config. The links are now mounted onto themselves for the
/// run (found by stop 32's review).
#[test]
fn linked_hooks_and_config_cannot_be_pointed_elsewhere_during_the_run() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let git = world.project.join(".git");
    std::fs::create_dir_all(world.project.join("tools")).unwrap();
    std::fs::rename(git.join("hooks"), world.project.join("tools/hooks")).unwrap();
    std::fs::rename(git.join("config"), world.project.join("git-config")).unwrap();
    symlink("../tools/hooks", git.join("hooks")).unwrap();
    symlink("../git-config", git.join("config")).unwrap();
    // And a repository whose `.git` links to a git directory of its own:
    // the directory holding the link is pinned with it (renaming it would
    // carry the link away and free its name).
    let sub = world.project.join("sub");
    std::fs::create_dir_all(world.project.join(".gitdirs")).unwrap();
    util::git(
        &world.project,
        &["init", "-q", "--separate-git-dir", ".gitdirs/sub", "sub"],
    );
    std::fs::remove_file(sub.join(".git")).unwrap();
    symlink("../.gitdirs/sub", sub.join(".git")).unwrap();
    let evil = world.root.join("evil-config");
    std::fs::write(&evil, "[core]\n\tfsmonitor = \"touch PWNED; false\"\n").unwrap();
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"git config --get core.bare && echo READ-OK
ln -sfn "$1" .git/config 2>&1
ln -sfn /tmp .git/hooks 2>&1
rm -f .git/config 2>&1
mv sub sub2 2>&1
echo DONE"#,
        &[evil.to_str().unwrap()],
    );
    assert_line(&out, "READ-OK");
    assert_line(&out, "DONE");
    for (link, target) in [("config", "../git-config"), ("hooks", "../tools/hooks")] {
        assert_eq!(
            std::fs::read_link(git.join(link)).ok().as_deref(),
            Some(Path::new(target)),
            ".git/{link}: {}",
            both(&out)
        );
        if util::contained() {
            // Reduced mode mounts nothing: the links were put back after
            // the run (the window during it stays, as the README says).
            continue;
        }
        assert!(
            !git.join(format!("{link}.sbx-blocked")).exists(),
            "the link was replaced during the run: {}",
            both(&out)
        );
    }
    if !util::contained() {
        assert_eq!(
            std::fs::read_link(sub.join(".git")).ok().as_deref(),
            Some(Path::new("../.gitdirs/sub")),
            "{}",
            both(&out)
        );
        assert!(!world.project.join("sub2").exists(), "{}", both(&out));
    }
}

/// A home reached through a symbolic link (`HOME=/home/me` with `/home ->
/// /usr/home`): bubblewrap could not make the bind of the config copies'
/// directory through the link, and every run fell back to read-only git
/// configs (found by stop 32's review).
#[test]
fn git_config_writes_work_with_a_home_reached_through_a_link() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let link = world.root.join("home-link");
    symlink(&world.home, &link).unwrap();
    let mut cmd = world.sbx_std();
    cmd.env("HOME", &link)
        .env("XDG_CONFIG_HOME", link.join(".config"))
        .env("XDG_CACHE_HOME", link.join(".cache"));
    sh_in(
        &mut cmd,
        &[],
        "git config --local user.email me@example.invalid && echo CONFIG-OK",
        &[],
    );
    let out = cmd.output().unwrap();
    show("home through a link", &out);
    assert_line(&out, "CONFIG-OK");
    assert_absent(&out, "read-only in this run");
    assert_eq!(
        host_config(&world, &world.project, "user.email"),
        ["me@example.invalid"]
    );
}

/// A clone pip made for an editable install (`.venv/src/pkg`), seen from
/// the outer project: the walk prunes `.venv`, so its hooks and config were
/// writable, and git (VS Code's git does not skip `.venv`) runs them when
/// it enters the clone (found by stop 32's review).
#[test]
fn a_pip_clone_in_the_projects_venv_keeps_its_hooks_and_config() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let clone = world.project.join(".venv/src/pkg");
    std::fs::create_dir_all(&clone).unwrap();
    util::repo_with_commit(&clone);
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"printf '#!/bin/sh\n' > .venv/src/pkg/.git/hooks/pre-commit 2>&1
git -C .venv/src/pkg config core.fsmonitor 'touch PWNED'
echo DONE"#,
        &[],
    );
    assert_line(&out, "DONE");
    let hook = clone.join(".git/hooks/pre-commit");
    assert!(!hook.exists(), "{} planted: {}", hook.display(), both(&out));
    assert!(
        host_config(&world, &clone, "core.fsmonitor").is_empty(),
        "{}",
        both(&out)
    );
}

/// A link to nothing on the way to the hooks or the config (`.git/hooks ->
/// ../tools/hooks` with `tools -> elsewhere`, no `elsewhere` yet): the
/// place protected was the `tools` link itself, taken already, so the
/// command made `elsewhere/hooks/pre-commit` (or `cfgA/config` with a
/// `core.fsmonitor`) and git on the host ran it (found by stop 33's
/// review; older than that stop). What the last link points to is
/// protected now (moved aside after the run), and the links on the way are
/// kept as they were.
#[test]
fn a_dangling_link_on_the_way_to_hooks_or_config_is_followed() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let git = world.project.join(".git");
    std::fs::remove_dir_all(git.join("hooks")).unwrap();
    symlink("../tools/hooks", git.join("hooks")).unwrap();
    symlink("elsewhere", world.project.join("tools")).unwrap();
    std::fs::remove_file(git.join("config")).unwrap();
    symlink("../cfg/config", git.join("config")).unwrap();
    symlink("cfgA", world.project.join("cfg")).unwrap();
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"mkdir -p elsewhere/hooks cfgA
printf '#!/bin/sh\ntouch PWNED\n' > elsewhere/hooks/pre-commit; chmod +x elsewhere/hooks/pre-commit
printf '[core]\n\tfsmonitor = touch PWNED\n' > cfgA/config
ln -sfn elsewhere2 tools 2>&1; ln -sfn cfgB cfg 2>&1
echo DONE"#,
        &[],
    );
    assert_line(&out, "DONE");
    for made in ["elsewhere/hooks/pre-commit", "cfgA/config"] {
        assert!(
            !world.project.join(made).exists(),
            "{made} stayed: {}",
            both(&out)
        );
    }
    for (link, to) in [("tools", "elsewhere"), ("cfg", "cfgA")] {
        assert_eq!(
            std::fs::read_link(world.project.join(link)).ok().as_deref(),
            Some(Path::new(to)),
            "{link} was pointed elsewhere: {}",
            both(&out)
        );
    }
}

/// The same with a link on the way that does resolve (`tools -> scripts`,
/// `scripts/hooks` not made yet): re-pointing `tools` at a directory the
/// command filled led git to its hook (stop 33's second review).
#[test]
fn a_link_that_resolves_after_a_dangling_one_is_kept_too() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let git = world.project.join(".git");
    std::fs::remove_dir_all(git.join("hooks")).unwrap();
    symlink("../tools/hooks", git.join("hooks")).unwrap();
    std::fs::create_dir(world.project.join("scripts")).unwrap();
    symlink("scripts", world.project.join("tools")).unwrap();
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"mkdir -p evil/hooks
printf '#!/bin/sh\ntouch PWNED\n' > evil/hooks/pre-commit; chmod +x evil/hooks/pre-commit
ln -sfn evil tools 2>&1
echo DONE"#,
        &[],
    );
    assert_line(&out, "DONE");
    assert_eq!(
        std::fs::read_link(world.project.join("tools"))
            .ok()
            .as_deref(),
        Some(Path::new("scripts")),
        "tools was pointed elsewhere: {}",
        both(&out)
    );
}

/// A `.git` file naming a git directory the walk does not reach
/// (`gitdir: node_modules/gd`, not made yet): the command made it, with a
/// `core.fsmonitor`, and the host's next `git status` ran it (stop 33's
/// second review; older than that stop). The git directory a `.git` file
/// names is protected like a `.git` directory now, there or not.
#[test]
fn the_git_directory_a_git_file_names_is_protected_wherever_it_is() {
    require_sandbox!();
    // The third review's too: a name with a `.git` component that is no
    // worktree's or submodule's, and one git reads with a trailing space
    // that sbx trimmed.
    for named in ["node_modules/gd", "node_modules/x/.git", "node_modules/gd "] {
        let world = World::new();
        world.git_repo();
        let git = world.project.join(".git");
        let elsewhere = world.root.join("saved-git");
        std::fs::rename(&git, &elsewhere).unwrap();
        std::fs::write(&git, format!("gitdir: {named}\n")).unwrap();
        let script = format!(
            "mkdir -p \"$(dirname '{named}')\" && cp -r '{}' '{named}'\n\
             printf '[core]\\n\\tfsmonitor = touch PWNED\\n' >> '{named}/config'\n\
             echo DONE",
            elsewhere.display()
        );
        let out = sbx_sh(&world, &world.project, &[], &script, &[]);
        assert_line(&out, "DONE");
        let config = world.project.join(named).join("config");
        let planted = std::fs::read_to_string(&config).unwrap_or_default();
        assert!(
            !planted.contains("fsmonitor"),
            "{} keeps the planted key: {}",
            config.display(),
            both(&out)
        );
    }
}

/// `core.hooksPath` set in the config of a git directory a `.git` file
/// names (`git init --separate-git-dir`): never read, so the hooks
/// directory it names stayed writable and the host's `git commit` ran
/// what the command put there (third review; older than stop 33).
#[test]
fn a_hooks_path_in_a_separate_git_directory_is_read_only() {
    require_sandbox!();
    let world = World::new();
    let project = &world.project;
    util::git(project, &["init", "-q", "--separate-git-dir=.gd", "."]);
    util::git(project, &["config", "core.hooksPath", "myhooks"]);
    std::fs::create_dir(project.join("myhooks")).unwrap();
    let out = sbx_sh(
        &world,
        project,
        &[],
        "printf '#!/bin/sh\\ntouch PWNED\\n' > myhooks/pre-commit 2>&1; echo DONE",
        &[],
    );
    assert_line(&out, "DONE");
    assert!(
        !project.join("myhooks/pre-commit").exists(),
        "{}",
        both(&out)
    );
}

/// Fourth review of the `gitdir:` handling: a `.git` link to a file that
/// names a git directory (git follows it), and a named git directory whose
/// `commondir` sends git to a common directory the walk does not reach:
/// what the command planted in either ran on the host.
#[test]
fn a_linked_git_file_and_a_common_directory_are_followed() {
    require_sandbox!();
    let plant =
        "printf '[core]\\n\\tfsmonitor = touch PWNED\\n' >> node_modules/gd/config; echo DONE";
    // `.git -> gitfile`, which names node_modules/gd.
    let world = World::new();
    world.git_repo();
    let git = world.project.join(".git");
    std::fs::create_dir(world.project.join("node_modules")).unwrap();
    std::fs::rename(&git, world.project.join("node_modules/gd")).unwrap();
    std::fs::write(world.project.join("gitfile"), "gitdir: node_modules/gd\n").unwrap();
    symlink("gitfile", &git).unwrap();
    let out = sbx_sh(&world, &world.project, &[], plant, &[]);
    assert_line(&out, "DONE");
    let config = std::fs::read_to_string(world.project.join("node_modules/gd/config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{}", both(&out));

    // `.git` names node_modules/wt, whose commondir is ../gd.
    let world = World::new();
    world.git_repo();
    let git = world.project.join(".git");
    let modules = world.project.join("node_modules");
    std::fs::create_dir(&modules).unwrap();
    std::fs::rename(&git, modules.join("gd")).unwrap();
    std::fs::create_dir(modules.join("wt")).unwrap();
    let head = std::fs::read(modules.join("gd/HEAD")).unwrap();
    std::fs::write(modules.join("wt/HEAD"), head).unwrap();
    std::fs::write(modules.join("wt/commondir"), "../gd\n").unwrap();
    std::fs::write(modules.join("wt/gitdir"), format!("{}\n", git.display())).unwrap();
    std::fs::write(&git, "gitdir: node_modules/wt\n").unwrap();
    let out = sbx_sh(&world, &world.project, &[], plant, &[]);
    assert_line(&out, "DONE");
    let config = std::fs::read_to_string(modules.join("gd/config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{}", both(&out));
}

/// A bare repository with worktrees beside it (`.bare`, `.git` naming it,
/// and `main/.git` naming `.bare/worktrees/main`), as many set it up.
fn bare_with_a_worktree(world: &World) -> PathBuf {
    let top = world.home.join("bp");
    std::fs::create_dir(&top).unwrap();
    util::git(&top, &["init", "-q", "--bare", ".bare"]);
    std::fs::write(top.join(".git"), "gitdir: ./.bare\n").unwrap();
    util::git(
        &top,
        &[
            "-c",
            "user.email=t@e.invalid",
            "-c",
            "user.name=t",
            "worktree",
            "add",
            "-q",
            "--orphan",
            "main",
        ],
    );
    top
}

/// sbx made an empty `config` and `hooks` in the worktree's git directory
/// (fourth review of stop 33), as for `.git`, to mount them read-only; the
/// walk had found that directory like a bare repository. Then, the run
/// over, it took them for the command's, moved them aside and warned, on
/// every run (the first version of this test looked only for `config` and
/// `hooks`). git reads neither there (a worktree's come from the common
/// directory): nothing is made now.
#[test]
fn nothing_is_made_in_a_worktrees_git_directory() {
    require_sandbox!();
    let world = World::new();
    let top = bare_with_a_worktree(&world);
    let main = top.join("main");
    let out = sbx_sh(
        &world,
        &main,
        &[],
        "git status --short >/dev/null 2>&1; echo DONE",
        &[],
    );
    assert_line(&out, "DONE");
    let mut names: Vec<String> = std::fs::read_dir(top.join(".bare/worktrees/main"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["HEAD", "commondir", "gitdir", "index", "refs"],
        "{}",
        both(&out)
    );
    assert!(
        !stderr(&out).contains("created or replaced"),
        "{}",
        both(&out)
    );
}

/// With the whole layout writable (sbx started at its top), what the
/// command makes in the worktree's git directory is still moved aside.
#[test]
fn a_config_planted_in_a_worktrees_git_directory_is_moved_aside() {
    require_sandbox!();
    let world = World::new();
    let top = bare_with_a_worktree(&world);
    let wt = top.join(".bare/worktrees/main");
    let out = sbx_sh(
        &world,
        &top,
        &[],
        r#"printf '[core]\n\tfsmonitor = "touch PWNED"\n' > .bare/worktrees/main/config
mkdir .bare/worktrees/main/hooks && echo 'touch PWNED' > .bare/worktrees/main/hooks/pre-commit
echo PLANTED"#,
        &[],
    );
    assert_line(&out, "PLANTED");
    for made in ["config", "hooks"] {
        assert!(!wt.join(made).exists(), "{made} left: {}", both(&out));
        assert!(
            wt.join(format!("{made}.sbx-blocked")).exists(),
            "{made}: {}",
            both(&out)
        );
    }
}

/// A project made with `git init --separate-git-dir .gd`: its git
/// directory, which a `.git` file names, keeps a private config copy like
/// `.git` (everyday settings go back, a planted `core.fsmonitor` does not)
/// and read-only hooks.
#[test]
fn a_separate_git_directory_in_the_project_is_a_git_directory_like_dot_git() {
    require_sandbox!();
    let world = World::new();
    let project = &world.project;
    util::git(project, &["init", "-q", "--separate-git-dir=.gd", "."]);
    let config = || std::fs::read_to_string(project.join(".gd/config")).unwrap();
    let everyday = sbx_sh(
        &world,
        project,
        &[],
        "git config user.name everyday && echo CONFIG-OK",
        &[],
    );
    assert_line(&everyday, "CONFIG-OK");
    assert!(config().contains("everyday"), "{}", both(&everyday));
    let planted = sbx_sh(
        &world,
        project,
        &[],
        r#"git config core.fsmonitor 'touch PWNED'
printf '#!/bin/sh\n' > .gd/hooks/pre-commit 2>&1
echo DONE"#,
        &[],
    );
    assert_line(&planted, "DONE");
    assert_eq!(planted.status.code(), Some(125), "{}", both(&planted));
    assert!(!config().contains("fsmonitor"), "{}", both(&planted));
    assert!(
        !project.join(".gd/hooks/pre-commit").exists(),
        "{}",
        both(&planted)
    );
}

/// A repository the command makes in `.venv/src` (where pip clones
/// editable installs; the walk prunes `.venv`): with a planted
/// `core.fsmonitor` it stayed after the run, and git (an editor's git,
/// which does not skip `.venv`) would run it on the host when it enters the
/// clone (stop 32's note). Now checked like any new repository: moved
/// aside with the key named; a plain new one, and the clones that were
/// there before, stay.
#[test]
fn a_clone_the_command_makes_in_the_venv_is_checked_after_the_run() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let src = world.project.join(".venv/src");
    let old = src.join("old");
    std::fs::create_dir_all(&old).unwrap();
    util::repo_with_commit(&old);
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"git init -q .venv/src/evil && git -C .venv/src/evil config core.fsmonitor 'touch PWNED'
git init -q venv/src/plain
git -C .venv/src/old commit -q --allow-empty -m more
echo DONE"#,
        &[],
    );
    assert_line(&out, "DONE");
    // Moved aside: the command's own status stands, as for any new one.
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert!(stderr(&out).contains("core.fsmonitor"), "{}", both(&out));
    assert!(
        src.join("evil/.git.sbx-blocked").exists() && !src.join("evil/.git").exists(),
        "the clone with a planted fsmonitor stayed: {}",
        both(&out)
    );
    let plain = world.project.join("venv/src/plain/.git");
    assert!(
        plain.is_dir(),
        "a plain new repository was moved: {}",
        both(&out)
    );
    assert!(old.join(".git").is_dir(), "{}", both(&out));
    assert_absent(&out, "/.venv/src/old");
    assert_absent(&out, "venv/src/plain");
}

/// Where the first check of `.venv/src` did not look (stop 33's second
/// review): the environment or its `src` made a repository itself (git
/// run anywhere below enters it), the environment of the directory sbx
/// runs in below the project's root, and a `src` the command leaves
/// unlistable (as an unprivileged user: root lists it anyway).
#[test]
fn repositories_made_around_pips_clones_are_checked_too() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let sub = world.project.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    let plant = |dir: &str| {
        format!("git init -q {dir} && git -C {dir} config core.fsmonitor 'touch PWNED'")
    };
    let script = [
        plant(".venv"),
        plant("../venv/src"),
        plant(".venv/src/hidden"),
        "chmod 311 .venv/src".to_string(),
        "echo DONE".to_string(),
    ]
    .join("\n");
    let out = sbx_sh(&world, &sub, &[], &script, &[]);
    assert_line(&out, "DONE");
    for repo in [
        sub.join(".venv"),
        world.project.join("venv/src"),
        sub.join(".venv/src/hidden"),
    ] {
        assert!(
            repo.join(".git.sbx-blocked").exists() && !repo.join(".git").exists(),
            "{} stayed: {}",
            repo.display(),
            both(&out)
        );
    }
    // Left as the command made it.
    let mode = std::fs::metadata(sub.join(".venv/src"))
        .unwrap()
        .permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o311
    );
}

/// `.git/hooks -> ../tools/hooks` before `tools/hooks` exists (a fresh
/// clone whose hooks a setup script makes later): every run was refused
/// (bubblewrap "Can't find source path"). The place protected is where the
/// link points, missing: writable during the run, and what the command
/// makes there is moved aside after it (found by stop 32's review).
#[test]
fn a_hooks_link_to_nothing_yet_runs_and_what_is_made_there_is_moved_aside() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let hooks = world.project.join(".git/hooks");
    std::fs::remove_dir_all(&hooks).unwrap();
    symlink("../tools/hooks", &hooks).unwrap();
    let out = sbx_sh(
        &world,
        &world.project,
        &[],
        r#"mkdir -p tools/hooks && printf '#!/bin/sh\ntouch PWNED\n' > tools/hooks/pre-commit
chmod +x tools/hooks/pre-commit; echo DONE"#,
        &[],
    );
    assert_line(&out, "DONE");
    assert!(
        !world.project.join("tools/hooks/pre-commit").exists(),
        "{}",
        both(&out)
    );
    assert!(
        world.project.join("tools.sbx-blocked").exists(),
        "{}",
        both(&out)
    );
    assert_eq!(
        std::fs::read_link(&hooks).ok().as_deref(),
        Some(Path::new("../tools/hooks"))
    );
}

/// A `.git` directory with a `commondir` of its own sends git to another
/// directory for its hooks and config (`sub/.git/commondir` naming
/// `../../store`, which has no `HEAD`, so the walk does not take it for a
/// repository). sbx read `commondir` only behind a `.git` file: store's
/// hooks and config stayed writable, and the host's git ran what the
/// command planted there (found by review, older than this test).
#[test]
fn the_common_directory_a_git_directory_names_is_protected() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let p = &world.project;
    util::write(&p.join(".git/info/exclude"), "sub/\nstore/\n");
    let sub = p.join("sub");
    std::fs::create_dir(&sub).unwrap();
    util::git(&sub, &["init", "-q"]);
    util::write(&sub.join("b"), "b\n");
    util::git(&sub, &["add", "b"]);
    util::git(&sub, &["commit", "-q", "-m", "init"]);
    let store = p.join("store");
    std::fs::create_dir(&store).unwrap();
    for name in ["objects", "refs", "config", "hooks"] {
        std::fs::rename(sub.join(".git").join(name), store.join(name)).unwrap();
    }
    util::write(&sub.join(".git/commondir"), "../../store\n");
    let out = sbx_sh(
        &world,
        p,
        &[],
        r#"git -C sub config core.fsmonitor "$1" && echo CONFIG-WRITTEN
printf '#!/bin/sh\n%s\n' "$1" > store/hooks/pre-commit && chmod +x store/hooks/pre-commit && echo HOOK-WRITTEN
echo DONE"#,
        &[&planted(&world)],
    );
    assert_line(&out, "DONE");
    assert_not_written(&out, &["CONFIG-WRITTEN", "HOOK-WRITTEN"]);
    let config = std::fs::read_to_string(store.join("config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{config}\n{}", both(&out));
    host_git(&world, &sub);
}
