//! Configuration as written: the `[sandbox]` table of a TOML file.
//!
//! This module only reads and checks the shape of files; it makes no policy
//! decisions (that is `policy::resolve`). Unknown keys, wrong types and invalid
//! values are errors that name the file, the line and the key, so a typo can
//! never silently weaken (or strengthen) a policy. Other tables in the same file
//! are ignored, so sbx can read its section out of another tool's config.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::limits::{Count, Size};
use toml::Spanned;

use crate::netrule::HostRule;

/// Where a configuration layer came from, lowest precedence first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// Built-in defaults.
    Default,
    /// `$XDG_CONFIG_HOME/sbx/config.toml`.
    User(PathBuf),
    /// `--config FILE` or `$SBX_CONFIG`.
    Explicit(PathBuf),
    /// `.sbx.toml` in the project: may only narrow.
    Project(PathBuf),
    /// Command-line flags.
    Flags,
}

impl Source {
    /// The file behind this source, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Source::User(p) | Source::Explicit(p) | Source::Project(p) => Some(p),
            Source::Default | Source::Flags => None,
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => write!(f, "default"),
            Source::User(p) => write!(f, "user file {}", p.display()),
            Source::Explicit(p) => write!(f, "--config {}", p.display()),
            Source::Project(p) => write!(f, "project file {}", p.display()),
            Source::Flags => write!(f, "command line"),
        }
    }
}

/// `filesystem = true | false | "read-only"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsSetting {
    /// Writes only to `writable`.
    Restricted,
    /// No writes at all; reads limited to the project and system paths.
    ReadOnly,
    /// No filesystem restriction.
    Unrestricted,
}

impl<'de> Deserialize<'de> for FsSetting {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bool(true) => Ok(FsSetting::Restricted),
            Raw::Bool(false) => Ok(FsSetting::Unrestricted),
            Raw::Str(s) if s == "read-only" => Ok(FsSetting::ReadOnly),
            Raw::Str(s) => Err(serde::de::Error::custom(format!(
                "invalid value \"{s}\", expected true, false or \"read-only\""
            ))),
        }
    }
}

/// `network = "deny" | "allow" | "allowlist"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    Deny,
    Allowlist,
    Allow,
}

/// `unix_sockets = "deny" | "own" | "allow"`, ordered from the narrowest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnixSockets {
    /// No Unix socket at all.
    Deny,
    /// The command's own: it may bind, listen and connect, but only to
    /// sockets bound inside its sandbox.
    Own,
    /// The host's too.
    Allow,
}

/// `require = false | true | "reduced"`: which sandboxes are good enough to
/// run the command in; anything less refuses it (exit 125). Ordered from the
/// least to the most demanding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Require {
    /// Any: the best available, or none (loudly).
    Nothing,
    /// Full or reduced mode (Landlock and seccomp, Linux).
    Reduced,
    /// The full sandbox only (bubblewrap, Seatbelt).
    Full,
}

impl<'de> Deserialize<'de> for Require {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Bool(bool),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Bool(true) => Ok(Require::Full),
            Raw::Bool(false) => Ok(Require::Nothing),
            Raw::Str(s) if s == "reduced" => Ok(Require::Reduced),
            Raw::Str(s) => Err(serde::de::Error::custom(format!(
                "expected true, false or \"reduced\", found {s:?}"
            ))),
        }
    }
}

impl fmt::Display for Require {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Require::Nothing => "false",
            Require::Reduced => "\"reduced\"",
            Require::Full => "true",
        })
    }
}

/// `backend = "auto" | "bwrap" | "reduced"` (Linux): which sandbox runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// bubblewrap, and reduced mode where bubblewrap cannot start.
    Auto,
    /// bubblewrap only.
    Bwrap,
    /// Reduced mode only (Landlock and seccomp applied by sbx itself).
    Reduced,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Auto => "auto",
            Backend::Bwrap => "bwrap",
            Backend::Reduced => "reduced",
        })
    }
}

/// `env = "inherit" | "minimal"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EnvMode {
    Minimal,
    Inherit,
}

/// `banner = "auto" | "always" | "never"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BannerMode {
    Auto,
    Always,
    Never,
}

