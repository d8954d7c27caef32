//! Private git config copies, the inner stage's side (PID 1, before the
//! command exists).
//!
//! git writes a config file by creating `config.lock` beside it and
//! renaming that over it. A read-only bind mount on `.git/config` makes the
//! rename fail (`EBUSY`), so `git remote add`, `git branch -u` and `git
//! config --local` failed in the sandbox. The outer stage now gives each
//! protected config a private copy in a per-run directory, with a symbolic
//! link to it (`N.link`), and this stage mounts that link over the config
//! itself. git resolves a link before it locks (`config` → the copy), so it
//! writes the copy, in a directory where the rename works; the host's file
//! is never written, and after the run the outer stage applies only
//! everyday settings to it (`integrity::copies`).
//!
//! Mounting needs `CAP_SYS_ADMIN` over the sandbox's mount namespace, so
//! bubblewrap starts this stage as uid 0 of its user namespace with that
//! capability (and `CAP_SETFCAP`, which the kernel asks of a process that
//! maps its parent namespace's uid 0 in a namespace of its own). Before anything else runs, this stage then moves into a user
//! namespace of its own in which it is the user it was on the host (as
//! bubblewrap itself does for an unprivileged user) and drops every
//! capability, bounding set included: the command starts exactly as it
//! would have without the copies, and the mounts stay locked to a
//! namespace it has no power over.
//!
//! `open_tree` and `move_mount` (the only way to mount a symbolic link
//! itself: `mount(2)` follows it) come from rustix. Raw system calls:
//! `mount_setattr` (for the masks), `capset` and `prctl` for the bounding
//! and ambient sets have no safe wrapper in `nix` or rustix.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// What the set-up stage mounts.
pub struct Setup<'a> {
    /// The run's directory of copies.
    pub dir: &'a Path,
    /// The configs to mount the copies' links over, in order.
    pub configs: &'a [PathBuf],
    /// Directories to bind onto themselves.
    pub pins: &'a [PathBuf],
    /// Symbolic links to mount onto themselves.
    pub links: &'a [PathBuf],
    /// The files to mask, if any.
    pub masks: Option<Masks<'a>>,
}

/// The files the set-up masks, and what with.
pub struct Masks<'a> {
    /// sbx's empty placeholder (or `/dev/null`).
    pub with: &'a Path,
    /// Files in a writable root: each must still be there.
    pub files: &'a [PathBuf],
    /// Files elsewhere: masked if the sandbox shows them.
    pub if_present: &'a [PathBuf],
}

/// Bind each directory onto itself, with every mount below it, so that it
/// becomes a mount point the command cannot rename (see
/// `backend::bwrap`). Here rather than in bubblewrap's argv: bubblewrap
/// reads its whole mount table again after each bind, a few tenths of a
/// millisecond each, and a deep `.env` costs one pin per directory above
/// it. One that no longer exists (gone since the outer stage looked, or
/// under a masked directory) has nothing left to pin.
pub fn pin(dirs: &[PathBuf]) -> Result<()> {
    use nix::mount::{mount, MsFlags};
    for dir in dirs {
        match mount(
            Some(dir.as_path()),
            dir.as_path(),
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REC,
            None::<&str>,
        ) {
            Ok(()) | Err(nix::errno::Errno::ENOENT) => {}
            Err(e) => bail!("pinning {}: {e}", dir.display()),
        }
    }
    Ok(())
}

