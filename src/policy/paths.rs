//! Paths as the host has them: real paths (remembered during one
//! resolution), the project root, and the system paths of read-only mode.

use std::path::{Path, PathBuf};

use super::lists::SYSTEM_PATHS;
use super::{Host, Kind, Platform, SystemPath};
use crate::config::FsSetting;

/// The real path of `p`, or `None` when it does not exist.
///
/// Like `realpath`, but every directory already resolved during this
/// resolution is remembered: the credential list, the protected paths and the
/// writable roots share long prefixes, and resolving each from `/` cost over
/// 250 `readlink` calls per run. A path with `.` or `..` goes to the system's
/// `realpath` (a `..` after a symlink must climb the physical tree).
pub(super) fn real(p: &Path) -> Option<PathBuf> {
    if !plain(p) {
        return std::fs::canonicalize(p).ok();
    }
    REAL_MEMO.with(|memo| resolve_memo(&mut memo.borrow_mut(), p, 0))
}

/// An absolute path without `.` or `..` (byte by byte: parsing its
/// components cost more than the lookups it guards).
fn plain(p: &Path) -> bool {
    shape(p).is_some()
}

/// An absolute path in normal form: [`plain`], and `/` alone or `/`
/// followed by names, one `/` between each (no `//`, no trailing `/`).
fn normal(p: &Path) -> bool {
    shape(p) == Some(true)
}

/// `None` for a path that is not [`plain`]; else whether it is [`normal`].
/// One pass over the bytes.
fn shape(p: &Path) -> Option<bool> {
    let bytes = p.as_os_str().as_encoded_bytes();
    let rest = bytes.strip_prefix(b"/")?;
    if rest.is_empty() {
        return Some(true);
    }
    // Each name between two `/` (the last one ends the path): `.` and `..`
    // are not plain, an empty one (`//`, a trailing `/`) is not normal.
    let mut normal = true;
    for name in rest.split(|&b| b == b'/') {
        if name == b"." || name == b".." {
            return None;
        }
        normal &= !name.is_empty();
    }
    Some(normal)
}

/// `p.starts_with(root)`, byte by byte when both are normal absolute paths
/// (as resolution makes them: no `.`, `..`, `//` or trailing `/`), where the
/// answer is the same; by components otherwise.
#[cfg(test)]
fn within(p: &Path, root: &Path) -> bool {
    Roots::new([root]).find(p).is_some()
}

/// Directories (the writable roots) to find a path's place among, many
/// times: `Path::starts_with` parses both paths' components each time, and
/// was a tenth of sbx's own work in resolution.
pub(super) struct Roots<'a> {
    roots: Vec<(&'a Path, bool)>,
}

impl<'a> Roots<'a> {
    pub(super) fn new(roots: impl IntoIterator<Item = &'a Path>) -> Roots<'a> {
        Roots {
            roots: roots.into_iter().map(|r| (r, normal(r))).collect(),
        }
    }

    /// The first root `p` lies in (or is), as `Path::starts_with` tells.
    pub(super) fn find(&self, p: &Path) -> Option<&'a Path> {
        let p_normal = normal(p);
        let pb = p.as_os_str().as_encoded_bytes();
        self.roots.iter().find_map(|&(root, root_normal)| {
            let inside = if p_normal && root_normal {
                let rb = root.as_os_str().as_encoded_bytes();
                pb.starts_with(rb)
                    && (pb.len() == rb.len() || rb == b"/" || pb.get(rb.len()) == Some(&b'/'))
            } else {
                p.starts_with(root)
            };
            inside.then_some(root)
        })
    }
}

/// FNV-1a, for the memories below: their keys are this run's own paths,
/// a few hundred, and the standard hasher was a tenth of sbx's own work.
/// Its starting value is drawn once per process, so that names chosen in
/// a repository (submodule directories) cannot be made to collide ahead of
/// time.
pub(super) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        static SEED: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        Fnv(*SEED.get_or_init(|| {
            use std::hash::BuildHasher;
            std::collections::hash_map::RandomState::new().hash_one(0xcbf2_9ce4_8422_2325u64)
        }))
    }
}

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
}

type Memo<V> = std::collections::HashMap<std::ffi::OsString, V, std::hash::BuildHasherDefault<Fnv>>;

/// What [`real`] found for each path, keyed by the path's bytes (hashing a
/// `Path` walks its components, which cost more than the lookups it saves).
type RealMemo = Memo<Option<PathBuf>>;

thread_local! {
    static REAL_MEMO: std::cell::RefCell<RealMemo> =
        std::cell::RefCell::new(RealMemo::default());
}

