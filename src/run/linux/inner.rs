//! The second stage on Linux: `sbx __inner`, run by bubblewrap as PID 1 of the
//! sandbox.
//!
//! bubblewrap builds the filesystem view and the namespaces; this stage makes
//! sure nothing is left that the command could use to step outside them:
//!
//! 0. with private git config copies, it first pins directories, mounts a
//!    link to each copy over its config, masks files, moves to a user
//!    namespace of its own in which it is the host user with no capability
//!    (`copies.rs`; bubblewrap started it as uid 0 with the two
//!    capabilities that takes), and enters the working directory again by
//!    its path: bubblewrap entered it before these mounts;
//! 1. it checks that no capability survived (`--cap-drop ALL`), bounding set
//!    included, and refuses to run the command otherwise;
//! 2. it sets `PR_SET_NO_NEW_PRIVS` (no setuid gains) and `PR_SET_DUMPABLE=0`
//!    (the command cannot ptrace it or write its `/proc/1/mem`);
//! 3. it closes every inherited descriptor above 2, so a socket or file that
//!    the caller left open cannot cross the sandbox boundary;
//! 4. it installs the seccomp filter on itself, tells the outer stage that
//!    the sandbox is up, and forks the command, which inherits the filter:
//!    no process in the sandbox is ever without it;
//! 5. it stays as PID 1: reaps orphans, forwards signals sent to it, and exits
//!    with the command's status (128+N for signal N). When it exits the kernel
//!    kills everything left in the sandbox.
//!
//! bubblewrap's own init is not used (`--as-pid-1`): it carries no seccomp
//! filter and stays ptrace-able by the sandboxed command.

use std::convert::Infallible;
use std::ffi::OsString;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};
use nix::unistd::Pid;

use super::seccomp::{self, Unix};
use super::sockets;

/// Run the second stage. Returns only on failure; on success the process exits
/// with the command's status.
///
/// `ready_fd`, when given, is a pipe to the outer stage. One byte is written
/// to it once every check has passed, so the outer stage can tell "the sandbox
/// could not start" (it may then diagnose, refuse or fall back) from "the
/// command ran and failed" (never a reason to run anything again). The pipe
/// then stays open as a lifeline: when the outer sbx is gone (killed, even in
/// the first milliseconds, before bubblewrap's `--die-with-parent` holds),
/// the write fails or the pipe reports an error, and the sandbox ends.
///
/// With `proxy_socket` (allowlist mode), PID 1 listens on 127.0.0.1:3128 in
/// the sandbox's own network namespace and relays each connection to the
/// proxy's Unix socket. PID 1 keeps Unix sockets for that; with Unix
/// sockets denied the command does not: it starts through `sbx __filter`,
/// which adds the Unix-socket rule.
///
/// With the command's own Unix sockets (`opts.unix` is `Own`), the command
/// may make sockets only in the socket directory, and symbolic links only
/// there and beneath the directories listed with it (Landlock); its
/// `connect()` calls go to PID 1, which decides each (`sockets.rs`). Where
/// that cannot be done, the command gets no Unix socket at all, and is
/// told.
#[allow(clippy::too_many_arguments)]
pub fn run(
    command: &[OsString],
    opts: seccomp::Options,
    sockets: Option<(&Path, &[std::path::PathBuf])>,
    ready_fd: Option<i32>,
    proxy_socket: Option<&Path>,
    limits: &[String],
    network_hint: Option<&str>,
    copies: Option<super::copies::Setup>,
) -> Result<Infallible> {
    // Made before anything else, so that without it the command's sockets
    // fall back to none, PID 1's filter included.
    let ruleset = match (opts.unix, sockets) {
        (Unix::Own, Some((path, symlinks))) => own_sockets(path, symlinks),
        _ => None,
    };
    let asked = match (opts.unix, &ruleset) {
        (Unix::Own, None) => Unix::Deny,
        (unix, _) => unix,
    };
    let opts = seccomp::Options {
        unix: match (asked, proxy_socket) {
            (Unix::Deny, Some(_)) => Unix::Allow,
            (unix, _) => unix,
        },
        ..opts
    };
    if let Some(setup) = copies {
        set_up_copies(&setup, ready_fd)?;
    }
    check_no_capabilities()?;
    nix::sys::prctl::set_no_new_privs().context("setting PR_SET_NO_NEW_PRIVS")?;
    nix::sys::prctl::set_dumpable(false).context("setting PR_SET_DUMPABLE")?;
    let Some((program, args)) = command.split_first() else {
        bail!("no command given to the inner stage");
    };
    // The filter is installed here, in PID 1, and inherited by the command:
    // no process in the sandbox is ever without it.
    seccomp::apply(&seccomp::programs(opts)?)?;
    // The relay is up before the sandbox is reported ready, and after the
    // inherited descriptors are gone (its listener is one of ours).
    let lifeline_fd = ready_fd.and_then(|fd| {
        let path = format!("/proc/self/fd/{fd}");
        std::fs::metadata(&path)
            .is_ok_and(|m| m.file_type().is_fifo())
            .then_some(fd)
    });
    let stage = close_and_stage(asked, proxy_socket, ruleset, lifeline_fd)?;
    let lifeline = match lifeline_fd {
        Some(fd) => report_ready(fd)?,
        None => None,
    };

    // The command starts with the signal mask sbx was started with (std
    // resets SIGPIPE, not the mask), so signals are routed only after the
    // spawn. The filter and no_new_privs are inherited.
    let mut cmd = stage.command(program)?;
    // Limits last: inherited by the command, not in the way of the setup.
    crate::limits::apply(limits)?;
    let child = match cmd.args(args).spawn() {
        Ok(child) => child,
        Err(e) => std::process::exit(i32::from(super::spawn_failure(program, &e))),
    };
    let pid = Pid::from_raw(child.id() as i32);
    let supervisor = stage.supervise()?;
    let (signals, _mask) = super::signals::route_signals(true)?;
    let code =
        super::signals::wait_forwarding(pid, &signals, true, lifeline.as_ref().map(|f| f.as_fd()))?;
    say_why(code, limits, network_hint, supervisor.as_ref());
    std::process::exit(code)
}

