//! What tells a file apart from another that took its place, recorded when
//! the policy is resolved and compared after the run; and the hex encodings
//! that let any path or file content survive a JSON round trip (the per-run
//! note).

use std::path::{Path, PathBuf};

/// What tells a file apart from another that took its place: device and
/// inode (an inode number freed by a deletion is often given to the very next
/// file created in the same directory), the birth time (set when a file is
/// created, and never again), and the type; for a symlink, where it points.
/// Where the file system keeps no birth time, the change time stands in: it
/// is set at creation too, but also by any change (an entry added to a
/// directory, a file edited in place), so there a change made outside the
/// sandbox during the run reads as a replacement (moved aside: safe, noisy).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    dev: u64,
    ino: u64,
    born: Born,
    mode: u32,
    #[serde(with = "hex_path_opt")]
    target: Option<PathBuf>,
}

/// A path written as the hex of its bytes, so that any path (not only
/// UTF-8 ones) survives a JSON round trip.
pub mod hex_path {
    use std::path::{Path, PathBuf};

    use serde::{Deserialize, Deserializer, Serializer};

    /// Two lowercase hex digits per byte (a run's note holds a few hundred
    /// paths: `format!` per byte was an eighth of sbx's own work).
    pub fn encode(path: &Path) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let bytes = path.as_os_str().as_encoded_bytes();
        let mut out = String::with_capacity(bytes.len() * 2);
        for &b in bytes {
            out.push(char::from(DIGITS[usize::from(b >> 4)]));
            out.push(char::from(DIGITS[usize::from(b & 0xf)]));
        }
        out
    }

    pub fn decode(text: &str) -> Option<PathBuf> {
        let text: std::ffi::OsString =
            std::os::unix::ffi::OsStringExt::from_vec(decode_bytes(text)?);
        Some(PathBuf::from(text))
    }

    pub fn decode_bytes(text: &str) -> Option<Vec<u8>> {
        if !text.len().is_multiple_of(2) {
            return None;
        }
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
            .collect()
    }

    pub fn serialize<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(path))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        let text = String::deserialize(d)?;
        decode(&text).ok_or_else(|| serde::de::Error::custom("not a hex-encoded path"))
    }
}

/// [`hex_path`] for an optional path.
pub(crate) mod hex_path_opt {
    use std::path::PathBuf;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match path {
            Some(p) => s.serialize_some(&super::hex_path::encode(p)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(text) => super::hex_path::decode(&text)
                .map(Some)
                .ok_or_else(|| serde::de::Error::custom("not a hex-encoded path")),
            None => Ok(None),
        }
    }
}

/// When a file came to be, as well as the file system can tell.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
enum Born {
    /// Birth time (seconds and nanoseconds since the epoch).
    At(u64, u32),
    /// No birth time here: the change time.
    Changed(i64, i64),
}

impl Identity {
    /// The identity of what is at `path` now (not following a final link).
    pub fn of(path: &Path) -> Option<Identity> {
        Some(Identity::from_lstat(
            path,
            &std::fs::symlink_metadata(path).ok()?,
        ))
    }

    /// The identity of what is at `path`, from its `lstat` (`m`), taken
    /// a moment ago.
    pub fn from_lstat(path: &Path, m: &std::fs::Metadata) -> Identity {
        use std::os::unix::fs::MetadataExt;
        Identity {
            dev: m.dev(),
            ino: m.ino(),
            born: match birth_time(path, m) {
                Some((secs, nanos)) => Born::At(secs, nanos),
                None => Born::Changed(m.ctime(), m.ctime_nsec()),
            },
            mode: m.mode() & 0o170000,
            target: m
                .file_type()
                .is_symlink()
                .then(|| std::fs::read_link(path).ok())
                .flatten(),
        }
    }
}

/// A git config file and what it set when the policy was resolved.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub struct GitConfigWatch {
    #[serde(with = "hex_path")]
    pub path: PathBuf,
    pub identity: Option<Identity>,
    /// Its content before the run (parsed by git only if it was replaced).
    #[serde(with = "hex_bytes")]
    pub before: Vec<u8>,
}

impl GitConfigWatch {
    /// Whether the command gets a private copy of it (see
    /// `integrity::copies`): when its content could be read. An empty one
    /// stays read-only.
    pub fn gets_a_copy(&self) -> bool {
        !self.before.is_empty()
    }
}