/// Forget what [`real`] and [`lstat`] remembered (at the start and the end
/// of each resolution: nothing after it sees what it saw).
pub(super) fn forget_real_paths() {
    REAL_MEMO.with(|memo| memo.borrow_mut().clear());
    LSTAT_MEMO.with(|memo| memo.borrow_mut().clear());
}

/// What [`lstat`] found for each path, keyed like [`RealMemo`].
type LstatMemo = Memo<Result<std::fs::Metadata, std::io::ErrorKind>>;

thread_local! {
    static LSTAT_MEMO: std::cell::RefCell<LstatMemo> =
        std::cell::RefCell::new(LstatMemo::default());
}

/// `lstat(p)`, looked at once per resolution: the steps ask about the same
/// paths (`.git` alone about 25 times per run), and each asked the kernel
/// again. A path with `.` or `..` is not remembered.
pub(super) fn lstat_result(p: &Path) -> Result<std::fs::Metadata, std::io::ErrorKind> {
    if !plain(p) {
        return std::fs::symlink_metadata(p).map_err(|e| e.kind());
    }
    if let Some(known) = LSTAT_MEMO.with(|memo| memo.borrow().get(p.as_os_str()).cloned()) {
        return known;
    }
    let found = std::fs::symlink_metadata(p).map_err(|e| e.kind());
    LSTAT_MEMO.with(|memo| {
        memo.borrow_mut()
            .insert(p.as_os_str().to_owned(), found.clone())
    });
    found
}

/// [`lstat_result`], `None` for any error.
pub(super) fn lstat(p: &Path) -> Option<std::fs::Metadata> {
    lstat_result(p).ok()
}

/// `stat(p)`: what `p` names, links followed. The same answer as the
/// system call (`lstat` failing means `stat` fails too, and a link names
/// what its real path names), from what [`lstat`] and [`real`] remember.
pub(super) fn stat(p: &Path) -> Option<std::fs::Metadata> {
    let here = lstat(p)?;
    if here.file_type().is_symlink() {
        return real(p).and_then(|r| lstat(&r));
    }
    Some(here)
}

/// Tell [`real`] that nothing is at `p` (an `lstat` just said so), so that
/// resolving it costs no second look.
pub(super) fn note_missing(p: &Path) {
    if plain(p) {
        REAL_MEMO.with(|memo| {
            memo.borrow_mut().insert(p.as_os_str().to_owned(), None);
        });
    }
}

/// `(p.parent(), p.file_name())` of a [`plain`] path, byte by byte
/// (`None` for the root); parsing components from the end was a tenth of
/// sbx's own work.
fn split_plain(p: &Path) -> Option<(&Path, &std::ffi::OsStr)> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = p.as_os_str().as_encoded_bytes();
    let end = bytes.iter().rposition(|&b| b != b'/')? + 1;
    let start = bytes[..end].iter().rposition(|&b| b == b'/')? + 1;
    let mut parent_end = start;
    while parent_end > 1 && bytes[parent_end - 1] == b'/' {
        parent_end -= 1;
    }
    Some((
        Path::new(std::ffi::OsStr::from_bytes(&bytes[..parent_end])),
        std::ffi::OsStr::from_bytes(&bytes[start..end]),
    ))
}

fn resolve_memo(memo: &mut RealMemo, p: &Path, depth: u32) -> Option<PathBuf> {
    if let Some(known) = memo.get(p.as_os_str()) {
        return known.clone();
    }
    let Some((parent, name)) = split_plain(p) else {
        return Some(p.to_path_buf()); // the root
    };
    let parent = resolve_memo(memo, parent, depth)?;
    let candidate = parent.join(name);
    let result = match lstat(&candidate) {
        None => None,
        Some(m) if m.file_type().is_symlink() => match std::fs::read_link(&candidate) {
            // Too many links: let the system give its answer (ELOOP).
            _ if depth > 40 => std::fs::canonicalize(&candidate).ok(),
            Ok(target) => {
                let joined = parent.join(target);
                if plain(&joined) {
                    resolve_memo(memo, &joined, depth + 1)
                } else {
                    std::fs::canonicalize(&joined).ok()
                }
            }
            Err(_) => None,
        },
        Some(_) => Some(candidate),
    };
    memo.insert(p.as_os_str().to_owned(), result.clone());
    result
}

/// On macOS `/tmp`, `/var` and `/etc` are symlinks into `/private`, and Seatbelt
/// matches real paths. When rendering for macOS on another host the host cannot
/// resolve that, so the mapping is applied by spelling.
pub(super) fn macos_real_spelling(p: &Path) -> PathBuf {
    for top in ["/tmp", "/var", "/etc"] {
        if let Ok(rest) = p.strip_prefix(top) {
            let real = Path::new("/private").join(top.trim_start_matches('/'));
            return if rest.as_os_str().is_empty() {
                real
            } else {
                real.join(rest)
            };
        }
    }
    p.to_path_buf()
}

