//! `sbx __watch`: the watcher process of one project.
//!
//! It holds a lock for its whole life (one watcher per project), walks and
//! watches the tree, and only then listens: until it answers, sbx walks.
//! It answers one question at a time, each after applying every queued
//! event. It ends when its tree can no longer be followed (see
//! [`super::tree::Broken`]), when asked by another sbx version, when its
//! socket is removed or replaced, and after [`IDLE`] without a question.

use std::fs::{DirBuilder, File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::fcntl::{Flock, FlockArg};
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};

use super::client;
use super::tree::{Broken, Tree};
use super::{Place, MAGIC, PROTOCOL};
use crate::cli::WatchArgs;

/// A watcher asked nothing for this long ends.
pub const IDLE: Duration = Duration::from_secs(3600);

/// How long a connected client may take to ask.
const QUESTION_WITHIN: Duration = Duration::from_millis(500);

/// The largest question read.
const MAX_QUESTION: u64 = 8192;

/// Whether a watcher holds the lock of `place`.
pub fn running(place: &Place) -> bool {
    let Ok(file) = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(&place.lock)
    else {
        return false;
    };
    Flock::lock(file, FlockArg::LockSharedNonblock).is_err()
}

/// How long a new watcher waits for the run that started it to end
/// before it walks (see [`run`]).
const AFTER_AT_MOST: Duration = Duration::from_secs(1);

/// `sbx __watch [--detach] --cache DIR [--after KEY] ROOT`.
pub fn run(args: &WatchArgs) -> Result<ExitCode> {
    let (root, cache) = (args.root.as_path(), args.cache.as_path());
    // What sbx inherited without close-on-exec (a pipe an agent waits on
    // for EOF) is not the watcher's to hold, nor is the directory it was
    // started in.
    for fd in crate::supervise::descriptors_above_stderr().unwrap_or_default() {
        let _ = nix::unistd::close(fd);
    }
    let _ = std::env::set_current_dir("/");
    if args.detach {
        return start_detached(args);
    }
    // A session of its own: no terminal, no signal meant for the agent's
    // process group.
    let _ = nix::unistd::setsid();
    let Some((place, lock)) = take_place(cache, root)? else {
        // Another watcher has it.
        return Ok(ExitCode::SUCCESS);
    };
    // The run that started it is sbx's first in this tree: its walk was
    // long, and this one (as long, and the watches on top) would take the
    // cores its sandbox starts on. It waits for that run to end (a command
    // that runs longer than a second does not notice the walk); until it
    // answers, runs walk as before.
    if let Some(key) = &args.after {
        crate::integrity::journal::wait_until_gone(key, AFTER_AT_MOST);
    }
    raise_open_files();
    // Opened before the walk: a mount made during it shows as a change.
    let Ok(mut mounts) = File::open("/proc/self/mountinfo") else {
        return Ok(ExitCode::SUCCESS);
    };
    if let Err(broken) = mounts_inside(&mut mounts, root) {
        note_end(&place, &broken);
        return Ok(ExitCode::SUCCESS);
    }
    let limit = args.max_watches.unwrap_or(usize::MAX);
    let tree = match Tree::build(root, limit) {
        Ok(tree) => tree,
        Err(broken) => {
            note_end(&place, &broken);
            return Ok(ExitCode::SUCCESS);
        }
    };
    let _ = std::fs::remove_file(&place.socket);
    let listener = UnixListener::bind(&place.socket).context("binding the watcher's socket")?;
    std::fs::set_permissions(&place.socket, std::fs::Permissions::from_mode(0o600))?;
    listener.set_nonblocking(true)?;
    let ours = std::fs::symlink_metadata(&place.socket)?.ino();
    write_pid(&lock);
    let _ = std::fs::remove_file(&place.off);
    let end = serve(tree, &listener, &mut mounts, &place, ours, root);
    // Only its own socket: a newer watcher may have bound another.
    if std::fs::symlink_metadata(&place.socket).is_ok_and(|m| m.ino() == ours) {
        let _ = std::fs::remove_file(&place.socket);
    }
    if let Some(broken) = end {
        note_end(&place, &broken);
    }
    drop(lock);
    Ok(ExitCode::SUCCESS)
}

