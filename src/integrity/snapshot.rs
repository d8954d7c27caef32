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
//!
//! A FIFO, socket or device (as a path, or inside one) is fingerprinted
//! alone, never opened (a FIFO opened for reading would hold sbx) nor
//! copied: after the run, one that changed is moved aside and nothing is
//! made in its place; a directory put back is without it; both are said.
//!
//! The directories above those paths inside a writable root (`.git` for
//! `.git/hooks`) are recorded too ([`EntryId`]): one the command replaced
//! (`.git` renamed away, and a file `gitdir: /tmp/evil` or a directory of
//! its own put there) is moved aside in turn, a new empty one made in its
//! place, and the paths put back into it; the user is told, as their
//! repository is no longer there (sbx exits 125).

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::aside::{self, RealDir};
use super::identity::{hex_path, hex_path_opt, EntryId, GitConfigWatch};

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

    /// A FIFO, socket or device: fingerprinted, never opened nor copied.
    fn is_special(&self) -> bool {
        !matches!(
            self.mode & nix::libc::S_IFMT,
            nix::libc::S_IFREG | nix::libc::S_IFDIR | nix::libc::S_IFLNK
        )
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
    /// The directories above the paths and configs inside a writable root,
    /// as they were (by path, parents first).
    #[serde(default)]
    pub parents: Vec<Parent>,
}

/// A directory above a kept path, before the run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Parent {
    #[serde(with = "hex_path")]
    path: PathBuf,
    id: EntryId,
    /// Its permissions, for one made again in its place.
    mode: u32,
}

impl Kept {
    /// Whether what is at `path` (this path, one inside it, or one that
    /// holds it) is as it was before the run: the same entries, and where
    /// the copies were all made (`copy` is this path's), the same content.
    /// A path inside it that was not there is as before only if it is
    /// still missing.
    fn as_before(&self, path: &Path, copy: &Path, complete: bool) -> bool {
        let (at, copy, then) = match path.strip_prefix(&self.path) {
            Ok(rel) => (
                path,
                under(copy, rel),
                self.before
                    .iter()
                    .filter_map(|s| {
                        let rel = s.rel.strip_prefix(rel).ok()?.to_path_buf();
                        Some(Stamp { rel, ..s.clone() })
                    })
                    .collect(),
            ),
            Err(_) => (self.path.as_path(), copy.to_path_buf(), self.before.clone()),
        };
        if then.is_empty() {
            return std::fs::symlink_metadata(at).is_err();
        }
        same(at, &then) && (!complete || same_content(at, &copy, &then))
    }
}

/// Whether one of two paths is, or holds, the other.
fn overlaps(a: &Path, b: &Path) -> bool {
    a.starts_with(b) || b.starts_with(a)
}

/// What the paths' putting back did after a run.
pub struct Settled {
    /// Nothing left for the user to review.
    pub clean: bool,
    /// The directories sbx made again in place of those the command
    /// replaced (see [`Snapshot::rebuild_parents`]), as they are now: not
    /// new repositories of the command's.
    pub rebuilt: Vec<(PathBuf, EntryId)>,
}

/// The snapshot directory of this run in `cache`.
pub fn dir(cache: &Path) -> Option<PathBuf> {
    let key = super::journal::own_key()?;
    Some(super::journal::dir(cache).join(format!("snapshot-{key}")))
}

