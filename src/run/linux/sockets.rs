//! The command's own Unix sockets (`unix_sockets = "own"`, the default).
//!
//! A Unix socket is reached by its path, and neither the network namespace
//! nor a read-only mount keeps a process from connecting to a socket file
//! it can see: the host's ssh-agent, D-Bus, docker.sock or tmux, those that
//! exist before the run and those made during it. Yet Python's
//! `multiprocessing`, `tsx` and many build tools talk to processes of their
//! own over Unix sockets. So the sandbox may create them, and every
//! `connect()` of the command goes to sbx's PID 1, which decides it:
//!
//! - the command's process, between its fork and its exec, installs a
//!   seccomp filter that hands every `connect()` to a listener
//!   (`SECCOMP_RET_USER_NOTIF`) and passes the listener to PID 1;
//! - PID 1 copies the address out of the caller's memory once, takes a
//!   duplicate of its socket (`pidfd_getfd`), and connects that duplicate
//!   itself, to its own copy of the address: what the caller changes in
//!   its memory afterwards changes nothing;
//! - a path is resolved as the caller would (from its working directory,
//!   following symbolic links, but never a `/proc` "magic" link) to a file
//!   held open while it is decided; the connection is made to that file
//!   (`/proc/self/fd/N`), never to the path again;
//! - the file must be the one a listening socket of the sandbox is bound
//!   to: the kernel's socket diagnostics list the listening sockets of the
//!   sandbox's network namespace, where only the sandbox's own live. With
//!   the network open (`network = "allow"`) the namespace is the host's,
//!   so a socket must also be held open by a process of the sandbox;
//! - abstract names live in the network namespace: the sandbox's own
//!   unless the network is open, when they are checked the same way;
//! - every other address family is connected as asked (the network rules
//!   are the namespace's and the proxy's).
//!
//! A refused connection fails with `EACCES`; sbx names the socket after
//! the run if the command then fails. What this does not cover: the server
//! sees PID 1 as its peer (`SO_PEERCRED`), and the kernel reports only the
//! low 32 bits of a bound file's inode, so on a file system with 64-bit
//! inode numbers two socket files 2^32 inodes apart on the same device
//! would pass for each other.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use nix::errno::Errno;
use nix::libc;

use super::sockdiag;

/// `SECCOMP_RET_USER_NOTIF`.
const RET_USER_NOTIF: u32 = 0x7fc0_0000;
const RET_ALLOW: u32 = 0x7fff_0000;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;
#[cfg(target_arch = "riscv64")]
const AUDIT_ARCH: u32 = 0xc000_00f3;

/// The largest address `connect()` takes (`sizeof(struct sockaddr_storage)`).
const MAX_ADDRESS: usize = 128;

/// How many connections are decided at once, each on its own thread (a
/// connection that blocks must not hold up the others); past it, on the
/// listener's thread.
const MAX_AT_ONCE: usize = 64;

/// The filter that hands every `connect()` of this process and its
/// descendants to a listener: installed by the `__filter` stage, which
/// passes the listener to PID 1. Syscalls of another architecture are left
/// to the main filter, which refuses them.
fn notify_program() -> Vec<libc::sock_filter> {
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x05 | 0x10;
    const RET_K: u16 = 0x06;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    vec![
        op(LD_W_ABS, 0, 0, 4), // seccomp_data.arch
        op(JEQ_K, 1, 0, AUDIT_ARCH),
        op(RET_K, 0, 0, RET_ALLOW),
        op(LD_W_ABS, 0, 0, 0), // seccomp_data.nr
        op(JEQ_K, 0, 1, libc::SYS_connect as u32),
        op(RET_K, 0, 0, RET_USER_NOTIF),
        op(RET_K, 0, 0, RET_ALLOW),
    ]
}

/// What the command's process installs on itself between its fork and its
/// exec (PID 1's spawn of the command): the `pidfd_getfd` rule PID 1 left
/// out for itself, then the connect filter, whose listener it sends to PID
/// 1 over `to` (its end of a socket pair) before it execs. Everything is
/// built before the fork: the child only makes syscalls.
pub struct CommandFilters {
    refuse: Vec<libc::sock_filter>,
    notify: Vec<libc::sock_filter>,
    to: RawFd,
}