/// Close every inherited descriptor but the lifeline and sbx's own (the
/// socket ruleset and directory, opened above), start the proxy relay, and
/// say how the command starts.
fn close_and_stage(
    asked: Unix,
    proxy_socket: Option<&Path>,
    ruleset: Option<(OwnedFd, sockets::SocketDir)>,
    lifeline_fd: Option<i32>,
) -> Result<Stage> {
    let keep: Vec<i32> = lifeline_fd
        .into_iter()
        .chain(
            ruleset
                .iter()
                .flat_map(|(r, d)| [r.as_raw_fd(), d.raw_fd()]),
        )
        .collect();
    close_inherited_fds(&keep)?;
    if let Some(socket) = proxy_socket {
        start_relay(socket)?;
    }
    Ok(match (asked, proxy_socket) {
        (Unix::Own, _) => match ruleset {
            Some((ruleset, dir)) => Stage::OwnSockets(ruleset, dir, socket_pair()?),
            None => Stage::Direct,
        },
        (Unix::Deny, Some(_)) => Stage::NoUnixSockets,
        _ => Stage::Direct,
    })
}

/// The socket directory and the command's Landlock ruleset for its own
/// sockets; `None`, said, where they cannot be had (the command then gets
/// no Unix socket).
fn own_sockets(
    path: &Path,
    symlinks: &[std::path::PathBuf],
) -> Option<(OwnedFd, sockets::SocketDir)> {
    if let Err(e) = sockets::callers_readable() {
        eprintln!("sbx: the command's own Unix sockets are refused in this run: {e:#}");
        return None;
    }
    let made = sockets::open_socket_dir(path).and_then(|dir| {
        let ruleset = sockets::socket_ruleset(&dir, symlinks)?;
        Ok((ruleset, dir))
    });
    made.map_err(|e| {
        eprintln!(
            "sbx: the command's own Unix sockets are refused in this run: they cannot be kept in {} ({e:#})",
            path.display()
        );
    })
    .ok()
}

/// How the command is started.
enum Stage {
    /// As it is.
    Direct,
    /// Through `sbx __filter`, which adds the Unix-socket rule.
    NoUnixSockets,
    /// With the socket ruleset enforced and the connect filter installed
    /// between its fork and its exec: the ruleset, the socket directory,
    /// and the socket pair over which the filter's listener comes (PID 1's
    /// end, the command's).
    OwnSockets(OwnedFd, sockets::SocketDir, (OwnedFd, OwnedFd)),
}

