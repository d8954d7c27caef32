//! After-the-fact protection of the "runs later" paths that exist, for a
//! sandbox that cannot keep them read-only while its command runs
//! (Landlock grants whole trees: a sub-path of a writable root cannot be
//! made read-only).
//!
//! Before the command, each such path is copied to
//! `CACHE/pending/snapshot-KEY/N` and fingerprinted: its entries (itself,
//! and for a directory everything under it) with their type, permissions,
//! device and inode, size, link target and change time. The change time is
//! set by the kernel on any change and cannot be set back by the command,
//! so an edit in place (same inode, same size, same modification time)
//! shows; and the files' content is compared with the copy's as well, as
//! an older kernel's change time may not tell two changes within a few
//! milliseconds apart. The copy is fingerprinted too: the cache may lie in
//! a writable root, and a copy the command edited is never put back.
//!
//! After the command, each path whose fingerprint changed is moved aside
//! to `NAME.sbx-blocked[-N]` and its copy put back, inside its directory
//! reached without following a link ([`super::aside`]). Git configs with
//! content are not copied here but put back and their everyday changes
//! applied ([`super::snapshot_configs`]). The whole is written down in the
//! run's note, so that a killed run's paths are put back by the next run.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::aside::{self, RealDir};
use super::identity::{hex_path, hex_path_opt, GitConfigWatch};

/// The most entries (files, directories, links) copied for one run: more
/// would hold the command's start for long, and is not what "runs later"
/// paths hold.
pub const MAX_ENTRIES: usize = 10_000;

/// The most bytes copied for one run, for the same reason.
pub const MAX_BYTES: u64 = 64 << 20;

/// One entry of a path as it was, with what tells whether it changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    /// The entry under the path (empty: the path itself).
    #[serde(with = "hex_path")]
    rel: PathBuf,
    /// Type and permissions (`st_mode`).
    mode: u32,
    dev: u64,
    ino: u64,
    ctime: i64,
    ctime_nsec: i64,
    size: u64,
    /// Where a link points.
    #[serde(with = "hex_path_opt", default)]
    target: Option<PathBuf>,
}

impl Stamp {
    fn is_file(&self) -> bool {
        self.mode & nix::libc::S_IFMT == nix::libc::S_IFREG
    }
}

/// A path copied before the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kept {
    #[serde(with = "hex_path")]
    pub path: PathBuf,
    /// Its entries before the run.
    before: Vec<Stamp>,
    /// The entries of its copy once made (none: the copies were not all
    /// made, so the command never started).
    #[serde(default)]
    copy: Option<Vec<Stamp>>,
}

/// What an after-the-fact run keeps: the paths copied to `dir` (path N
/// at `dir/N`), and the git configs whose content is put back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Snapshot {
    #[serde(with = "hex_path")]
    pub dir: PathBuf,
    pub paths: Vec<Kept>,
    #[serde(default)]
    pub configs: Vec<GitConfigWatch>,
}

/// The snapshot directory of this run in `cache`.
pub fn dir(cache: &Path) -> Option<PathBuf> {
    let key = super::journal::process_key(std::process::id())?;
    Some(super::journal::dir(cache).join(format!("snapshot-{key}")))
}

impl Snapshot {
    /// Fingerprint `paths` (nothing is copied yet, see [`Snapshot::copy`]):
    /// an error naming the path when they go beyond the bounds, or one
    /// cannot be read.
    pub fn plan(dir: PathBuf, paths: &[PathBuf], configs: Vec<GitConfigWatch>) -> Result<Self> {
        let mut budget = Budget::new(MAX_ENTRIES, MAX_BYTES);
        let paths = paths
            .iter()
            .map(|path| {
                let before = stamps(path, &mut budget).map_err(|why| refusal(path, &why))?;
                Ok(Kept {
                    path: path.clone(),
                    before,
                    copy: None,
                })
            })
            .collect::<Result<Vec<Kept>>>()?;
        Ok(Snapshot {
            dir,
            paths,
            configs,
        })
    }

