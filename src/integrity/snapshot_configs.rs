//! Git configs in an after-the-fact run (see [`super::snapshot`]): the
//! command could write a repository's config, so after it each config
//! whose content changed gets its content from before the run back, and
//! what the command changed goes through the same sorting as a private
//! copy's ([`super::copies::apply`]): everyday settings (`git remote add`,
//! `git config user.email`) are applied by git, anything else is refused
//! and named. One of a killed run is never applied: its content from
//! before is put back and the changed one kept beside it for review.
//!
//! Putting a config back never leaves the path without one: the content
//! from before is written beside it and renamed over it, only while what
//! is there is still the file whose content was read.

use std::ffi::{OsStr, OsString};
use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::aside::{self, RealDir};
use super::identity::{read_regular_file, GitConfigWatch, Identity};

/// A config file larger than this is not one git wrote for a user.
pub(super) const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// What is at a config's path after the run.
enum Now {
    Unchanged,
    Gone,
    /// Content other than before (or a file with other names, which
    /// could change it later): the content, and the identity of the file
    /// it was read from.
    Changed(Vec<u8>, Option<Identity>),
    /// Not a config file any more (a link, a directory, too large, ...).
    Odd(&'static str),
}

/// What is at `entry` now, against the content `before`.
fn look(entry: &Path, before: &[u8]) -> Now {
    let identity = Identity::of(entry);
    let links = std::fs::symlink_metadata(entry).map_or(1, |m| m.nlink());
    let now = match read_regular_file(entry, MAX_CONFIG_BYTES) {
        Ok(None) => return Now::Gone,
        Ok(Some(now)) => now,
        Err(why) => return Now::Odd(why),
    };
    if Identity::of(entry) != identity {
        return Now::Odd("it kept changing");
    }
    if now == before && links == 1 {
        Now::Unchanged
    } else {
        Now::Changed(now, identity)
    }
}

/// After a run: put back each config the command changed and apply the
/// everyday settings of its version (in `copies`, a directory of sbx's
/// own, removed after). False when something was refused or could not be
/// done.
pub fn settle(configs: &[GitConfigWatch], copies: &Path, warn: &dyn Fn(&str)) -> bool {
    let mut clean = true;
    for c in configs {
        if !settle_one(c, copies, warn) {
            clean = false;
        }
    }
    clean
}

fn settle_one(c: &GitConfigWatch, copies: &Path, warn: &dyn Fn(&str)) -> bool {
    settle_with(c, warn, |dir, name, after, identity| {
        if !replace(dir, name, c, identity, warn) {
            name_refused(c, &after, warn);
            return false;
        }
        if apply(c, &after, copies, warn) {
            return true;
        }
        // Refused: what the command wrote (and any change made on the
        // host meanwhile) is kept for the user to look at.
        match keep(dir, name, &after) {
            Ok(to) => warn(&format!(
                "{}: the version the command left is kept at {} for review",
                c.path.display(),
                to.display()
            )),
            Err(e) => warn(&format!(
                "{}: the version the command left could not be kept ({e})",
                c.path.display()
            )),
        }
        false
    })
}

/// What both settlings do alike: nothing for an unchanged config; the one
/// from before put back for a missing one; an odd one (a link, a FIFO)
/// replaced. A changed one, in its real directory, is `changed`'s: with
/// the content the command left and the identity it has now.
fn settle_with(
    c: &GitConfigWatch,
    warn: &dyn Fn(&str),
    changed: impl FnOnce(&RealDir, &OsStr, Vec<u8>, Option<&Identity>) -> bool,
) -> bool {
    if matches!(look(&c.path, &c.before), Now::Unchanged) {
        return true;
    }
    let Some((dir, name)) = open_parent(c, warn) else {
        return false;
    };
    match look(&dir.entry(name), &c.before) {
        Now::Unchanged => true,
        Now::Gone => put_before(&dir, name, c, warn),
        Now::Odd(why) => replace_odd(&dir, name, c, why, warn),
        Now::Changed(after, identity) => changed(&dir, name, after, identity.as_ref()),
    }
}

/// After a killed run: put back each config its command changed, keeping
/// the changed one beside it as `config.sbx-blocked[-N]`, never applied.
/// False when one could not be put back.
pub fn settle_killed(configs: &[GitConfigWatch], warn: &dyn Fn(&str)) -> bool {
    let mut clean = true;
    for c in configs {
        if !settle_killed_one(c, warn) {
            clean = false;
        }
    }
    clean
}

fn settle_killed_one(c: &GitConfigWatch, warn: &dyn Fn(&str)) -> bool {
    settle_with(c, warn, |dir, name, after, identity| {
        // Kept first: if this sbx dies too, nothing is lost.
        let to = match keep(dir, name, &after) {
            Ok(to) => to,
            Err(e) => {
                warn(&format!(
                    "the command of the earlier run changed {}, and the changed version could not be kept aside ({e}), so sbx did not touch it: review it before using git there",
                    c.path.display()
                ));
                return false;
            }
        };
        if !replace(dir, name, c, identity, warn) {
            return false;
        }
        warn(&format!(
            "the command of the earlier run changed {}; the one from before the run was put back, and the command's version, never applied, was moved to {} (review it, and make the changes you want yourself)",
            c.path.display(),
            to.display()
        ));
        true
    })
}

/// A changed config left for review (it changed again before it could be
/// put back): name what in it, against the content from before, git
/// would not be let apply, so the review knows where to look.
fn name_refused(c: &GitConfigWatch, after: &[u8], warn: &dyn Fn(&str)) {
    let refused = super::copies::refused_between(&c.before, after);
    if let Some(refused) = refused.filter(|r| !r.is_empty()) {
        warn(&format!(
            "{}: it holds settings sbx would refuse: [{}]",
            c.path.display(),
            crate::banner::sanitize(&refused.join(", "))
        ));
    }
}

/// The real directory of a config, and its name there; said when it
/// changed (a link planted on the way).
fn open_parent<'c>(c: &'c GitConfigWatch, warn: &dyn Fn(&str)) -> Option<(RealDir, &'c OsStr)> {
    let dir = c.path.parent().map(RealDir::open);
    match (dir, c.path.file_name()) {
        (Some(Ok(dir)), Some(name)) => Some((dir, name)),
        _ => {
            warn(&format!(
                "{} changed during the run, but its directory changed too, so sbx did not touch it: review it before using git there",
                c.path.display()
            ));
            None
        }
    }
}

