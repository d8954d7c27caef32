//! Repositories the command made: a `.git` under the project that was not
//! there before the run. git on the host enters it later (the user's `git
//! status` recurses into a nested repository that is in the index, and
//! editors run git in every repository they find), so what its `.git`
//! holds runs outside the sandbox.

use std::path::{Path, PathBuf};

use super::gitconfig::{inspect_new_git, inspect_new_module};
use super::identity::{Identity, Repositories};
use super::sweep;

/// Walk the project again (from the `.env` scan's cache: one `lstat` per
/// directory that did not change) and check each `.git` entry that is new:
/// a file or link (it sends git to a repository prepared elsewhere) is moved
/// aside; a directory is moved aside when it holds hooks or config beyond
/// what `git init` writes (a plain new repository runs nothing and stays).
/// False when one could not be moved away.
pub fn check_new_repositories(
    before: &Repositories,
    cache: Option<&Path>,
    warn: &dyn Fn(&str),
) -> bool {
    let mut after = crate::envscan::walk(&before.scan_root, cache);
    let reopened = reopen(&after.unreadable, &before.unreadable);
    if !reopened.is_empty() {
        after = crate::envscan::walk(&before.scan_root, cache);
    }
    let clean = check_after_walk(before, &after, warn);
    // The modes go back as the command left them: what it hid stays hidden
    // from the next walk, which masks such a directory whole.
    restore(&reopened);
    clean
}

/// The checks once the project has been walked again.
fn check_after_walk(
    before: &Repositories,
    after: &crate::envscan::Found,
    warn: &dyn Fn(&str),
) -> bool {
    let mut clean = true;
    for git in after
        .git_entries
        .iter()
        .filter(|g| !before.git_entries.contains(g))
    {
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
            let known = before.git_entries.contains(&git) || after.git_entries.contains(&git);
            if !known
                && std::fs::symlink_metadata(&git).is_ok()
                && !check_new_entry(&git, &after.git_entries, warn)
            {
                clean = false;
            }
        }
    }
    if !check_new_modules(before, &after.git_entries, warn) {
        clean = false;
    }
    // A bare repository the command made: git runs its hooks for whoever
    // pushes there, its config for whoever runs git inside.
    // (Not one sbx has just moved aside: `NAME.sbx-blocked` is its own
    // quarantine, said as such.)
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
    // A directory made unreadable during the run cannot be searched: a
    // repository could sit in it, reachable by a path git knows (a gitlink).
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
/// directory when the user next checks that submodule out.
fn check_new_modules(before: &Repositories, gits: &[PathBuf], warn: &dyn Fn(&str)) -> bool {
    let mut clean = true;
    for module in crate::policy::module_dirs(gits)
        .iter()
        .filter(|m| !before.modules.contains(m))
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
    let (Some(text), Some(dir)) = (small(dot_git), dot_git.parent()) else {
        return false;
    };
    let Some(named) = text.strip_prefix("gitdir:").map(str::trim) else {
        return false;
    };
    let Ok(target) = std::fs::canonicalize(dir.join(named)) else {
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
                let common = small(&target.join("commondir"))
                    .and_then(|c| std::fs::canonicalize(target.join(c)).ok());
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