/// The watcher itself, no child of the caller: this first process starts
/// it and ends at once (sbx waits for it only where it matters, see
/// [`super::settle`]).
fn start_detached(args: &WatchArgs) -> Result<ExitCode> {
    let sbx = std::env::current_exe().context("finding sbx")?;
    let mut cmd = std::process::Command::new(sbx);
    cmd.arg("__watch").arg("--cache").arg(&args.cache);
    if let Some(n) = args.max_watches {
        cmd.arg("--max-watches").arg(n.to_string());
    }
    if let Some(key) = &args.after {
        cmd.arg("--after").arg(key);
    }
    cmd.arg(&args.root)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .env_clear()
        .spawn()
        .context("starting the watcher")?;
    Ok(ExitCode::SUCCESS)
}

/// The watcher's private directory, made if needed, and its lock, taken;
/// `None` when another watcher holds it.
fn take_place(cache: &Path, root: &Path) -> Result<Option<(Place, Flock<File>)>> {
    let place = Place::of(cache, root).context("the watcher's socket path is too long")?;
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&place.dir)
        .context("creating the watcher's directory")?;
    let meta = std::fs::symlink_metadata(&place.dir)?;
    if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o077 != 0 {
        anyhow::bail!(
            "{} is not a private directory of this user",
            place.dir.display()
        );
    }
    let lock = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
        .open(&place.lock)
        .context("opening the watcher's lock")?;
    Ok(Flock::lock(lock, FlockArg::LockExclusiveNonblock)
        .ok()
        .map(|lock| (place, lock)))
}

/// Answer questions until the tree breaks (returned) or the watcher has
/// another reason to end (`None`).
fn serve(
    mut tree: Tree,
    listener: &UnixListener,
    mounts: &mut File,
    place: &Place,
    ours: u64,
    root: &Path,
) -> Option<Broken> {
    let mut last = Instant::now();
    loop {
        let (events, asked, remounted) = {
            let mut fds = [
                PollFd::new(tree.fd(), PollFlags::POLLIN),
                PollFd::new(listener.as_fd(), PollFlags::POLLIN),
                // The mount table changed (reported once per change).
                PollFd::new(mounts.as_fd(), PollFlags::POLLPRI),
            ];
            match poll(&mut fds, PollTimeout::from(60_000u16)) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(_) => return None,
            }
            let ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
            (ready(&fds[0]), ready(&fds[1]), ready(&fds[2]))
        };
        if remounted {
            if let Err(broken) = mounts_inside(mounts, root) {
                return Some(broken);
            }
        }
        if events {
            // Keep the kernel's queue short: it overflows past
            // fs.inotify.max_queued_events.
            if let Err(broken) = tree.drain() {
                return Some(broken);
            }
        }
        if asked {
            while let Ok((stream, _)) = listener.accept() {
                last = Instant::now();
                match answer(&mut tree, stream, mounts, root) {
                    Ok(Next::Go) => {}
                    Ok(Next::End) => return None,
                    Err(broken) => return Some(broken),
                }
            }
        }
        let gone = std::fs::symlink_metadata(&place.socket).map_or(true, |m| m.ino() != ours);
        if gone || last.elapsed() > IDLE {
            return None;
        }
    }
}

enum Next {
    Go,
    /// Another sbx version asked: it starts a watcher of its own.
    End,
}

