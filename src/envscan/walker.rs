//! The walk itself, for [`super::scan`]: each directory is reached from its
//! parent's descriptor (`fstatat`, `openat`: no path lookup from the root,
//! never through a symlink), and the tree is shared out among workers.
//!
//! * A worker walks depth first from its own stack; when another worker is
//!   idle, it hands over the older half of that stack (the directories
//!   nearest the root: the largest subtrees) through a shared queue. The
//!   other workers start only once the first has visited [`SOLO`]
//!   directories: most trees are walked before threads would have started.
//! * A directory's descriptor is kept open while directories below it wait
//!   on a stack, so at most one per level per worker; past [`FD_BUDGET`]
//!   descriptors in all, a directory's entries are reached by absolute
//!   path instead (slower, same result).
//! * Each worker collects what it found; [`super::scan`] merges and sorts.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use nix::errno::Errno;
use nix::fcntl::AtFlags;
use nix::sys::stat::{FileStat, SFlag};
use rustix::fs::OFlags;

use super::cache::{put_record, record_rel, Cache};
use super::{is_pruned, may_be_env, Stamp};

/// Most workers in one walk: metadata calls scale with cores only so far.
pub(super) const MAX_WORKERS: usize = 8;

/// Directories the first worker visits alone before the others start.
const SOLO: usize = 256;

/// Most directory descriptors kept open at once, by all workers together
/// (well below the usual limit of 1024 per process).
pub(super) const FD_BUDGET: usize = 128;

/// What one worker found.
#[derive(Default)]
pub(super) struct Out {
    /// Directories read (not reused from the cache), reused, visited.
    pub read: usize,
    pub reused: usize,
    pub visited: usize,
    pub found: Vec<PathBuf>,
    pub unreadable: Vec<PathBuf>,
    pub git_entries: Vec<PathBuf>,
    pub bare: Vec<PathBuf>,
    /// The directories to cache: where each one's record is.
    pub records: Vec<Src>,
    /// The records of the directories this worker read, as the cache keeps
    /// them (path and body).
    pub arena: Arena,
    /// Not a result: the path buffers of directories visited, for the
    /// next ones. The walk's threads share one allocator lock (the static
    /// build's), so one allocation less per directory is less waiting.
    spare: Vec<Vec<u8>>,
}

/// The most path buffers a worker keeps for reuse (its stack rarely holds
/// more at once).
const SPARE: usize = 16;

/// Where a record to write is.
pub(super) enum Src {
    /// The previous cache's record, unchanged.
    Old(u32),
    /// In the arena of the worker that read it: chunk, start, end.
    New(u32, u32, u32),
}

/// A worker's records, in chunks that are never moved. One buffer that
/// doubles as it fills holds its old and new copies at once while it
/// grows: in a first walk of 100,000 directories that was most of sbx's
/// peak memory, and the static build's allocator keeps such buffers in
/// its own heap, so the peak moved from one run to the next (12.8 to
/// 16.7 MiB).
#[derive(Default)]
pub(super) struct Arena {
    chunks: Vec<Vec<u8>>,
    /// Where a record is made before it is copied into a chunk.
    making: Vec<u8>,
}

/// A chunk's size (a record larger than that gets a chunk of its own).
pub(super) const CHUNK: usize = 256 << 10;

impl Arena {
    /// Add the record `make` writes; where it is, or `None` when `make`
    /// could not write it.
    pub(super) fn add(&mut self, make: impl FnOnce(&mut Vec<u8>) -> Option<()>) -> Option<Src> {
        let mut record = std::mem::take(&mut self.making);
        record.clear();
        let src = make(&mut record).and_then(|()| self.put(&record));
        self.making = record;
        src
    }

    fn put(&mut self, record: &[u8]) -> Option<Src> {
        let fits = self
            .chunks
            .last()
            .is_some_and(|c| c.capacity() - c.len() >= record.len());
        if !fits {
            self.chunks
                .push(Vec::with_capacity(CHUNK.max(record.len())));
        }
        let index = u32::try_from(self.chunks.len().checked_sub(1)?).ok()?;
        let chunk = self.chunks.last_mut()?;
        let start = u32::try_from(chunk.len()).ok()?;
        let end = u32::try_from(chunk.len() + record.len()).ok()?;
        chunk.extend_from_slice(record);
        Some(Src::New(index, start, end))
    }

