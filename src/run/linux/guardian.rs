//! The guardian: a small process outside the sandbox that makes a killed
//! sbx's after-run checks the moment its sandbox is gone, instead of
//! leaving what the command planted in place until the next sbx run.
//!
//! sbx starts it (`sbx __guard`) once its note is written, in a process
//! group of its own (an agent's timeout kills sbx's group; not this one),
//! with the read end of a pipe as its standard input, on which sbx writes
//! lines: `pipe INODE` for each sandbox it starts (the inode of that
//! sandbox's ready pipe, which bubblewrap, its child and the inner stage
//! hold, and the command never does), and `done` once its own checks are
//! made. The pipe ends when sbx is gone:
//!
//! - `done` came: nothing to do;
//! - no `done`: sbx died first. The guardian kills every process that holds
//!   one of those ready pipes and waits until they are gone (the sandbox's
//!   first process is one: the kernel ends every other process of its PID
//!   namespace before its exit is seen; and a bubblewrap killed between its
//!   clone and releasing its child would leave that child waiting for good),
//!   then makes the checks of every dead run's note
//!   ([`crate::integrity::journal::recover`]) and leaves what they said for
//!   the next run to show ([`crate::integrity::journal::leave_report`]):
//!   nothing writes to a terminal or a pipe nobody may read any more.
//!
//! The window a planted `.envrc` or `.vscode/tasks.json` stays in place is
//! the time the kernel takes to end the sandbox plus the checks themselves.

use std::io::BufRead;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
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

/// The guardian of one run, seen from sbx: the write end of its pipe, and
/// until the guardian is launched, the read end it will get.
pub struct Guardian {
    tell: OwnedFd,
    cache: std::path::PathBuf,
    /// The pipe's read end, until [`Guardian::launch`] hands it over.
    read: std::cell::RefCell<Option<OwnedFd>>,
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
    pub fn launch(&self) {
        let Some(read) = self.read.borrow_mut().take() else {
            return;
        };
        let Ok(sbx) = std::env::current_exe() else {
            return;
        };
        let _ = std::process::Command::new(sbx)
            .arg("__guard")
            .arg("--cache")
            .arg(&self.cache)
            .stdin(Stdio::from(read))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn();
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
    Ok(Guardian {
        tell: write,
        cache: cache.to_path_buf(),
        read: std::cell::RefCell::new(Some(read)),
    })
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
    let parent = parent_key();
    let sbx = parent.filter(|_| !broken(std::io::stdin().as_fd()));
    // What sbx inherited without close-on-exec (a pipe an agent waits on
    // for EOF) is not the guardian's to hold, nor is the directory it was
    // started in.
    for fd in crate::supervise::descriptors_above_stderr().unwrap_or_default() {
        let _ = nix::unistd::close(fd);
    }
    let _ = std::env::set_current_dir("/");
    let mut pipes: Vec<u64> = Vec::new();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { break };
        if line == DONE {
            return Ok(ExitCode::SUCCESS);
        }
        if let Some(inode) = line.strip_prefix(PIPE).and_then(|i| i.trim().parse().ok()) {
            pipes.push(inode);
        }
    }
    // sbx is gone without saying it was done: so goes its sandbox.
    end_sandboxes(&pipes);
    check_for_a_dead_run(cache, sbx.as_deref())?;
    Ok(ExitCode::SUCCESS)
}

/// The key of this process's parent: sbx, for a guardian or keeper that
/// reads it first thing and then finds the pipe from sbx still unbroken
/// (see [`broken`]): an exiting process closes its descriptors before its
/// children are handed to another parent.
pub fn parent_key() -> Option<String> {
    journal::process_key(u32::try_from(nix::unistd::getppid().as_raw()).ok()?)
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
/// leave what they found for the next run to say.
pub fn check_for_a_dead_run(cache: &Path, sbx: Option<&str>) -> Result<()> {
    // A killed sbx's pipe breaks when its descriptors close, a moment
    // before it is a zombie; checks made in between took its run for a
    // live one and left the planted files to the next run. A minute at
    // most: then they are left to it.
    if let Some(key) = sbx {
        journal::wait_until_gone(key, Duration::from_secs(60));
    }
    let _checking = journal::begin_checking(cache)?;
    let said = std::cell::RefCell::new(Vec::<String>::new());
    let clean = journal::recover_now(cache, &|text| said.borrow_mut().push(text.to_string()));
    let said = said.take();
    if !said.is_empty() {
        journal::leave_report(cache, clean, &said)?;
    }
    Ok(())
}

/// Kill every process that holds one of the ready `pipes`, until none
/// is left (ten minutes at most: a process stuck in the kernel is left to
/// the next run, whose checks come later).
fn end_sandboxes(pipes: &[u64]) {
    let start = Instant::now();
    loop {
        let holders = holding(pipes);
        if holders.is_empty() {
            return;
        }
        if start.elapsed() > Duration::from_secs(600) {
            std::process::exit(0);
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
                if start.elapsed() > Duration::from_secs(600) {
                    std::process::exit(0);
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
        end_sandboxes(&[inode]);
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

    /// The key a guardian reads first is its parent's, while the pipe from
    /// it holds.
    #[test]
    fn a_guardian_knows_its_run_while_the_pipe_holds() {
        assert_eq!(
            parent_key(),
            journal::process_key(std::os::unix::process::parent_id())
        );
        let (read, write) = nix::unistd::pipe().unwrap();
        assert!(!broken(read.as_fd()));
        drop(write);
        assert!(broken(read.as_fd()));
    }
}