    /// Copy each path to the snapshot directory (emptied first) and
    /// fingerprint the copies. The directory is removed on an error.
    pub fn copy(&mut self) -> Result<()> {
        let made = self.copy_all();
        if made.is_err() {
            let _ = aside::remove_any(&self.dir);
        }
        made
    }

    fn copy_all(&mut self) -> Result<()> {
        // Left by an earlier process of the same key: stale.
        if std::fs::symlink_metadata(&self.dir).is_ok() {
            aside::remove_any(&self.dir)
                .with_context(|| format!("emptying {}", self.dir.display()))?;
        }
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .with_context(|| format!("creating {}", self.dir.display()))?;
        let mut bytes = MAX_BYTES;
        for (i, kept) in self.paths.iter_mut().enumerate() {
            let copy = self.dir.join(i.to_string());
            let copied = copy_tree(&kept.path, &copy, &mut bytes).and_then(|()| {
                stamps(&copy, &mut Budget::new(MAX_ENTRIES, u64::MAX)).map_err(Refused::into_io)
            });
            kept.copy = Some(copied.map_err(|e| refusal(&kept.path, &Refused::Copy(e)))?);
        }
        Ok(())
    }

    /// Whether the copies were all made: the command started only then.
    fn complete(&self) -> bool {
        self.paths.iter().all(|k| k.copy.is_some())
    }

    /// After a run: put each path the command changed back (see the
    /// module), then remove the snapshot directory, or keep it, and say
    /// so, when a path could not be put back. False then.
    pub fn restore(&self, warn: &dyn Fn(&str)) -> bool {
        if !self.complete() {
            // Nothing ran: what was copied is of no use.
            let _ = aside::remove_any(&self.dir);
            return true;
        }
        let mut clean = true;
        for (i, kept) in self.paths.iter().enumerate() {
            if !restore_one(kept, &self.dir.join(i.to_string()), warn) {
                clean = false;
            }
        }
        if clean {
            let _ = aside::remove_any(&self.dir);
        } else {
            warn(&format!(
                "sbx kept {}, which holds the copies it made before the run of the paths named above: remove it once you have reviewed them",
                self.dir.display()
            ));
        }
        clean
    }

    /// After a run: the git configs (their changes' everyday settings
    /// applied, see [`super::snapshot_configs::settle`]), then the paths.
    pub fn finish(&self, warn: &dyn Fn(&str)) -> bool {
        let configs =
            super::snapshot_configs::settle(&self.configs, &self.dir.join("configs"), warn);
        self.restore(warn) && configs
    }

    /// [`Snapshot::finish`] for a run that was killed: its configs' changes
    /// are never applied (see [`super::snapshot_configs::settle_killed`]).
    pub fn finish_killed(&self, warn: &dyn Fn(&str)) -> bool {
        let configs =
            !self.complete() || super::snapshot_configs::settle_killed(&self.configs, warn);
        self.restore(warn) && configs
    }
}

/// This run's snapshot, once recorded: its directory is removed when it is
/// dropped without [`Held::finish`] (the command never ran).
pub struct Held(Option<Snapshot>);

impl Held {
    pub fn new(snapshot: Snapshot) -> Held {
        Held(Some(snapshot))
    }

    /// See [`Snapshot::finish`].
    pub fn finish(mut self, warn: &dyn Fn(&str)) -> bool {
        self.0.take().is_none_or(|s| s.finish(warn))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(s) = &self.0 {
            let _ = aside::remove_any(&s.dir);
        }
    }
}

/// Why a path cannot be fingerprinted or copied.
#[derive(Debug)]
enum Refused {
    TooMany,
    TooLarge,
    /// A FIFO, socket or device: nothing sbx can copy.
    Special(PathBuf),
    Unreadable(PathBuf, io::Error),
    Copy(io::Error),
}

