//! Discovery of `.env` files in the project, so they can be masked.
//!
//! sbx runs once per agent command, so on a large unchanged tree this must
//! cost almost nothing. The walk is cached between runs:
//!
//! * The cache (one file per project under the cache directory, named by an
//!   FNV-1a hash of the project path) records, for every directory walked,
//!   its device, inode, modification and change times, the names of its
//!   subdirectories and the names of its entries that could be `.env` files.
//! * The next run stats each recorded directory. A directory whose stamp is
//!   unchanged has the same direct entries, so its recorded names are reused;
//!   any other directory is read again, and a new subdirectory is walked in
//!   full. An unchanged tree costs one `lstat` per directory.
//! * A directory modified within [`RACE_NS`] of the previous walk is read
//!   again regardless: an entry created in the same timestamp tick as that
//!   walk's read would not show in the modification time.
//! * The change time is part of the stamp: it cannot be set back, so a
//!   directory whose modification time was reset (`touch -d`) is read again.
//! * Candidate names are resolved on every run (a `.env` symlink's target
//!   can change without touching its directory).
//!
//! The cache lives outside every writable root, but its content is still
//! treated as untrusted: a file that fails to parse, has another format or
//! sbx version, belongs to another project, or names anything but single
//! path components is ignored (full walk). Failure to write it is silent.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{DirBuilder, File, Metadata, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Directories never searched: they do not hold the user's own secrets.
pub const PRUNED: &[&str] = &[
    ".git",
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".gradle",
    ".direnv",
];

/// First token of a cache file.
const MAGIC: &[u8] = b"sbx-envscan";
/// Cache layout version; bump on any change to the layout or its meaning.
const FORMAT: &[u8] = b"1";
/// A directory modified this close to (or after) the previous walk is read
/// again: timestamps are coarser than the events they record.
const RACE_NS: i128 = 2_000_000_000;
/// A larger cache file is ignored.
const MAX_CACHE_BYTES: u64 = 64 << 20;

/// Real paths of the regular `.env` files under `project` (sorted, without
/// duplicates), walking from the cache in `cache_dir` when there is one.
#[cfg(test)]
pub fn find(project: &Path, cache_dir: Option<&Path>) -> Vec<PathBuf> {
    scan(project, cache_dir, now_ns()).0
}

/// [`find`], and the directories that could not be listed (no read
/// permission): what they hold is unknown, so they must be masked whole. A
/// command can make a directory unreadable to hide a `.env` from the next
/// scan, then make it readable again.
pub fn find_with_unreadable(
    project: &Path,
    cache_dir: Option<&Path>,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (found, stats) = scan(project, cache_dir, now_ns());
    (found, stats.unreadable)
}

/// What identifies a directory's entry list as unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    /// Modification time, nanoseconds since the epoch.
    mtime: i128,
    /// Change time, nanoseconds since the epoch.
    ctime: i128,
}

impl Stamp {
    fn of(m: &Metadata) -> Stamp {
        let ns = |s: i64, n: i64| i128::from(s) * 1_000_000_000 + i128::from(n);
        Stamp {
            dev: m.dev(),
            ino: m.ino(),
            mtime: ns(m.mtime(), m.mtime_nsec()),
            ctime: ns(m.ctime(), m.ctime_nsec()),
        }
    }

    /// Whether both times are safely older than a walk that started at `walk`.
    fn settled(&self, walk: i128) -> bool {
        let limit = walk.saturating_sub(RACE_NS);
        self.mtime < limit && self.ctime < limit
    }
}

/// One directory's relevant entries.
#[derive(Debug)]
struct Dir {
    stamp: Stamp,
    /// Names of the subdirectories (pruned ones included; pruning is applied
    /// when walking).
    subdirs: Vec<Vec<u8>>,
    /// Names of the entries other than directories that start with `.env`
    /// (any case); [`is_env_file_name`] is applied when
    /// resolving.
    envs: Vec<Vec<u8>>,
    /// It could not be listed (never cached: read again every time).
    unreadable: bool,
}