    pub(super) fn get(&self, chunk: u32, start: u32, end: u32) -> Option<&[u8]> {
        let chunk = self.chunks.get(usize::try_from(chunk).ok()?)?;
        chunk.get(usize::try_from(start).ok()?..usize::try_from(end).ok()?)
    }
}

/// What a whole walk found: each worker's part, and descriptor counts (the
/// most kept open at once, and how many were left open: none).
pub(super) struct Walked {
    pub outs: Vec<Out>,
    pub peak_fds: usize,
    pub fds_left: usize,
}

/// Walk `project` with up to `workers()` workers (asked only when more
/// than one could help), reusing the records of `old` (written by a walk
/// that started at `started`).
pub(super) fn run(
    project: &Path,
    old: Option<&Cache>,
    started: i128,
    workers: &dyn Fn() -> usize,
) -> Walked {
    let root = Item {
        rel: Vec::new(),
        at: At::Root,
        lo: 0,
        hi: old.map_or(0, Cache::len),
        skip: 0,
    };
    let fds = FdCount::default();
    let shared = Shared {
        project,
        old,
        started,
        queue: Mutex::new(Queue {
            items: vec![root],
            busy: 1,
            done: false,
        }),
        wake: Condvar::new(),
        idle: AtomicUsize::new(0),
        fds: &fds,
    };
    let outs = std::thread::scope(|s| {
        let sh = &shared;
        // This thread walks alone first: a small tree is done before other
        // threads would have started.
        let mut first = Worker::default();
        first.walk(sh, Some(SOLO));
        let mut handles = Vec::new();
        let workers = if first.stack.is_empty() {
            1
        } else {
            workers().clamp(1, MAX_WORKERS)
        };
        for _ in 1..workers {
            sh.lock().busy += 1;
            let spawned = std::thread::Builder::new().spawn_scoped(s, move || {
                let mut worker = Worker::default();
                worker.walk(sh, None);
                worker.out
            });
            match spawned {
                Ok(h) => handles.push(h),
                // One worker fewer; this thread still walks.
                Err(_) => sh.lock().busy -= 1,
            }
        }
        first.walk(sh, None);
        let mut outs = vec![first.out];
        for h in handles {
            match h.join() {
                Ok(out) => outs.push(out),
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        outs
    });
    drop(shared);
    Walked {
        outs,
        peak_fds: fds.peak.load(Relaxed),
        fds_left: fds.open.load(Relaxed),
    }
}

/// A directory descriptor, closed on drop.
struct Fd<'s> {
    fd: OwnedFd,
    /// The count it is part of (see [`FD_BUDGET`]), if any.
    counted: Option<&'s AtomicUsize>,
}

impl Fd<'_> {
    fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl Drop for Fd<'_> {
    fn drop(&mut self) {
        if let Some(count) = self.counted {
            count.fetch_sub(1, Relaxed);
        }
    }
}

/// Opens a directory only to reach its entries (where the system can).
#[cfg(any(target_os = "linux", target_os = "android"))]
const REACH: OFlags = OFlags::PATH;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const REACH: OFlags = OFlags::empty();

/// What a directory is opened for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Open {
    /// To stat it and reach its entries, not to read it (`O_PATH`, where
    /// there is one: cheaper, and no read permission needed).
    Reach,
    /// To read it.
    Read,
}

/// How a directory to visit is reached.
enum At<'s> {
    /// The project itself, by its path.
    Root,
    /// By name, from its parent's descriptor.
    Parent(Arc<Fd<'s>>),
    /// By absolute path (its parent's descriptor was not kept).
    Path,
}

/// A directory to visit.
struct Item<'s> {
    /// Its path relative to the project (empty for the root).
    rel: Vec<u8>,
    at: At<'s>,
    /// The previous cache's records `lo..hi` hold its own, if any; their
    /// paths share their first `skip` bytes with `rel`.
    lo: u32,
    hi: u32,
    skip: usize,
}

struct Queue<'s> {
    items: Vec<Item<'s>>,
    /// Workers not waiting for work.
    busy: usize,
    /// Every worker waited at once: nothing is left to do.
    done: bool,
}

struct Shared<'s> {
    project: &'s Path,
    old: Option<&'s Cache>,
    started: i128,
    queue: Mutex<Queue<'s>>,
    wake: Condvar,
    /// Workers waiting for work (read without the lock, to decide whether
    /// to share).
    idle: AtomicUsize,
    fds: &'s FdCount,
}

