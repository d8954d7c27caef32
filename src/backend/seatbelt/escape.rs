//! How text gets into the profile: sbx's constants quoted as SBPL string
//! literals, host paths as parameters (never as text), and the profile
//! being built with the parameters it refers to.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Result};

use crate::policy::{
    Policy, AGENT_TOKENS, CREDENTIALS, CREDENTIALS_MACOS, HOME_PROTECTED, PROJECT_PROTECTED,
};

/// Quote `s` as an SBPL string literal: `\` and `"` are escaped, everything
/// else is kept. Control characters are refused, because the reader would turn
/// escapes like `\n` into bytes, and a raw newline does not belong in a rule.
/// Host paths do not go through here (they are parameters); this is for
/// constants that end up in the profile.
pub fn quote(s: &str) -> Result<String> {
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        bail!("{s:?}: control character {c:?} cannot appear in a Seatbelt profile");
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '\\' || c == '"' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    Ok(out)
}

/// A host path as a parameter value: absolute, valid UTF-8 (APFS names
/// always are), with no NUL or control character, and without `..` (which
/// only the file system can resolve). Spellings that mean the same path
/// lexically (`//`, `/./`, a trailing `/`, as `$HOME` may be written) are
/// normalised.
fn param_value(path: &Path) -> Result<String> {
    let Some(text) = path.to_str() else {
        bail!(
            "{}: the path is not valid UTF-8 and cannot be passed to sandbox-exec",
            path.display()
        );
    };
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        bail!("{text:?}: a path with the control character {c:?} cannot be sandboxed");
    }
    if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
        bail!("{text:?}: only absolute paths without `..` can be put in a Seatbelt profile");
    }
    let normal: PathBuf = path.components().collect();
    match normal.to_str() {
        Some(n) => Ok(n.to_string()),
        None => bail!("{text:?}: the path is not valid UTF-8"),
    }
}

/// The relative paths sbx itself names below the home directory or the
/// project, and each of their parents: the only suffixes ever appended to a
/// parameter with `string-append`.
fn constant_suffixes() -> impl Iterator<Item = &'static str> {
    let lists = [
        CREDENTIALS,
        CREDENTIALS_MACOS,
        PROJECT_PROTECTED,
        HOME_PROTECTED,
    ];
    let tokens = AGENT_TOKENS.iter().map(|(_, token)| token);
    lists
        .into_iter()
        .flatten()
        .chain(tokens)
        .flat_map(|entry| Path::new(*entry).ancestors())
        .filter_map(Path::to_str)
        .filter(|a| !a.is_empty())
}

/// `rel` if it is one of [`constant_suffixes`].
fn constant_suffix(rel: &Path) -> Option<&'static str> {
    constant_suffixes().find(|a| Path::new(a) == rel)
}

/// One of sbx's constant suffixes (`.vscode`, `.git/hooks`) as the tail of
/// a regex that matches it in any letter case, and anything beneath it:
/// `/\.[vV][sS][cC][oO][dD][eE](/|$)`. macOS file systems ignore case by
/// default, so `.VSCODE/tasks.json` is the file VS Code reads, and a
/// literal rule would not stop its creation.
pub(super) fn any_case_tail(suffix: &str) -> String {
    let mut out = String::from("/");
    for c in suffix.chars() {
        if c.is_ascii_alphabetic() {
            out.push('[');
            out.push(c.to_ascii_lowercase());
            out.push(c.to_ascii_uppercase());
            out.push(']');
        } else if ".+()[]{}^$|?*\\".contains(c) {
            out.push('\\');
            out.push(c);
        } else {
            out.push(c);
        }
    }
    out.push_str("(/|$)");
    out
}

/// Every regex tail [`any_case_tail`] can make: one per constant suffix
/// (for the profile checks).
#[cfg(test)]
pub(super) fn any_case_tails() -> Vec<String> {
    constant_suffixes().map(any_case_tail).collect()
}

/// `(KIND "NAME")` for each of sbx's constant `names`, quoted.
pub(super) fn quoted(kind: &str, names: &[&str]) -> Result<Vec<String>> {
    names
        .iter()
        .map(|n| Ok(format!("({kind} {})", quote(n)?)))
        .collect()
}