/// A decoded cache file.
struct Cache {
    /// When the walk that wrote it started (nanoseconds since the epoch).
    walk: i128,
    /// Directories by path relative to the project (`a/b`; empty for the root).
    dirs: HashMap<Vec<u8>, Dir>,
}

/// Counters, for tests.
#[derive(Debug, Default)]
struct Stats {
    read: usize,
    reused: usize,
    wrote: bool,
    /// Directories that could not be listed.
    unreadable: Vec<PathBuf>,
}

fn scan(project: &Path, cache_dir: Option<&Path>, now: i128) -> (Vec<PathBuf>, Stats) {
    let cache_file = cache_dir.map(|d| d.join(cache_name(project)));
    let cache = cache_file.as_deref().and_then(|f| load(f, project));
    let mut dirty = cache.is_none();
    let (walk, mut old) = match cache {
        Some(c) => (c.walk, c.dirs),
        None => (i128::MIN, HashMap::new()),
    };

    let mut stats = Stats::default();
    let mut found: Vec<PathBuf> = Vec::new();
    let mut records: Vec<(Vec<u8>, Dir)> = Vec::new();
    let mut stack: Vec<Vec<u8>> = vec![Vec::new()];
    while let Some(rel) = stack.pop() {
        let path = if rel.is_empty() {
            project.to_path_buf()
        } else {
            project.join(OsStr::from_bytes(&rel))
        };
        // Stat before reading: a change after this point shows next time.
        // `lstat`, so a directory symlink is never followed.
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) => {
                // Listed but not searchable (`chmod 444` on its parent):
                // what it holds is unknown, so the parent is masked whole.
                if e.kind() == io::ErrorKind::PermissionDenied {
                    if let Some(parent) = path.parent() {
                        stats.unreadable.push(parent.to_path_buf());
                    }
                }
                continue;
            }
        };
        if !meta.is_dir() {
            continue;
        }
        let stamp = Stamp::of(&meta);
        let cached = old
            .remove(&rel)
            .filter(|d| d.stamp == stamp && d.stamp.settled(walk));
        let (dir, complete) = match cached {
            Some(d) => {
                stats.reused += 1;
                (d, true)
            }
            None => {
                stats.read += 1;
                dirty = true;
                let (dir, complete) = read(&path, stamp);
                if dir.unreadable {
                    stats.unreadable.push(path.clone());
                }
                (dir, complete)
            }
        };
        for name in &dir.subdirs {
            if !is_pruned(name) {
                let mut child = rel.clone();
                if !child.is_empty() {
                    child.push(b'/');
                }
                child.extend_from_slice(name);
                stack.push(child);
            }
        }
        for name in &dir.envs {
            if resolve(&path, name, &mut found) == Resolved::Denied {
                stats.unreadable.push(path.clone());
            }
        }
        // An incompletely read directory is left out, so it is read again.
        if complete {
            records.push((rel, dir));
        }
    }

    if dirty {
        if let Some(file) = &cache_file {
            stats.wrote = store(file, project, now, &records).is_ok();
        }
    }
    found.sort();
    found.dedup();
    (found, stats)
}

/// Read one directory. The flag tells whether the listing is complete; a
/// directory that may not be read is incomplete (so never cached) and marked
/// unreadable.
fn read(path: &Path, stamp: Stamp) -> (Dir, bool) {
    let mut dir = Dir {
        stamp,
        subdirs: Vec::new(),
        envs: Vec::new(),
        unreadable: false,
    };
    let entries = match std::fs::read_dir(path) {
        Ok(e) => e,
        Err(e) => {
            dir.unreadable = e.kind() == io::ErrorKind::PermissionDenied;
            return (dir, false);
        }
    };
    let mut complete = true;
    for entry in entries {
        let Ok(entry) = entry else {
            complete = false;
            break;
        };
        // From the directory entry's type when the file system gives it;
        // never follows a symlink.
        let Ok(ft) = entry.file_type() else {
            complete = false;
            continue;
        };
        let name = entry.file_name().into_vec();
        if ft.is_dir() {
            dir.subdirs.push(name);
        } else if may_be_env(&name) {
            dir.envs.push(name);
        }
    }
    (dir, complete)
}

