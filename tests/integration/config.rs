//! Configuration files.
//!
//! Bad input: in every source (user file, `--config FILE`, `$SBX_CONFIG`, a
//! project `.sbx.toml`, and shell mode) a bad file exits 125 with one line on
//! stderr naming the file, the line and the key, and the command never runs
//! (judged by a marker file it would have created).
//!
//! The narrowing rule: a project `.sbx.toml` cannot widen what the user's own
//! configuration allows; each attempt is ignored with a warning that names the
//! key and the file. Narrowings it asks for are honoured.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use std::path::{Path, PathBuf};

use predicates::prelude::*;

use crate::require_sandbox;
use crate::util::{write, World, DEADLINE};

/// Where the bad file is put, and how sbx is told about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Src {
    /// `~/.config/sbx/config.toml`, `sbx run`.
    User,
    /// `sbx run --config FILE`.
    Flag,
    /// `SBX_CONFIG=FILE sbx run`.
    Env,
    /// `.sbx.toml` in the project, `sbx run`.
    Project,
    /// The user file, in shell mode: `sbx -c CMD`.
    Shell,
}

/// `sbx profile --platform linux --format json -- true`: the bwrap arguments.
fn profile_args(world: &World, extra: &[&str]) -> Vec<String> {
    let out = world
        .sbx()
        .args(["profile", "--platform", "linux", "--format", "json"])
        .args(extra)
        .args(["--", "true"])
        .timeout(DEADLINE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "sbx profile failed: {out:?}");
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    value["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// Whether the bwrap arguments mount `path` with `flag` (`--bind`, `--ro-bind`).
fn mounts(args: &[String], flag: &str, path: &Path) -> bool {
    let path = path.display().to_string();
    args.windows(3)
        .any(|w| w[0] == flag && w[1] == path && w[2] == path)
}

// ---------------------------------------------------------------------------
// The tests, by topic
// ---------------------------------------------------------------------------

mod bad_input;
mod good_input;
mod narrowing;
