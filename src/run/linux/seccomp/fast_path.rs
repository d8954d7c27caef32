//! A short way through the refusal filter for the syscalls it never refuses.
//!
//! seccompiler compiles a filter as one chain: the architecture check, then
//! one comparison per syscall it names, in turn. When a filter is installed,
//! the kernel runs it once for every syscall number of the architecture, to
//! learn which are always allowed (seccomp's action cache, Linux 5.11): a
//! few hundred numbers through a chain of about 70 comparisons cost 0.3 ms
//! of every run, in the sandbox's PID 1 before the command starts.
//!
//! [`with_fast_allow`] puts a binary search over the named syscall numbers
//! in front of the chain: a number of the native architecture that the
//! chain does not name is allowed there, after about ten instructions;
//! anything else (another architecture, a named number) goes on to the
//! chain, unchanged. The chain would have allowed exactly those, so the
//! filter's answer is the same for every input; the tests check that by
//! running both through an interpreter.

use seccompiler::{sock_filter, BpfProgram};

// Classic BPF, as seccomp runs it (linux/bpf_common.h).
const LD_W_ABS: u16 = 0x20;
const JMP_JEQ_K: u16 = 0x15;
const JMP_JGE_K: u16 = 0x35;
const RET_K: u16 = 0x06;
const RET_ALLOW: u32 = 0x7fff_0000;

/// Offsets in `struct seccomp_data`.
const NR: u32 = 0;
const ARCH_OFFSET: u32 = 4;

/// The audit number of the architecture sbx is built for (linux/audit.h:
/// the ELF machine, 64-bit, little-endian), which the chain checks first.
#[cfg(target_arch = "x86_64")]
pub(super) const NATIVE_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000;
#[cfg(target_arch = "aarch64")]
pub(super) const NATIVE_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000;
#[cfg(target_arch = "riscv64")]
pub(super) const NATIVE_ARCH: u32 = 243 | 0x8000_0000 | 0x4000_0000;

/// At most this many numbers are compared one by one at the end of a
/// search.
const LEAF: usize = 4;

/// Where a jump of the search goes.
#[derive(Clone, Copy)]
enum To {
    /// This many instructions further on.
    Skip(usize),
    /// To the chain: the instruction after the search.
    Chain,
    /// To the search's last instruction, which allows the syscall.
    Allow,
}

/// One instruction of the search, its jumps not yet counted.
struct Op {
    code: u16,
    k: u32,
    jt: To,
    jf: To,
}

/// `chain` (seccompiler's, for the native architecture, whose action for
/// a syscall it does not name is to allow it) with the search in front of
/// it. `named` holds every syscall number the chain compares, each once
/// and in order: the keys of the map it was compiled from. Should the
/// search not fit classic BPF's one-byte jumps, the chain is returned as
/// it is (the tests make sure that sbx's own filters fit).
pub(super) fn with_fast_allow(chain: BpfProgram, named: &[u32]) -> BpfProgram {
    debug_assert!(named.windows(2).all(|w| w[0] < w[1]));
    let mut ops = vec![
        Op {
            code: LD_W_ABS,
            k: ARCH_OFFSET,
            jt: To::Skip(0),
            jf: To::Skip(0),
        },
        // Another architecture: the chain's own check decides.
        Op {
            code: JMP_JEQ_K,
            k: NATIVE_ARCH,
            jt: To::Skip(0),
            jf: To::Chain,
        },
        Op {
            code: LD_W_ABS,
            k: NR,
            jt: To::Skip(0),
            jf: To::Skip(0),
        },
    ];
    search(named, &mut ops);
    ops.push(Op {
        code: RET_K,
        k: RET_ALLOW,
        jt: To::Skip(0),
        jf: To::Skip(0),
    });
    let (allow, chain_at) = (ops.len() - 1, ops.len());
    let mut out = Vec::with_capacity(ops.len() + chain.len());
    for (i, op) in ops.iter().enumerate() {
        let offset = |to: To| -> Option<u8> {
            let skip = match to {
                To::Skip(n) => n,
                To::Chain => chain_at - i - 1,
                To::Allow => allow - i - 1,
            };
            u8::try_from(skip).ok()
        };
        let (Some(jt), Some(jf)) = (offset(op.jt), offset(op.jf)) else {
            return chain;
        };
        out.push(sock_filter {
            code: op.code,
            jt,
            jf,
            k: op.k,
        });
    }
    out.extend(chain);
    out
}

/// The search for the number loaded, among `named` (sorted): to the chain
/// when it is there, to the allowing instruction when it is not.
fn search(named: &[u32], ops: &mut Vec<Op>) {
    if named.len() <= LEAF {
        match named.split_last() {
            None => ops.push(Op {
                code: JMP_JEQ_K,
                k: 0,
                jt: To::Allow,
                jf: To::Allow,
            }),
            Some((&last, rest)) => {
                for &nr in rest {
                    ops.push(Op {
                        code: JMP_JEQ_K,
                        k: nr,
                        jt: To::Chain,
                        jf: To::Skip(0),
                    });
                }
                ops.push(Op {
                    code: JMP_JEQ_K,
                    k: last,
                    jt: To::Chain,
                    jf: To::Allow,
                });
            }
        }
        return;
    }
    // Below the middle number, the first half (right after this jump);
    // from it up, the second half (after the first).
    let (low, high) = named.split_at(named.len() / 2);
    let at = ops.len();
    ops.push(Op {
        code: JMP_JGE_K,
        k: high[0],
        jt: To::Skip(0),
        jf: To::Skip(0),
    });
    search(low, ops);
    ops[at].jt = To::Skip(ops.len() - at - 1);
    search(high, ops);
}

#[cfg(test)]
#[path = "fast_path_tests.rs"]
mod tests;
