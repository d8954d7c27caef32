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
//! once, in [`KEYS`], for both sbx.toml(5) and the schema; a unit test keeps
//! that list equal to the keys [`SandboxTable`](crate::config::SandboxTable)
//! accepts.

use anyhow::{Context, Result};
use clap::CommandFactory;
use roff::{bold, italic, roman, Inline, Roff};
use serde_json::{json, Map, Value};

use crate::cli::Cli;

/// Completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> Result<String> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "sbx", &mut out);
    String::from_utf8(out).context("completion script is not UTF-8")
}

/// How a configuration value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Bool,
    /// One of these strings.
    Enum(&'static [&'static str]),
    /// `true`, `false` or `"read-only"`.
    Filesystem,
    /// An array of paths.
    Paths,
    /// An array of allowlist entries.
    Hosts,
    /// An array of environment variable names.
    VarNames,
    /// One absolute path.
    AbsPath,
}

/// One key of the `[sandbox]` table, as documented.
#[derive(Debug, Clone, Copy)]
pub struct Key {
    pub name: &'static str,
    pub ty: Type,
    /// The built-in default as TOML; `None` when it depends on the host.
    pub default: Option<&'static str>,
    /// The default in words, when `default` is `None`.
    pub default_text: &'static str,
    /// What the key does (`code` in backticks).
    pub meaning: &'static str,
    /// What a project `.sbx.toml` may do with it.
    pub project: &'static str,
    /// A valid value as TOML, for the examples and the tests.
    pub example: &'static str,
}

