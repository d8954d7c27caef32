//! The one integration test binary (see `util.rs` for the harness).

// Tests and their helpers may panic on unexpected failures.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod util;
// Host-side evidence shared by the suites: output, listeners, snapshots.
mod host;

// The network allowlist end to end: sandboxed clients, host servers as judges.
mod allowlist;
// Command line: help, usage errors, `--` handling, shell-mode detection.
mod cli;
// Bad configuration: exit 125, a message naming file, line and key, and the
// command never runs.
mod config;
// "Never pretend": no/failing/disabled backend, --unsandboxed, `sbx check`.
#[cfg(target_os = "linux")]
mod failmodes;
// The docs stay true: man pages pass groff's lint, the README's quick start
// does what it says, its configuration table matches the schema.
mod docs;
// Resource limits: each stops what it should and says so (Linux).
#[cfg(target_os = "linux")]
mod limits;
// Committed man pages, schema and completions match what the binary generates.
mod generated;
// `sbx profile` for both platforms: exact output and round trips.
mod profile;
// Reduced mode (Landlock and seccomp), asked for and in a container-like
// place where bubblewrap cannot start.
#[cfg(target_os = "linux")]
mod reduced;
// Each bypass an adversarial review found, kept fixed.
#[cfg(target_os = "linux")]
mod regressions;
// The enforcement scenarios Linux and macOS share, written once.
mod scenarios;
// Real bubblewrap runs on Linux: each grant beside its denial, judged by
// host-side evidence.
#[cfg(target_os = "linux")]
mod sandbox_linux;
// Real Seatbelt runs on macOS (compiled everywhere, ignored off macOS).
mod sandbox_macos;
// Shell mode as agents and editors use it ($SHELL -c, stdin, tmux): sbx
// behaves like bash byte for byte, sandboxed.
#[cfg(target_os = "linux")]
mod shell;