/// Descriptors kept open for the directories below them, and the most at
/// once.
#[derive(Default)]
struct FdCount {
    open: AtomicUsize,
    peak: AtomicUsize,
}

impl<'s> Shared<'s> {
    fn lock(&self) -> MutexGuard<'_, Queue<'s>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next directory from the shared queue, waiting for one while any
    /// other worker is busy (it may share); `None` when all are done.
    fn take(&self) -> Option<Item<'s>> {
        let mut q = self.lock();
        loop {
            if let Some(item) = q.items.pop() {
                return Some(item);
            }
            if q.done {
                return None;
            }
            q.busy = q.busy.saturating_sub(1);
            if q.busy == 0 {
                q.done = true;
                self.wake.notify_all();
                return None;
            }
            self.idle.fetch_add(1, Relaxed);
            q = self.wake.wait(q).unwrap_or_else(PoisonError::into_inner);
            self.idle.fetch_sub(1, Relaxed);
            q.busy += 1;
        }
    }

    /// Hand the older half of a worker's stack to the others.
    fn give(&self, stack: &mut Vec<Item<'s>>) {
        let half = stack.len() / 2;
        self.lock().items.extend(stack.drain(..half));
        self.wake.notify_all();
    }

    /// A directory's absolute path.
    fn path(&self, rel: &[u8]) -> PathBuf {
        if rel.is_empty() {
            self.project.to_path_buf()
        } else {
            self.project.join(OsStr::from_bytes(rel))
        }
    }

    /// Keep `fd` open for the directories below it, within the budget.
    fn keep(&self, mut fd: Fd<'s>) -> At<'s> {
        let held = self.fds.open.fetch_add(1, Relaxed) + 1;
        if held > FD_BUDGET {
            self.fds.open.fetch_sub(1, Relaxed);
            return At::Path;
        }
        self.fds.peak.fetch_max(held, Relaxed);
        fd.counted = Some(&self.fds.open);
        At::Parent(Arc::new(fd))
    }
}

/// Ends the walk if a worker panics, so that none waits forever.
struct EndOnPanic<'a, 's>(&'a Shared<'s>);

impl Drop for EndOnPanic<'_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.lock().done = true;
            self.0.wake.notify_all();
        }
    }
}

/// One worker: what it found, and what it has left to visit.
#[derive(Default)]
struct Worker<'s> {
    out: Out,
    scratch: Scratch,
    stack: Vec<Item<'s>>,
}

impl<'s> Worker<'s> {
    /// Walk until there is nothing left to do, or `limit` directories
    /// were visited.
    fn walk(&mut self, sh: &Shared<'s>, limit: Option<usize>) {
        let _end = EndOnPanic(sh);
        while limit.is_none_or(|l| self.out.visited < l) {
            let Some(item) = self.stack.pop().or_else(|| sh.take()) else {
                break;
            };
            visit(sh, &mut self.out, &mut self.scratch, item, &mut self.stack);
            if self.stack.len() > 1 && sh.idle.load(Relaxed) > 0 {
                sh.give(&mut self.stack);
            }
        }
    }
}

/// The last component of a relative path (all of it at the top level).
fn last(rel: &[u8]) -> &[u8] {
    rel.rsplit(|&b| b == b'/').next().unwrap_or_default()
}

/// The parent of a relative path (empty at the top level).
fn parent(rel: &[u8]) -> &[u8] {
    rel.iter()
        .rposition(|&b| b == b'/')
        .and_then(|i| rel.get(..i))
        .unwrap_or_default()
}

fn is_dir(st: &FileStat) -> bool {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
}

fn stat(sh: &Shared<'_>, at: &At<'_>, rel: &[u8]) -> nix::Result<FileStat> {
    let flags = AtFlags::AT_SYMLINK_NOFOLLOW;
    match at {
        At::Root => nix::sys::stat::fstatat(None, sh.project, flags),
        At::Parent(fd) => nix::sys::stat::fstatat(Some(fd.raw()), last(rel), flags),
        At::Path => nix::sys::stat::fstatat(None, &sh.path(rel), flags),
    }
}