/// Every key of the `[sandbox]` table, in the README's order.
pub const KEYS: &[Key] = &[
    Key {
        name: "enabled",
        ty: Type::Bool,
        default: Some("true"),
        default_text: "",
        meaning: "Whether commands run in the sandbox at all. `false` runs them exactly as without sbx \
(said on stderr when the banner is on), and `sbx check` reports that nothing is enforced.",
        project: "may turn the sandbox on, never off.",
        example: "true",
    },
    Key {
        name: "require",
        ty: Type::Bool,
        default: Some("false"),
        default_text: "",
        meaning: "`true`: when the sandbox cannot be enforced, refuse with exit status 125 instead of \
running the command unsandboxed with a loud warning.",
        project: "may set `true`, never `false`.",
        example: "true",
    },
    Key {
        name: "filesystem",
        ty: Type::Filesystem,
        default: Some("true"),
        default_text: "",
        meaning: "`true`: writes only to the `writable` paths; `false`: no filesystem restriction \
(credentials stay hidden and the network rules apply, but \"runs later\" paths are not protected); \
`\"read-only\"`: no writes at all (a private, empty `/tmp`), and reads limited to the project and \
the system paths.",
        project: "may only make it stricter: `\"read-only\"` over `true` over `false`.",
        example: "\"read-only\"",
    },
    Key {
        name: "writable",
        ty: Type::Paths,
        default: Some("[\".\", \"/tmp\"]"),
        default_text: "",
        meaning: "The paths the command may write to when `filesystem = true`. `.` is the project \
root, `~` and `~/...` the home directory, other relative paths are relative to the project root; \
`..` is refused. Each path is resolved to its real path (`/tmp` is `/private/tmp` on macOS, where \
`$TMPDIR` is writable too); a path that does not exist is skipped with a warning. A trusted file's \
list replaces the one below it (keep `\".\"` to keep the project writable); `--writable` adds to it. \
The default `.` is not made writable when the project root is the home directory or one of its \
ancestors (sbx warns; an explicit `\"~\"` still is).",
        project: "its list replaces the trusted one, keeping only the paths that lie inside a path \
the trusted layers make writable; the others are ignored with a warning.",
        example: "[\".\", \"/tmp\"]",
    },
    Key {
        name: "deny_read",
        ty: Type::Paths,
        default: Some("[]"),
        default_text: "",
        meaning: "More paths whose reads are denied, added to the built-in credential list (which \
no key can shorten). The same path forms as `writable`; every layer adds to the list.",
        project: "adds to the list.",
        example: "[\"~/.config/my-secrets\"]",
    },
    Key {
        name: "deny_write",
        ty: Type::Paths,
        default: Some("[]"),
        default_text: "",
        meaning: "More \"runs later\" paths, kept read-only even inside the writable paths, added to \
the built-in list. The same path forms as `writable`; every layer adds to the list.",
        project: "adds to the list.",
        example: "[\"Makefile\"]",
    },
    Key {
        name: "network",
        ty: Type::Enum(&["deny", "allow", "allowlist"]),
        default: Some("\"deny\""),
        default_text: "",
        meaning: "`\"deny\"`: no network (on Linux an empty network namespace, so the host's \
loopback is unreachable too); `\"allow\"`: the host's network; `\"allowlist\"`: only the hosts in \
`network_allowlist`, through a filtering HTTP proxy that sbx runs for the command.",
        project: "may only make it stricter: `\"deny\"` over `\"allowlist\"` over `\"allow\"`.",
        example: "\"allowlist\"",
    },
    Key {
        name: "network_allowlist",
        ty: Type::Hosts,
        default: Some("[]"),
        default_text: "",
        meaning: "The hosts reachable in allowlist mode: `host` (ports 80 and 443), `host:port`, \
`*.domain` (its subdomains, not the domain itself), and IP literals (IPv6 in brackets when a port \
follows), which are reachable only when listed as such. Hosts are matched before any DNS lookup, \
and a name that resolves to a loopback, private, link-local or cloud-metadata address is refused. \
`*`, `*.tld`, URLs, paths and user info are refused. A trusted file's list replaces the one below \
it; `--allow-domain` adds to it.",
        project: "keeps only the entries that an entry of the trusted list already allows; the \
others are ignored with a warning.",
        example: "[\"github.com\", \"*.githubusercontent.com\", \"registry.npmjs.org:443\"]",
    },
    Key {
        name: "allow_unsandboxed",
        ty: Type::Bool,
        default: Some("true"),
        default_text: "",
        meaning: "Whether `--unsandboxed` may be used at all; even then it asks for a yes on the \
terminal for each command.",
        project: "may set `false`, never `true`.",
        example: "false",
    },
    Key {
        name: "unix_sockets",
        ty: Type::Enum(&["deny", "allow"]),
        default: Some("\"deny\""),
        default_text: "",
        meaning: "`\"allow\"` lets the command create Unix sockets (Docker's socket, ssh-agent, \
D-Bus, tmux: each can be a way out of the sandbox). Linux only: on macOS they stay denied, with a \
warning.",
        project: "may set `\"deny\"`, never `\"allow\"`.",
        example: "\"deny\"",
    },
    Key {
        name: "env",
        ty: Type::Enum(&["inherit", "minimal"]),
        default: Some("\"inherit\""),
        default_text: "",
        meaning: "`\"inherit\"`: the command gets sbx's environment minus the variables that look \
like credentials; `\"minimal\"`: only `PATH`, `HOME`, `USER`, `LOGNAME`, `SHELL`, `TERM`, `LANG`, \
`LC_*`, `TZ`, `TMPDIR`, `COLORTERM` and the `env_passthrough` names. `SBX_SANDBOX=1` is set in \
both.",
        project: "may set `\"minimal\"`, never `\"inherit\"`.",
        example: "\"minimal\"",
    },
    Key {
        name: "env_passthrough",
        ty: Type::VarNames,
        default: Some("[]"),
        default_text: "",
        meaning: "Variable names kept even though they look like credentials (names ending in \
`TOKEN`, `_SECRET`, `_KEY`, ...: see sbx(1)). There is no flag for it. A trusted file's list \
replaces the one below it.",
        project: "keeps only the names the trusted layers already pass through; the others are \
ignored with a warning.",
        example: "[\"ANTHROPIC_API_KEY\"]",
    },
    Key {
        name: "shell",
        ty: Type::AbsPath,
        default: None,
        default_text: "`/bin/bash`, else `/bin/sh`",
        meaning: "The inner shell that shell mode (`sbx -c`, a login shell) runs inside the \
sandbox, as an absolute path.",
        project: "ignored with a warning: trusted files only.",
        example: "\"/bin/sh\"",
    },
    Key {
        name: "banner",
        ty: Type::Enum(&["auto", "always", "never"]),
        default: Some("\"auto\""),
        default_text: "",
        meaning: "The one-line banner on stderr: `\"auto\"` prints it when stderr is a terminal, \
except for `sbx -c`; `\"always\"`; `\"never\"` (also `--quiet`). Warnings are printed regardless. \
`\"never\"` also silences the allowlist proxy's line for each refused connection.",
        project: "ignored with a warning: trusted files only.",
        example: "\"never\"",
    },
    Key {
        name: "bwrap",
        ty: Type::AbsPath,
        default: None,
        default_text: "`/usr/bin/bwrap`, else the first `bwrap` on `PATH`",
        meaning: "The bubblewrap to use on Linux, as an absolute path. A bubblewrap inside a \
writable path or the working directory is never used.",
        project: "ignored with a warning: trusted files only.",
        example: "\"/usr/bin/bwrap\"",
    },
];

/// A TOML value (written as `key = TEXT`) as JSON.
fn toml_to_json(text: &str) -> Result<Value> {
    let table: toml::Table =
        toml::from_str(&format!("v = {text}")).with_context(|| format!("bad TOML: {text}"))?;
    let value = table.get("v").context("no value")?;
    serde_json::to_value(value).context("converting TOML to JSON")
}