impl Refused {
    fn into_io(self) -> io::Error {
        match self {
            Refused::Unreadable(_, e) | Refused::Copy(e) => e,
            other => io::Error::other(format!("{other:?}")),
        }
    }
}

/// The error of a path that cannot be kept: the command is not run.
fn refusal(path: &Path, why: &Refused) -> anyhow::Error {
    let why = match why {
        Refused::TooMany => format!(
            "with it, the paths sbx copies come to more than {MAX_ENTRIES} files, directories and links"
        ),
        Refused::TooLarge => format!(
            "with it, the paths sbx copies come to more than {} MiB",
            MAX_BYTES >> 20
        ),
        Refused::Special(p) => format!(
            "{} is a FIFO, socket or device, which sbx cannot copy",
            p.display()
        ),
        Refused::Unreadable(p, e) => format!("{} cannot be read ({e})", p.display()),
        Refused::Copy(e) => format!("it cannot be copied ({e})"),
    };
    anyhow::anyhow!(
        "{} runs later outside the sandbox, which cannot keep it read-only during the run, so sbx copies it to put it back afterwards, but {why}; the command was not run",
        path.display()
    )
}

/// What may still be fingerprinted.
struct Budget {
    entries: usize,
    bytes: u64,
}

impl Budget {
    fn new(entries: usize, bytes: u64) -> Budget {
        Budget { entries, bytes }
    }

    fn take(&mut self, m: &std::fs::Metadata) -> Result<(), Refused> {
        self.entries = self.entries.checked_sub(1).ok_or(Refused::TooMany)?;
        if m.is_file() {
            self.bytes = self.bytes.checked_sub(m.len()).ok_or(Refused::TooLarge)?;
        }
        Ok(())
    }
}

/// The entries of `root`: itself, then for a directory what it holds, by
/// name, depth first; never following a link.
fn stamps(root: &Path, budget: &mut Budget) -> Result<Vec<Stamp>, Refused> {
    let mut out = Vec::new();
    let mut todo = vec![PathBuf::new()];
    while let Some(rel) = todo.pop() {
        let full = under(root, &rel);
        let unreadable = |e| Refused::Unreadable(full.clone(), e);
        let m = std::fs::symlink_metadata(&full).map_err(unreadable)?;
        budget.take(&m)?;
        let kind = m.file_type();
        let mut target = None;
        if kind.is_dir() {
            let mut names = names_in(&full).map_err(unreadable)?;
            names.sort();
            todo.extend(names.into_iter().rev().map(|n| rel.join(n)));
        } else if kind.is_symlink() {
            target = Some(std::fs::read_link(&full).map_err(unreadable)?);
        } else if !kind.is_file() {
            return Err(Refused::Special(full));
        }
        out.push(Stamp {
            rel,
            mode: m.mode(),
            dev: m.dev(),
            ino: m.ino(),
            ctime: m.ctime(),
            ctime_nsec: m.ctime_nsec(),
            size: m.size(),
            target,
        });
    }
    Ok(out)
}

/// Whether what is at `path` now has the entries `then`.
fn same(path: &Path, then: &[Stamp]) -> bool {
    let mut budget = Budget::new(then.len(), u64::MAX);
    stamps(path, &mut budget).is_ok_and(|now| now == then)
}

/// Whether the files among the entries `then` of `path` hold what those
/// of `copy` do.
fn same_content(path: &Path, copy: &Path, then: &[Stamp]) -> bool {
    then.iter()
        .filter(|s| s.is_file())
        .all(|s| equal_files(&under(path, &s.rel), &under(copy, &s.rel)))
}

/// Whether two regular files (not links, never waited on) hold the same
/// bytes.
fn equal_files(a: &Path, b: &Path) -> bool {
    use std::io::BufRead;
    let open = |p: &Path| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
            .open(p)
            .ok()
            .filter(|f| f.metadata().is_ok_and(|m| m.is_file()))
            .map(io::BufReader::new)
    };
    let (Some(mut a), Some(mut b)) = (open(a), open(b)) else {
        return false;
    };
    loop {
        let (Ok(x), Ok(y)) = (a.fill_buf(), b.fill_buf()) else {
            return false;
        };
        let n = x.len().min(y.len());
        if n == 0 {
            return x.is_empty() && y.is_empty();
        }
        if x.get(..n) != y.get(..n) {
            return false;
        }
        a.consume(n);
        b.consume(n);
    }
}

