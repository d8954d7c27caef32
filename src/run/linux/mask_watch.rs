//! Masks the host lifts during a run. A mask is a mount on the masked
//! path's entry inside the sandbox; when a program on the host renames
//! another file over that path (an editor saving `.env` through a temporary
//! file), or deletes it and makes a new one, the kernel detaches the mount
//! and the sandbox sees the new file unmasked. The sandboxed command itself
//! cannot do either (a mount point cannot be renamed over or removed).
//!
//! The outer stage watches the directory holding each masked path with
//! inotify from before bubblewrap starts, and once the sandbox is up, stops
//! the run when a masked name appears again in one of them (made or moved
//! in), when such a directory is moved or removed, or when events were lost.
//! What the command read between the host's change and the stop (the time
//! to wake sbx) is not undone.

use std::collections::HashMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};

/// Watches on the directories on the way to the masked paths.
pub struct MaskWatch {
    inotify: Inotify,
    /// Each directory watched, and the names in it that lead to a masked
    /// path (none for a directory above a writable root: only its own move
    /// or removal counts there).
    dirs: HashMap<WatchDescriptor, (PathBuf, Vec<OsString>)>,
    /// Why the run was stopped, once it was.
    stopped: std::cell::RefCell<Option<String>>,
}

impl MaskWatch {
    /// Watch the directories on the way to each of `masked` (paths inside a
    /// masked directory are left out by the caller: the directory's own
    /// mask covers them). Inside a writable root, each directory from the
    /// root down is pinned in the sandbox, and a new one made at its name on
    /// the host would hold an unmasked path: the name is watched in each,
    /// and each directory's own move or removal, up to `/` (a project moved
    /// away and copied back shows its copy read-only at the old path). The
    /// watch, if anything is watched, and the directories that could not be
    /// watched for a name, with why.
    pub fn new(masked: &[PathBuf], writable: &[PathBuf]) -> (Option<Self>, Vec<String>) {
        // Found by hash (a monorepo may mask hundreds of `.env` files, each
        // several directories deep), then ordered once: the warning names
        // directories in order.
        let mut by_dir: HashMap<&Path, Vec<OsString>> = HashMap::new();
        for path in masked {
            let Some(parent) = path.parent() else {
                continue;
            };
            let top = writable
                .iter()
                .find(|w| path.starts_with(w) && path != *w)
                .map_or(parent, PathBuf::as_path);
            for (entry, dir) in path.ancestors().zip(path.ancestors().skip(1)) {
                let leads = dir.starts_with(top);
                note(&mut by_dir, dir, entry.file_name().filter(|_| leads));
            }
        }
        if by_dir.is_empty() {
            return (None, Vec::new());
        }
        let mut by_dir: Vec<(&Path, Vec<OsString>)> = by_dir.into_iter().collect();
        by_dir.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let inotify = match Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC) {
            Ok(inotify) => inotify,
            Err(e) => return (None, vec![format!("inotify: {}", why(e))]),
        };
        // Its own move or removal, for every directory; names made or moved
        // in, where names lead to a masked path. Added to what the same
        // directory reached by another path (a bind mount) is watched for.
        let itself = AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DONT_FOLLOW
            // nix has no name for it.
            | AddWatchFlags::from_bits_retain(nix::libc::IN_MASK_ADD);
        let named = itself | AddWatchFlags::IN_CREATE | AddWatchFlags::IN_MOVED_TO;
        let mut dirs: HashMap<WatchDescriptor, (PathBuf, Vec<OsString>)> = HashMap::new();
        let mut unwatched = Vec::new();
        for (dir, names) in by_dir {
            let flags = if names.is_empty() { itself } else { named };
            match inotify.add_watch(dir, flags) {
                // The same directory by another path (a bind mount): one
                // watch, both lists of names.
                Ok(wd) => dirs
                    .entry(wd)
                    .or_insert_with(|| (dir.to_path_buf(), Vec::new()))
                    .1
                    .extend(names),
                // Above a writable root only a move of the directory itself
                // counts (the project moved away and copied back): one this
                // user may not read (`/home` at 711) is left unsaid.
                Err(Errno::EACCES) if names.is_empty() => {}
                Err(e) => unwatched.push(format!("{} ({})", dir.display(), why(e))),
            }
        }
        let watch = (!dirs.is_empty()).then(|| MaskWatch {
            inotify,
            dirs,
            stopped: std::cell::RefCell::new(None),
        });
        (watch, unwatched)
    }

    /// Another descriptor of the same watch, for a process that outlives sbx
    /// to close last (see `guardian::Guardian::launch`).
    pub fn duplicate(&self) -> Option<std::os::fd::OwnedFd> {
        self.inotify.as_fd().try_clone_to_owned().ok()
    }

    /// The descriptor to poll.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }

    /// Read what is queued: why a mask may be lifted now, if one may.
    pub fn lifted(&self) -> Option<String> {
        loop {
            match self.inotify.read_events() {
                Ok(events) if events.is_empty() => return None,
                Ok(events) => {
                    if let Some(why) = events.iter().find_map(|e| self.lifts(e)) {
                        return Some(why);
                    }
                }
                Err(Errno::EAGAIN) => return None,
                Err(Errno::EINTR) => {}
                Err(e) => {
                    return Some(format!(
                        "the watch on the masked paths failed ({e}), so a mask may have been lifted unseen"
                    ))
                }
            }
        }
    }

    /// Note that the run was stopped, and why.
    pub fn stop(&self, why: String) {
        self.stopped.borrow_mut().get_or_insert(why);
    }

    /// Why the run was stopped, if it was.
    pub fn stopped_for(&self) -> Option<String> {
        self.stopped.borrow().clone()
    }

    /// Whether one event may lift a mask, and how.
    fn lifts(&self, event: &InotifyEvent) -> Option<String> {
        if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
            return Some(
                "changes beside the masked paths came too fast to follow (one may have lifted a mask)"
                    .into(),
            );
        }
        let (dir, names) = self.dirs.get(&event.wd)?;
        if event.mask.intersects(
            AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_MOVE_SELF | AddWatchFlags::IN_IGNORED,
        ) {
            return Some(format!(
                "{}, on the way to a masked path, was moved or removed on the host, which can lift the mask inside the sandbox",
                dir.display()
            ));
        }
        let name = event.name.as_ref()?;
        names.iter().any(|n| n == name).then(|| {
            format!(
                "{} was replaced on the host, which lifts its mask inside the sandbox (run the command again to mask the new one)",
                dir.join(name).display()
            )
        })
    }
}

