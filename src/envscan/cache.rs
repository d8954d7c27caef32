//! The walk's cache file: one per project, untrusted on reading (any
//! mismatch or malformed token means a full walk), written atomically.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use super::{Dir, Stamp};

/// First token of a cache file.
pub(super) const MAGIC: &[u8] = b"sbx-envscan";
/// Cache layout version; bump on any change to the layout or its meaning.
pub(super) const FORMAT: &[u8] = b"3";
/// A larger cache file is ignored.
pub(super) const MAX_CACHE_BYTES: u64 = 64 << 20;

/// A decoded cache file.
pub(super) struct Cache {
    /// When the walk that wrote it started (nanoseconds since the epoch).
    pub walk: i128,
    /// Directories by path relative to the project (`a/b`; empty for the root).
    pub dirs: HashMap<Vec<u8>, Dir>,
}

/// 64-bit FNV-1a: stable across Rust versions, unlike `DefaultHasher`.
pub(super) fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

pub(super) fn cache_name(project: &Path) -> String {
    format!("envscan-{:016x}", fnv1a(project.as_os_str().as_bytes()))
}

// Cache file layout: a sequence of tokens, each terminated by a NUL byte
// (the one byte no path contains):
//
//   MAGIC FORMAT sbx-version project walk-start-ns dir-count
//   then per directory:
//   relative-path dev ino mtime-ns ctime-ns
//   subdir-count subdir-name... env-count env-name...

pub(super) fn load(file: &Path, project: &Path) -> Option<Cache> {
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

pub(super) fn decode(bytes: &[u8], project: &Path) -> Option<Cache> {
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
pub(super) fn num<T: TryFrom<i128>>(token: &[u8]) -> Option<T> {
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

pub(super) fn encode(project: &Path, walk: i128, records: &[(Vec<u8>, Dir)]) -> Vec<u8> {
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
pub(super) fn store(
    file: &Path,
    project: &Path,
    walk: i128,
    records: &[(Vec<u8>, Dir)],
) -> io::Result<()> {
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
