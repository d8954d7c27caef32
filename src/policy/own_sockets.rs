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
//!
//! On macOS there are no mounts to keep a socket in its place: Seatbelt
//! judges paths, and a rename inside one volume moves a socket, or the
//! directory that holds one, anywhere. So `dir` is the user's directory
//! `/private/tmp/sbx-UID`, in which each run makes its own `TMPDIR`; the
//! profile lets sockets be bound and reached there only, lets no socket
//! file outside it be renamed, removed or linked (a host socket cannot be
//! brought in), and no socket be made or renamed outside it; and where host
//! programs look for their servers (`/tmp`, `/var/tmp`, the user's
//! `$TMPDIR`) it lets no directory or symbolic link be made and no
//! directory be removed or renamed, so no directory holding a socket can
//! be carried out of it to a name a host program trusts, nor one holding a
//! host socket into it (`backend/seatbelt.rs`).

use std::path::PathBuf;

use super::settings::Settings;
use super::{Places, Platform};
use crate::config::{FsSetting, NetworkMode, UnixSockets};

/// The command's own sockets, for one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnSockets {
    /// Where they are made. Linux: the mount point of the sandbox's tmpfs,
    /// and its `TMPDIR`. macOS: the user's directory in which each run
    /// makes its `TMPDIR`, where its sockets are made.
    pub dir: PathBuf,
    /// Where the command may make symbolic links, besides `dir`.
    pub symlinks: Vec<PathBuf>,
}

/// Directories where host programs look for their servers' sockets: no
/// symbolic link may be made in them, nor in a writable root that holds
/// one.
const RENDEZVOUS: &[&str] = &["/tmp", "/var/tmp", "/run", "/var/run", "/dev/shm"];

/// The same on macOS, as real paths (the user's `$TMPDIR` is added).
const RENDEZVOUS_MACOS: &[&str] = &["/private/tmp", "/private/var/tmp", "/private/var/run"];

/// Own sockets for this run, or `None`: not asked for, or with
/// `filesystem = false` (links could be made anywhere). On Linux also with
/// the host's network namespace (its abstract socket names are the host's:
/// a name the command binds there is one a host program may connect to);
/// on macOS, which has no abstract names, only with the restricted
/// filesystem (read-only mode has no `TMPDIR` to make sockets in).
pub(super) fn plan(
    s: &Settings,
    places: &Places,
    writable: &[PathBuf],
    asked: &[PathBuf],
) -> Option<OwnSockets> {
    let host = places.host;
    // macOS does not honour `allow` (no host socket is ever reachable
    // there): the command gets its own, as with `own`.
    let wanted = match host.platform {
        Platform::Linux => {
            s.unix_sockets == UnixSockets::Own
                && s.network != NetworkMode::Allow
                && s.filesystem != FsSetting::Unrestricted
        }
        Platform::Macos => {
            s.unix_sockets != UnixSockets::Deny && s.filesystem == FsSetting::Restricted
        }
    };
    if !wanted {
        return None;
    }
    let uid = nix::unistd::geteuid().as_raw();
    let absolute = |var: &str| host.var(var).map(PathBuf::from).filter(|p| p.is_absolute());
    // The writable entries as asked too (`asked`): a project in /tmp lies
    // inside the writable root /tmp, and keeps its links all the same.
    Some(match host.platform {
        Platform::Linux => {
            let runtime = absolute("XDG_RUNTIME_DIR");
            let rendezvous: Vec<PathBuf> = RENDEZVOUS
                .iter()
                .map(PathBuf::from)
                .chain(runtime)
                .collect();
            OwnSockets {
                dir: dir_for(uid),
                symlinks: symlink_roots(writable, asked, &rendezvous),
            }
        }
        Platform::Macos => {
            // The user's own temporary directory, where apps keep sockets
            // (editors' IPC among them), as the profile spells it.
            let tmpdir = absolute("TMPDIR").map(|t| places.real(&t).unwrap_or(places.alias(t)));
            let rendezvous: Vec<PathBuf> = RENDEZVOUS_MACOS
                .iter()
                .map(PathBuf::from)
                .chain(tmpdir)
                .collect();
            OwnSockets {
                dir: PathBuf::from(format!("/private{}", dir_for(uid).display())),
                symlinks: symlink_roots(writable, asked, &rendezvous),
            }
        }
    })
}

/// The writable roots, and the writable entries asked for inside them,
/// that are not a rendezvous directory and hold none.
fn symlink_roots(writable: &[PathBuf], asked: &[PathBuf], rendezvous: &[PathBuf]) -> Vec<PathBuf> {
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

    /// The Linux rendezvous list, with `runtime` as `$XDG_RUNTIME_DIR`.
    fn linux(runtime: Option<&str>) -> Vec<PathBuf> {
        RENDEZVOUS
            .iter()
            .chain(runtime.iter())
            .map(PathBuf::from)
            .collect()
    }

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
            symlink_roots(&writable, &[], &linux(Some("/run/user/1000"))),
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
        assert!(symlink_roots(&home, &[], &linux(Some("/home/u/.run"))).is_empty());
        // A project in /tmp, inside the writable root /tmp, keeps its
        // links; an entry outside every writable root (a default project
        // left read-only) gets none.
        let tmp = [PathBuf::from("/tmp")];
        let asked = [PathBuf::from("/tmp/proj"), PathBuf::from("/home/u/proj")];
        assert_eq!(
            symlink_roots(&tmp, &asked, &linux(None)),
            [PathBuf::from("/tmp/proj")]
        );
    }

    #[test]
    fn each_user_has_a_short_directory_of_their_own() {
        assert_eq!(dir_for(1000), PathBuf::from("/tmp/sbx-1000"));
        assert_ne!(dir_for(0), dir_for(1000));
    }
}