/// Open a directory, never through a symlink (nor anything but a
/// directory: no FIFO to block on); and stat it through its descriptor.
fn open<'s>(
    sh: &Shared<'s>,
    at: &At<'s>,
    rel: &[u8],
    how: Open,
) -> nix::Result<(Fd<'s>, FileStat)> {
    match at {
        At::Root => open_at(None, sh.project.as_os_str(), how),
        At::Parent(fd) => open_at(Some(&fd.fd), OsStr::from_bytes(last(rel)), how),
        At::Path => open_at(None, sh.path(rel).as_os_str(), how),
    }
}

fn open_at<'s>(
    dirfd: Option<&OwnedFd>,
    path: &OsStr,
    how: Open,
) -> nix::Result<(Fd<'s>, FileStat)> {
    let mut flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    if how == Open::Reach {
        flags |= REACH;
    }
    let opened = match dirfd {
        Some(dir) => rustix::fs::openat(dir, path, flags, rustix::fs::Mode::empty()),
        None => rustix::fs::openat(rustix::fs::CWD, path, flags, rustix::fs::Mode::empty()),
    };
    let fd = Fd {
        fd: opened.map_err(|e| Errno::from_raw(e.raw_os_error()))?,
        counted: None,
    };
    let st = nix::sys::stat::fstat(fd.raw())?;
    Ok((fd, st))
}

/// After a directory could not be opened: when that was refused, note
/// what cannot be searched, so that it is masked whole. Either its parent
/// (listed but not searchable, `chmod 444`: the directory could not be
/// stat'ed either), or the directory itself (it may not be read). Gone, or
/// no directory (a link is never followed): nothing to walk. Any other
/// failure (out of descriptors, an I/O error, a path too long): what it
/// holds is unknown, so it is masked whole too.
fn refused(sh: &Shared<'_>, at: &At<'_>, rel: &[u8], e: Errno, out: &mut Out) {
    match e {
        Errno::EACCES => {}
        Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP => return,
        _ => {
            out.unreadable.push(sh.path(rel));
            return;
        }
    }
    match stat(sh, at, rel) {
        Err(Errno::EACCES) => out.unreadable.extend(match at {
            At::Root => sh.project.parent().map(Path::to_path_buf),
            _ => Some(sh.path(parent(rel))),
        }),
        Ok(st) if is_dir(&st) => {
            out.read += 1;
            out.unreadable.push(sh.path(rel));
        }
        _ => {}
    }
}

/// One directory: reused from the cache when its stamp is unchanged and
/// settled before the walk that cached it, else read; its subdirectories
/// go on `stack`, its `.env` candidates are resolved.
///
/// Its stamp is taken before it is read (a change after that shows next
/// time), through the descriptor it is read from; never through a symlink.
fn visit<'s>(
    sh: &Shared<'s>,
    out: &mut Out,
    scratch: &mut Scratch,
    item: Item<'s>,
    stack: &mut Vec<Item<'s>>,
) {
    let Item {
        rel,
        at,
        lo,
        hi,
        skip,
    } = item;
    out.visited += 1;
    let old = sh.old.and_then(|c| {
        let i = c.find(lo, hi, &rel, skip)?;
        Some((i, c.body(i)?, c))
    });
    // Where the records under this directory are: after its own, or, when
    // it has none, where its parent's said.
    let below = match &old {
        Some((i, _, c)) => (i + 1, c.subtree_end(*i, hi), rel.len() + 1),
        None => (lo, hi, skip),
    };
    // A directory with a record is stat'ed first; through a descriptor if
    // it has subdirectories to walk, which the descriptor then reaches.
    let mut fd = None;
    if let Some((i, body, _)) = old {
        let walks_on = body.subdirs.clone().any(|n| !is_pruned(n));
        let st = if walks_on {
            open(sh, &at, &rel, Open::Reach).map(|(f, st)| {
                fd = Some(f);
                st
            })
        } else {
            stat(sh, &at, &rel)
        };
        let st = match st {
            Ok(st) => st,
            Err(e) => return refused(sh, &at, &rel, e, out),
        };
        if !is_dir(&st) {
            return;
        }
        if body.stamp == Stamp::from_stat(&st) && body.stamp.settled(sh.started) {
            out.reused += 1;
            let dir = Listed { sh, rel, at, below };
            return dir.names(out, stack, fd, body.subdirs, body.envs, Some(Src::Old(i)));
        }
    }
    // Read it (through a descriptor of its own: the one that stat'ed it, if
    // any, may not read).
    drop(fd);
    let (fd, st) = match open(sh, &at, &rel, Open::Read) {
        Ok(opened) => opened,
        Err(e) => return refused(sh, &at, &rel, e, out),
    };
    out.read += 1;
    let complete = read(&fd, scratch);
    // An incompletely read directory is left out of the cache, so it is
    // read again.
    let src = complete
        .then(|| record_read(out, &rel, &Stamp::from_stat(&st), scratch))
        .flatten();
    let dir = Listed { sh, rel, at, below };
    dir.names(out, stack, Some(fd), scratch.subdirs(), scratch.envs(), src);
}

