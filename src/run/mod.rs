//! Running a rendered plan: the one place where Linux and macOS part ways.
//!
//! `app` resolves the policy and renders the plan alike on every platform.
//! What happens next is each platform's own, behind one set of functions
//! that every platform module provides with the same signatures, and that
//! `app` calls without knowing which platform it is on:
//!
//! - [`run_plan`]: run the plan with sbx as the sandbox's parent, and exit
//!   with the command's status;
//! - [`inner`] and [`filter`]: the hidden `__inner` and `__filter` stages
//!   inside the sandbox, and [`guard`], the hidden `__guard` process that
//!   makes a killed sbx's checks (Linux only);
//! - [`reduced_stage`], [`run_reduced`], [`reduced_plan`] and [`landlock`]:
//!   Linux's reduced mode (Landlock and seccomp, where bubblewrap cannot
//!   start); elsewhere they refuse or say there is none;
//! - [`already_sandboxed`]: whether sbx already runs inside its own sandbox;
//! - [`recover_killed_runs`]: the checks a killed earlier run left undone;
//! - [`config_copies`]: where a run's private git config copies go;
//! - [`host_env`]: the environment as the policy sees it;
//! - [`probe_not_started`]: why the sandbox of `sbx check` did not start;
//! - [`memory_cap`]: how `max_memory` is enforced here, or why it is not;
//! - [`start_ahead`], [`abandon_ahead`] and [`inner_argv`]: bubblewrap
//!   started while the policy is resolved, killed when no plan takes it, and
//!   the inner stage's arguments as it then reads them (Linux only);
//! - [`sockets_stay`]: whether the command's own Unix sockets stay in their
//!   directory here (macOS asks [`socket_probe`] once per build).
//!
//! On Linux (`linux`) sbx is the parent of bubblewrap, PID 1 of the
//! sandbox is sbx's inner stage, signals go through a signalfd, and the
//! checks of [`crate::integrity`] follow the run. On macOS (`macos`) sbx is
//! the parent of sandbox-exec (`sandbox_exec`), whose signals go through a
//! `sigwait` thread. What the platforms share stays here: the allowlist
//! proxy ([`allowlist`]) and what happens when no sandbox can be had
//! ([`unavailable`]).

pub mod allowlist;
#[cfg(target_os = "linux")]
mod linux;
pub mod socket_probe;
// Any other Unix builds the macOS path, as it did before the split: it has
// neither bubblewrap nor Seatbelt, so no plan rendered there gets to run.
#[cfg(not(target_os = "linux"))]
mod macos;
// macOS's, and compiled on Linux for its tests (a shell script stands in for
// sandbox-exec).
#[cfg(any(not(target_os = "linux"), test))]
mod sandbox_exec;

#[cfg(target_os = "linux")]
use linux as platform;
#[cfg(not(target_os = "linux"))]
use macos as platform;

use std::convert::Infallible;

use anyhow::{bail, Result};

use crate::banner::{self, Style};
use crate::policy::Policy;

pub use platform::{
    abandon_ahead, already_sandboxed, config_copies, filter, guard, host_env, inner, inner_argv,
    keep, landlock, memory_cap, probe_not_started, recover_killed_runs, reduced_plan,
    reduced_stage, run_plan, run_reduced, sockets_stay, start_ahead,
};

/// The sandbox cannot be enforced here: refuse with `require`, else run the
/// command without it, loudly.
pub fn unavailable(policy: &Policy, style: Style, cause: &str) -> Result<Infallible> {
    if policy.require != crate::config::Require::Nothing {
        bail!("cannot sandbox the command: {cause}; refusing to run it because `require` is set");
    }
    banner::not_sandboxed(
        style,
        &format!(
            "{cause}; running the command without a sandbox (set require = true to refuse instead)"
        ),
    );
    crate::exec::exec_unsandboxed(&policy.command)
}
