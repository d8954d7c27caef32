//! Bubblewrap started ahead of its plan.
//!
//! Starting bubblewrap (the exec, the dynamic loader, libselinux and
//! libcap) takes most of a millisecond, which sbx used to wait for after
//! resolving its policy. So a sandboxed run starts
//!
//! ```text
//! bwrap --args FD1 -- SBX __inner --args-fd FD2
//! ```
//!
//! before resolving anything. bubblewrap reads its options from the first
//! pipe (`--args`: NUL-separated, as if they were on its command line) and
//! does nothing until that pipe is closed; the inner stage reads its own
//! options and the command from the second. Once the plan is rendered, sbx
//! writes the plan's arguments into them, unchanged: bubblewrap's before
//! the plan's `--`, the inner stage's after `SBX __inner`. What runs is
//! what `sbx profile --platform linux` prints, in two parts.
//!
//! The inner stage's part carries its length first, and the inner stage
//! refuses a part that is not whole: if sbx dies while writing, no command
//! runs with half its arguments. bubblewrap's part is written whole before
//! the inner stage's is begun; a bubblewrap that ends up with half of its
//! own runs an inner stage that never gets its part.
//!
//! Until it has its arguments, bubblewrap dies with sbx (the parent-death
//! signal, set between its fork and its exec): a killed sbx would leave it
//! an empty pipe, and it would go on with no options, to fail on the
//! user's terminal. Its arguments then say `--die-with-parent` anyway.
//! The kernel closes a dying process's descriptors before it sends that
//! signal, and a busy machine can run bubblewrap in between: so the end of
//! its pipe must not come from sbx's death at all. A copy of the pipe's
//! write end is kept in flight on a Unix socket whose receiving end
//! bubblewrap inherits (the inner stage closes it): while bubblewrap lives,
//! so does that copy, and only sbx takes it out, once bubblewrap's part is
//! written ([`Hold`]).
//!
//! A plan that does not match what was started (another bubblewrap,
//! another sbx, an environment of its own, a memory limit whose cgroup the
//! sandbox must be born in) gets a bubblewrap of its own, as before; the
//! one started ahead is killed and reaped, and so it is on every way out of
//! sbx that runs no sandbox.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use nix::fcntl::{fcntl, FcntlArg, OFlag};

use crate::backend::bwrap::READY_FD;
use crate::backend::Plan;

/// The inner stage's option that names the pipe of its arguments.
pub const ARGS_FD: &str = "--args-fd";

/// A bubblewrap waiting for its arguments; killed and reaped when dropped
/// before [`Ahead::send`] handed it over.
pub struct Ahead {
    /// Until handed over.
    child: Option<Child>,
    /// The real path of the bubblewrap started.
    program: PathBuf,
    /// The sbx it runs as the inner stage.
    sbx: PathBuf,
    /// Write ends: bubblewrap's arguments, the inner stage's (until
    /// written and closed).
    bwrap_args: Option<OwnedFd>,
    inner_args: Option<OwnedFd>,
    /// The copy of `bwrap_args` that keeps bubblewrap's pipe open until
    /// its part is written.
    hold: Option<Hold>,
    /// The read end of the ready pipe, whose write end it inherited.
    ready: Option<OwnedFd>,
}

/// The one started by this sbx, until a plan takes it.
static STARTED: Mutex<Option<Ahead>> = Mutex::new(None);

/// Start `/usr/bin/bwrap` ahead, with `sbx` as its inner stage, and keep
/// it for [`take`]. Nothing happens if that cannot be done: the plan's own
/// bubblewrap is started later, as it always could be.
pub fn start(sbx: &Path) {
    let Ok(program) = std::fs::canonicalize(crate::exec::SYSTEM_BWRAP) else {
        return;
    };
    if !dies_with_sbx(&program) {
        return;
    }
    let Ok(mut slot) = STARTED.lock() else {
        return;
    };
    if slot.is_none() {
        *slot = spawn(&program, sbx).ok();
    }
}

