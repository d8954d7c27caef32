//! The seccomp filter the sandboxed command applies to itself before `exec`.
//!
//! Mount namespaces and bind mounts decide what the command can see; this filter
//! closes the kernel interfaces that would let it step around them: new
//! namespaces (and so `mount` in a namespace of its own), the mount API,
//! `ptrace` and `process_vm_*` of other sandboxed processes, keyrings, BPF,
//! `io_uring` (which performs syscalls the filter never sees), terminal
//! injection with `TIOCSTI`/`TIOCLINUX`, Unix sockets (host daemons such as
//! docker, D-Bus, ssh-agent or tmux listen on them, and an empty network
//! namespace does not hide filesystem sockets) and AF_VSOCK. Every refusal is
//! `EPERM` (`ENOSYS` for `clone3`, so libc falls back to `clone`, whose flags
//! can be inspected). Syscalls of another ABI (x32, or a foreign architecture)
//! are refused outright, so no alias of a blocked syscall slips through.

mod fast_path;

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use nix::libc;
use seccompiler::{
    sock_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch,
};

/// What the filter leaves open.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// What becomes of Unix sockets.
    pub unix: Unix,
    /// What the filter does about the network.
    pub network: NetFilter,
}

/// Unix sockets as the filter sees them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Unix {
    /// AF_UNIX `socket()` is refused.
    #[default]
    Deny,
    /// Stream and seqpacket sockets only (a datagram socket can `sendto`
    /// any socket file, out of `connect()`'s reach), and `pidfd_getfd` is
    /// left to PID 1, which needs it to connect for the command
    /// (`sockets.rs`); the command's own filter refuses it again
    /// ([`command_program`]).
    Own,
    /// `unix_sockets = "allow"`: nothing refused.
    Allow,
}

/// The network as the filter sees it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum NetFilter {
    /// Left to the network namespace (full mode): no rule here.
    #[default]
    Namespace,
    /// Reduced mode, network denied: no socket of any family but AF_UNIX
    /// (its own rule) and AF_NETLINK (the kernel's own information; changing
    /// anything through it takes a capability the command does not have).
    Deny,
    /// Reduced mode, allowlist: TCP only (Landlock then lets it connect to
    /// the proxy's port alone). No UDP, raw, SCTP or MPTCP socket, and no
    /// TCP Fast Open `sendto`, which connects without `connect()` and so
    /// without Landlock's check.
    TcpOnly,
}

const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
    0x80, // CLONE_NEWTIME
];

#[cfg(target_arch = "x86_64")]
const ARCH: TargetArch = TargetArch::x86_64;
#[cfg(target_arch = "aarch64")]
const ARCH: TargetArch = TargetArch::aarch64;
#[cfg(target_arch = "riscv64")]
const ARCH: TargetArch = TargetArch::riscv64;

fn cond(arg: u8, len: SeccompCmpArgLen, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition> {
    SeccompCondition::new(arg, len, op, value).context("building a seccomp condition")
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule> {
    SeccompRule::new(conditions).context("building a seccomp rule")
}

/// The rules answered with `EPERM`.
fn eperm_rules(opts: Options) -> Result<BTreeMap<i64, Vec<SeccompRule>>> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for &nr in REFUSED {
        if !(nr == libc::SYS_pidfd_getfd && opts.unix == Unix::Own) {
            rules.insert(nr, vec![]);
        }
    }
    for nr in [libc::SYS_unshare, libc::SYS_clone] {
        rules.insert(nr, namespace_rules()?);
    }
    rules.insert(libc::SYS_ioctl, ioctl_rules()?);
    if opts.network != NetFilter::Namespace {
        // Reduced mode: no namespaces at all.
        for &nr in SYSV_IPC {
            rules.insert(nr, vec![]);
        }
    }
    if opts.network == NetFilter::TcpOnly && opts.unix == Unix::Deny {
        // A TCP socket that listens without bind() is bound by the kernel
        // to a port of every address, out of Landlock's sight: the only
        // sockets here are TCP ones, and none may accept connections.
        rules.insert(libc::SYS_listen, vec![]);
    }
    let mut socket = socket_rules(opts)?;
    socket.extend(network_socket_rules(opts.network)?);
    rules.insert(libc::SYS_socket, socket);
    rules.insert(libc::SYS_socketpair, socketpair_rules()?);
    if opts.network == NetFilter::TcpOnly {
        // MSG_FASTOPEN's position: sendto's flags are argument 3,
        // sendmsg's 2, sendmmsg's 3.
        for (nr, arg) in [
            (libc::SYS_sendto, 3),
            (libc::SYS_sendmsg, 2),
            (libc::SYS_sendmmsg, 3),
        ] {
            let fastopen = libc::MSG_FASTOPEN as u64;
            rules.insert(
                nr,
                vec![rule(vec![cond(
                    arg,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::MaskedEq(fastopen),
                    fastopen,
                )?])?],
            );
        }
    }
    Ok(rules)
}

/// Unconditionally refused.
const REFUSED: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_setns,
    libc::SYS_perf_event_open,
    libc::SYS_bpf,
    libc::SYS_userfaultfd,
    libc::SYS_pidfd_getfd,
    // Each needs a capability the command never has; refused all the same,
    // so that no mistake in dropping them reaches the kernel's modules,
    // the machine's power or its swap.
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
];