impl Stage {
    /// The command as it is started: `program` itself (with the connect
    /// filter installed between its fork and its exec, for own sockets),
    /// or through `sbx __filter`.
    fn command(&self, program: &OsString) -> Result<Command> {
        Ok(match self {
            Stage::Direct => Command::new(program),
            Stage::OwnSockets(ruleset, _, (_, theirs)) => {
                let mut cmd = Command::new(program);
                let ruleset = ruleset.try_clone().context("the socket ruleset")?;
                sockets::CommandFilters::new(ruleset, theirs.as_raw_fd())?.install_in(&mut cmd);
                cmd
            }
            Stage::NoUnixSockets => {
                let sbx = std::env::current_exe().context("finding sbx inside the sandbox")?;
                let mut cmd = Command::new(sbx);
                cmd.arg("__filter").arg("--").arg(program);
                cmd
            }
        })
    }

    /// Once the command is spawned: for own sockets, the supervisor that
    /// decides its connections.
    fn supervise(self) -> Result<Option<sockets::Supervisor>> {
        let Stage::OwnSockets(ruleset, dir, (ours, theirs)) = self else {
            return Ok(None);
        };
        drop((ruleset, theirs));
        // Sent before the command's exec, which succeeded: there.
        match sockets::receive_listener(&ours)? {
            Some(listener) => Ok(Some(sockets::supervise(listener, dir)?)),
            None => bail!("the command started without its connect filter's listener"),
        }
    }
}

/// The socket pair over which the command's process sends PID 1 the
/// listener of its connect filter before its exec: PID 1's end, then its
/// own (both close on exec: the command keeps neither).
fn socket_pair() -> Result<(OwnedFd, OwnedFd)> {
    use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
    socketpair(
        AddressFamily::Unix,
        SockType::Stream,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .context("making the socket pair for the connect filter")
}

/// Pin directories, mount the private config copies, mask files, leave
/// the setup namespace and enter the working directory again. Started as
/// uid 0 with capabilities for this alone (see copies.rs): nothing else
/// runs until they are gone. On failure the outer stage is told, and
/// starts the sandbox again without them (bubblewrap then pins and masks,
/// and enters the working directory last).
fn set_up_copies(setup: &super::copies::Setup, ready_fd: Option<i32>) -> Result<()> {
    let set_up = super::copies::pin(setup.pins)
        .and_then(|()| super::copies::pin_links(setup.links))
        .and_then(|()| super::copies::mount_links(setup.dir, setup.configs))
        .and_then(|()| setup.masks.as_ref().map_or(Ok(()), super::copies::mask))
        .and_then(|()| super::copies::become_the_user())
        .and_then(|()| super::copies::reenter_working_directory());
    if let Err(e) = set_up {
        // A file to mask that moved away meanwhile: the plan without the
        // copies would bind over what is at its path now, or make a file
        // there, while the file itself lies elsewhere.
        let byte = match e.downcast_ref::<super::copies::Moved>() {
            Some(_) => super::bwrap::REFUSED,
            None => super::bwrap::NO_COPIES,
        };
        report_set_up_failure(ready_fd, byte, &e);
        return Err(e);
    }
    Ok(())
}

/// After the command, say what sbx knows of why it ended as it did: a
/// limit that stopped it, the network it tried when it failed, a Unix
/// socket of the host it was refused.
fn say_why(
    code: i32,
    limits: &[String],
    network_hint: Option<&str>,
    sockets: Option<&sockets::Supervisor>,
) {
    if let Some(said) =
        super::signals::killed_by().and_then(|sig| crate::limits::stopped_by(sig, limits))
    {
        eprintln!("sbx: {said}");
    }
    if code != 0 {
        if let Some(said) = network_hint.and_then(|mode| network_tried(mode, net_counters())) {
            eprintln!("sbx: {said}");
        }
        if let Some(said) = sockets.and_then(sockets::Supervisor::hint) {
            eprintln!("sbx: {said}");
        }
    }
}

/// Listen on the proxy port inside the sandbox and relay every connection to
/// the proxy's Unix socket, each on its own threads.
///
/// The socket is reached through a descriptor of its directory, opened now,
/// before the command starts, and never again by path: the directory is a
/// read-only mount, but the directories above it may lie in a writable
/// root, and a command that renamed them and put a link to another host
/// socket at the old path would otherwise have PID 1 (the one process here
/// allowed Unix sockets) connect to it.
fn start_relay(socket: &Path) -> Result<()> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let port = crate::backend::bwrap::RELAY_PORT;
    let listener = TcpListener::bind(("127.0.0.1", port))
        .with_context(|| format!("listening on 127.0.0.1:{port} inside the sandbox"))?;
    let (Some(dir), Some(name)) = (socket.parent(), socket.file_name()) else {
        bail!("{}: not a socket path", socket.display());
    };
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_PATH | nix::libc::O_DIRECTORY | nix::libc::O_NOFOLLOW)
        .open(dir)
        .with_context(|| format!("opening the proxy directory {}", dir.display()))?;
    let socket = Path::new("/proc/self/fd")
        .join(dir.as_raw_fd().to_string())
        .join(name);
    // Signals are for PID 1's signalfd (see signals.rs); the relay
    // threads inherit the blocked mask.
    crate::supervise::spawn_without_signals(move || {
        // The directory stays open (close-on-exec) as long as the relay.
        let _dir = dir;
        let live = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        for conn in listener.incoming() {
            let Ok(tcp) = conn else { continue };
            // As many as the proxy serves: more would only hold descriptors
            // (PID 1's own) for connections the proxy turns away.
            if live.load(std::sync::atomic::Ordering::SeqCst) >= crate::proxy::MAX_CONNECTIONS {
                drop(tcp);
                continue;
            }
            live.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let socket = socket.clone();
            let done = live.clone();
            // A thread that cannot be made drops the connection (never a
            // panic: this is PID 1).
            let made = std::thread::Builder::new().spawn(move || {
                relay(tcp, &socket);
                done.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            });
            if made.is_err() {
                live.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            }
        }
    })
    .context("starting the proxy relay")?;
    Ok(())
}

