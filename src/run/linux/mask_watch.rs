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
use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, InotifyEvent, WatchDescriptor};

/// Watches on the directories that hold masked paths.
pub struct MaskWatch {
    inotify: Inotify,
    /// Each directory watched, and the masked names in it.
    dirs: HashMap<WatchDescriptor, (PathBuf, Vec<OsString>)>,
    /// Why the run was stopped, once it was.
    stopped: std::cell::RefCell<Option<String>>,
}

/// Why masked paths cannot all be watched: said before the run, which goes
/// on (a replaced file would then stay readable until the run ends).
#[derive(Debug)]
pub struct Unwatched(pub String);

impl MaskWatch {
    /// Watch the directories of `masked` (none: nothing to watch).
    pub fn new(masked: &[PathBuf]) -> Result<Option<Self>, Unwatched> {
        let mut by_dir: Vec<(&Path, Vec<OsString>)> = Vec::new();
        for path in masked {
            let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
                continue;
            };
            match by_dir.iter_mut().find(|(d, _)| *d == dir) {
                Some((_, names)) => names.push(name.to_os_string()),
                None => by_dir.push((dir, vec![name.to_os_string()])),
            }
        }
        if by_dir.is_empty() {
            return Ok(None);
        }
        let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            .map_err(|e| Unwatched(format!("inotify: {e}")))?;
        let flags = AddWatchFlags::IN_CREATE
            | AddWatchFlags::IN_MOVED_TO
            | AddWatchFlags::IN_DELETE_SELF
            | AddWatchFlags::IN_MOVE_SELF
            | AddWatchFlags::IN_ONLYDIR
            | AddWatchFlags::IN_DONT_FOLLOW;
        let mut dirs = HashMap::new();
        for (dir, names) in by_dir {
            let wd = inotify
                .add_watch(dir, flags)
                .map_err(|e| Unwatched(format!("{}: {e}", dir.display())))?;
            dirs.insert(wd, (dir.to_path_buf(), names));
        }
        Ok(Some(MaskWatch {
            inotify,
            dirs,
            stopped: std::cell::RefCell::new(None),
        }))
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
                Err(nix::errno::Errno::EAGAIN) => return None,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Some(format!("the watch on masked files failed ({e})")),
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
            return Some("changes beside masked files came too fast to follow".into());
        }
        let (dir, names) = self.dirs.get(&event.wd)?;
        if event
            .mask
            .intersects(AddWatchFlags::IN_DELETE_SELF | AddWatchFlags::IN_MOVE_SELF)
            || event.mask.contains(AddWatchFlags::IN_IGNORED)
        {
            return Some(format!(
                "{} was moved or removed on the host",
                dir.display()
            ));
        }
        let name = event.name.as_ref()?;
        names
            .iter()
            .any(|n| n == name)
            .then(|| format!("{} was replaced on the host", dir.join(name).display()))
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
        let watch = MaskWatch::new(&[dir.join(".env")]).unwrap().unwrap();
        (tmp, dir, watch)
    }

    #[test]
    fn nothing_masked_watches_nothing() {
        assert!(MaskWatch::new(&[]).unwrap().is_none());
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
        assert!(why.ends_with("/p/.env was replaced on the host"), "{why}");
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
            why.ends_with("/p was moved or removed on the host"),
            "{why}"
        );
    }

    #[test]
    fn a_directory_that_cannot_be_watched_is_said() {
        let Err(Unwatched(why)) = MaskWatch::new(&[PathBuf::from("/nonexistent-sbx/.env")]) else {
            panic!("watched a missing directory");
        };
        assert!(why.starts_with("/nonexistent-sbx: "), "{why}");
    }
}