/// Whether the bubblewrap at `program` keeps the parent-death signal sbx
/// sets before its exec: the kernel clears it for a set-user-ID or
/// set-group-ID program. Such a bubblewrap, started ahead, would wait for
/// its arguments for good after a killed sbx (its pipe is [held](Hold)).
/// Little is lost: a setuid bubblewrap refuses the `--cap-add` of a plan
/// with git config copies, whose retry spawns a bubblewrap of its own.
/// (File capabilities clear it too, but bubblewrap refuses to run with
/// them unless started by root, whose exec keeps it.)
fn dies_with_sbx(program: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(program).is_ok_and(|m| m.permissions().mode() & 0o6000 == 0)
}

fn spawn(program: &Path, sbx: &Path) -> Result<Ahead> {
    let (bwrap_r, bwrap_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("creating a pipe")?;
    let (inner_r, inner_w) = nix::unistd::pipe2(OFlag::O_CLOEXEC).context("creating a pipe")?;
    let hold = Hold::new(&bwrap_w)?;
    // Copies bubblewrap inherits (not close-on-exec), closed here once it
    // is spawned (or could not be), like the ready pipe's write end.
    let mut inherited: Vec<RawFd> = Vec::new();
    let started = (|| -> Result<(Child, OwnedFd)> {
        for fd in [&bwrap_r, &inner_r, &hold.0] {
            inherited
                .push(fcntl(fd.as_raw_fd(), FcntlArg::F_DUPFD(3)).context("copying a descriptor")?);
        }
        let ready = super::bwrap::ready_pipe(READY_FD)?;
        inherited.push(READY_FD);
        let mut cmd = std::process::Command::new(program);
        // It dies with sbx until it has its arguments (they say
        // `--die-with-parent` from then on): a killed sbx would otherwise
        // leave it an empty pipe, and it would go on with no options at
        // all, to fail on the user's terminal.
        let parent = nix::unistd::getpid();
        // SAFETY: the closure runs in the forked child, where only
        // async-signal-safe work is allowed: three system calls (prctl,
        // getppid, _exit), no allocation, no lock.
        #[allow(unsafe_code)]
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(move || {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)?;
                // sbx died before the line above: nothing would kill it.
                // It ends here, silently: an error returned would be
                // written to a parent that is gone, and the standard
                // library aborts with a message on the user's terminal.
                if nix::unistd::getppid() != parent {
                    nix::libc::_exit(1);
                }
                Ok(())
            });
        }
        let child = cmd
            .arg("--args")
            .arg(inherited[0].to_string())
            .arg("--")
            .arg(sbx)
            .arg("__inner")
            .arg(ARGS_FD)
            .arg(inherited[1].to_string())
            .spawn()
            .context("starting bubblewrap")?;
        Ok((child, ready))
    })();
    for fd in inherited {
        let _ = nix::unistd::close(fd);
    }
    let (child, ready) = started?;
    Ok(Ahead {
        child: Some(child),
        program: program.to_path_buf(),
        sbx: sbx.to_path_buf(),
        bwrap_args: Some(bwrap_w),
        inner_args: Some(inner_w),
        hold: Some(hold),
        ready: Some(ready),
    })
}

/// The bubblewrap started ahead, if `plan` can use it (`in_group`: the plan
/// runs in a cgroup of its own, which the sandbox must be born in). One
/// that cannot serve is killed.
pub fn take(plan: &Plan, in_group: bool) -> Option<Ahead> {
    let ahead = STARTED.lock().ok()?.take()?;
    let fits = !in_group
        && plan.env.is_none()
        && plan.ready_fd == Some(READY_FD)
        && plan.program == ahead.program
        && inner_at(plan).is_some_and(|at| plan.args[at + 1] == ahead.sbx.as_os_str());
    // One that cannot serve is dropped: killed.
    fits.then_some(ahead)
}

