//! Neither Linux nor macOS: no sandbox to run a plan in (rendering one
//! already finds no bubblewrap), so a command runs without one, loudly, or
//! not at all with `require`.

use std::convert::Infallible;
use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{bail, Result};

use super::allowlist::RunningProxy;
use crate::backend::Plan;
use crate::banner::{self, Style};
use crate::cli;
use crate::policy::Policy;

pub fn run_plan(
    _plan: &Plan,
    policy: &Policy,
    style: Style,
    _shell_command: bool,
    proxy: Option<RunningProxy>,
    _cache: Option<&Path>,
) -> Result<Infallible> {
    drop(proxy);
    super::unavailable(
        policy,
        style,
        "sbx has no sandbox for this operating system",
    )
}

pub fn inner(_args: cli::InnerArgs) -> Result<ExitCode> {
    bail!("the inner stage exists only on Linux")
}

pub fn filter(_command: &[OsString]) -> Result<ExitCode> {
    bail!("the inner stage exists only on Linux")
}

pub fn already_sandboxed() -> bool {
    false
}

pub fn recover_killed_runs(_cache: &Path, _style: Style) -> Result<()> {
    Ok(())
}

pub fn host_env(env: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
    env
}

pub fn probe_not_started(_plan: &Plan, stderr: &str) -> String {
    format!(
        "the sandbox did not run the probe [{}]",
        banner::sanitize(stderr.trim())
    )
}
