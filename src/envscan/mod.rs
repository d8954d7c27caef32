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
//!   full. An unchanged tree costs one stat per directory (relative to its
//!   parent's descriptor; a directory with subdirectories to walk is opened,
//!   `O_PATH`, and stat'ed through that descriptor), and the cache is read
//!   in place, without an allocation per name (`cache.rs`).
//! * The walk is shared out among one worker per core ([`walker`]); what
//!   they find is merged and sorted, so the result does not depend on how.
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
use std::num::NonZero;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

mod cache;
#[cfg(test)]
mod tests;
mod walker;
#[cfg(target_os = "linux")]
pub mod watch;

use cache::{cache_name, file_size, load, store, write_records};

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
    /// make it readable again (sorted, without duplicates).
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

/// Walk `project`: ask its watcher when there is one (see [`watch`]), else
/// walk it from the cache in `cache_dir`, and start a watcher when the walk
/// was long.
pub fn walk(project: &Path, cache_dir: Option<&Path>) -> Found {
    walk_asked(project, cache_dir, Early::NotAsked)
}

/// What a walk's result must hold.
#[cfg(target_os = "linux")]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wanted {
    All,
    /// What git may enter: `.git` entries, bare repositories, and the
    /// directories that could not be listed. Where the watcher answers,
    /// the `.env` files are then not resolved (after a run their real
    /// paths are not needed, and each costs system calls); a walk finds
    /// them anyway.
    Repositories,
}

/// [`walk`] for what git may enter (`Wanted::Repositories` where a watcher
/// answers).
pub fn walk_repositories(project: &Path, cache_dir: Option<&Path>) -> Found {
    #[cfg(target_os = "linux")]
    if let Some(found) = cache_dir.and_then(|c| watch::ask(project, c, Wanted::Repositories)) {
        return found;
    }
    // No watcher answered: walk without asking again.
    walk_asked(project, cache_dir, Early::NoWatcher(project.to_path_buf()))
}

