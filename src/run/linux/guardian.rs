//! The guardian: a small process outside the sandbox that makes a killed
//! sbx's after-run checks the moment its sandbox is gone, instead of
//! leaving what the command planted in place until the next sbx run.
//!
//! sbx starts it (`sbx __guard`) once its note is written and bubblewrap
//! is spawned, in a process group of its own (an agent's timeout kills
//! sbx's group; not this one), with the read end of a pipe as its standard
//! input, on which sbx writes lines: `run KEY` first (sbx's own process
//! key), `pipe INODE` for each sandbox it starts, before it starts it (the
//! inode of that sandbox's ready pipe, which bubblewrap, its child and the
//! inner stage hold, and the command never does), and `done` once its own
//! checks are made. Lines written before the guardian starts wait in the
//! pipe. The pipe ends when sbx is gone:
//!
//! - `done` came: sbx's checks are made; the guardian removes the run's
//!   private git config copies, which sbx applied but left in place so as
//!   not to wait for the file system before it exits;
//! - no `done`: sbx died first. The guardian kills every process that holds
//!   one of those ready pipes and waits until they are gone (the sandbox's
//!   first process is one: the kernel ends every other process of its PID
//!   namespace before its exit is seen; and a bubblewrap killed between its
//!   clone and releasing its child would leave that child waiting for good),
//!   waits until sbx itself is gone (its pipe breaks a moment before: until
//!   then its note is a live run's), then makes the checks of every dead
//!   run's note
//!   ([`crate::integrity::journal::recover`]) and leaves what they said for
//!   the next run to show ([`crate::integrity::journal::leave_report`]):
//!   nothing writes to a terminal or a pipe nobody may read any more.
//!
//! The window a planted `.envrc` or `.vscode/tasks.json` stays in place is
//! the time the kernel takes to end the sandbox plus the checks themselves.

use std::io::BufRead;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::integrity::journal;

/// What sbx writes on the pipe once its checks are made.
const DONE: &str = "done";
/// What sbx writes before each sandbox it starts, with its ready pipe.
const PIPE: &str = "pipe";
/// What sbx writes first, with its own key (`PID-START`).
const RUN: &str = "run";

/// The guardian of one run, seen from sbx: the write end of its pipe, and
/// until the guardian is launched, the read end it will get.
pub struct Guardian {
    tell: OwnedFd,
    cache: std::path::PathBuf,
    /// The pipe's read end, until [`Guardian::launch`] hands it over.
    read: std::cell::RefCell<Option<OwnedFd>>,
    /// The guardian process was started.
    launched: std::cell::Cell<bool>,
}

impl Guardian {
    /// Tell it the ready pipe of a sandbox about to start (before it does:
    /// the line waits in the pipe if the guardian is not launched yet).
    pub fn watch(&self, ready: &OwnedFd) -> Result<()> {
        let inode = nix::sys::stat::fstat(ready.as_raw_fd())
            .context("reading the ready pipe")?
            .st_ino;
        self.say(&format!("{PIPE} {inode}"))
    }

    /// Start the guardian process, once (later calls do nothing). Called
    /// once bubblewrap is spawned, so that the guardian's own start runs
    /// beside the sandbox's instead of before it: the lines said before are
    /// in the pipe, so a guardian that starts at all knows every sandbox.
    /// If sbx dies before this, there is no guardian: the note is written,
    /// and the next run makes the checks (as when one cannot start).
    ///
    /// `keep`, if given, becomes the guardian's standard output (it writes
    /// nothing there): a descriptor whose last close should not fall in
    /// sbx's own exit, here the watch on masked paths (the kernel's teardown
    /// of inotify watches waits for an RCU grace period, 10 ms and more).
    pub fn launch(&self, keep: Option<OwnedFd>) {
        let Some(read) = self.read.borrow_mut().take() else {
            return;
        };
        let Ok(sbx) = std::env::current_exe() else {
            return;
        };
        let stdout = keep.map_or_else(Stdio::null, Stdio::from);
        let spawned = std::process::Command::new(sbx)
            .arg("__guard")
            .arg("--cache")
            .arg(&self.cache)
            .stdin(Stdio::from(read))
            .stdout(stdout)
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
        self.launched.set(spawned.is_ok());
    }

