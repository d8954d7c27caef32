//! The command's own Unix sockets (`unix_sockets = "own"`, the default on
//! Linux): where they are made.
//!
//! A Unix socket is reached by its path. The sandbox's sockets are made in
//! one directory, the command's `TMPDIR`: a tmpfs of the sandbox's own,
//! mounted at `/tmp/sbx-UID`, so that no path of the host leads to them
//! and no other sandbox sees them (each mounts its own there). Landlock
//! lets the command make socket files there and nowhere else, and its
//! `connect()` calls reach only sockets on that mount
//! (`run/linux/sockets.rs`). On the host, `/tmp/sbx-UID` is an empty
//! directory of the user's (mode 0700) that serves as the mount point;
//! sbx makes it, and checks it, before the run.
//!
//! The other way round, a host program must never be led to a socket of
//! the sandbox's. The host user can still reach the sandbox's mounts
//! through `/proc/PID/root` of a sandboxed process (they own its user
//! namespace), so a symbolic link the command plants where a host program
//! looks for its server (`/tmp/tmux-UID/default`, an ssh `ControlPath` in
//! `/tmp`, `$XDG_RUNTIME_DIR/bus`), towards that path, would lead the
//! program to a server of the sandbox's: the user's next `tmux` would run
//! what that server asks. So the command may make symbolic links only in
//! writable roots where no host program looks for a server, listed here.

use std::path::{Path, PathBuf};

use super::settings::Settings;
use super::{Host, Platform};
use crate::config::{FsSetting, NetworkMode, UnixSockets};

/// The command's own sockets, for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnSockets {
    /// Where they are made: the mount point of the sandbox's tmpfs, and its
    /// `TMPDIR`.
    pub dir: PathBuf,
    /// Where the command may make symbolic links, besides `dir`.
    pub symlinks: Vec<PathBuf>,
}

/// Directories where host programs look for their servers' sockets: no
/// symbolic link may be made in them, nor in a writable root that holds
/// one.
const RENDEZVOUS: &[&str] = &["/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm"];

/// Own sockets for this run, or `None`: not on Linux (macOS has no such
/// mechanism yet), not asked for, with the host's network namespace (its
/// abstract socket names are the host's: a name the command binds there is
/// one a host program may connect to), or with `filesystem = false`.
pub(super) fn plan(
    s: &Settings,
    host: &Host,
    writable: &[PathBuf],
    asked: &[PathBuf],
) -> Option<OwnSockets> {
    let wanted = s.unix_sockets == UnixSockets::Own
        && host.platform == Platform::Linux
        && s.network != NetworkMode::Allow
        && s.filesystem != FsSetting::Unrestricted;
    if !wanted {
        return None;
    }
    let runtime = host
        .var("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    // The writable entries as asked too (`asked`): a project in /tmp lies
    // inside the writable root /tmp, and keeps its links all the same.
    Some(OwnSockets {
        dir: dir_for(nix::unistd::geteuid().as_raw()),
        symlinks: symlink_roots(writable, asked, runtime.as_deref()),
    })
}

/// The writable roots, and the writable entries asked for inside them,
/// that are not a rendezvous directory and hold none.
fn symlink_roots(writable: &[PathBuf], asked: &[PathBuf], runtime: Option<&Path>) -> Vec<PathBuf> {
    let rendezvous: Vec<&Path> = RENDEZVOUS.iter().map(Path::new).chain(runtime).collect();
    let inside = asked
        .iter()
        .filter(|a| writable.iter().any(|w| a.starts_with(w)));
    let mut roots: Vec<PathBuf> = Vec::new();
    for w in writable.iter().chain(inside) {
        if !rendezvous.iter().any(|r| r.starts_with(w)) && !roots.contains(w) {
            roots.push(w.clone());
        }
    }
    roots
}

/// The directory of the user `uid`: short, since a socket's path holds 108
/// bytes at most.
fn dir_for(uid: u32) -> PathBuf {
    PathBuf::from(format!("/tmp/sbx-{uid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_symbolic_links_where_host_programs_look_for_sockets() {
        let writable: Vec<PathBuf> = [
            "/home/u/proj",
            "/tmp",
            "/tmp/scratch",
            "/var",
            "/run/user/1000",
            "/run/user/1000/app",
            "/home/u/.cache/sbx/projects/k/npm",
            "/",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(
            symlink_roots(&writable, &[], Some(Path::new("/run/user/1000"))),
            [
                "/home/u/proj",
                "/tmp/scratch",
                "/run/user/1000/app",
                "/home/u/.cache/sbx/projects/k/npm",
            ]
            .map(PathBuf::from)
        );
        // A runtime directory in the home makes the home a rendezvous too.
        let home = [PathBuf::from("/home/u")];
        assert!(symlink_roots(&home, &[], Some(Path::new("/home/u/.run"))).is_empty());
        // A project in /tmp, inside the writable root /tmp, keeps its
        // links; an entry outside every writable root (a default project
        // left read-only) gets none.
        let tmp = [PathBuf::from("/tmp")];
        let asked = [PathBuf::from("/tmp/proj"), PathBuf::from("/home/u/proj")];
        assert_eq!(
            symlink_roots(&tmp, &asked, None),
            [PathBuf::from("/tmp/proj")]
        );
    }

    #[test]
    fn each_user_has_a_short_directory_of_their_own() {
        assert_eq!(dir_for(1000), PathBuf::from("/tmp/sbx-1000"));
        assert_ne!(dir_for(0), dir_for(1000));
    }
}
