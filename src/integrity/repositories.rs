//! Repositories the command made: a `.git` under the project that was not
//! there before the run. git on the host enters it later (the user's `git
//! status` recurses into a nested repository that is in the index, and
//! editors run git in every repository they find), so what its `.git`
//! holds runs outside the sandbox.

use std::path::Path;

use super::gitconfig::inspect_new_git;
use super::identity::Repositories;
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
    let after = crate::envscan::walk(&before.scan_root, cache);
    let mut clean = true;
    for git in after
        .git_entries
        .iter()
        .filter(|g| !before.git_entries.contains(g))
    {
        let is_dir = std::fs::symlink_metadata(git).is_ok_and(|m| m.is_dir());
        let risky = !is_dir || inspect_new_git(git, warn);
        if risky && !sweep(git, None, warn) {
            clean = false;
        }
    }
    clean
}