    /// Whether the guardian process was started: then it removes the run's
    /// config copies once told the run is done.
    pub fn launched(&self) -> bool {
        self.launched.get()
    }

    /// One line: short, so one write that is never split.
    fn say(&self, line: &str) -> Result<()> {
        nix::unistd::write(&self.tell, format!("{line}\n").as_bytes())
            .context("writing to the guardian")?;
        Ok(())
    }
}

impl Drop for Guardian {
    /// sbx is ending normally (its checks are made, or nothing ran).
    fn drop(&mut self) {
        let _ = self.say(DONE);
    }
}

/// The guardian of a run whose note is in `cache`: its pipe, ready for
/// [`Guardian::watch`]; the process is started by [`Guardian::launch`].
pub fn prepare(cache: &Path) -> Result<Guardian> {
    let (read, write) =
        nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).context("creating a pipe")?;
    let guardian = Guardian {
        tell: write,
        cache: cache.to_path_buf(),
        read: std::cell::RefCell::new(Some(read)),
        launched: std::cell::Cell::new(false),
    };
    // First, which process sbx is: the guardian waits for it to be gone
    // before its checks (see [`check_for_a_dead_run`]).
    if let Some(key) = journal::this_process_key() {
        guardian.say(&format!("{RUN} {key}"))?;
    }
    Ok(guardian)
}

/// `sbx __guard`: wait for the end of the run, and make its checks if sbx
/// could not.
pub fn guard(cache: &Path) -> Result<ExitCode> {
    use nix::sys::signal::{SigSet, Signal};
    // Signals for the terminal's or the agent's process group are not for
    // it: it ends when the pipe says so.
    let mut blocked = SigSet::empty();
    for signal in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
        Signal::SIGTSTP,
        Signal::SIGTTIN,
        Signal::SIGTTOU,
    ] {
        blocked.add(signal);
    }
    blocked.thread_block().context("blocking signals")?;
    // What sbx inherited without close-on-exec (a pipe an agent waits on
    // for EOF) is not the guardian's to hold, nor is the directory it was
    // started in.
    for fd in crate::supervise::descriptors_above_stderr().unwrap_or_default() {
        let _ = nix::unistd::close(fd);
    }
    let _ = std::env::set_current_dir("/");
    let told = listen(std::io::stdin().lock());
    if told.done {
        // Applied by sbx, and left to this process (a run's own key only:
        // the line is sbx's, but a name is never built from anything else).
        if let Some(key) = told.sbx.as_deref().filter(|k| journal::is_key(k)) {
            crate::integrity::copies::remove(&crate::integrity::copies::dir_of(cache, key));
        }
        return Ok(ExitCode::SUCCESS);
    }
    // sbx is gone without saying it was done: so goes its sandbox. Marked
    // checking at once, before the sandbox is ended: the next run may start
    // as soon as sbx is reaped, and must wait for these checks.
    let checking = journal::begin_checking(cache);
    if !end_holders(&told.pipes, Duration::from_secs(600)) {
        std::process::exit(0);
    }
    check_for_a_dead_run(cache, told.sbx.as_deref(), checking)?;
    Ok(ExitCode::SUCCESS)
}

/// What sbx said on the guardian's pipe until it ended.
#[derive(Debug, Default, PartialEq)]
struct Told {
    /// sbx's key.
    sbx: Option<String>,
    /// The ready pipes of the sandboxes it started.
    pipes: Vec<u64>,
    /// It said it was done (its checks are made).
    done: bool,
}

/// Read the pipe from sbx until it says it is done or is gone.
fn listen(input: impl BufRead) -> Told {
    let mut told = Told::default();
    for line in input.lines() {
        let Ok(line) = line else { break };
        if line == DONE {
            told.done = true;
            break;
        }
        let (word, value) = line.split_once(' ').unwrap_or((&line, ""));
        match word {
            PIPE => told.pipes.extend(value.trim().parse::<u64>().ok()),
            RUN => told.sbx = Some(value.trim().to_string()),
            _ => {}
        }
    }
    told
}