fn is_pruned(name: &[u8]) -> bool {
    PRUNED.iter().any(|p| p.as_bytes() == name)
}

/// Whether a name starts with `.env` in any case: every name
/// [`is_env_file_name`] accepts does.
fn may_be_env(name: &[u8]) -> bool {
    name.get(..4)
        .is_some_and(|p| p.eq_ignore_ascii_case(b".env"))
}

/// Add the real path of `dir/name` when it is a `.env` file that is, or is a
/// symlink to, a regular file (wherever the target is: the real path is what
/// must be masked).
fn resolve(dir: &Path, name: &[u8], out: &mut Vec<PathBuf>) -> Resolved {
    if !is_env_file_name(&String::from_utf8_lossy(name)) {
        return Resolved::Other;
    }
    let real = match std::fs::canonicalize(dir.join(OsStr::from_bytes(name))) {
        Ok(real) => real,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => return Resolved::Denied,
        Err(_) => return Resolved::Other,
    };
    if std::fs::metadata(&real).is_ok_and(|m| m.is_file()) {
        out.push(real);
    }
    Resolved::Other
}

/// Whether resolving a `.env` name was refused (its directory cannot be
/// searched: it must be masked whole).
#[derive(Debug, PartialEq, Eq)]
enum Resolved {
    Denied,
    Other,
}

fn now_ns() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
        .unwrap_or(0)
}

/// 64-bit FNV-1a: stable across Rust versions, unlike `DefaultHasher`.
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn cache_name(project: &Path) -> String {
    format!("envscan-{:016x}", fnv1a(project.as_os_str().as_bytes()))
}

// Cache file layout: a sequence of tokens, each terminated by a NUL byte
// (the one byte no path contains):
//
//   MAGIC FORMAT sbx-version project walk-start-ns dir-count
//   then per directory:
//   relative-path dev ino mtime-ns ctime-ns
//   subdir-count subdir-name... env-count env-name...

fn load(file: &Path, project: &Path) -> Option<Cache> {
    let mut bytes = Vec::new();
    File::open(file)
        .ok()?
        .take(MAX_CACHE_BYTES + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > MAX_CACHE_BYTES {
        return None;
    }
    decode(&bytes, project)
}

fn decode(bytes: &[u8], project: &Path) -> Option<Cache> {
    let mut t = bytes.strip_suffix(&[0])?.split(|&b| b == 0);
    let header: [&[u8]; 4] = [
        MAGIC,
        FORMAT,
        env!("CARGO_PKG_VERSION").as_bytes(),
        project.as_os_str().as_bytes(),
    ];
    for expected in header {
        if t.next()? != expected {
            return None;
        }
    }
    let walk: i128 = num(t.next()?)?;
    let count: usize = num(t.next()?)?;
    // `count` is untrusted: a record takes at least 13 bytes.
    let mut dirs = HashMap::with_capacity(count.min(bytes.len() / 13));
    for _ in 0..count {
        let rel = t.next()?;
        if !rel.is_empty() && !rel.split(|&b| b == b'/').all(valid_name) {
            return None;
        }
        let stamp = Stamp {
            dev: num(t.next()?)?,
            ino: num(t.next()?)?,
            mtime: num(t.next()?)?,
            ctime: num(t.next()?)?,
        };
        let subdirs = names(&mut t)?;
        let envs = names(&mut t)?;
        if dirs
            .insert(
                rel.to_vec(),
                Dir {
                    stamp,
                    subdirs,
                    envs,
                    unreadable: false,
                },
            )
            .is_some()
        {
            return None;
        }
    }
    if t.next().is_some() {
        return None;
    }
    Some(Cache { walk, dirs })
}

fn names<'a>(t: &mut impl Iterator<Item = &'a [u8]>) -> Option<Vec<Vec<u8>>> {
    let count: usize = num(t.next()?)?;
    let mut out = Vec::new();
    for _ in 0..count {
        let name = t.next()?;
        if !valid_name(name) {
            return None;
        }
        out.push(name.to_vec());
    }
    Some(out)
}

