//! The watcher's picture of one project: every directory the walk would
//! enter, each under an inotify watch, with the names the walk would look
//! at (subdirectories, `.env` candidates, `.git`, `HEAD`), kept current by
//! the kernel's events.
//!
//! How it stays exact:
//!
//! * A directory is opened one component at a time from the root with
//!   `O_NOFOLLOW`, watched through its descriptor (`/proc/self/fd/N`, so the
//!   watch is on the very inode that is then read), and only then listed:
//!   whatever changes after the listing comes as an event.
//! * Events are applied in the order the kernel queued them. A listing made
//!   while later events are still queued may show a newer state; the
//!   queued events then only repeat it (a create already seen, a removal
//!   that removes), so the picture converges to the tree's state at the
//!   moment the queue was drained.
//! * A directory moved in, or created, is walked in full; one moved or
//!   deleted away is dropped with every watch below it.
//! * Whatever it cannot follow ends it, and sbx walks the tree itself: a
//!   lost event (queue overflow), no more watches, a file system whose
//!   changes may not all raise events (network, FUSE), a root moved or
//!   deleted, a parent it cannot reopen for any reason but a pending
//!   rename. Nothing stale is ever answered.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ffi::OsStr;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::dir::{Dir, Type};
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};
use nix::sys::stat::Mode;
use nix::unistd::AccessFlags;

use super::super::{is_pruned, may_be_env};

/// Why the picture can no longer be trusted: the watcher ends, and sbx
/// walks the tree itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Broken {
    /// Events were lost (the kernel's queue overflowed).
    Overflow,
    /// No more inotify watches (`fs.inotify.max_user_watches`), or the
    /// limit set for a test.
    OutOfWatches,
    /// A directory lies on a file system whose changes may not all raise
    /// events here (its name).
    Filesystem(String),
    /// The root was moved, deleted or unmounted.
    RootGone,
    /// Deeper than the watcher follows.
    TooDeep,
    /// A mount point inside the project (now or since the watcher
    /// started).
    Mounts,
    /// Something else failed (what).
    Failed(String),
}

impl Broken {
    /// Whether trying again soon would meet the same wall: then no watcher
    /// is started again for a while.
    pub fn lasting(&self) -> bool {
        matches!(
            self,
            Broken::OutOfWatches | Broken::Filesystem(_) | Broken::TooDeep | Broken::Mounts
        )
    }
}

impl std::fmt::Display for Broken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Broken::Overflow => write!(f, "the kernel's event queue overflowed"),
            Broken::OutOfWatches => write!(f, "out of inotify watches"),
            Broken::Filesystem(name) => write!(f, "a directory on a {name} file system"),
            Broken::RootGone => write!(f, "the project was moved or deleted"),
            Broken::TooDeep => write!(f, "directories nested too deep"),
            Broken::Mounts => write!(f, "a mount point inside the project"),
            Broken::Failed(what) => write!(f, "{what}"),
        }
    }
}

/// File systems on which every change made on this machine raises inotify
/// events: local ones. On a network or FUSE file system another machine
/// (or the FUSE daemon) can change the tree without an event.
const LOCAL: &[(&str, i64)] = &[
    ("ext4", 0xEF53),
    ("xfs", 0x5846_5342),
    ("btrfs", 0x9123_683E),
    ("tmpfs", 0x0102_1994),
    ("f2fs", 0xF2F5_2010),
    ("zfs", 0x2FC1_2FC1),
    ("overlay", 0x794C_7630),
    ("bcachefs", 0xCA45_1A4E),
];

/// The deepest directory followed (each level holds a descriptor while
/// its subdirectories are walked).
const MAX_DEPTH: usize = 2048;

