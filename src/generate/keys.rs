//! The configuration keys, described once for sbx.toml(5) and the JSON Schema.

use anyhow::{Context, Result};
use serde_json::{json, Map, Value};

/// How a configuration value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Bool,
    /// One of these strings.
    Enum(&'static [&'static str]),
    /// `true`, `false` or `"read-only"`.
    Filesystem,
    /// `true`, `false` or `"reduced"`.
    Require,
    /// An array of paths.
    Paths,
    /// An array of allowlist entries.
    Hosts,
    /// An array of environment variable names.
    VarNames,
    /// One absolute path.
    AbsPath,
    /// A whole number above zero.
    Count,
    /// A size: bytes, or a string with K, M, G or T.
    Size,
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
        ty: Type::Require,
        default: Some("false"),
        default_text: "",
        meaning: "`true`: when the full sandbox (bubblewrap, Seatbelt) cannot be enforced, refuse with \
exit status 125 instead of running the command in reduced mode or unsandboxed. `\"reduced\"` \
(Linux): accept reduced mode (Landlock and seccomp, what it does not enforce said on every run), \
refuse to run unsandboxed. `false`: the best sandbox available, or none, loudly.",
        project: "may only make it stricter: `true` over `\"reduced\"` over `false`.",
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
        ty: Type::Enum(&["deny", "own", "allow"]),
        default: Some("\"own\""),
        default_text: "",
        meaning: "`\"own\"`: the command may make Unix sockets in `$TMPDIR` (`/tmp/sbx-UID`, a tmpfs \
of the sandbox's own, nowhere else: Landlock) and connect to those (Python's multiprocessing, tsx, \
build servers), never to the host's: sbx's PID 1 decides each connection; it may then make no \
symbolic link in `/tmp`, `/var/tmp`, `/run` or `$XDG_RUNTIME_DIR`, where one could lead a host \
program to its sockets. `\"deny\"`: no Unix socket at all. `\"allow\"`: the host's too (Docker's socket, ssh-agent, D-Bus, tmux: each can be a way out \
of the sandbox), said on every run. On Linux not with `network = \"allow\"`, and refused in \
reduced mode unless `\"allow\"`. On macOS (restricted filesystem) in a `$TMPDIR` made for each \
run under `/private/tmp/sbx-UID`, where in `/tmp` and the user's `$TMPDIR` no directory or link \
may then be made; `\"allow\"` gives the same there (with a warning).",
        project: "may narrow it (`\"allow\"` to `\"own\"` to `\"deny\"`), never widen it.",
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
    Key {
        name: "backend",
        ty: Type::Enum(&["auto", "bwrap", "reduced"]),
        default: Some("\"auto\""),
        default_text: "",
        meaning: "Which sandbox runs on Linux: `\"bwrap\"` (full mode), `\"reduced\"` (Landlock and \
seccomp applied by sbx itself, for containers and CI where bubblewrap cannot start; what it does not \
enforce is said on every run), or `\"auto\"`: bubblewrap, and reduced mode where bubblewrap cannot \
start. Ignored on macOS.",
        project: "ignored with a warning: trusted files only.",
        example: "\"reduced\"",
    },
    Key {
        name: "max_processes",
        ty: Type::Count,
        default: Some("4096"),
        default_text: "",
        meaning: "How many processes (and threads) the sandbox may hold at once: a fork bomb stops \
there, a build never gets near it. Counted in the sandbox's own user namespace (Linux 5.14 and \
later), so the user's other processes do not count; the kernel does not apply it to root, which \
`sbx check` says. Not set on macOS, which counts processes per user (said by `sbx check`).",
        project: "may lower it, never raise it.",
        example: "512",
    },
    Key {
        name: "max_open_files",
        ty: Type::Count,
        default: None,
        default_text: "not limited by sbx",
        meaning: "How many files each process may have open.",
        project: "may set or lower it, never raise it.",
        example: "1024",
    },
    Key {
        name: "max_file_size",
        ty: Type::Size,
        default: None,
        default_text: "not limited by sbx",
        meaning: "How large a file the command may write (bytes, or `\"100M\"`, `\"2G\"`); a write \
past it stops the command, and sbx says which limit did.",
        project: "may set or lower it, never raise it.",
        example: "\"2G\"",
    },
    Key {
        name: "max_memory",
        ty: Type::Size,
        default: None,
        default_text: "not limited by sbx",
        meaning: "How much memory the command may use, in all its processes together (no swap where \
the kernel counts it). Enforced on Linux by a cgroup of the run's own, where the machine lets the \
user make one (root, or a delegated cgroup such as a systemd user session's); past it, the kernel \
kills the largest process and sbx says so. Where it cannot be enforced, every run and `sbx check` \
say so.",
        project: "may set or lower it, never raise it.",
        example: "\"8G\"",
    },
    Key {
        name: "cpu_time",
        ty: Type::Count,
        default: None,
        default_text: "not limited by sbx",
        meaning: "How many seconds of CPU time each process may use; past it the process is \
stopped, and sbx says which limit did.",
        project: "may set or lower it, never raise it.",
        example: "3600",
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
            Type::Require => {
                json!({"type": ["boolean", "string"], "enum": [true, false, "reduced"]})
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
            Type::Count => json!({"type": "integer", "minimum": 1}),
            Type::Size => json!({
                "type": ["integer", "string"],
                "minimum": 1,
                "pattern": "^[0-9]+([KMGTkmgt](i?B)?|B)?$"
            }),
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