/// The line that names sbx's key, as sbx writes it first on the pipe to
/// its guardian or keeper.
pub fn run_line() -> Option<String> {
    journal::this_process_key().map(|key| format!("{RUN} {key}\n"))
}

/// sbx's key from the first line on `pipe`, as [`run_line`] wrote it
/// before the reader was started (so never waited for: `None` when
/// nothing is there).
pub fn read_run_line(pipe: BorrowedFd<'_>) -> Option<String> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(pipe, PollFlags::POLLIN)];
    let readable = matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0]
            .revents()
            .is_some_and(|r| r.contains(PollFlags::POLLIN));
    if !readable {
        return None;
    }
    // Byte by byte, so nothing past the line is taken.
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    while line.len() < 128 {
        match nix::unistd::read(pipe.as_raw_fd(), &mut byte) {
            Ok(1) if byte[0] == b'\n' => break,
            Ok(1) => line.push(byte[0]),
            _ => return None,
        }
    }
    let line = String::from_utf8(line).ok()?;
    let key = line.strip_prefix(RUN)?.strip_prefix(' ')?;
    Some(key.to_string())
}

/// Whether a pipe from sbx reports that its writer is gone.
pub fn broken(pipe: BorrowedFd<'_>) -> bool {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut fds = [PollFd::new(pipe, PollFlags::empty())];
    matches!(poll(&mut fds, PollTimeout::ZERO), Ok(n) if n > 0)
        && fds[0]
            .revents()
            .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR))
}

/// Make the checks of a run whose sbx (of key `sbx`, when known) is gone,
/// once its sandbox has ended (here, or in reduced mode's keeper), and
/// leave what they found for the next run to say. `checking`: the mark
/// the caller set the moment it saw sbx gone (a run that starts meanwhile,
/// the killed sbx just reaped, waits for these checks instead of taking
/// the project as it is while they move files aside).
pub fn check_for_a_dead_run(
    cache: &Path,
    sbx: Option<&str>,
    checking: Result<journal::Checking>,
) -> Result<()> {
    // A killed sbx's pipe breaks when its descriptors close, a moment
    // before it is a zombie; checks made in between took its run for a
    // live one and left the planted files to the next run. A minute at
    // most: then they are left to it.
    if let Some(key) = sbx {
        journal::wait_until_gone(key, Duration::from_secs(60));
    }
    let _checking = checking?;
    let said = std::cell::RefCell::new(Vec::<String>::new());
    let clean = journal::recover_now(cache, &|text| said.borrow_mut().push(text.to_string()));
    let said = said.take();
    if !said.is_empty() {
        journal::leave_report(cache, clean, &said)?;
    }
    Ok(())
}