/// `root` joined with `rel`, without the trailing slash an empty `rel`
/// would add (a slash makes the final link followed).
fn under(root: &Path, rel: &Path) -> PathBuf {
    if rel.as_os_str().is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    }
}

fn names_in(dir: &Path) -> io::Result<Vec<OsString>> {
    std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name()))
        .collect()
}

/// Copy `src` to `dst` (which must not exist) as it is, never following a
/// link: a directory with what it holds, a file with its content,
/// permissions and times, a link as a link. At most `bytes` are copied.
fn copy_tree(src: &Path, dst: &Path, bytes: &mut u64) -> io::Result<()> {
    let m = std::fs::symlink_metadata(src)?;
    let kind = m.file_type();
    if kind.is_symlink() {
        return std::os::unix::fs::symlink(std::fs::read_link(src)?, dst);
    }
    if kind.is_file() {
        return copy_file(src, dst, &m, bytes);
    }
    if !kind.is_dir() {
        return Err(io::Error::other("not a file, a directory or a link"));
    }
    std::fs::DirBuilder::new().mode(0o700).create(dst)?;
    let mut names = names_in(src)?;
    names.sort();
    for name in names {
        copy_tree(&src.join(&name), &dst.join(&name), bytes)?;
    }
    // Last: a directory without the write bit is filled first.
    std::fs::set_permissions(dst, std::fs::Permissions::from_mode(m.mode() & 0o7777))
}

/// Copy the regular file `src` (described by `m`) to the new file `dst`.
fn copy_file(src: &Path, dst: &Path, m: &std::fs::Metadata, bytes: &mut u64) -> io::Result<()> {
    use std::io::Read;
    let from = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(src)?;
    if !from.metadata()?.is_file() {
        return Err(io::Error::other("not a regular file"));
    }
    let mut to = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(dst)?;
    let copied = io::copy(&mut (&from).take(bytes.saturating_add(1)), &mut to)?;
    *bytes = bytes
        .checked_sub(copied)
        .ok_or_else(|| io::Error::other(format!("more than {} MiB", MAX_BYTES >> 20)))?;
    to.set_permissions(std::fs::Permissions::from_mode(m.mode() & 0o7777))?;
    let times = std::fs::FileTimes::new()
        .set_accessed(m.accessed()?)
        .set_modified(m.modified()?);
    to.set_times(times)
}

/// Put back one path if the command changed it; false when it changed
/// and could not be put back.
fn restore_one(kept: &Kept, backup: &Path, warn: &dyn Fn(&str)) -> bool {
    let path = &kept.path;
    if same(path, &kept.before) && same_content(path, backup, &kept.before) {
        return true;
    }
    if !kept.copy.as_deref().is_some_and(|c| same(backup, c)) {
        warn(&format!(
            "{} runs later outside the sandbox and changed during the run, but the copy sbx made of it before the run ({}) changed too, so sbx did not touch it: review it before use",
            path.display(),
            backup.display()
        ));
        return false;
    }
    let parent = path.parent().map(RealDir::open);
    let (Some(Ok(dir)), Some(name)) = (parent, path.file_name()) else {
        warn(&format!(
            "{} runs later outside the sandbox and changed during the run, but its directory changed too, so sbx did not touch it: review it before use (the one from before the run is in {})",
            path.display(),
            backup.display()
        ));
        return false;
    };
    let moved = match std::fs::symlink_metadata(dir.entry(name)) {
        Ok(_) => match aside::set_aside(&dir, name) {
            Ok(to) => Some(to),
            Err(e) => {
                warn(&format!(
                    "the command changed {}, which runs later outside the sandbox, and it could not be moved away ({e}): review it before use (the one from before the run is in {})",
                    path.display(),
                    backup.display()
                ));
                return false;
            }
        },
        Err(_) => None,
    };
    if let Err(e) = put_back(&dir, name, backup) {
        let aside = moved.map_or(String::new(), |to| {
            format!("its version was moved to {}, ", to.display())
        });
        warn(&format!(
            "the command changed {}, which runs later outside the sandbox; {aside}but the one from before the run could not be put back ({e}): it is in {}",
            path.display(),
            backup.display()
        ));
        return false;
    }
    warn(&restored(path, moved.as_deref()));
    true
}