/// Copy bytes both ways between a client and the proxy until both are done.
fn relay(tcp: TcpStream, socket: &Path) {
    let Ok(unix) = UnixStream::connect(socket) else {
        return;
    };
    let (Ok(mut tcp_in), Ok(mut unix_out)) = (tcp.try_clone(), unix.try_clone()) else {
        return;
    };
    let upstream = std::thread::spawn(move || {
        let _ = std::io::copy(&mut tcp_in, &mut unix_out);
        let _ = unix_out.shutdown(std::net::Shutdown::Write);
    });
    let (mut unix_in, mut tcp_out) = (&unix, &tcp);
    let _ = std::io::copy(&mut unix_in, &mut tcp_out);
    let _ = tcp.shutdown(std::net::Shutdown::Write);
    let _ = upstream.join();
}

/// Tell the outer stage the sandbox is up, and keep the pipe as a lifeline.
/// `None` when there is no such pipe (a pasted `sbx profile` command line);
/// exits when the outer stage is already gone.
fn report_ready(fd: i32) -> Result<Option<std::fs::File>> {
    // Reopening the pipe through /proc avoids adopting a raw descriptor; the
    // new one is close-on-exec, so the command never holds it.
    let path = format!("/proc/self/fd/{fd}");
    let is_pipe = std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_fifo());
    if !is_pipe {
        return Ok(None);
    }
    let mut pipe = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .context("opening the ready pipe")?;
    // The inherited descriptor itself would pass to the command.
    nix::unistd::close(fd).context("closing the inherited ready descriptor")?;
    if pipe.write_all(&[super::bwrap::READY]).is_err() {
        // Nobody reads: the outer sbx is gone, and so must the sandbox be.
        std::process::exit(125);
    }
    Ok(Some(pipe))
}

/// The sandbox's network namespace counters that grow when a program
/// tries to reach anything but loopback (`OutNoRoutes`: only `lo` is
/// here) or a port nobody listens on over UDP (a DNS query to a resolver
/// on loopback, as systemd-resolved's `127.0.0.53`): their sum.
fn net_counters() -> u64 {
    let v4 = std::fs::read_to_string("/proc/self/net/snmp").unwrap_or_default();
    let v6 = std::fs::read_to_string("/proc/self/net/snmp6").unwrap_or_default();
    counters_in(&v4, &v6)
}