impl CommandFilters {
    pub fn new(to: RawFd) -> Result<CommandFilters> {
        let refuse = super::seccomp::command_program(super::seccomp::Unix::Own)?
            .iter()
            .map(|f| libc::sock_filter {
                code: f.code,
                jt: f.jt,
                jf: f.jf,
                k: f.k,
            })
            .collect();
        Ok(CommandFilters {
            refuse,
            notify: notify_program(),
            to,
        })
    }

    /// Set the command up to install them between its fork and its exec.
    pub fn install_in(self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure runs in the forked child, where only
        // async-signal-safe work is allowed: it reads what was built
        // before the fork and makes system calls (seccomp, sendmsg,
        // close), with every buffer on its stack. It allocates nothing and
        // takes no lock.
        #[allow(unsafe_code)]
        unsafe {
            cmd.pre_exec(move || self.install_and_send());
        }
    }

    /// In the child: install both filters and send the listener.
    fn install_and_send(&self) -> io::Result<()> {
        install(&self.refuse, 0)?;
        // Once PID 1 has taken a request, the caller waits for the answer
        // through any signal but a fatal one (Linux 5.19): a signal would
        // otherwise restart a connect() that PID 1 may already have made,
        // and the caller would see EISCONN. Older kernels: without it.
        let listener = match install(
            &self.notify,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER | libc::SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
        ) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                install(&self.notify, libc::SECCOMP_FILTER_FLAG_NEW_LISTENER)?
            }
            other => other?,
        };
        let sent = send_fd(self.to, listener);
        // SAFETY: `listener` is the descriptor seccomp just returned, owned
        // by nothing else; closing it leaves PID 1's copy.
        #[allow(unsafe_code)]
        unsafe {
            libc::close(listener);
        }
        sent
    }
}

