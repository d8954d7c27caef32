//! What a run checks on the host after its command, and what it writes
//! down before, so that the checks are made even when this sbx never gets
//! to make them.
//!
//! Some "runs later" paths (`.envrc`, `.vscode`, `.git/hooks`, ...) cannot
//! be kept read-only by a mount alone: a missing one cannot be mounted, so
//! the command could create it, and an existing one loses its read-only
//! mount when something outside removes or renames it meanwhile. These
//! checks follow a bubblewrap run only: Seatbelt's rules follow the path,
//! whatever is there, so on macOS nothing is left to check.
//!
//! # Before the command starts ([`Checks::record`])
//!
//! - **Identities**: every protected path with its
//!   [`crate::policy::Identity`] when the policy was resolved (none when it
//!   was missing), as the policy found it.
//! - **The watch list**: those paths, less the ones sbx creates itself before
//!   the run and the files inside `.git` that exist (git on the host replaces
//!   those itself; see [`watch_list`]). Besides, a project without `.git` in
//!   a writable root has its `.git` looked at after the run (`git init`
//!   inside the sandbox).
//! - **Git config snapshots**: each git config file mounted read-only, with
//!   its identity and content ([`crate::policy::GitConfigWatch`]).
//! - **The note** ([`journal`]): the watch list and the snapshots, in a file
//!   of `CACHE/pending` named after this process. When it cannot be written
//!   the command is not run: a killed sbx would leave its checks undone.
//!
//! # After the command ([`Checks::verify`])
//!
//! Only when the sandbox came up: one that never started ran nothing, and
//! its note is simply dropped.
//!
//! 1. [`sweep`]: each watched path whose identity changed is renamed to
//!    `NAME.sbx-blocked[-N]` (nothing is deleted), and said.
//! 2. [`gitconfig::check_git_configs`]: each config file replaced during the
//!    run is read by git, and settings it did not have before, beyond what
//!    everyday git commands write, are reported; the file stays as it is.
//! 3. A new `.git`: a file or link there (it sends git to a repository the
//!    command prepared elsewhere) is swept like any watched path; a new
//!    repository is inspected for hooks and config keys `git init` does not
//!    write ([`gitconfig::inspect_new_git`]).
//!
//! Anything left in place for the user to review (a path that could not be
//! moved away, new git settings) makes sbx exit 125 whatever the command
//! returned. Then the note is removed.
//!
//! # A killed run
//!
//! An sbx killed between writing its note and removing it (an agent's
//! timeout sends SIGKILL) leaves the note behind. The next run, before its
//! own policy looks at the project, takes over every note whose process is
//! gone ([`journal::recover`]): it renames it first (of two runs starting at
//! once, one does the checks), sweeps each path against the identity the
//! killed run recorded and checks each git config against its snapshot, as
//! that run would have done, then removes it. When they leave something to
//! review, or a note cannot be read, that run refuses to run its own command.
//! The look at a new `.git` is not in the note: only the run whose command
//! made it takes that look.

pub mod gitconfig;
pub mod journal;
mod sweep;

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::policy::{self, GitConfigWatch, Identity, Policy};

pub use sweep::sweep;

/// What one run checks after its command, recorded before it starts.
pub struct Checks<'a> {
    watch: Vec<(PathBuf, Option<Identity>)>,
    git_configs: &'a [GitConfigWatch],
    /// The project's `.git` when it was missing in a writable root.
    new_git: Option<PathBuf>,
    /// This run's note, removed when the checks are done (dropped).
    _note: Option<journal::Pending>,
}

impl<'a> Checks<'a> {
    /// Take what the checks after the run compare against, and write it
    /// down in `cache` before the command starts, for the next run to check
    /// if this sbx dies before it can.
    pub fn record(policy: &'a Policy, cache: Option<&Path>) -> Result<Checks<'a>> {
        let watch = watch_list(policy);
        let new_git = policy.project.join(".git");
        let watch_git = policy.writable.iter().any(|w| new_git.starts_with(w))
            && std::fs::symlink_metadata(&new_git).is_err();
        let note = match cache {
            Some(c) => Some(
                journal::write(c, &watch, &policy.git_configs)
                    .context("the run's note for the checks after it cannot be written, so the command was not run")?,
            ),
            None => None,
        };
        Ok(Checks {
            watch,
            git_configs: &policy.git_configs,
            new_git: watch_git.then_some(new_git),
            _note: note,
        })
    }

    /// Make the checks once the command has run, then drop the note. False
    /// when something is left in place for the user to review.
    ///
    /// Any "runs later" path in the watch list (paths that did not exist, so
    /// could not be mounted read-only) that the command created is renamed to
    /// `NAME.sbx-blocked[-N]`: nothing is deleted, and each one is reported.
    pub fn verify(self, warn: &dyn Fn(&str)) -> bool {
        let mut clean = true;
        for (path, before) in &self.watch {
            if !sweep(path, before.as_ref(), warn) {
                // Left in place, it would run later outside the sandbox: sbx
                // fails so that the caller notices, whatever the command did.
                clean = false;
            }
        }
        if !gitconfig::check_git_configs(self.git_configs, warn) {
            clean = false;
        }
        if let Some(new_git) = &self.new_git {
            let created = std::fs::symlink_metadata(new_git).ok();
            if created.as_ref().is_some_and(|m| !m.is_dir()) {
                // A `.git` file or link sends git to a repository the
                // command prepared elsewhere: moved aside like any
                // "runs later" path.
                if !sweep(new_git, None, warn) {
                    clean = false;
                }
            } else {
                gitconfig::inspect_new_git(new_git, warn);
            }
        }
        clean
    }
}

/// Every protected path with its identity before the run: missing ones
/// could be created by this command, and existing ones replaced by it if
/// something outside removes or renames them meanwhile (another run's
/// sweep, say: the read-only mount on them is then detached). Files
/// inside .git that exist are left out: git itself replaces them (a lock
/// file renamed over .git/config) when the user runs it meanwhile, so a
/// replaced one is the user's; the config files among them are checked
/// for new settings instead (`policy.git_configs`).
fn watch_list(policy: &Policy) -> Vec<(PathBuf, Option<Identity>)> {
    let mut watch: Vec<(PathBuf, Option<Identity>)> = policy
        .protected
        .iter()
        .filter(|p| {
            // A symlink is never mounted (kind Missing) but has an identity:
            // watched wherever it is.
            !p.create
                && (p.identity.is_none()
                    || p.kind != policy::Kind::File
                    || !p.path.components().any(|c| c.as_os_str() == ".git"))
        })
        .map(|p| (p.path.clone(), p.identity.clone()))
        .collect();
    watch.sort();
    watch
}
