//! Repositories the command made: a `.git` under the project that was not
//! there before the run. git on the host enters it later (the user's `git
//! status` recurses into a nested repository that is in the index, and
//! editors run git in every repository they find), so what its `.git`
//! holds runs outside the sandbox.

use std::path::{Path, PathBuf};

use super::gitconfig::{inspect_new_git, inspect_new_module};
use super::identity::{EntryId, Identity, Repositories};
use super::sweep;

/// Walk the project again (from the `.env` scan's cache: one `lstat` per
/// directory that did not change) and check each `.git` entry that is new,
/// or that another entry took the place of (the project's `.git` renamed
/// away and a file `gitdir: /tmp/evil` put there): a file or link (it sends
/// git to a repository prepared elsewhere) is moved aside; a directory is
/// moved aside when it holds hooks or config beyond what `git init` writes
/// (a plain new repository runs nothing and stays). `rebuilt`: directories
/// sbx itself made again after the run, as they are (see
/// [`super::snapshot`]), which are not the command's. False when one could
/// not be moved away.
pub fn check_new_repositories(
    before: &Repositories,
    cache: Option<&Path>,
    rebuilt: &[(PathBuf, EntryId)],
    warn: &dyn Fn(&str),
) -> bool {
    let walk = || {
        let mut found = crate::envscan::walk_repositories(&before.scan_root, cache);
        // Those the walk prunes: a clone the command made in `.venv/src`
        // (one it cannot list is reopened as any directory made
        // unreadable during the run).
        let clones = crate::policy::clone_gits(&before.clone_dirs);
        found.git_entries.extend(clones.gits);
        found.unreadable.extend(clones.unlistable);
        found.git_entries.sort();
        found.git_entries.dedup();
        found
    };
    let mut after = walk();
    let reopened = reopen(&after.unreadable, &before.unreadable);
    if !reopened.is_empty() {
        after = walk();
    }
    let clean = check_after_walk(before, &after, rebuilt, warn);
    // The modes go back as the command left them: what it hid stays hidden
    // from the next walk, which masks such a directory whole.
    restore(&reopened);
    clean
}

/// The checks once the project has been walked again.
fn check_after_walk(
    before: &Repositories,
    after: &crate::envscan::Found,
    rebuilt: &[(PathBuf, EntryId)],
    warn: &dyn Fn(&str),
) -> bool {
    // Known: there before the run, the same entry (or one sbx made again).
    let known = |git: &Path| {
        let now = EntryId::of(git);
        before.knew(git, &now) || rebuilt.iter().any(|(p, id)| p == git && *id == now)
    };
    let mut clean = true;
    let mut new = Vec::new();
    for git in after.git_entries.iter().filter(|g| !known(g)) {
        new.push(git.clone());
        if !check_new_entry(git, &after.git_entries, warn) {
            clean = false;
        }
    }
    // Then repositories the walk skips (inside `node_modules`, `target`,
    // ...) that an index the run changed names as gitlinks: the user's
    // `git status` enters them all the same. (After the new repositories
    // that had to go are gone: git is not run in those.)
    for index_of in indexes_changed(before, &after.git_entries) {
        let linked = match gitlinks(&index_of) {
            Ok(linked) => linked,
            Err(why) => {
                warn(&format!(
                    "the repositories the index of {} names cannot be checked ({why}): review them before using git there",
                    index_of.display()
                ));
                clean = false;
                continue;
            }
        };
        for git in linked.iter().map(|l| l.join(".git")) {
            let checked = after.git_entries.contains(&git);
            if !checked
                && !known(&git)
                && std::fs::symlink_metadata(&git).is_ok()
                && !check_new_entry(&git, &after.git_entries, warn)
            {
                clean = false;
            }
        }
    }
    if !check_new_modules(before, &after.git_entries, &new, warn) {
        clean = false;
    }
    check_new_bare_and_unreadable(before, after, warn) && clean
}