/// Mask each file with a read-only bind of the placeholder (bubblewrap's
/// `--ro-bind` did it before), after the pins and the copies, so that
/// nothing covers a mask. Here for the pins' reason: each `--ro-bind` had
/// bubblewrap read its mount table twice, about 0.4 ms per `.env`. A file
/// in a writable root that was there when the outer stage looked and is
/// gone now may have been moved by another sandbox (renaming a directory
/// above it back and forth): the set-up is refused ([`Moved`]), and no plan
/// is tried after it. One elsewhere, gone, is not in this sandbox (under
/// its own `/dev` or `/proc`): nothing to hide. Any other failure fails the
/// set-up, and the sandbox is started again with bubblewrap masking.
pub fn mask(masks: &Masks) -> Result<()> {
    let must = masks.files.iter().map(|f| (f, true));
    for (file, must) in must.chain(masks.if_present.iter().map(|f| (f, false))) {
        let tree = placeholder_mount(masks.with)?;
        match move_mount(&tree, file) {
            Ok(()) => {}
            Err(e) if gone(&e) && !must => {}
            Err(e) if gone(&e) => return Err(Moved(file.clone()).into()),
            Err(e) => return Err(e.context(format!("masking {}", file.display()))),
        }
    }
    Ok(())
}

/// A file to mask that is gone since the outer stage found it, or a
/// working directory replaced since bubblewrap entered it.
#[derive(Debug)]
pub struct Moved(pub PathBuf);

impl std::fmt::Display for Moved {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} was there when sbx looked and is gone now: it may have been moved while the sandbox was set up (run the command again)",
            self.0.display()
        )
    }
}

impl std::error::Error for Moved {}

/// Whether a mount failed because its target does not exist (any more).
fn gone(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .and_then(std::io::Error::raw_os_error)
        .is_some_and(|n| n == nix::libc::ENOENT || n == nix::libc::ENOTDIR)
}

/// A detached, read-only mount of the placeholder: sbx's empty file, or
/// `/dev/null` (see `policy::credentials::placeholder`); anything else is
/// refused. Like bubblewrap's `--ro-bind`, the mask is read-only (a command
/// that owns the placeholder could otherwise change its mode and fill it,
/// or run as root change the host's `/dev/null`) and `nodev` (`/dev/null`
/// cannot even be opened). The empty file usually lies under the read-only
/// host root, which gives both; otherwise `mount_setattr` sets them, and a
/// kernel without it (before 5.12) fails the set-up.
fn placeholder_mount(with: &Path) -> Result<OwnedFd> {
    use nix::sys::statvfs::FsFlags;
    use std::os::fd::AsRawFd;
    let tree =
        open_tree(with).with_context(|| format!("taking {} to mask with", with.display()))?;
    let stat = nix::sys::stat::fstat(tree.as_raw_fd())
        .with_context(|| format!("reading {}", with.display()))?;
    let kind = stat.st_mode & nix::libc::S_IFMT;
    let empty_file = kind == nix::libc::S_IFREG && stat.st_size == 0;
    let dev_null = kind == nix::libc::S_IFCHR && stat.st_rdev == nix::libc::makedev(1, 3);
    if !empty_file && !dev_null {
        bail!(
            "{} is neither an empty file nor /dev/null: it cannot mask anything",
            with.display()
        );
    }
    let flags = nix::sys::statvfs::fstatvfs(&tree)
        .with_context(|| format!("reading the mount of {}", with.display()))?
        .flags();
    if !flags.contains(FsFlags::ST_RDONLY | FsFlags::ST_NODEV | FsFlags::ST_NOSUID) {
        set_read_only(&tree)
            .with_context(|| format!("making a mount of {} read-only", with.display()))?;
    }
    Ok(tree)
}