/// The JSON Schema (draft 2020-12) of the configuration file, pretty-printed.
pub fn schema() -> Result<String> {
    let mut properties = Map::new();
    for key in KEYS {
        let mut prop = match key.ty {
            Type::Bool => json!({"type": "boolean"}),
            Type::Enum(values) => json!({"type": "string", "enum": values}),
            Type::Filesystem => {
                json!({"type": ["boolean", "string"], "enum": [true, false, "read-only"]})
            }
            Type::Paths => json!({
                "type": "array",
                "items": {
                    "type": "string",
                    "minLength": 1,
                    "description": "An absolute path, `.` (the project root), `~` or `~/...`, or a path relative to the project root; `..` is refused."
                }
            }),
            Type::Hosts => json!({
                "type": "array",
                "items": {
                    "type": "string",
                    "minLength": 1,
                    "description": "`host` (ports 80 and 443), `host:port`, `*.domain` (subdomains only), or an IP literal (`[IPv6]:port` with a port); not `*`, `*.tld`, a URL, a path or user info.",
                    "examples": ["github.com", "github.com:22", "*.githubusercontent.com", "192.0.2.7:8080"]
                }
            }),
            Type::VarNames => json!({
                "type": "array",
                "items": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}
            }),
            Type::AbsPath => json!({"type": "string", "pattern": "^/"}),
        };
        let obj = prop.as_object_mut().context("schema entry is an object")?;
        if let Some(default) = key.default {
            obj.insert("default".into(), toml_to_json(default)?);
        }
        let mut description = key.meaning.to_string();
        if key.default.is_none() {
            description.push_str(&format!(" Default: {}.", key.default_text));
        }
        description.push_str(&format!(" In a project `.sbx.toml`: {}", key.project));
        obj.insert("description".into(), Value::String(description));
        obj.insert("examples".into(), json!([toml_to_json(key.example)?]));
        properties.insert(key.name.into(), prop);
    }
    let schema = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "sbx configuration",
        "description": "The configuration file of sbx (sbx.toml(5)): the user file ~/.config/sbx/config.toml, a file given with --config or SBX_CONFIG, or a project .sbx.toml (which can only narrow the policy). Only the [sandbox] table is read; other tables are ignored. Generated by `sbx man --schema`.",
        "type": "object",
        "properties": {
            "sandbox": {
                "type": "object",
                "description": "The sandbox policy. Every key is optional: an absent key keeps the value of the layer below. Unknown keys are errors.",
                "additionalProperties": false,
                "properties": properties,
            }
        }
    });
    let mut text = serde_json::to_string_pretty(&schema).context("rendering the schema")?;
    text.push('\n');
    Ok(text)
}

// ---------------------------------------------------------------- roff helpers

/// Text written the README's way, with `code` in backticks, as roff inlines
/// (code in bold).
fn md(text: &str) -> Vec<Inline> {
    text.split('`')
        .enumerate()
        .filter(|(_, s)| !s.is_empty())
        .map(|(i, s)| if i % 2 == 1 { bold(s) } else { roman(s) })
        .collect()
}

/// A control-line argument: `-` written as a minus sign, as in text.
fn arg(text: &str) -> String {
    text.replace('-', "\\-")
}

/// Section heading.
fn sh(r: &mut Roff, title: &str) {
    r.control("SH", [arg(title).as_str()]);
}

/// A paragraph.
fn pp(r: &mut Roff, text: &str) {
    r.control("PP", []);
    r.text(md(text));
}

/// A tagged paragraph: `tag` in bold, then `body`.
fn tp(r: &mut Roff, tag: &str, body: &str) {
    r.control("TP", []);
    r.text(md(tag));
    r.text(md(body));
}

