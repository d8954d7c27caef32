//! Whether Seatbelt keeps a socket in the command's `TMPDIR` on this macOS
//! (see `policy/own_sockets.rs`). The profile's rules that keep a socket,
//! or a directory holding one, from being renamed out assume that Seatbelt
//! judges a rename's destination by the type of what is moved. Nothing
//! public says so. So before the first run that would give the command
//! Unix sockets, sbx runs `sbx __socket-probe` under the very profile: it
//! binds a socket in its directory, then tries to rename the socket and
//! its directory out to `/private/tmp`. The verdict is judged on the host
//! (did anything arrive?) and kept per macOS build; the command gets no
//! Unix socket unless the socket stayed where it was.

// The verdict is the macOS run path's; Linux builds the module for the
// hidden command and the tests.
#![cfg_attr(target_os = "linux", allow(dead_code))]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The file in sbx's cache that keeps the verdict, with the macOS build it
/// was reached on.
const VERDICT_FILE: &str = "macos-sockets";

/// What the probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Neither the socket nor its directory left.
    Stay,
    /// One of them was renamed out: own sockets would be a way out here.
    Leave,
}

/// The probe's paths: the directory it may bind in (as a run's `TMPDIR`),
/// and, outside it in `/private/tmp`, a directory to rename the socket into
/// and a name to rename its directory to.
pub struct Places {
    pub tmpdir: PathBuf,
    pub into: PathBuf,
    pub moved: PathBuf,
}

impl Places {
    /// Fresh names for one probe of `uid`'s, from `token`.
    pub fn new(runs: &Path, uid: u32, token: &str) -> Places {
        let out = PathBuf::from(format!("/private/tmp/sbx-probe-{uid}-{token}"));
        Places {
            tmpdir: runs.join(format!("probe-{token}")),
            moved: out.with_file_name(format!("sbx-probe-{uid}-{token}-moved")),
            into: out,
        }
    }

    /// The verdict, judged on the host after the probe ran: `None` when the
    /// probe never bound its socket (nothing was learnt).
    pub fn judge(&self) -> Option<Verdict> {
        use std::os::unix::fs::FileTypeExt;
        let socket_at =
            |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket());
        let left =
            socket_at(&self.into.join("s")) || std::fs::symlink_metadata(&self.moved).is_ok();
        if left {
            return Some(Verdict::Leave);
        }
        socket_at(&self.tmpdir.join("d/s")).then_some(Verdict::Stay)
    }

    /// Remove what the probe made (links are removed, never followed).
    pub fn remove(&self) {
        for dir in [&self.tmpdir, &self.into, &self.moved] {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The verdict kept for the macOS build `build`, if any.
pub fn kept(cache: &Path, build: &str) -> Option<Verdict> {
    let text = std::fs::read_to_string(cache.join(VERDICT_FILE)).ok()?;
    let (for_build, verdict) = text.trim().split_once(' ')?;
    if for_build != build {
        return None;
    }
    match verdict {
        "stay" => Some(Verdict::Stay),
        "leave" => Some(Verdict::Leave),
        _ => None,
    }
}

/// Keep `verdict` for `build` (best effort: without it the probe runs
/// again next time).
pub fn keep(cache: &Path, build: &str, verdict: Verdict) {
    let word = match verdict {
        Verdict::Stay => "stay",
        Verdict::Leave => "leave",
    };
    let _ = std::fs::create_dir_all(cache);
    let _ = std::fs::write(cache.join(VERDICT_FILE), format!("{build} {word}\n"));
}

/// `sbx __socket-probe TMPDIR INTO MOVED`, inside the sandbox: bind a
/// socket in `TMPDIR/d`, then try to rename it into `INTO` and its
/// directory to `MOVED`. What happened is judged on the host.
pub fn inside(tmpdir: &Path, into: &Path, moved: &Path) -> ExitCode {
    let dir = tmpdir.join("d");
    let socket = dir.join("s");
    let bound =
        std::fs::create_dir(&dir).and_then(|()| std::os::unix::net::UnixListener::bind(&socket));
    if bound.is_err() {
        return ExitCode::FAILURE;
    }
    let _ = std::fs::rename(&socket, into.join("s"));
    let _ = std::fs::rename(&dir, moved);
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_is_judged_from_where_the_socket_is() {
        let root = tempfile::tempdir().unwrap();
        let p = Places {
            tmpdir: root.path().join("t"),
            into: root.path().join("into"),
            moved: root.path().join("moved"),
        };
        std::fs::create_dir(&p.tmpdir).unwrap();
        std::fs::create_dir(&p.into).unwrap();
        // Nothing bound: nothing learnt.
        assert_eq!(p.judge(), None);
        // The probe itself, unsandboxed: both renames succeed.
        assert_eq!(inside(&p.tmpdir, &p.into, &p.moved), ExitCode::SUCCESS);
        assert_eq!(p.judge(), Some(Verdict::Leave));
        p.remove();
        assert!(!p.into.exists() && !p.moved.exists() && !p.tmpdir.exists());
        // Bound and still there: the socket stayed.
        std::fs::create_dir_all(p.tmpdir.join("d")).unwrap();
        let _l = std::os::unix::net::UnixListener::bind(p.tmpdir.join("d/s")).unwrap();
        std::fs::create_dir(&p.into).unwrap();
        assert_eq!(p.judge(), Some(Verdict::Stay));
        // Only the directory moved: it left all the same.
        std::fs::create_dir(&p.moved).unwrap();
        assert_eq!(p.judge(), Some(Verdict::Leave));
    }

    #[test]
    fn a_verdict_is_kept_per_macos_build() {
        let cache = tempfile::tempdir().unwrap();
        assert_eq!(kept(cache.path(), "25A1"), None);
        keep(cache.path(), "25A1", Verdict::Stay);
        assert_eq!(kept(cache.path(), "25A1"), Some(Verdict::Stay));
        // Another build: asked again.
        assert_eq!(kept(cache.path(), "25B2"), None);
        keep(cache.path(), "25B2", Verdict::Leave);
        assert_eq!(kept(cache.path(), "25B2"), Some(Verdict::Leave));
        std::fs::write(cache.path().join(VERDICT_FILE), "25B2 maybe\n").unwrap();
        assert_eq!(kept(cache.path(), "25B2"), None);
    }

    #[test]
    fn probe_places_are_outside_the_runs_directory() {
        let p = Places::new(Path::new("/private/tmp/sbx-501"), 501, "0a1b");
        assert_eq!(p.tmpdir, Path::new("/private/tmp/sbx-501/probe-0a1b"));
        assert_eq!(p.into, Path::new("/private/tmp/sbx-probe-501-0a1b"));
        assert_eq!(p.moved, Path::new("/private/tmp/sbx-probe-501-0a1b-moved"));
    }
}