/// Add `dir`, and `name` among its names.
fn note<'a>(by_dir: &mut HashMap<&'a Path, Vec<OsString>>, dir: &'a Path, name: Option<&OsStr>) {
    let names = by_dir.entry(dir).or_default();
    if let Some(name) = name.filter(|n| !names.iter().any(|m| m == n)) {
        names.push(name.to_os_string());
    }
}

/// An inotify error in words, with the limit to raise where one ran out.
fn why(e: Errno) -> String {
    match e {
        Errno::ENOSPC => "no inotify watch left: fs.inotify.max_user_watches".into(),
        Errno::EMFILE => {
            "no inotify instance or descriptor left: fs.inotify.max_user_instances, or ulimit -n"
                .into()
        }
        e => e.desc().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> (tempfile::TempDir, PathBuf, MaskWatch) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join(".env"), "S").unwrap();
        let watch = MaskWatch::new(&[dir.join(".env")], &[]).0.unwrap();
        (tmp, dir, watch)
    }

    #[test]
    fn nothing_masked_watches_nothing() {
        let (watch, unwatched) = MaskWatch::new(&[], &[]);
        assert!(watch.is_none() && unwatched.is_empty());
    }

    #[test]
    fn other_names_and_edits_in_place_lift_nothing() {
        let (_tmp, dir, watch) = fixture();
        std::fs::write(dir.join("notes.txt"), "x").unwrap();
        std::fs::rename(dir.join("notes.txt"), dir.join("notes2.txt")).unwrap();
        std::fs::write(dir.join(".env"), "in place").unwrap();
        assert_eq!(watch.lifted(), None);
    }

    #[test]
    fn a_rename_over_the_masked_name_lifts_it() {
        let (_tmp, dir, watch) = fixture();
        std::fs::write(dir.join(".env.tmp"), "NEW").unwrap();
        std::fs::rename(dir.join(".env.tmp"), dir.join(".env")).unwrap();
        let why = watch.lifted().unwrap();
        assert!(
            why.contains("/p/.env was replaced on the host, which lifts"),
            "{why}"
        );
    }

    #[test]
    fn a_new_file_after_a_removal_lifts_it() {
        let (_tmp, dir, watch) = fixture();
        std::fs::remove_file(dir.join(".env")).unwrap();
        assert_eq!(watch.lifted(), None);
        std::fs::write(dir.join(".env"), "NEW").unwrap();
        assert!(watch.lifted().is_some());
    }

    #[test]
    fn the_directory_moved_away_lifts_it() {
        let (tmp, dir, watch) = fixture();
        std::fs::rename(&dir, tmp.path().join("q")).unwrap();
        let why = watch.lifted().unwrap();
        assert!(
            why.contains("/p, on the way to a masked path, was moved"),
            "{why}"
        );
    }

    #[test]
    fn a_directory_that_cannot_be_watched_is_said() {
        let (_watch, unwatched) = MaskWatch::new(&[PathBuf::from("/nonexistent-sbx/.env")], &[]);
        assert_eq!(
            unwatched,
            vec!["/nonexistent-sbx (No such file or directory)"]
        );
    }

    #[test]
    fn inside_a_writable_root_every_directory_on_the_way_is_watched() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("proj");
        let deep = root.join("a/b");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join(".env"), "S").unwrap();
        let (watch, unwatched) = MaskWatch::new(&[deep.join(".env")], std::slice::from_ref(&root));
        assert_eq!(unwatched, Vec::<String>::new());
        let watch = watch.unwrap();
        let mut named: Vec<(PathBuf, Vec<OsString>)> = watch
            .dirs
            .values()
            .filter(|(_, names)| !names.is_empty())
            .cloned()
            .collect();
        named.sort();
        assert_eq!(
            named,
            vec![
                (root.clone(), vec![OsString::from("a")]),
                (root.join("a"), vec![OsString::from("b")]),
                (deep.clone(), vec![OsString::from(".env")]),
            ]
        );
        // Above the root, each directory up to `/`, for its own move only.
        let mut above: Vec<PathBuf> = watch
            .dirs
            .values()
            .filter(|(_, names)| names.is_empty())
            .map(|(dir, _)| dir.clone())
            .collect();
        above.sort();
        let mut want: Vec<PathBuf> = tmp.path().ancestors().map(Path::to_path_buf).collect();
        want.sort();
        assert_eq!(above, want);
        // An ancestor moved away on the host, and a new one made at its
        // name: the path now leads to a directory no mask covers.
        std::fs::rename(root.join("a"), root.join("a-old")).unwrap();
        std::fs::create_dir(root.join("a")).unwrap();
        let why = watch.lifted().unwrap();
        assert!(
            why.contains("/proj/a, on the way to a masked path, was moved"),
            "{why}"
        );
    }

    #[test]
    fn the_project_moved_away_lifts_it() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("outer/proj");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join(".env"), "S").unwrap();
        let (watch, _) = MaskWatch::new(&[root.join(".env")], std::slice::from_ref(&root));
        let watch = watch.unwrap();
        // Names made beside the way, above the root, change nothing.
        std::fs::create_dir(tmp.path().join("outer/other")).unwrap();
        assert_eq!(watch.lifted(), None);
        std::fs::rename(tmp.path().join("outer"), tmp.path().join("outer2")).unwrap();
        let why = watch.lifted().unwrap();
        assert!(
            why.contains("/outer, on the way to a masked path, was moved"),
            "{why}"
        );
    }
}
