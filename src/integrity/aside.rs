//! Moving what a command left at a path aside, and putting something in its
//! place, inside a directory reached from `/` without following a link.
//!
//! A link the command planted among a path's ancestors (`.git -> /etc`)
//! would otherwise send the rename, or a copy put back, wherever it points:
//! outside the writable roots, with sbx's own rights. So the directory is
//! opened one component at a time, each with `O_NOFOLLOW`, and held open
//! (`O_PATH`); its entries are then named `/proc/self/fd/N/NAME`, which is
//! the directory held, whatever is at its path by the time sbx acts.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};

use nix::libc;

/// The most `NAME.sbx-blocked-N` tried: past that, something keeps making
/// them, and sbx stops rather than loop.
const MAX_ASIDE: u32 = 1000;

/// A real directory (no link on the way from `/`), held open.
pub struct RealDir {
    fd: File,
    path: PathBuf,
}

impl RealDir {
    /// Open `path` (absolute, no `.` or `..`) without following a link in
    /// any of its components: an error when one is a link, or not a
    /// directory.
    pub fn open(path: &Path) -> io::Result<RealDir> {
        if !path.is_absolute() {
            return Err(io::ErrorKind::InvalidInput.into());
        }
        let mut fd = open_dir(Path::new("/"))?;
        for c in path.components() {
            match c {
                Component::RootDir => {}
                Component::Normal(name) => fd = open_dir(&in_fd(&fd, name))?,
                _ => return Err(io::ErrorKind::InvalidInput.into()),
            }
        }
        Ok(RealDir {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// A path naming the entry `name` of the directory held (for the
    /// system calls; see [`RealDir::shown`] for messages).
    pub fn entry(&self, name: &OsStr) -> PathBuf {
        in_fd(&self.fd, name)
    }

    /// The entry `name` as the user knows it.
    pub fn shown(&self, name: &OsStr) -> PathBuf {
        self.path.join(name)
    }

    /// Give the owner back the write and search bits on the directory (the
    /// command may have taken them off to keep what it planted in place);
    /// whether they were given.
    fn make_writable(&self) -> bool {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let itself = PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()));
        let Ok(m) = std::fs::metadata(&itself) else {
            return false;
        };
        if m.uid() != nix::unistd::geteuid().as_raw() {
            return false;
        }
        let mut perms = m.permissions();
        perms.set_mode(perms.mode() | 0o700);
        std::fs::set_permissions(&itself, perms).is_ok()
    }

    /// `op`, once more after [`RealDir::make_writable`] if it was refused
    /// for want of rights.
    pub fn with_write_access<T>(&self, op: impl Fn() -> io::Result<T>) -> io::Result<T> {
        match op() {
            Err(e)
                if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM))
                    && self.make_writable() =>
            {
                op()
            }
            other => other,
        }
    }
}

/// `/proc/self/fd/N/NAME`.
fn in_fd(fd: &File, name: &OsStr) -> PathBuf {
    PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())).join(name)
}

/// Open the directory at `path` (`O_PATH`: search rights are enough), not
/// following a final link.
fn open_dir(path: &Path) -> io::Result<File> {
    let fd = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)?;
    // With O_PATH, O_NOFOLLOW opens a final link itself: told apart here.
    if !fd.metadata()?.is_dir() {
        return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
    }
    Ok(fd)
}

/// Rename the entry `name` of `dir` to `NAME.sbx-blocked[-N]` (the first
/// that is free; nothing is replaced), giving the directory its write bit
/// back if the command took it; the new path, as the user knows it.
pub fn set_aside(dir: &RealDir, name: &OsStr) -> io::Result<PathBuf> {
    set_aside_as(dir, name, name)
}