/// What is said of a path put back.
fn restored(path: &Path, moved: Option<&Path>) -> String {
    match moved {
        Some(to) => format!(
            "the command changed {}, which runs later outside the sandbox; its version was moved to {} and the one from before the run was put back (review {}, and use what it holds only if you trust it)",
            path.display(),
            to.display(),
            to.display()
        ),
        None => format!(
            "the command removed {}, which runs later outside the sandbox; the one from before the run was put back",
            path.display()
        ),
    }
}

/// Copy `backup` to the entry `name` of `dir` (free now): built beside it
/// under a name of its own, then renamed into place.
fn put_back(dir: &RealDir, name: &OsStr, backup: &Path) -> io::Result<()> {
    let temp = aside::free_name(dir, name);
    let staged = dir.entry(&temp);
    let made = dir.with_write_access(|| {
        let mut bytes = u64::MAX;
        copy_tree(backup, &staged, &mut bytes)
    });
    let placed = made.and_then(|()| aside::rename_new(dir, &temp, name));
    if placed.is_err() {
        let _ = aside::remove_any(&staged);
    }
    placed
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// Record `paths` under `root/cache`, as a run does before its command.
    fn take(root: &Path, paths: &[PathBuf]) -> Snapshot {
        let mut s = Snapshot::plan(root.join("cache/snapshot"), paths, Vec::new()).unwrap();
        s.copy().unwrap();
        s
    }

    fn restore(s: &Snapshot) -> (bool, Vec<String>) {
        let said = RefCell::new(Vec::new());
        let clean = s.restore(&|t| said.borrow_mut().push(t.to_string()));
        (clean, said.take())
    }

    #[test]
    fn a_directory_is_copied_whole_with_its_links_and_modes() {
        let tmp = tempfile::tempdir().unwrap();
        let hooks = tmp.path().join("hooks");
        std::fs::create_dir_all(hooks.join("sub")).unwrap();
        std::fs::write(hooks.join("sub/a"), "a").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", hooks.join("link")).unwrap();
        std::fs::set_permissions(hooks.join("sub"), std::fs::Permissions::from_mode(0o555))
            .unwrap();
        let s = take(tmp.path(), std::slice::from_ref(&hooks));
        let copy = s.dir.join("0");
        assert_eq!(std::fs::read_to_string(copy.join("sub/a")).unwrap(), "a");
        assert_eq!(
            std::fs::read_link(copy.join("link")).unwrap(),
            Path::new("/etc/passwd")
        );
        let mode = std::fs::metadata(copy.join("sub")).unwrap().mode();
        assert_eq!(mode & 0o777, 0o555);
        // A read-only directory does not keep the snapshot from going.
        assert_eq!(restore(&s), (true, vec![]));
        assert!(!s.dir.exists());
        std::fs::set_permissions(hooks.join("sub"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
    }

    #[test]
    fn beyond_the_bounds_the_run_is_refused_naming_the_path() {
        let tmp = tempfile::tempdir().unwrap();
        let big = tmp.path().join(".vscode");
        std::fs::create_dir(&big).unwrap();
        let file = std::fs::File::create(big.join("blob")).unwrap();
        file.set_len(MAX_BYTES + 1).unwrap();
        let err = Snapshot::plan(tmp.path().join("s"), std::slice::from_ref(&big), Vec::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains(&big.display().to_string()), "{err}");
        assert!(err.contains("64 MiB"), "{err}");
        let many = tmp.path().join(".idea");
        std::fs::create_dir(&many).unwrap();
        for i in 0..MAX_ENTRIES {
            std::fs::File::create(many.join(i.to_string())).unwrap();
        }
        let err = Snapshot::plan(tmp.path().join("s"), &[many], Vec::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains(".idea") && err.contains("10000"), "{err}");
        // Nothing was made.
        assert!(!tmp.path().join("s").exists());
    }

    #[test]
    fn a_fifo_cannot_be_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(".claude");
        std::fs::create_dir(&dir).unwrap();
        nix::unistd::mkfifo(&dir.join("pipe"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = Snapshot::plan(tmp.path().join("s"), &[dir], Vec::new())
            .unwrap_err()
            .to_string();
        assert!(err.contains("FIFO"), "{err}");
    }

    /// An edit in place within the same clock tick as the snapshot, of the
    /// same size: the content tells it.
    #[test]
    fn an_edit_of_the_same_size_is_seen() {
        use std::io::Write;
        let tmp = tempfile::tempdir().unwrap();
        let envrc = tmp.path().join(".envrc");
        std::fs::write(&envrc, "mine").unwrap();
        let s = take(tmp.path(), std::slice::from_ref(&envrc));
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&envrc)
            .unwrap();
        f.write_all(b"evil").unwrap();
        drop(f);
        let (clean, said) = restore(&s);
        assert!(clean, "{said:?}");
        assert_eq!(std::fs::read_to_string(&envrc).unwrap(), "mine");
        let blocked = tmp.path().join(".envrc.sbx-blocked");
        assert_eq!(std::fs::read_to_string(blocked).unwrap(), "evil");
    }

    #[test]
    fn a_copy_changed_during_the_run_is_not_put_back() {
        let tmp = tempfile::tempdir().unwrap();
        let envrc = tmp.path().join(".envrc");
        std::fs::write(&envrc, "mine").unwrap();
        let s = take(tmp.path(), std::slice::from_ref(&envrc));
        std::fs::write(s.dir.join("0"), "evil").unwrap();
        std::fs::write(&envrc, "also evil").unwrap();
        let (clean, said) = restore(&s);
        assert!(!clean);
        assert!(said[0].contains("changed too"), "{said:?}");
        assert_eq!(std::fs::read_to_string(&envrc).unwrap(), "also evil");
        // Kept for review, and said.
        assert!(s.dir.exists());
        assert!(said[1].contains(&s.dir.display().to_string()), "{said:?}");
    }

    #[test]
    fn a_link_planted_above_the_path_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let git = tmp.path().join(".git");
        let hooks = git.join("hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        let s = take(tmp.path(), std::slice::from_ref(&hooks));
        // The command moves .git away and points it elsewhere.
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("hooks")).unwrap();
        std::fs::write(elsewhere.join("hooks/pre-commit"), "evil").unwrap();
        std::fs::rename(&git, tmp.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &git).unwrap();
        let (clean, said) = restore(&s);
        assert!(!clean);
        assert!(said[0].contains("its directory changed too"), "{said:?}");
        // Nothing was written through the link.
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 1);
        assert_eq!(
            std::fs::read_dir(elsewhere.join("hooks")).unwrap().count(),
            1
        );
    }

    #[test]
    fn a_snapshot_dropped_unfinished_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let envrc = tmp.path().join(".envrc");
        std::fs::write(&envrc, "mine").unwrap();
        let s = take(tmp.path(), std::slice::from_ref(&envrc));
        let dir = s.dir.clone();
        assert!(dir.join("0").exists());
        drop(Held::new(s));
        assert!(!dir.exists());
        assert_eq!(std::fs::read_to_string(&envrc).unwrap(), "mine");
    }
}