/// Kill the bubblewrap started ahead, if no plan took it. Called wherever
/// sbx goes on without a sandbox, or ends.
pub fn abandon() {
    drop(STARTED.lock().ok().and_then(|mut slot| slot.take()));
}

/// Where the plan's `--` before `SBX __inner` is: bubblewrap's options end
/// there. The renderer puts `SBX __inner` right after bubblewrap's own
/// `--`, which is the first `--` that is not an option's value.
fn inner_at(plan: &Plan) -> Option<usize> {
    let at = plan.inner_at?;
    (plan.args.get(at)? == "--" && plan.args.get(at + 2)? == "__inner").then_some(at)
}

impl Ahead {
    /// The read end of the ready pipe.
    pub fn ready(&self) -> Option<&OwnedFd> {
        self.ready.as_ref()
    }

    /// Hand over `plan`'s arguments: the running bubblewrap and the read end
    /// of its ready pipe. `None` when bubblewrap could not take its part:
    /// it is killed (nothing ran), and the plan can be spawned anew.
    pub fn send(mut self, plan: &Plan) -> Option<(Child, OwnedFd)> {
        let at = inner_at(plan)?;
        // A NUL byte would end one argument and start another: a spawned
        // plan refuses it, and so does this one (it is then spawned, and
        // refused there).
        if plan.args.iter().any(|a| a.as_bytes().contains(&0)) {
            return None;
        }
        let bwrap_part: Vec<u8> = plan.args[..at]
            .iter()
            .flat_map(|a| a.as_bytes().iter().copied().chain([0]))
            .collect();
        let bwrap_args = self.bwrap_args.take()?;
        let hold = self.hold.take()?;
        if write_all(&bwrap_args, &bwrap_part).is_err() {
            // Killed before its pipe closes on what it has read.
            drop(self);
            return None;
        }
        // bubblewrap reads its part to the end, then sets the sandbox up.
        drop(bwrap_args);
        if hold.release().is_err() {
            // Its pipe would never end: killed (nothing ran).
            drop(self);
            return None;
        }
        let inner_args = self.inner_args.take()?;
        let (child, ready) = (self.child.take()?, self.ready.take()?);
        // Written whole, as the inner stage reads it once bubblewrap has
        // set the sandbox up (a part larger than the pipe holds waits for
        // that). A failure leaves the inner stage a part that is not whole,
        // which it refuses: the run is then reported as not started.
        let _ = write_all(&inner_args, &encode(&plan.args[at + 3..]));
        drop(inner_args);
        Some((child, ready))
    }
}

impl Drop for Ahead {
    /// Not handed over: kill and reap it (nothing ran in it), before its
    /// pipes close.
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A copy of the write end of bubblewrap's argument pipe, in flight on a
/// Unix socket: the kernel keeps a descriptor sent with `SCM_RIGHTS` open
/// until it is received or the receiving socket is closed everywhere. This
/// is that receiving end; bubblewrap inherits a copy of it. So the pipe
/// cannot end while bubblewrap lives, unless sbx [releases](Hold::release)
/// it; a bubblewrap killed with sbx takes it along.
struct Hold(OwnedFd);

impl Hold {
    fn new(pipe: &OwnedFd) -> Result<Hold> {
        use nix::sys::socket::{
            sendmsg, socketpair, AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType,
        };
        let (send, receive) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .context("creating a socket pair")?;
        let fds = [pipe.as_raw_fd()];
        // One byte to carry it: a stream socket sends no message without.
        sendmsg::<()>(
            send.as_raw_fd(),
            &[std::io::IoSlice::new(&[0])],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::empty(),
            None,
        )
        .context("keeping bubblewrap's argument pipe open")?;
        Ok(Hold(receive))
    }

