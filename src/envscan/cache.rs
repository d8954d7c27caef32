//! The walk's cache file: one per project, untrusted on reading (any
//! mismatch or malformed field means a full walk), written atomically.
//!
//! Layout: a header of tokens, each terminated by a NUL byte (the one byte
//! no path contains),
//!
//!   MAGIC FORMAT sbx-version project
//!
//! then little-endian fixed-width integers and byte strings: the walk's
//! start (i128 nanoseconds) and the record count (u64), then per directory
//!
//!   path-length (u32) relative-path (`a/b`; empty for the root)
//!   dev (u64) ino (u64) mtime-ns (i64) ctime-ns (i64)
//!   subdir-count (u32) env-count (u32)
//!   then per name: length (u16) name; the subdirectories' names first
//!
//! The records are sorted by path in walk order ([`cmp_rel`]), so the
//! records under a directory follow it, and each list of names is sorted.
//! Decoding checks the whole file once and keeps it as read, with one
//! offset per record: a directory's record is found by binary search within
//! its parent's, and its names are read in place. No allocation per name.

use std::cmp::Ordering;
use std::ffi::OsStr;
use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::Path;

use super::Stamp;

/// First token of a cache file.
pub(super) const MAGIC: &[u8] = b"sbx-envscan";
/// Cache layout version; bump on any change to the layout or its meaning.
pub(super) const FORMAT: &[u8] = b"5";
/// A larger cache file is ignored (and never written): records are found by
/// 32-bit offsets. That is some 20 million directories, far beyond any real
/// tree; a smaller bound would make a large tree walk in full every time.
pub(super) const MAX_CACHE_BYTES: u64 = u32::MAX as u64;

/// dev, ino, mtime, ctime.
const STAMP_BYTES: usize = 8 + 8 + 8 + 8;
/// The smallest record: an empty path, a stamp, no names.
const MIN_RECORD: usize = 4 + STAMP_BYTES + 4 + 4;

/// A decoded cache file.
pub(super) struct Cache {
    /// When the walk that wrote it started (nanoseconds since the epoch).
    pub walk: i128,
    bytes: Vec<u8>,
    /// Where each record starts, then where the last one ends.
    starts: Vec<u32>,
}

/// What decoding found in a valid file.
pub(super) struct Layout {
    pub walk: i128,
    starts: Vec<u32>,
}

/// One directory's record past its path: its stamp and names.
pub(super) struct Body<'a> {
    pub stamp: Stamp,
    pub subdirs: Names<'a>,
    pub envs: Names<'a>,
}

/// A list of names as stored: each a u16 length, then the bytes.
#[derive(Clone)]
pub(super) struct Names<'a> {
    rest: &'a [u8],
    left: u32,
}

impl<'a> Iterator for Names<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.left == 0 {
            return None;
        }
        let (len, rest) = self.rest.split_first_chunk::<2>()?;
        let len = usize::from(u16::from_le_bytes(*len));
        let name = rest.get(..len)?;
        self.rest = rest.get(len..)?;
        self.left -= 1;
        Some(name)
    }
}

impl<'a> Body<'a> {
    /// A record body as written by [`put_record`] (checked by [`decode`]);
    /// `None` if it is not one.
    pub fn parse(bytes: &'a [u8]) -> Option<Body<'a>> {
        let mut r = Reader { bytes, pos: 0 };
        let stamp = Stamp {
            dev: u64::from_le_bytes(r.array()?),
            ino: u64::from_le_bytes(r.array()?),
            mtime: i64::from_le_bytes(r.array()?).into(),
            ctime: i64::from_le_bytes(r.array()?).into(),
        };
        let nsub = u32::from_le_bytes(r.array()?);
        let nenv = u32::from_le_bytes(r.array()?);
        let subdirs = Names {
            rest: r.rest(),
            left: nsub,
        };
        let mut skip = subdirs.clone();
        for _ in 0..nsub {
            skip.next()?;
        }
        Some(Body {
            stamp,
            subdirs,
            envs: Names {
                rest: skip.rest,
                left: nenv,
            },
        })
    }
}

impl Cache {
    /// The number of records.
    pub fn len(&self) -> u32 {
        u32::try_from(self.starts.len().saturating_sub(1)).unwrap_or(0)
    }