/// The `[sandbox]` table. Every key is optional: an absent key leaves the value
/// of the layer below.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxTable {
    pub enabled: Option<bool>,
    pub require: Option<Require>,
    pub filesystem: Option<FsSetting>,
    pub writable: Option<Vec<Spanned<String>>>,
    pub deny_read: Option<Vec<Spanned<String>>>,
    pub deny_write: Option<Vec<Spanned<String>>>,
    pub network: Option<NetworkMode>,
    pub network_allowlist: Option<Vec<Spanned<String>>>,
    pub allow_unsandboxed: Option<bool>,
    pub unix_sockets: Option<UnixSockets>,
    pub env: Option<EnvMode>,
    pub env_passthrough: Option<Vec<Spanned<String>>>,
    pub shell: Option<Spanned<String>>,
    pub banner: Option<BannerMode>,
    /// Absolute path of the bubblewrap to use (user file or `--config` only).
    pub bwrap: Option<Spanned<String>>,
    /// Which Linux sandbox runs (user file or `--config` only).
    pub backend: Option<Backend>,
    pub max_processes: Option<Count>,
    pub max_open_files: Option<Count>,
    pub max_file_size: Option<Size>,
    pub max_memory: Option<Size>,
    pub cpu_time: Option<Count>,
}

#[derive(Deserialize)]
struct Document {
    #[serde(default)]
    sandbox: Option<SandboxTable>,
    /// Everything else: other tables are another tool's (ignored), but a
    /// key of `[sandbox]` written above every table is a mistake.
    #[serde(flatten)]
    rest: BTreeMap<String, toml::Value>,
}

/// One parsed and checked configuration file.
#[derive(Debug, Clone)]
pub struct Layer {
    pub source: Source,
    pub table: SandboxTable,
    /// Allowlist entries, parsed.
    pub allowlist: Option<Vec<HostRule>>,
}

/// Read and check one file. `None` when the file does not exist and `optional`.
pub fn load(source: Source, optional: bool) -> Result<Option<Layer>> {
    let Some(path) = source.path().map(Path::to_path_buf) else {
        return Ok(None);
    };
    let text = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if optional && e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "cannot read config file {}: check the path given by --config or SBX_CONFIG",
                    path.display()
                )
            })
        }
    };
    let text = String::from_utf8(text).map_err(|_| {
        anyhow::anyhow!(
            "{}: not valid UTF-8 (a TOML file must be UTF-8 text)",
            path.display()
        )
    })?;
    parse(source, &text).map(Some)
}

/// Parse and check the text of a configuration file.
pub fn parse(source: Source, text: &str) -> Result<Layer> {
    let file = source
        .path()
        .map_or_else(|| "<config>".to_string(), |p| p.display().to_string());
    let doc: Document = toml::from_str(text).map_err(|e| toml_error(&file, text, &e))?;
    outside_the_table(&doc.rest, &file, text)?;
    let table = doc.sandbox.unwrap_or_default();
    let at = Values { file: &file, text };
    check_policy_paths(&table, &at)?;
    check_program_paths(&table, &at)?;
    check_env_names(&table, &at)?;
    let allowlist = parse_allowlist(&table, &at)?;
    Ok(Layer {
        source,
        table,
        allowlist,
    })
}

/// Refuse a key of `[sandbox]` written outside it (above the first table):
/// TOML puts it in no table, so it would be ignored, and a `deny_read`
/// there would leave the secret it names readable. Which keys are
/// `[sandbox]`'s is asked of the table itself (any answer but "unknown
/// field"), so the list cannot fall out of step.
fn outside_the_table(rest: &BTreeMap<String, toml::Value>, file: &str, text: &str) -> Result<()> {
    for (key, value) in rest {
        if value.is_table() {
            continue;
        }
        let alone = toml::Table::from_iter([(key.clone(), value.clone())]);
        let known = match SandboxTable::deserialize(alone) {
            Ok(_) => true,
            Err(e) => unknown_field(e.message()).is_none(),
        };
        if known {
            let line = top_level_line(text, key);
            bail!(
                "{file}:{line}: key `{key}` is outside the [sandbox] table, where sbx would ignore it (move it below the `[sandbox]` line)"
            );
        }
    }
    Ok(())
}

/// The line of `key = …` above the first table header (1 if not found).
fn top_level_line(text: &str, key: &str) -> usize {
    text.lines()
        .take_while(|l| !l.trim_start().starts_with('['))
        .position(|l| {
            let l = l.trim_start();
            let rest = l
                .strip_prefix(key)
                .or_else(|| l.strip_prefix(&format!("\"{key}\"")));
            rest.is_some_and(|r| r.trim_start().starts_with('='))
        })
        .map_or(1, |i| i + 1)
}

/// A TOML syntax, type or unknown-key error, with the file, line and key.
fn toml_error(file: &str, text: &str, e: &toml::de::Error) -> anyhow::Error {
    let (line, key) = match e.span() {
        Some(span) => locate(text, span.start),
        None => (0, None),
    };
    let mut msg = e.message().replace('\n', " ");
    if let Some(field) = unknown_field(&msg) {
        msg = format!("unknown key `{field}`");
        return anyhow::anyhow!(
            "{file}:{line}: {msg} in [sandbox] (remove it; the keys are listed in `man sbx.toml` and the README)"
        );
    }
    if let Some(k) = key {
        msg = format!("key `{k}`: {msg}");
    }
    anyhow::anyhow!(
        "{file}:{line}: {msg} (fix the value; see the README's configuration reference)"
    )
}

