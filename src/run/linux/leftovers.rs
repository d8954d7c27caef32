//! Ending every process a command left behind, for reduced mode, where no
//! PID namespace does it: the keeper (and sbx after it) is a child
//! subreaper, so every orphan of the sandbox is one of its descendants.
//!
//! Killing them one generation at a time loses against a process that
//! keeps forking (a fork storm, each child in a session of its own): its new
//! children are born between the scan and the kill. So the tree is first
//! frozen: every descendant that left sbx's process group gets SIGSTOP,
//! again and again, until a scan finds none of them still running (a
//! stopped process cannot fork, so each round can only meet those born
//! during the one before). Then every descendant gets SIGKILL, round after
//! round, and is reaped.
//!
//! A process asleep in the kernel cannot stop there: a parent waiting for
//! its `vfork` child to exec (dash runs every command that way) stays in
//! that sleep as long as the child, stopped before its exec, does. Once
//! told to stop, such a process counts as frozen: the stop is delivered
//! before it runs again, and a fork it is inside fails while it is
//! pending. The freezing rounds are bounded all the same (a few seconds),
//! and the killing rounds always follow.
//!
//! Those still in sbx's own process group are never stopped: that group
//! may hold the agent or shell that started sbx, and a group left with a
//! stopped member when its last link to its session goes is sent SIGHUP by
//! the kernel, every member of it. They are killed with the rest.

use nix::sys::signal::{kill, Signal};
use nix::sys::wait::{waitpid, WaitPidFlag};
use nix::unistd::Pid;

/// Kill every descendant of this process and reap them; none in process
/// group `spared` is ever stopped (see above). A process stuck in the kernel
/// for good (uninterruptible sleep) can outlast the killing rounds: after a
/// minute it is left, and the caller goes on to the checks.
pub fn kill_all(spared: u32) {
    use std::time::{Duration, Instant};
    // Most runs leave nothing: with no child at all, /proc is not scanned.
    if waitpid(None, Some(WaitPidFlag::WNOHANG)) == Err(nix::errno::Errno::ECHILD) {
        return;
    }
    let me = std::process::id();
    let pause = || std::thread::sleep(Duration::from_millis(1));
    let freezing = Instant::now() + Duration::from_secs(5);
    let mut told: std::collections::HashSet<u32> = std::collections::HashSet::new();
    while Instant::now() < freezing {
        let tree: Vec<Proc> = descendants(me, &processes())
            .into_iter()
            .filter(|p| p.group != spared)
            .collect();
        let frozen = |p: &Proc| !p.running || (p.in_kernel && told.contains(&p.pid));
        if tree.iter().all(frozen) {
            break;
        }
        for p in &tree {
            let _ = kill(Pid::from_raw(p.pid as i32), Signal::SIGSTOP);
            told.insert(p.pid);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let tree = descendants(me, &processes());
        if tree.is_empty() {
            return;
        }
        for p in &tree {
            let _ = kill(Pid::from_raw(p.pid as i32), Signal::SIGKILL);
        }
        reap_ended();
        pause();
    }
}

/// Reap every child that has ended, without waiting for the others.
fn reap_ended() {
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(nix::sys::wait::WaitStatus::StillAlive) | Err(_) => return,
            Ok(_) => continue,
        }
    }
}

/// One process as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Proc {
    pid: u32,
    parent: u32,
    /// Its process group.
    group: u32,
    /// Neither stopped nor a zombie: it may still fork.
    running: bool,
    /// Asleep in the kernel, where a stop waits (state `D`).
    in_kernel: bool,
}

/// Every process of the machine.
fn processes() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            parse_stat(pid, &stat)
        })
        .collect()
}

/// The parent and state fields of `/proc/PID/stat`, after the command
/// name, which is in parentheses and may hold anything.
fn parse_stat(pid: u32, stat: &str) -> Option<Proc> {
    let mut rest = stat[stat.rfind(')')? + 1..].split_whitespace();
    let state = rest.next()?;
    let parent = rest.next()?.parse().ok()?;
    let group = rest.next()?.parse().ok()?;
    Some(Proc {
        pid,
        parent,
        group,
        running: !matches!(state, "T" | "t" | "Z" | "X"),
        in_kernel: state == "D",
    })
}

/// The descendants of `root` among `all`, at any depth.
fn descendants(root: u32, all: &[Proc]) -> Vec<Proc> {
    let mut found: Vec<Proc> = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for p in all.iter().filter(|p| p.parent == parent && p.pid != root) {
            if !found.iter().any(|f| f.pid == p.pid) {
                found.push(*p);
                frontier.push(p.pid);
            }
        }
    }
    found
}

/// The parent's PID in the text of `/proc/PID/stat`.
pub fn parent_in_stat(stat: &str) -> Option<u32> {
    parse_stat(0, stat).map(|p| p.parent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stat_line_is_read_past_any_command_name() {
        assert_eq!(parent_in_stat("12 (sh) S 7 12 12 0"), Some(7));
        assert_eq!(parent_in_stat("12 (a) b) c) S 9 12"), Some(9));
        assert_eq!(parent_in_stat("garbage"), None);
        assert_eq!(parse_stat(12, "12 (sh) S 7 5 12 0").unwrap().group, 5);
        assert!(!parse_stat(3, "3 (x) T 1 3").unwrap().running);
        assert!(!parse_stat(3, "3 (x) Z 1 3").unwrap().running);
        assert!(parse_stat(3, "3 (x) R 1 3").unwrap().running);
        assert!(parse_stat(3, "3 (x) D 1 3").unwrap().in_kernel);
        assert!(!parse_stat(3, "3 (x) S 1 3").unwrap().in_kernel);
    }

    #[test]
    fn descendants_are_found_at_any_depth() {
        let p = |pid, parent| Proc {
            pid,
            parent,
            group: 1,
            running: true,
            in_kernel: false,
        };
        let all = [p(10, 1), p(11, 10), p(12, 11), p(13, 1), p(14, 12)];
        let mut got: Vec<u32> = descendants(10, &all).iter().map(|p| p.pid).collect();
        got.sort();
        assert_eq!(got, vec![11, 12, 14]);
        assert!(descendants(13, &all).is_empty());
    }
}