    /// Record `i`: its relative path and its body's bytes.
    fn record(&self, i: u32) -> Option<(&[u8], &[u8])> {
        split_record(self.raw_record(i)?)
    }

    fn rel(&self, i: u32) -> &[u8] {
        self.record(i).map_or(&[], |r| r.0)
    }

    /// Record `i`'s body.
    pub fn body(&self, i: u32) -> Option<Body<'_>> {
        Body::parse(self.record(i)?.1)
    }

    /// Record `i` as stored, path and body (to be written again as is).
    pub fn raw_record(&self, i: u32) -> Option<&[u8]> {
        let i = usize::try_from(i).ok()?;
        let start = usize::try_from(*self.starts.get(i)?).ok()?;
        let end = usize::try_from(*self.starts.get(i + 1)?).ok()?;
        self.bytes.get(start..end)
    }

    /// The record of `rel` among records `lo..hi`, whose paths all share
    /// their first `skip` bytes with `rel` (so only the rest is compared).
    pub fn find(&self, lo: u32, hi: u32, rel: &[u8], skip: usize) -> Option<u32> {
        let (mut lo, mut hi) = (lo, hi.min(self.len()));
        let tail = rel.get(skip..)?;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let other = self.rel(mid);
            match cmp_rel(other.get(skip..).unwrap_or_default(), tail) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                // The shared prefix is checked too: a wrong record is worse
                // than none.
                Ordering::Equal => return (other == rel).then_some(mid),
            }
        }
        None
    }

    /// The end of the records under record `i`'s path, which follow it:
    /// the first record in `i + 1..hi` that is not under it.
    pub fn subtree_end(&self, i: u32, hi: u32) -> u32 {
        let prefix = self.rel(i);
        let under = |j: u32| {
            let rel = self.rel(j);
            prefix.is_empty() || (rel.starts_with(prefix) && rel.get(prefix.len()) == Some(&b'/'))
        };
        let (mut lo, mut hi) = (i.saturating_add(1), hi.min(self.len()));
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if under(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// A record as stored: its relative path and its body.
fn split_record(record: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = record.split_first_chunk::<4>()?;
    let len = usize::try_from(u32::from_le_bytes(*len)).ok()?;
    Some((rest.get(..len)?, rest.get(len..)?))
}

/// A stored record's relative path (empty if it is not one).
pub(super) fn record_rel(record: &[u8]) -> &[u8] {
    split_record(record).map_or(&[], |r| r.0)
}

/// The order of the records: by path, component by component (`/` before
/// any other byte), so that a directory is followed by everything under it.
pub(super) fn cmp_rel(a: &[u8], b: &[u8]) -> Ordering {
    let i = common_prefix(a, b);
    let key = |s: &[u8]| s.get(i).map(|&c| if c == b'/' { 0 } else { c });
    match (key(a), key(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        _ => a.len().cmp(&b.len()),
    }
}

/// The length of the longest common prefix of `a` and `b`.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    // Eight bytes at a time: paths share long prefixes.
    let (wa, wb) = (a.as_chunks::<8>().0, b.as_chunks::<8>().0);
    let mut i = 8 * wa.iter().zip(wb).take_while(|(x, y)| x == y).count();
    while a.get(i).is_some_and(|x| b.get(i) == Some(x)) {
        i += 1;
    }
    i
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

fn header(project: &Path) -> [&[u8]; 4] {
    [
        MAGIC,
        FORMAT,
        env!("CARGO_PKG_VERSION").as_bytes(),
        project.as_os_str().as_bytes(),
    ]
}

pub(super) fn load(file: &Path, project: &Path) -> Option<Cache> {
    let f = File::open(file).ok()?;
    let size = f.metadata().ok()?.len();
    if size > MAX_CACHE_BYTES {
        return None;
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).ok()?);
    f.take(MAX_CACHE_BYTES + 1).read_to_end(&mut bytes).ok()?;
    let Layout { walk, starts } = decode(&bytes, project)?;
    Some(Cache {
        walk,
        bytes,
        starts,
    })
}

/// Reads a byte string front to back; `None` past its end.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn chunk(&mut self, len: usize) -> Option<&'a [u8]> {
        let out = self.bytes.get(self.pos..self.pos.checked_add(len)?)?;
        self.pos += len;
        Some(out)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.chunk(N)?.try_into().ok()
    }

    /// Up to the next NUL byte, which is skipped.
    fn token(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest();
        let len = rest.iter().position(|&b| b == 0)?;
        self.pos += len + 1;
        rest.get(..len)
    }

    fn rest(&self) -> &'a [u8] {
        self.bytes.get(self.pos..).unwrap_or_default()
    }
}