/// `seccomp(SECCOMP_SET_MODE_FILTER, flags, program)`: its return value.
fn install(program: &[libc::sock_filter], flags: libc::c_ulong) -> io::Result<RawFd> {
    let len =
        u16::try_from(program.len()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    let fprog = libc::sock_fprog {
        len,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: seccomp(2) reads the program through `fprog`, which points
    // at `program`, alive for the call; it returns 0, a new descriptor
    // (with NEW_LISTENER) or -1.
    #[allow(unsafe_code)]
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &fprog as *const libc::sock_fprog,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    RawFd::try_from(r).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Send `fd` over the socket `to` (SCM_RIGHTS), with buffers on the stack.
fn send_fd(to: RawFd, fd: RawFd) -> io::Result<()> {
    let mut byte = [b'L'];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    // CMSG_SPACE(sizeof(int)) is 24 on 64-bit Linux; 8-byte aligned.
    let mut space = [0u64; 4];
    // SAFETY: `msghdr` is plain data (zero is a valid value for each of
    // its fields, its padding included); the pointers set below point at
    // the stack buffers above, alive for the call; CMSG_FIRSTHDR and
    // CMSG_DATA point inside `space`, which is large enough for one
    // descriptor's header and data; sendmsg(2) only reads them.
    #[allow(unsafe_code)]
    let r = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<RawFd>(), fd);
        libc::sendmsg(to, &msg, 0)
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Receive the listener the command's process sends over `from` before it
/// execs; `None` if it ended without sending one.
pub fn receive_listener(from: &OwnedFd) -> Result<Option<OwnedFd>> {
    use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags};
    let mut byte = [0u8; 1];
    let mut iov = [io::IoSliceMut::new(&mut byte)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        from.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .context("receiving the connect filter's listener")?;
    let mut received = None;
    for cmsg in msg.cmsgs().context("reading the listener's message")? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg {
            for fd in fds {
                // SAFETY: the kernel installed `fd` in this process for this
                // message; nothing else owns it.
                #[allow(unsafe_code)]
                let owned = unsafe { OwnedFd::from_raw_fd(fd) };
                received.get_or_insert(owned);
            }
        }
    }
    Ok(received)
}

/// What the supervisor knows, shared by its threads.
struct Shared {
    listener: OwnedFd,
    /// The sandbox's network namespace is the host's (`network = "allow"`).
    shared_network: bool,
    /// The first host socket refused, for the hint after the run.
    refused: Mutex<Option<String>>,
    at_once: AtomicUsize,
}

/// The running supervisor: what it refused, once the command is done.
pub struct Supervisor(Arc<Shared>);

impl Supervisor {
    /// The line sbx says after a failed command that was refused a host
    /// socket.
    pub fn hint(&self) -> Option<String> {
        let refused = self.0.refused.lock().ok()?.clone()?;
        Some(format!(
            "the command was refused a Unix socket of the host ({refused}); only sockets made inside the sandbox are reachable. --unix-sockets allow opens the host's too (ssh-agent, D-Bus, docker.sock: each a way out)"
        ))
    }
}

/// Decide every `connect()` the listener hands over, on threads of this
/// process (PID 1), until it ends.
pub fn supervise(listener: OwnedFd, shared_network: bool) -> Result<Supervisor> {
    let shared = Arc::new(Shared {
        listener,
        shared_network,
        refused: Mutex::new(None),
        at_once: AtomicUsize::new(0),
    });
    let looper = shared.clone();
    // With every signal blocked, here and in the threads it starts: a
    // SIGCHLD taken by one of them would be lost to PID 1's signalfd.
    crate::supervise::spawn_without_signals(move || receive_loop(&looper))
        .context("starting the Unix socket supervisor")?;
    Ok(Supervisor(shared))
}

fn receive_loop(shared: &Arc<Shared>) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    loop {
        // A request waits (POLLIN), or no process is left under the
        // filter (POLLHUP): then nothing more can come.
        let mut fds = [PollFd::new(shared.listener.as_fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) => {}
            Err(Errno::EINTR) => continue,
            Err(_) => return,
        }
        let ready = fds[0].revents().unwrap_or(PollFlags::empty());
        if !ready.contains(PollFlags::POLLIN) {
            return;
        }
        let request = match receive(shared.listener.as_fd()) {
            Ok(r) => r,
            // The caller died before it was read, or a signal came.
            Err(Errno::ENOENT | Errno::EINTR) => continue,
            // The listener is gone: nothing is left to decide.
            Err(_) => return,
        };
        if shared.at_once.fetch_add(1, Ordering::SeqCst) < MAX_AT_ONCE {
            let worker = shared.clone();
            let spawned = std::thread::Builder::new()
                .name("sbx-connect".into())
                .spawn(move || {
                    answer(&worker, &request);
                    worker.at_once.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_ok() {
                continue;
            }
        }
        answer(shared, &request);
        shared.at_once.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `SECCOMP_IOCTL_NOTIF_RECV`.
fn receive(listener: BorrowedFd) -> Result<libc::seccomp_notif, Errno> {
    // The kernel wants it zeroed.
    let mut request = libc::seccomp_notif {
        id: 0,
        pid: 0,
        flags: 0,
        data: libc::seccomp_data {
            nr: 0,
            arch: 0,
            instruction_pointer: 0,
            args: [0; 6],
        },
    };
    // SAFETY: the ioctl writes one `seccomp_notif` into `request`.
    #[allow(unsafe_code)]
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV as _,
            &mut request as *mut libc::seccomp_notif,
        )
    };
    Errno::result(r).map(|_| request)
}

/// Whether the request `id` still waits (its caller was not replaced by
/// another process with the same PID).
fn still_waiting(listener: BorrowedFd, id: u64) -> bool {
    // SAFETY: the ioctl reads one u64 from `id`.
    #[allow(unsafe_code)]
    let r = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &id as *const u64,
        )
    };
    r == 0
}

/// Decide one `connect()` and answer it.
fn answer(shared: &Shared, request: &libc::seccomp_notif) {
    let errno = match decide_and_connect(shared, request) {
        Ok(()) => 0,
        Err(e) => e as i32,
    };
    let mut response = libc::seccomp_notif_resp {
        id: request.id,
        val: 0,
        error: -errno,
        flags: 0,
    };
    // SAFETY: the ioctl reads one `seccomp_notif_resp` from `response`.
    // Its failure (the caller is gone) leaves nothing to do.
    #[allow(unsafe_code)]
    let _ = unsafe {
        libc::ioctl(
            shared.listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND as _,
            &mut response as *mut libc::seccomp_notif_resp,
        )
    };
}

/// The caller's `connect(fd, addr, len)`, decided and made on its socket.
fn decide_and_connect(shared: &Shared, request: &libc::seccomp_notif) -> Result<(), Errno> {
    let [fd, addr, len, ..] = request.data.args;
    let len = len as u32 as usize;
    if !(2..=MAX_ADDRESS).contains(&len) {
        return Err(Errno::EINVAL);
    }
    let pid = request.pid;
    let mut address = vec![0u8; len];
    File::open(format!("/proc/{pid}/mem"))
        .and_then(|mem| mem.read_exact_at(&mut address, addr))
        .map_err(|_| Errno::EFAULT)?;
    let pidfd = pidfd_open(pid)?;
    // The PID named the caller when the request was read; with the
    // request still waiting, it still does, and so does the pidfd.
    if !still_waiting(shared.listener.as_fd(), request.id) {
        return Err(Errno::ESRCH);
    }
    let socket = pidfd_getfd(&pidfd, fd as u32 as RawFd)?;
    let family = u16::from_ne_bytes([address[0], address[1]]);
    if i32::from(family) != libc::AF_UNIX {
        return connect_raw(&socket, &address);
    }
    let path = &address[2..];
    if path.is_empty() {
        // No address at all: the kernel's answer.
        return connect_raw(&socket, &address);
    }
    if path[0] == 0 {
        if shared.shared_network && !abstract_is_own(path)? {
            return Err(refuse(
                shared,
                &format!("@{}", String::from_utf8_lossy(&path[1..])),
            ));
        }
        return connect_raw(&socket, &address);
    }
    let path = path.split(|&b| b == 0).next().unwrap_or_default();
    let file = resolve(pid, path)?;
    let shown = String::from_utf8_lossy(path).into_owned();
    let meta = file_meta(&file)?;
    if !meta.file_type().is_socket() {
        return Err(Errno::ECONNREFUSED);
    }
    if !file_is_own(meta.dev(), meta.ino(), shared.shared_network)? {
        return Err(refuse(shared, &shown));
    }
    let through = format!("/proc/self/fd/{}", file.as_raw_fd());
    let mut rewritten = address[..2].to_vec();
    rewritten.extend_from_slice(through.as_bytes());
    rewritten.push(0);
    connect_raw(&socket, &rewritten)
}

/// Note a refused host socket (the first one, for the hint); `EACCES`.
fn refuse(shared: &Shared, shown: &str) -> Errno {
    if let Ok(mut first) = shared.refused.lock() {
        first.get_or_insert_with(|| crate::banner::sanitize(shown));
    }
    Errno::EACCES
}

fn file_meta(file: &OwnedFd) -> Result<std::fs::Metadata, Errno> {
    std::fs::metadata(format!("/proc/self/fd/{}", file.as_raw_fd())).map_err(|_| Errno::EACCES)
}

/// Open `path` (a socket's path, as the caller gave it) as the caller
/// would reach it: from its working directory if relative, following
/// symbolic links, never a magic link of `/proc` (which would resolve to
/// PID 1's own descriptors and directories, not the caller's).
fn resolve(pid: u32, path: &[u8]) -> Result<OwnedFd, Errno> {
    use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::OsStr::from_bytes(path);
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_MAGICLINKS);
    let fd = if path.as_bytes().starts_with(b"/") {
        openat2(libc::AT_FDCWD, path, how)
    } else {
        let cwd = File::open(format!("/proc/{pid}/cwd")).map_err(|_| Errno::EACCES)?;
        openat2(cwd.as_raw_fd(), path, how)
    };
    match fd {
        // SAFETY: openat2 just made `fd`, and nothing else owns it.
        #[allow(unsafe_code)]
        Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
        // A magic link is refused, not followed.
        Err(Errno::ELOOP | Errno::EXDEV) => Err(Errno::EACCES),
        Err(e) => Err(e),
    }
}