/// A bare repository the command made (git runs its hooks for whoever
/// pushes there, its config for whoever runs git inside), and a directory
/// made unreadable during the run (a repository could sit in it, reachable
/// by a path git knows: a gitlink). False when something is left to review.
fn check_new_bare_and_unreadable(
    before: &Repositories,
    after: &crate::envscan::Found,
    warn: &dyn Fn(&str),
) -> bool {
    let mut clean = true;
    // Not one sbx has just moved aside: `NAME.sbx-blocked` is its own
    // quarantine, said as such.
    let quarantined = |p: &Path| {
        p.file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with(".sbx-blocked"))
    };
    for bare in after
        .bare
        .iter()
        .filter(|b| !before.bare.contains(b) && !quarantined(b))
    {
        if inspect_new_git(bare, warn) && !quarantine_git_dir(bare, warn) {
            clean = false;
        }
    }
    for dir in after
        .unreadable
        .iter()
        .filter(|d| !before.unreadable.contains(d))
    {
        warn(&format!(
            "{} cannot be searched for git repositories (the command made it unreadable): review it, and its repositories, before using git there",
            dir.display()
        ));
        clean = false;
    }
    clean
}

/// Move aside what makes `dir` a git directory, and what would make it
/// one again with the command's settings: `HEAD`, `commondir`, `config`,
/// `hooks` (each to `NAME.sbx-blocked`). Not the directory itself: it may
/// be one of the user's own (`src/`) that the command turned into a
/// repository. False when one could not be moved away.
fn quarantine_git_dir(dir: &Path, warn: &dyn Fn(&str)) -> bool {
    let mut clean = true;
    for name in ["HEAD", "commondir", "config", "hooks"] {
        let path = dir.join(name);
        if std::fs::symlink_metadata(&path).is_ok() && !sweep(&path, None, warn) {
            clean = false;
        }
    }
    clean
}

/// One new `.git` entry: a directory is moved aside when risky, a file or
/// link unless git itself wrote it. False when it could not be moved away.
fn check_new_entry(git: &Path, gits: &[PathBuf], warn: &dyn Fn(&str)) -> bool {
    let is_dir = std::fs::symlink_metadata(git).is_ok_and(|m| m.is_dir());
    let risky = if is_dir {
        inspect_new_git(git, warn)
    } else {
        !made_by_git(git, gits)
    };
    !risky || sweep(git, None, warn)
}

/// Submodule git directories the command added (`.git/modules/NAME`, which
/// the walk does not enter): a `core.worktree` there points git at any
/// directory when the user next checks that submodule out. Those of a
/// `.git` that is `new` (made, or put in the place of another, during the
/// run) are all new.
fn check_new_modules(
    before: &Repositories,
    gits: &[PathBuf],
    new: &[PathBuf],
    warn: &dyn Fn(&str),
) -> bool {
    let mut clean = true;
    for module in crate::policy::module_dirs(gits)
        .iter()
        .filter(|m| !before.modules.contains(m) || new.iter().any(|g| m.starts_with(g)))
    {
        // The working tree of the repository whose `.git` holds it.
        let tree = module
            .ancestors()
            .find(|a| a.file_name().is_some_and(|n| n == ".git"))
            .and_then(Path::parent);
        let risky = match tree {
            Some(tree) => inspect_new_module(module, tree, warn),
            None => inspect_new_git(module, warn),
        };
        if risky && !sweep(module, None, warn) {
            clean = false;
        }
    }
    clean
}

/// The `.git` directories (there now) whose index the run changed or made.
fn indexes_changed(before: &Repositories, now: &[PathBuf]) -> Vec<PathBuf> {
    Repositories::git_dirs(now)
        .filter(|git| {
            let then = before.indexes.iter().find(|s| s.git == **git);
            then.is_none_or(|s| Identity::of(&git.join("index")) != s.identity)
        })
        .cloned()
        .collect()
}