/// Bytes written as hex (a config file need not be UTF-8).
mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        super::hex_path::decode_bytes(&text).ok_or_else(|| serde::de::Error::custom("not hex"))
    }
}

/// The repositories under a project before its run: every `.git` entry the
/// walk from `scan_root` found. One that is there after the run but not in
/// this list was made by the command.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub struct Repositories {
    #[serde(with = "hex_path")]
    pub scan_root: PathBuf,
    #[serde(with = "hex_paths")]
    pub git_entries: Vec<PathBuf>,
    /// Submodule git directories (under `.git/modules` and worktrees'
    /// `modules`) of those repositories.
    #[serde(with = "hex_paths", default)]
    pub modules: Vec<PathBuf>,
    /// Directories the walk could not list (a repository could hide in one
    /// made unreadable during the run).
    #[serde(with = "hex_paths", default)]
    pub unreadable: Vec<PathBuf>,
    /// Each `.git` entry as it was ([`EntryId`]: one put in its place
    /// during the run is a new one), and for a directory its index
    /// (`GIT/index`) and that index's identity: an index the run changed
    /// may name a new gitlink.
    #[serde(default)]
    pub indexes: Vec<EntryStamp>,
    /// The bare repositories the walk found.
    #[serde(with = "hex_paths", default)]
    pub bare: Vec<PathBuf>,
    /// Where pip clones editable installs from git (`.venv/src`, see
    /// `policy::clone_gits`): the walk prunes them, so a clone the command
    /// makes there is looked for in them after the run. Their clones'
    /// `.git` entries are among `git_entries`.
    #[serde(with = "hex_paths", default)]
    pub clone_dirs: Vec<PathBuf>,
}

/// One `.git` entry before the run: what it was, and for a directory the
/// identity of its index then.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub struct EntryStamp {
    #[serde(with = "hex_path")]
    pub git: PathBuf,
    /// Its index's identity (none for a file or a link, or a directory
    /// without an index).
    pub identity: Option<Identity>,
    /// The entry itself (none in the notes of an older sbx, which listed
    /// the directories alone: then it is known by its path only).
    #[serde(default)]
    pub entry: Option<EntryId>,
}

/// What tells a directory (a `.git` entry, or one of a protected path's
/// parents) apart from another put in its place: device, inode and type,
/// and the birth time where the file system keeps one (an inode number
/// freed by a deletion is soon given again). Not the change time, which
/// git sets on every commit (files renamed into a `.git` directory).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub struct EntryId {
    dev: u64,
    ino: u64,
    kind: EntryKind,
    #[serde(default)]
    born: Option<(u64, u32)>,
}

/// What an entry is: a directory, a regular file, a link, something else,
/// or nothing at all (or nothing sbx can see).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
enum EntryKind {
    Missing,
    Dir,
    File,
    Link,
    Other,
}

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
impl EntryId {
    /// What is at `path` now, not following a final link.
    pub fn of(path: &Path) -> EntryId {
        use std::os::unix::fs::MetadataExt;
        let Ok(m) = std::fs::symlink_metadata(path) else {
            return EntryId {
                dev: 0,
                ino: 0,
                kind: EntryKind::Missing,
                born: None,
            };
        };
        let t = m.file_type();
        EntryId {
            dev: m.dev(),
            ino: m.ino(),
            kind: if t.is_dir() {
                EntryKind::Dir
            } else if t.is_file() {
                EntryKind::File
            } else if t.is_symlink() {
                EntryKind::Link
            } else {
                EntryKind::Other
            },
            born: birth_time(path, &m),
        }
    }
}

/// The birth time of what is at `path` (not following a final link),
/// whose `lstat` `m` was just taken, where the file system keeps one.
fn birth_time(path: &Path, m: &std::fs::Metadata) -> Option<(u64, u32)> {
    match m.created() {
        Ok(t) => t
            .duration_since(std::time::UNIX_EPOCH)
            .ok()
            .map(|d| (d.as_secs(), d.subsec_nanos())),
        Err(_) => birth_time_from_statx(path, m),
    }
}