const MASK: AddWatchFlags = AddWatchFlags::IN_CREATE
    .union(AddWatchFlags::IN_DELETE)
    .union(AddWatchFlags::IN_MOVED_FROM)
    .union(AddWatchFlags::IN_MOVED_TO)
    .union(AddWatchFlags::IN_ATTRIB)
    .union(AddWatchFlags::IN_DELETE_SELF)
    .union(AddWatchFlags::IN_MOVE_SELF)
    // Not IN_DONT_FOLLOW: the path given is always `/proc/self/fd/N`, a
    // link to the directory opened (without following links).
    .union(AddWatchFlags::IN_ONLYDIR);

/// A subdirectory as its parent records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Child {
    /// Walked, under this watch.
    Watched(WatchDescriptor),
    /// Never walked (`node_modules`, `.git`, ...).
    Pruned,
    /// Could not be opened (no permission): reported, so masked whole.
    Closed,
}

/// One watched directory.
#[derive(Debug)]
struct Node {
    /// Its parent and its name there; `None` for the root.
    parent: Option<(WatchDescriptor, Vec<u8>)>,
    /// Device and inode, to tell it from another directory at its path.
    id: (u64, u64),
    dirs: HashMap<Vec<u8>, Child>,
    /// Entries other than directories that the walk looks at.
    names: BTreeSet<Vec<u8>>,
    /// It may not be listed or searched (mode changed after it was
    /// watched): reported, so masked whole.
    closed: bool,
}

/// What a query gets: paths relative to the root (`a/b`, empty for the
/// root itself).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Answer {
    /// A directory and one of its entries the walk looks at: a `.env`
    /// candidate, `HEAD`, or `.git` of any type.
    pub entries: Vec<(Vec<u8>, Vec<u8>)>,
    /// Directories that may not be listed or searched.
    pub closed: Vec<Vec<u8>>,
    /// How many directories are watched.
    pub watched: usize,
}

pub struct Tree {
    root: PathBuf,
    inotify: Inotify,
    nodes: HashMap<WatchDescriptor, Node>,
    /// The root's watch (`None` only while it is being added).
    root_wd: Option<WatchDescriptor>,
    max_watches: usize,
    /// Devices seen, with whether their file system is local.
    devices: HashMap<u64, bool>,
    /// Directories to list again in full: an event about them came while
    /// their path led elsewhere (a directory above was renamed away and
    /// back), so what it said could not be looked at then.
    relist: HashSet<WatchDescriptor>,
    /// The last answer, kept until an event or a listing may change it: an
    /// unchanged tree is answered without going through its directories.
    last: Option<Answer>,
    /// The mount the root lies on: every directory watched must lie on it
    /// too (a mount inside the tree, even one moved in, raises no event
    /// when it goes and shows what it covered).
    mount: u64,
}

