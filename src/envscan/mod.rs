//! Discovery of `.env` files in the project, so they can be masked.
//!
//! sbx runs once per agent command, so on a large unchanged tree this must
//! cost almost nothing. The walk is cached between runs:
//!
//! * The cache (one file per project under the cache directory, named by an
//!   FNV-1a hash of the project path) records, for every directory walked,
//!   its device, inode, modification and change times, the names of its
//!   subdirectories and the names of its entries that could be `.env` files.
//! * The next run stats each recorded directory. A directory whose stamp is
//!   unchanged has the same direct entries, so its recorded names are reused;
//!   any other directory is read again, and a new subdirectory is walked in
//!   full. An unchanged tree costs one `lstat` per directory.
//! * A directory modified within [`RACE_NS`] of the previous walk is read
//!   again regardless: an entry created in the same timestamp tick as that
//!   walk's read would not show in the modification time.
//! * The change time is part of the stamp: it cannot be set back, so a
//!   directory whose modification time was reset (`touch -d`) is read again.
//! * Candidate names are resolved on every run (a `.env` symlink's target
//!   can change without touching its directory).
//!
//! The cache lives outside every writable root, but its content is still
//! treated as untrusted: a file that fails to parse, has another format or
//! sbx version, belongs to another project, or names anything but single
//! path components is ignored (full walk). Failure to write it is silent.

use std::ffi::OsStr;
use std::fs::Metadata;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

mod cache;
#[cfg(test)]
mod tests;

use cache::{cache_name, cmp_rel, encode_records, load, put_body, store, Cache};

/// Directories never searched: they do not hold the user's own secrets.
pub const PRUNED: &[&str] = &[
    ".git",
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".gradle",
    ".direnv",
];

/// A directory modified this close to (or after) the previous walk is read
/// again: timestamps are coarser than the events they record.
const RACE_NS: i128 = 2_000_000_000;

/// Real paths of the regular `.env` files under `project` (sorted, without
/// duplicates), walking from the cache in `cache_dir` when there is one.
#[cfg(test)]
pub fn find(project: &Path, cache_dir: Option<&Path>) -> Vec<PathBuf> {
    scan(project, cache_dir, now_ns()).0
}

/// What one walk of a project found.
#[derive(Debug, Default)]
pub struct Found {
    /// Real paths of the regular `.env` files (sorted, without duplicates).
    pub env_files: Vec<PathBuf>,
    /// The directories that could not be listed (no read permission): what
    /// they hold is unknown, so they must be masked whole. A command can
    /// make a directory unreadable to hide a `.env` from the next scan, then
    /// make it readable again.
    pub unreadable: Vec<PathBuf>,
    /// Every `.git` entry (directory, file or link) under the project, the
    /// project's own included: each is a repository git on the host may
    /// enter (sorted).
    pub git_entries: Vec<PathBuf>,
    /// Bare repositories under the project (a directory laid out as a git
    /// directory, not named `.git` nor inside one): git runs their hooks
    /// and config for anyone who pushes there or runs git inside (sorted).
    pub bare: Vec<PathBuf>,
}

/// Walk `project` (from the cache in `cache_dir` when there is one).
pub fn walk(project: &Path, cache_dir: Option<&Path>) -> Found {
    let (env_files, stats) = scan(project, cache_dir, now_ns());
    Found {
        env_files,
        unreadable: stats.unreadable,
        git_entries: stats.git_entries,
        bare: stats.bare,
    }
}

/// What identifies a directory's entry list as unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    /// Modification time, nanoseconds since the epoch.
    mtime: i128,
    /// Change time, nanoseconds since the epoch.
    ctime: i128,
}

impl Stamp {
    fn of(m: &Metadata) -> Stamp {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            mtime: ns(m.mtime(), m.mtime_nsec()),
            ctime: ns(m.ctime(), m.ctime_nsec()),
        }
    }

    /// Whether both times are safely older than a walk that started at `walk`.
    fn settled(&self, walk: i128) -> bool {
        let limit = walk.saturating_sub(RACE_NS);
        self.mtime < limit && self.ctime < limit
    }
}

