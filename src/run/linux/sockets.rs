//! The command's own Unix sockets (`unix_sockets = "own"`, the default).
//!
//! A Unix socket is reached by its path, and neither the network namespace
//! nor a read-only mount keeps a process from connecting to a socket file
//! it can see: the host's ssh-agent, D-Bus, docker.sock or tmux, those that
//! exist before the run and those made during it. Nor may the command make
//! a socket where a host program looks for one: a socket bound at tmux's
//! `/tmp/tmux-UID/default` would be a tmux server that the user's next
//! `tmux` obeys, outside the sandbox. Yet Python's `multiprocessing`, `tsx`
//! and many build tools talk to processes of their own over Unix sockets.
//! So the sandbox may create them, in one place, and every `connect()` of
//! the command goes to sbx's PID 1, which decides it:
//!
//! - the command's sockets live in one directory, its `TMPDIR`: a tmpfs
//!   of the sandbox's own at `/tmp/sbx-UID`, a mount no host path leads to
//!   (on the host the path is an empty directory) and that no other
//!   sandbox sees (each mounts its own there); Landlock lets socket files
//!   be made there and nowhere else, and nothing is renamed or linked in
//!   or out of a mount (`EXDEV`);
//! - the command's process, between its fork and its exec, enforces that
//!   Landlock ruleset and installs a seccomp filter that hands every
//!   `connect()` to a listener (`SECCOMP_RET_USER_NOTIF`), which it passes
//!   to PID 1;
//! - PID 1 copies the address out of the caller's memory once, takes a
//!   duplicate of its socket (`pidfd_getfd`), and connects that duplicate
//!   itself, with its own copy of the address: what the caller changes in
//!   its memory afterwards changes nothing;
//! - a path is resolved as the caller would (from its working directory,
//!   following symbolic links, never a `/proc` "magic" link) to a file held
//!   open while it is decided, and the connection is made to that very
//!   file (`/proc/self/fd/N`), never to the path again;
//! - that file must lie on the socket directory's mount (`mnt_id`): a
//!   socket file there can only have been bound there, by the sandbox;
//! - abstract names live in the network namespace, the sandbox's own (with
//!   `network = "allow"` it would be the host's: the policy then gives no
//!   own sockets at all);
//! - every other address family is bound and connected as asked (the
//!   network rules are the namespace's and the proxy's).
//!
//! A refusal fails with `EACCES`; sbx names it after the run if the
//! command then fails. Limits: the server sees PID 1 as its peer
//! (`SO_PEERCRED`); a process that made itself undumpable (ssh-agent,
//! gpg-agent) cannot connect, since PID 1 may not read its memory; datagram
//! sockets stay refused (`sendto` names any socket file, out of
//! `connect()`'s reach); past 1024 connections waiting at once, or with
//! PID 1 out of descriptors, `EAGAIN`; a signal does not interrupt a
//! `connect()` PID 1 has taken (the kernel waits for its answer), and a
//! connection still waiting when its caller dies holds its thread until the
//! server accepts or goes.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use nix::errno::Errno;
use nix::libc;

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

/// How many connections may wait at once, each on a thread of its own (a
/// connection that blocks, to a server whose backlog is full, must not
/// hold up the others); past it, a connection fails with `EAGAIN`, as a
/// non-blocking one to a full backlog does.
const MAX_AT_ONCE: usize = 1024;

/// The stack of each of those threads: they make a few system calls.
const THREAD_STACK: usize = 64 * 1024;

/// The filter that hands every `connect()` of this process and its
/// descendants to a listener, which goes to PID 1. Syscalls of another
/// architecture are left to the main filter, which refuses them.
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
    /// The Landlock ruleset of [`socket_ruleset`].
    ruleset: OwnedFd,
    refuse: Vec<libc::sock_filter>,
    notify: Vec<libc::sock_filter>,
    to: RawFd,
}

/// The directory of the command's own sockets, as PID 1 found it: opened
/// once, never by its path again (a process of the user's outside this
/// sandbox may rename what is at that path meanwhile), and kept open for
/// the run, which keeps its mount, and the mount's id, the sandbox's.
pub struct SocketDir {
    dir: File,
    mount: u64,
}

/// Whether PID 1 may read its callers' memory, as deciding each
/// `connect()` needs: Yama's `ptrace_scope` 2 or 3 (admin-only attach, or
/// none) forbids it even to an ancestor, and every connection, TCP ones
/// included, would then fail. The command then gets no Unix sockets of its
/// own instead.
pub fn callers_readable() -> Result<()> {
    match std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope") {
        Ok(text) => ptrace_scope_allows(&text),
        // No Yama: only the usual checks, which PID 1 passes.
        Err(_) => Ok(()),
    }
}