pub(super) fn kind_of(p: &Path) -> Kind {
    match stat(p) {
        Some(m) if m.is_dir() => Kind::Dir,
        Some(_) => Kind::File,
        None => Kind::Missing,
    }
}

/// Whether an error says there is nothing at a path (`ENOENT`, or a file
/// where a directory was expected on the way), not that it cannot be told.
pub(super) fn nothing_there(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(nix::libc::ENOENT | nix::libc::ENOTDIR)
    )
}

/// Whether something is at `p`, links followed (`Path::exists`).
pub(super) fn exists(p: &Path) -> bool {
    stat(p).is_some()
}

/// The highest ancestor of `project` (itself included) that holds `.git`,
/// below the home directory and never `/`.
pub(super) fn outermost_repository(project: &Path, homes: &[&Path]) -> PathBuf {
    let mut top = project.to_path_buf();
    for dir in project.ancestors() {
        if dir == Path::new("/") || homes.iter().any(|h| h.starts_with(dir)) {
            break;
        }
        if exists(&dir.join(".git")) {
            top = dir.to_path_buf();
        }
    }
    top
}

/// The project root: the nearest ancestor of `cwd` holding `.git`, but never
/// a home directory (`homes`: `HOME`'s, and the user database's when
/// `HOME` names another), one of its ancestors, or `/` (a dotfiles
/// repository in a home must not make all of it writable); else `cwd`
/// itself.
pub(super) fn find_project(cwd: &Path, homes: &[&Path]) -> PathBuf {
    for dir in cwd.ancestors() {
        if dir == Path::new("/") || homes.iter().any(|h| h.starts_with(dir)) {
            break;
        }
        if exists(&dir.join(".git")) {
            return dir.to_path_buf();
        }
    }
    cwd.to_path_buf()
}

/// What read-only mode reads besides the project: the system directories
/// on Linux, the developer directory on macOS.
pub(super) fn readable_system_paths(fs: FsSetting, host: &Host) -> Vec<SystemPath> {
    match (fs, host.platform) {
        (FsSetting::ReadOnly, Platform::Linux) => system_paths(),
        (FsSetting::ReadOnly, Platform::Macos) => developer_dirs(host),
        _ => Vec::new(),
    }
}

/// The system paths readable in read-only mode, as they exist on this host.
fn system_paths() -> Vec<SystemPath> {
    let mut out = Vec::new();
    for p in SYSTEM_PATHS {
        let path = PathBuf::from(p);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(&path) {
                    out.push(SystemPath::Symlink { path, target });
                }
            }
            Ok(m) if m.is_dir() => out.push(SystemPath::Dir(path)),
            _ => {}
        }
    }
    out
}