/// Record a directory just read in the worker's arena, as the cache keeps
/// it; `None` (nothing recorded: it is read again next time) for a name
/// too long for the layout, a time past 64 bits, or a record past the
/// 32-bit offsets the cache file itself is bounded by.
fn record_read(out: &mut Out, rel: &[u8], stamp: &Stamp, scratch: &Scratch) -> Option<Src> {
    out.arena
        .add(|record| put_record(record, rel, stamp, scratch.subdirs(), scratch.envs()))
}

/// A directory found, to be walked on from its names.
struct Listed<'a, 's> {
    sh: &'a Shared<'s>,
    rel: Vec<u8>,
    at: At<'s>,
    /// The search range for its subdirectories' records (see [`Item`]).
    below: (u32, u32, usize),
}

impl<'s> Listed<'_, 's> {
    /// Walk on from the directory's names: its subdirectories go on
    /// `stack` (reached from `fd`, opened now if needed), `.git` entries and
    /// a bare repository are noted, `.env` candidates resolved; then it is
    /// recorded for the cache (`src`) unless it could not be walked.
    fn names<'n>(
        self,
        out: &mut Out,
        stack: &mut Vec<Item<'s>>,
        fd: Option<Fd<'s>>,
        subdirs: impl Iterator<Item = &'n [u8]> + Clone,
        envs: impl Iterator<Item = &'n [u8]> + Clone,
        mut src: Option<Src>,
    ) {
        let sh = self.sh;
        let rel = self.rel;
        let mut children = subdirs.clone().filter(|n| !is_pruned(n)).peekable();
        if children.peek().is_some() {
            // Opened already, unless the cache said it had nothing to walk
            // and it does (never expected: then opened now).
            let fd = match fd {
                Some(fd) => Some(fd),
                None => match open(sh, &self.at, &rel, Open::Reach) {
                    Ok((fd, _)) => Some(fd),
                    Err(e) => {
                        refused(sh, &self.at, &rel, e, out);
                        src = None;
                        None
                    }
                },
            };
            if let Some(fd) = fd {
                let at = sh.keep(fd);
                let (lo, hi, skip) = self.below;
                let first = stack.len();
                for name in children {
                    let mut child = out.spare.pop().unwrap_or_default();
                    child.clear();
                    child.reserve(rel.len() + 1 + name.len());
                    child.extend_from_slice(&rel);
                    if !rel.is_empty() {
                        child.push(b'/');
                    }
                    child.extend_from_slice(name);
                    let at = match &at {
                        At::Parent(fd) => At::Parent(Arc::clone(fd)),
                        _ => At::Path,
                    };
                    stack.push(Item {
                        rel: child,
                        at,
                        lo,
                        hi,
                        // The root's path is empty: no `/` follows it.
                        skip: if rel.is_empty() { 0 } else { skip },
                    });
                }
                // Popped in name order: the order the cache is written in.
                stack.get_mut(first..).unwrap_or_default().reverse();
            }
        }
        let git_dir = subdirs.clone().any(|n| n == b".git");
        let mut envs = envs.peekable();
        if git_dir || envs.peek().is_some() {
            let path = sh.path(&rel);
            // As the watcher's answers are resolved (`super::note_entry`).
            let mut noted = super::Found::default();
            let names = git_dir.then_some(&b".git"[..]).into_iter().chain(envs);
            for name in names {
                super::note_entry(&path, name, &mut noted);
            }
            out.found.append(&mut noted.env_files);
            out.git_entries.append(&mut noted.git_entries);
            out.bare.append(&mut noted.bare);
            out.unreadable.append(&mut noted.unreadable);
        }
        if let Some(src) = src {
            out.records.push(src);
        }
        if out.spare.len() < SPARE {
            out.spare.push(rel);
        }
    }
}