/// System V IPC: in full mode the sandbox has an IPC namespace of its own;
/// reduced mode has none, so the host's shared memory, queues and
/// semaphores would be reachable (and removable) by the command.
const SYSV_IPC: &[i64] = &[
    libc::SYS_shmget,
    libc::SYS_shmat,
    libc::SYS_shmdt,
    libc::SYS_shmctl,
    libc::SYS_msgget,
    libc::SYS_msgsnd,
    libc::SYS_msgrcv,
    libc::SYS_msgctl,
    libc::SYS_semget,
    libc::SYS_semop,
    libc::SYS_semtimedop,
    libc::SYS_semctl,
];

/// The rules of `unshare` and `clone`.
fn namespace_rules() -> Result<Vec<SeccompRule>> {
    // Namespaces: `unshare` and `clone` with any namespace flag.
    // clone's flags are argument 0 on every supported architecture.
    NAMESPACE_FLAGS
        .iter()
        .map(|&flag| {
            rule(vec![cond(
                0,
                SeccompCmpArgLen::Qword,
                SeccompCmpOp::MaskedEq(flag),
                flag,
            )?])
        })
        .collect()
}

/// The rules of `ioctl`.
fn ioctl_rules() -> Result<Vec<SeccompRule>> {
    use SeccompCmpArgLen::Dword;
    // Terminal injection. The request is compared on its low 32 bits only, as
    // the kernel does, so `TIOCSTI | 1 << 32` cannot slip past (CVE-2019-10063).
    Ok(vec![
        // The numbers, not libc's constants: their type differs between
        // glibc and musl, the number does not.
        rule(vec![cond(1, Dword, SeccompCmpOp::Eq, 0x5412)?])?, // TIOCSTI
        rule(vec![cond(1, Dword, SeccompCmpOp::Eq, 0x541C)?])?, // TIOCLINUX
    ])
}

/// The rules of `socket`.
fn socket_rules(opts: Options) -> Result<Vec<SeccompRule>> {
    // Sockets: AF_VSOCK always, AF_UNIX unless allowed. Datagram socketpairs
    // are refused too: an unbound datagram socket can `sendto` any named
    // socket. Stream socketpairs stay (cargo, Python and Node use them).
    let mut socket_rules = vec![socket_family(libc::AF_VSOCK)?];
    match opts.unix {
        Unix::Deny => socket_rules.push(socket_family(libc::AF_UNIX)?),
        Unix::Own => socket_rules.extend(unix_types_but_streams()?),
        Unix::Allow => {}
    }
    Ok(socket_rules)
}

/// The `socket()` rules of reduced mode's network (see [`NetFilter`]).
fn network_socket_rules(net: NetFilter) -> Result<Vec<SeccompRule>> {
    use SeccompCmpArgLen::Dword;
    let (unix, netlink) = (libc::AF_UNIX as u64, libc::AF_NETLINK as u64);
    let (inet, inet6) = (libc::AF_INET as u64, libc::AF_INET6 as u64);
    let mut rules = Vec::new();
    match net {
        NetFilter::Namespace => {}
        NetFilter::Deny => rules.push(rule(vec![
            cond(0, Dword, SeccompCmpOp::Ne, unix)?,
            cond(0, Dword, SeccompCmpOp::Ne, netlink)?,
        ])?),
        NetFilter::TcpOnly => {
            rules.push(rule(vec![
                cond(0, Dword, SeccompCmpOp::Ne, unix)?,
                cond(0, Dword, SeccompCmpOp::Ne, netlink)?,
                cond(0, Dword, SeccompCmpOp::Ne, inet)?,
                cond(0, Dword, SeccompCmpOp::Ne, inet6)?,
            ])?);
            for family in [inet, inet6] {
                // Any type but a stream (the flags above bit 4 aside).
                for t in (0..16u64).filter(|&t| t != libc::SOCK_STREAM as u64) {
                    rules.push(rule(vec![
                        cond(0, Dword, SeccompCmpOp::Eq, family)?,
                        cond(1, Dword, SeccompCmpOp::MaskedEq(0xf), t)?,
                    ])?);
                }
                // A stream of another protocol than TCP (MPTCP, SCTP).
                rules.push(rule(vec![
                    cond(0, Dword, SeccompCmpOp::Eq, family)?,
                    cond(2, Dword, SeccompCmpOp::Ne, 0)?,
                    cond(2, Dword, SeccompCmpOp::Ne, libc::IPPROTO_TCP as u64)?,
                ])?);
            }
        }
    }
    Ok(rules)
}

/// `socket()` in the address family `family`.
fn socket_family(family: libc::c_int) -> Result<SeccompRule> {
    rule(vec![cond(
        0,
        SeccompCmpArgLen::Dword,
        SeccompCmpOp::Eq,
        family as u64,
    )?])
}

