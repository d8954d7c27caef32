//! A watcher per project, so that a run in a big tree does not walk it.
//!
//! After a walk of at least [`START_AT`] directories, sbx starts `sbx
//! __watch` for that tree, outside any sandbox, in a session of its own.
//! Once that run has ended (a second at most: its walk would take the cores
//! the sandbox starts on), it watches every directory the walk enters with
//! inotify ([`tree`]) and answers on a Unix socket in sbx's cache
//! directory. The next runs ask it
//! instead of walking: it applies every event the kernel queued before the
//! question, then answers with the names the walk would have found; sbx
//! resolves them as after a walk.
//!
//! Whatever it cannot vouch for makes sbx walk, never skip:
//!
//! * no watcher, a dead one, one that does not answer within
//!   [`ANSWER_WITHIN`], a busy socket, an answer that does not parse, one
//!   from another user or another sbx version: sbx walks;
//! * a lost event, no more watches, a network or FUSE file system, the root
//!   moved: the watcher ends, and sbx walks (after a lasting reason, no new
//!   watcher is started for [`OFF_FOR`]);
//! * `SBX_ENV_WATCH=off` in sbx's environment: never asked nor started.
//!
//! Its socket, lock and notes live in sbx's cache directory, which the
//! sandboxed command cannot write (it is mounted read-only, or refused in
//! reduced mode): nothing inside can stand in for the watcher. The command
//! may reach the socket when Unix sockets are allowed: what it can ask is
//! the list of `.env` names in this project, which it can read anyway.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub mod daemon;
#[cfg(test)]
mod tests;
pub mod tree;

use super::{Found, Wanted};

/// Walks through fewer directories than this start no watcher: the walk
/// costs less than asking.
pub const START_AT: usize = 500;

/// How long a question waits for its answer before sbx walks instead.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(3);

/// How long no watcher is started again after one ended for a lasting
/// reason (out of watches, a network file system).
pub const OFF_FOR: Duration = Duration::from_secs(3600);

/// First token of every question and answer.
const MAGIC: &[u8] = b"sbx-watch";
/// Bumped with any change of the questions, the answers or their meaning.
const PROTOCOL: &[u8] = b"1";
/// The largest answer read.
const MAX_ANSWER: u64 = 256 << 20;

/// How sbx uses watchers (`SBX_ENV_WATCH`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Never.
    Off,
    /// Asked when there is one; started after a walk of [`START_AT`]
    /// directories.
    Auto,
    /// Started after any walk (tests).
    Always,
}

impl Mode {
    pub fn from_env() -> Mode {
        match std::env::var_os("SBX_ENV_WATCH").as_deref() {
            Some(v) if v == "off" => Mode::Off,
            Some(v) if v == "always" => Mode::Always,
            _ => Mode::Auto,
        }
    }
}

/// The files of one project's watcher, in `cache/watch`.
#[derive(Debug, Clone)]
pub struct Place {
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub lock: PathBuf,
    /// Why the last watcher ended for a lasting reason.
    pub off: PathBuf,
}

impl Place {
    /// `None` when the socket's path would be too long for `bind`.
    pub fn of(cache: &Path, root: &Path) -> Option<Place> {
        let dir = cache.join("watch");
        let stem = format!("{:016x}", super::cache::fnv1a(root.as_os_str().as_bytes()));
        let socket = dir.join(format!("{stem}.sock"));
        (socket.as_os_str().len() < 100).then(|| Place {
            socket,
            lock: dir.join(format!("{stem}.lock")),
            off: dir.join(format!("{stem}.off")),
            dir,
        })
    }
}

/// The watcher's answer for `root`, as a walk's result; `None` when there
/// is no watcher that can answer (then walk).
pub fn ask(root: &Path, cache: &Path, wanted: Wanted) -> Option<Found> {
    if Mode::from_env() == Mode::Off {
        return None;
    }
    let place = Place::of(cache, root)?;
    let answer = client::ask(&place.socket, root)?;
    Some(found(root, &answer, wanted))
}