/// One directory's entries as read: names in one buffer, and where each is.
#[derive(Default)]
struct Scratch {
    names: Vec<u8>,
    subdirs: Vec<(usize, usize)>,
    envs: Vec<(usize, usize)>,
    /// Where directory entries are read into (see [`entries`]).
    buf: Vec<u8>,
}

impl Scratch {
    fn name(&self, at: (usize, usize)) -> &[u8] {
        self.names.get(at.0..at.1).unwrap_or_default()
    }

    fn subdirs(&self) -> impl ExactSizeIterator<Item = &[u8]> + Clone {
        self.subdirs.iter().map(|&at| self.name(at))
    }

    fn envs(&self) -> impl ExactSizeIterator<Item = &[u8]> + Clone {
        self.envs.iter().map(|&at| self.name(at))
    }

    fn push(&mut self, dir: bool, name: &[u8]) {
        let at = (self.names.len(), self.names.len() + name.len());
        self.names.extend_from_slice(name);
        if dir {
            self.subdirs.push(at);
        } else {
            self.envs.push(at);
        }
    }

    /// Each list sorted, as the cache keeps it.
    fn sort(&mut self) {
        let Scratch {
            names,
            subdirs,
            envs,
            ..
        } = self;
        for list in [subdirs, envs] {
            list.sort_unstable_by(|a, b| names.get(a.0..a.1).cmp(&names.get(b.0..b.1)));
            list.dedup_by(|a, b| names.get(a.0..a.1) == names.get(b.0..b.1));
        }
    }
}

/// Read one directory's relevant entries into `scratch`: its
/// subdirectories, and the entries other than directories that start with
/// `.env` (any case), a `.git` file or link, and a `HEAD` (what makes a
/// directory a git directory: see [`git_dir_like`]); [`is_env_file_name`]
/// is applied when resolving. Whether the listing is complete.
fn read(fd: &Fd<'_>, scratch: &mut Scratch) -> bool {
    scratch.names.clear();
    scratch.subdirs.clear();
    scratch.envs.clear();
    let mut buf = std::mem::take(&mut scratch.buf);
    let mut complete = true;
    let mut entry = |name: &[u8], typed: Option<bool>| {
        if name == b"." || name == b".." {
            return;
        }
        // From the directory entry's type when the file system gives it;
        // never follows a symlink.
        let is_dir_entry = match typed {
            Some(d) => d,
            None => {
                match nix::sys::stat::fstatat(Some(fd.raw()), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
                    Ok(st) => is_dir(&st),
                    Err(_) => {
                        complete = false;
                        return;
                    }
                }
            }
        };
        if is_dir_entry {
            scratch.push(true, name);
        } else if may_be_env(name) || name == b".git" || name == b"HEAD" {
            scratch.push(false, name);
        }
    };
    let listed = entries(fd, &mut buf, &mut entry);
    scratch.buf = buf;
    let complete = complete && listed;
    scratch.sort();
    complete
}

/// Each entry of the directory `fd` (its name, and whether it is a
/// directory when the file system says); whether all were listed.
///
/// Straight from `getdents64` into a buffer kept between directories:
/// through `opendir` each directory cost four more system calls (an
/// `fstat` and two `fcntl` in `fdopendir`, an `lseek` when the stream was
/// dropped), nearly half of a first walk's.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn entries(fd: &Fd<'_>, buf: &mut Vec<u8>, each: &mut dyn FnMut(&[u8], Option<bool>)) -> bool {
    use rustix::fs::RawDir;
    const BUF: usize = 32 * 1024;
    if buf.capacity() < BUF {
        buf.reserve(BUF);
    }
    let mut dir = RawDir::new(&fd.fd, buf.spare_capacity_mut());
    while let Some(entry) = dir.next() {
        let Ok(entry) = entry else {
            return false;
        };
        each(entry.file_name().to_bytes(), typed(entry.file_type()));
    }
    true
}

