use super::super::{eperm_chain, NetFilter, Options, Unix};
use super::*;

/// Every set of options the filter is built with.
fn every_option() -> Vec<Options> {
    let mut all = Vec::new();
    for unix in [Unix::Deny, Unix::Own, Unix::Allow] {
        for network in [NetFilter::Namespace, NetFilter::Deny, NetFilter::TcpOnly] {
            all.push(Options { unix, network });
        }
    }
    all
}

/// `struct seccomp_data` as the kernel lays it out.
fn data(nr: u32, arch: u32, args: [u64; 6]) -> [u8; 64] {
    let mut d = [0u8; 64];
    d[0..4].copy_from_slice(&nr.to_ne_bytes());
    d[4..8].copy_from_slice(&arch.to_ne_bytes());
    d[8..16].copy_from_slice(&0x7f00_1234_5678u64.to_ne_bytes());
    for (i, a) in args.iter().enumerate() {
        d[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_ne_bytes());
    }
    d
}

/// Run a classic BPF seccomp program as the kernel would: its answer, and
/// how many instructions it took. Panics on anything the kernel would
/// refuse to load (an unknown instruction, a jump or load out of bounds, no
/// return), so that a broken program cannot pass for a working one.
fn run(prog: &[sock_filter], d: &[u8; 64]) -> (u32, usize) {
    let (answer, steps) = run_until(prog, d, false);
    (answer.expect("a full run answers"), steps)
}

/// [`run`]; with `stop_at_arguments`, no answer once the program looks at
/// a syscall's arguments (as the kernel's emulation, which has none).
fn run_until(prog: &[sock_filter], d: &[u8; 64], stop_at_arguments: bool) -> (Option<u32>, usize) {
    let (mut pc, mut a, mut steps) = (0usize, 0u32, 0usize);
    loop {
        let ins = prog.get(pc).expect("the program ran past its end");
        steps += 1;
        let k = ins.k;
        let jump = |taken: bool| pc + 1 + usize::from(if taken { ins.jt } else { ins.jf });
        pc = match ins.code {
            LD_W_ABS => {
                let at = usize::try_from(k).unwrap();
                assert!(at % 4 == 0 && at + 4 <= 64, "load at {at}");
                if stop_at_arguments && at >= 8 {
                    return (None, steps);
                }
                a = u32::from_ne_bytes(d[at..at + 4].try_into().unwrap());
                pc + 1
            }
            // BPF_ALU | BPF_AND | BPF_K
            0x54 => {
                a &= k;
                pc + 1
            }
            // BPF_JMP | BPF_JA
            0x05 => pc + 1 + usize::try_from(k).unwrap(),
            JMP_JEQ_K => jump(a == k),
            // BPF_JMP | BPF_JGT | BPF_K
            0x25 => jump(a > k),
            JMP_JGE_K => jump(a >= k),
            // BPF_JMP | BPF_JSET | BPF_K
            0x45 => jump(a & k != 0),
            RET_K => return (Some(k), steps),
            code => panic!("instruction {code:#x} at {pc}"),
        };
    }
}

/// A cheap, fixed sequence of numbers (the same on every run).
fn numbers(seed: u64) -> impl Iterator<Item = u64> {
    let mut x = seed;
    std::iter::repeat_with(move || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        x
    })
}

/// The arguments tried with each syscall the filter names: the values its
/// rules compare, with and without high bits, and others.
fn argument_sets() -> Vec<[u64; 6]> {
    let first = [
        0,
        1,             // AF_UNIX
        2,             // AF_INET
        10,            // AF_INET6
        16,            // AF_NETLINK
        40,            // AF_VSOCK
        0x1_0000_0001, // AF_UNIX with high bits
        0x0002_0000,   // CLONE_NEWNS
        0x1000_0000,   // CLONE_NEWUSER
        0x8000_0000,   // CLONE_NEWPID
        0x80,          // CLONE_NEWTIME
        0x0001_1200,   // a thread's clone flags
        u64::MAX,
    ];
    let second = [
        0,
        1,
        2,
        3,
        5,
        0x80801,
        0x5412,
        0x541c,
        0x1_0000_5412,
        0x5413,
        u64::MAX,
    ];
    let others = [0, 6, 262, 0x2000_0000, u64::MAX];
    let mut sets = Vec::new();
    for (i, &a0) in first.iter().enumerate() {
        for (j, &a1) in second.iter().enumerate() {
            let a2 = others[(i + j) % others.len()];
            let a3 = others[(i * 3 + j) % others.len()];
            sets.push([a0, a1, a2, a3, 0, 0]);
        }
    }
    sets.extend(numbers(7).take(60).collect::<Vec<_>>().chunks(6).map(|c| {
        let mut set = [0; 6];
        set.copy_from_slice(c);
        set
    }));
    sets
}

/// Architectures the kernel may report: this one, the 32-bit x86 ABI
/// (which an x86_64 process can enter), another 64-bit one, nonsense.
const ARCHES: [u32; 5] = [
    NATIVE_ARCH,
    0x4000_0003,
    if NATIVE_ARCH == 0xc000_003e {
        0xc000_00b7
    } else {
        0xc000_003e
    },
    0,
    u32::MAX,
];