/// One directory's relevant entries, as read.
#[derive(Debug)]
struct Dir {
    stamp: Stamp,
    /// Names of the subdirectories (pruned ones included; pruning is applied
    /// when walking).
    subdirs: Vec<Vec<u8>>,
    /// Names of the entries other than directories that start with `.env`
    /// (any case), and a `.git` file or link, and a `HEAD`;
    /// [`is_env_file_name`] is applied when resolving.
    envs: Vec<Vec<u8>>,
    /// It could not be listed (never cached: read again every time).
    unreadable: bool,
}

/// Counters, for tests.
#[derive(Debug, Default)]
struct Stats {
    read: usize,
    reused: usize,
    wrote: bool,
    /// Directories that could not be listed.
    unreadable: Vec<PathBuf>,
    /// `.git` entries found (sorted).
    git_entries: Vec<PathBuf>,
    /// Bare repositories found (sorted).
    bare: Vec<PathBuf>,
}

fn scan(project: &Path, cache_dir: Option<&Path>, now: i128) -> (Vec<PathBuf>, Stats) {
    let cache_file = cache_dir.map(|d| d.join(cache_name(project)));
    let old = cache_file.as_deref().and_then(|f| load(f, project));
    let mut walk = Walk {
        dirty: old.is_none(),
        ..Walk::default()
    };
    let started = old.as_ref().map_or(i128::MIN, |c| c.walk);
    let mut stack: Vec<Vec<u8>> = vec![Vec::new()];
    while let Some(rel) = stack.pop() {
        let path = if rel.is_empty() {
            project.to_path_buf()
        } else {
            project.join(OsStr::from_bytes(&rel))
        };
        walk.visit(rel, &path, old.as_ref(), started, &mut stack);
    }
    let Walk {
        mut stats,
        mut found,
        records,
        arena,
        dirty,
    } = walk;
    if let Some(file) = cache_file.as_deref().filter(|_| dirty) {
        stats.wrote = cache_records(old.as_ref(), &records, &arena)
            .and_then(|records| encode_records(project, now, records.into_iter()))
            .is_some_and(|bytes| store(file, &bytes).is_ok());
    }
    found.sort();
    found.dedup();
    stats.git_entries.sort();
    stats.bare.sort();
    (found, stats)
}

/// Where a record body to write is.
enum Src {
    /// The previous cache's record, unchanged.
    Old(u32),
    /// `arena[start..end]`: a directory read by this walk.
    New(usize, usize),
}