/// The working-tree paths of the gitlinks (submodules, nested repositories
/// added with `git add`) that the index of the repository `git` names, read
/// by the trusted git with no configuration but the repository's own
/// (`ls-files` runs no hook and no fsmonitor).
fn gitlinks(git: &Path) -> Result<Vec<PathBuf>, &'static str> {
    let Some(tree) = git.parent() else {
        return Ok(Vec::new());
    };
    if !std::fs::symlink_metadata(git).is_ok_and(|m| m.is_dir()) {
        return Ok(Vec::new());
    }
    // git reads the config and the index: only regular files (a FIFO would
    // hold git, and sbx, for good); and it gets a few seconds at most.
    for name in ["config", "index"] {
        match std::fs::symlink_metadata(git.join(name)) {
            Ok(m) if !m.is_file() => return Err("its config or index is not a regular file"),
            // No index, no gitlinks (and maybe not a repository at all).
            Err(_) if name == "index" => return Ok(Vec::new()),
            _ => {}
        }
    }
    let mut child = std::process::Command::new(super::gitconfig::TRUSTED_GIT)
        .arg("--git-dir")
        .arg(git)
        .arg("--work-tree")
        .arg(tree)
        .args(["ls-files", "--stage", "-z"])
        .env_clear()
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", "/nonexistent")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|_| "git cannot be run")?;
    let stdout = child.stdout.take().ok_or("git cannot be run")?;
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = std::io::Read::read_to_end(&mut { stdout }, &mut bytes);
        bytes
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => break,
            Ok(Some(_)) | Err(_) => return Err("git cannot read the index"),
            Ok(None) if std::time::Instant::now() > deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err("git did not finish reading the index");
            }
            Ok(None) => std::thread::sleep(std::time::Duration::from_millis(5)),
        }
    }
    let out = reader.join().map_err(|_| "git's output cannot be read")?;
    Ok(out
        .split(|&b| b == 0)
        .filter_map(|item| {
            let (meta, path) = item.split_at(item.iter().position(|&b| b == b'\t')?);
            meta.starts_with(b"160000 ").then(|| {
                use std::os::unix::ffi::OsStrExt;
                tree.join(std::ffi::OsStr::from_bytes(&path[1..]))
            })
        })
        .collect())
}

/// Give read and search permission back, for the time of the check, on the
/// user's directories the command made unreadable during the run (`chmod
/// 111`), which the walk could not search for repositories. Their modes as
/// they were, to be restored.
fn reopen(unreadable: &[PathBuf], before: &[PathBuf]) -> Vec<(PathBuf, u32)> {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let me = nix::unistd::geteuid().as_raw();
    let mut reopened = Vec::new();
    for dir in unreadable.iter().filter(|d| !before.contains(d)) {
        let Ok(meta) = std::fs::symlink_metadata(dir) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != me {
            continue;
        }
        let mode = meta.permissions().mode();
        if std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o500)).is_ok() {
            reopened.push((dir.clone(), mode));
        }
    }
    reopened
}

/// Put back the modes [`reopen`] changed.
fn restore(reopened: &[(PathBuf, u32)]) {
    use std::os::unix::fs::PermissionsExt;
    for (dir, mode) in reopened.iter().rev() {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(*mode));
    }
}