/// The profile being built, and the parameters it refers to.
pub(super) struct Profile {
    text: String,
    /// `(name, value)` in the order defined; each value appears once.
    params: Vec<(String, String)>,
    /// Next index for each indexed parameter prefix.
    counters: BTreeMap<&'static str, usize>,
    /// `(name, path)` of the fixed parameters: the project root and home.
    /// Defined when first used; sbx's constant suffixes are appended to them.
    bases: Vec<(&'static str, PathBuf)>,
}

impl Profile {
    /// An empty profile whose fixed parameters are the project root and home.
    pub(super) fn new(policy: &Policy) -> Profile {
        Profile {
            text: String::new(),
            params: Vec::new(),
            counters: BTreeMap::new(),
            bases: vec![
                ("PROJECT_ROOT", policy.project.clone()),
                ("HOME_DIR", policy.home.clone()),
            ],
        }
    }

    /// The profile text, and the parameters it refers to.
    pub(super) fn finish(self) -> (String, Vec<(String, String)>) {
        (self.text, self.params)
    }

    /// Define (or reuse) the parameter named `name` for `path`.
    pub(super) fn named(&mut self, name: &str, path: &Path) -> Result<String> {
        let value = param_value(path)?;
        if let Some((existing, _)) = self.params.iter().find(|(_, v)| *v == value) {
            return Ok(param_ref(existing));
        }
        debug_assert!(name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'));
        self.params.push((name.to_string(), value));
        Ok(param_ref(name))
    }

    /// For a path that is a base (the project, home) plus one of sbx's
    /// constant suffixes, a filter matching it, and anything beneath it, in
    /// any letter case; `None` for any other path.
    pub(super) fn any_case(&mut self, path: &Path) -> Result<Option<String>> {
        let bases = self.bases.clone();
        for (name, base) in bases.iter().filter(|(_, b)| b.parent().is_some()) {
            let suffix = path.strip_prefix(base).ok().and_then(constant_suffix);
            if let Some(suffix) = suffix {
                let expr = self.named(name, base)?;
                let tail = any_case_tail(suffix);
                return Ok(Some(format!(
                    r##"(regex (string-append "^" (regex-quote {expr}) #"{tail}"))"##
                )));
            }
        }
        Ok(None)
    }

    /// The profile expression for a host path: an existing parameter with the
    /// same value, a base parameter plus one of sbx's constant suffixes, or a
    /// new parameter `PREFIX_<n>`.
    pub(super) fn path_expr(&mut self, prefix: &'static str, path: &Path) -> Result<String> {
        let value = param_value(path)?;
        let bases = self.bases.clone();
        if let Some((name, base)) = bases.iter().find(|(_, b)| b == path) {
            return self.named(name, base);
        }
        if let Some((existing, _)) = self.params.iter().find(|(_, v)| *v == value) {
            return Ok(param_ref(existing));
        }
        // `/` as a base would give `//.ssh`, which matches nothing.
        for (name, base) in bases.iter().filter(|(_, b)| b.parent().is_some()) {
            let suffix = path.strip_prefix(base).ok().and_then(constant_suffix);
            if let Some(suffix) = suffix {
                let expr = self.named(name, base)?;
                return Ok(format!(
                    "(string-append {expr} {})",
                    quote(&format!("/{suffix}"))?
                ));
            }
        }
        let counter = self.counters.entry(prefix).or_insert(0);
        let name = format!("{prefix}_{counter}");
        *counter += 1;
        self.named(&name, path)
    }

    pub(super) fn line(&mut self, line: &str) {
        self.text.push_str(line);
        self.text.push('\n');
    }

    /// A comment line. Only sbx's own constant text is ever passed here.
    pub(super) fn comment(&mut self, text: &'static str) {
        self.line(&format!(";; {text}"));
    }

    /// A blank line and a comment: the start of a group.
    pub(super) fn section(&mut self, text: &'static str) {
        self.text.push('\n');
        self.comment(text);
    }

    /// `(HEAD FILTER)` on one line, or one filter per line when there are more.
    pub(super) fn rule(&mut self, head: &str, filters: &[String]) {
        match filters {
            [] => {}
            [one] => self.line(&format!("({head} {one})")),
            many => {
                let mut text = format!("({head}");
                for f in many {
                    text.push_str("\n  ");
                    text.push_str(f);
                }
                text.push(')');
                self.line(&text);
            }
        }
    }
}

fn param_ref(name: &str) -> String {
    format!("(param \"{name}\")")
}