/// Check a whole cache file: its header, then every record (paths of
/// single components in strictly increasing order, so each directory once;
/// names single components, strictly increasing in each list), and no
/// trailing data. Counts are bounded by the bytes left, never trusted for
/// an allocation.
pub(super) fn decode(bytes: &[u8], project: &Path) -> Option<Layout> {
    if u64::try_from(bytes.len()).ok()? > MAX_CACHE_BYTES {
        return None;
    }
    let mut r = Reader { bytes, pos: 0 };
    for expected in header(project) {
        if r.token()? != expected {
            return None;
        }
    }
    let walk = i128::from_le_bytes(r.array()?);
    let count = usize::try_from(u64::from_le_bytes(r.array()?)).ok()?;
    if count > r.rest().len() / MIN_RECORD {
        return None;
    }
    let mut starts = Vec::with_capacity(count + 1);
    let mut previous: Option<&[u8]> = None;
    for _ in 0..count {
        starts.push(u32::try_from(r.pos).ok()?);
        let len = usize::try_from(u32::from_le_bytes(r.array()?)).ok()?;
        let rel = r.chunk(len)?;
        // The components it shares with the previous path were checked
        // there: those before the last `/` they have in common.
        let checked = previous.map_or(0, |p| {
            let common = rel.get(..common_prefix(p, rel)).unwrap_or_default();
            common.iter().rposition(|&b| b == b'/').map_or(0, |i| i + 1)
        });
        let new = rel.get(checked..).unwrap_or_default();
        if !rel.is_empty() && !new.split(|&b| b == b'/').all(valid_name) {
            return None;
        }
        if previous.is_some_and(|p| cmp_rel(p, rel) != Ordering::Less) {
            return None;
        }
        previous = Some(rel);
        r.chunk(STAMP_BYTES)?;
        let nsub = u32::from_le_bytes(r.array()?);
        let nenv = u32::from_le_bytes(r.array()?);
        for n in [nsub, nenv] {
            // Each name takes at least 3 bytes: the loop ends with the data.
            let mut last: Option<&[u8]> = None;
            for _ in 0..n {
                let len = usize::from(u16::from_le_bytes(r.array()?));
                let name = r.chunk(len)?;
                if !valid_name(name) || last.is_some_and(|l| l >= name) {
                    return None;
                }
                last = Some(name);
            }
        }
    }
    if !r.rest().is_empty() {
        return None;
    }
    starts.push(u32::try_from(r.pos).ok()?);
    Some(Layout { walk, starts })
}

/// A single, normal path component.
fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name != b"." && name != b".." && name.iter().all(|&b| b != b'/' && b != 0)
}

