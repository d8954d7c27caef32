//! Build facts for `sbx --version`: the commit and the platform backends.
//!
//! The commit comes from `SBX_COMMIT` when set (a package built from a
//! source tarball, a release job), else from `git` in this checkout, else
//! `unknown`. Nothing else is generated here.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=SBX_COMMIT");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    let commit = std::env::var("SBX_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".into());
    let backends = match std::env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("linux") => "bubblewrap; seatbelt profiles (dry run)",
        Ok("macos") => "seatbelt; bubblewrap plans (dry run)",
        _ => "none (dry runs only)",
    };
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    println!("cargo:rustc-env=SBX_LONG_VERSION={version} (commit {commit}; backends: {backends})");
}

/// The checkout's commit, short.
fn git_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    Some(String::from_utf8(out.stdout).ok()?.trim().to_string())
}