/// `mount_setattr(tree, "", AT_EMPTY_PATH, {attr_set: RDONLY | NOSUID |
/// NODEV | NOEXEC})`.
fn set_read_only(tree: &OwnedFd) -> Result<()> {
    use std::os::fd::AsRawFd;
    let attr = nix::libc::mount_attr {
        attr_set: nix::libc::MOUNT_ATTR_RDONLY
            | nix::libc::MOUNT_ATTR_NOSUID
            | nix::libc::MOUNT_ATTR_NODEV
            | nix::libc::MOUNT_ATTR_NOEXEC,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let empty = c"";
    // SAFETY: mount_setattr takes a descriptor, a NUL-terminated path, flags,
    // and a pointer to a mount_attr of the size given; all outlive the call,
    // which returns 0 or -1 and writes no memory of ours.
    #[allow(unsafe_code)]
    let r = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            empty.as_ptr(),
            nix::libc::AT_EMPTY_PATH,
            std::ptr::addr_of!(attr),
            std::mem::size_of::<nix::libc::mount_attr>(),
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}

/// Mount each symbolic link onto itself (the link, not what it points to:
/// [`open_tree`] takes it with `AT_SYMLINK_NOFOLLOW`, and `move_mount`
/// does not follow the last name of its target): a mount point cannot be
/// removed or renamed over, so `.git/hooks -> ../tools/hooks` or a linked
/// `.git/config` keeps pointing where it did for the whole run, and git on
/// the host never follows a link the command made (it was moved aside only
/// after the run). One gone since the outer stage looked has nothing to
/// pin (the checks after the run find what took its place).
pub fn pin_links(links: &[PathBuf]) -> Result<()> {
    for link in links {
        let tree = match open_tree(link) {
            Ok(tree) => tree,
            Err(e) if gone(&e) => continue,
            Err(e) => return Err(e.context(format!("pinning the link {}", link.display()))),
        };
        move_mount(&tree, link).with_context(|| format!("pinning the link {}", link.display()))?;
    }
    Ok(())
}

/// The link to the copy of the config `index` in the copies directory.
pub fn link(dir: &Path, index: usize) -> PathBuf {
    dir.join(format!("{index}.link"))
}

/// Mount each config's link over the config. An error names the config.
pub fn mount_links(dir: &Path, configs: &[PathBuf]) -> Result<()> {
    for (i, config) in configs.iter().enumerate() {
        let source = link(dir, i);
        let tree = open_tree(&source)
            .with_context(|| format!("taking the link {} to mount", source.display()))?;
        move_mount(&tree, config)
            .with_context(|| format!("mounting a private copy over {}", config.display()))?;
    }
    Ok(())
}

/// A detached copy of the link itself (`AT_SYMLINK_NOFOLLOW`).
fn open_tree(path: &Path) -> Result<OwnedFd> {
    use rustix::mount::OpenTreeFlags;
    let flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_SYMLINK_NOFOLLOW;
    Ok(rustix::mount::open_tree(rustix::fs::CWD, path, flags).map_err(std::io::Error::from)?)
}

/// Attach the detached tree `tree` on `target` (a regular file: the link
/// and the file are both non-directories, which is all the kernel asks).
fn move_mount(tree: &OwnedFd, target: &Path) -> Result<()> {
    use rustix::mount::MoveMountFlags;
    let flags = MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH;
    rustix::mount::move_mount(tree, c"", rustix::fs::CWD, target, flags)
        .map_err(std::io::Error::from)?;
    Ok(())
}

/// Enter the working directory again by its path, once the set-up's
/// mounts are made. bubblewrap entered it before this stage pinned and
/// masked, so a working directory this stage pinned onto itself (run from
/// a subdirectory of the project, or a project inside another writable
/// root) stayed on the mount below the pin, where relative paths reach
/// past every mask made on top: `cat .env` read the secret. `chdir` to the
/// path is what leads through the top mounts (a pin shares its
/// directory's device and inode, so no identity check could tell the two
/// apart); the check below catches a directory replaced meanwhile, which
/// refuses the set-up as a moved file to mask does ([`Moved`]).
pub fn reenter_working_directory() -> Result<()> {
    let before = nix::sys::stat::stat(".").context("reading the working directory")?;
    let path = nix::unistd::getcwd().context("reading the working directory's path")?;
    if !path.is_absolute() {
        bail!("the working directory {} is out of reach", path.display());
    }
    nix::unistd::chdir(&path)
        .with_context(|| format!("entering the working directory {}", path.display()))?;
    let after = nix::sys::stat::stat(".").context("reading the working directory")?;
    if (after.st_dev, after.st_ino) != (before.st_dev, before.st_ino) {
        return Err(Moved(path).into());
    }
    Ok(())
}

/// The first mapping of a `/proc/self/{u,g}id_map`: what id 0 here is
/// outside.
fn outside_id(map: &str) -> Result<u32> {
    let text = std::fs::read_to_string(format!("/proc/self/{map}"))
        .with_context(|| format!("reading /proc/self/{map}"))?;
    let mut fields = text.split_whitespace();
    match (fields.next(), fields.next()) {
        (Some("0"), Some(outside)) => outside
            .parse()
            .with_context(|| format!("reading /proc/self/{map}")),
        _ => bail!("/proc/self/{map} does not map id 0: {}", text.trim()),
    }
}

/// Leave the setup namespace: a new user namespace in which this process is
/// the user and group it is on the host, with no capability left.
pub fn become_the_user() -> Result<()> {
    let uid = outside_id("uid_map")?;
    let gid = outside_id("gid_map")?;
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)
        .context("creating the command's user namespace")?;
    std::fs::write("/proc/self/setgroups", "deny").context("writing /proc/self/setgroups")?;
    std::fs::write("/proc/self/uid_map", format!("{uid} 0 1"))
        .context("writing /proc/self/uid_map")?;
    std::fs::write("/proc/self/gid_map", format!("{gid} 0 1"))
        .context("writing /proc/self/gid_map")?;
    drop_capabilities()
}