/// Each entry of the directory `fd` (see the Linux version), through the
/// C library's directory stream.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn entries(fd: &Fd<'_>, _buf: &mut Vec<u8>, each: &mut dyn FnMut(&[u8], Option<bool>)) -> bool {
    use rustix::fs::Dir;
    let Ok(mut dir) = Dir::read_from(&fd.fd) else {
        return false;
    };
    while let Some(entry) = dir.read() {
        let Ok(entry) = entry else {
            return false;
        };
        each(entry.file_name().to_bytes(), typed(entry.file_type()));
    }
    true
}

/// The names in the directory `dir` that `keep` accepts: none when it
/// cannot be opened, those read before an error otherwise. Read like the walk's directories,
/// without the allocation per entry that `std::fs::read_dir` makes: the
/// directories above a project (a home, `/var/tmp`) are listed on every
/// run and can hold hundreds of entries.
pub(super) fn names_in(dir: &Path, keep: fn(&[u8]) -> bool) -> Vec<OsString> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::openat(rustix::fs::CWD, dir, flags, rustix::fs::Mode::empty()) else {
        return Vec::new();
    };
    let fd = Fd { fd, counted: None };
    let mut found = Vec::new();
    let mut buf = Vec::new();
    entries(&fd, &mut buf, &mut |name, _| {
        if keep(name) {
            found.push(OsStr::from_bytes(name).to_owned());
        }
    });
    found
}

/// Whether a directory entry is a directory, when the file system says.
fn typed(t: rustix::fs::FileType) -> Option<bool> {
    match t {
        rustix::fs::FileType::Unknown => None,
        t => Some(t == rustix::fs::FileType::Directory),
    }
}

/// A record of a worker's: the previous cache's, or the worker's own.
fn record<'a>(old: Option<&'a Cache>, arena: &'a Arena, src: &Src) -> Option<&'a [u8]> {
    match *src {
        Src::Old(i) => old?.raw_record(i),
        Src::New(chunk, start, end) => arena.get(chunk, start, end),
    }
}

/// Sort each worker's records as the cache keeps them (in place: the
/// records themselves stay where they are). Each worker's are mostly in
/// order already (it walks depth first, in name order): a stable sort
/// merges such runs.
pub(super) fn sort_records(old: Option<&Cache>, outs: &mut [Out]) {
    for out in outs {
        let Out { records, arena, .. } = out;
        let rel = |src: &Src| record(old, arena, src).map_or(&[][..], record_rel);
        records.sort_by(|a, b| super::cache::cmp_rel(rel(a), rel(b)));
    }
}

/// The records of a new cache, from a walk's parts sorted by
/// [`sort_records`]: each as the cache keeps it, merged in the cache's
/// order, without duplicates; `None` for a record that cannot be found
/// (never expected: then the cache is not written). No list of them all
/// is made: a first walk of a big tree holds every record once.
#[derive(Clone)]
pub(super) struct Merged<'a> {
    old: Option<&'a Cache>,
    /// Each worker's part, and how many of its records were taken.
    parts: Vec<(&'a Out, usize)>,
    last: Option<&'a [u8]>,
    /// A record could not be found: said once, then the end.
    failed: bool,
}

impl<'a> Merged<'a> {
    pub fn new(old: Option<&'a Cache>, outs: &'a [Out]) -> Merged<'a> {
        Merged {
            old,
            parts: outs.iter().map(|o| (o, 0)).collect(),
            last: None,
            failed: false,
        }
    }
}

impl<'a> Iterator for Merged<'a> {
    type Item = Option<&'a [u8]>;

    fn next(&mut self) -> Option<Option<&'a [u8]>> {
        if self.failed {
            return None;
        }
        loop {
            // The first of the parts' next records.
            let mut best: Option<(usize, &'a [u8])> = None;
            for (k, (out, taken)) in self.parts.iter().enumerate() {
                let Some(src) = out.records.get(*taken) else {
                    continue;
                };
                let Some(rec) = record(self.old, &out.arena, src) else {
                    self.failed = true;
                    return Some(None);
                };
                let first = best.is_none_or(|(_, b)| {
                    super::cache::cmp_rel(record_rel(rec), record_rel(b)).is_lt()
                });
                if first {
                    best = Some((k, rec));
                }
            }
            let (k, rec) = best?;
            if let Some((_, taken)) = self.parts.get_mut(k) {
                *taken += 1;
            }
            if self.last.is_some_and(|l| record_rel(l) == record_rel(rec)) {
                continue;
            }
            self.last = Some(rec);
            return Some(Some(rec));
        }
    }
}