/// A question put to a watcher early, its answer read later
/// ([`Asked::answer`]): the watcher applies its queued events and answers
/// while sbx resolves the rest of the policy.
pub struct Asked {
    root: PathBuf,
    stream: std::os::unix::net::UnixStream,
}

impl Asked {
    /// Ask the watcher of `root`, if there is one; `None` when there is no
    /// watcher to ask.
    pub fn send(root: &Path, cache: &Path) -> Option<Asked> {
        if Mode::from_env() == Mode::Off {
            return None;
        }
        let place = Place::of(cache, root)?;
        Some(Asked {
            root: root.to_path_buf(),
            stream: client::send(&place.socket, root)?,
        })
    }

    /// The answer, as a walk's result, when it was asked about `root`:
    /// `None` when it was asked about another root (ask again), `Some(None)`
    /// when it gave no answer (walk: asking again could wait as long).
    pub fn answer(self, root: &Path) -> Option<Option<Found>> {
        if self.root != root {
            return None;
        }
        Some(client::receive(self.stream).map(|answer| found(root, &answer, Wanted::All)))
    }
}

/// Set for the commands that start no watcher (`sbx profile`, `sbx
/// check`: a dry run leaves no process behind); they still ask one.
static NO_START: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// From now on, this process starts no watcher.
pub fn start_none() {
    NO_START.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Start a watcher for `root` after a walk through `dirs` directories,
/// unless one runs, or one ended lately for a lasting reason.
pub fn start(root: &Path, cache: &Path, dirs: usize) {
    let mode = Mode::from_env();
    if mode == Mode::Off
        || (mode == Mode::Auto && dirs < START_AT)
        || NO_START.load(std::sync::atomic::Ordering::Relaxed)
    {
        return;
    }
    // The unit tests' binary is not sbx.
    if cfg!(test) {
        return;
    }
    let Some(place) = Place::of(cache, root) else {
        return;
    };
    if recently_off(&place) || daemon::running(&place) || starting(root) {
        return;
    }
    let Ok(sbx) = std::env::current_exe() else {
        return;
    };
    let mut cmd = std::process::Command::new(sbx);
    cmd.arg("__watch").arg("--detach").arg("--cache").arg(cache);
    if let Some(limit) = std::env::var_os("SBX_ENV_WATCH_LIMIT") {
        cmd.arg("--max-watches").arg(limit);
    }
    // The watcher walks once this run has ended.
    if let Some(key) = crate::integrity::journal::this_process_key() {
        cmd.arg("--after").arg(key);
    }
    cmd.arg(root)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .env_clear();
    // The first process starts the watcher and ends at once: the watcher is
    // no child of sbx (reduced mode ends every child sbx leaves). The run
    // goes on meanwhile; it is waited for only where it matters (see
    // [`settle`]). Two runs that start one each leave one watcher: the
    // second finds the first's lock.
    if let Ok(child) = cmd.spawn() {
        starting_now().push((root.to_path_buf(), child));
    }
}

/// The first process of each watcher this run started (one per tree: a
/// run may walk the project and another writable root), until waited for.
static STARTING: std::sync::Mutex<Vec<(PathBuf, std::process::Child)>> =
    std::sync::Mutex::new(Vec::new());

fn starting_now() -> std::sync::MutexGuard<'static, Vec<(PathBuf, std::process::Child)>> {
    STARTING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether this run has already started a watcher for `root` (a second
/// walk of the same tree in one run, before that watcher holds its lock).
fn starting(root: &Path) -> bool {
    starting_now().iter().any(|(r, _)| r == root)
}

/// Wait for the first process of every watcher this run started (each
/// ends at once): before sbx becomes a child subreaper (a watcher would be
/// handed to sbx, and end with the run's leftovers) and before sbx execs a
/// command (which would inherit them as children).
pub fn settle() {
    let children = std::mem::take(&mut *starting_now());
    for (_, mut child) in children {
        let _ = child.wait();
    }
}

/// What `sbx check` says of the `.env` walk of `root`: whether a watcher
/// answers, or why none may for now. `None` when nothing is worth saying
/// (no watcher, and none held back).
pub fn status(root: &Path, cache: &Path) -> Option<String> {
    if Mode::from_env() == Mode::Off {
        return Some("no watcher (SBX_ENV_WATCH=off): every run walks the project".into());
    }
    let place = Place::of(cache, root)?;
    if let Some(answer) = client::ask(&place.socket, root) {
        return Some(format!(
            "a watcher answers instead of the walk ({} directories watched)",
            answer.watched
        ));
    }
    if recently_off(&place) {
        let why = std::fs::read_to_string(&place.off).unwrap_or_default();
        return Some(format!(
            "no watcher for up to an hour after the last one ended ({}): every run walks the project (remove {} to try again)",
            why.trim(),
            place.off.display()
        ));
    }
    None
}

fn recently_off(place: &Place) -> bool {
    std::fs::metadata(&place.off)
        .and_then(|m| m.modified())
        .is_ok_and(|t| t.elapsed().is_ok_and(|age| age < OFF_FOR))
}

/// Whether the process at the other end of `stream` sees the same mounts
/// as this one (the same mount namespace): a picture made in one is not an
/// answer for the other.
pub fn same_mounts_as(stream: &std::os::unix::net::UnixStream) -> bool {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    let Ok(peer) = getsockopt(stream, PeerCredentials) else {
        return false;
    };
    let mine = std::fs::read_link("/proc/self/ns/mnt");
    let theirs = std::fs::read_link(format!("/proc/{}/ns/mnt", peer.pid()));
    peer.pid() > 0 && matches!((mine, theirs), (Ok(a), Ok(b)) if a == b)
}

/// An answer resolved as a walk resolves what it finds.
fn found(root: &Path, answer: &tree::Answer, wanted: Wanted) -> Found {
    let dir_of = |rel: &[u8]| {
        if rel.is_empty() {
            root.to_path_buf()
        } else {
            root.join(OsStr::from_bytes(rel))
        }
    };
    let mut out = Found::default();
    for (rel, name) in &answer.entries {
        let repository = name == b".git" || name == b"HEAD";
        if wanted == Wanted::Repositories && !repository {
            continue;
        }
        let dir = dir_of(rel);
        super::note_entry(&dir, name, &mut out);
    }
    out.unreadable
        .extend(answer.closed.iter().map(|rel| dir_of(rel)));
    out.env_files.sort();
    out.env_files.dedup();
    out.git_entries.sort();
    out.git_entries.dedup();
    out.bare.sort();
    out.bare.dedup();
    out
}

/// The questions and answers on the socket: tokens, each ended by a NUL
/// byte.
///
///   question: MAGIC PROTOCOL sbx-version root
///   answer:   MAGIC "ok" watched entry-count (dir name)... closed-count dir... "end"
///          or MAGIC "stale"
pub mod client {
    use std::io::{Read, Write};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::net::UnixStream;
    use std::path::Path;

    use nix::sys::socket::{self, AddressFamily, SockFlag, SockType, UnixAddr};

    use super::tree::Answer;
    use super::{ANSWER_WITHIN, MAGIC, MAX_ANSWER, PROTOCOL};

    pub fn question(root: &Path) -> Vec<u8> {
        let mut out = Vec::new();
        for token in [
            MAGIC,
            PROTOCOL,
            env!("CARGO_PKG_VERSION").as_bytes(),
            root.as_os_str().as_bytes(),
        ] {
            out.extend_from_slice(token);
            out.push(0);
        }
        out
    }

    /// Ask the watcher listening on `socket` about `root`.
    pub fn ask(socket: &Path, root: &Path) -> Option<Answer> {
        receive(send(socket, root)?)
    }

    /// Put the question about `root` to the watcher listening on `socket`;
    /// the stream to read its answer from ([`receive`]).
    pub fn send(socket: &Path, root: &Path) -> Option<UnixStream> {
        // Not blocking: a listener whose queue is full (flooded) refuses at
        // once, rather than holding sbx.
        let fd = socket::socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            None,
        )
        .ok()?;
        socket::connect(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            &UnixAddr::new(socket).ok()?,
        )
        .ok()?;
        let mut stream = UnixStream::from(fd);
        stream.set_nonblocking(false).ok()?;
        // Only a watcher of this user: the directory is private, and this
        // says so again.
        let peer = socket::getsockopt(&stream, socket::sockopt::PeerCredentials).ok()?;
        if peer.uid() != nix::unistd::geteuid().as_raw() || !super::same_mounts_as(&stream) {
            return None;
        }
        stream.set_read_timeout(Some(ANSWER_WITHIN)).ok()?;
        stream.set_write_timeout(Some(ANSWER_WITHIN)).ok()?;
        stream.write_all(&question(root)).ok()?;
        Some(stream)
    }

    /// The watcher's answer on a stream [`send`] returned.
    pub fn receive(mut stream: UnixStream) -> Option<Answer> {
        let deadline = std::time::Instant::now() + ANSWER_WITHIN;
        let mut bytes = Vec::new();
        let mut limited = (&mut stream).take(MAX_ANSWER + 1);
        let mut buf = [0u8; 65536];
        loop {
            if std::time::Instant::now() > deadline {
                return None;
            }
            match limited.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            }
        }
        if bytes.len() as u64 > MAX_ANSWER {
            return None;
        }
        decode(&bytes)
    }

    pub fn encode(answer: &Answer) -> Vec<u8> {
        let mut out = Vec::new();
        let mut tok = |b: &[u8]| {
            out.extend_from_slice(b);
            out.push(0);
        };
        tok(MAGIC);
        tok(b"ok");
        tok(answer.watched.to_string().as_bytes());
        tok(answer.entries.len().to_string().as_bytes());
        for (dir, name) in &answer.entries {
            tok(dir);
            tok(name);
        }
        tok(answer.closed.len().to_string().as_bytes());
        for dir in &answer.closed {
            tok(dir);
        }
        tok(b"end");
        out
    }

    pub fn stale() -> Vec<u8> {
        [MAGIC, b"\0stale\0"].concat()
    }

    /// An answer, checked token by token: anything unexpected is no answer.
    pub fn decode(bytes: &[u8]) -> Option<Answer> {
        let mut t = bytes.strip_suffix(&[0])?.split(|&b| b == 0);
        if t.next()? != MAGIC || t.next()? != b"ok" {
            return None;
        }
        let mut answer = Answer {
            watched: count(t.next()?)?,
            ..Answer::default()
        };
        for _ in 0..count(t.next()?)? {
            let dir = t.next()?;
            let name = t.next()?;
            if !valid_rel(dir) || !valid_name(name) {
                return None;
            }
            answer.entries.push((dir.to_vec(), name.to_vec()));
        }
        for _ in 0..count(t.next()?)? {
            let dir = t.next()?;
            if !valid_rel(dir) {
                return None;
            }
            answer.closed.push(dir.to_vec());
        }
        if t.next()? != b"end" || t.next().is_some() {
            return None;
        }
        Some(answer)
    }

    fn count(token: &[u8]) -> Option<usize> {
        if token.is_empty() || token.len() > 12 || !token.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(token).ok()?.parse().ok()
    }

    /// Empty (the root) or single path components joined by `/`.
    fn valid_rel(rel: &[u8]) -> bool {
        rel.is_empty() || rel.split(|&b| b == b'/').all(valid_name)
    }

    fn valid_name(name: &[u8]) -> bool {
        !name.is_empty() && name != b"." && name != b".." && !name.contains(&b'/')
    }
}