impl Tree {
    /// Watch and walk `root` (a real path), with at most `max_watches`
    /// watches.
    pub fn build(root: &Path, max_watches: usize) -> Result<Tree, Broken> {
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| Broken::Failed(format!("inotify: {e}")))?;
        let dir = open_dir(None, root.as_os_str().as_bytes())
            .map_err(|e| Broken::Failed(format!("opening {}: {e}", root.display())))?;
        let mount = mount_id(&dir)?;
        let mut tree = Tree {
            mount,
            root: root.to_path_buf(),
            inotify,
            nodes: HashMap::new(),
            root_wd: None,
            max_watches,
            devices: HashMap::new(),
            relist: HashSet::new(),
            last: None,
        };
        tree.root_wd = Some(tree.add(None, dir, 0)?);
        Ok(tree)
    }

    /// The inotify descriptor, for `poll`.
    pub fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        use std::os::fd::AsFd;
        self.inotify.as_fd()
    }

    /// Apply every event queued so far. After it returns, the picture holds
    /// every change made before the call.
    pub fn drain(&mut self) -> Result<(), Broken> {
        loop {
            match self.inotify.read_events() {
                Ok(events) if events.is_empty() => break,
                Ok(events) => {
                    self.last = None;
                    for event in events {
                        self.apply(event)?;
                    }
                }
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => continue,
                Err(e) => return Err(Broken::Failed(format!("reading events: {e}"))),
            }
        }
        // The queue is empty: list again what could not be looked at.
        let pending: Vec<WatchDescriptor> = self.relist.drain().collect();
        if !pending.is_empty() {
            self.last = None;
        }
        for wd in pending {
            if !self.relist_one(wd)? {
                self.relist.insert(wd);
            }
        }
        Ok(())
    }

    /// Drain until nothing is left to list again, and check that the
    /// root's path still leads to the root watched: then the picture is the
    /// tree's state now, fit to answer with.
    pub fn settle(&mut self) -> Result<(), Broken> {
        for _ in 0..8 {
            self.drain()?;
            if self.relist.is_empty() {
                let root = open_dir(None, self.root.as_os_str().as_bytes())
                    .map_err(|_| Broken::RootGone)?;
                let watched = self
                    .root_wd
                    .and_then(|wd| self.nodes.get(&wd))
                    .map(|n| n.id);
                // A directory above the root renamed: its path leads to
                // another directory now.
                return if fstat_id(&root)? == watched {
                    Ok(())
                } else {
                    Err(Broken::RootGone)
                };
            }
        }
        Err(Broken::Failed(
            "directories kept moving while being read".into(),
        ))
    }

    /// List a directory again in full and look at each of its names, old
    /// and new. False when its path still does not lead to it.
    fn relist_one(&mut self, wd: WatchDescriptor) -> Result<bool, Broken> {
        if !self.nodes.contains_key(&wd) {
            return Ok(true);
        }
        let dir = if Some(wd) == self.root_wd {
            match self.reopen(wd)? {
                Some(dir) => dir,
                None => return Err(Broken::RootGone),
            }
        } else {
            let Some((parent_dir, name)) = self.reopen_parent_of(wd)? else {
                return Ok(false);
            };
            let parent = self
                .nodes
                .get(&wd)
                .and_then(|n| n.parent.as_ref())
                .map(|p| p.0);
            let Some(parent) = parent else {
                return Ok(true);
            };
            match open_dir(Some(parent_dir.as_raw_fd()), &name) {
                Ok(dir) if fstat_id(&dir)? == self.nodes.get(&wd).map(|n| n.id) => dir,
                Err(Errno::EACCES) => {
                    if let Some(node) = self.nodes.get_mut(&wd) {
                        node.closed = true;
                    }
                    return Ok(true);
                }
                // Another directory or entry there now: the parent's name
                // is looked at again, which replaces this one.
                _ => {
                    self.examine_in(parent, &parent_dir, name)?;
                    return Ok(true);
                }
            }
        };
        let mut names: BTreeSet<Vec<u8>> = BTreeSet::new();
        if let Some(node) = self.nodes.get(&wd) {
            names.extend(node.names.iter().cloned());
            names.extend(node.dirs.keys().cloned());
        }
        let mut listed = Dir::openat(
            Some(dir.as_raw_fd()),
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| Broken::Failed(format!("listing again: {e}")))?;
        names.extend(entries(&mut listed)?.into_iter().map(|(name, _)| name));
        let closed = !accessible(&dir);
        if let Some(node) = self.nodes.get_mut(&wd) {
            node.closed = closed;
        }
        for name in names {
            self.examine_in(wd, &dir, name)?;
        }
        Ok(true)
    }

    /// What the walk would find now (call [`Tree::settle`] first).
    pub fn answer(&mut self) -> Answer {
        if let Some(last) = &self.last {
            return last.clone();
        }
        let answer = self.compute_answer();
        self.last = Some(answer.clone());
        answer
    }

    fn compute_answer(&self) -> Answer {
        let mut answer = Answer {
            watched: self.nodes.len(),
            ..Answer::default()
        };
        for (&wd, node) in &self.nodes {
            let interesting = node.closed
                || !node.names.is_empty()
                || node
                    .dirs
                    .iter()
                    .any(|(name, c)| *c == Child::Closed || name == b".git");
            if !interesting {
                continue;
            }
            let rel = self.rel(wd);
            if node.closed {
                answer.closed.push(rel.clone());
            }
            for name in &node.names {
                answer.entries.push((rel.clone(), name.clone()));
            }
            for (name, child) in &node.dirs {
                if name == b".git" {
                    answer.entries.push((rel.clone(), name.clone()));
                }
                if *child == Child::Closed {
                    answer.closed.push(join(&rel, name));
                }
            }
        }
        answer.entries.sort();
        answer.closed.sort();
        answer
    }

    /// The path of a node relative to the root.
    fn rel(&self, wd: WatchDescriptor) -> Vec<u8> {
        let mut parts: Vec<&[u8]> = Vec::new();
        let mut at = self.nodes.get(&wd);
        while let Some((parent, name)) = at.and_then(|n| n.parent.as_ref()) {
            parts.push(name);
            at = self.nodes.get(parent);
        }
        parts.reverse();
        parts.join(&b'/')
    }

    /// One event. An event about a name only says which name to look at
    /// again: what the directory holds now under that name is what counts
    /// (so the order of a pair of events, as `renameat2(RENAME_EXCHANGE)`
    /// queues them, does not matter).
    fn apply(&mut self, event: InotifyEvent) -> Result<(), Broken> {
        let mask = event.mask;
        if mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
            return Err(Broken::Overflow);
        }
        let Some(node) = self.nodes.get(&event.wd) else {
            // A watch already dropped (its directory moved away).
            return Ok(());
        };
        let is_root = Some(event.wd) == self.root_wd;
        if mask.contains(AddWatchFlags::IN_UNMOUNT) {
            return Err(Broken::RootGone);
        }
        if mask.contains(AddWatchFlags::IN_IGNORED) {
            // The watch is gone: its directory was deleted.
            if is_root {
                return Err(Broken::RootGone);
            }
            self.drop_node(event.wd);
            return Ok(());
        }
        let Some(name) = event.name else {
            if is_root
                && mask.intersects(AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_MOVE_SELF)
            {
                return Err(Broken::RootGone);
            }
            if mask.contains(AddWatchFlags::IN_ATTRIB) {
                self.recheck(event.wd)?;
            }
            return Ok(());
        };
        let name = name.into_encoded_bytes();
        // A name that is no directory, before or now, and no candidate
        // matters to nobody (a build's thousands of files).
        if mask.contains(AddWatchFlags::IN_ISDIR)
            || node.dirs.contains_key(&name)
            || is_candidate(&name)
        {
            self.examine(event.wd, name)?;
        }
        Ok(())
    }

    /// Look at `name` in `parent` as it is now, and make the picture say
    /// the same.
    fn examine(&mut self, parent: WatchDescriptor, name: Vec<u8>) -> Result<(), Broken> {
        let Some(dir) = self.reopen(parent)? else {
            // Its path leads elsewhere for now (moved, maybe back again
            // later): listed again in full once the queue is empty.
            self.relist.insert(parent);
            return Ok(());
        };
        self.examine_in(parent, &dir, name)
    }

    /// [`Tree::examine`] with the parent opened.
    fn examine_in(
        &mut self,
        parent: WatchDescriptor,
        dir: &Dir,
        name: Vec<u8>,
    ) -> Result<(), Broken> {
        let stat = match nix::sys::stat::fstatat(
            Some(dir.as_raw_fd()),
            name.as_slice(),
            nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
        ) {
            Ok(stat) => Some(stat),
            Err(Errno::ENOENT) => None,
            Err(Errno::EACCES) => {
                // It may no longer be searched: reported, so masked whole.
                if let Some(node) = self.nodes.get_mut(&parent) {
                    node.closed = true;
                }
                return Ok(());
            }
            Err(e) => return Err(Broken::Failed(format!("looking at an entry: {e}"))),
        };
        let Some(stat) = stat else {
            self.remove_entry(parent, &name);
            return Ok(());
        };
        if stat.st_mode & nix::libc::S_IFMT != nix::libc::S_IFDIR {
            self.remove_entry(parent, &name);
            if is_candidate(&name) {
                if let Some(node) = self.nodes.get_mut(&parent) {
                    node.names.insert(name);
                }
            }
            return Ok(());
        }
        let known = match self.nodes.get(&parent).and_then(|n| n.dirs.get(&name)) {
            Some(Child::Watched(wd)) => self.nodes.get(wd).is_some_and(|n| n.id == id(&stat)),
            Some(Child::Pruned) => true,
            Some(Child::Closed) | None => false,
        };
        if !known {
            self.remove_entry(parent, &name);
            self.attach(parent, dir, name)?;
        }
        Ok(())
    }

    /// Forget `name` in `parent`, with everything watched below it.
    fn remove_entry(&mut self, parent: WatchDescriptor, name: &[u8]) {
        let Some(node) = self.nodes.get_mut(&parent) else {
            return;
        };
        node.names.remove(name);
        if let Some(Child::Watched(wd)) = node.dirs.remove(name) {
            self.drop_node(wd);
        }
    }

    /// Drop a node and its subtree, and their watches.
    fn drop_node(&mut self, wd: WatchDescriptor) {
        let Some(node) = self.nodes.remove(&wd) else {
            return;
        };
        let _ = self.inotify.rm_watch(wd);
        if let Some((parent, name)) = &node.parent {
            if let Some(p) = self.nodes.get_mut(parent) {
                if p.dirs.get(name) == Some(&Child::Watched(wd)) {
                    p.dirs.remove(name);
                }
            }
        }
        for child in node.dirs.values() {
            if let Child::Watched(c) = child {
                self.drop_node(*c);
            }
        }
    }

    /// A directory `name` in `parent` (opened as `parent_dir`): record it,
    /// and walk it unless pruned.
    fn attach(
        &mut self,
        parent: WatchDescriptor,
        parent_dir: &Dir,
        name: Vec<u8>,
    ) -> Result<(), Broken> {
        let child = if is_pruned(&name) {
            Child::Pruned
        } else {
            let depth = self.depth(parent) + 1;
            match open_dir(Some(parent_dir.as_raw_fd()), &name) {
                Ok(dir) => Child::Watched(self.add(Some((parent, name.clone())), dir, depth)?),
                Err(Errno::EACCES) => Child::Closed,
                // Gone again, or not a directory any more: a queued event
                // says so.
                Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => return Ok(()),
                Err(e) => return Err(Broken::Failed(format!("opening a new directory: {e}"))),
            }
        };
        let Some(node) = self.nodes.get_mut(&parent) else {
            return Err(Broken::Failed("a directory met twice".into()));
        };
        node.dirs.insert(name, child);
        Ok(())
    }

    /// A watched directory's mode changed: whether it may still be listed.
    fn recheck(&mut self, wd: WatchDescriptor) -> Result<(), Broken> {
        let closed = match self.reopen_parent_of(wd)? {
            Some((parent_dir, name)) => nix::unistd::faccessat(
                Some(parent_dir.as_raw_fd()),
                name.as_slice(),
                AccessFlags::R_OK | AccessFlags::X_OK,
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .is_err(),
            None if Some(wd) == self.root_wd => {
                nix::unistd::access(&self.root, AccessFlags::R_OK | AccessFlags::X_OK).is_err()
            }
            // Its path leads elsewhere for now: listed again later.
            None => {
                self.relist.insert(wd);
                return Ok(());
            }
        };
        if let Some(node) = self.nodes.get_mut(&wd) {
            node.closed = closed;
        }
        Ok(())
    }

    /// The parent directory of a non-root node, opened, and the node's name.
    fn reopen_parent_of(&self, wd: WatchDescriptor) -> Result<Option<(Dir, Vec<u8>)>, Broken> {
        let Some((parent, name)) = self.nodes.get(&wd).and_then(|n| n.parent.clone()) else {
            return Ok(None);
        };
        Ok(self.reopen(parent)?.map(|d| (d, name)))
    }

    /// Open a watched directory again by its path, one component at a
    /// time. `None` when the path no longer leads to it: it was moved or
    /// deleted, and a queued event will say so.
    fn reopen(&self, wd: WatchDescriptor) -> Result<Option<Dir>, Broken> {
        let Some(node) = self.nodes.get(&wd) else {
            return Ok(None);
        };
        let mut dir = match open_dir(None, self.root.as_os_str().as_bytes()) {
            Ok(d) => d,
            Err(_) => return Err(Broken::RootGone),
        };
        let rel = self.rel(wd);
        if !rel.is_empty() {
            for part in rel.split(|&b| b == b'/') {
                dir = match open_dir(Some(dir.as_raw_fd()), part) {
                    Ok(d) => d,
                    Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => return Ok(None),
                    // A directory on the way may not be searched: this
                    // change cannot be followed.
                    Err(e) => return Err(Broken::Failed(format!("reopening a directory: {e}"))),
                };
            }
        }
        let stat = nix::sys::stat::fstat(dir.as_raw_fd())
            .map_err(|e| Broken::Failed(format!("fstat: {e}")))?;
        // Another directory at its path: it was moved, and a queued event
        // says so.
        Ok((id(&stat) == node.id).then_some(dir))
    }

    /// Whether `wd` is `ancestor` or lies below it in the picture.
    fn is_within(&self, wd: WatchDescriptor, ancestor: WatchDescriptor) -> bool {
        let mut at = Some(wd);
        while let Some(w) = at {
            if w == ancestor {
                return true;
            }
            at = self
                .nodes
                .get(&w)
                .and_then(|n| n.parent.as_ref().map(|(p, _)| *p));
        }
        false
    }

    fn depth(&self, wd: WatchDescriptor) -> usize {
        let mut depth = 0;
        let mut at = self.nodes.get(&wd);
        while let Some((parent, _)) = at.and_then(|n| n.parent.as_ref()) {
            depth += 1;
            at = self.nodes.get(parent);
        }
        depth
    }

    /// Watch, then list, one opened directory, and walk its subdirectories.
    fn add(
        &mut self,
        parent: Option<(WatchDescriptor, Vec<u8>)>,
        mut dir: Dir,
        depth: usize,
    ) -> Result<WatchDescriptor, Broken> {
        if depth > MAX_DEPTH {
            return Err(Broken::TooDeep);
        }
        if self.nodes.len() >= self.max_watches {
            return Err(Broken::OutOfWatches);
        }
        let stat = nix::sys::stat::fstat(dir.as_raw_fd())
            .map_err(|e| Broken::Failed(format!("fstat: {e}")))?;
        self.check_device(&dir, stat.st_dev)?;
        if mount_id(&dir)? != self.mount {
            return Err(Broken::Mounts);
        }
        let wd = watch(&self.inotify, &dir)?;
        if self.nodes.contains_key(&wd) {
            // Already in the picture at another place: it moved there
            // before the queued event that says so. It is walked again
            // here, under a new watch; the old place's event then finds
            // nothing to remove. Unless the new place lies below the old
            // one in the picture: that cannot be mended in place.
            if parent.as_ref().is_some_and(|(p, _)| self.is_within(*p, wd)) {
                return Err(Broken::Failed("a directory met twice".into()));
            }
            // Still at its old place too: one directory at two paths (a
            // bind mount), which one picture cannot hold.
            if self.reopen(wd)?.is_some() {
                return Err(Broken::Failed("a directory at two paths".into()));
            }
            self.drop_node(wd);
            return self.add(parent, dir, depth);
        }
        let closed = !accessible(&dir);
        let mut node = Node {
            parent,
            id: id(&stat),
            dirs: HashMap::new(),
            names: BTreeSet::new(),
            closed,
        };
        let mut subdirs = Vec::new();
        for (name, is_dir) in entries(&mut dir)? {
            if is_dir {
                subdirs.push(name);
            } else if is_candidate(&name) {
                node.names.insert(name);
            }
        }
        self.nodes.insert(wd, node);
        self.add_children(wd, &dir, subdirs, depth)?;
        drop(dir);
        Ok(wd)
    }

    /// Walk the subdirectories of a directory just added.
    fn add_children(
        &mut self,
        wd: WatchDescriptor,
        dir: &Dir,
        subdirs: Vec<Vec<u8>>,
        depth: usize,
    ) -> Result<(), Broken> {
        let fd = dir.as_raw_fd();
        for name in subdirs {
            let child = if is_pruned(&name) {
                Child::Pruned
            } else {
                match open_dir(Some(fd), &name) {
                    Ok(sub) => {
                        Child::Watched(self.add(Some((wd, name.clone())), sub, depth + 1)?)
                    }
                    Err(Errno::EACCES) => Child::Closed,
                    // Gone or replaced since the listing: a queued event says so.
                    Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP) => continue,
                    Err(Errno::EMFILE | Errno::ENFILE) => return Err(Broken::TooDeep),
                    Err(e) => return Err(Broken::Failed(format!("opening a directory: {e}"))),
                }
            };
            // Its subtree's walk may have dropped it (met twice): fail
            // closed rather than keep nodes without a parent.
            let Some(node) = self.nodes.get_mut(&wd) else {
                return Err(Broken::Failed("a directory met twice".into()));
            };
            node.dirs.insert(name, child);
        }
        Ok(())
    }

    /// Refuse a directory on a file system whose changes may not all raise
    /// events.
    fn check_device(&mut self, dir: &Dir, dev: u64) -> Result<(), Broken> {
        if let Some(&local) = self.devices.get(&dev) {
            return if local {
                Ok(())
            } else {
                Err(Broken::Filesystem(format!("device {dev:#x}")))
            };
        }
        let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
        let kind = nix::sys::statfs::statfs(path.as_str())
            .map_err(|e| Broken::Failed(format!("statfs: {e}")))?
            .filesystem_type();
        #[allow(clippy::unnecessary_cast)]
        let magic = kind.0 as i64;
        let local = LOCAL.iter().any(|&(_, m)| m == magic);
        self.devices.insert(dev, local);
        if local {
            Ok(())
        } else {
            Err(Broken::Filesystem(format!("{magic:#x}")))
        }
    }
}