/// Append a record as the cache keeps it: `rel` (a path relative to the
/// project), `stamp`, then the names (each list sorted, without
/// duplicates, by the caller). `None` (and nothing appended) for a path or
/// name too long for the layout.
pub(super) fn put_record<'n>(
    out: &mut Vec<u8>,
    rel: &[u8],
    stamp: &Stamp,
    subdirs: impl ExactSizeIterator<Item = &'n [u8]>,
    envs: impl ExactSizeIterator<Item = &'n [u8]>,
) -> Option<()> {
    let start = out.len();
    let result = (|| {
        out.extend_from_slice(&u32::try_from(rel.len()).ok()?.to_le_bytes());
        out.extend_from_slice(rel);
        out.extend_from_slice(&stamp.dev.to_le_bytes());
        out.extend_from_slice(&stamp.ino.to_le_bytes());
        // Nanoseconds in 64 bits reach the year 2262; a time past that
        // is not cached (the directory is read again), never clamped.
        out.extend_from_slice(&i64::try_from(stamp.mtime).ok()?.to_le_bytes());
        out.extend_from_slice(&i64::try_from(stamp.ctime).ok()?.to_le_bytes());
        out.extend_from_slice(&u32::try_from(subdirs.len()).ok()?.to_le_bytes());
        out.extend_from_slice(&u32::try_from(envs.len()).ok()?.to_le_bytes());
        for name in subdirs.chain(envs) {
            out.extend_from_slice(&u16::try_from(name.len()).ok()?.to_le_bytes());
            out.extend_from_slice(name);
        }
        Some(())
    })();
    if result.is_none() {
        out.truncate(start);
    }
    result
}

/// The size of the cache file [`write_records`] writes, when within
/// [`MAX_CACHE_BYTES`].
pub(super) fn file_size<'r>(
    project: &Path,
    records: impl Iterator<Item = &'r [u8]>,
) -> Option<u64> {
    let header: usize = header(project).iter().map(|t| t.len() + 1).sum::<usize>() + 16 + 8;
    let size = records.map(<[u8]>::len).sum::<usize>() + header;
    u64::try_from(size).ok().filter(|&s| s <= MAX_CACHE_BYTES)
}

/// A whole cache file, to `out`: the header, then `records` (each as
/// [`put_record`] makes it) in the order given (the caller sorts them).
pub(super) fn write_records<'r>(
    out: &mut dyn Write,
    project: &Path,
    walk: i128,
    records: impl Iterator<Item = &'r [u8]> + Clone,
) -> io::Result<()> {
    for token in header(project) {
        out.write_all(token)?;
        out.write_all(&[0])?;
    }
    out.write_all(&walk.to_le_bytes())?;
    let count = u64::try_from(records.clone().count()).map_err(|_| io::ErrorKind::InvalidInput)?;
    out.write_all(&count.to_le_bytes())?;
    for record in records {
        out.write_all(record)?;
    }
    Ok(())
}

/// A cache file from directories in memory, for tests (in the order given,
/// names as given; a directory marked unreadable is left out, as a walk
/// does).
#[cfg(test)]
pub(super) fn encode(project: &Path, walk: i128, records: &[(Vec<u8>, super::Dir)]) -> Vec<u8> {
    let mut arena = Vec::new();
    let mut ranges = Vec::new();
    for (rel, d) in records.iter().filter(|(_, d)| !d.unreadable) {
        let start = arena.len();
        let subdirs = d.subdirs.iter().map(Vec::as_slice);
        let envs = d.envs.iter().map(Vec::as_slice);
        put_record(&mut arena, rel, &d.stamp, subdirs, envs).unwrap();
        ranges.push(start..arena.len());
    }
    let records: Vec<&[u8]> = ranges.into_iter().map(|r| &arena[r]).collect();
    let mut out = Vec::new();
    let records = records.iter().copied();
    write_records(&mut out, project, walk, records.clone()).unwrap();
    assert_eq!(file_size(project, records), Some(out.len() as u64));
    out
}

/// Write the cache atomically (`write` writes its content): a private
/// temporary file in the same directory, renamed over the old one.
pub(super) fn store(
    file: &Path,
    write: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> io::Result<()> {
    let (Some(dir), Some(name)) = (file.parent(), file.file_name()) else {
        return Err(io::ErrorKind::InvalidInput.into());
    };
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
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
        .and_then(|f| {
            let mut out = io::BufWriter::with_capacity(1 << 16, f);
            write(&mut out)?;
            out.into_inner().map_err(io::IntoInnerError::into_error)?;
            Ok(())
        })
        .and_then(|()| std::fs::rename(&tmp, file));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