/// [`net_counters`] from the text of `/proc/net/snmp` and `snmp6`.
fn counters_in(v4: &str, v6: &str) -> u64 {
    let field = |text: &str, table: &str, name: &str| -> u64 {
        let mut lines = text.lines().filter(|l| l.starts_with(table));
        let (Some(head), Some(values)) = (lines.next(), lines.next()) else {
            return 0;
        };
        head.split_whitespace()
            .zip(values.split_whitespace())
            .find(|(h, _)| *h == name)
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0)
    };
    let v6_field = |name: &str| -> u64 {
        v6.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    field(v4, "Ip:", "OutNoRoutes")
        + field(v4, "Udp:", "NoPorts")
        + v6_field("Ip6OutNoRoutes")
        + v6_field("Udp6NoPorts")
}

/// What to say about a failed command that tried the network (`tried`:
/// [`net_counters`] at its end), in the sandbox's network `mode`.
fn network_tried(mode: &str, tried: u64) -> Option<String> {
    if tried == 0 {
        return None;
    }
    Some(match mode {
        "allowlist" => "the network is reachable here only through the allowlist proxy (HTTPS_PROXY/HTTP_PROXY, set inside), and the command tried it directly: a program that ignores those variables cannot connect (the user, not the command, can add a host: --allow-domain HOST)".into(),
        _ => "the network is denied in this sandbox, and the command tried to use it (the user, not the command, can open it: --network allow, or --allow-domain HOST for one host)".into(),
    })
}

/// The set-up failed: tell the outer stage (with `byte`: [`NO_COPIES`],
/// it starts the sandbox again without the copies; [`REFUSED`], it gives
/// up) and exit before anything runs. Returns only when there is no ready
/// pipe to tell.
///
/// [`NO_COPIES`]: super::bwrap::NO_COPIES
/// [`REFUSED`]: super::bwrap::REFUSED
fn report_set_up_failure(ready_fd: Option<i32>, byte: u8, why: &anyhow::Error) {
    let Some(fd) = ready_fd else { return };
    let path = format!("/proc/self/fd/{fd}");
    if !std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_fifo()) {
        return;
    }
    // One write (the reason is short): the outer stage reads it whole.
    let mut text = vec![byte];
    let reason = format!("{why:#}");
    text.extend_from_slice(reason.as_bytes().get(..400).unwrap_or(reason.as_bytes()));
    text.push(b'\n');
    if let Ok(mut pipe) = std::fs::OpenOptions::new().write(true).open(&path) {
        let _ = pipe.write_all(&text);
    }
    std::process::exit(125);
}

/// Refuse to go on if any capability survived bubblewrap's `--cap-drop ALL`
/// (or, with private config copies, [`super::copies::become_the_user`]),
/// bounding set included: a command running as root would get those back.
fn check_no_capabilities() -> Result<()> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    for line in status.lines() {
        for field in ["CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:"] {
            if let Some(value) = line.strip_prefix(field) {
                let value = u64::from_str_radix(value.trim(), 16)
                    .with_context(|| format!("parsing {field} in /proc/self/status"))?;
                if value != 0 {
                    bail!(
                        "the sandbox still holds capabilities ({field} {value:#x}); the command was not run (is the bubblewrap in use patched or too old?)"
                    );
                }
            }
        }
    }
    Ok(())
}

/// Close every descriptor above 2 except `keep`.
pub(super) fn close_inherited_fds(keep: &[i32]) -> Result<()> {
    let fds = crate::supervise::descriptors_above_stderr().context("listing /proc/self/fd")?;
    for fd in fds.into_iter().filter(|fd| !keep.contains(fd)) {
        match nix::unistd::close(fd) {
            Ok(()) | Err(nix::errno::Errno::EBADF) => {}
            Err(e) => return Err(e).with_context(|| format!("closing inherited descriptor {fd}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attempts_are_read_from_the_namespaces_counters() {
        let v4 = "Ip: Forwarding DefaultTTL OutRequests OutNoRoutes\nIp: 2 64 9 3\n\
                  Udp: InDatagrams NoPorts InErrors\nUdp: 0 2 0\n";
        let v6 = "Ip6InReceives                   \t0\nIp6OutNoRoutes                  \t1\nUdp6NoPorts                     \t0\n";
        assert_eq!(counters_in(v4, v6), 6);
        assert_eq!(counters_in("", ""), 0);
        assert_eq!(network_tried("deny", 0), None);
        assert!(network_tried("deny", 1)
            .unwrap()
            .contains("--network allow"));
        assert!(network_tried("allowlist", 1)
            .unwrap()
            .contains("--allow-domain"));
    }
}