/// Watch a directory through its descriptor: the very inode opened.
fn watch(inotify: &Inotify, dir: &Dir) -> Result<WatchDescriptor, Broken> {
    let path = format!("/proc/self/fd/{}", dir.as_raw_fd());
    match inotify.add_watch(path.as_str(), MASK) {
        Ok(wd) => Ok(wd),
        Err(Errno::ENOSPC) => Err(Broken::OutOfWatches),
        Err(e) => Err(Broken::Failed(format!("watching a directory: {e}"))),
    }
}

/// The id of the mount an opened directory lies on (`mnt_id` in
/// `/proc/self/fdinfo`).
fn mount_id(dir: &Dir) -> Result<u64, Broken> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", dir.as_raw_fd()))
        .map_err(|e| Broken::Failed(format!("reading fdinfo: {e}")))?;
    info.lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| Broken::Failed("no mnt_id in fdinfo".into()))
}

/// A directory's entries but `.` and `..`, each with whether it is a
/// directory (from the entry's type, else `fstatat` without following).
fn entries(dir: &mut Dir) -> Result<Vec<(Vec<u8>, bool)>, Broken> {
    let fd = dir.as_raw_fd();
    let mut out = Vec::new();
    for entry in dir.iter() {
        let entry = entry.map_err(|e| Broken::Failed(format!("listing: {e}")))?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        let is_dir = match entry.file_type() {
            Some(kind) => kind == Type::Directory,
            None => match nix::sys::stat::fstatat(
                Some(fd),
                name,
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            ) {
                Ok(s) => s.st_mode & nix::libc::S_IFMT == nix::libc::S_IFDIR,
                // Gone since the listing: an event says so.
                Err(Errno::ENOENT) => continue,
                // What it is cannot be told: the picture would be
                // incomplete.
                Err(e) => return Err(Broken::Failed(format!("looking at an entry: {e}"))),
            },
        };
        out.push((name.to_vec(), is_dir));
    }
    Ok(out)
}