fn ptrace_scope_allows(text: &str) -> Result<()> {
    match text.trim().parse::<u32>() {
        Ok(scope) if scope < 2 => Ok(()),
        Ok(scope) => bail!("Yama's ptrace_scope is {scope}, so sbx's PID 1 may not read the address each connect() names"),
        Err(_) => bail!("Yama's ptrace_scope cannot be read"),
    }
}

/// Open the socket directory: it must be, right now, the root of a tmpfs
/// mount (bubblewrap's, of this sandbox), not a link nor a directory of the
/// host's swapped in before the mount was made.
pub fn open_socket_dir(path: &Path) -> Result<SocketDir> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .with_context(|| format!("opening {}", path.display()))?;
    let fs = nix::sys::statfs::fstatfs(&dir).with_context(|| format!("{}", path.display()))?;
    if fs.filesystem_type() != nix::sys::statfs::TMPFS_MAGIC {
        bail!("{} is not the sandbox's tmpfs", path.display());
    }
    let mount = mount_of(dir.as_raw_fd()).with_context(|| format!("{}", path.display()))?;
    let parent = nix::fcntl::openat(
        Some(dir.as_raw_fd()),
        "..",
        nix::fcntl::OFlag::O_PATH | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .with_context(|| format!("{}/..", path.display()))?;
    // SAFETY: openat just made `parent`, and nothing else owns it.
    #[allow(unsafe_code)]
    let parent = unsafe { OwnedFd::from_raw_fd(parent) };
    if mount_of(parent.as_raw_fd()).with_context(|| format!("{}/..", path.display()))? == mount {
        bail!("{} is not a mount of its own", path.display());
    }
    // As bytes: a mount point's path need not be UTF-8 (a masked `.env`
    // named so); the fields read here are numbers and words.
    let mounts = std::fs::read("/proc/self/mountinfo").context("/proc/self/mountinfo")?;
    if !fresh_tmpfs(&String::from_utf8_lossy(&mounts), mount) {
        bail!("{} is not a tmpfs of the sandbox's own", path.display());
    }
    Ok(SocketDir { dir, mount })
}

/// Whether the mount `id` in `mountinfo` is a tmpfs of its own: mounted
/// from its root, on a device no other mount shows. A bind of a directory
/// of the host's (of a tmpfs `/tmp`, say) fails both.
fn fresh_tmpfs(mountinfo: &str, id: u64) -> bool {
    // ID PARENT MAJOR:MINOR ROOT POINT OPTIONS [TAGS...] - TYPE SOURCE ...
    let fields = |line: &str| -> Option<(u64, String, String, String)> {
        let mut f = line.split(' ');
        let id = f.next()?.parse().ok()?;
        let device = f.nth(1)?.to_string();
        let root = f.next()?.to_string();
        let kind = line.split(" - ").nth(1)?.split(' ').next()?.to_string();
        Some((id, device, root, kind))
    };
    let all: Vec<_> = mountinfo.lines().filter_map(fields).collect();
    let Some((_, device, root, kind)) = all.iter().find(|(i, ..)| *i == id) else {
        return false;
    };
    root == "/" && kind == "tmpfs" && all.iter().filter(|(_, d, ..)| d == device).count() == 1
}

impl SocketDir {
    /// Its descriptor, to keep through the closing of inherited ones.
    pub fn raw_fd(&self) -> RawFd {
        self.dir.as_raw_fd()
    }
}

/// The command's Landlock ruleset: Unix socket files may be made (bound,
/// renamed or linked) only in the socket directory, symbolic links only
/// there and beneath `symlinks` (writable roots where no host program looks
/// for a server: a link at `/tmp/tmux-UID/default` towards
/// `/proc/PID/root/...` of a sandboxed process would lead the user's next
/// tmux to a server of the sandbox's), and files may be renamed and linked
/// across directories anywhere (Landlock refuses that to any ruleset that
/// does not grant it). Nothing else is ruled: the mounts rule the rest.
/// The kernel then keeps every socket the command binds in that directory,
/// with no window between a check and the call: `bind()` needs no decision
/// of PID 1's. Landlock ABI 2 (Linux 5.19) at least, or none.
pub fn socket_ruleset(dir: &SocketDir, symlinks: &[PathBuf]) -> Result<OwnedFd> {
    use landlock::{
        AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr,
    };
    let opened = |p: &Path| PathFd::new(p).with_context(|| format!("opening {}", p.display()));
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::MakeSock | AccessFs::MakeSym | AccessFs::Refer)?
        .create()?
        .add_rule(PathBeneath::new(opened(Path::new("/"))?, AccessFs::Refer))?
        .add_rule(PathBeneath::new(
            dir.dir.as_fd(),
            AccessFs::MakeSock | AccessFs::MakeSym,
        ))?;
    for root in symlinks {
        // A writable root that is a file, or is gone: no links beneath it.
        if root.is_dir() {
            ruleset = ruleset.add_rule(PathBeneath::new(opened(root)?, AccessFs::MakeSym))?;
        }
    }
    Option::<OwnedFd>::from(ruleset).context("Landlock is not enabled in this kernel")
}