    /// Take the copy out of flight and close it: once sbx's own write end
    /// is closed too, bubblewrap reads the end of its arguments.
    fn release(self) -> Result<()> {
        use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
        let mut byte = [0u8; 1];
        let mut iov = [std::io::IoSliceMut::new(&mut byte)];
        let mut space = nix::cmsg_space!([RawFd; 1]);
        // The sending end is closed: an empty socket reads as its end, so
        // this cannot block.
        let msg = recvmsg::<()>(
            self.0.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .context("releasing bubblewrap's argument pipe")?;
        let mut released = 0;
        for cmsg in msg.cmsgs().context("reading the held descriptor")? {
            if let ControlMessageOwned::ScmRights(fds) = cmsg {
                for fd in fds {
                    let _ = nix::unistd::close(fd);
                    released += 1;
                }
            }
        }
        if released != 1 {
            bail!("bubblewrap's argument pipe was not held");
        }
        Ok(())
    }
}

fn write_all(fd: &OwnedFd, mut bytes: &[u8]) -> nix::Result<()> {
    while !bytes.is_empty() {
        match nix::unistd::write(fd, bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The inner stage's part: its length (8 bytes, little-endian), then each
/// argument followed by a NUL byte.
pub fn encode(args: &[OsString]) -> Vec<u8> {
    let body: Vec<u8> = args
        .iter()
        .flat_map(|a| a.as_bytes().iter().copied().chain([0]))
        .collect();
    let mut out = (body.len() as u64).to_le_bytes().to_vec();
    out.extend(body);
    out
}

/// The arguments in a part [`encode`] made; an error for anything else,
/// a part cut short included.
pub fn decode(part: &[u8]) -> Result<Vec<OsString>> {
    let Some((len, body)) = part.split_first_chunk::<8>() else {
        bail!(
            "the inner stage's arguments were cut short ({} bytes)",
            part.len()
        );
    };
    let len = u64::from_le_bytes(*len);
    if u64::try_from(body.len()).ok() != Some(len) {
        bail!(
            "the inner stage's arguments were cut short ({} of {len} bytes)",
            body.len()
        );
    }
    let Some(body) = body.strip_suffix(&[0]) else {
        if body.is_empty() {
            return Ok(Vec::new());
        }
        bail!("the inner stage's arguments do not end with a NUL byte");
    };
    Ok(body
        .split(|&b| b == 0)
        .map(|a| OsString::from_vec(a.to_vec()))
        .collect())
}

/// `sbx __inner --args-fd FD`, as bubblewrap started ahead runs it: the
/// inner stage's command line with the arguments read from `FD`. Any
/// other command line as it is.
pub fn inner_argv(argv: Vec<OsString>) -> Result<Vec<OsString>> {
    let [sbx, inner, flag, fd] = argv.as_slice() else {
        return Ok(argv);
    };
    if inner != "__inner" || flag != ARGS_FD {
        return Ok(argv);
    }
    let fd: RawFd = fd
        .to_str()
        .and_then(|f| f.parse().ok())
        .with_context(|| format!("{ARGS_FD}: not a descriptor: {}", fd.to_string_lossy()))?;
    let mut part = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match nix::unistd::read(fd, &mut buf) {
            Ok(0) => break,
            Ok(n) => part.extend_from_slice(&buf[..n]),
            Err(nix::errno::Errno::EINTR) => {}
            Err(e) => bail!("reading the inner stage's arguments: {e}"),
        }
    }
    let _ = nix::unistd::close(fd);
    let mut full = vec![sbx.clone(), inner.clone()];
    full.extend(decode(&part)?);
    Ok(full)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&[u8]]) -> Vec<OsString> {
        list.iter()
            .map(|a| OsString::from_vec(a.to_vec()))
            .collect()
    }

    #[test]
    fn every_part_decodes_to_what_was_encoded() {
        for list in [
            args(&[]),
            args(&[b""]),
            args(&[b"", b""]),
            args(&[b"--ready-fd", b"100", b"--", b"sh", b"-c", b"echo 'a b'"]),
            args(&[b"\xff\xfe", b"", b"x\ny", b"--"]),
        ] {
            assert_eq!(decode(&encode(&list)).unwrap(), list);
        }
    }

    #[test]
    fn a_part_cut_short_is_refused_wherever_it_was_cut() {
        let part = encode(&args(&[b"--", b"rm", b"-rf", b"/tmp/x", b"--dry-run"]));
        for cut in 0..part.len() {
            assert!(decode(&part[..cut]).is_err(), "cut at {cut} accepted");
        }
        let mut longer = part.clone();
        longer.push(b'x');
        assert!(decode(&longer).is_err());
    }

    #[test]
    fn a_part_whose_length_is_right_but_not_ended_is_refused() {
        let mut part = 3u64.to_le_bytes().to_vec();
        part.extend(b"abc");
        assert!(decode(&part).is_err());
    }

    #[test]
    fn the_inner_stage_reads_its_part_from_the_pipe_and_refuses_one_cut_short() {
        use std::os::fd::IntoRawFd;
        let whole = encode(&args(&[b"--ready-fd", b"100", b"--", b"true"]));
        let cut = whole[..whole.len() - 1].to_vec();
        for (part, whole) in [(whole, true), (cut, false)] {
            let (r, w) = nix::unistd::pipe().unwrap();
            write_all(&w, &part).unwrap();
            drop(w);
            let fd = r.into_raw_fd().to_string();
            let argv = args(&[b"sbx", b"__inner", b"--args-fd", fd.as_bytes()]);
            match inner_argv(argv) {
                Ok(got) => {
                    assert!(whole);
                    let want = args(&[b"sbx", b"__inner", b"--ready-fd", b"100", b"--", b"true"]);
                    assert_eq!(got, want);
                }
                Err(e) => assert!(!whole && e.to_string().contains("cut short"), "{e}"),
            }
        }
    }

    #[test]
    fn other_command_lines_are_left_as_they_are() {
        for argv in [
            args(&[b"sbx", b"__inner", b"--ready-fd", b"100", b"--", b"true"]),
            args(&[b"sbx", b"run", b"--args-fd", b"3"]),
            args(&[b"sbx", b"__inner", b"--ready-fd", b"3"]),
        ] {
            assert_eq!(inner_argv(argv.clone()).unwrap(), argv);
        }
    }

    /// Whether the pipe whose read end is `read` has no writer left.
    fn ended(read: &OwnedFd) -> bool {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use std::os::fd::AsFd;
        let mut fds = [PollFd::new(read.as_fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::ZERO).unwrap();
        fds[0].revents().unwrap().contains(PollFlags::POLLHUP)
    }

    #[test]
    fn a_held_pipe_ends_only_once_released() {
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
        let hold = Hold::new(&write).unwrap();
        drop(write);
        assert!(!ended(&read), "the copy in flight keeps the pipe open");
        hold.release().unwrap();
        assert!(ended(&read));
    }

    #[test]
    fn a_held_pipe_ends_with_its_last_holder() {
        // What a killed bubblewrap does: the receiving end closed with the
        // copy still in flight.
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC).unwrap();
        let hold = Hold::new(&write).unwrap();
        drop(write);
        drop(hold);
        assert!(ended(&read));
    }

    #[test]
    fn a_set_id_bubblewrap_is_not_started_ahead() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("bwrap");
        std::fs::write(&program, "").unwrap();
        for (mode, dies) in [(0o755, true), (0o4755, false), (0o2755, false)] {
            std::fs::set_permissions(&program, std::fs::Permissions::from_mode(mode)).unwrap();
            assert_eq!(dies_with_sbx(&program), dies, "{mode:o}");
        }
        assert!(!dies_with_sbx(&dir.path().join("missing")));
    }
}