/// Write the content from before the run beside the config, under a free
/// name; that name. Its permissions are those of the file it replaces.
fn write_before(dir: &RealDir, name: &OsStr, c: &GitConfigWatch) -> io::Result<OsString> {
    let mode = std::fs::symlink_metadata(dir.entry(name))
        .ok()
        .filter(std::fs::Metadata::is_file)
        .map_or(0o644, |m| m.mode() & 0o777);
    write_new(dir, name, &c.before, mode)
}

/// Write `content` to a new file beside `name`; its name.
fn write_new(dir: &RealDir, name: &OsStr, content: &[u8], mode: u32) -> io::Result<OsString> {
    let temp = aside::free_name(dir, name);
    let path = dir.entry(&temp);
    let mut file = dir.with_write_access(|| {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .custom_flags(nix::libc::O_NOFOLLOW)
            .open(&path)
    })?;
    if let Err(e) = file.write_all(content) {
        let _ = std::fs::remove_file(&path);
        return Err(e);
    }
    Ok(temp)
}

/// Put the content from before back where nothing is now.
fn put_before(dir: &RealDir, name: &OsStr, c: &GitConfigWatch, warn: &dyn Fn(&str)) -> bool {
    let placed = write_before(dir, name, c).and_then(|temp| {
        aside::rename_new(dir, &temp, name).inspect_err(|_| {
            let _ = std::fs::remove_file(dir.entry(&temp));
        })
    });
    match placed {
        Ok(()) => {
            warn(&format!(
                "the command removed {}; the one from before the run was put back",
                c.path.display()
            ));
            true
        }
        Err(e) => {
            warn(&format!(
                "the command removed {}, and the one from before the run could not be put back ({e})",
                c.path.display()
            ));
            false
        }
    }
}

/// Put the content from before back over the changed config, if it is
/// still the file `expected` (else it changed again: left for review).
fn replace(
    dir: &RealDir,
    name: &OsStr,
    c: &GitConfigWatch,
    expected: Option<&Identity>,
    warn: &dyn Fn(&str),
) -> bool {
    let replaced = write_before(dir, name, c).and_then(|temp| {
        let swapped = if Identity::of(&dir.entry(name)).as_ref() == expected {
            aside::rename_over(dir, &temp, name)
        } else {
            Err(io::Error::other("it changed again meanwhile"))
        };
        swapped.inspect_err(|_| {
            let _ = std::fs::remove_file(dir.entry(&temp));
        })
    });
    match replaced {
        Ok(()) => true,
        Err(e) => {
            warn(&format!(
                "the command changed {}, and the one from before the run could not be put back ({e}): review it before using git there",
                c.path.display()
            ));
            false
        }
    }
}

/// What is at the config's path is not a config file: moved aside, and
/// the content from before put back.
fn replace_odd(
    dir: &RealDir,
    name: &OsStr,
    c: &GitConfigWatch,
    why: &str,
    warn: &dyn Fn(&str),
) -> bool {
    let to = match aside::set_aside(dir, name) {
        Ok(to) => to,
        Err(e) => {
            warn(&format!(
                "the command replaced {} with something git should not read ({why}), and it could not be moved away ({e}): review it before using git there",
                c.path.display()
            ));
            return false;
        }
    };
    warn(&format!(
        "the command replaced {} with something git should not read ({why}); it was moved to {}",
        c.path.display(),
        to.display()
    ));
    put_before(dir, name, c, &|_| {}) || {
        warn(&format!(
            "{}: the one from before the run could not be put back",
            c.path.display()
        ));
        false
    }
}

