//! The few failures whose exit status the caller must be able to tell apart.
//!
//! sbx follows the convention of `env`, `timeout` and `chroot`: 125 when sbx
//! itself failed before running anything, 126 when the command exists but cannot
//! be executed, 127 when it cannot be found. Every other error is an
//! `anyhow::Error` with context, and also exits 125.

use std::fmt;

/// sbx failed before running anything (bad config, refused, missing backend).
pub const EXIT_SBX_FAILED: u8 = 125;
/// The command was found but could not be executed.
pub const EXIT_NOT_EXECUTABLE: u8 = 126;
/// The command was not found.
pub const EXIT_NOT_FOUND: u8 = 127;

/// A failure that decides the exit status.
#[derive(Debug)]
pub enum Failure {
    /// The command named on the command line does not exist.
    CommandNotFound(String),
    /// The command exists but is not executable.
    NotExecutable(String),
}

impl Failure {
    /// The exit status for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::CommandNotFound(_) => EXIT_NOT_FOUND,
            Failure::NotExecutable(_) => EXIT_NOT_EXECUTABLE,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::CommandNotFound(cmd) => write!(
                f,
                "{cmd}: command not found (check the spelling, or PATH inside the sandbox)"
            ),
            Failure::NotExecutable(cmd) => write!(
                f,
                "{cmd}: permission denied: not an executable file (check its mode with `ls -l`)"
            ),
        }
    }
}

impl std::error::Error for Failure {}

/// The exit status for any error that reaches `main`.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    err.chain()
        .find_map(|cause| cause.downcast_ref::<Failure>())
        .map_or(EXIT_SBX_FAILED, Failure::exit_code)
}
