//! The checks of one run: recorded before its command, verified after it
//! (see the module above for the story).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::identity::{GitConfigWatch, Identity, Repositories};
use super::repositories::check_new_repositories;
use super::{gitconfig, journal, sweep};
use crate::policy::{self, Policy};

/// What one run checks after its command, recorded before it starts.
pub struct Checks<'a> {
    watch: Vec<(PathBuf, Option<Identity>)>,
    git_configs: &'a [GitConfigWatch],
    /// The repositories under the project before the run, when they are in
    /// a writable root (a new one there was made by the command), and those
    /// of the other writable roots.
    repositories: Vec<&'a Repositories>,
    /// sbx's cache directory (the walk's cache).
    cache: Option<PathBuf>,
    /// The run's private git config copies, applied after it, and the
    /// configs they are copies of (in the order of the plan).
    copies: Option<(PathBuf, Vec<&'a GitConfigWatch>)>,
    /// This run's note, removed when the checks are done (dropped).
    _note: Option<journal::Pending>,
}

impl<'a> Checks<'a> {
    /// Take what the checks after the run compare against, and write it
    /// down in `cache` before the command starts, for the next run to check
    /// if this sbx dies before it can. With `copies`, the private git config
    /// copies are made there (after the note, so that a killed run's copies
    /// are always found and removed).
    pub fn record(
        policy: &'a Policy,
        cache: Option<&Path>,
        copies: Option<&Path>,
    ) -> Result<Checks<'a>> {
        let watch = watch_list(policy);
        let repositories: Vec<&Repositories> = policy
            .repositories
            .iter()
            .filter(|r| {
                policy
                    .writable
                    .iter()
                    .any(|w| r.scan_root.starts_with(w) || w.starts_with(&r.scan_root))
            })
            .chain(&policy.other_repositories)
            .collect();
        let note = match cache {
            Some(c) => Some(
                journal::write(c, &watch, &policy.git_configs, &repositories)
                    .context("the run's note for the checks after it cannot be written, so the command was not run")?,
            ),
            None => None,
        };
        let copies = copies.map(|dir| {
            (
                dir.to_path_buf(),
                crate::backend::bwrap::private_configs(policy),
            )
        });
        if let Some((dir, configs)) = &copies {
            super::copies::prepare(dir, configs).context(
                "the private git config copies cannot be made, so the command was not run",
            )?;
        }
        Ok(Checks {
            watch,
            git_configs: &policy.git_configs,
            repositories,
            cache: cache.map(Path::to_path_buf),
            copies,
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
        if let Some((dir, configs)) = &self.copies {
            if !super::copies::apply(dir, configs, warn) {
                clean = false;
            }
        }
        for repositories in &self.repositories {
            if !check_new_repositories(repositories, self.cache.as_deref(), warn) {
                clean = false;
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
