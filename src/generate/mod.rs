//! Generated documentation, rendered from the code so it cannot disagree with
//! the binary: the man pages sbx(1) and sbx.toml(5), the JSON Schema of the
//! configuration file, and the shell completions.
//!
//! All of them are committed (`man/`, `sbx.schema.json`, `completions/`) and
//! a drift test compares them with what the binary prints; `SBX_BLESS=1 cargo
//! test --test integration generated` rewrites them. They are printed by the
//! hidden `sbx man` (sbx.1), `sbx man --section 5` (sbx.toml.5), `sbx man
//! --schema` (sbx.schema.json) and `sbx completions SHELL`.
//!
//! sbx(1) is clap_mangen's sections (name, synopsis, description, options,
//! version) with sbx's own in between. The configuration keys are described
//! once, in [`keys::KEYS`], for both sbx.toml(5) and the schema; a unit test keeps
//! that list equal to the keys [`SandboxTable`](crate::config::SandboxTable)
//! accepts.

use anyhow::{Context, Result};
use clap::CommandFactory;
use roff::{bold, roman, Inline, Roff};

use crate::cli::Cli;

mod config_man;
mod keys;
mod man;
#[cfg(test)]
mod tests;

pub use config_man::config_man;
pub use keys::schema;
pub use man::man;

/// Completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> Result<String> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "sbx", &mut out);
    String::from_utf8(out).context("completion script is not UTF-8")
}

// ---------------------------------------------------------------- roff helpers

/// Text written the README's way, with `code` in backticks, as roff inlines
/// (code in bold).
pub(super) fn md(text: &str) -> Vec<Inline> {
    text.split('`')
        .enumerate()
        .filter(|(_, s)| !s.is_empty())
        .map(|(i, s)| if i % 2 == 1 { bold(s) } else { roman(s) })
        .collect()
}

/// A control-line argument: `-` written as a minus sign, as in text.
pub(super) fn arg(text: &str) -> String {
    text.replace('-', "\\-")
}

/// Section heading.
pub(super) fn sh(r: &mut Roff, title: &str) {
    r.control("SH", [arg(title).as_str()]);
}

/// A paragraph.
pub(super) fn pp(r: &mut Roff, text: &str) {
    r.control("PP", []);
    r.text(md(text));
}

/// A tagged paragraph: `tag` in bold, then `body`.
pub(super) fn tp(r: &mut Roff, tag: &str, body: &str) {
    r.control("TP", []);
    r.text(md(tag));
    r.text(md(body));
}

/// Literal lines (an example), indented.
pub(super) fn example(r: &mut Roff, lines: &str) {
    r.control("PP", []);
    r.control("RS", ["4"]);
    r.control("nf", []);
    for line in lines.lines() {
        r.text([roman(line)]);
    }
    r.control("fi", []);
    r.control("RE", []);
}

/// The two lines every roff document from the `roff` crate starts with.
pub(super) const PREAMBLE: &[&str] = &[".ie \\n(.g .ds Aq \\(aq", ".el .ds Aq '"];

/// Rendered roff without the preamble (it is written once, at the top).
pub(super) fn body(text: &str) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    if lines.len() >= 2 && lines[..2] == *PREAMBLE {
        lines.drain(..2);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

pub(super) fn render_with(
    man: &clap_mangen::Man,
    f: fn(&clap_mangen::Man, &mut dyn std::io::Write) -> std::io::Result<()>,
) -> Result<String> {
    let mut out = Vec::new();
    f(man, &mut out).context("rendering the man page")?;
    let text = String::from_utf8(out).context("man page is not UTF-8")?;
    Ok(body(&text))
}

/// `.TH` arguments: the date is left empty (the page must not change with the
/// day it is generated), but it must still be there, or groff would read the
/// source ("sbx 0.1.0") as the date.
pub(super) const NO_DATE: &str = "\"\"";

pub(super) fn version() -> String {
    format!("sbx {}", env!("CARGO_PKG_VERSION"))
}

// ------------------------------------------------ credential variables

use crate::policy::{CREDENTIAL_VAR_NAMES, CREDENTIAL_VAR_PARTS, CREDENTIAL_VAR_SUFFIXES};

pub(super) fn code_list(items: &[&str], last: &str) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
    match quoted.split_last() {
        Some((tail, [])) => tail.clone(),
        Some((tail, rest)) => format!("{} {last} {tail}", rest.join(", ")),
        None => String::new(),
    }
}

pub(super) fn credential_vars_text() -> String {
    format!(
        "Removed unless named in `env_passthrough`: names ending in {}, names containing {}, \
{}; any variable whose value holds a URL with a password or a token in its user part \
(`DATABASE_URL=postgres://u:p@host/db`, any URL of a list), a `password=`, `token=`, `key=`, \
`sig=`, `AccountKey=`, ... parameter, or an Oracle `user/password@host`; bundler's host \
credentials (`BUNDLE_HOST__COM=user:pass`); `GIT_CONFIG_PARAMETERS` holding one; and git config \
passed in numbered variables (`GIT_CONFIG_COUNT`, `GIT_CONFIG_KEY_n`, `GIT_CONFIG_VALUE_n`) as a \
whole when one of its keys or values holds a secret.",
        code_list(CREDENTIAL_VAR_SUFFIXES, "or"),
        code_list(CREDENTIAL_VAR_PARTS, "or"),
        code_list(CREDENTIAL_VAR_NAMES, "and"),
    )
}
