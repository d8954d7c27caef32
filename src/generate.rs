//! Generated documentation: the man page and shell completions, rendered from
//! the clap definition so they cannot disagree with the binary.

use anyhow::{Context, Result};
use clap::CommandFactory;

use crate::cli::Cli;

/// Completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> Result<String> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "sbx", &mut out);
    String::from_utf8(out).context("completion script is not UTF-8")
}

/// The man page, in roff.
pub fn man() -> Result<String> {
    let cmd = Cli::command();
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut out)
        .context("rendering the man page")?;
    String::from_utf8(out).context("man page is not UTF-8")
}