/// Kill every process (but this one) that holds one of the ready `pipes`,
/// until none is left or `within` has passed (a process stuck in the
/// kernel): whether none is left.
pub(super) fn end_holders(pipes: &[u64], within: Duration) -> bool {
    let start = Instant::now();
    loop {
        let holders = holding(pipes);
        if holders.is_empty() {
            return true;
        }
        if start.elapsed() > within {
            return false;
        }
        for (pid, key) in &holders {
            // Still the same process (not a PID reused since the scan).
            if journal::process_key(*pid).as_deref() != Some(key.as_str()) {
                continue;
            }
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(*pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        // Gone, or a zombie: a sandbox's first process is one only once
        // every other process of its namespace has ended.
        for (pid, key) in &holders {
            while journal::process_key(*pid).as_deref() == Some(key.as_str()) {
                if start.elapsed() > within {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }
}

/// The processes (PID and start key) that have one of `pipes` open.
fn holding(pipes: &[u64]) -> Vec<(u32, String)> {
    let wanted: Vec<String> = pipes.iter().map(|i| format!("pipe:[{i}]")).collect();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|l| wanted.iter().any(|w| l.as_os_str() == w.as_str()))
        });
        if holds && pid != std::process::id() {
            if let Some(key) = journal::process_key(pid) {
                found.push((pid, key));
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn the_holders_of_a_pipe_are_found_and_ended() {
        let (read, write) = nix::unistd::pipe().unwrap();
        let inode = nix::sys::stat::fstat(read.as_raw_fd()).unwrap().st_ino;
        // A child holding the pipe (its standard input), as a sandbox does.
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .stdin(Stdio::from(read))
            .spawn()
            .unwrap();
        drop(write);
        let holders = holding(&[inode]);
        assert_eq!(holders.len(), 1, "{holders:?}");
        assert_eq!(holders[0].0, child.id());
        assert!(end_holders(&[inode], Duration::from_secs(60)));
        assert!(child.wait().unwrap().code().is_none(), "killed by a signal");
        assert!(holding(&[inode]).is_empty());
    }

    /// The checks wait for a killed sbx to be a zombie: until then its
    /// note reads as a live run's.
    #[test]
    fn the_checks_wait_until_the_killed_process_has_exited() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let key = journal::process_key(child.id()).unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        assert!(journal::wait_until_gone(&key, Duration::from_secs(60)));
        // Not reaped yet: a zombie, which no longer counts as alive.
        assert_eq!(journal::process_key(child.id()), None);
        assert!(child.wait().unwrap().code().is_none());
        // A key whose process is gone (or another one now): at once.
        assert!(journal::wait_until_gone(
            &format!("{}-0", child.id()),
            Duration::ZERO
        ));
        // One alive: not gone within the limit.
        let me = journal::process_key(std::process::id()).unwrap();
        assert!(!journal::wait_until_gone(&me, Duration::from_millis(20)));
    }

    /// What sbx says is read whole: its key first, each ready pipe, and
    /// whether it was done; a pipe that ends without `done` is a dead run.
    #[test]
    fn the_guardian_reads_the_run_its_pipes_and_the_end() {
        let said = "run 123-456\npipe 77\npipe 78\n";
        assert_eq!(
            listen(said.as_bytes()),
            Told {
                sbx: Some("123-456".into()),
                pipes: vec![77, 78],
                done: false,
            }
        );
        assert!(listen(format!("{said}done\n").as_bytes()).done);
        // The first line sbx writes on a prepared guardian's pipe is its key.
        let cache = tempfile::tempdir().unwrap();
        let guardian = prepare(cache.path()).unwrap();
        let read = guardian.read.borrow_mut().take().unwrap();
        drop(guardian);
        let told = listen(std::io::BufReader::new(std::fs::File::from(read)));
        assert_eq!(told.sbx, journal::this_process_key());
        assert!(told.done);
    }

    /// A dead run's checks wait while its sbx is still exiting: they do
    /// not end before it is gone.
    #[test]
    fn the_checks_of_a_dead_run_wait_for_its_sbx() {
        let cache = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let key = journal::process_key(child.id()).unwrap();
        let checks = {
            let (cache, key) = (cache.path().to_path_buf(), key.clone());
            std::thread::spawn(move || {
                let checking = journal::begin_checking(&cache);
                check_for_a_dead_run(&cache, Some(&key), checking)
            })
        };
        // Still waiting after a while (it waits up to a minute).
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(300) {
            assert!(!checks.is_finished(), "the checks did not wait");
            std::thread::sleep(Duration::from_millis(10));
        }
        child.kill().unwrap();
        let _ = checks.join().unwrap();
        assert_eq!(journal::process_key(child.id()), None);
        let _ = child.wait();
    }

    /// The keeper reads the line without waiting, and only that line.
    #[test]
    fn the_run_line_is_read_alone_and_never_waited_for() {
        let (read, write) = nix::unistd::pipe().unwrap();
        assert_eq!(read_run_line(read.as_fd()), None);
        let line = run_line().unwrap();
        nix::unistd::write(&write, format!("{line}more").as_bytes()).unwrap();
        assert_eq!(read_run_line(read.as_fd()), journal::this_process_key());
        let mut rest = [0u8; 8];
        assert_eq!(nix::unistd::read(read.as_raw_fd(), &mut rest).unwrap(), 4);
    }

    #[test]
    fn a_pipe_whose_writer_is_gone_is_broken() {
        let (read, write) = nix::unistd::pipe().unwrap();
        assert!(!broken(read.as_fd()));
        drop(write);
        assert!(broken(read.as_fd()));
    }
}