/// Whether a new `.git` file is one git itself writes for a linked worktree
/// (`git worktree add`) or a submodule checkout under the project: `gitdir:`
/// naming `worktrees/NAME` of a repository's git directory found by the walk
/// (whose `commondir` leads back there, whose `gitdir` names this file, and
/// with no config or hooks of its own), or a directory under its `modules`
/// (checked as a new submodule git directory, then). Anything else sends
/// git to a repository the command prepared, and is moved aside.
fn made_by_git(dot_git: &Path, gits: &[PathBuf]) -> bool {
    let small = |p: &Path| {
        super::identity::read_regular_file(p, 4096)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).trim().to_string())
    };
    // A file git wrote, not a link to one; read as git reads it: a name
    // sbx read otherwise (trimmed, say) would be checked while git went
    // elsewhere.
    if !std::fs::symlink_metadata(dot_git).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let Some(named) = super::identity::gitdir_named(dot_git) else {
        return false;
    };
    let Ok(target) = std::fs::canonicalize(named) else {
        return false;
    };
    let Ok(me) = std::fs::canonicalize(dot_git) else {
        return false;
    };
    for git in gits {
        let Ok(git) = std::fs::canonicalize(git) else {
            continue;
        };
        let Ok(rest) = target.strip_prefix(&git) else {
            continue;
        };
        let mut parts = rest.components().map(|c| c.as_os_str());
        match (parts.next(), parts.next(), parts.next()) {
            (Some(m), Some(_), _) if m == "modules" => return true,
            (Some(w), Some(_), None) if w == "worktrees" => {
                let back =
                    small(&target.join("gitdir")).and_then(|g| std::fs::canonicalize(g).ok());
                let common = super::identity::common_dir_named(&target)
                    .and_then(|c| std::fs::canonicalize(c).ok());
                let own_settings = ["config.worktree", "config", "hooks"]
                    .iter()
                    .any(|n| std::fs::symlink_metadata(target.join(n)).is_ok());
                return back.as_ref() == Some(&me)
                    && common.as_ref() == Some(&git)
                    && !own_settings;
            }
            _ => {}
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrity::gitconfig::TRUSTED_GIT;
    use crate::integrity::test_support::repositories_of as record;
    use std::cell::RefCell;

    const BASE: &str = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n";

    fn check(before: &Repositories, rebuilt: &[(PathBuf, EntryId)]) -> (bool, Vec<String>) {
        let said = RefCell::new(Vec::new());
        let clean =
            check_new_repositories(before, None, rebuilt, &|t| said.borrow_mut().push(t.into()));
        (clean, said.take())
    }

    /// A git directory with the user's own hook and settings (which a new
    /// repository would not have).
    fn git_dir(git: &Path) {
        std::fs::create_dir_all(git.join("hooks")).unwrap();
        std::fs::create_dir_all(git.join("objects")).unwrap();
        std::fs::create_dir_all(git.join("refs/heads")).unwrap();
        std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\nmake lint\n").unwrap();
        std::fs::write(
            git.join("config"),
            format!("{BASE}[core]\n\tfsmonitor = my-own-monitor\n"),
        )
        .unwrap();
    }

    /// The user's repository, its hooks and settings, is known, even once
    /// git has written in it (the directory's change time moves).
    #[test]
    fn the_repository_from_before_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        git_dir(&root.join(".git"));
        git_dir(&root.join("sub/.git"));
        let before = record(&root);
        assert_eq!(before.git_entries.len(), 2);
        std::fs::write(root.join(".git/ORIG_HEAD.lock"), "x").unwrap();
        std::fs::rename(
            root.join(".git/ORIG_HEAD.lock"),
            root.join(".git/ORIG_HEAD"),
        )
        .unwrap();
        assert_eq!(check(&before, &[]), (true, vec![]));
        assert!(root.join(".git/hooks/pre-commit").exists());
        assert!(root.join("sub/.git/hooks/pre-commit").exists());
    }

    /// The finding: the project's `.git` renamed away and a file sending
    /// git to a repository prepared elsewhere put at its path.
    #[test]
    fn a_gitfile_in_place_of_the_repository_is_moved_aside() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        git_dir(&root.join(".git"));
        let before = record(&root);
        let evil = tmp.path().join("evilgit");
        git_dir(&evil);
        std::fs::rename(root.join(".git"), root.join(".git-away")).unwrap();
        std::fs::write(root.join(".git"), format!("gitdir: {}\n", evil.display())).unwrap();
        let (clean, said) = check(&before, &[]);
        assert!(clean, "{said:?}");
        assert!(std::fs::symlink_metadata(root.join(".git")).is_err());
        let blocked = root.join(".git.sbx-blocked");
        assert!(std::fs::read_to_string(&blocked)
            .unwrap()
            .starts_with("gitdir:"));
        assert!(
            said.iter()
                .any(|t| t.contains(&blocked.display().to_string())),
            "{said:?}"
        );
        // A link in its place goes the same way, and a nested one's too.
        git_dir(&root.join("sub/.git"));
        let before = record(&root);
        std::fs::rename(root.join("sub/.git"), root.join("sub/away")).unwrap();
        std::os::unix::fs::symlink(&evil, root.join("sub/.git")).unwrap();
        let (clean, said) = check(&before, &[]);
        assert!(clean, "{said:?}");
        assert!(std::fs::symlink_metadata(root.join("sub/.git.sbx-blocked"))
            .unwrap()
            .is_symlink());
        assert!(std::fs::symlink_metadata(root.join("sub/.git")).is_err());
    }

    /// A directory in place of the repository is looked at as a new
    /// repository: with hooks it goes, a plain one stays.
    #[test]
    fn a_directory_in_place_of_the_repository_is_inspected_as_new() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        git_dir(&root.join(".git"));
        let before = record(&root);
        std::fs::rename(root.join(".git"), tmp.path().join("away")).unwrap();
        git_dir(&root.join(".git"));
        let (clean, said) = check(&before, &[]);
        assert!(clean, "{said:?}");
        assert!(root.join(".git.sbx-blocked/hooks/pre-commit").exists());
        assert!(std::fs::symlink_metadata(root.join(".git")).is_err());
        // Deleted and made again (its inode number may be given again).
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        git_dir(&root.join(".git"));
        let before = record(&root);
        std::fs::remove_dir_all(root.join(".git")).unwrap();
        git_dir(&root.join(".git"));
        let (clean, said) = check(&before, &[]);
        assert!(clean, "{said:?}");
        assert!(root.join(".git.sbx-blocked").is_dir());
        // A plain one (what `git init` writes) stays.
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        git_dir(&root.join(".git"));
        let before = record(&root);
        std::fs::rename(root.join(".git"), tmp.path().join("away")).unwrap();
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/config"), BASE).unwrap();
        assert_eq!(check(&before, &[]), (true, vec![]));
        assert!(root.join(".git").is_dir());
    }

    /// A `.git` sbx made again itself (see `snapshot`) is not the
    /// command's: it holds the user's hooks and settings, put back.
    #[test]
    fn a_directory_sbx_made_again_is_not_new() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        git_dir(&root.join(".git"));
        let before = record(&root);
        std::fs::rename(root.join(".git"), tmp.path().join("away")).unwrap();
        git_dir(&root.join(".git"));
        let rebuilt = [(root.join(".git"), EntryId::of(&root.join(".git")))];
        assert_eq!(check(&before, &rebuilt), (true, vec![]));
        assert!(root.join(".git/hooks/pre-commit").exists());
    }

    /// A note of an older sbx, without the entries' identities: it is read,
    /// and its entries are known by their path.
    #[test]
    fn an_older_notes_entries_are_known_by_their_path() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        git_dir(&root.join(".git"));
        std::fs::write(root.join(".git/index"), "").unwrap();
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/.git"), "gitdir: ../.git/modules/sub\n").unwrap();
        let mut json = serde_json::to_value(record(&root)).unwrap();
        let indexes = json["indexes"].as_array_mut().unwrap();
        // Only directories, without `entry`.
        indexes.retain(|s| s["identity"].is_object());
        indexes[0].as_object_mut().unwrap().remove("entry");
        let old: Repositories = serde_json::from_value(json).unwrap();
        assert_eq!(old.indexes.len(), 1);
        assert!(old.indexes[0].entry.is_none());
        for git in [root.join(".git"), root.join("sub/.git")] {
            assert!(old.knew(&git, &EntryId::of(&git)));
        }
        // Round trip of the new one.
        let new = record(&root);
        let back: Repositories =
            serde_json::from_str(&serde_json::to_string(&new).unwrap()).unwrap();
        assert_eq!(back, new);
        assert!(back.indexes.iter().all(|s| s.entry.is_some()));
    }

    /// A submodule git directory in a `.git` put in place of the user's
    /// is new, though one was at its path before.
    #[test]
    fn a_module_of_a_replaced_repository_is_new() {
        if !Path::new(TRUSTED_GIT).is_file() {
            eprintln!("skipped: {TRUSTED_GIT} is not installed");
            return;
        }
        let git = |args: &[&str]| {
            let ok = std::process::Command::new(TRUSTED_GIT)
                .args(args)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .env("GIT_CONFIG_GLOBAL", "/dev/null")
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap()
                .success();
            assert!(ok, "{args:?}");
        };
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("p");
        let init = |dot_git: &Path| {
            std::fs::create_dir_all(dot_git.parent().unwrap()).unwrap();
            git(&["init", "-q", "--bare", dot_git.to_str().unwrap()]);
            git(&[
                "init",
                "-q",
                "--bare",
                dot_git.join("modules/sub").to_str().unwrap(),
            ]);
            let _ = std::fs::remove_dir_all(dot_git.join("hooks"));
            let _ = std::fs::remove_dir_all(dot_git.join("modules/sub/hooks"));
        };
        init(&root.join(".git"));
        let before = record(&root);
        assert_eq!(before.modules, vec![root.join(".git/modules/sub")]);
        std::fs::rename(root.join(".git"), tmp.path().join("away")).unwrap();
        init(&root.join(".git"));
        let module_config = root.join(".git/modules/sub/config");
        let elsewhere = tmp.path().join("elsewhere");
        git(&[
            "config",
            "--file",
            module_config.to_str().unwrap(),
            "core.worktree",
            elsewhere.to_str().unwrap(),
        ]);
        let (clean, said) = check(&before, &[]);
        assert!(clean, "{said:?}");
        assert!(
            root.join(".git/modules/sub.sbx-blocked").is_dir(),
            "{said:?}"
        );
    }
}