fn answer(
    tree: &mut Tree,
    mut stream: UnixStream,
    mounts: &mut File,
    root: &Path,
) -> Result<Next, Broken> {
    // Only a caller that sees the same mounts (a sandboxed command does
    // not): for another, this picture may be wrong, and it must not make
    // the watcher end.
    if !super::same_mounts_as(&stream) {
        return Ok(Next::Go);
    }
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(QUESTION_WITHIN));
    let _ = stream.set_write_timeout(Some(super::ANSWER_WITHIN));
    let Some(question) = read_question(&mut stream) else {
        return Ok(Next::Go);
    };
    if question != client::question(root) {
        let _ = stream.write_all(&client::stale());
        // Another sbx version (or protocol) asked: it starts a watcher of
        // its own. Anything else (another root with the same hash, noise)
        // is only turned away.
        let head: Vec<&[u8]> = question.split(|&b| b == 0).take(3).collect();
        let this_sbx = [MAGIC, PROTOCOL, env!("CARGO_PKG_VERSION").as_bytes()];
        let other_sbx = head.first() == Some(&MAGIC) && head != this_sbx;
        return Ok(if other_sbx { Next::End } else { Next::Go });
    }
    // The table read again before every answer (a tenth of a millisecond):
    // a mount moved in and one removed may leave no change to see at once.
    let settled = mounts_inside(mounts, root).and_then(|()| tree.settle());
    if let Err(broken) = settled {
        let _ = stream.write_all(&client::stale());
        return Err(broken);
    }
    let _ = stream.write_all(&client::encode(&tree.answer()));
    Ok(Next::Go)
}

/// The four tokens of a question, or `None` (too slow, too long).
fn read_question(stream: &mut UnixStream) -> Option<Vec<u8>> {
    let mut question = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + QUESTION_WITHIN;
    let mut limited = stream.take(MAX_QUESTION);
    while question.iter().filter(|&&b| b == 0).count() < 4 {
        if Instant::now() > deadline {
            return None;
        }
        match limited.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => question.extend_from_slice(&buf[..n]),
        }
    }
    Some(question)
}

/// A mount point below the root: what lies under it, or what a mount made
/// later covers, raises no event in the directory watched. Such a project
/// is walked.
fn mounts_inside(mounts: &mut File, root: &Path) -> Result<(), Broken> {
    use std::io::Seek;
    let mut text = Vec::new();
    mounts
        .seek(std::io::SeekFrom::Start(0))
        .and_then(|_| mounts.read_to_end(&mut text))
        .map_err(|e| Broken::Failed(format!("reading the mount table: {e}")))?;
    if mount_points_inside(&text, root) {
        return Err(Broken::Mounts);
    }
    Ok(())
}

/// Whether a mount table (`/proc/self/mountinfo`'s text) has a mount point
/// strictly below `root`.
pub fn mount_points_inside(text: &[u8], root: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    text.split(|&b| b == b'\n').any(|line| {
        line.split(|&b| b == b' ').nth(4).is_some_and(|point| {
            let point = unescape(point);
            let point = Path::new(std::ffi::OsStr::from_bytes(&point));
            point != root && point.starts_with(root)
        })
    })
}

/// A mount table path: `\ooo` escapes (space, tab, newline, backslash).
fn unescape(field: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(field.len());
    let mut i = 0;
    while i < field.len() {
        let octal = field
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (field[i], octal) {
            (b'\\', Some(d)) => {
                let value = d.iter().fold(0u16, |v, b| v * 8 + u16::from(b - b'0'));
                // Past 0o377 it was no escape the kernel writes: kept as is.
                out.push(u8::try_from(value).unwrap_or(b'\\'));
                i += if value > 0o377 { 1 } else { 4 };
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// Record why the watcher ended, when the reason lasts: sbx starts no new
/// one for a while.
fn note_end(place: &Place, broken: &Broken) {
    // Seen when run by hand; sbx starts it with stderr on /dev/null.
    eprintln!("sbx: the watcher ends: {broken}");
    if broken.lasting() {
        // Whole or not at all: `sbx check` (and a test) may read it now.
        let tmp = place
            .off
            .with_extension(format!("off.{}", std::process::id()));
        let written = std::fs::write(&tmp, format!("{broken}\n"))
            .and_then(|()| std::fs::rename(&tmp, &place.off));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

fn write_pid(mut lock: &File) {
    let _ = lock.set_len(0);
    let _ = writeln!(lock, "{}", std::process::id());
}

/// One descriptor per level of the tree is open while it is walked.
fn raise_open_files() {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard.min(65536), hard);
    }
}