/// What became of a question put early to the watcher of a project.
pub enum Early {
    /// None was put: the watcher is asked when the answer is needed.
    NotAsked,
    /// No watcher of this root could be asked (none listens, or watchers
    /// are off): walk, without trying again.
    NoWatcher(#[cfg_attr(not(target_os = "linux"), allow(dead_code))] PathBuf),
    /// Put; the answer is read when needed.
    #[cfg(target_os = "linux")]
    Asked(watch::Asked),
}

/// Ask the watcher of `project` now, and read its answer in [`walk_asked`].
pub fn ask_early(project: &Path, cache_dir: Option<&Path>) -> Early {
    let Some(cache) = cache_dir else {
        return Early::NotAsked;
    };
    #[cfg(target_os = "linux")]
    if let Some(asked) = watch::Asked::send(project, cache) {
        return Early::Asked(asked);
    }
    let _ = cache;
    Early::NoWatcher(project.to_path_buf())
}

/// [`walk`], with the answer to a question put earlier ([`ask_early`])
/// when it was about `project` and the watcher answered; else as `walk`.
pub fn walk_asked(project: &Path, cache_dir: Option<&Path>, early: Early) -> Found {
    #[cfg(target_os = "linux")]
    {
        let answer = match early {
            Early::Asked(asked) => asked.answer(project),
            Early::NoWatcher(root) if root == project => Some(None),
            _ => None,
        };
        match answer {
            Some(Some(found)) => return found,
            // Asked, and no answer (or no watcher to ask): walk.
            Some(None) => {}
            // Not asked about this root.
            None => {
                if let Some(found) = cache_dir.and_then(|c| watch::ask(project, c, Wanted::All)) {
                    return found;
                }
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = early;
    let (env_files, stats) = scan(project, cache_dir, now_ns());
    #[cfg(target_os = "linux")]
    if let Some(cache) = cache_dir {
        watch::start(project, cache, stats.read + stats.reused);
    }
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
    #[cfg(test)]
    fn of(m: &std::fs::Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt;
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            mtime: ns(m.mtime(), m.mtime_nsec()),
            ctime: ns(m.ctime(), m.ctime_nsec()),
        }
    }

    /// As [`std::fs::Metadata`] gives them (the field types vary between
    /// platforms).
    #[allow(clippy::unnecessary_cast)]
    fn from_stat(st: &nix::sys::stat::FileStat) -> Stamp {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stamp {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            mtime: ns(st.st_mtime as i64, st.st_mtime_nsec as i64),
            ctime: ns(st.st_ctime as i64, st.st_ctime_nsec as i64),
        }
    }

    /// Whether both times are safely older than a walk that started at `walk`.
    fn settled(&self, walk: i128) -> bool {
        let limit = walk.saturating_sub(RACE_NS);
        self.mtime < limit && self.ctime < limit
    }
}

/// One directory's relevant entries, for tests that write a cache.
#[cfg(test)]
#[derive(Debug)]
struct Dir {
    stamp: Stamp,
    /// Names of the subdirectories (pruned ones included; pruning is applied
    /// when walking).
    subdirs: Vec<Vec<u8>>,
    /// Names of the entries other than directories that start with `.env`
    /// (any case), and a `.git` file or link, and a `HEAD`.
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
    /// Directories that could not be listed (sorted).
    unreadable: Vec<PathBuf>,
    /// `.git` entries found (sorted).
    git_entries: Vec<PathBuf>,
    /// Bare repositories found (sorted).
    bare: Vec<PathBuf>,
    /// Workers that visited a directory.
    workers: usize,
    /// Directory descriptors the walk kept open at once, at most; and when
    /// it ended (none). Read by tests only.
    #[cfg_attr(not(test), allow(dead_code))]
    peak_fds: usize,
    #[cfg_attr(not(test), allow(dead_code))]
    fds_left: usize,
}

fn scan(project: &Path, cache_dir: Option<&Path>, now: i128) -> (Vec<PathBuf>, Stats) {
    // Asked only when the walk outgrows one thread: the answer costs a
    // dozen system calls (the cgroup's CPU quota), and most walks are done
    // before.
    let cores = || std::thread::available_parallelism().map_or(1, NonZero::get);
    scan_counting(project, cache_dir, now, &cores)
}

/// [`scan`] with up to `workers` workers (within [`walker::MAX_WORKERS`]).
#[cfg(test)]
fn scan_with(
    project: &Path,
    cache_dir: Option<&Path>,
    now: i128,
    workers: usize,
) -> (Vec<PathBuf>, Stats) {
    scan_counting(project, cache_dir, now, &|| workers)
}

/// [`scan`] with up to `workers()` workers.
fn scan_counting(
    project: &Path,
    cache_dir: Option<&Path>,
    now: i128,
    workers: &dyn Fn() -> usize,
) -> (Vec<PathBuf>, Stats) {
    let cache_file = cache_dir.map(|d| d.join(cache_name(project)));
    let old = cache_file.as_deref().and_then(|f| load(f, project));
    let started = old.as_ref().map_or(i128::MIN, |c| c.walk);
    let mut walked = walker::run(project, old.as_ref(), started, workers);
    let mut stats = Stats {
        peak_fds: walked.peak_fds,
        fds_left: walked.fds_left,
        ..Stats::default()
    };
    // The cache is written again when a directory was read, straight from
    // the walk's records: no copy of the whole file in memory.
    let dirty = old.is_none() || walked.outs.iter().any(|o| o.read > 0);
    if let Some(file) = cache_file.as_deref().filter(|_| dirty) {
        walker::sort_records(old.as_ref(), &mut walked.outs);
        let merged = walker::Merged::new(old.as_ref(), &walked.outs);
        let records = merged.clone().flatten();
        stats.wrote = merged.clone().all(|r| r.is_some())
            && file_size(project, records.clone()).is_some()
            && store(file, |out| write_records(out, project, now, records)).is_ok();
    }
    let mut found = Vec::new();
    for out in walked.outs {
        stats.read += out.read;
        stats.reused += out.reused;
        stats.workers += usize::from(out.visited > 0);
        found.extend(out.found);
        stats.unreadable.extend(out.unreadable);
        stats.git_entries.extend(out.git_entries);
        stats.bare.extend(out.bare);
    }
    for list in [
        &mut found,
        &mut stats.unreadable,
        &mut stats.git_entries,
        &mut stats.bare,
    ] {
        list.sort();
        list.dedup();
    }
    (found, stats)
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

/// What one entry of `dir` that the walk looks at adds to `out`: a `.git`
/// of any type is a repository git may enter; a `HEAD` that is not a
/// directory makes a few lstats decide whether git takes `dir` for a git
/// directory; a `.env` name is resolved (refused: `dir` is masked whole).
fn note_entry(dir: &Path, name: &[u8], out: &mut Found) {
    if name == b".git" {
        out.git_entries.push(dir.join(".git"));
    } else if name == b"HEAD" {
        if !dir.components().any(|c| c.as_os_str() == ".git") && git_dir_like(dir) {
            out.bare.push(dir.to_path_buf());
        }
    } else if resolve(dir, name, &mut out.env_files) == Resolved::Denied {
        out.unreadable.push(dir.to_path_buf());
    }
}

/// Whether the walk leaves a directory of this name out ([`PRUNED`]).
pub fn is_pruned(name: &[u8]) -> bool {
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
    if !is_env_file_name(name) {
        return Resolved::Other;
    }
    let real = match real_file(&dir.join(OsStr::from_bytes(name))) {
        Ok(Some(real)) => real,
        Ok(None) => return Resolved::Other,
        // A dangling link, or a link through a file: nothing to hide.
        Err(e)
            if matches!(
                e.raw_os_error(),
                Some(nix::libc::ENOENT | nix::libc::ENOTDIR)
            ) =>
        {
            return Resolved::Other
        }
        // Refused, too long, a loop: what it holds cannot be told, so its
        // directory is masked whole.
        Err(_) => return Resolved::Denied,
    };
    out.push(real);
    Resolved::Other
}

/// The real path of what `path` names, links followed, when that is a
/// regular file (`None` for anything else); errors as `canonicalize`'s.
fn real_file(path: &Path) -> std::io::Result<Option<PathBuf>> {
    #[cfg(target_os = "linux")]
    if let Some(answer) = real_file_quickly(path) {
        return answer;
    }
    let real = std::fs::canonicalize(path)?;
    Ok(std::fs::metadata(&real)
        .is_ok_and(|m| m.is_file())
        .then_some(real))
}

/// [`real_file`] in three or four system calls whatever the depth, where
/// `canonicalize` makes one per component (a tree with hundreds of deep
/// `.env` files paid thousands per run): a path with no link on the way is
/// its own real path, and for one with a link the kernel names the file it
/// opened. `None` when it cannot tell (no `openat2`, no `/proc`, any
/// error): the long way then, whose answer counts.
#[cfg(target_os = "linux")]
fn real_file_quickly(path: &Path) -> Option<std::io::Result<Option<PathBuf>>> {
    use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, CWD};
    use std::os::fd::{AsRawFd, OwnedFd};
    let flags = OFlags::PATH | OFlags::CLOEXEC;
    let regular = |fd: &OwnedFd| {
        rustix::fs::fstat(fd)
            .ok()
            .map(|st| FileType::from_raw_mode(st.st_mode) == FileType::RegularFile)
    };
    if normal_absolute(path) {
        let no_links = ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        if let Ok(fd) = rustix::fs::openat2(CWD, path, flags, Mode::empty(), no_links) {
            return Some(Ok(regular(&fd)?.then(|| path.to_path_buf())));
        }
    }
    let fd = rustix::fs::open(path, flags, Mode::empty()).ok()?;
    if !regular(&fd)? {
        return Some(Ok(None));
    }
    let named = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    // Not the name the kernel gives a file removed since (" (deleted)"),
    // nor one out of this process's reach ("(unreachable)/...", not
    // absolute). A file of another mount namespace (through
    // `/proc/PID/root`) is named as in that namespace, as `canonicalize`
    // names it too.
    let trusted = named.is_absolute() && !named.as_os_str().as_bytes().ends_with(b" (deleted)");
    trusted.then_some(Ok(Some(named)))
}

/// An absolute path that names its file by the shortest spelling: no `.`,
/// `..` or empty name (`//`, a trailing `/`). With no link on the way,
/// such a path is the real path.
#[cfg(target_os = "linux")]
fn normal_absolute(path: &Path) -> bool {
    let bytes = path.as_os_str().as_bytes();
    bytes.strip_prefix(b"/").is_some_and(|rest| {
        rest.split(|&b| b == b'/')
            .all(|name| !name.is_empty() && name != b"." && name != b"..")
    })
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

/// The list of the files masked as `.env` files under `root` in earlier
/// runs, those `.env` links led to included (see
/// `policy::credentials::env_files`): absolute paths, one per line. Read
/// once per run, and written only when it changes.
pub struct LinkedTargets {
    file: PathBuf,
    text: Vec<u8>,
}

impl LinkedTargets {
    pub fn read(cache: &Path, root: &Path) -> Self {
        let file = cache.join(format!("{}.links", cache_name(root)));
        let text = std::fs::read(&file).unwrap_or_default();
        Self { file, text }
    }

    /// Where the list is kept.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// The files it names.
    pub fn paths(&self) -> Vec<PathBuf> {
        self.text
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| PathBuf::from(OsStr::from_bytes(l)))
            .filter(|p| p.is_absolute())
            .collect()
    }

    /// Record `files` (written whole, then renamed over the old list);
    /// nothing to record removes the list. A path with a newline is not
    /// recorded (it is still masked in this run).
    pub fn remember(&self, files: &[PathBuf]) {
        let mut text = Vec::new();
        for f in files.iter().map(|f| f.as_os_str().as_bytes()) {
            if !f.contains(&b'\n') {
                text.extend_from_slice(f);
                text.push(b'\n');
            }
        }
        if self.text == text {
            return;
        }
        if text.is_empty() {
            let _ = std::fs::remove_file(&self.file);
            return;
        }
        let tmp = self
            .file
            .with_extension(format!("links.{}.tmp", std::process::id()));
        if std::fs::write(&tmp, &text)
            .and_then(|()| std::fs::rename(&tmp, &self.file))
            .is_err()
        {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// `.env` files kept readable: committed templates.
pub const ENV_TEMPLATES: &[&str] = &[".env.example", ".env.sample", ".env.template"];

/// Whether a file name is a `.env` file whose reads are denied: `.env`
/// or `.env.` followed by anything, in any case, except the templates.
/// Byte by byte, so that a name that is not UTF-8 is judged like any
/// other, and without the copy lower-casing would cost for each entry of
/// the directories listed.
pub fn is_env_file_name(name: &[u8]) -> bool {
    may_be_env(name)
        && (name.len() == 4 || name.get(4) == Some(&b'.'))
        && !ENV_TEMPLATES
            .iter()
            .any(|t| t.as_bytes().eq_ignore_ascii_case(name))
}

/// The `.env` files directly in `dir` ([`is_env_file_name`]), by name:
/// none when it cannot be opened, those listed before an error otherwise.
pub fn env_files_in(dir: &Path) -> Vec<std::ffi::OsString> {
    walker::names_in(dir, is_env_file_name)
}
