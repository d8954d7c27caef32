//! `Policy` → Seatbelt profile for `/usr/bin/sandbox-exec` (placeholder; being written).

use anyhow::Result;

use super::Plan;
use crate::policy::Policy;

/// The only `sandbox-exec` sbx ever runs: a copy earlier on PATH could be anything.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// Render the Seatbelt plan.
pub fn render(policy: &Policy) -> Result<Plan> {
    let profile = "(version 1)\n(deny default)\n".to_string();
    let mut args = vec!["-p".into(), profile.clone().into(), "--".into()];
    args.extend(policy.command.iter().cloned());
    Ok(Plan {
        program: SANDBOX_EXEC.into(),
        args,
        env: Some(policy.env.clone()),
        empty_fds: Vec::new(),
        create: Vec::new(),
        profile: Some(profile),
    })
}