/// Whether the socket file `(dev, ino)` is bound by a listening socket of
/// the sandbox.
fn file_is_own(dev: u64, ino: u64, shared_network: bool) -> Result<bool, Errno> {
    let listening = sockdiag::listening().map_err(|_| Errno::EACCES)?;
    Ok(listening
        .iter()
        .filter(|l| l.file.is_some_and(|f| sockdiag::same_file(f, dev, ino)))
        .any(|l| !shared_network || held_by_the_sandbox(l.socket)))
}

/// Whether the abstract name `name` (starting with NUL) is bound by a
/// listening socket that a process of the sandbox holds.
fn abstract_is_own(name: &[u8]) -> Result<bool, Errno> {
    let listening = sockdiag::listening().map_err(|_| Errno::EACCES)?;
    Ok(listening
        .iter()
        .filter(|l| l.name.as_deref() == Some(name))
        .any(|l| held_by_the_sandbox(l.socket)))
}

/// Whether a process of the sandbox (PID 1 aside: it holds copies of the
/// callers' sockets) holds the socket `inode` open. `/proc` here is the
/// sandbox's, which shows its processes only.
fn held_by_the_sandbox(inode: u32) -> bool {
    let wanted = format!("socket:[{inode}]");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n != "1" && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_dir(e.path().join("fd")).ok())
        .flat_map(|fds| fds.flatten())
        .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == wanted.as_str()))
}