/// Literal lines (an example), indented.
fn example(r: &mut Roff, lines: &str) {
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
const PREAMBLE: &[&str] = &[".ie \\n(.g .ds Aq \\(aq", ".el .ds Aq '"];

/// Rendered roff without the preamble (it is written once, at the top).
fn body(text: &str) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    if lines.len() >= 2 && lines[..2] == *PREAMBLE {
        lines.drain(..2);
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

fn render_with(
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
const NO_DATE: &str = "\"\"";

fn version() -> String {
    format!("sbx {}", env!("CARGO_PKG_VERSION"))
}

// ------------------------------------------------ credential variables

use crate::policy::{CREDENTIAL_VAR_NAMES, CREDENTIAL_VAR_PARTS, CREDENTIAL_VAR_SUFFIXES};

fn code_list(items: &[&str], last: &str) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
    match quoted.split_last() {
        Some((tail, [])) => tail.clone(),
        Some((tail, rest)) => format!("{} {last} {tail}", rest.join(", ")),
        None => String::new(),
    }
}

fn credential_vars_text() -> String {
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

// ------------------------------------------------------------------- sbx(1)

/// The man page sbx(1), in roff.
pub fn man() -> Result<String> {
    let mut cmd = Cli::command();
    cmd.build();
    let man = clap_mangen::Man::new(cmd.clone())
        .date(NO_DATE)
        .manual("User Commands");
    let mut out = String::new();
    for line in PREAMBLE {
        out.push_str(line);
        out.push('\n');
    }
    out += &render_with(&man, clap_mangen::Man::render_title)?;
    out += &render_with(&man, clap_mangen::Man::render_name_section)?;
    out += &render_with(&man, clap_mangen::Man::render_synopsis_section)?;
    out += &body(&synopsis_lines(&mut cmd).render());
    out += &render_with(&man, clap_mangen::Man::render_description_section)?;
    out += &render_with(&man, clap_mangen::Man::render_options_section)?;
    out += &subcommands(&mut cmd)?;
    out += &body(&sections_1().render());
    out += &render_with(&man, clap_mangen::Man::render_version_section)?;
    if cmd.get_author().is_some() {
        out += &render_with(&man, clap_mangen::Man::render_authors_section)?;
    }
    Ok(out)
}

/// The usage line of a subcommand, without clap's `Usage: ` prefix.
fn usage(sub: &mut clap::Command) -> String {
    let text = sub.render_usage().to_string();
    text.trim()
        .strip_prefix("Usage:")
        .unwrap_or(&text)
        .trim()
        .to_string()
}

fn visible_subcommands(cmd: &clap::Command) -> Vec<clap::Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect()
}

/// More SYNOPSIS lines: each subcommand's usage, and shell mode.
fn synopsis_lines(cmd: &mut clap::Command) -> Roff {
    let mut r = Roff::new();
    for mut sub in visible_subcommands(cmd) {
        r.control("br", []);
        r.text([bold(usage(&mut sub))]);
    }
    r.control("br", []);
    r.text([
        bold("sbx -c"),
        roman(" "),
        italic("CMD_STRING"),
        roman(" ["),
        italic("ARG0"),
        roman(" ["),
        italic("ARGS"),
        roman("...]]"),
    ]);
    r.control("br", []);
    r.text([bold("sbx -lc"), roman(" "), italic("CMD_STRING")]);
    r.control("br", []);
    r.text([
        bold("sbx -l"),
        roman(" | "),
        bold("-i"),
        roman(" | "),
        bold("--login"),
    ]);
    r
}

/// The ids of the policy options, shared by `run`, `profile` and `check`.
fn policy_ids() -> Vec<String> {
    use clap::Args;
    crate::cli::PolicyArgs::augment_args(clap::Command::new("sbx"))
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect()
}

/// clap_mangen's rendering of `args` as `.TP` paragraphs (its OPTIONS
/// section without the heading).
fn options_body(args: Vec<clap::Arg>) -> Result<String> {
    let cmd = clap::Command::new("sbx").disable_help_flag(true).args(args);
    let man = clap_mangen::Man::new(cmd);
    let options = render_with(&man, clap_mangen::Man::render_options_section)?;
    options
        .strip_prefix(".SH OPTIONS\n")
        .map(str::to_string)
        .context("clap_mangen's options section starts with .SH OPTIONS")
}

/// SUBCOMMANDS: each visible subcommand with its usage, description and own
/// options, then POLICY OPTIONS, the options `run`, `profile` and `check`
/// share (as clap_mangen renders options).
fn subcommands(cmd: &mut clap::Command) -> Result<String> {
    let policy = policy_ids();
    let mut out = String::new();
    sh_into(&mut out, "SUBCOMMANDS");
    let mut shared: Vec<clap::Arg> = Vec::new();
    for mut sub in visible_subcommands(cmd) {
        let mut r = Roff::new();
        r.control("SS", [arg(&usage(&mut sub)).as_str()]);
        let about = sub
            .get_long_about()
            .or_else(|| sub.get_about())
            .map(|s| s.to_string())
            .unwrap_or_default();
        let about = about.trim_end();
        if about.ends_with('.') || about.is_empty() {
            r.text(md(about));
        } else {
            r.text(md(&format!("{about}.")));
        }
        let (common, own): (Vec<clap::Arg>, Vec<clap::Arg>) = sub
            .get_arguments()
            .filter(|a| !a.is_hide_set() && a.get_id() != "help")
            .cloned()
            .partition(|a| policy.iter().any(|p| p == a.get_id().as_str()));
        if !common.is_empty() {
            r.control("PP", []);
            r.text(md("Options: the POLICY OPTIONS below, and"));
            if shared.is_empty() {
                shared = common;
            }
        }
        out += &body(&r.render());
        out += &options_body(own)?;
    }
    sh_into(&mut out, "POLICY OPTIONS");
    out += &body(
        &Roff::new()
            .text(md(
                "`run`, `profile` and `check` take these options. They override the \
configuration files (see sbx.toml(5)); shell mode takes none.",
            ))
            .render(),
    );
    out += &options_body(shared)?;
    Ok(out)
}

/// Append a section heading to rendered roff.
fn sh_into(out: &mut String, title: &str) {
    let mut r = Roff::new();
    sh(&mut r, title);
    *out += &body(&r.render());
}

/// sbx's own sections: shell mode, exit status, environment, files, security.
fn sections_1() -> Roff {
    let mut r = Roff::new();
    sh(&mut r, "SHELL MODE");
    pp(
        &mut r,
        "When the first argument is one of bash's invocation options (`-c`, `-lc`, `-ec`, `-i`, \
`-l`, `-s`, `--login`, `--noprofile`, ...), or sbx is started as a login shell (its name begins \
with `-`), sbx acts as a shell: it runs the inner shell (the `shell` key; default `/bin/bash`, \
else `/bin/sh`) with those arguments, unchanged and in order, inside the sandbox. `-h` and `-V` \
stay sbx's help and version. With no arguments sbx is a shell only when `$SHELL` names it (it then \
reads a script from standard input, or is an interactive shell on a terminal); otherwise it prints \
its help.",
    );
    pp(
        &mut r,
        "Standard input, output, error and the exit status are the shell's, and in `-c` mode sbx \
prints nothing of its own unless a warning is due, so agents and editors can use sbx as `$SHELL`. \
Shell mode takes no policy options: the policy comes from the configuration files.",
    );

    sh(&mut r, "EXIT STATUS");
    pp(
        &mut r,
        "The command's own exit status. sbx's own failures follow the convention of env(1), \
timeout(1) and chroot(1):",
    );
    tp(
        &mut r,
        "125",
        "sbx failed before running anything: a usage error, an invalid configuration (one line \
naming the file, the line and the key), a sandbox that cannot be set up for this project, a \
machine that cannot run a sandbox at all with `require`, an `--unsandboxed` that was not \
confirmed.",
    );
    tp(
        &mut r,
        "126",
        "The command was found but is not executable.",
    );
    tp(&mut r, "127", "The command was not found.");
    tp(&mut r, "128+N", "The command was killed by signal N.");
    pp(
        &mut r,
        "`sbx check` exits 0 when everything the policy asks for is enforced, and 1 otherwise.",
    );

    sh(&mut r, "ENVIRONMENT");
    tp(
        &mut r,
        "SBX_CONFIG",
        "A configuration file read like `--config FILE` (trusted like the user file); `--config` \
wins, an empty value is ignored, and a relative path is refused (it would name another file in \
every directory sbx starts in).",
    );
    tp(
        &mut r,
        "XDG_CONFIG_HOME",
        "The user file is `$XDG_CONFIG_HOME/sbx/config.toml` when this is an absolute path, else \
`~/.config/sbx/config.toml`.",
    );
    tp(
        &mut r,
        "XDG_CACHE_HOME",
        "sbx's cache directory is `$XDG_CACHE_HOME/sbx` when this is an absolute path, else \
`~/.cache/sbx` (see FILES).",
    );
    tp(
        &mut r,
        "XDG_RUNTIME_DIR",
        "In allowlist mode the proxy's socket is created in a fresh private directory here \
(else in the cache directory) and removed after the run.",
    );
    tp(
        &mut r,
        "HOME",
        "The home directory (else the password database): `~` in the configuration, the \
credential paths and the user file are relative to it.",
    );
    tp(
        &mut r,
        "PATH",
        "Where the command is looked up, and bubblewrap when `/usr/bin/bwrap` does not exist.",
    );
    tp(
        &mut r,
        "SHELL",
        "When it names sbx, sbx with no arguments acts as a shell; inside the sandbox `SHELL` is \
then set to the inner shell.",
    );
    tp(
        &mut r,
        "NO_COLOR",
        "When set and not empty, sbx's messages are not coloured (they are coloured only on a \
terminal anyway).",
    );
    tp(
        &mut r,
        "LC_ALL, LC_CTYPE, LANG",
        "The first one set decides the banner's style: symbols when the locale is UTF-8, plain \
`[sbx]` and `[sbx WARNING]` prefixes otherwise.",
    );
    tp(
        &mut r,
        "TMPDIR",
        "On macOS, also made writable (the per-user temporary directory).",
    );
    pp(&mut r, "Inside the sandbox:");
    tp(
        &mut r,
        "SBX_SANDBOX=1",
        "Always set: tells a command it runs in sbx.",
    );
    tp(&mut r, "Credential variables", &credential_vars_text());
    tp(
        &mut r,
        "HTTP_PROXY, HTTPS_PROXY, ALL_PROXY",
        "In allowlist mode (Linux), in both cases, the proxy's URL with a per-run credential; also \
`NO_PROXY` (empty), `NODE_USE_ENV_PROXY=1`, `JAVA_TOOL_OPTIONS` (proxy host and port) and \
`GIT_SSH_COMMAND` (ssh through the proxy, for allowed `host:22` entries).",
    );

    sh(&mut r, "FILES");
    tp(
        &mut r,
        "~/.config/sbx/config.toml",
        "The user configuration (`$XDG_CONFIG_HOME/sbx/config.toml`): see sbx.toml(5). Read-only \
inside the sandbox when a writable path covers it.",
    );
    tp(
        &mut r,
        ".sbx.toml",
        "The project configuration: the nearest one in the working directory or its ancestors, up \
to the project root. It can only narrow the policy; read-only inside the sandbox.",
    );
    tp(
        &mut r,
        "~/.cache/sbx/",
        "The cache directory (`$XDG_CACHE_HOME/sbx`), read-only inside the sandbox when a \
writable path covers it. It holds `envscan-HASH`, one file per project that caches the search for \
`.env` files between runs (its content is checked, never trusted), and `empty`, the empty \
mode-000 placeholder file that is mounted over each credential file (`/dev/null` is used instead \
when the cache directory lies inside a writable path). sbx creates it (mode 0700) before each run.",
    );
    tp(
        &mut r,
        "/usr/bin/bwrap",
        "The bubblewrap sbx prefers (Linux); see the `bwrap` key.",
    );
    tp(
        &mut r,
        "/usr/bin/sandbox-exec",
        "The only Seatbelt launcher sbx runs (macOS), never one found on `PATH`.",
    );
    tp(
        &mut r,
        "NAME.sbx-blocked",
        "A \"runs later\" path that did not exist before the run (so could not be made read-only) \
and that the command created: sbx moves it aside after the run and says so (Linux).",
    );

    sh(&mut r, "SECURITY");
    pp(
        &mut r,
        "What sbx enforces on Linux, with bubblewrap and its own PID 1 inside: writes only to the \
writable paths (the host root is mounted read-only); the credential files hidden at their real \
paths, so a symlink does not reach them; \"runs later\" paths (`.git/hooks`, `.git/config`, `.envrc`, `.vscode`, agent settings, \
sbx's configuration, shell startup files) read-only even inside writable paths; no network, or \
the host's, or only allowlisted hosts through sbx's proxy; new user, PID, IPC, UTS and cgroup \
namespaces; no capabilities; `no_new_privs`; a seccomp filter on Unix sockets, new namespaces, \
the mount API, `ptrace`, keyrings, `bpf`, `io_uring`, terminal injection and more; inherited \
descriptors above 2 closed; nothing in the sandbox outlives the command.",
    );
    pp(
        &mut r,
        "sbx owns the bubblewrap argument list and so the security model: no option reaches \
bubblewrap from outside, and `sbx profile` prints the exact list `sbx run` executes.",
    );
    pp(
        &mut r,
        "On macOS sbx runs `/usr/bin/sandbox-exec` with a deny-default Seatbelt profile, as its \
parent: the same write, credential and \"runs later\" rules, and the three network modes \
(`allowlist` through sbx's proxy on a per-run port of 127.0.0.1, the profile's only network \
hole, with no DNS); `unix_sockets = \"allow\"` is not honoured (with a warning). A profile \
sandbox-exec refuses is never a reason to run the command unsandboxed (exit 125); inside another \
Seatbelt sandbox, which macOS does not nest, `require` decides as for a missing backend. \
`sandbox-exec` is deprecated by Apple but still shipped with macOS, and used by the major coding \
agents for the same purpose. The macOS backend has not been verified on a real Mac yet.",
    );
    pp(
        &mut r,
        "What sbx does not do: reads outside the credential list are allowed; files the command \
writes in the project (a `Makefile`, test files, package scripts) are code that runs later, and \
sbx cannot tell good edits from bad; an allowed host can receive anything the command can read; \
the allowlist proxy cannot see domain fronting inside TLS; only programs that honour the proxy \
variables get network in allowlist mode; `unix_sockets = \"allow\"` and `network = \"allow\"` \
each open ways out.",
    );
    pp(
        &mut r,
        "When this machine cannot run a sandbox at all (no bubblewrap, user namespaces disabled, \
...), sbx names the cause on every run and runs the command without the sandbox, or with \
`require` refuses (125). When a sandbox runs here but not this project's (a planted path, a \
project file), sbx never falls back: it exits 125 without running the command.",
    );

    sh(&mut r, "SEE ALSO");
    r.text(md(
        "sbx.toml(5), bwrap(1), sandbox-exec(1), and the README: quick start, recipes for agents \
and editors, troubleshooting.",
    ));
    r
}

// -------------------------------------------------------------- sbx.toml(5)

fn type_text(ty: Type) -> String {
    match ty {
        Type::Bool => "true | false".into(),
        Type::Enum(values) => values
            .iter()
            .map(|v| format!("\"{v}\""))
            .collect::<Vec<_>>()
            .join(" | "),
        Type::Filesystem => "true | false | \"read-only\"".into(),
        Type::Paths => "[paths]".into(),
        Type::Hosts => "[hosts]".into(),
        Type::VarNames => "[names]".into(),
        Type::AbsPath => "\"/absolute/path\"".into(),
    }
}

/// The man page sbx.toml(5): the configuration file, in roff.
pub fn config_man() -> Result<String> {
    let mut r = Roff::new();
    r.control(
        "TH",
        ["sbx.toml", "5", NO_DATE, version().as_str(), "File Formats"],
    );
    sh(&mut r, "NAME");
    r.text([roman("sbx.toml - configuration file of sbx")]);

    sh(&mut r, "SYNOPSIS");
    r.text([
        bold("~/.config/sbx/config.toml"),
        roman(" (user file), "),
        italic("FILE"),
        roman(" given with "),
        bold("--config"),
        roman(" or "),
        bold("SBX_CONFIG"),
        roman(", "),
        bold(".sbx.toml"),
        roman(" (project file)"),
    ]);

    sh(&mut r, "DESCRIPTION");
    pp(
        &mut r,
        "sbx(1) reads its policy from a `[sandbox]` table in TOML. Other tables in the same file \
are ignored, so the section can live in another tool's configuration file. sbx needs no file at \
all: every key is optional, and an absent key keeps the value of the layer below.",
    );
    pp(
        &mut r,
        "Unknown keys, wrong types and invalid values are errors: sbx prints one line naming the \
file, the line and the key, exits with status 125 and runs nothing. A typo can therefore never \
silently weaken, or strengthen, a policy.",
    );

    sh(&mut r, "PRECEDENCE");
    pp(&mut r, "Sources, lowest precedence first:");
    tp(&mut r, "1.", "The built-in defaults.");
    tp(
        &mut r,
        "2.",
        "The user file, `$XDG_CONFIG_HOME/sbx/config.toml` (default `~/.config/sbx/config.toml`).",
    );
    tp(
        &mut r,
        "3.",
        "`--config FILE`, else `$SBX_CONFIG`: trusted like the user file.",
    );
    tp(
        &mut r,
        "4.",
        "The project file `.sbx.toml`: the nearest one in the working directory or its \
ancestors, up to the project root. It can only narrow the policy (see PROJECT FILES).",
    );
    tp(
        &mut r,
        "5.",
        "Command-line flags: `--network` sets `network`; `--allow-domain HOST` adds to \
`network_allowlist` (and sets `network = \"allowlist\"` unless `--network` is given); \
`--writable PATH` adds to `writable` (relative to the working directory); `--read-only` sets \
`filesystem = \"read-only\"`; `--require` sets `require = true`; `--quiet` sets \
`banner = \"never\"`.",
    );
    pp(
        &mut r,
        "The project root is the nearest ancestor of the working directory that holds `.git`, but \
never the home directory or one of its ancestors, else the working directory itself; \
`--project DIR` overrides it. `sbx check` shows where each effective value came from.",
    );

    sh(&mut r, "KEYS");
    for key in KEYS {
        r.control("TP", []);
        r.text([bold(key.name), roman(" = "), italic(type_text(key.ty))]);
        r.text(md(key.meaning));
        r.control("IP", []);
        let default = match key.default {
            Some(d) => format!("`{d}`"),
            None => key.default_text.to_string(),
        };
        r.text(md(&format!(
            "Default: {default}. In a project file: {}",
            key.project
        )));
    }

    sh(&mut r, "PROJECT FILES");
    pp(
        &mut r,
        "A `.sbx.toml` comes with the code it sits in, and a sandboxed command may have written \
it, so sbx does not trust it: a value is taken only when it keeps the policy at least as strict \
as the layers below (the KEYS above say how for each key). A widening (turning the sandbox off, \
opening the network, adding a writable path, allowing unsandboxed runs, ...) is ignored with a \
warning that names the key and the file, on every run. `shell`, `banner` and `bwrap` are read \
from trusted files only. The project file is read-only inside the sandbox.",
    );

    sh(&mut r, "CHECKING A FILE");
    pp(
        &mut r,
        "`sbx check` loads every layer and prints the effective policy, where each value came \
from, and the warnings. For editors, `sbx.schema.json` in sbx's repository is a JSON Schema of \
this format (generated by `sbx man --schema`).",
    );

    sh(&mut r, "EXAMPLES");
    pp(
        &mut r,
        "A user file for an agent run around its client: its API key passes through, and the \
network reaches its API and two package registries only.",
    );
    example(
        &mut r,
        "[sandbox]\n\
env_passthrough = [\"ANTHROPIC_API_KEY\"]\n\
network = \"allowlist\"\n\
network_allowlist = [\"registry.npmjs.org\", \"*.crates.io\", \"api.anthropic.com\"]\n\
require = true",
    );
    pp(
        &mut r,
        "A project file that narrows: no network at all, only `target` and `/tmp` writable, and \
one more secret hidden.",
    );
    example(
        &mut r,
        "[sandbox]\n\
network = \"deny\"\n\
writable = [\"target\", \"/tmp\"]\n\
deny_read = [\"config/master.key\"]",
    );
    pp(
        &mut r,
        "The section inside another tool's configuration file, given with `--config`:",
    );
    example(
        &mut r,
        "[tool]\n\
name = \"other\"\n\
\n\
[sandbox]\n\
writable = [\".\", \"/tmp\", \"~/.cache/pip\"]",
    );

    sh(&mut r, "SEE ALSO");
    r.text(md("sbx(1)"));
    r.control("SH", ["VERSION"]);
    r.text([roman(format!("v{}", env!("CARGO_PKG_VERSION")))]);
    Ok(r.render())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{
        self, BannerMode, EnvMode, NetworkMode, SandboxTable, Source, UnixSockets,
    };
    use serde::de::{self, Visitor};
    use serde::Deserialize;

    /// A deserializer that only records the field or variant names a type
    /// asks for, so the tests can list what `SandboxTable` accepts.
    struct Names<'a>(&'a mut &'static [&'static str]);

    impl<'de> de::Deserializer<'de> for Names<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(de::Error::custom("names only"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("names only"))
        }
        fn deserialize_enum<V: Visitor<'de>>(
            self,
            _: &'static str,
            variants: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = variants;
            Err(de::Error::custom("names only"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map
            identifier ignored_any
        }
    }

    fn names<T: for<'de> Deserialize<'de>>() -> Vec<&'static str> {
        let mut names: &'static [&'static str] = &[];
        let _ = T::deserialize(Names(&mut names));
        assert!(!names.is_empty(), "no names recorded");
        names.to_vec()
    }

    fn key(name: &str) -> &'static Key {
        KEYS.iter()
            .find(|k| k.name == name)
            .unwrap_or_else(|| panic!("{name} is not documented"))
    }

    fn parse(text: &str) -> anyhow::Result<config::Layer> {
        config::parse(Source::Default, text)
    }

    #[test]
    fn documented_keys_are_the_keys_sandbox_table_accepts() {
        let mut accepted = names::<SandboxTable>();
        let mut documented: Vec<&str> = KEYS.iter().map(|k| k.name).collect();
        accepted.sort_unstable();
        documented.sort_unstable();
        assert_eq!(
            accepted, documented,
            "a [sandbox] key was added or removed: describe it in generate::KEYS (man page, \
schema), the README's table, then regenerate with SBX_BLESS=1"
        );
    }

    #[test]
    fn documented_enums_are_the_values_config_accepts() {
        fn check(name: &str, mut accepted: Vec<&'static str>) {
            let Type::Enum(documented) = key(name).ty else {
                panic!("{name} is not documented as an enum")
            };
            let mut documented = documented.to_vec();
            documented.sort_unstable();
            accepted.sort_unstable();
            assert_eq!(documented, accepted, "{name}");
        }
        check("network", names::<NetworkMode>());
        check("unix_sockets", names::<UnixSockets>());
        check("env", names::<EnvMode>());
        check("banner", names::<BannerMode>());
    }

    #[test]
    fn every_default_and_example_loads() {
        for k in KEYS {
            let mut values = vec![k.example];
            values.extend(k.default);
            if let Type::Enum(all) = k.ty {
                let quoted: Vec<String> = all.iter().map(|v| format!("\"{v}\"")).collect();
                for q in quoted {
                    parse(&format!("[sandbox]\n{} = {q}\n", k.name))
                        .unwrap_or_else(|e| panic!("{}: {e}", k.name));
                }
            }
            for v in values {
                parse(&format!("[sandbox]\n{} = {v}\n", k.name))
                    .unwrap_or_else(|e| panic!("{} = {v}: {e}", k.name));
            }
        }
    }

    #[test]
    fn a_file_with_every_schema_key_loads() {
        let schema: Value = serde_json::from_str(&schema().unwrap()).unwrap();
        let props = schema["properties"]["sandbox"]["properties"]
            .as_object()
            .unwrap();
        let mut text = String::from("[sandbox]\n");
        for name in props.keys() {
            text += &format!("{name} = {}\n", key(name).example);
        }
        let layer = parse(&text).unwrap();
        let t = layer.table;
        // Every field was set, so none of them is missing from the schema.
        let set = [
            t.enabled.is_some(),
            t.require.is_some(),
            t.filesystem.is_some(),
            t.writable.is_some(),
            t.deny_read.is_some(),
            t.deny_write.is_some(),
            t.network.is_some(),
            t.network_allowlist.is_some(),
            t.allow_unsandboxed.is_some(),
            t.unix_sockets.is_some(),
            t.env.is_some(),
            t.env_passthrough.is_some(),
            t.shell.is_some(),
            t.banner.is_some(),
            t.bwrap.is_some(),
        ];
        assert!(set.iter().all(|s| *s), "{text}");
        assert_eq!(props.len(), names::<SandboxTable>().len());
    }

    #[test]
    fn schema_entries_have_type_and_description() {
        let schema: Value = serde_json::from_str(&schema().unwrap()).unwrap();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        let sandbox = &schema["properties"]["sandbox"];
        assert_eq!(sandbox["additionalProperties"], false);
        for (name, prop) in sandbox["properties"].as_object().unwrap() {
            assert!(prop.get("type").is_some(), "{name}");
            assert!(prop["description"].as_str().is_some(), "{name}");
            assert_eq!(
                prop.get("default").is_some(),
                key(name).default.is_some(),
                "{name}"
            );
        }
    }

    #[test]
    fn documented_credential_variables_are_removed() {
        use crate::policy::is_credential_var;
        for suffix in CREDENTIAL_VAR_SUFFIXES {
            assert!(is_credential_var(&format!("MY{suffix}")), "{suffix}");
        }
        for part in CREDENTIAL_VAR_PARTS {
            assert!(is_credential_var(&format!("A{part}B")), "{part}");
        }
        for name in CREDENTIAL_VAR_NAMES {
            assert!(is_credential_var(name), "{name}");
        }
        assert!(!is_credential_var("PATH") && !is_credential_var("HOME"));
        assert!(crate::policy::is_credential_env(
            "DATABASE_URL",
            "postgres://u:p@host/db"
        ));
    }

    #[test]
    fn man_pages_render() {
        let page = man().unwrap();
        assert!(page.starts_with(".ie \\n(.g .ds Aq \\(aq\n.el .ds Aq '\n.TH sbx 1 \"\" "));
        assert_eq!(page.matches(".ds Aq \\(aq").count(), 1, "one preamble");
        for section in [
            ".SH NAME",
            ".SH SYNOPSIS",
            ".SH DESCRIPTION",
            ".SH OPTIONS",
            ".SH SUBCOMMANDS",
            ".SH \"SHELL MODE\"",
            ".SH \"EXIT STATUS\"",
            ".SH ENVIRONMENT",
            ".SH FILES",
            ".SH SECURITY",
            ".SH VERSION",
        ] {
            assert!(page.contains(section), "{section}");
        }
        assert!(!page.contains("sbx\\-run(1)"), "no page of its own");
        let page = config_man().unwrap();
        for k in KEYS {
            assert!(page.contains(&format!("\\fB{}\\fR = ", k.name.replace('-', "\\-"))));
        }
    }
}