/// The records of a new cache: (relative path, body), sorted as the cache
/// keeps them. `None` if one cannot be found (never expected: then the
/// cache is not written).
fn cache_records<'a>(
    old: Option<&'a Cache>,
    records: &'a [(Vec<u8>, Src)],
    arena: &'a [u8],
) -> Option<Vec<(&'a [u8], &'a [u8])>> {
    let mut out = Vec::with_capacity(records.len());
    for (rel, src) in records {
        let body = match *src {
            Src::Old(i) => old?.raw_body(i)?,
            Src::New(start, end) => arena.get(start..end)?,
        };
        out.push((rel.as_slice(), body));
    }
    // Walked depth first in name order: mostly sorted already.
    out.sort_by(|a, b| cmp_rel(a.0, b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    Some(out)
}

/// What a walk has found so far.
#[derive(Default)]
struct Walk {
    stats: Stats,
    found: Vec<PathBuf>,
    /// The directories to cache, by path relative to the project.
    records: Vec<(Vec<u8>, Src)>,
    /// The record bodies of the directories read.
    arena: Vec<u8>,
    /// Whether the cache must be written again.
    dirty: bool,
}

impl Walk {
    /// One directory: reused from the cache when its stamp is unchanged and
    /// settled before the walk that cached it, else read; its subdirectories
    /// go on `stack`, its `.env` candidates are resolved.
    fn visit(
        &mut self,
        rel: Vec<u8>,
        path: &Path,
        old: Option<&Cache>,
        started: i128,
        stack: &mut Vec<Vec<u8>>,
    ) {
        let stats = &mut self.stats;
        // Stat before reading: a change after this point shows next time.
        // `lstat`, so a directory symlink is never followed.
        let meta = match std::fs::symlink_metadata(path) {
            Ok(meta) => meta,
            Err(e) => {
                // Listed but not searchable (`chmod 444` on its parent):
                // what it holds is unknown, so the parent is masked whole.
                if e.kind() == io::ErrorKind::PermissionDenied {
                    if let Some(parent) = path.parent() {
                        stats.unreadable.push(parent.to_path_buf());
                    }
                }
                return;
            }
        };
        if !meta.is_dir() {
            return;
        }
        let stamp = Stamp::of(&meta);
        let cached = old.and_then(|c| {
            let i = c.find(0, c.len(), &rel, 0)?;
            let body = c.body(i)?;
            (body.stamp == stamp && stamp.settled(started)).then_some((i, body))
        });
        match cached {
            Some((i, body)) => {
                stats.reused += 1;
                let src = Some(Src::Old(i));
                self.names(rel, path, body.subdirs, body.envs, src, stack);
            }
            None => {
                stats.read += 1;
                self.dirty = true;
                let (mut dir, complete) = read(path, stamp);
                if dir.unreadable {
                    stats.unreadable.push(path.to_path_buf());
                }
                // Each list sorted, as the cache keeps it.
                for list in [&mut dir.subdirs, &mut dir.envs] {
                    list.sort_unstable();
                    list.dedup();
                }
                let subdirs = dir.subdirs.iter().map(Vec::as_slice);
                let envs = dir.envs.iter().map(Vec::as_slice);
                // An incompletely read directory is left out, so it is read
                // again.
                let start = self.arena.len();
                let cached = complete
                    && put_body(&mut self.arena, &dir.stamp, subdirs.clone(), envs.clone())
                        .is_some();
                let src = cached.then_some(Src::New(start, self.arena.len()));
                self.names(rel, path, subdirs, envs, src, stack);
            }
        }
    }

    /// Walk on from a directory's names: its subdirectories go on `stack`,
    /// `.git` entries and a bare repository are noted, `.env` candidates
    /// resolved; then it is recorded for the cache (`src`), if given.
    fn names<'n>(
        &mut self,
        rel: Vec<u8>,
        path: &Path,
        subdirs: impl Iterator<Item = &'n [u8]> + Clone,
        envs: impl Iterator<Item = &'n [u8]> + Clone,
        src: Option<Src>,
        stack: &mut Vec<Vec<u8>>,
    ) {
        let stats = &mut self.stats;
        let first = stack.len();
        for name in subdirs.clone().filter(|n| !is_pruned(n)) {
            let mut child = rel.clone();
            if !child.is_empty() {
                child.push(b'/');
            }
            child.extend_from_slice(name);
            stack.push(child);
        }
        // Popped in name order: the order the cache is written in.
        stack.get_mut(first..).unwrap_or_default().reverse();
        for name in subdirs.chain(envs.clone()) {
            if name == b".git" {
                stats.git_entries.push(path.join(".git"));
            }
        }
        // A `HEAD` that is not a directory: then a few lstats decide
        // whether git takes the directory for a git directory.
        let head = envs.clone().any(|n| n == b"HEAD");
        if head && !path.components().any(|c| c.as_os_str() == ".git") && git_dir_like(path) {
            stats.bare.push(path.to_path_buf());
        }
        for name in envs {
            if resolve(path, name, &mut self.found) == Resolved::Denied {
                stats.unreadable.push(path.to_path_buf());
            }
        }
        if let Some(src) = src {
            self.records.push((rel, src));
        }
    }
}

/// Read one directory. The flag tells whether the listing is complete; a
/// directory that may not be read is incomplete (so never cached) and marked
/// unreadable.
fn read(path: &Path, stamp: Stamp) -> (Dir, bool) {
    let mut dir = Dir {
        stamp,
        subdirs: Vec::new(),
        envs: Vec::new(),
        unreadable: false,
    };
    let entries = match std::fs::read_dir(path) {
        Ok(e) => e,
        Err(e) => {
            dir.unreadable = e.kind() == io::ErrorKind::PermissionDenied;
            return (dir, false);
        }
    };
    let mut complete = true;
    for entry in entries {
        let Ok(entry) = entry else {
            complete = false;
            break;
        };
        // From the directory entry's type when the file system gives it;
        // never follows a symlink.
        let Ok(ft) = entry.file_type() else {
            complete = false;
            continue;
        };
        let name = entry.file_name().into_vec();
        if ft.is_dir() {
            dir.subdirs.push(name);
        } else if may_be_env(&name) || name == b".git" || name == b"HEAD" {
            // `HEAD`: what makes a directory a git directory (see
            // `git_dir_like`).
            dir.envs.push(name);
        }
    }
    (dir, complete)
}

/// Whether git takes `dir` for a git directory, as its own test does
/// (`is_git_directory`): a `HEAD` that is a file or a link into `refs/`,
/// and `objects` and `refs` of any type, or a `commondir` that supplies
/// them. Links are not followed, except `HEAD`'s text, which is read.
pub fn git_dir_like(dir: &Path) -> bool {
    let head = dir.join("HEAD");
    let head_ok = match std::fs::symlink_metadata(&head) {
        Ok(m) if m.is_file() => true,
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::read_link(&head).is_ok_and(|t| t.starts_with("refs/"))
        }
        _ => false,
    };
    let present = |name: &str| std::fs::symlink_metadata(dir.join(name)).is_ok();
    head_ok && ((present("objects") && present("refs")) || present("commondir"))
}