/// Syscall numbers to try: every low one, x32's (bit 30), and extremes.
fn syscall_numbers() -> Vec<u32> {
    let mut nrs: Vec<u32> = (0..1100).collect();
    nrs.extend((0..600).map(|n| 0x4000_0000 | n));
    nrs.extend([0x7fff_ffff, 0x8000_0000, u32::MAX]);
    nrs
}

#[test]
fn the_filter_answers_as_seccompilers_chain_for_every_input() {
    let sets = argument_sets();
    for opts in every_option() {
        let (chain, named) = eperm_chain(opts).unwrap();
        let named = named.unwrap();
        let fast = with_fast_allow(chain.clone(), &named);
        assert!(
            fast.len() > chain.len(),
            "{opts:?}: the search was left out"
        );
        let mut compared = 0usize;
        for arch in ARCHES {
            for nr in syscall_numbers() {
                // Arguments matter only where the chain compares them.
                let tried: &[[u64; 6]] = if arch == NATIVE_ARCH && named.contains(&nr) {
                    &sets
                } else {
                    &sets[..3]
                };
                for &args in tried {
                    let d = data(nr, arch, args);
                    assert_eq!(
                        run(&fast, &d).0,
                        run(&chain, &d).0,
                        "{opts:?}: syscall {nr:#x}, arch {arch:#x}, args {args:x?}"
                    );
                    compared += 1;
                }
            }
        }
        assert!(compared >= ARCHES.len() * syscall_numbers().len() * 3);
    }
}

/// What the kernel does when a filter is installed: every native syscall
/// number run through it, up to the first look at the arguments (which it
/// cannot know). The instructions that takes, in all.
fn cache_preparation_steps(prog: &[sock_filter]) -> usize {
    (0..460)
        .map(|nr| run_until(prog, &data(nr, NATIVE_ARCH, [0; 6]), true).1)
        .sum()
}

#[test]
fn installing_the_filter_no_longer_walks_the_chain_for_every_syscall() {
    for opts in every_option() {
        let (chain, named) = eperm_chain(opts).unwrap();
        let fast = with_fast_allow(chain.clone(), &named.unwrap());
        let (before, after) = (
            cache_preparation_steps(&chain),
            cache_preparation_steps(&fast),
        );
        assert!(
            after * 4 < before,
            "{opts:?}: {after} steps against {before}"
        );
    }
}

#[test]
fn the_native_architecture_is_the_one_seccompiler_checks() {
    let (chain, _) = eperm_chain(Options::default()).unwrap();
    assert_eq!((chain[0].code, chain[0].k), (LD_W_ABS, ARCH_OFFSET));
    assert_eq!((chain[1].code, chain[1].k), (JMP_JEQ_K, NATIVE_ARCH));
}

/// A stand-in for seccompiler's chain: kills another architecture,
/// refuses each named number with its own errno, allows the rest.
fn stand_in(named: &[u32]) -> BpfProgram {
    let stmt = |code, k| sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    let mut p = vec![
        stmt(LD_W_ABS, ARCH_OFFSET),
        sock_filter {
            code: JMP_JEQ_K,
            jt: 1,
            jf: 0,
            k: NATIVE_ARCH,
        },
        stmt(RET_K, 0x8000_0000),
        stmt(LD_W_ABS, NR),
    ];
    for (i, &nr) in named.iter().enumerate() {
        p.push(sock_filter {
            code: JMP_JEQ_K,
            jt: 0,
            jf: 1,
            k: nr,
        });
        p.push(stmt(RET_K, 0x0005_0000 | (i as u32 + 1)));
    }
    p.push(stmt(RET_K, RET_ALLOW));
    p
}

#[test]
fn every_size_of_search_sends_exactly_the_named_numbers_to_the_chain() {
    let mut pool = numbers(11).map(|x| (x % 700) as u32);
    for size in 0..=130 {
        let mut named: Vec<u32> = pool.by_ref().take(size).collect();
        named.sort_unstable();
        named.dedup();
        let chain = stand_in(&named);
        let fast = with_fast_allow(chain.clone(), &named);
        assert!(fast.len() > chain.len(), "{size} numbers: no search");
        for arch in ARCHES {
            for nr in 0..720 {
                let d = data(nr, arch, [0; 6]);
                let (answer, steps) = run(&fast, &d);
                assert_eq!(answer, run(&chain, &d).0, "{size} numbers, {nr}");
                if arch == NATIVE_ARCH && !named.contains(&nr) {
                    assert!(
                        steps <= 3 + 2 * 8 + LEAF + 1,
                        "{size} numbers: {steps} steps"
                    );
                }
            }
        }
    }
}

#[test]
fn a_search_too_long_for_one_byte_jumps_leaves_the_chain_as_it_is() {
    let named: Vec<u32> = (0..400).map(|n| n * 2).collect();
    let chain = stand_in(&named);
    assert_eq!(with_fast_allow(chain.clone(), &named), chain);
}