/// The rules of `socketpair`.
fn socketpair_rules() -> Result<Vec<SeccompRule>> {
    unix_types_but_streams()
}

/// AF_UNIX with any type but stream and seqpacket: the kernel turns
/// SOCK_RAW into a datagram socket, so a rule on SOCK_DGRAM alone is not
/// enough.
fn unix_types_but_streams() -> Result<Vec<SeccompRule>> {
    use SeccompCmpArgLen::Dword;
    (0..16u64)
        .filter(|&t| t != libc::SOCK_STREAM as u64 && t != libc::SOCK_SEQPACKET as u64)
        .map(|t| {
            rule(vec![
                cond(0, Dword, SeccompCmpOp::Eq, libc::AF_UNIX as u64)?,
                cond(1, Dword, SeccompCmpOp::MaskedEq(0xf), t)?,
            ])
        })
        .collect()
}

/// A filter that refuses every syscall of a foreign ABI (on x86_64 the x32
/// numbers, which carry bit 30). The architecture itself is checked by the
/// seccompiler prologue of the other programs.
fn abi_program() -> BpfProgram {
    // BPF_LD | BPF_W | BPF_ABS
    const BPF_LD_W_ABS: u16 = 0x20;
    const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
    const BPF_RET_K: u16 = 0x06;
    const RET_ALLOW: u32 = 0x7fff_0000;
    const RET_ERRNO: u32 = 0x0005_0000;
    let stmt = |code, k| sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    vec![
        stmt(BPF_LD_W_ABS, 0),
        sock_filter {
            code: BPF_JMP_JGE_K,
            jt: 0,
            jf: 1,
            k: 0x4000_0000,
        },
        stmt(BPF_RET_K, RET_ERRNO | libc::ENOSYS as u32),
        stmt(BPF_RET_K, RET_ALLOW),
    ]
}

/// Build the programs, in the order they are installed.
pub fn programs(opts: Options) -> Result<Vec<BpfProgram>> {
    let mut enosys_rules = BTreeMap::new();
    enosys_rules.insert(libc::SYS_clone3, vec![]);
    let enosys = compile(enosys_rules, libc::ENOSYS)?;
    let (chain, named) = eperm_chain(opts)?;
    // A number that is not a syscall's would leave the chain as it is.
    let eperm = match named {
        Some(named) => fast_path::with_fast_allow(chain, &named),
        None => chain,
    };
    Ok(vec![abi_program(), enosys, eperm])
}

/// The `EPERM` filter as seccompiler compiles it, and the syscall numbers
/// it names (in order), for [`fast_path`].
fn eperm_chain(opts: Options) -> Result<(BpfProgram, Option<Vec<u32>>)> {
    let rules = eperm_rules(opts)?;
    let named = rules.keys().map(|&nr| u32::try_from(nr).ok()).collect();
    Ok((compile(rules, libc::EPERM)?, named))
}

/// A filter that answers `errno` to what `rules` match and allows the rest,
/// compiled for this architecture.
fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: libc::c_int) -> Result<BpfProgram> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        ARCH,
    )
    .context("building the seccomp filter")?;
    filter.try_into().context("compiling the seccomp filter")
}

/// What the `__filter` stage adds for the command to PID 1's filter:
/// with `Unix::Deny` (allowlist mode, where PID 1 keeps Unix sockets to
/// relay to the proxy) the AF_UNIX `socket()` rule; with `Unix::Own` the
/// `pidfd_getfd` rule PID 1 left out for itself.
pub fn command_program(unix: Unix) -> Result<BpfProgram> {
    let mut rules = BTreeMap::new();
    match unix {
        Unix::Deny => {
            rules.insert(
                libc::SYS_socket,
                vec![rule(vec![cond(
                    0,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    libc::AF_UNIX as u64,
                )?])?],
            );
        }
        Unix::Own => {
            rules.insert(libc::SYS_pidfd_getfd, vec![]);
        }
        Unix::Allow => {}
    }
    compile(rules, libc::EPERM)
}

/// Install the filter on the calling thread. `PR_SET_NO_NEW_PRIVS` must be set.
pub fn apply(programs: &[BpfProgram]) -> Result<()> {
    for p in programs {
        seccompiler::apply_filter(p).context("installing the seccomp filter")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_compile_for_both_socket_modes() {
        for unix in [Unix::Deny, Unix::Own, Unix::Allow] {
            for network in [NetFilter::Namespace, NetFilter::Deny, NetFilter::TcpOnly] {
                let p = programs(Options { unix, network }).unwrap();
                assert_eq!(p.len(), 3);
                assert!(p.iter().all(|prog| !prog.is_empty() && prog.len() < 4096));
            }
        }
    }

    #[test]
    // The cast is needed with musl (whose constants are `c_int`).
    #[allow(clippy::unnecessary_cast)]
    fn the_terminal_requests_are_the_kernels_numbers() {
        assert_eq!(0x5412, libc::TIOCSTI as u64);
        assert_eq!(0x541C, libc::TIOCLINUX as u64);
    }
}