fn is_pruned(name: &[u8]) -> bool {
    PRUNED.iter().any(|p| p.as_bytes() == name)
}

/// Whether a name starts with `.env` in any case: every name
/// [`is_env_file_name`] accepts does.
fn may_be_env(name: &[u8]) -> bool {
    name.get(..4)
        .is_some_and(|p| p.eq_ignore_ascii_case(b".env"))
}

/// Add the real path of `dir/name` when it is a `.env` file that is, or is a
/// symlink to, a regular file (wherever the target is: the real path is what
/// must be masked).
fn resolve(dir: &Path, name: &[u8], out: &mut Vec<PathBuf>) -> Resolved {
    if !is_env_file_name(&String::from_utf8_lossy(name)) {
        return Resolved::Other;
    }
    let real = match std::fs::canonicalize(dir.join(OsStr::from_bytes(name))) {
        Ok(real) => real,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Resolved::Denied,
        Err(_) => return Resolved::Other,
    };
    if std::fs::metadata(&real).is_ok_and(|m| m.is_file()) {
        out.push(real);
    }
    Resolved::Other
}

/// Whether resolving a `.env` name was refused (its directory cannot be
/// searched: it must be masked whole).
#[derive(Debug, PartialEq, Eq)]
enum Resolved {
    Denied,
    Other,
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
        .unwrap_or(0)
}

/// `.env` files kept readable: committed templates.
pub const ENV_TEMPLATES: &[&str] = &[".env.example", ".env.sample", ".env.template"];

/// Whether a file name is a `.env` file whose reads are denied.
pub fn is_env_file_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    (lower == ".env" || lower.starts_with(".env.")) && !ENV_TEMPLATES.contains(&lower.as_str())
}