impl Snapshot {
    /// Fingerprint `paths` (nothing is copied yet, see [`Snapshot::copy`]),
    /// and record the directories above them and `configs` inside the
    /// `writable` roots: an error naming the path when they go beyond the
    /// bounds, or one cannot be read.
    pub fn plan(
        dir: PathBuf,
        paths: &[PathBuf],
        configs: Vec<GitConfigWatch>,
        writable: &[PathBuf],
    ) -> Result<Self> {
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
        let mut parents: Vec<PathBuf> = paths
            .iter()
            .map(|k| &k.path)
            .chain(configs.iter().map(|c| &c.path))
            .flat_map(|p| p.ancestors().skip(1))
            .filter(|a| writable.iter().any(|w| a.starts_with(w) && a != w))
            .filter(|a| !paths.iter().any(|k| k.path == *a))
            .map(Path::to_path_buf)
            .collect();
        parents.sort();
        parents.dedup();
        let parents = parents
            .into_iter()
            .map(|path| {
                let mode = std::fs::symlink_metadata(&path).map_or(0o755, |m| m.mode() & 0o7777);
                Parent {
                    id: EntryId::of(&path),
                    mode,
                    path,
                }
            })
            .collect();
        Ok(Snapshot {
            dir,
            paths,
            configs,
            parents,
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
            // A FIFO, socket or device is not copied: nothing at `copy`.
            let special = kept.before.first().is_some_and(Stamp::is_special);
            let copied = copy_tree(&kept.path, &copy, &mut bytes).and_then(|()| {
                if special {
                    return Ok(Vec::new());
                }
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

    /// For a run still going (another than this one, whose note this
    /// is): whether its command may have changed what is at `path`, which
    /// is, holds or lies inside one of its kept paths that is no longer as
    /// it was, or one of the directories above them that was replaced.
    /// What is at `path` is then not to be taken for what was there before
    /// the command of the run asking (see `super::overlap`).
    pub fn touched(&self, path: &Path) -> bool {
        let complete = self.complete();
        self.paths.iter().enumerate().any(|(i, k)| {
            overlaps(&k.path, path) && !k.as_before(path, &self.dir.join(i.to_string()), complete)
        }) || self
            .parents
            .iter()
            .any(|p| overlaps(&p.path, path) && EntryId::of(&p.path) != p.id)
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

    /// After a run: the directories above the paths that the command
    /// replaced ([`Snapshot::rebuild_parents`]), the git configs (their
    /// changes' everyday settings applied, see
    /// [`super::snapshot_configs::settle`]), then the paths.
    pub fn finish(&self, warn: &dyn Fn(&str)) -> Settled {
        let (parents, rebuilt) = self.rebuild_parents(warn);
        let configs =
            super::snapshot_configs::settle(&self.configs, &self.dir.join("configs"), warn);
        let paths = self.restore(warn);
        Settled {
            clean: parents && configs && paths,
            rebuilt,
        }
    }

    /// [`Snapshot::finish`] for a run that was killed: its configs' changes
    /// are never applied (see [`super::snapshot_configs::settle_killed`]).
    pub fn finish_killed(&self, warn: &dyn Fn(&str)) -> Settled {
        let (parents, rebuilt) = self.rebuild_parents(warn);
        let configs =
            !self.complete() || super::snapshot_configs::settle_killed(&self.configs, warn);
        let paths = self.restore(warn);
        Settled {
            clean: parents && configs && paths,
            rebuilt,
        }
    }

    /// Each directory above the paths that the command replaced, removed
    /// or renamed (the topmost one where several did): what is in its
    /// place now is moved aside (never following a link), and an empty
    /// directory made there, with those below it on the way to the paths,
    /// for the paths to be put back into. Said, naming the directory that
    /// was there where it is found beside it (the command renamed it):
    /// the user's repository is no longer where it was. False when one was
    /// replaced; the directories made, as they are now.
    fn rebuild_parents(&self, warn: &dyn Fn(&str)) -> (bool, Vec<(PathBuf, EntryId)>) {
        let mut rebuilt = Vec::new();
        if !self.complete() {
            return (true, rebuilt);
        }
        let changed: Vec<&Parent> = self
            .parents
            .iter()
            .filter(|p| EntryId::of(&p.path) != p.id)
            .collect();
        let topmost = changed.iter().filter(|p| {
            !changed
                .iter()
                .any(|q| q.path != p.path && p.path.starts_with(&q.path))
        });
        let mut clean = true;
        for top in topmost {
            clean = false;
            let below: Vec<&Parent> = self
                .parents
                .iter()
                .filter(|p| p.path.starts_with(&top.path))
                .collect();
            let kept: Vec<&Path> = self
                .paths
                .iter()
                .map(|k| k.path.as_path())
                .chain(self.configs.iter().map(|c| c.path.as_path()))
                .filter(|p| p.starts_with(&top.path))
                .collect();
            let mut moved = None;
            match rebuild(top, &below, &mut moved, &mut rebuilt) {
                Ok(()) => warn(&rebuilt_message(top, &kept, moved.as_deref())),
                Err(e) => warn(&format!(
                    "the command replaced, renamed or removed {} (which holds {}, which run later outside the sandbox){}, and sbx could not make it again ({e}): review it before using git there{}",
                    top.path.display(),
                    shown(&kept),
                    moved_to(moved.as_deref()),
                    where_it_went(top),
                )),
            }
        }
        (clean, rebuilt)
    }
}

/// Make the directory `top` (which the command replaced) again, and those
/// `below` it (itself first, parents before what they hold): what is at
/// its path is moved aside first (where to, in `moved`). The directories
/// made are added to `rebuilt`.
fn rebuild(
    top: &Parent,
    below: &[&Parent],
    moved: &mut Option<PathBuf>,
    rebuilt: &mut Vec<(PathBuf, EntryId)>,
) -> io::Result<()> {
    let (Some(parent), Some(name)) = (top.path.parent(), top.path.file_name()) else {
        return Err(io::ErrorKind::InvalidInput.into());
    };
    let dir = RealDir::open(parent)?;
    if std::fs::symlink_metadata(dir.entry(name)).is_ok() {
        *moved = Some(aside::set_aside(&dir, name)?);
    }
    for p in below {
        let (Some(parent), Some(name)) = (p.path.parent(), p.path.file_name()) else {
            return Err(io::ErrorKind::InvalidInput.into());
        };
        let dir = RealDir::open(parent)?;
        let entry = dir.entry(name);
        // Owner rights whatever they were: the paths go back inside.
        let mode = (p.mode | 0o700) & 0o777;
        dir.with_write_access(|| std::fs::DirBuilder::new().mode(mode).create(&entry))?;
        rebuilt.push((p.path.clone(), EntryId::of(&entry)));
    }
    Ok(())
}

/// Where the directory `p` was before the run is now, when the command
/// renamed it within the directory that holds it.
fn found_beside(p: &Parent) -> Option<PathBuf> {
    let parent = p.path.parent()?;
    std::fs::read_dir(parent)
        .ok()?
        .take(MAX_ENTRIES)
        .flatten()
        .map(|e| e.path())
        .find(|e| EntryId::of(e) == p.id)
}

/// The paths named in a message.
fn shown(paths: &[&Path]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// What is said of what the command put in a directory's place.
fn moved_to(moved: Option<&Path>) -> String {
    match moved {
        Some(to) => format!(
            "; what it put there was moved to {} (review it, and use it only if you trust it)",
            to.display()
        ),
        None => String::new(),
    }
}

/// What is said of where the directory that was at `p` went.
fn where_it_went(p: &Parent) -> String {
    match found_beside(p) {
        Some(now) => format!(
            "; the directory that was at {} before the run is now {} (the command renamed it): if it is your repository, review its hooks and config (sbx did not protect them there) before you move it back",
            p.path.display(),
            now.display()
        ),
        None => format!(
            "; the directory that was at {} before the run was renamed or removed by the command, and sbx cannot know where it is: if it was your repository, it may now be at a different name (review its hooks and config, which sbx did not protect there, before you move it back)",
            p.path.display()
        ),
    }
}

/// What is said of a directory made again.
fn rebuilt_message(top: &Parent, kept: &[&Path], moved: Option<&Path>) -> String {
    format!(
        "the command replaced, renamed or removed {} (which holds {}, which run later outside the sandbox){}; sbx made a new {} holding only those, as they were before the run{}",
        top.path.display(),
        shown(kept),
        moved_to(moved),
        top.path.display(),
        where_it_went(top)
    )
}

/// This run's snapshot, once recorded: its directory is removed when it is
/// dropped without [`Held::finish`] (the command never ran).
pub struct Held(Option<Snapshot>);

impl Held {
    pub fn new(snapshot: Snapshot) -> Held {
        Held(Some(snapshot))
    }

    /// See [`Snapshot::finish`].
    pub fn finish(mut self, warn: &dyn Fn(&str)) -> Settled {
        match self.0.take() {
            Some(s) => s.finish(warn),
            None => Settled {
                clean: true,
                rebuilt: Vec::new(),
            },
        }
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
/// name, depth first; never following a link, and never opening a FIFO,
/// socket or device (its type, inode and change time tell it).
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
/// permissions and times, a link as a link. A FIFO, socket or device is
/// left out (never opened: a FIFO would hold sbx). At most `bytes` are
/// copied.
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
        return Ok(());
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
    if kept.before.first().is_some_and(Stamp::is_special) {
        return settle_special(kept, warn);
    }
    if !kept.copy.as_deref().is_some_and(|c| same(backup, c)) {
        // The copy cannot be trusted (the command reached sbx's cache):
        // nothing is put back, but the command's version does not stay
        // where it would run.
        let moved = path
            .parent()
            .map(RealDir::open)
            .and_then(Result::ok)
            .zip(path.file_name())
            .filter(|(dir, name)| std::fs::symlink_metadata(dir.entry(name)).is_ok())
            .map(|(dir, name)| aside::set_aside(&dir, name));
        let what = match moved {
            Some(Ok(to)) => format!("its version was moved to {}", to.display()),
            Some(Err(e)) => format!("it could not be moved away ({e}): review it before use"),
            None => "it is not there any more".to_string(),
        };
        warn(&format!(
            "{} runs later outside the sandbox and changed during the run, and the copy sbx made of it before the run ({}) changed too, so nothing was put back; {what}",
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
    warn(&format!(
        "{}{}",
        restored(path, moved.as_deref()),
        not_made_again(kept)
    ));
    true
}

/// What is said of the FIFOs, sockets and devices a directory put back
/// held before the run: not copied, so not there now.
fn not_made_again(kept: &Kept) -> String {
    let special: Vec<PathBuf> = kept
        .before
        .iter()
        .filter(|s| s.is_special())
        .map(|s| under(&kept.path, &s.rel))
        .collect();
    if special.is_empty() {
        return String::new();
    }
    let listed: Vec<&Path> = special.iter().map(PathBuf::as_path).collect();
    let (was, it) = if special.len() == 1 {
        ("was", "it")
    } else {
        ("were", "them")
    };
    format!(
        "; sbx does not copy FIFOs, sockets or devices, so {} (there before the run) {was} not made again: make {it} again yourself if you need {it}",
        shown(&listed),
    )
}

/// A path that was a FIFO, socket or device before the run, and changed
/// (or was replaced or removed): what is there now is moved aside, and
/// nothing made in its place (sbx copies no such thing). False when what
/// is there could not be moved away.
fn settle_special(kept: &Kept, warn: &dyn Fn(&str)) -> bool {
    let path = &kept.path;
    let parent = path.parent().map(RealDir::open);
    let (Some(Ok(dir)), Some(name)) = (parent, path.file_name()) else {
        warn(&format!(
            "{} runs later outside the sandbox and changed during the run, but its directory changed too, so sbx did not touch it: review it before use",
            path.display()
        ));
        return false;
    };
    if std::fs::symlink_metadata(dir.entry(name)).is_err() {
        warn(&format!(
            "the command removed {}, a FIFO, socket or device that runs later outside the sandbox; sbx does not make those again: make it again yourself if you need it",
            path.display()
        ));
        return true;
    }
    match aside::set_aside(&dir, name) {
        Ok(to) => {
            warn(&format!(
                "the command changed or replaced {}, a FIFO, socket or device before the run, which runs later outside the sandbox; what is there now was moved to {} (review it, and use it only if you trust it), and nothing was made in its place (sbx does not make FIFOs, sockets or devices again: make it again yourself if you need it)",
                path.display(),
                to.display()
            ));
            true
        }
        Err(e) => {
            warn(&format!(
                "the command changed or replaced {}, a FIFO, socket or device before the run, which runs later outside the sandbox, and what is there now could not be moved away ({e}): review it before use",
                path.display()
            ));
            false
        }
    }
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
        let mut s = Snapshot::plan(
            root.join("cache/snapshot"),
            paths,
            Vec::new(),
            &[root.to_path_buf()],
        )
        .unwrap();
        s.copy().unwrap();
        s
    }

    fn restore(s: &Snapshot) -> (bool, Vec<String>) {
        let said = RefCell::new(Vec::new());
        let clean = s.restore(&|t| said.borrow_mut().push(t.to_string()));
        (clean, said.take())
    }

    fn finish(s: &Snapshot) -> (Settled, Vec<String>) {
        let said = RefCell::new(Vec::new());
        let settled = s.finish(&|t| said.borrow_mut().push(t.to_string()));
        (settled, said.take())
    }

    /// `root/.git/hooks` with a sample, and `root/.git/HEAD`.
    fn repository(root: &Path) -> PathBuf {
        let hooks = root.join(".git/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::write(hooks.join("pre-commit.sample"), "#!/bin/sh\n").unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        hooks
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
        let err = Snapshot::plan(
            tmp.path().join("s"),
            std::slice::from_ref(&big),
            Vec::new(),
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains(&big.display().to_string()), "{err}");
        assert!(err.contains("64 MiB"), "{err}");
        let many = tmp.path().join(".idea");
        std::fs::create_dir(&many).unwrap();
        for i in 0..MAX_ENTRIES {
            std::fs::File::create(many.join(i.to_string())).unwrap();
        }
        let err = Snapshot::plan(tmp.path().join("s"), &[many], Vec::new(), &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains(".idea") && err.contains("10000"), "{err}");
        // Nothing was made.
        assert!(!tmp.path().join("s").exists());
    }

    /// `f`, failed rather than waited on for ever (a FIFO opened for
    /// reading would hold it).
    fn within<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(f()));
        rx.recv_timeout(std::time::Duration::from_secs(60))
            .expect("held, by a FIFO opened?")
    }

    fn fifo(path: &Path) {
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::S_IRWXU).unwrap();
    }

    fn is_fifo(path: &Path) -> bool {
        use std::os::unix::fs::FileTypeExt;
        std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
    }

    /// A FIFO (as a path, or inside one) is fingerprinted, never opened
    /// nor copied: the run is not refused, and unchanged it is left alone.
    #[test]
    fn a_fifo_is_kept_by_its_fingerprint_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let (dir, config) = (root.join(".claude"), root.join("config"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a"), "a").unwrap();
        fifo(&dir.join("pipe"));
        fifo(&config);
        let (s, said) = within(move || {
            let s = take(&root, &[dir, config]);
            let said = restore(&s);
            (s, said)
        });
        assert!(!s.dir.join("0/pipe").exists() && !s.dir.join("1").exists());
        assert_eq!(said, (true, vec![]));
        assert!(is_fifo(&tmp.path().join(".claude/pipe")));
        assert!(is_fifo(&tmp.path().join("config")));
        assert!(!s.dir.exists());
    }

    /// A FIFO replaced, changed or removed: what is there now is moved
    /// aside, nothing made in its place, and said.
    #[test]
    fn a_fifo_changed_is_moved_aside_and_not_made_again() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let (config, gone, dir) = (root.join("config"), root.join("gone"), root.join(".claude"));
        fifo(&config);
        fifo(&gone);
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a"), "a").unwrap();
        fifo(&dir.join("pipe"));
        let s = within({
            let (root, paths) = (root.clone(), [config.clone(), gone.clone(), dir.clone()]);
            move || take(&root, &paths)
        });
        std::fs::remove_file(&config).unwrap();
        std::fs::write(&config, "[core]\n\tfsmonitor = evil\n").unwrap();
        std::fs::remove_file(&gone).unwrap();
        std::fs::write(dir.join("a"), "evil").unwrap();
        let (clean, said) = within(move || restore(&s));
        assert!(clean, "{said:?}");
        assert!(!config.exists());
        let blocked = root.join("config.sbx-blocked");
        assert!(std::fs::read_to_string(&blocked).unwrap().contains("evil"));
        assert!(
            said.iter()
                .any(|t| t.contains(&blocked.display().to_string())
                    && t.contains("nothing was made in its place")),
            "{said:?}"
        );
        assert!(!gone.exists() && !root.join("gone.sbx-blocked").exists());
        assert!(
            said.iter()
                .any(|t| t.contains("removed") && t.contains(&gone.display().to_string())),
            "{said:?}"
        );
        // The directory is put back without its FIFO, which is with the
        // command's version; said.
        assert_eq!(std::fs::read_to_string(dir.join("a")).unwrap(), "a");
        assert!(!dir.join("pipe").exists());
        assert!(is_fifo(&root.join(".claude.sbx-blocked/pipe")));
        let pipe = dir.join("pipe").display().to_string();
        assert!(
            said.iter()
                .any(|t| t.contains(&pipe) && t.contains("not made again")),
            "{said:?}"
        );
        // And a FIFO replaced by another one is moved aside too.
        let s = within({
            let (root, config) = (root.clone(), config.clone());
            move || {
                fifo(&config);
                take(&root, &[config])
            }
        });
        std::fs::remove_file(&config).unwrap();
        fifo(&config);
        let (clean, said) = within(move || restore(&s));
        assert!(clean && !config.exists(), "{said:?}");
        assert!(is_fifo(&root.join("config.sbx-blocked-2")));
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
        // Nothing put back, and the command's version not left in place.
        assert!(!envrc.exists());
        let aside = tmp.path().join(".envrc.sbx-blocked");
        assert_eq!(std::fs::read_to_string(&aside).unwrap(), "also evil");
        // Kept for review, and said.
        assert!(s.dir.exists());
        assert!(said[1].contains(&s.dir.display().to_string()), "{said:?}");
    }

    /// The command moves `.git` away and points it elsewhere: the link is
    /// moved aside (never followed), a new `.git` made, and the hooks put
    /// back into it; the user is told where theirs went.
    #[test]
    fn a_link_planted_above_the_path_is_moved_aside_and_the_directory_made_again() {
        let tmp = tempfile::tempdir().unwrap();
        let git = tmp.path().join(".git");
        let hooks = repository(tmp.path());
        let s = take(tmp.path(), std::slice::from_ref(&hooks));
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("hooks")).unwrap();
        std::fs::write(elsewhere.join("hooks/pre-commit"), "evil").unwrap();
        let moved = tmp.path().join("moved");
        std::fs::rename(&git, &moved).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &git).unwrap();
        let (settled, said) = finish(&s);
        assert!(!settled.clean, "{said:?}");
        assert!(std::fs::symlink_metadata(&git).unwrap().is_dir());
        assert!(hooks.join("pre-commit.sample").is_file());
        assert!(!hooks.join("pre-commit").exists());
        // Nothing else: the repository is not there any more.
        assert!(!git.join("HEAD").exists());
        let blocked = tmp.path().join(".git.sbx-blocked");
        assert!(std::fs::symlink_metadata(&blocked).unwrap().is_symlink());
        assert_eq!(settled.rebuilt, vec![(git.clone(), EntryId::of(&git))]);
        // Nothing was written through the link.
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 1);
        assert_eq!(
            std::fs::read_dir(elsewhere.join("hooks")).unwrap().count(),
            1
        );
        // Said once, naming the paths and where the one from before is.
        let about: Vec<&String> = said
            .iter()
            .filter(|t| t.contains(&blocked.display().to_string()))
            .collect();
        assert_eq!(about.len(), 1, "{said:?}");
        for path in [&git, &hooks, &moved] {
            assert!(about[0].contains(&path.display().to_string()), "{said:?}");
        }
        assert!(!s.dir.exists());
    }

    /// The finding: `.git` renamed within the project, a file `gitdir:
    /// ...` in its place.
    #[test]
    fn a_gitfile_in_place_of_the_directory_is_moved_aside() {
        let tmp = tempfile::tempdir().unwrap();
        let git = tmp.path().join(".git");
        let hooks = repository(tmp.path());
        let s = take(tmp.path(), std::slice::from_ref(&hooks));
        std::fs::rename(&git, tmp.path().join(".git-away")).unwrap();
        std::fs::write(&git, "gitdir: /tmp/evilgit\n").unwrap();
        let (settled, said) = finish(&s);
        assert!(!settled.clean);
        assert!(hooks.join("pre-commit.sample").is_file());
        let blocked = tmp.path().join(".git.sbx-blocked");
        assert_eq!(
            std::fs::read_to_string(blocked).unwrap(),
            "gitdir: /tmp/evilgit\n"
        );
        assert!(
            said.iter()
                .any(|t| t.contains(".git-away (the command renamed it)")),
            "{said:?}"
        );
    }

    /// Removed (or renamed where sbx does not look): said as such.
    #[test]
    fn a_directory_removed_above_the_path_is_made_again() {
        let tmp = tempfile::tempdir().unwrap();
        let git = tmp.path().join(".git");
        let hooks = repository(tmp.path());
        std::fs::create_dir_all(tmp.path().join("sub")).unwrap();
        let s = take(tmp.path(), std::slice::from_ref(&hooks));
        std::fs::rename(&git, tmp.path().join("sub/deep")).unwrap();
        let (settled, said) = finish(&s);
        assert!(!settled.clean);
        assert!(hooks.join("pre-commit.sample").is_file());
        assert!(!tmp.path().join(".git.sbx-blocked").exists());
        assert!(
            said.iter()
                .any(|t| t.contains("may now be at a different name")),
            "{said:?}"
        );
    }

    /// Several levels: the topmost directory replaced is set aside, and
    /// those below it made again on the way to the path.
    #[test]
    fn the_directories_below_the_one_replaced_are_made_again() {
        let tmp = tempfile::tempdir().unwrap();
        let hooks = tmp.path().join(".git/modules/sub/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::write(hooks.join("post-checkout"), "mine").unwrap();
        let envrc = tmp.path().join(".envrc");
        std::fs::write(&envrc, "mine").unwrap();
        let s = take(tmp.path(), &[hooks.clone(), envrc.clone()]);
        std::fs::remove_dir_all(tmp.path().join(".git")).unwrap();
        std::fs::write(tmp.path().join(".git"), "gitdir: /elsewhere\n").unwrap();
        let (settled, said) = finish(&s);
        assert!(!settled.clean, "{said:?}");
        assert_eq!(
            std::fs::read_to_string(hooks.join("post-checkout")).unwrap(),
            "mine"
        );
        let made: Vec<&Path> = settled.rebuilt.iter().map(|(p, _)| p.as_path()).collect();
        let git = tmp.path().join(".git");
        assert_eq!(
            made,
            [git.clone(), git.join("modules"), git.join("modules/sub")]
        );
        assert!(tmp.path().join(".git.sbx-blocked").is_file());
        assert_eq!(std::fs::read_to_string(&envrc).unwrap(), "mine");
    }

    /// The note of an older sbx, without the directories above the paths:
    /// said, not touched.
    #[test]
    fn without_the_directories_recorded_nothing_is_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let git = tmp.path().join(".git");
        let hooks = repository(tmp.path());
        let mut s = take(tmp.path(), std::slice::from_ref(&hooks));
        s.parents.clear();
        let elsewhere = tmp.path().join("elsewhere");
        std::fs::create_dir_all(elsewhere.join("hooks")).unwrap();
        std::fs::write(elsewhere.join("hooks/pre-commit"), "evil").unwrap();
        std::fs::rename(&git, tmp.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &git).unwrap();
        let (settled, said) = finish(&s);
        assert!(!settled.clean);
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