/// A single, normal path component.
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/') && !name.contains(&0)
}

/// A decimal integer: an optional `-`, then 1 to 38 digits (so no overflow).
fn num<T: TryFrom<i128>>(token: &[u8]) -> Option<T> {
    let (negative, digits) = match token.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, token),
    };
    if digits.is_empty() || digits.len() > 38 {
        return None;
    }
    let mut value: i128 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value * 10 + i128::from(d - b'0');
    }
    T::try_from(if negative { -value } else { value }).ok()
}

fn encode(project: &Path, walk: i128, records: &[(Vec<u8>, Dir)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut tok = |b: &[u8]| {
        out.extend_from_slice(b);
        out.push(0);
    };
    tok(MAGIC);
    tok(FORMAT);
    tok(env!("CARGO_PKG_VERSION").as_bytes());
    tok(project.as_os_str().as_bytes());
    tok(walk.to_string().as_bytes());
    tok(records.len().to_string().as_bytes());
    for (rel, d) in records {
        tok(rel);
        tok(d.stamp.dev.to_string().as_bytes());
        tok(d.stamp.ino.to_string().as_bytes());
        tok(d.stamp.mtime.to_string().as_bytes());
        tok(d.stamp.ctime.to_string().as_bytes());
        for list in [&d.subdirs, &d.envs] {
            tok(list.len().to_string().as_bytes());
            for name in list {
                tok(name);
            }
        }
    }
    out
}

/// Write the cache atomically: a private temporary file in the same
/// directory, renamed over the old one.
fn store(file: &Path, project: &Path, walk: i128, records: &[(Vec<u8>, Dir)]) -> io::Result<()> {
    let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
        return Err(io::ErrorKind::InvalidInput.into());
    };
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let bytes = encode(project, walk, records);
    let mut tmp_name = OsStr::new(".").to_os_string();
    tmp_name.push(name);
    tmp_name.push(format!(".{}.tmp", std::process::id()));
    let tmp = dir.join(tmp_name);
    // Left over by a process with the same id that died mid-write.
    let _ = std::fs::remove_file(&tmp);
    let result = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(&bytes))
        .and_then(|()| std::fs::rename(&tmp, file));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// `.env` files kept readable: committed templates.
pub const ENV_TEMPLATES: &[&str] = &[".env.example", ".env.sample", ".env.template"];