impl CommandFilters {
    /// `ruleset` from [`socket_ruleset`]; `to` the command's end of the
    /// socket pair to PID 1.
    pub fn new(ruleset: OwnedFd, to: RawFd) -> Result<CommandFilters> {
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
            ruleset,
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

    /// In the child: enforce the Landlock ruleset, install both filters and
    /// send the listener.
    fn install_and_send(&self) -> io::Result<()> {
        // SAFETY: landlock_restrict_self(2) takes a ruleset descriptor and
        // flags; it reads nothing from memory.
        #[allow(unsafe_code)]
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.ruleset.as_raw_fd(),
                0,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
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
    /// The socket directory, held open for the run.
    dir: SocketDir,
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
            "the command was refused a Unix socket outside its own directory ({refused}); it may make and reach sockets only in $TMPDIR. --unix-sockets allow opens the host's too (ssh-agent, D-Bus, docker.sock, tmux: each a way out)"
        ))
    }
}

/// Decide every call the listener hands over, on threads of this process
/// (PID 1), until no process is left under the filter. `dir` is where the
/// command's sockets go.
pub fn supervise(listener: OwnedFd, dir: SocketDir) -> Result<Supervisor> {
    let shared = Arc::new(Shared {
        listener,
        dir,
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
        // Never decided on this thread: one connection that blocks would
        // hold up every other.
        if shared.at_once.fetch_add(1, Ordering::SeqCst) < MAX_AT_ONCE {
            let worker = shared.clone();
            let spawned = std::thread::Builder::new()
                .name("sbx-connect".into())
                .stack_size(THREAD_STACK)
                .spawn(move || {
                    answer(&worker, &request);
                    worker.at_once.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_ok() {
                continue;
            }
        }
        shared.at_once.fetch_sub(1, Ordering::SeqCst);
        respond(shared.listener.as_fd(), request.id, Errno::EAGAIN as i32);
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
        // PID 1 out of descriptors: a busy moment, not a refusal.
        Err(Errno::EMFILE | Errno::ENFILE) => Errno::EAGAIN as i32,
        Err(e) => e as i32,
    };
    respond(shared.listener.as_fd(), request.id, errno);
}

/// Answer the request `id`: 0, or the call fails with `errno`.
fn respond(listener: BorrowedFd, id: u64, errno: i32) {
    let mut response = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: -errno,
        flags: 0,
    };
    // SAFETY: the ioctl reads one `seccomp_notif_resp` from `response`.
    // Its failure (the caller is gone) leaves nothing to do.
    #[allow(unsafe_code)]
    let _ = unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
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
    // A process whose memory PID 1 may not read (one that made itself
    // undumpable, as ssh-agent does) is refused: nothing else can be
    // known of what it asks.
    File::open(format!("/proc/{pid}/mem"))
        .and_then(|mem| mem.read_exact_at(&mut address, addr))
        .map_err(|e| errno_or(&e, Errno::EACCES))?;
    let family = u16::from_ne_bytes([address[0], address[1]]);
    let path = &address[2..];
    // Another family, no address, or an abstract name (in the sandbox's own
    // network namespace): as asked.
    let named = i32::from(family) == libc::AF_UNIX && !path.is_empty() && path[0] != 0;
    let path = path.split(|&b| b == 0).next().unwrap_or_default();
    let pidfd = pidfd_open(pid)?;
    // A relative path is the caller's, from its working directory.
    let cwd = match named && !path.starts_with(b"/") {
        true => {
            Some(File::open(format!("/proc/{pid}/cwd")).map_err(|e| errno_or(&e, Errno::EACCES))?)
        }
        false => None,
    };
    // The PID named the caller when the request was read; with the
    // request still waiting, it still does, and so did it when its memory,
    // its pidfd and its working directory were opened above.
    if !still_waiting(shared.listener.as_fd(), request.id) {
        return Err(Errno::ESRCH);
    }
    let socket = pidfd_getfd(&pidfd, fd as u32 as RawFd)?;
    if !named {
        return connect_raw(&socket, &address);
    }
    let file = resolve(cwd.as_ref(), path)?;
    if mount_of(file.as_raw_fd()).map_err(|e| errno_or(&e, Errno::EACCES))? != shared.dir.mount {
        return Err(refuse(shared, &String::from_utf8_lossy(path)));
    }
    let mut rewritten = address[..2].to_vec();
    rewritten.extend_from_slice(format!("/proc/self/fd/{}", file.as_raw_fd()).as_bytes());
    rewritten.push(0);
    connect_raw(&socket, &rewritten)
}

/// PID 1's own lack of descriptors as it is; any other failure as
/// `otherwise`.
fn errno_or(e: &io::Error, otherwise: Errno) -> Errno {
    match e.raw_os_error() {
        Some(n @ (libc::EMFILE | libc::ENFILE)) => Errno::from_raw(n),
        _ => otherwise,
    }
}

/// Note a refused socket (the first one, for the hint); `EACCES`.
fn refuse(shared: &Shared, shown: &str) -> Errno {
    if let Ok(mut first) = shared.refused.lock() {
        first.get_or_insert_with(|| crate::banner::sanitize(shown));
    }
    Errno::EACCES
}

/// Open `path` (a socket's path, as the caller gave it) as the caller
/// would reach it: from its working directory `cwd` if relative, following
/// symbolic links, never a magic link of `/proc` (which would resolve to
/// PID 1's own descriptors and directories, not the caller's).
fn resolve(cwd: Option<&File>, path: &[u8]) -> Result<OwnedFd, Errno> {
    use nix::fcntl::{openat2, OFlag, OpenHow, ResolveFlag};
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::OsStr::from_bytes(path);
    let how = OpenHow::new()
        .flags(OFlag::O_PATH | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_NO_MAGICLINKS);
    // An absolute path ignores the directory.
    let from = cwd.map_or(libc::AT_FDCWD, AsRawFd::as_raw_fd);
    let fd = openat2(from, path, how);
    match fd {
        // SAFETY: openat2 just made `fd`, and nothing else owns it.
        #[allow(unsafe_code)]
        Ok(fd) => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
        // A magic link is refused, not followed.
        Err(Errno::ELOOP | Errno::EXDEV) => Err(Errno::EACCES),
        Err(e) => Err(e),
    }
}

/// The mount a descriptor's file is on (`mnt_id` in `/proc/self/fdinfo`).
fn mount_of(fd: RawFd) -> io::Result<u64> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{fd}"))?;
    info.lines()
        .find_map(|l| l.strip_prefix("mnt_id:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "no mnt_id in fdinfo"))
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
    fn yama_ptrace_scope_two_or_more_means_no_own_sockets() {
        assert!(ptrace_scope_allows("0\n").is_ok());
        assert!(ptrace_scope_allows("1\n").is_ok());
        assert!(ptrace_scope_allows("2\n").is_err());
        assert!(ptrace_scope_allows("3").is_err());
        assert!(ptrace_scope_allows("x").is_err());
    }

    /// A fresh tmpfs is told from a bind of a host directory that lies on
    /// a tmpfs (what a process outside the sandbox could swap in at the
    /// directory's path when the host's /tmp is a tmpfs), and from a tmpfs
    /// seen at two mounts.
    #[test]
    fn only_a_fresh_tmpfs_is_taken() {
        let info = "\
22 1 0:21 / /tmp rw,relatime shared:1 - tmpfs tmpfs rw
30 22 0:21 /proj /tmp/proj rw,relatime - tmpfs tmpfs rw
31 22 0:40 / /tmp/sbx-0 rw,nosuid,nodev - tmpfs tmpfs rw
32 22 0:41 / /tmp/bound rw - tmpfs tmpfs rw
33 22 0:41 / /tmp/again rw - tmpfs tmpfs rw
34 22 8:1 / /tmp/disk rw - ext4 /dev/sda1 rw
";
        assert!(fresh_tmpfs(info, 31));
        assert!(!fresh_tmpfs(info, 30));
        assert!(!fresh_tmpfs(info, 32));
        assert!(!fresh_tmpfs(info, 34));
        assert!(!fresh_tmpfs(info, 99));
    }

    /// Only the root of a tmpfs mount is taken for the socket directory: a
    /// plain directory, a directory inside a tmpfs, or a link there (what a
    /// process outside the sandbox could swap in at its path) are refused.
    #[test]
    fn the_socket_directory_is_a_tmpfs_mount_of_its_own() {
        let plain = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        assert!(open_socket_dir(plain.path()).is_err());
        let shm = Path::new("/dev/shm");
        let is_tmpfs = nix::sys::statfs::statfs(shm)
            .is_ok_and(|f| f.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC);
        if is_tmpfs {
            // Mounted once, as here (a container may show it twice).
            let once = File::open(shm).is_ok_and(|f| {
                let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
                fresh_tmpfs(&info, mount_of(f.as_raw_fd()).unwrap())
            });
            assert_eq!(open_socket_dir(shm).is_ok(), once);
            let inside = tempfile::tempdir_in(shm).unwrap();
            assert!(open_socket_dir(inside.path()).is_err());
            let link = plain.path().join("link");
            std::os::unix::fs::symlink(shm, &link).unwrap();
            assert!(open_socket_dir(&link).is_err());
        }
    }

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