/// A pidfd for the thread `tid` (the caller of a request is a thread, and
/// a thread may have a descriptor table of its own): `PIDFD_THREAD`
/// (Linux 6.9); before it, the thread's process, whose table it shares
/// unless it unshared it (then its socket is not found, and its
/// connection fails).
fn pidfd_open(tid: u32) -> Result<OwnedFd, Errno> {
    const PIDFD_THREAD: libc::c_int = libc::O_EXCL;
    let open = |pid: u32, flags: libc::c_int| {
        // SAFETY: pidfd_open(2) takes a PID and flags and returns a new
        // descriptor or -1.
        #[allow(unsafe_code)]
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, flags) };
        let fd = Errno::result(fd)?;
        // SAFETY: the kernel just made `fd`, and nothing else owns it.
        #[allow(unsafe_code)]
        Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    };
    match open(tid, PIDFD_THREAD) {
        Err(Errno::EINVAL) => open(thread_group(tid)?, 0),
        other => other,
    }
}

/// The process (thread group) of the thread `tid`.
fn thread_group(tid: u32) -> Result<u32, Errno> {
    let status =
        std::fs::read_to_string(format!("/proc/{tid}/status")).map_err(|_| Errno::ESRCH)?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(Errno::ESRCH)
}

fn pidfd_getfd(pidfd: &OwnedFd, target: RawFd) -> Result<OwnedFd, Errno> {
    // SAFETY: pidfd_getfd(2) takes a pidfd, a descriptor number of that
    // process and flags, and returns a new descriptor here or -1.
    #[allow(unsafe_code)]
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target, 0) };
    let fd = Errno::result(fd)?;
    // SAFETY: the kernel just made `fd`, and nothing else owns it.
    #[allow(unsafe_code)]
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// `connect(socket, address)` with the address's bytes as they are.
fn connect_raw(socket: &OwnedFd, address: &[u8]) -> Result<(), Errno> {
    let len = libc::socklen_t::try_from(address.len()).map_err(|_| Errno::EINVAL)?;
    // SAFETY: connect(2) reads `len` bytes from `address`, which holds
    // them; the kernel copies them and never writes them.
    #[allow(unsafe_code)]
    let r = unsafe {
        libc::connect(
            socket.as_raw_fd(),
            address.as_ptr().cast::<libc::sockaddr>(),
            len,
        )
    };
    Errno::result(r).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connect_filter_is_what_the_kernel_takes() {
        let p = notify_program();
        assert_eq!(p.len(), 7);
        // Every jump lands inside the program.
        for (i, op) in p.iter().enumerate() {
            assert!(i + 1 + usize::from(op.jt.max(op.jf)) < p.len() || op.code == 0x06);
        }
        assert_eq!(p[5].k, RET_USER_NOTIF);
    }
}