/// Whether a file name is a `.env` file whose reads are denied.
pub fn is_env_file_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    (lower == ".env" || lower.starts_with(".env.")) && !ENV_TEMPLATES.contains(&lower.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::{symlink, PermissionsExt};

    /// A walk "later": every directory created by the test is settled.
    fn later() -> i128 {
        now_ns() + 10 * RACE_NS
    }

    fn real(p: &Path) -> PathBuf {
        fs::canonicalize(p).unwrap()
    }

    fn touch(p: &Path) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "SECRET=1\n").unwrap();
    }

    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let project = t.path().join("proj");
        fs::create_dir(&project).unwrap();
        let project = real(&project);
        let cache = t.path().join("cache").join("sbx");
        (t, project, cache)
    }

    #[test]
    fn finds_nested_and_skips_templates_and_pruned() {
        let (_t, p, cache) = setup();
        let deep = p.join("a/b/c/d/e/.env");
        touch(&deep);
        touch(&p.join(".env.local"));
        touch(&p.join("x/.ENV.Production"));
        for n in [
            ".env.example",
            ".env.sample",
            ".env.template",
            ".envrc",
            "env",
            "x.env",
        ] {
            touch(&p.join("a").join(n));
        }
        for d in PRUNED {
            touch(&p.join("a/b").join(d).join(".env"));
        }
        // A directory named .env is walked into, not returned.
        touch(&p.join("venvs/.env/inner/.env"));
        let want = vec![
            real(&p.join(".env.local")),
            real(&deep),
            real(&p.join("venvs/.env/inner/.env")),
            real(&p.join("x/.ENV.Production")),
        ];
        let mut want_sorted = want.clone();
        want_sorted.sort();
        assert_eq!(find(&p, None), want_sorted);
        assert_eq!(find(&p, Some(&cache)), want_sorted);
        // From the cache, same answer.
        let (got, stats) = scan(&p, Some(&cache), later());
        assert_eq!(got, want_sorted);
        assert!(stats.read > 0, "{stats:?}"); // the first run's directories were too recent
        let (got, stats) = scan(&p, Some(&cache), later());
        assert_eq!(got, want_sorted);
        assert_eq!(stats.read, 0, "{stats:?}");
        assert!(!stats.wrote);
    }

    #[test]
    fn unchanged_tree_is_one_stat_per_directory() {
        let (_t, p, cache) = setup();
        for i in 0..20 {
            touch(&p.join(format!("d{i}/e/f{i}")));
        }
        let (_, first) = scan(&p, Some(&cache), later());
        assert!(first.wrote);
        assert_eq!(first.read, 1 + 20 * 2);
        let (_, second) = scan(&p, Some(&cache), later());
        assert_eq!((second.read, second.reused, second.wrote), (0, 41, false));
        // The cache directory is private.
        let mode = fs::metadata(&cache).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700);
        // No temporary file is left behind.
        assert_eq!(fs::read_dir(&cache).unwrap().count(), 1);
    }

    #[test]
    fn created_and_deleted_files_are_seen() {
        let (_t, p, cache) = setup();
        touch(&p.join("a/b/c/keep.txt"));
        touch(&p.join("z/.env"));
        let (got, _) = scan(&p, Some(&cache), later());
        assert_eq!(got, vec![real(&p.join("z/.env"))]);

        // Created after the cached run, deep in an otherwise unchanged tree.
        touch(&p.join("a/b/c/.env.local"));
        // A new subtree.
        touch(&p.join("a/new/deeper/.env"));
        fs::remove_file(p.join("z/.env")).unwrap();
        let (got, stats) = scan(&p, Some(&cache), later());
        assert_eq!(
            got,
            vec![
                real(&p.join("a/b/c/.env.local")),
                real(&p.join("a/new/deeper/.env"))
            ]
        );
        assert!(stats.reused > 0 && stats.read > 0, "{stats:?}");

        fs::remove_dir_all(p.join("a/new")).unwrap();
        let (got, _) = scan(&p, Some(&cache), later());
        assert_eq!(got, vec![real(&p.join("a/b/c/.env.local"))]);
    }

    #[test]
    fn recent_directories_are_read_again() {
        let (_t, p, cache) = setup();
        touch(&p.join("a/.env"));
        // Cache written "now": every directory was modified within the window.
        let (_, first) = scan(&p, Some(&cache), now_ns());
        let (_, second) = scan(&p, Some(&cache), later());
        assert_eq!(first.read, 2);
        assert_eq!(second.read, 2);
    }

    #[test]
    fn reset_mtime_is_noticed() {
        let (_t, p, cache) = setup();
        touch(&p.join("a/x"));
        scan(&p, Some(&cache), later());
        let before = fs::metadata(p.join("a")).unwrap().modified().unwrap();
        touch(&p.join("a/.env"));
        let times = fs::FileTimes::new().set_modified(before);
        File::open(p.join("a")).unwrap().set_times(times).unwrap();
        assert_eq!(
            fs::metadata(p.join("a")).unwrap().modified().unwrap(),
            before
        );
        let (got, _) = scan(&p, Some(&cache), later());
        assert_eq!(got, vec![real(&p.join("a/.env"))]);
    }

    #[test]
    fn symlinks() {
        let (t, p, cache) = setup();
        let outside = t.path().join("outside");
        touch(&outside.join(".env"));
        touch(&outside.join("secret"));
        // A directory symlink is not followed.
        symlink(&outside, p.join("linked")).unwrap();
        // A .env symlink to a file outside: its real target is returned.
        symlink(outside.join("secret"), p.join(".env")).unwrap();
        // To a file inside.
        touch(&p.join("real.txt"));
        symlink("../real.txt", {
            fs::create_dir(p.join("s")).unwrap();
            p.join("s/.env.dev")
        })
        .unwrap();
        // Dangling, and to a directory: not returned.
        symlink(t.path().join("missing"), p.join(".env.gone")).unwrap();
        symlink(&outside, p.join(".env.dir")).unwrap();
        let mut want = vec![real(&outside.join("secret")), real(&p.join("real.txt"))];
        want.sort();
        assert_eq!(find(&p, None), want);
        scan(&p, Some(&cache), later());
        // A dangling target that appears is found without a directory change.
        touch(&t.path().join("missing"));
        let (got, stats) = scan(&p, Some(&cache), later());
        assert_eq!(stats.read, 0);
        want.push(real(&t.path().join("missing")));
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn non_utf8_names() {
        let (_t, p, cache) = setup();
        let dir = p.join(OsStr::from_bytes(b"d\xff\n"));
        touch(&dir.join(".env"));
        touch(&p.join(OsStr::from_bytes(b".env.\xfe")));
        let want = {
            let mut w = vec![
                real(&dir.join(".env")),
                real(&p.join(OsStr::from_bytes(b".env.\xfe"))),
            ];
            w.sort();
            w
        };
        assert_eq!(find(&p, None), want);
        scan(&p, Some(&cache), later());
        let (got, stats) = scan(&p, Some(&cache), later());
        assert_eq!((got, stats.read), (want, 0));
    }

    fn cache_file(p: &Path, cache: &Path) -> PathBuf {
        cache.join(cache_name(p))
    }

    #[test]
    fn corrupt_cache_is_ignored() {
        let (_t, p, cache) = setup();
        touch(&p.join("a/.env"));
        let want = vec![real(&p.join("a/.env"))];
        scan(&p, Some(&cache), later());
        let file = cache_file(&p, &cache);
        let good = fs::read(&file).unwrap();
        assert!(decode(&good, &p).is_some());
        let mut bad: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"\xff\xfe garbage \x00\x00\x01".to_vec(),
            good[..good.len() - 1].to_vec(),
            good[..good.len() / 2].to_vec(),
            [&good[..], b"extra\0"].concat(),
        ];
        // Another format version, sbx version, project.
        for (from, to) in [
            (&b"\x001\x00"[..], &b"\x002\x00"[..]),
            (env!("CARGO_PKG_VERSION").as_bytes(), b"0.0.0-other"),
            (p.as_os_str().as_bytes(), b"/elsewhere"),
        ] {
            let i = good.windows(from.len()).position(|w| w == from).unwrap();
            bad.push([&good[..i], to, &good[i + from.len()..]].concat());
        }
        for b in bad {
            assert!(
                decode(&b, &p).is_none(),
                "{:?}",
                String::from_utf8_lossy(&b)
            );
            fs::write(&file, &b).unwrap();
            let (got, stats) = scan(&p, Some(&cache), later());
            assert_eq!(got, want);
            assert!(stats.read == 2 && stats.wrote, "{stats:?}");
        }
    }

    #[test]
    fn hostile_cache_is_ignored() {
        let (t, p, cache) = setup();
        touch(&p.join("a/.env"));
        touch(&t.path().join("outside/.env"));
        touch(&t.path().join("outside/sub/.env"));
        let stamp = |d: &Path| Stamp::of(&fs::symlink_metadata(d).unwrap());
        let honest = || {
            vec![
                (
                    Vec::new(),
                    Dir {
                        stamp: stamp(&p),
                        subdirs: vec![b"a".to_vec()],
                        envs: vec![],
                        unreadable: false,
                    },
                ),
                (
                    b"a".to_vec(),
                    Dir {
                        stamp: stamp(&p.join("a")),
                        subdirs: vec![],
                        envs: vec![b".env".to_vec()],
                        unreadable: false,
                    },
                ),
            ]
        };
        let hostile: Vec<Vec<(Vec<u8>, Dir)>> = vec![
            // A subdirectory "..".
            {
                let mut r = honest();
                r[0].1.subdirs.push(b"..".to_vec());
                r
            },
            // A name with a slash.
            {
                let mut r = honest();
                r[1].1.envs.push(b"../../outside/.env".to_vec());
                r
            },
            // A relative path leaving the project.
            {
                let mut r = honest();
                r.push((
                    b"../outside".to_vec(),
                    Dir {
                        stamp: stamp(&p),
                        subdirs: vec![],
                        envs: vec![b".env".to_vec()],
                        unreadable: false,
                    },
                ));
                r
            },
            // An absolute relative path.
            {
                let mut r = honest();
                r.push((
                    b"/outside/sub".to_vec(),
                    Dir {
                        stamp: stamp(&p),
                        subdirs: vec![],
                        envs: vec![],
                        unreadable: false,
                    },
                ));
                r
            },
            // Two records for one directory.
            {
                let mut r = honest();
                let dup = Dir {
                    stamp: stamp(&p.join("a")),
                    subdirs: vec![],
                    envs: vec![],
                    unreadable: false,
                };
                r.push((b"a".to_vec(), dup));
                r
            },
        ];
        let file = cache_file(&p, &cache);
        fs::create_dir_all(&cache).unwrap();
        // The honest cache is used as is (a record is trusted).
        fs::write(&file, encode(&p, later(), &honest())).unwrap();
        let (got, stats) = scan(&p, Some(&cache), later());
        assert_eq!((got, stats.read), (vec![real(&p.join("a/.env"))], 0));
        for records in hostile {
            let bytes = encode(&p, later(), &records);
            assert!(decode(&bytes, &p).is_none());
            fs::write(&file, bytes).unwrap();
            let (got, stats) = scan(&p, Some(&cache), later());
            assert_eq!(got, vec![real(&p.join("a/.env"))]);
            assert_eq!(stats.read, 2);
        }
        // A huge count does not allocate.
        let mut b = Vec::new();
        for tok in [
            MAGIC,
            FORMAT,
            env!("CARGO_PKG_VERSION").as_bytes(),
            p.as_os_str().as_bytes(),
            b"0",
            b"18446744073709551615",
            b"",
            b"1",
            b"1",
            b"1",
            b"1",
            b"18446744073709551615",
        ] {
            b.extend_from_slice(tok);
            b.push(0);
        }
        assert!(decode(&b, &p).is_none());
        for n in ["", "+1", "1 ", "0x10", "-", "1-", "--1", "1e3", "\u{661}"] {
            assert_eq!(num::<i128>(n.as_bytes()), None, "{n}");
        }
        assert_eq!(num::<u64>(b"-1"), None);
        assert_eq!(num::<u64>(b"18446744073709551616"), None);
        assert_eq!(num::<u64>(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(num::<i128>(&[b'9'; 39]), None);
        assert_eq!(num::<i128>(&[b'9'; 38]), Some(10i128.pow(38) - 1));
        assert_eq!(num::<i128>(b"-5"), Some(-5));
    }

    #[test]
    fn unwritable_cache_is_silent() {
        let (t, p, _) = setup();
        touch(&p.join(".env"));
        // The cache directory's place is taken by a file.
        let blocked = t.path().join("blocked");
        fs::write(&blocked, "").unwrap();
        let (got, stats) = scan(&p, Some(&blocked.join("sbx")), later());
        assert_eq!(got, vec![real(&p.join(".env"))]);
        assert!(!stats.wrote);
    }

    #[test]
    fn stable_hash() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(
            cache_name(Path::new("/p")),
            format!("envscan-{:016x}", fnv1a(b"/p"))
        );
    }

    #[test]
    fn env_file_names() {
        for n in [".env", ".env.local", ".env.production", ".ENV"] {
            assert!(is_env_file_name(n), "{n}");
        }
        for n in [
            ".envrc",
            ".env.example",
            ".env.sample",
            ".env.template",
            "env",
            ".environment",
        ] {
            assert!(!is_env_file_name(n), "{n}");
        }
    }
}