/// Whether an opened directory may be listed and searched.
fn accessible(dir: &Dir) -> bool {
    nix::unistd::faccessat(
        Some(dir.as_raw_fd()),
        ".",
        AccessFlags::R_OK | AccessFlags::X_OK,
        nix::fcntl::AtFlags::empty(),
    )
    .is_ok()
}

fn fstat_id(dir: &Dir) -> Result<Option<(u64, u64)>, Broken> {
    nix::sys::stat::fstat(dir.as_raw_fd())
        .map(|s| Some(id(&s)))
        .map_err(|e| Broken::Failed(format!("fstat: {e}")))
}

fn id(stat: &nix::sys::stat::FileStat) -> (u64, u64) {
    #[allow(clippy::unnecessary_cast)]
    (stat.st_dev as u64, stat.st_ino as u64)
}

/// Open a directory without following a link.
fn open_dir(at: Option<RawFd>, name: &[u8]) -> nix::Result<Dir> {
    Dir::openat(
        at,
        OsStr::from_bytes(name),
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
}

/// An entry other than a directory that the walk looks at (as its
/// `read` does).
fn is_candidate(name: &[u8]) -> bool {
    may_be_env(name) || name == b".git" || name == b"HEAD"
}

fn join(rel: &[u8], name: &[u8]) -> Vec<u8> {
    if rel.is_empty() {
        name.to_vec()
    } else {
        [rel, b"/", name].concat()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use std::fs;

    /// The race a command can run (a directory above renamed away and back
    /// while the watcher reads events): the events about `L` are applied
    /// while `a` is away, the two renames' events after it is back, where
    /// they find `a` unchanged. `L` must be listed again.
    #[test]
    fn events_applied_while_a_parent_is_away_are_not_lost() {
        let t = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(t.path()).unwrap().join("proj");
        fs::create_dir_all(root.join("a/b/L")).unwrap();
        let mut tree = Tree::build(&root, usize::MAX).unwrap();
        let inside = fs::File::open(root.join("a/b/L")).unwrap();
        let l = *tree
            .nodes
            .iter()
            .find(|(_, n)| n.parent.as_ref().is_some_and(|(_, name)| name == b"L"))
            .unwrap()
            .0;
        fs::rename(root.join("a"), t.path().join("away")).unwrap();
        let fd = inside.as_raw_fd();
        nix::sys::stat::mkdirat(Some(fd), ".git", Mode::S_IRWXU).unwrap();
        let env = nix::fcntl::openat(
            Some(fd),
            ".env",
            OFlag::O_CREAT | OFlag::O_WRONLY | OFlag::O_CLOEXEC,
            Mode::S_IRUSR,
        )
        .unwrap();
        nix::unistd::close(env).unwrap();
        let events = tree.inotify.read_events().unwrap();
        let (about_l, others): (Vec<_>, Vec<_>) = events.into_iter().partition(|e| e.wd == l);
        assert!(!about_l.is_empty());
        for event in about_l {
            tree.apply(event).unwrap();
        }
        fs::rename(t.path().join("away"), root.join("a")).unwrap();
        for event in others {
            tree.apply(event).unwrap();
        }
        tree.settle().unwrap();
        let answer = tree.answer();
        assert!(
            answer
                .entries
                .contains(&(b"a/b/L".to_vec(), b".env".to_vec())),
            "{answer:?}"
        );
        assert!(
            answer
                .entries
                .contains(&(b"a/b/L".to_vec(), b".git".to_vec())),
            "{answer:?}"
        );
    }
}