/// Rust's standard library reads no birth time with musl (it calls `statx`
/// with glibc only): asked of `statx` here, and taken only if it names the
/// same file as `m`.
#[cfg(all(target_os = "linux", target_env = "musl"))]
fn birth_time_from_statx(path: &Path, m: &std::fs::Metadata) -> Option<(u64, u32)> {
    use rustix::fs::{statx, AtFlags, StatxFlags, CWD};
    use std::os::unix::fs::MetadataExt;
    let s = statx(CWD, path, AtFlags::SYMLINK_NOFOLLOW, StatxFlags::BTIME).ok()?;
    let same =
        s.stx_ino == m.ino() && rustix::fs::makedev(s.stx_dev_major, s.stx_dev_minor) == m.dev();
    let has_birth = StatxFlags::from_bits_retain(s.stx_mask).contains(StatxFlags::BTIME);
    (same && has_birth).then_some(())?;
    Some((u64::try_from(s.stx_btime.tv_sec).ok()?, s.stx_btime.tv_nsec))
}

/// With glibc (and on macOS), the standard library already asked: none.
#[cfg(not(all(target_os = "linux", target_env = "musl")))]
fn birth_time_from_statx(_path: &Path, _m: &std::fs::Metadata) -> Option<(u64, u32)> {
    None
}

impl Repositories {
    /// The `.git` directories among the entries (not files or links).
    // Read by the Linux checks only.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub fn git_dirs(entries: &[PathBuf]) -> impl Iterator<Item = &PathBuf> {
        entries
            .iter()
            .filter(|g| std::fs::symlink_metadata(g).is_ok_and(|m| m.is_dir()))
    }

    /// Each entry as it is now ([`EntryId`]), with a directory's index
    /// and its identity.
    pub fn index_identities(entries: &[PathBuf]) -> Vec<EntryStamp> {
        entries
            .iter()
            .map(|g| {
                let entry = EntryId::of(g);
                EntryStamp {
                    git: g.clone(),
                    identity: (entry.kind == EntryKind::Dir)
                        .then(|| Identity::of(&g.join("index")))
                        .flatten(),
                    entry: Some(entry),
                }
            })
            .collect()
    }

    /// Whether the `.git` entry `git`, which is `now`, was there before
    /// the run: at the same path, and the same entry (where the note
    /// recorded it), not another the command put in its place.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub fn knew(&self, git: &Path, now: &EntryId) -> bool {
        if !self.git_entries.iter().any(|g| g == git) {
            return false;
        }
        match self.indexes.iter().find(|s| s.git == git) {
            Some(EntryStamp {
                entry: Some(then), ..
            }) => then == now,
            // An older note, which recorded directories alone (as known by
            // their path), or nothing for this one.
            Some(_) => true,
            None => !self.indexes.iter().any(|s| s.entry.is_some()),
        }
    }
}

/// [`hex_path`] for a list of paths.
mod hex_paths {
    use std::path::PathBuf;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(paths: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(paths.iter().map(|p| super::hex_path::encode(p)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|text| {
                super::hex_path::decode(text)
                    .ok_or_else(|| serde::de::Error::custom("not a hex-encoded path"))
            })
            .collect()
    }
}

/// The directory a `.git` file names, read as git reads it (setup.c,
/// `read_gitfile_gently`): the whole file up to 1 MiB (links followed, as
/// git opens it), `gitdir: ` with exactly one space, then every trailing
/// newline and carriage return of the file dropped, and the name up to a
/// NUL (no other trimming: a trailing space or tab is part of it),
/// relative to the directory of `dot_git` itself. `None` for anything git
/// would refuse.
pub fn gitdir_named(dot_git: &Path) -> Option<PathBuf> {
    // Most `.git` entries are directories: one `lstat`, no resolution.
    let kind = std::fs::symlink_metadata(dot_git).ok()?.file_type();
    let bytes = if kind.is_file() {
        read_regular_file(dot_git, 1 << 20).ok()??
    } else if kind.is_symlink() {
        read_regular_file(&std::fs::canonicalize(dot_git).ok()?, 1 << 20).ok()??
    } else {
        return None;
    };
    let named = git_path_line(bytes.strip_prefix(b"gitdir: ")?)?;
    Some(match dot_git.parent() {
        Some(dir) => dir.join(named),
        None => PathBuf::from(named),
    })
}

/// The directory a linked worktree's git directory `dir` names in its
/// `commondir` (relative to `dir`), read as git reads it (setup.c,
/// `get_common_dir_noenv`: trailing newlines and carriage returns
/// dropped, then up to a NUL), if it has one.
pub fn common_dir_named(dir: &Path) -> Option<PathBuf> {
    let bytes = read_regular_file(&dir.join("commondir"), 1 << 24).ok()??;
    git_path_line(&bytes).map(|named| dir.join(named))
}

/// A path as git takes it from a one-line file: trailing newlines and
/// carriage returns of the whole content dropped first, then the bytes up
/// to a NUL; `None` when nothing is left.
fn git_path_line(content: &[u8]) -> Option<&std::ffi::OsStr> {
    use std::os::unix::ffi::OsStrExt;
    let end = content
        .iter()
        .rposition(|&b| b != b'\n' && b != b'\r')
        .map_or(0, |i| i + 1);
    let line = content[..end].split(|&b| b == 0).next().unwrap_or_default();
    (!line.is_empty()).then(|| std::ffi::OsStr::from_bytes(line))
}

/// The content of the regular file at `path` (`None`: nothing there),
/// without following a link or blocking on a FIFO or device, and at most
/// `cap` bytes; why not otherwise.
pub fn read_regular_file(path: &Path, cap: u64) -> Result<Option<Vec<u8>>, &'static str> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => return Err("unreadable"),
    };
    if !meta.is_file() {
        return Err("not a regular file");
    }
    if meta.len() > cap {
        return Err("too large");
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|_| "unreadable")?;
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return Err("not a regular file");
    }
    let mut bytes = Vec::new();
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(|_| "unreadable")?;
    if bytes.len() as u64 > cap {
        return Err("too large");
    }
    Ok(Some(bytes))
}