/// Keep `content` (a changed config) beside the config as
/// `NAME.sbx-blocked[-N]`; its path.
fn keep(dir: &RealDir, name: &OsStr, content: &[u8]) -> io::Result<PathBuf> {
    let temp = write_new(dir, name, content, 0o600)?;
    aside::set_aside_as(dir, &temp, name).inspect_err(|_| {
        let _ = std::fs::remove_file(dir.entry(&temp));
    })
}

/// Apply the everyday settings of `after` to the config (its content from
/// before is back in place), as for a private copy.
fn apply(c: &GitConfigWatch, after: &[u8], copies: &Path, warn: &dyn Fn(&str)) -> bool {
    let one = [c];
    let staged = super::copies::prepare(copies, &one)
        .and_then(|()| std::fs::write(copies.join("0"), after).map_err(anyhow::Error::from));
    if let Err(e) = staged {
        warn(&format!(
            "{}: the command's changes were not applied: they could not be staged ({e:#})",
            c.path.display()
        ));
        let _ = aside::remove_any(copies);
        return false;
    }
    let clean = super::copies::apply(copies, &one, warn);
    super::copies::remove(copies);
    clean
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::integrity::gitconfig::TRUSTED_GIT;
    use crate::integrity::test_support::git_config;
    use std::cell::RefCell;

    const BASE: &str = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n";

    fn watch(path: &Path) -> GitConfigWatch {
        GitConfigWatch {
            path: path.to_path_buf(),
            identity: Identity::of(path),
            before: std::fs::read(path).unwrap(),
        }
    }

    #[test]
    fn a_link_in_place_of_a_config_is_moved_aside() {
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("config");
        std::fs::write(&config, BASE).unwrap();
        let c = watch(&config);
        std::fs::remove_file(&config).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", &config).unwrap();
        let said = RefCell::new(Vec::new());
        let copies = tmp.path().join("copies");
        assert!(settle(&[c], &copies, &|t| said
            .borrow_mut()
            .push(t.to_string())));
        assert_eq!(std::fs::read_to_string(&config).unwrap(), BASE);
        assert!(
            std::fs::symlink_metadata(tmp.path().join("config.sbx-blocked"))
                .unwrap()
                .is_symlink()
        );
        assert!(said.borrow()[0].contains("config.sbx-blocked"));
    }

    /// A config with [`BASE`] in a fresh directory, watched; `None` (said)
    /// where git is not installed to read it.
    fn watched_config() -> Option<(tempfile::TempDir, PathBuf, GitConfigWatch)> {
        if !Path::new(TRUSTED_GIT).is_file() {
            eprintln!("skipped: {TRUSTED_GIT} is not installed");
            return None;
        }
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("config");
        std::fs::write(&config, BASE).unwrap();
        let c = watch(&config);
        Some((tmp, config, c))
    }

    #[test]
    fn a_killed_runs_config_is_put_back_and_never_applied() {
        let Some((tmp, config, c)) = watched_config() else {
            return;
        };
        git_config(&config, "user.email", "a@example.com");
        let said = RefCell::new(Vec::new());
        assert!(settle_killed(&[c], &|t| said
            .borrow_mut()
            .push(t.to_string())));
        assert_eq!(std::fs::read_to_string(&config).unwrap(), BASE);
        let kept = std::fs::read_to_string(tmp.path().join("config.sbx-blocked")).unwrap();
        assert!(kept.contains("a@example.com"));
        assert!(said.borrow()[0].contains("never applied"), "{said:?}");
    }

    #[test]
    fn a_config_left_for_review_has_its_refused_settings_named() {
        let Some((_tmp, _config, c)) = watched_config() else {
            return;
        };
        let after = format!("{BASE}[user]\n\tname = me\n[core]\n\tfsmonitor = touch X\n");
        let said = RefCell::new(Vec::new());
        name_refused(&c, after.as_bytes(), &|t| {
            said.borrow_mut().push(t.to_string())
        });
        let said = said.take();
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(said[0].contains("core.fsmonitor=touch X"), "{said:?}");
        assert!(!said[0].contains("user.name"), "{said:?}");
        // Nothing refused: nothing said.
        let everyday = format!("{BASE}[user]\n\tname = me\n");
        let quiet = RefCell::new(Vec::new());
        name_refused(&c, everyday.as_bytes(), &|t| {
            quiet.borrow_mut().push(t.to_string())
        });
        assert!(quiet.take().is_empty());
    }
}