/// [`set_aside`] for an entry with a temporary name: renamed to
/// `BASE.sbx-blocked[-N]`.
pub fn set_aside_as(dir: &RealDir, name: &OsStr, base: &OsStr) -> io::Result<PathBuf> {
    dir.with_write_access(|| {
        for n in 1..=MAX_ASIDE {
            let mut target = base.to_os_string();
            target.push(".sbx-blocked");
            if n > 1 {
                target.push(format!("-{n}"));
            }
            match rename_new(dir, name, &target) {
                Ok(()) => return Ok(dir.shown(&target)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other(format!(
            "{MAX_ASIDE} names of the form {}.sbx-blocked-N are taken",
            base.to_string_lossy()
        )))
    })
}

/// Rename `from` to `to` in `dir`, never replacing what is at `to`.
pub fn rename_new(dir: &RealDir, from: &OsStr, to: &OsStr) -> io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags};
    // rustix, not nix: nix offers renameat2 with glibc only (not musl).
    match renameat_with(&dir.fd, from, &dir.fd, to, RenameFlags::NOREPLACE) {
        // A file system without RENAME_NOREPLACE: look first (the command
        // has ended; what remains is a narrow race with the host).
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::NOSYS) => {
            if std::fs::symlink_metadata(dir.entry(to)).is_ok() {
                return Err(io::ErrorKind::AlreadyExists.into());
            }
            let fd = Some(dir.fd.as_raw_fd());
            nix::fcntl::renameat(fd, from, fd, to).map_err(io::Error::from)
        }
        other => other.map_err(io::Error::from),
    }
}

/// Rename `from` over `to` in `dir` (what is at `to` goes).
pub fn rename_over(dir: &RealDir, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let fd = Some(dir.fd.as_raw_fd());
    nix::fcntl::renameat(fd, from, fd, to).map_err(io::Error::from)
}

/// A name in `dir` beside `name` that is free now, for something sbx
/// builds before renaming it into place: `NAME.sbx-restore-PID[-N]`.
pub fn free_name(dir: &RealDir, name: &OsStr) -> OsString {
    let mut n = 0u32;
    loop {
        let mut temp = name.to_os_string();
        temp.push(format!(".sbx-restore-{}", std::process::id()));
        if n > 0 {
            temp.push(format!("-{n}"));
        }
        if std::fs::symlink_metadata(dir.entry(&temp)).is_err() || n >= MAX_ASIDE {
            return temp;
        }
        n += 1;
    }
}

/// Remove what is at `path`, not following a link: a directory with what
/// it holds, the write bit given back to those that lack it (a copy of a
/// read-only directory).
pub fn remove_any(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let m = std::fs::symlink_metadata(path)?;
    if !m.is_dir() {
        return std::fs::remove_file(path);
    }
    let mode = m.permissions().mode();
    if mode & 0o700 != 0o700 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode | 0o700))?;
    }
    for entry in std::fs::read_dir(path)? {
        remove_any(&entry?.path())?;
    }
    std::fs::remove_dir(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_on_the_way_is_not_followed() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::os::unix::fs::symlink(&real, tmp.path().join("link")).unwrap();
        assert!(RealDir::open(&real).is_ok());
        assert!(RealDir::open(&tmp.path().join("link")).is_err());
        assert!(RealDir::open(&tmp.path().join("link/x")).is_err());
        assert!(RealDir::open(Path::new("relative")).is_err());
    }

    #[test]
    fn what_is_set_aside_takes_the_first_free_name() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = RealDir::open(tmp.path()).unwrap();
        for n in ["", "-2", "-3"] {
            std::fs::write(tmp.path().join(".envrc"), n).unwrap();
            let moved = set_aside(&dir, OsStr::new(".envrc")).unwrap();
            assert_eq!(moved, tmp.path().join(format!(".envrc.sbx-blocked{n}")));
            assert_eq!(std::fs::read_to_string(&moved).unwrap(), n);
        }
        assert!(!tmp.path().join(".envrc").exists());
    }

    #[test]
    fn a_read_only_tree_is_removed() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let top = tmp.path().join("top");
        std::fs::create_dir_all(top.join("ro")).unwrap();
        std::fs::write(top.join("ro/f"), "x").unwrap();
        std::fs::set_permissions(top.join("ro"), std::fs::Permissions::from_mode(0o500)).unwrap();
        remove_any(&top).unwrap();
        assert!(!top.exists());
    }
}