#[cfg(test)]
mod gitdir_tests {
    use super::gitdir_named;
    use std::path::Path;

    /// Read as git reads it: only trailing newlines and carriage returns go.
    #[test]
    fn a_git_file_is_read_as_git_reads_it() {
        let t = tempfile::tempdir().unwrap();
        let dot_git = t.path().join(".git");
        let named = |content: &[u8]| {
            std::fs::write(&dot_git, content).unwrap();
            gitdir_named(&dot_git)
        };
        let under = |rel: &str| Some(t.path().join(rel));
        assert_eq!(named(b"gitdir: gd\n"), under("gd"));
        assert_eq!(named(b"gitdir: gd\r\n\n\n"), under("gd"));
        assert_eq!(named(b"gitdir: gd \n"), under("gd "));
        assert_eq!(named(b"gitdir: gd\t\n"), under("gd\t"));
        assert_eq!(named(b"gitdir:  gd\n"), under(" gd"));
        assert_eq!(
            named(b"gitdir: /abs/gd\n"),
            Some(Path::new("/abs/gd").into())
        );
        let mut long = b"gitdir: gd".to_vec();
        long.extend(std::iter::repeat_n(b'\n', 5000));
        assert_eq!(named(&long), under("gd"));
        // Trailing newlines go before the NUL cuts: git uses `gd\n` here.
        assert_eq!(named(b"gitdir: gd\n\0x"), under("gd\n"));
        assert_eq!(named(b"gitdir: gd\0x\n"), under("gd"));
        assert_eq!(named(b"gitdir:gd\n"), None);
        assert_eq!(named(b"gitdir: \n"), None);
        assert_eq!(named(b"nothing\n"), None);
    }
}

#[cfg(all(test, target_os = "linux"))]
mod birth_tests {
    use super::{Born, EntryId, Identity};
    use rustix::fs::{statx, AtFlags, StatxFlags, CWD};

    /// Where the kernel reports a birth time, both identities carry it,
    /// whatever the C library (with musl the standard library reads none).
    #[test]
    fn identities_carry_the_birth_time_the_kernel_reports() {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let link = t.path().join("l");
        std::os::unix::fs::symlink("f", &link).unwrap();
        for path in [&file, &link] {
            let s = statx(CWD, path, AtFlags::SYMLINK_NOFOLLOW, StatxFlags::BTIME).unwrap();
            let kernel = StatxFlags::from_bits_retain(s.stx_mask)
                .contains(StatxFlags::BTIME)
                .then_some((s.stx_btime.tv_sec as u64, s.stx_btime.tv_nsec));
            let identity = Identity::of(path).unwrap();
            match kernel {
                Some((secs, nanos)) => {
                    assert_eq!(identity.born, Born::At(secs, nanos), "{path:?}");
                    assert_eq!(EntryId::of(path).born, Some((secs, nanos)), "{path:?}");
                }
                None => assert!(matches!(identity.born, Born::Changed(..)), "{path:?}"),
            }
        }
    }
}