/// Drop every capability: the bounding set (or a command running as root
/// would get them back at exec), the ambient set, then the others.
pub(super) fn drop_capabilities() -> Result<()> {
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments only.
        #[allow(unsafe_code)]
        let r = unsafe { nix::libc::prctl(nix::libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
        if r != 0 {
            // EINVAL: past the last capability this kernel knows.
            if std::io::Error::last_os_error().raw_os_error() == Some(nix::libc::EINVAL) {
                break;
            }
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("dropping capability {cap} from the bounding set"));
        }
    }
    // SAFETY: prctl with integer arguments only.
    #[allow(unsafe_code)]
    let r = unsafe {
        nix::libc::prctl(
            nix::libc::PR_CAP_AMBIENT,
            nix::libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error()).context("clearing the ambient capabilities");
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a version 3 header and two data structs, both
    // live for the call, laid out as the kernel's (repr(C), u32 fields).
    #[allow(unsafe_code)]
    let r = unsafe {
        nix::libc::syscall(
            nix::libc::SYS_capset,
            std::ptr::addr_of_mut!(header),
            data.as_ptr(),
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error()).context("dropping the capabilities");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file to mask in a writable root that is gone refuses the set-up
    /// ([`Moved`]); one elsewhere is skipped. Detached mounts only: nothing
    /// is mounted where nothing is. Needs root (`open_tree` clones a mount).
    #[test]
    fn a_gone_file_refuses_the_set_up_unless_it_may_be_absent() {
        if !nix::unistd::geteuid().is_root() {
            assert!(
                std::env::var_os("SBX_TEST_REQUIRE_SANDBOX").is_none(),
                "this test needs root"
            );
            eprintln!("skipped: needs root");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let with = t.path().join("empty");
        std::fs::write(&with, "").unwrap();
        let gone = vec![t.path().join("sec/key.pem")];
        let masks = |files, if_present| Masks {
            with: &with,
            files,
            if_present,
        };
        let e = mask(&masks(&gone, &[])).unwrap_err();
        assert!(e.downcast_ref::<Moved>().is_some(), "{e:#}");
        assert!(format!("{e}").contains("sec/key.pem"), "{e}");
        mask(&masks(&[], &gone)).unwrap();
        // Not an empty file: refused before any mount.
        std::fs::write(&with, "x").unwrap();
        let e = mask(&masks(&[], &gone)).unwrap_err();
        assert!(e.downcast_ref::<Moved>().is_none(), "{e:#}");
    }
}