/// macOS: the developer directory the `/usr/bin/git`, `python3` and `clang`
/// shims run their tools from (`xcode-select`'s choice, or `$DEVELOPER_DIR`),
/// so that they work in read-only mode: an Xcode installation is not among
/// the system directories the profile reads.
fn developer_dirs(host: &Host) -> Vec<SystemPath> {
    let chosen = host
        .var("DEVELOPER_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .or_else(|| std::fs::read_link("/private/var/db/xcode_select_link").ok());
    chosen
        .and_then(|d| std::fs::canonicalize(d).ok())
        .filter(|d| d.is_dir() && d.parent().is_some())
        .map(SystemPath::Dir)
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splitting a plain path gives what `parent` and `file_name` give.
    #[test]
    fn split_plain_answers_as_parent_and_file_name() {
        for p in [
            "/",
            "//",
            "/a",
            "/a/",
            "/a/b",
            "/a/b/",
            "/a//b",
            "//a",
            "/a/b//",
            "/ab/cd/ef",
        ] {
            let p = Path::new(p);
            let std = p.parent().zip(p.file_name());
            assert_eq!(split_plain(p), std, "{}", p.display());
        }
    }

    /// `plain` and `normal` tell the shapes they name.
    #[test]
    fn plain_and_normal_paths() {
        for (p, plain_, normal_) in [
            ("/", true, true),
            ("/a", true, true),
            ("/a/b", true, true),
            ("/a/", true, false),
            ("/a//b", true, false),
            ("//", true, false),
            ("/.a/..b/...", true, true),
            ("/a/./b", false, false),
            ("/a/../b", false, false),
            ("/.", false, false),
            ("/a/..", false, false),
            ("a/b", false, false),
            ("", false, false),
        ] {
            assert_eq!(plain(Path::new(p)), plain_, "plain {p}");
            assert_eq!(normal(Path::new(p)), normal_, "normal {p}");
        }
    }

    /// The byte-wise `within` answers as `Path::starts_with` does.
    #[test]
    fn within_answers_as_starts_with() {
        let paths = [
            "/", "/a", "/a/b", "/ab", "/a/bc", "/a/b/c", "/a/", "/a//b", "/a/./b", "/a/../b", "a",
            "a/b", "", "/a/b/", "/.", "/..",
        ];
        for p in paths {
            for r in paths {
                assert_eq!(
                    within(Path::new(p), Path::new(r)),
                    Path::new(p).starts_with(r),
                    "{p} within {r}"
                );
            }
        }
    }

    #[test]
    fn remembered_real_paths_agree_with_realpath() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(base.join("a/b/c")).unwrap();
        std::fs::write(base.join("a/b/c/f"), "x").unwrap();
        std::os::unix::fs::symlink("a/b", base.join("rel")).unwrap();
        std::os::unix::fs::symlink(base.join("a"), base.join("abs")).unwrap();
        std::os::unix::fs::symlink("../b/c", base.join("a/b/up")).unwrap();
        std::os::unix::fs::symlink("loop2", base.join("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", base.join("loop2")).unwrap();
        std::os::unix::fs::symlink("missing", base.join("dangling")).unwrap();
        forget_real_paths();
        for rel in [
            "a/b/c/f",
            "rel/c/f",
            "abs/b/c",
            "a/b/up/f",
            "rel/up",
            "loop1",
            "dangling",
            "nope",
            "a/b/c/f/x",
            "rel",
            "abs",
        ] {
            let p = base.join(rel);
            assert_eq!(real(&p), std::fs::canonicalize(&p).ok(), "{rel}");
            // And again, from the memo.
            assert_eq!(
                real(&p),
                std::fs::canonicalize(&p).ok(),
                "{rel} (remembered)"
            );
        }
    }

    #[test]
    fn remembered_stats_agree_with_the_system() {
        use std::os::unix::fs::MetadataExt;
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(base.join("a/b")).unwrap();
        std::fs::write(base.join("a/f"), "x").unwrap();
        std::os::unix::fs::symlink("a", base.join("dir-link")).unwrap();
        std::os::unix::fs::symlink("a/f", base.join("file-link")).unwrap();
        std::os::unix::fs::symlink("missing", base.join("dangling")).unwrap();
        std::os::unix::fs::symlink("loop2", base.join("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", base.join("loop2")).unwrap();
        forget_real_paths();
        let id = |m: std::fs::Metadata| (m.dev(), m.ino(), m.mode());
        for rel in [
            "a",
            "a/b",
            "a/f",
            "a/f/x",
            "dir-link",
            "dir-link/f",
            "file-link",
            "dangling",
            "loop1",
            "nope",
            "a/../a/f",
        ] {
            let p = base.join(rel);
            for _ in 0..2 {
                assert_eq!(
                    lstat(&p).map(id),
                    std::fs::symlink_metadata(&p).ok().map(id),
                    "lstat {rel}"
                );
                assert_eq!(
                    stat(&p).map(id),
                    std::fs::metadata(&p).ok().map(id),
                    "stat {rel}"
                );
                assert_eq!(exists(&p), p.exists(), "exists {rel}");
            }
        }
        forget_real_paths();
    }

    #[test]
    fn macos_spelling() {
        assert_eq!(
            macos_real_spelling(Path::new("/tmp")).to_str(),
            Some("/private/tmp")
        );
        assert_eq!(
            macos_real_spelling(Path::new("/var/folders/x")),
            PathBuf::from("/private/var/folders/x")
        );
        assert_eq!(
            macos_real_spelling(Path::new("/private/tmp")),
            PathBuf::from("/private/tmp")
        );
        assert_eq!(
            macos_real_spelling(Path::new("/tmpx")),
            PathBuf::from("/tmpx")
        );
        assert_eq!(
            macos_real_spelling(Path::new("/Users/u")),
            PathBuf::from("/Users/u")
        );
    }

    #[test]
    fn project_root_never_home() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        std::fs::create_dir_all(home.join(".git")).unwrap();
        std::fs::create_dir_all(home.join("code/repo/.git")).unwrap();
        std::fs::create_dir_all(home.join("code/repo/sub")).unwrap();
        std::fs::create_dir_all(home.join("scratch")).unwrap();
        assert_eq!(
            find_project(&home.join("code/repo/sub"), &[&home]),
            home.join("code/repo")
        );
        assert_eq!(
            find_project(&home.join("scratch"), &[&home]),
            home.join("scratch")
        );
        assert_eq!(find_project(&home, &[&home]), home);
    }
}