/// Where the values of one file are: for errors that name the file, the
/// line and the key.
struct Values<'a> {
    file: &'a str,
    text: &'a str,
}

impl Values<'_> {
    fn err(&self, span: std::ops::Range<usize>, key: &str, why: String) -> anyhow::Error {
        let (line, _) = locate(self.text, span.start);
        anyhow::anyhow!("{}:{line}: key `{key}`: {why}", self.file)
    }
}

/// `writable`, `deny_read` and `deny_write`: plain text without `..`.
fn check_policy_paths(table: &SandboxTable, at: &Values) -> Result<()> {
    for (key, list) in [
        ("writable", &table.writable),
        ("deny_read", &table.deny_read),
        ("deny_write", &table.deny_write),
    ] {
        for item in list.iter().flatten() {
            check_path_text(item.get_ref())
                .and_then(|()| check_no_parent(item.get_ref()))
                .map_err(|why| {
                    at.err(
                        item.span(),
                        key,
                        format!(
                            "{why} (write an absolute path, `~/...` or a path relative to the project)"
                        ),
                    )
                })?;
        }
    }
    Ok(())
}

/// `shell` and `bwrap`: absolute paths.
fn check_program_paths(table: &SandboxTable, at: &Values) -> Result<()> {
    for (key, item) in [("shell", &table.shell), ("bwrap", &table.bwrap)] {
        if let Some(item) = item {
            check_path_text(item.get_ref())
                .and_then(|()| {
                    if item.get_ref().starts_with('/') {
                        Ok(())
                    } else {
                        Err(format!("`{}` is not an absolute path", item.get_ref()))
                    }
                })
                .map_err(|why| {
                    at.err(item.span(), key, format!("{why} (write an absolute path)"))
                })?;
        }
    }
    Ok(())
}

/// `env_passthrough`: environment variable names.
fn check_env_names(table: &SandboxTable, at: &Values) -> Result<()> {
    for item in table.env_passthrough.iter().flatten() {
        let name = item.get_ref();
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(at.err(
                item.span(),
                "env_passthrough",
                format!(
                    "`{}` is not an environment variable name (letters, digits and `_`)",
                    name.escape_debug()
                ),
            ));
        }
    }
    Ok(())
}

/// `network_allowlist`, parsed.
fn parse_allowlist(table: &SandboxTable, at: &Values) -> Result<Option<Vec<HostRule>>> {
    let Some(items) = &table.network_allowlist else {
        return Ok(None);
    };
    items
        .iter()
        .map(|item| {
            HostRule::parse(item.get_ref()).map_err(|why| {
                at.err(
                    item.span(),
                    "network_allowlist",
                    format!("`{}`: {why}", item.get_ref().escape_debug()),
                )
            })
        })
        .collect::<Result<Vec<_>>>()
        .map(Some)
}

/// Paths in a policy must be plain text: no NUL, newline or other control
/// character (they could inject syntax into a profile or a log line).
pub fn check_path_text(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("an empty path".into());
    }
    if let Some(c) = path.chars().find(|c| c.is_control()) {
        return Err(format!(
            "the path {:?} contains the control character {:?}",
            path, c
        ));
    }
    Ok(())
}

/// `..` in a policy path is refused: a path that climbs out of where it
/// appears to point is a classic way to hide a widening.
pub fn check_no_parent(path: &str) -> Result<(), String> {
    if Path::new(path)
        .components()
        .any(|c| c == std::path::Component::ParentDir)
    {
        return Err(format!("{path:?}: `..` is not allowed in a policy path"));
    }
    Ok(())
}

/// 1-based line of a byte offset, and the key written at the start of that line.
fn locate(text: &str, offset: usize) -> (usize, Option<String>) {
    let offset = offset.min(text.len());
    let line_no = text.as_bytes()[..offset]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("");
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"').to_string())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    (line_no, key)
}

fn unknown_field(msg: &str) -> Option<String> {
    let rest = msg.strip_prefix("unknown field `")?;
    rest.split_once('`').map(|(f, _)| f.to_string())
}

/// The user file: `$XDG_CONFIG_HOME/sbx/config.toml`, else `~/.config/sbx/config.toml`.
pub fn user_file(xdg_config_home: Option<&Path>, home: &Path) -> PathBuf {
    match xdg_config_home {
        Some(dir) if dir.is_absolute() => dir.join("sbx/config.toml"),
        _ => home.join(".config/sbx/config.toml"),
    }
}

/// The nearest `.sbx.toml` in `cwd` or its ancestors, up to and including `project`.
pub fn project_file(cwd: &Path, project: &Path) -> Option<PathBuf> {
    for dir in cwd.ancestors() {
        let candidate = dir.join(".sbx.toml");
        if candidate.is_file() {
            return Some(candidate);
        }
        if dir == project {
            break;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_err(text: &str) -> String {
        parse(Source::User(PathBuf::from("/u/config.toml")), text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn seed_schema_loads() {
        let text = r#"
[sandbox]
enabled = true
filesystem = true
network = "deny"          # deny | allow | allowlist
network_allowlist = ["registry.npmjs.org", "github.com"]
writable = [".", "/tmp"]
allow_unsandboxed = true
"#;
        let layer = parse(Source::Default, text).unwrap();
        assert_eq!(layer.table.network, Some(NetworkMode::Deny));
        assert_eq!(layer.allowlist.unwrap().len(), 2);
    }

    #[test]
    fn a_sandbox_key_above_every_table_is_refused() {
        for (text, line, key) in [
            ("deny_read = [\"~/secrets\"]\n", 1, "deny_read"),
            (
                "# sbx\n\n\"network\" = \"allow\"\n[sandbox]\n",
                3,
                "network",
            ),
            (
                "title = \"x\"\nenabled = \"yes\"\n[sandbox]\n",
                2,
                "enabled",
            ),
        ] {
            let msg = parse_err(text);
            assert_eq!(
                msg,
                format!("/u/config.toml:{line}: key `{key}` is outside the [sandbox] table, where sbx would ignore it (move it below the `[sandbox]` line)"),
                "{text}"
            );
        }
        // Other keys and tables are another tool's; a dotted key is the table's.
        for text in [
            "title = \"x\"\n[sandbox]\nnetwork = \"allow\"\n",
            "[other]\ndeny_read = 1\n",
            "sandbox.network = \"allow\"\n",
        ] {
            assert!(parse(Source::Default, text).is_ok(), "{text}");
        }
    }

    #[test]
    fn other_tables_are_ignored() {
        let layer = parse(
            Source::Default,
            "[other]\nx = 1\n[sandbox]\nnetwork = \"allow\"\n",
        )
        .unwrap();
        assert_eq!(layer.table.network, Some(NetworkMode::Allow));
    }

    #[test]
    fn unknown_key_names_file_line_and_key() {
        let msg = parse_err("[sandbox]\nnetwork = \"deny\"\nnetwrok = \"allow\"\n");
        assert!(
            msg.starts_with("/u/config.toml:3: unknown key `netwrok`"),
            "{msg}"
        );
    }

    #[test]
    fn invalid_value_names_key() {
        let msg = parse_err("[sandbox]\n\nnetwork = \"sometimes\"\n");
        assert!(msg.starts_with("/u/config.toml:3: key `network`"), "{msg}");
        assert!(msg.contains("sometimes"), "{msg}");
    }

    #[test]
    fn wrong_type_names_key() {
        let msg = parse_err("[sandbox]\nenabled = \"yes\"\n");
        assert!(msg.starts_with("/u/config.toml:2: key `enabled`"), "{msg}");
    }

    #[test]
    fn filesystem_values() {
        for (v, want) in [
            ("true", FsSetting::Restricted),
            ("false", FsSetting::Unrestricted),
            ("\"read-only\"", FsSetting::ReadOnly),
        ] {
            let layer = parse(Source::Default, &format!("[sandbox]\nfilesystem = {v}\n")).unwrap();
            assert_eq!(layer.table.filesystem, Some(want));
        }
        let msg = parse_err("[sandbox]\nfilesystem = \"rw\"\n");
        assert!(msg.contains(":2: key `filesystem`"), "{msg}");
    }

    #[test]
    fn wildcard_allowlist_is_refused() {
        let msg =
            parse_err("[sandbox]\nnetwork_allowlist = [\n  \"github.com\",\n  \"*.com\",\n]\n");
        assert!(
            msg.starts_with("/u/config.toml:4: key `network_allowlist`"),
            "{msg}"
        );
    }

    #[test]
    fn control_characters_in_paths_are_refused() {
        let msg = parse_err("[sandbox]\nwritable = [\"/tmp/a\\nb\"]\n");
        assert!(msg.starts_with("/u/config.toml:2: key `writable`"), "{msg}");
        let msg = parse_err("[sandbox]\ndeny_read = [\"/x\\u0000y\"]\n");
        assert!(msg.contains("key `deny_read`"), "{msg}");
    }

    #[test]
    fn malformed_toml_names_the_line() {
        let msg = parse_err("[sandbox]\nnetwork = \"deny\n");
        assert!(msg.starts_with("/u/config.toml:2:"), "{msg}");
    }
}
