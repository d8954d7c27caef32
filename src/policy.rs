//! Resolution: command line + configuration layers + host facts → [`Policy`].
//!
//! This is the one place where precedence is decided (defaults, user file,
//! `--config`/`$SBX_CONFIG`, project `.sbx.toml` which may only narrow, flags)
//! and where paths become absolute real paths. Apart from reading files and
//! resolving symlinks it has no side effects: nothing here creates, changes or
//! runs anything, so `sbx profile` can call it on any host.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Result};

use crate::cli::{NetworkArg, PolicyArgs};
use crate::config::{
    self, BannerMode, EnvMode, FsSetting, Layer, NetworkMode, Source, UnixSockets,
};
use crate::netrule::{HostPattern, HostRule};

/// The platform a policy is resolved and rendered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Platform {
    Linux,
    Macos,
}

impl Platform {
    /// The platform sbx is running on.
    pub fn host() -> Platform {
        if cfg!(target_os = "macos") {
            Platform::Macos
        } else {
            Platform::Linux
        }
    }
}

/// What a path turned out to be when the policy was resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Dir,
    File,
    Missing,
}

/// The network as the command will see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    Deny,
    Allow,
    Allowlist(Vec<HostRule>),
}

/// A credential path whose reads are denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The path as written (e.g. `$HOME/.ssh`), absolute.
    pub written: PathBuf,
    /// Its real path, when it exists.
    pub real: Option<PathBuf>,
    pub kind: Kind,
}

/// A "runs later" path inside a writable root: made read-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protected {
    pub path: PathBuf,
    pub kind: Kind,
    /// Missing now; created empty before the run so it can be made read-only
    /// (only inside `.git`, where git would create it anyway).
    pub create: bool,
    /// Device and inode when the policy was resolved (`None`: missing). A
    /// path that exists after the run with another identity was created or
    /// replaced meanwhile, and is neutralised (see `exec::run_sandboxed`).
    pub identity: Option<Identity>,
}

/// What tells a file apart from another that took its place: device and
/// inode (an inode number freed by a deletion is often given to the very next
/// file created in the same directory), the birth time (set when a file is
/// created, and never again), and the type; for a symlink, where it points.
/// Where the file system keeps no birth time, the change time stands in: it
/// is set at creation too, but also by any change (an entry added to a
/// directory, a file edited in place), so there a change made outside the
/// sandbox during the run reads as a replacement (moved aside: safe, noisy).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Identity {
    dev: u64,
    ino: u64,
    born: Born,
    mode: u32,
    #[serde(with = "hex_path_opt")]
    target: Option<PathBuf>,
}

/// A path written as the hex of its bytes, so that any path (not only
/// UTF-8 ones) survives a JSON round trip.
pub mod hex_path {
    use std::path::{Path, PathBuf};

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn encode(path: &Path) -> String {
        path.as_os_str()
            .as_encoded_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    pub fn decode(text: &str) -> Option<PathBuf> {
        let text: std::ffi::OsString =
            std::os::unix::ffi::OsStringExt::from_vec(decode_bytes(text)?);
        Some(PathBuf::from(text))
    }

    pub fn decode_bytes(text: &str) -> Option<Vec<u8>> {
        if !text.len().is_multiple_of(2) {
            return None;
        }
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
            .collect()
    }

    pub fn serialize<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&encode(path))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        let text = String::deserialize(d)?;
        decode(&text).ok_or_else(|| serde::de::Error::custom("not a hex-encoded path"))
    }
}

/// [`hex_path`] for an optional path.
mod hex_path_opt {
    use std::path::PathBuf;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match path {
            Some(p) => s.serialize_some(&super::hex_path::encode(p)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(text) => super::hex_path::decode(&text)
                .map(Some)
                .ok_or_else(|| serde::de::Error::custom("not a hex-encoded path")),
            None => Ok(None),
        }
    }
}

/// When a file came to be, as well as the file system can tell.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
enum Born {
    /// Birth time (seconds and nanoseconds since the epoch).
    At(u64, u32),
    /// No birth time here: the change time.
    Changed(i64, i64),
}

impl Identity {
    /// The identity of what is at `path` now (not following a final link).
    pub fn of(path: &Path) -> Option<Identity> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::symlink_metadata(path).ok()?;
        Some(Identity {
            dev: m.dev(),
            ino: m.ino(),
            born: match m.created().map(|t| t.duration_since(std::time::UNIX_EPOCH)) {
                Ok(Ok(d)) => Born::At(d.as_secs(), d.subsec_nanos()),
                _ => Born::Changed(m.ctime(), m.ctime_nsec()),
            },
            mode: m.mode() & 0o170000,
            target: m
                .file_type()
                .is_symlink()
                .then(|| std::fs::read_link(path).ok())
                .flatten(),
        })
    }
}

/// A git config file and what it set when the policy was resolved.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub struct GitConfigWatch {
    #[serde(with = "hex_path")]
    pub path: PathBuf,
    pub identity: Option<Identity>,
    /// Its content before the run (parsed by git only if it was replaced).
    #[serde(with = "hex_bytes")]
    pub before: Vec<u8>,
}

/// Bytes written as hex (a config file need not be UTF-8).
mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        super::hex_path::decode_bytes(&text).ok_or_else(|| serde::de::Error::custom("not hex"))
    }
}

/// A system path made readable in `filesystem = "read-only"` mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SystemPath {
    Dir(PathBuf),
    /// A symlink such as `/bin -> usr/bin` on merged-/usr systems.
    Symlink {
        path: PathBuf,
        target: PathBuf,
    },
}

/// Changes to the environment the command inherits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvPlan {
    /// Start from an empty environment (`env = "minimal"`).
    pub clear: bool,
    /// Variables set (in minimal mode: every variable kept).
    pub set: Vec<(String, String)>,
    /// Credential variables removed (inherit mode).
    pub unset: Vec<String>,
}

/// Everything decided about one run.
#[derive(Debug, Clone)]
pub struct Policy {
    pub platform: Platform,
    pub enabled: bool,
    pub require: bool,
    pub allow_unsandboxed: bool,
    pub filesystem: FsSetting,
    /// The home directory as given (lexical).
    pub home: PathBuf,
    /// Real path of the project root.
    pub project: PathBuf,
    /// Real path of the working directory.
    pub cwd: PathBuf,
    /// Writable roots: real paths, shallowest first, none inside another.
    pub writable: Vec<PathBuf>,
    /// "Runs later" paths inside writable roots, made read-only.
    pub protected: Vec<Protected>,
    /// Directories between a writable root and a protected path, made mount
    /// points of themselves so that they cannot be renamed away.
    pub pins: Vec<PathBuf>,
    /// Git config files that exist and are mounted read-only, with what
    /// they set before the run. git on the host replaces such a file
    /// whenever it writes it (a lock file renamed over it), which detaches
    /// the read-only mount inside a running sandbox: after the run, a
    /// replaced one is checked for settings it did not have before (Linux;
    /// Seatbelt's rules follow the path, whatever is there).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub git_configs: Vec<GitConfigWatch>,
    /// sbx's per-project caches for tools whose own is not writable (the
    /// variable pointed at each is in `env`), all in one directory that
    /// records the project in [`TOOL_CACHE_OWNER`]; created before a run.
    pub tool_caches: Vec<PathBuf>,
    /// Credential paths whose reads are denied.
    pub credentials: Vec<Credential>,
    /// `.env` files found in the project (real paths).
    pub env_files: Vec<PathBuf>,
    /// The empty, unreadable file bound over credential files (in sbx's
    /// cache directory, which is read-only inside if it lies in a writable root).
    pub placeholder: PathBuf,
    pub network: Network,
    pub unix_sockets: bool,
    pub env: EnvPlan,
    /// The inner shell for shell mode.
    pub shell: PathBuf,
    pub banner: BannerMode,
    /// An explicitly configured bubblewrap.
    pub bwrap: Option<PathBuf>,
    /// System paths readable in read-only mode.
    pub system_paths: Vec<SystemPath>,
    /// The command (argv).
    pub command: Vec<OsString>,
    /// Warnings to print on every run (ignored widenings, skipped paths, ...).
    pub warnings: Vec<String>,
    /// Where each effective value came from (for `sbx check`).
    pub origins: Vec<(&'static str, Source)>,
}

/// Facts about the host that resolution depends on.
#[derive(Debug, Clone)]
pub struct Host {
    pub platform: Platform,
    pub cwd: PathBuf,
    pub home: PathBuf,
    /// The environment sbx was started with.
    pub env: Vec<(OsString, OsString)>,
    /// Real path of the running sbx executable.
    pub self_exe: Option<PathBuf>,
    /// Where the `.env` discovery cache lives (outside the sandbox's reach).
    pub cache_dir: Option<PathBuf>,
    /// Whether to look for `.env` files in the project (not needed to render macOS).
    pub scan_env_files: bool,
}

impl Host {
    /// A variable of the host environment.
    pub fn var(&self, name: &str) -> Option<&OsString> {
        self.env.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }
}

/// Credential paths, relative to the home directory. Config can add to this
/// list (`deny_read`); no key removes an entry.
pub const CREDENTIALS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".config/gh",
    ".netrc",
    ".docker/config.json",
    ".kube",
    ".git-credentials",
    ".config/gcloud",
    ".azure",
    ".pypirc",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".vault-token",
    ".password-store",
    ".local/share/keyrings",
    ".gem/credentials",
    ".terraform.d/credentials.tfrc.json",
    ".config/op",
    ".config/git/credentials",
    ".pgpass",
];

/// Tools that fail without a writable cache: the variable that moves it,
/// the name of sbx's per-project replacement, and where the tool keeps it by
/// default, relative to home (on Linux and on macOS).
const TOOL_CACHES: &[(&str, &str, &[&str])] = &[
    ("npm_config_cache", "npm", &[".npm"]),
    (
        "GOCACHE",
        "go-build",
        &[".cache/go-build", "Library/Caches/go-build"],
    ),
    ("UV_CACHE_DIR", "uv", &[".cache/uv"]),
];

/// A short stable name for a project directory (FNV-1a of its path).
fn project_key(project: &Path) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in project.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The file in a project's tool cache directory that names its project.
pub const TOOL_CACHE_OWNER: &str = "PROJECT";

/// The directory of a project's tool caches under `projects`: named after
/// the project's key, and checked against the project it records, so that
/// two projects never share one, even if a command chose a path whose key
/// collides (the key is short and not cryptographic). The first free or
/// matching of `KEY`, `KEY-1`, `KEY-2`, ...
fn tool_cache_base(projects: &Path, project: &Path) -> PathBuf {
    let key = project_key(project);
    let mut n = 0;
    loop {
        let dir = if n == 0 {
            projects.join(&key)
        } else {
            projects.join(format!("{key}-{n}"))
        };
        match std::fs::read(dir.join(TOOL_CACHE_OWNER)) {
            Ok(owner) if owner == project.as_os_str().as_encoded_bytes() => return dir,
            Ok(_) => n += 1,
            Err(_) => return dir,
        }
    }
}

/// Coding agents' own tokens, each with the agent's state directory. A
/// command the agent runs never needs them, so they are hidden like any
/// credential, unless the user's own configuration or flags make that state
/// directory (or a directory inside it that holds the token) writable: that
/// is how the agent itself is run in sbx (`sbx run --writable ~/.claude --
/// claude`), and it needs its token. A project file cannot do it.
pub const AGENT_TOKENS: &[(&str, &str)] = &[
    (".claude", ".claude/.credentials.json"),
    (".codex", ".codex/auth.json"),
    (".gemini", ".gemini/oauth_creds.json"),
];

/// Credential paths that exist only on macOS.
pub const CREDENTIALS_MACOS: &[&str] = &["Library/Keychains"];

/// "Runs later" paths relative to the project root.
/// Agent and editor settings can run commands on the host (hooks, tasks, MCP
/// servers), so they are on it too.
pub const PROJECT_PROTECTED: &[&str] = &[
    ".git/hooks",
    ".git/config",
    ".sbx.toml",
    ".envrc",
    ".vscode",
    ".idea",
    ".claude",
    ".mcp.json",
    ".codex",
    ".gemini",
    ".cursor",
    ".zed",
    // `initializeCommand` runs on the host before the container starts.
    ".devcontainer",
    ".devcontainer.json",
    // mise trusts a config by its path: an edit keeps the trust.
    "mise.toml",
    ".mise.toml",
    ".mise",
];

/// "Runs later" paths relative to the home directory, protected when the
/// home directory is writable.
pub const HOME_PROTECTED: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".gitconfig",
    ".config/git",
    ".config/fish",
    ".config/sbx",
    ".config/autostart",
    ".config/systemd",
    ".config/environment.d",
    ".bash_aliases",
    ".bashrc.d",
    ".inputrc",
    ".pam_environment",
    ".local/bin",
    "bin",
    ".cargo/config.toml",
    ".cargo/bin",
    // npm's `node-options` and `script-shell`.
    ".npmrc",
    ".vimrc",
    ".config/nvim",
    ".tmux.conf",
    ".xsessionrc",
];

/// `.env` files kept readable: committed templates.
pub const ENV_TEMPLATES: &[&str] = &[".env.example", ".env.sample", ".env.template"];

/// Whether a file name is a `.env` file whose reads are denied.
pub fn is_env_file_name(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    (lower == ".env" || lower.starts_with(".env.")) && !ENV_TEMPLATES.contains(&lower.as_str())
}

/// Variables kept by `env = "minimal"` (plus `LC_*` and the passthrough list).
const MINIMAL_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "TZ",
    "TMPDIR",
    "COLORTERM",
];

/// Endings of the variable names removed as credentials (upper case).
pub const CREDENTIAL_VAR_SUFFIXES: &[&str] = &[
    "TOKEN",
    "PASSWORD",
    "PASSWD",
    "_SECRET",
    "_PWD",
    "_PAT",
    "_API_KEY",
    "_ACCESS_KEY",
    "KEY",
    "_SESSION",
    "_CREDENTIALS",
    "_AUTH",
    "_DSN",
    "_PASS",
    "PASSPHRASE",
    "APIKEY",
    "_JWT",
    "WEBHOOK",
    "WEBHOOK_URL",
];
/// What a removed variable's name may contain (`TOKEN_`: Terraform's
/// `TF_TOKEN_<host>`, `AWS_BEARER_TOKEN_BEDROCK`; `OP_SESSION_<account>`).
pub const CREDENTIAL_VAR_PARTS: &[&str] = &[
    "SECRET",
    "_AUTH_",
    "TOKEN_",
    "PASSWORD",
    "_CREDENTIAL",
    "KEYFILE",
    "OP_SESSION_",
];
/// Names removed as they are.
pub const CREDENTIAL_VAR_NAMES: &[&str] = &[
    "AWS_ACCESS_KEY_ID",
    "SSH_AUTH_SOCK",
    "GPG_AGENT_INFO",
    "DOCKER_AUTH_CONFIG",
    "KUBECONFIG",
    // NuGet's feed list, with a password per feed (JSON).
    "VSS_NUGET_EXTERNAL_FEED_ENDPOINTS",
];

/// Keys that give a secret away in a query string or a connection string
/// (`?password=`, `;Password=`), lower case, with their `=`.
const SECRET_VALUE_KEYS: &[&str] = &[
    "password=",
    "passwd=",
    "pwd=",
    "secret=",
    "token=",
    "key=",
    "apikey=",
    "sig=",
    "accountkey=",
    "sharedaccesskey=",
    "sharedaccesssignature=",
];

/// How tokens put in a URL's user part begin (GitHub, GitLab, Slack).
const TOKEN_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glpat-",
    "xox",
];

/// Whether an environment variable looks like a credential, by its name.
#[cfg(test)]
pub fn is_credential_var(name: &str) -> bool {
    is_credential_env(name, "")
}

/// Whether an environment variable looks like a credential, by its name or
/// by its value: a password in any URL in it (`DATABASE_URL`, the second
/// index of `PIP_EXTRA_INDEX_URL`), in a query or connection string
/// (`?password=`, `;Password=`), or a bundler host credential
/// (`BUNDLE_GEMS__EXAMPLE__COM=user:pass`).
pub fn is_credential_env(name: &str, value: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    CREDENTIAL_VAR_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || CREDENTIAL_VAR_PARTS.iter().any(|p| upper.contains(p))
        || CREDENTIAL_VAR_NAMES.contains(&upper.as_str())
        || (upper.starts_with("BUNDLE_") && upper.contains("__") && value.contains(':'))
        || value_holds_secret(value)
}

/// A secret in the user part of any URL of the value, in a query or
/// connection string parameter, or an Oracle-style `user/password@host`.
fn value_holds_secret(value: &str) -> bool {
    // Most values (PATH, LANG, ...) have none of these: no search then (this
    // runs for every variable, on every run).
    if !value.contains(['=', '@']) {
        return false;
    }
    let url_secret = value.match_indices("://").any(|(i, _)| {
        // The authority ends at the path; a password may hold `;` or `,`.
        let authority = value[i + 3..]
            .split(['/', '?', '#', ' '])
            .next()
            .unwrap_or("");
        authority
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| secret_userinfo(userinfo))
    });
    let lower = value.to_ascii_lowercase();
    let keyed = SECRET_VALUE_KEYS.iter().any(|key| {
        lower.match_indices(key).any(|(i, _)| {
            // At the start of a parameter or of a word in its name
            // (`client_secret=`, `refresh_token=`, `api-key=`), not inside a
            // longer word (`monkey=`), and with a value.
            let starts = i == 0
                || matches!(
                    lower.as_bytes()[i - 1],
                    b'?' | b'&' | b';' | b' ' | b',' | b'_' | b'-'
                );
            let has_value = lower[i + key.len()..]
                .chars()
                .next()
                .is_some_and(|c| !matches!(c, '&' | ';' | ' ' | ','));
            starts && has_value
        })
    });
    url_secret || keyed || oracle_login(value)
}

/// A URL's user part that gives something away: `user:password`, or a
/// token on its own (`https://ghp_...@github.com`), told from a plain user
/// name (`git@`) by its length or its prefix.
fn secret_userinfo(userinfo: &str) -> bool {
    userinfo.contains(':')
        || userinfo.len() >= 20
        || TOKEN_PREFIXES.iter().any(|p| userinfo.starts_with(p))
}

/// `user/password@host` (Oracle's connect strings), without a scheme.
fn oracle_login(value: &str) -> bool {
    let Some((login, host)) = value.split_once('@') else {
        return false;
    };
    let Some((user, password)) = login.split_once('/') else {
        return false;
    };
    !value.contains("://")
        && !host.is_empty()
        && !password.is_empty()
        && !password.contains('/')
        && user
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '$' | '#'))
        && !value.contains(char::is_whitespace)
}

/// Whether a git config value given in the environment is an
/// authentication header (`http.extraHeader`) or otherwise a credential.
fn git_config_value_is_secret(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    lower.contains("authorization:") || lower.contains("bearer ") || value_holds_secret(value)
}

/// The merged settings before paths are resolved.
#[derive(Debug, Clone)]
struct Settings {
    enabled: bool,
    require: bool,
    filesystem: FsSetting,
    writable: Vec<(PathBuf, Source)>,
    /// Writable entries from the project file: may only narrow `writable`.
    project_writable: Option<(Vec<PathBuf>, PathBuf)>,
    deny_read: Vec<PathBuf>,
    deny_write: Vec<PathBuf>,
    network: NetworkMode,
    allowlist: Vec<HostRule>,
    allow_unsandboxed: bool,
    unix_sockets: UnixSockets,
    env: EnvMode,
    env_passthrough: Vec<String>,
    shell: Option<PathBuf>,
    banner: BannerMode,
    bwrap: Option<PathBuf>,
    origins: Vec<(&'static str, Source)>,
    warnings: Vec<String>,
}

impl Settings {
    fn defaults(project: &Path) -> Settings {
        Settings {
            enabled: true,
            require: false,
            filesystem: FsSetting::Restricted,
            writable: vec![
                (project.to_path_buf(), Source::Default),
                (PathBuf::from("/tmp"), Source::Default),
            ],
            project_writable: None,
            deny_read: Vec::new(),
            deny_write: Vec::new(),
            network: NetworkMode::Deny,
            allowlist: Vec::new(),
            allow_unsandboxed: true,
            unix_sockets: UnixSockets::Deny,
            env: EnvMode::Inherit,
            env_passthrough: Vec::new(),
            shell: None,
            banner: BannerMode::Auto,
            bwrap: None,
            origins: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn origin(&mut self, key: &'static str, source: &Source) {
        self.origins.retain(|(k, _)| *k != key);
        self.origins.push((key, source.clone()));
    }

    /// Apply a trusted layer (user file, `--config`): any value may change.
    fn apply_trusted(&mut self, layer: &Layer, home: &Path, project: &Path) -> Result<()> {
        let t = &layer.table;
        let src = &layer.source;
        macro_rules! take {
            ($field:ident) => {
                if let Some(v) = t.$field {
                    self.$field = v;
                    self.origin(stringify!($field), src);
                }
            };
        }
        take!(enabled);
        take!(require);
        take!(filesystem);
        take!(network);
        take!(allow_unsandboxed);
        take!(unix_sockets);
        take!(env);
        take!(banner);
        if let Some(list) = &t.writable {
            self.writable = list
                .iter()
                .map(|s| Ok((expand(s.get_ref(), home, project)?, src.clone())))
                .collect::<Result<_>>()?;
            self.origin("writable", src);
        }
        for s in t.deny_read.iter().flatten() {
            self.deny_read.push(expand(s.get_ref(), home, project)?);
            self.origin("deny_read", src);
        }
        for s in t.deny_write.iter().flatten() {
            self.deny_write.push(expand(s.get_ref(), home, project)?);
            self.origin("deny_write", src);
        }
        if let Some(list) = &layer.allowlist {
            self.allowlist = list.clone();
            self.origin("network_allowlist", src);
        }
        if let Some(list) = &t.env_passthrough {
            self.env_passthrough = list.iter().map(|s| s.get_ref().clone()).collect();
            self.origin("env_passthrough", src);
        }
        if let Some(s) = &t.shell {
            self.shell = Some(PathBuf::from(s.get_ref()));
            self.origin("shell", src);
        }
        if let Some(s) = &t.bwrap {
            self.bwrap = Some(PathBuf::from(s.get_ref()));
            self.origin("bwrap", src);
        }
        Ok(())
    }

    /// Apply the project file: only values that narrow the policy are taken;
    /// each attempted widening is ignored with a warning.
    fn apply_project(&mut self, layer: &Layer, home: &Path, project: &Path) -> Result<()> {
        let t = &layer.table;
        let src = &layer.source;
        let file = src.path().map(Path::to_path_buf).unwrap_or_default();
        let mut ignored = |key: &str, value: String, why: &str| {
            self.warnings.push(format!(
                "{}: ignored `{key} = {value}`: {why} (a project file can only narrow the policy; set it in your user config instead)",
                file.display()
            ));
        };
        let mut taken: Vec<&'static str> = Vec::new();
        if let Some(v) = t.enabled {
            if v || !self.enabled {
                self.enabled = v;
                taken.push("enabled");
            } else {
                ignored("enabled", "false".into(), "it would turn the sandbox off");
            }
        }
        if let Some(v) = t.require {
            if v || !self.require {
                self.require = v;
                taken.push("require");
            } else {
                ignored(
                    "require",
                    "false".into(),
                    "it would allow running unsandboxed",
                );
            }
        }
        if let Some(v) = t.filesystem {
            if fs_rank(v) <= fs_rank(self.filesystem) {
                self.filesystem = v;
                taken.push("filesystem");
            } else {
                ignored("filesystem", fs_text(v), "it would allow more writes");
            }
        }
        if let Some(v) = t.network {
            if net_rank(v) <= net_rank(self.network) {
                self.network = v;
                taken.push("network");
            } else {
                ignored(
                    "network",
                    format!("{:?}", net_text(v)),
                    "it would open the network",
                );
            }
        }
        if let Some(list) = &layer.allowlist {
            let trusted = self.allowlist.clone();
            let mut kept = Vec::new();
            for rule in list {
                if trusted.iter().any(|t| covers(t, rule)) {
                    kept.push(rule.clone());
                } else {
                    ignored(
                        "network_allowlist",
                        format!("[\"{rule}\"]"),
                        "the host is not in your own allowlist",
                    );
                }
            }
            self.allowlist = kept;
            taken.push("network_allowlist");
        }
        if let Some(v) = t.allow_unsandboxed {
            if !v || self.allow_unsandboxed {
                self.allow_unsandboxed = v;
                taken.push("allow_unsandboxed");
            } else {
                ignored(
                    "allow_unsandboxed",
                    "true".into(),
                    "it would allow leaving the sandbox",
                );
            }
        }
        if let Some(v) = t.unix_sockets {
            if v == UnixSockets::Deny || self.unix_sockets == UnixSockets::Allow {
                self.unix_sockets = v;
                taken.push("unix_sockets");
            } else {
                ignored(
                    "unix_sockets",
                    "\"allow\"".into(),
                    "it would open Unix sockets",
                );
            }
        }
        if let Some(v) = t.env {
            if v == EnvMode::Minimal || self.env == EnvMode::Inherit {
                self.env = v;
                taken.push("env");
            } else {
                ignored(
                    "env",
                    "\"inherit\"".into(),
                    "it would pass more variables in",
                );
            }
        }
        if let Some(list) = &t.env_passthrough {
            let mut kept = Vec::new();
            for name in list.iter().map(|s| s.get_ref()) {
                if self.env_passthrough.contains(name) {
                    kept.push(name.clone());
                } else {
                    ignored(
                        "env_passthrough",
                        format!("[\"{name}\"]"),
                        "it would pass a credential variable in",
                    );
                }
            }
            self.env_passthrough = kept;
            taken.push("env_passthrough");
        }
        if let Some(list) = &t.writable {
            let paths = list
                .iter()
                .map(|s| expand(s.get_ref(), home, project))
                .collect::<Result<Vec<_>>>()?;
            self.project_writable = Some((paths, file.clone()));
            taken.push("writable");
        }
        for s in t.deny_read.iter().flatten() {
            self.deny_read.push(expand(s.get_ref(), home, project)?);
            taken.push("deny_read");
        }
        for s in t.deny_write.iter().flatten() {
            self.deny_write.push(expand(s.get_ref(), home, project)?);
            taken.push("deny_write");
        }
        for (key, set) in [
            ("shell", t.shell.is_some()),
            ("banner", t.banner.is_some()),
            ("bwrap", t.bwrap.is_some()),
        ] {
            if set {
                ignored(key, "…".into(), "this key is for trusted files only");
            }
        }
        for key in taken {
            self.origin(key, src);
        }
        Ok(())
    }

    /// Apply the policy flags of the command line (trusted).
    fn apply_flags(&mut self, flags: &PolicyArgs, cwd: &Path, home: &Path) -> Result<()> {
        let src = Source::Flags;
        if let Some(n) = flags.network {
            self.network = match n {
                NetworkArg::Deny => NetworkMode::Deny,
                NetworkArg::Allow => NetworkMode::Allow,
                NetworkArg::Allowlist => NetworkMode::Allowlist,
            };
            self.origin("network", &src);
        }
        for d in &flags.allow_domain {
            let rule =
                HostRule::parse(d).map_err(|why| anyhow::anyhow!("--allow-domain {d:?}: {why}"))?;
            self.allowlist.push(rule);
            self.origin("network_allowlist", &src);
            if flags.network.is_none() {
                self.network = NetworkMode::Allowlist;
                self.origin("network", &src);
            }
        }
        for w in &flags.writable {
            let text = w.to_str().ok_or_else(|| {
                anyhow::anyhow!("--writable {}: the path is not valid UTF-8", w.display())
            })?;
            config::check_path_text(text).map_err(|why| anyhow::anyhow!("--writable: {why}"))?;
            self.writable.push((expand(text, home, cwd)?, src.clone()));
            self.origin("writable", &src);
        }
        if flags.read_only {
            self.filesystem = FsSetting::ReadOnly;
            self.origin("filesystem", &src);
        }
        if flags.require {
            self.require = true;
            self.origin("require", &src);
        }
        if flags.quiet {
            self.banner = BannerMode::Never;
            self.origin("banner", &src);
        }
        Ok(())
    }
}

fn fs_rank(f: FsSetting) -> u8 {
    match f {
        FsSetting::ReadOnly => 0,
        FsSetting::Restricted => 1,
        FsSetting::Unrestricted => 2,
    }
}

fn fs_text(f: FsSetting) -> String {
    match f {
        FsSetting::ReadOnly => "\"read-only\"".into(),
        FsSetting::Restricted => "true".into(),
        FsSetting::Unrestricted => "false".into(),
    }
}

fn net_rank(n: NetworkMode) -> u8 {
    match n {
        NetworkMode::Deny => 0,
        NetworkMode::Allowlist => 1,
        NetworkMode::Allow => 2,
    }
}

/// The config spelling of a network mode.
pub fn net_text(n: NetworkMode) -> &'static str {
    match n {
        NetworkMode::Deny => "deny",
        NetworkMode::Allowlist => "allowlist",
        NetworkMode::Allow => "allow",
    }
}

/// Whether a trusted allowlist rule already allows everything `candidate` allows.
fn covers(trusted: &HostRule, candidate: &HostRule) -> bool {
    let ports_ok = match (trusted.port, candidate.port) {
        (None, None) => true,
        (None, Some(p)) => p == 80 || p == 443,
        (Some(t), Some(c)) => t == c,
        (Some(_), None) => false,
    };
    let host_ok = match (&trusted.host, &candidate.host) {
        (a, b) if a == b => true,
        (HostPattern::Subdomains(d), HostPattern::Name(n)) => n.ends_with(&format!(".{d}")),
        (HostPattern::Subdomains(d), HostPattern::Subdomains(n)) => n.ends_with(&format!(".{d}")),
        _ => false,
    };
    ports_ok && host_ok
}

/// Expand `~` and make a configured path absolute (relative to `base`), then
/// normalise it lexically. `..` components are refused: a path that climbs out
/// of where it appears to point is a classic way to hide a widening.
pub fn expand(path: &str, home: &Path, base: &Path) -> Result<PathBuf> {
    config::check_path_text(path).map_err(|why| anyhow::anyhow!("{why}"))?;
    let p = if path == "~" {
        home.to_path_buf()
    } else if let Some(rest) = path.strip_prefix("~/") {
        home.join(rest)
    } else if path.starts_with('~') {
        bail!("{path:?}: `~user` is not supported (write the absolute path)");
    } else if path == "." {
        base.to_path_buf()
    } else {
        base.join(path)
    };
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::ParentDir => {
                bail!("{path:?}: `..` is not allowed in a policy path (write the path it means)")
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    Ok(out)
}

/// The real path of `p`, or `None` when it does not exist.
///
/// Like `realpath`, but every directory already resolved during this
/// resolution is remembered: the credential list, the protected paths and the
/// writable roots share long prefixes, and resolving each from `/` cost over
/// 250 `readlink` calls per run. A path with `.` or `..` goes to the system's
/// `realpath` (a `..` after a symlink must climb the physical tree).
fn real(p: &Path) -> Option<PathBuf> {
    let plain = p.is_absolute()
        && p.components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
    if !plain {
        return std::fs::canonicalize(p).ok();
    }
    REAL_MEMO.with(|memo| resolve_memo(&mut memo.borrow_mut(), p, 0))
}

/// What [`real`] found for each path, keyed by the path's bytes (hashing a
/// `Path` walks its components, which cost more than the lookups it saves).
type RealMemo = std::collections::HashMap<std::ffi::OsString, Option<PathBuf>>;

thread_local! {
    static REAL_MEMO: std::cell::RefCell<RealMemo> =
        std::cell::RefCell::new(std::collections::HashMap::new());
}

/// Forget what [`real`] remembered (at the start of each resolution).
fn forget_real_paths() {
    REAL_MEMO.with(|memo| memo.borrow_mut().clear());
}

fn resolve_memo(memo: &mut RealMemo, p: &Path, depth: u32) -> Option<PathBuf> {
    let (Some(parent), Some(name)) = (p.parent(), p.file_name()) else {
        return Some(p.to_path_buf()); // the root
    };
    if let Some(known) = memo.get(p.as_os_str()) {
        return known.clone();
    }
    let parent = resolve_memo(memo, parent, depth)?;
    let candidate = parent.join(name);
    let result = match std::fs::symlink_metadata(&candidate) {
        Err(_) => None,
        Ok(m) if m.file_type().is_symlink() => match std::fs::read_link(&candidate) {
            // Too many links: let the system give its answer (ELOOP).
            _ if depth > 40 => std::fs::canonicalize(&candidate).ok(),
            Ok(target) => {
                let joined = parent.join(target);
                let plain = joined
                    .components()
                    .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
                if plain {
                    resolve_memo(memo, &joined, depth + 1)
                } else {
                    std::fs::canonicalize(&joined).ok()
                }
            }
            Err(_) => None,
        },
        Ok(_) => Some(candidate),
    };
    memo.insert(p.as_os_str().to_owned(), result.clone());
    result
}

/// On macOS `/tmp`, `/var` and `/etc` are symlinks into `/private`, and Seatbelt
/// matches real paths. When rendering for macOS on another host the host cannot
/// resolve that, so the mapping is applied by spelling.
pub fn macos_real_spelling(p: &Path) -> PathBuf {
    for top in ["/tmp", "/var", "/etc"] {
        if let Ok(rest) = p.strip_prefix(top) {
            let real = Path::new("/private").join(top.trim_start_matches('/'));
            return if rest.as_os_str().is_empty() {
                real
            } else {
                real.join(rest)
            };
        }
    }
    p.to_path_buf()
}

fn kind_of(p: &Path) -> Kind {
    match std::fs::metadata(p) {
        Ok(m) if m.is_dir() => Kind::Dir,
        Ok(_) => Kind::File,
        Err(_) => Kind::Missing,
    }
}

/// The highest ancestor of `project` (itself included) that holds `.git`,
/// below the home directory and never `/`.
fn outermost_repository(project: &Path, home: &Path) -> PathBuf {
    let mut top = project.to_path_buf();
    for dir in project.ancestors() {
        if dir == Path::new("/") || home.starts_with(dir) {
            break;
        }
        if dir.join(".git").exists() {
            top = dir.to_path_buf();
        }
    }
    top
}

/// A regular file owned by the user running sbx, outside the system
/// directories (a `.env` symlink target worth masking).
fn is_users_own_file(p: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    const SYSTEM: &[&str] = &[
        "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/boot", "/nix",
        "/proc", "/sys", "/dev", "/snap",
    ];
    !SYSTEM.iter().any(|s| p.starts_with(s))
        && std::fs::metadata(p)
            .is_ok_and(|m| m.is_file() && m.uid() == nix::unistd::geteuid().as_raw())
}

/// Why the default `.` must not make `project` writable, if it must not:
/// the working directory the command was started in decides it, and a
/// command can choose where the next one starts. Home and its ancestors, the
/// hidden directories of home (`~/.config`, `~/.local/bin`, ...), a directory
/// on `PATH`, and outside home any directory that is not a git repository
/// hold what runs later (or everything) rather than a project.
fn unsafe_default_project(project: &Path, home_real: &Path, host: &Host) -> Option<String> {
    if home_real.starts_with(project) {
        return Some("it is your home directory or holds it (not in a project)".into());
    }
    if let Ok(rest) = project.strip_prefix(home_real) {
        let hidden = rest
            .components()
            .next()
            .is_some_and(|c| c.as_os_str().as_encoded_bytes().first() == Some(&b'.'));
        if hidden {
            return Some(
                "it lies in a hidden directory of your home (settings, caches, programs)".into(),
            );
        }
    } else if !project.join(".git").exists() {
        return Some("it is outside your home directory and not a git repository".into());
    }
    let on_path = host.var("PATH").is_some_and(|path| {
        std::env::split_paths(path).any(|d| real(&d).as_deref() == Some(project))
    });
    if on_path {
        return Some("it is a directory on PATH".into());
    }
    None
}

/// The project root: the nearest ancestor of `cwd` holding `.git`, but never
/// the home directory, one of its ancestors, or `/` (a dotfiles repository in
/// `$HOME` must not make all of home writable); else `cwd` itself.
pub fn find_project(cwd: &Path, home: &Path) -> PathBuf {
    for dir in cwd.ancestors() {
        if dir == Path::new("/") || home.starts_with(dir) {
            break;
        }
        if dir.join(".git").exists() {
            return dir.to_path_buf();
        }
    }
    cwd.to_path_buf()
}

/// Resolve the policy for one run.
pub fn resolve(host: &Host, flags: &PolicyArgs, command: Vec<OsString>) -> Result<Policy> {
    forget_real_paths();
    let cwd = real(&host.cwd).unwrap_or_else(|| host.cwd.clone());
    let home = host.home.clone();
    let home_real = real(&home).unwrap_or_else(|| home.clone());
    let project = match &flags.project {
        Some(p) => {
            let abs = host.cwd.join(p);
            real(&abs).ok_or_else(|| {
                anyhow::anyhow!(
                    "--project {}: no such directory (give an existing directory)",
                    p.display()
                )
            })?
        }
        None => find_project(&cwd, &home_real),
    };

    // Layers, lowest precedence first.
    let xdg = host.var("XDG_CONFIG_HOME").map(PathBuf::from);
    let user_path = config::user_file(xdg.as_deref(), &home);
    let user = config::load(Source::User(user_path.clone()), true)?;
    // SBX_CONFIG is set once and read by every run, wherever it starts: a
    // relative one would name a different file in each directory, one the
    // sandboxed command may have written.
    let from_env = host
        .var("SBX_CONFIG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    if let Some(p) = from_env.as_ref().filter(|p| !p.is_absolute()) {
        bail!(
            "SBX_CONFIG={}: not an absolute path (a relative one would name another file in every directory sbx runs in); set it to an absolute path",
            p.display()
        );
    }
    let explicit_path = flags.config.clone().or(from_env).map(|p| host.cwd.join(p));
    let explicit = match &explicit_path {
        Some(p) => config::load(Source::Explicit(p.clone()), false)?,
        None => None,
    };
    let project_path = config::project_file(&cwd, &project);
    let project_layer = match &project_path {
        // A project file that is also the explicit config is trusted as such.
        Some(p) if Some(p) != explicit_path.as_ref() => {
            config::load(Source::Project(p.clone()), true)?
        }
        _ => None,
    };

    let mut s = Settings::defaults(&project);
    for layer in [&user, &explicit].into_iter().flatten() {
        s.apply_trusted(layer, &home, &project)?;
    }
    if let Some(layer) = &project_layer {
        s.apply_project(layer, &home, &project)?;
    }
    s.apply_flags(flags, &host.cwd, &home)?;

    let mut warnings = std::mem::take(&mut s.warnings);
    let alias = |p: PathBuf| match host.platform {
        Platform::Macos => macos_real_spelling(&p),
        Platform::Linux => p,
    };

    // Writable roots.
    let mut writable: Vec<PathBuf> = Vec::new();
    if s.filesystem == FsSetting::Restricted {
        // The default `.` never makes home (or one of its ancestors, such as
        // `/`) writable: that is what happens when sbx runs in a directory
        // that is not a project, and it would hand over every dotfile and
        // PATH directory. An explicit `writable = ["~"]` still can.
        let mut wanted: Vec<PathBuf> = Vec::new();
        let unsafe_project = match flags.project {
            Some(_) => None,
            None => unsafe_default_project(&project, &home_real, host),
        };
        for (p, source) in &s.writable {
            let is_default_project = *source == Source::Default && *p == project;
            if is_default_project {
                if let Some(why) = &unsafe_project {
                    warnings.push(format!(
                        "{} is not made writable: {why}; cd into a project or pass --project DIR",
                        project.display()
                    ));
                    continue;
                }
            }
            wanted.push(p.clone());
        }
        if host.platform == Platform::Macos {
            if let Some(t) = host.var("TMPDIR").filter(|t| !t.is_empty()) {
                wanted.push(PathBuf::from(t));
            }
        }
        let mut trusted = Vec::new();
        for p in wanted {
            match real(&p) {
                Some(r) => trusted.push(alias(r)),
                None => warnings.push(format!(
                    "writable path {} does not exist; it is not made writable",
                    p.display()
                )),
            }
        }
        writable = match &s.project_writable {
            None => trusted,
            Some((paths, file)) => {
                // The command line is applied after the project file: its
                // `--writable` paths stay whatever the project narrows.
                let mut kept: Vec<PathBuf> = s
                    .writable
                    .iter()
                    .filter(|(_, source)| *source == Source::Flags)
                    .filter_map(|(p, _)| real(p).map(&alias))
                    .collect();
                for p in paths {
                    let Some(r) = real(p).map(&alias) else {
                        warnings.push(format!(
                            "{}: writable path {} does not exist; it is not made writable",
                            file.display(),
                            p.display()
                        ));
                        continue;
                    };
                    if trusted.iter().any(|t| r.starts_with(t)) {
                        kept.push(r);
                    } else {
                        warnings.push(format!(
                            "{}: ignored `writable = [\"{}\"]`: it is not inside a path your own config makes writable (a project file can only narrow the policy; set it in your user config instead)",
                            file.display(),
                            p.display()
                        ));
                    }
                }
                kept
            }
        };
        writable.sort_by_key(|p| p.components().count());
        let mut roots: Vec<PathBuf> = Vec::new();
        for p in writable {
            if !roots.iter().any(|r| p.starts_with(r)) {
                roots.push(p);
            }
        }
        writable = roots;
    }
    // Caches some tools cannot work without writing (npm, go's build cache,
    // uv): when theirs in the home directory is not writable, they get one of
    // sbx's, kept per project so that what one project's command puts in it
    // reaches no other project's builds.
    let mut tool_caches: Vec<(String, PathBuf)> = Vec::new();
    if s.filesystem == FsSetting::Restricted {
        let base = host
            .cache_dir
            .as_ref()
            .and_then(|c| real(c).map(&alias))
            .map(|c| tool_cache_base(&c.join("projects"), &project))
            // Inside a writable root sbx's cache directory is read-only (it
            // holds sbx's own state), and so would be the caches in it.
            .filter(|b| !writable.iter().any(|w| b.starts_with(w)));
        for (var, name, defaults) in TOOL_CACHES {
            let Some(base) = &base else { break };
            let writable_now = defaults.iter().any(|rel| {
                let default = real(&home.join(rel))
                    .map(&alias)
                    .unwrap_or_else(|| alias(home_real.join(rel)));
                writable.iter().any(|w| default.starts_with(w))
            });
            if writable_now || host.var(var).is_some() {
                continue;
            }
            let dir = base.join(name);
            writable.push(dir.clone());
            tool_caches.push((var.to_string(), dir));
        }
        writable.sort_by_key(|p| p.components().count());
    }
    let in_writable = |p: &Path| writable.iter().find(|w| p.starts_with(w)).cloned();

    // Credentials: the built-in list plus deny_read, at written and real path.
    let mut cred_paths: Vec<PathBuf> = CREDENTIALS.iter().map(|c| home.join(c)).collect();
    if host.platform == Platform::Macos {
        cred_paths.extend(CREDENTIALS_MACOS.iter().map(|c| home.join(c)));
    }
    let user_roots: Vec<PathBuf> = s
        .writable
        .iter()
        .filter_map(|(p, _)| real(p).map(&alias))
        .collect();
    for (dir, token) in AGENT_TOKENS {
        let agent_dir = real(&home.join(dir)).map_or_else(|| home.join(dir), &alias);
        let token_path = agent_dir.join(
            Path::new(token)
                .strip_prefix(dir)
                .unwrap_or(Path::new(token)),
        );
        let given = writable.iter().any(|w| {
            w.starts_with(&agent_dir) && token_path.starts_with(w) && user_roots.contains(w)
        });
        if !given {
            cred_paths.push(home.join(token));
        }
    }
    cred_paths.extend(s.deny_read.iter().cloned());
    let mut credentials = Vec::new();
    for written in cred_paths {
        let r = real(&written);
        let kind = r.as_deref().map_or(Kind::Missing, kind_of);
        let credential = Credential {
            written: alias(written),
            real: r.map(&alias),
            kind,
        };
        if !credentials.contains(&credential) {
            credentials.push(credential);
        }
    }

    // "Runs later" paths inside writable roots.
    let mut protected: Vec<Protected> = Vec::new();
    let mut pins: Vec<PathBuf> = Vec::new();
    let mut git_configs: Vec<GitConfigWatch> = Vec::new();
    if s.filesystem == FsSetting::Restricted {
        let mut candidates: Vec<PathBuf> = Vec::new();
        let git = project.join(".git");
        for rel in PROJECT_PROTECTED {
            // Hooks and config of a worktree or submodule (`.git` is a file)
            // live in another directory, handled as any other path.
            if rel.starts_with(".git/") && !git.is_dir() {
                continue;
            }
            candidates.push(project.join(rel));
        }
        let git_is_link = std::fs::symlink_metadata(&git).is_ok_and(|m| m.file_type().is_symlink());
        if git_is_link {
            // `.git -> elsewhere` (a separate git dir): the link itself is
            // watched, or the command could swap it for a repository of its
            // own; the hooks and config behind it are candidates below.
            candidates.push(git.clone());
        }
        if git.is_file() {
            // `gitdir: PATH` of a worktree or submodule checkout: rewritten,
            // it points git at a directory the command prepared.
            candidates.push(git.clone());
        } else if git.is_dir() {
            // `commondir` sends git to another directory for its config and
            // hooks; a normal repository has none, so it is watched. The
            // same files of linked worktrees live under .git/worktrees.
            candidates.push(git.join("commondir"));
            // The main worktree's own config, read when
            // `extensions.worktreeConfig` is set (sparse-checkout sets it).
            candidates.push(git.join("config.worktree"));
            for wt in std::fs::read_dir(git.join("worktrees"))
                .into_iter()
                .flatten()
                .flatten()
            {
                candidates.push(wt.path().join("commondir"));
                candidates.push(wt.path().join("gitdir"));
                candidates.push(wt.path().join("config.worktree"));
            }
        }
        // A hooks directory set by `core.hooksPath` (husky, lefthook) runs
        // like .git/hooks, whether the repository or the user's own git
        // config sets it.
        // git's user config under $XDG_CONFIG_HOME, when that is not
        // ~/.config (whose git directory is on the home list).
        let xdg_git = xdg
            .as_ref()
            .filter(|x| x.is_absolute())
            .map(|x| x.join("git"));
        candidates.extend(xdg_git.clone());
        for config in [
            git.join("config"),
            git.join("config.worktree"),
            home.join(".gitconfig"),
            home.join(".config/git/config"),
        ]
        .into_iter()
        .chain(xdg_git.map(|g| g.join("config")))
        {
            if let Some(hooks) = hooks_path(&config, &project, &home) {
                candidates.push(hooks);
            }
        }
        // Submodules keep their hooks and config under .git/modules.
        let mut git_dirs = vec![git.clone()];
        if git.is_dir() {
            let modules = submodule_git_dirs(&git.join("modules"));
            if modules.len() > MAX_SUBMODULES {
                bail!(
                    "{}: more than {MAX_SUBMODULES} submodule git directories, whose hooks and config sbx cannot all keep read-only; the command was not run (remove those no submodule uses)",
                    git.join("modules").display()
                );
            }
            for module in modules {
                candidates.push(module.join("hooks"));
                candidates.push(module.join("config"));
                candidates.push(module.join("config.worktree"));
                git_dirs.push(module);
            }
        }
        if let Some(p) = &project_path {
            candidates.push(p.clone());
        }
        // Only those inside a writable root count (home itself, or for
        // example a writable ~/.config).
        candidates.extend(HOME_PROTECTED.iter().map(|r| home.join(r)));
        candidates.push(user_path.clone());
        candidates.extend(explicit_path.iter().cloned());
        candidates.extend(host.cache_dir.iter().cloned());
        candidates.extend(s.deny_write.iter().cloned());
        for c in candidates {
            let lexical = alias(c.clone());
            // A protected path that is itself a symlink living in a writable
            // root cannot be mounted over (a mount follows the link), and the
            // command could replace the link whatever it points to: it is
            // watched by the identity of the link itself and moved aside
            // after the run if replaced.
            let link_meta = std::fs::symlink_metadata(&c)
                .ok()
                .filter(|m| m.file_type().is_symlink());
            if link_meta.is_some() {
                let place = match (c.parent().and_then(real), c.file_name()) {
                    (Some(parent), Some(name)) => alias(parent.join(name)),
                    _ => continue,
                };
                if in_writable(&place).is_some() {
                    let entry = Protected {
                        identity: Identity::of(&place),
                        path: place,
                        kind: Kind::Missing,
                        create: false,
                    };
                    if !protected.contains(&entry) {
                        protected.push(entry);
                    }
                }
                // And what it points to is protected like any other path
                // (`.git/hooks -> ../githooks` keeps the hooks in the tree),
                // except a linked `.git` itself: git must write its objects
                // and refs there; its hooks and config are candidates of
                // their own.
                if c == git {
                    continue;
                }
            }
            let resolved = match real(&c) {
                Some(r) => alias(r),
                None => {
                    // A missing path is watched at its first missing
                    // component, placed under the real directory that exists:
                    // that component is what the command would create.
                    let mut missing = c.as_path();
                    while let Some(parent) = missing.parent() {
                        if real(parent).is_some() || parent.parent().is_none() {
                            break;
                        }
                        missing = parent;
                    }
                    match (missing.parent().and_then(real), missing.file_name()) {
                        (Some(parent), Some(name)) => alias(parent.join(name)),
                        _ => lexical.clone(),
                    }
                }
            };
            let Some(root) = in_writable(&resolved) else {
                continue;
            };
            if resolved == root {
                // A path that must stay read-only cannot be a writable root
                // (sbx's cache or config, a hooks directory, ...).
                bail!(
                    "{} is both a writable path and one sbx keeps read-only (code that runs later, or sbx's own files): remove it from `writable`",
                    root.display()
                );
            }
            let mut kind = kind_of(&resolved);
            let mut create = false;
            if kind == Kind::Missing
                && resolved
                    .parent()
                    .is_some_and(|p| git_dirs.iter().any(|g| g == p))
            {
                // `.git/hooks` or `.git/config` in a repository that has none:
                // created empty (as git itself would) so they can be mounted
                // read-only. Nothing is created in the working tree.
                if resolved.ends_with("hooks") {
                    (kind, create) = (Kind::Dir, true);
                } else if resolved.ends_with("config") {
                    (kind, create) = (Kind::File, true);
                }
            }
            let identity = Identity::of(&resolved);
            let entry = Protected {
                path: resolved.clone(),
                kind,
                create,
                identity,
            };
            if protected.contains(&entry) {
                continue;
            }
            let is_config = resolved
                .file_name()
                .is_some_and(|n| n == "config" || n == "config.worktree");
            let in_git_dir = resolved.components().any(|c| c.as_os_str() == ".git")
                || resolved.parent().is_some_and(|p| {
                    git_dirs
                        .iter()
                        .any(|g| real(g).is_some_and(|r| alias(r) == p))
                });
            if kind == Kind::File && is_config && in_git_dir {
                git_configs.push(GitConfigWatch {
                    path: resolved.clone(),
                    identity: entry.identity.clone(),
                    before: std::fs::read(&resolved).unwrap_or_default(),
                });
            }
            protected.push(entry);
            let mut dir = resolved.parent();
            while let Some(d) = dir {
                if d == root || !d.starts_with(&root) {
                    break;
                }
                if kind_of(d) == Kind::Dir && !pins.contains(&d.to_path_buf()) {
                    pins.push(d.to_path_buf());
                }
                dir = d.parent();
            }
        }
        pins.sort_by_key(|p| p.components().count());
        protected.sort_by_key(|p| p.path.components().count());
    }

    // .env files in the project. A `.env` symlink may point outside the
    // project (`.env -> ~/secrets/app.env`): its target is masked too when
    // it is the user's own file outside the system directories. A target
    // owned by someone else or in /usr, /lib, /etc, ... is left alone, or the
    // command could plant `.env -> /usr/lib/libc.so.6` and break every later
    // sandbox; such files are readable by their own path anyway.
    // The scan starts at the outermost repository around the project (below
    // home): a `.git` planted in a subdirectory must not move the project
    // root down and leave a `.env` above it unmasked.
    let scan_root = outermost_repository(&project, &home_real);
    let (env_files, unreadable) = if host.scan_env_files {
        let (found, unreadable) =
            crate::envscan::find_with_unreadable(&scan_root, host.cache_dir.as_deref());
        let mut found: Vec<PathBuf> = found
            .into_iter()
            .filter(|p| p.starts_with(&scan_root) || is_users_own_file(p))
            .collect();
        // dotenv loaders also look in the directories above the project
        // (python-dotenv's find_dotenv walks up): their `.env` files, up to
        // and including home, are masked too. A few directory listings.
        for dir in scan_root.ancestors().skip(1) {
            if dir == Path::new("/") {
                break;
            }
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let name = entry.file_name();
                if name.to_str().is_some_and(is_env_file_name) {
                    if let Ok(real) = std::fs::canonicalize(entry.path()) {
                        if real.is_file() && (real.starts_with(dir) || is_users_own_file(&real)) {
                            found.push(real);
                        }
                    }
                }
            }
            if dir == home_real {
                break;
            }
        }
        found.sort();
        found.dedup();
        (found, unreadable)
    } else {
        (Vec::new(), Vec::new())
    };
    // A directory the scan could not list may hold a `.env`: it is masked
    // whole, like a credential directory.
    for dir in unreadable {
        credentials.push(Credential {
            written: dir.clone(),
            real: Some(dir),
            kind: Kind::Dir,
        });
    }
    // Every directory between a writable root and a masked `.env` becomes a
    // mount point of itself: renaming one (say to `node_modules`, which the
    // scan prunes) would otherwise hide the file from the next scan.
    if s.filesystem != FsSetting::ReadOnly {
        for file in &env_files {
            let Some(root) = in_writable(file) else {
                continue;
            };
            let mut dir = file.parent();
            while let Some(d) = dir {
                if d == root || !d.starts_with(&root) {
                    break;
                }
                if !pins.iter().any(|p| p == d) {
                    pins.push(d.to_path_buf());
                }
                dir = d.parent();
            }
        }
        pins.sort_by_key(|p| p.components().count());
    }

    // The placeholder bound over credential files: in sbx's cache, unless
    // that lies where some sandbox could write (then it could be swapped for
    // a link to a secret between the check and the mount): /dev/null then,
    // which hides the content just as well, only readable as empty.
    let cache_real = host.cache_dir.as_deref().and_then(real);
    let placeholder = match cache_real {
        Some(dir)
            if s.filesystem == FsSetting::Restricted
                && !writable.iter().any(|w| dir.starts_with(w)) =>
        {
            dir.join("empty")
        }
        _ => PathBuf::from("/dev/null"),
    };

    // Network.
    let network = match s.network {
        NetworkMode::Deny => Network::Deny,
        NetworkMode::Allow => Network::Allow,
        NetworkMode::Allowlist => Network::Allowlist(s.allowlist.clone()),
    };

    // Environment.
    let shell = match &s.shell {
        Some(p) => p.clone(),
        None if Path::new("/bin/bash").exists() => PathBuf::from("/bin/bash"),
        None => PathBuf::from("/bin/sh"),
    };
    let mut env = plan_env(host, s.env, &s.env_passthrough, &shell);
    for (var, dir) in &tool_caches {
        env.set.push((var.clone(), dir.display().to_string()));
    }
    env.set.sort();

    let system_paths = match (s.filesystem, host.platform) {
        (FsSetting::ReadOnly, Platform::Linux) => system_paths(),
        (FsSetting::ReadOnly, Platform::Macos) => developer_dirs(host),
        _ => Vec::new(),
    };

    Ok(Policy {
        platform: host.platform,
        enabled: s.enabled,
        require: s.require,
        allow_unsandboxed: s.allow_unsandboxed,
        filesystem: s.filesystem,
        home: alias(home),
        project: alias(project),
        cwd: alias(cwd),
        writable,
        protected,
        pins,
        git_configs,
        tool_caches: tool_caches.into_iter().map(|(_, dir)| dir).collect(),
        credentials,
        env_files,
        placeholder,
        network,
        unix_sockets: s.unix_sockets == UnixSockets::Allow,
        env,
        shell,
        banner: s.banner,
        bwrap: s.bwrap,
        system_paths,
        command,
        warnings,
        origins: s.origins,
    })
}

/// The directory `core.hooksPath` names in a git config file, made
/// absolute (relative to the working tree; `~/` expanded), if any. A plain
/// line scan: enough to find the key git itself reads, and a miss only
/// leaves the hooks directory unprotected as it was before.
fn hooks_path(config: &Path, worktree: &Path, home: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(config).ok()?;
    let mut in_core = false;
    let mut found = None;
    for line in text.lines() {
        let mut line = line.trim();
        if let Some(rest) = line.strip_prefix('[') {
            // `[core]`, possibly followed by a key on the same line.
            let (head, after) = rest.split_once(']').unwrap_or((rest, ""));
            in_core = head.trim().eq_ignore_ascii_case("core");
            line = after.trim();
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if in_core && key.trim().eq_ignore_ascii_case("hookspath") {
            // A comment starts at `;` or `#` outside quotes.
            let value = value.trim();
            let value = match value.strip_prefix('"') {
                Some(quoted) => quoted.split('"').next().unwrap_or(""),
                None => value.split([';', '#']).next().unwrap_or("").trim(),
            };
            found = Some(if let Some(rest) = value.strip_prefix("~/") {
                home.join(rest)
            } else {
                worktree.join(value)
            });
        }
    }
    found
}

/// The git directories of submodules (`.git/modules/NAME`, nested ones
/// included): those holding a `config` file.
/// More submodule git directories than this are refused: each takes
/// several mounts, and bubblewrap's argument list has a limit (a command
/// could otherwise make every later run fail at it, or crawl).
const MAX_SUBMODULES: usize = 500;

fn submodule_git_dirs(modules: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![modules.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if out.len() > MAX_SUBMODULES {
                break;
            }
            if path.join("config").is_file() {
                stack.push(path.join("modules"));
                out.push(path);
            } else if out.len() < 1000 {
                // Submodule names may contain slashes: look one level deeper.
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

/// Decide which variables the command gets.
fn plan_env(host: &Host, mode: EnvMode, passthrough: &[String], shell: &Path) -> EnvPlan {
    let mut plan = EnvPlan {
        clear: mode == EnvMode::Minimal,
        ..EnvPlan::default()
    };
    // $SHELL naming sbx itself would make every program that spawns $SHELL
    // start a nested sbx; inside, the shell is the inner shell.
    let shell_is_sbx = host
        .var("SHELL")
        .and_then(|s| real(Path::new(s)))
        .is_some_and(|s| Some(&s) == host.self_exe.as_ref());
    // Config given to git through the environment (GIT_CONFIG_COUNT,
    // GIT_CONFIG_KEY_n, GIT_CONFIG_VALUE_n) goes as a whole when one value
    // is a credential: a gap in the numbering makes git refuse to run.
    let git_config_secret = host.env.iter().any(|(k, v)| {
        k.to_str()
            .is_some_and(|k| k.starts_with("GIT_CONFIG_VALUE_") || k.starts_with("GIT_CONFIG_KEY_"))
            && v.to_str().is_some_and(git_config_value_is_secret)
    });
    let is_git_config = |k: &str| {
        k == "GIT_CONFIG_COUNT"
            || k.starts_with("GIT_CONFIG_KEY_")
            || k.starts_with("GIT_CONFIG_VALUE_")
    };
    for (k, v) in &host.env {
        let (Some(k), Some(v)) = (k.to_str(), v.to_str()) else {
            continue;
        };
        let passed = passthrough.iter().any(|p| p == k);
        if k == "SBX_SANDBOX" || (k == "SHELL" && shell_is_sbx) {
            continue;
        }
        let secret = is_credential_env(k, v)
            || (git_config_secret && is_git_config(k))
            || (k == "GIT_CONFIG_PARAMETERS" && git_config_value_is_secret(v));
        if secret && !passed {
            if !plan.clear {
                plan.unset.push(k.to_string());
            }
            continue;
        }
        if plan.clear && (MINIMAL_ENV.contains(&k) || k.starts_with("LC_") || passed) {
            plan.set.push((k.to_string(), v.to_string()));
        }
    }
    if shell_is_sbx {
        plan.set.push(("SHELL".into(), shell.display().to_string()));
    }
    plan.set.push(("SBX_SANDBOX".into(), "1".into()));
    plan.set.sort();
    plan.unset.sort();
    plan
}

/// The system paths readable in read-only mode, as they exist on this host.
fn system_paths() -> Vec<SystemPath> {
    const PATHS: &[&str] = &[
        "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix",
    ];
    let mut out = Vec::new();
    for p in PATHS {
        let path = PathBuf::from(p);
        match std::fs::symlink_metadata(&path) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(&path) {
                    out.push(SystemPath::Symlink { path, target });
                }
            }
            Ok(m) if m.is_dir() => out.push(SystemPath::Dir(path)),
            _ => {}
        }
    }
    out
}

/// macOS: the developer directory the `/usr/bin/git`, `python3` and `clang`
/// shims run their tools from (`xcode-select`'s choice, or `$DEVELOPER_DIR`),
/// so that they work in read-only mode: an Xcode installation is not among
/// the system directories the profile reads.
fn developer_dirs(host: &Host) -> Vec<SystemPath> {
    let chosen = host
        .var("DEVELOPER_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute())
        .or_else(|| std::fs::read_link("/private/var/db/xcode_select_link").ok());
    chosen
        .and_then(|d| std::fs::canonicalize(d).ok())
        .filter(|d| d.is_dir() && d.parent().is_some())
        .map(SystemPath::Dir)
        .into_iter()
        .collect()
}

/// A policy with fixed paths for renderer tests: home `/home/t`, project
/// `/home/t/proj`, the default grants, and a few credentials of each kind.
#[cfg(test)]
pub(crate) fn test_policy(platform: Platform) -> Policy {
    let home = PathBuf::from(match platform {
        Platform::Linux => "/home/t",
        Platform::Macos => "/Users/t",
    });
    let project = home.join("proj");
    let tmp = PathBuf::from(match platform {
        Platform::Linux => "/tmp",
        Platform::Macos => "/private/tmp",
    });
    let cred = |rel: &str, kind: Kind| Credential {
        written: home.join(rel),
        real: (kind != Kind::Missing).then(|| home.join(rel)),
        kind,
    };
    Policy {
        platform,
        enabled: true,
        require: false,
        allow_unsandboxed: true,
        filesystem: FsSetting::Restricted,
        home: home.clone(),
        project: project.clone(),
        cwd: project.clone(),
        writable: vec![tmp, project.clone()],
        protected: vec![
            Protected {
                path: project.join(".envrc"),
                kind: Kind::File,
                create: false,
                identity: None,
            },
            Protected {
                path: project.join(".git/config"),
                kind: Kind::File,
                create: false,
                identity: None,
            },
            Protected {
                path: project.join(".git/hooks"),
                kind: Kind::Dir,
                create: true,
                identity: None,
            },
        ],
        pins: vec![project.join(".git")],
        git_configs: Vec::new(),
        tool_caches: Vec::new(),
        credentials: vec![
            cred(".ssh", Kind::Dir),
            cred(".netrc", Kind::File),
            cred(".aws", Kind::Missing),
        ],
        env_files: vec![project.join(".env"), project.join("sub/.env.local")],
        placeholder: home.join(".cache/sbx/empty"),
        network: Network::Deny,
        unix_sockets: false,
        env: EnvPlan {
            clear: false,
            set: vec![("SBX_SANDBOX".into(), "1".into())],
            unset: vec!["GITHUB_TOKEN".into()],
        },
        shell: PathBuf::from("/bin/bash"),
        banner: BannerMode::Auto,
        bwrap: None,
        system_paths: Vec::new(),
        command: vec!["echo".into(), "hi".into()],
        warnings: Vec::new(),
        origins: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_variables() {
        for v in [
            "GITHUB_TOKEN",
            "ANTHROPIC_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "SSH_AUTH_SOCK",
            "my_secret_thing",
        ] {
            assert!(is_credential_var(v), "{v}");
        }
        for v in [
            "PATH",
            "HOME",
            "TERM",
            "CARGO_HOME",
            "EDITOR",
            "PWD",
            "OLDPWD",
            "KEYMAP",
        ] {
            assert!(!is_credential_var(v), "{v}");
        }
        for v in [
            "DB_PASS",
            "GPG_PASSPHRASE",
            "STRIPE_APIKEY",
            "SESSION_JWT",
            "SLACK_WEBHOOK_URL",
            "PGPASSWORD",
            "MYSQL_PWD",
            "GITHUB_PAT",
            "NPM_CONFIG__AUTH",
            "TOKEN",
            "PASSWORD",
            "SENTRY_DSN",
            "NPM_CONFIG__AUTH_TOKEN",
        ] {
            assert!(is_credential_var(v), "{v}");
        }
        assert!(is_credential_env(
            "DATABASE_URL",
            "postgres://app:hunter2@db:5432/x"
        ));
        assert!(!is_credential_env("DATABASE_URL", "postgres://db:5432/x"));
        assert!(!is_credential_env("HOMEPAGE", "https://example.com/a:b@c"));
        // Found by the seventh review.
        for (k, v) in [
            ("AWS_BEARER_TOKEN_BEDROCK", "x"),
            ("TF_TOKEN_app_terraform_io", "x"),
            ("BUNDLE_GEMS__CONTRIBSYS__COM", "user:pass"),
            (
                "PIP_EXTRA_INDEX_URL",
                "https://pypi.org/simple https://u:p@corp.example/simple",
            ),
            (
                "GOPROXY",
                "https://proxy.golang.org,https://u:p@corp.example",
            ),
            ("JDBC_URL", "jdbc:postgresql://db/x?user=a&password=b"),
            (
                "ConnectionStrings__Default",
                "Server=db;User Id=a;Password=b;",
            ),
            ("VSS_NUGET_EXTERNAL_FEED_ENDPOINTS", "{}"),
            ("SOME_URL", "https://api.example/x?access_token=abc"),
            // Found by the eighth review.
            (
                "AZURE_STORAGE",
                "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc==;",
            ),
            (
                "SB",
                "Endpoint=sb://x/;SharedAccessKeyName=k;SharedAccessKey=abc=",
            ),
            (
                "BLOB_URL",
                "https://a.blob.core.windows.net/c?sv=1&sig=abc%3D",
            ),
            ("GITLAB_URL", "https://gitlab.example/api?private_token=abc"),
            ("OAUTH", "client_id=x&client_secret=abc"),
            ("REFRESH", "grant_type=refresh_token&refresh_token=abc"),
            (
                "REPO_URL",
                "https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/o/r",
            ),
            ("DB", "postgres://u:pa;ss@db/x"),
            ("ORACLE_CONN", "scott/tiger@db.example:1521/orcl"),
            ("BW_SESSION", "abc"),
            ("OP_SESSION_my", "abc"),
            ("ORG_GRADLE_PROJECT_signingKey", "abc"),
            ("GOOGLE_CLOUD_KEYFILE_JSON", "{}"),
        ] {
            assert!(is_credential_env(k, v), "{k}={v}");
        }
        for (k, v) in [
            ("TOKENIZERS_PARALLELISM", "false"),
            ("BUNDLE_PATH", "vendor/bundle"),
            ("BUNDLE_GEMFILE", "/x/Gemfile"),
            ("GOPROXY", "https://proxy.golang.org,direct"),
            ("REPO_URL", "ssh://git@github.com/o/r.git"),
            ("HOMEPAGE", "https://example.com/?email=me@example.com"),
            ("NODE_PATH", "/usr/lib/node_modules"),
            ("KEYMAP", "us"),
            ("XDG_SESSION_TYPE", "tty"),
            ("LESS", "-R"),
            // A bare `password=` with nothing after it gives nothing away.
            ("SQL", "select password= from t"),
        ] {
            assert!(!is_credential_env(k, v), "{k}={v}");
        }
    }

    #[test]
    fn git_config_in_the_environment_goes_whole_when_it_holds_a_secret() {
        let host = |vars: &[(&str, &str)]| Host {
            platform: Platform::Linux,
            cwd: "/".into(),
            home: "/home/t".into(),
            env: vars
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
            self_exe: None,
            cache_dir: None,
            scan_env_files: false,
        };
        let vars = [
            ("GIT_CONFIG_COUNT", "2"),
            ("GIT_CONFIG_KEY_0", "safe.directory"),
            ("GIT_CONFIG_VALUE_0", "*"),
            ("GIT_CONFIG_KEY_1", "http.extraHeader"),
            ("GIT_CONFIG_VALUE_1", "Authorization: Bearer abc"),
        ];
        let plan = plan_env(&host(&vars), EnvMode::Inherit, &[], Path::new("/bin/sh"));
        for (k, _) in vars {
            assert!(plan.unset.contains(&k.to_string()), "{k}: {plan:?}");
        }
        let plan = plan_env(
            &host(&vars[..3]),
            EnvMode::Inherit,
            &[],
            Path::new("/bin/sh"),
        );
        assert!(plan.unset.is_empty(), "{plan:?}");
        // A token in a key (`url.<base>.insteadOf`), and the single-variable
        // form git also reads.
        let vars = [
            ("GIT_CONFIG_COUNT", "1"),
            (
                "GIT_CONFIG_KEY_0",
                "url.https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/.insteadOf",
            ),
            ("GIT_CONFIG_VALUE_0", "https://github.com/"),
            (
                "GIT_CONFIG_PARAMETERS",
                "'http.extraheader'='AUTHORIZATION: basic abc'",
            ),
        ];
        let plan = plan_env(&host(&vars), EnvMode::Inherit, &[], Path::new("/bin/sh"));
        for (k, _) in vars {
            assert!(plan.unset.contains(&k.to_string()), "{k}: {plan:?}");
        }
    }

    #[test]
    fn tool_caches_of_two_projects_never_share_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let projects = tmp.path();
        let a = Path::new("/home/t/a");
        let base = tool_cache_base(projects, a);
        assert_eq!(base, projects.join(project_key(a)));
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(base.join(TOOL_CACHE_OWNER), "/home/t/a").unwrap();
        assert_eq!(tool_cache_base(projects, a), base);
        // Another project whose key is the same (as a command could arrange
        // with a path of its choosing) gets the next directory.
        std::fs::write(base.join(TOOL_CACHE_OWNER), "/home/t/b").unwrap();
        let other = tool_cache_base(projects, a);
        assert_eq!(other, projects.join(format!("{}-1", project_key(a))));
    }

    #[test]
    fn env_file_names() {
        for n in [".env", ".env.local", ".env.production", ".ENV"] {
            assert!(is_env_file_name(n), "{n}");
        }
        for n in [
            ".envrc",
            ".env.example",
            ".env.sample",
            ".env.template",
            "env",
            ".environment",
        ] {
            assert!(!is_env_file_name(n), "{n}");
        }
    }

    #[test]
    fn remembered_real_paths_agree_with_realpath() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(base.join("a/b/c")).unwrap();
        std::fs::write(base.join("a/b/c/f"), "x").unwrap();
        std::os::unix::fs::symlink("a/b", base.join("rel")).unwrap();
        std::os::unix::fs::symlink(base.join("a"), base.join("abs")).unwrap();
        std::os::unix::fs::symlink("../b/c", base.join("a/b/up")).unwrap();
        std::os::unix::fs::symlink("loop2", base.join("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", base.join("loop2")).unwrap();
        std::os::unix::fs::symlink("missing", base.join("dangling")).unwrap();
        forget_real_paths();
        for rel in [
            "a/b/c/f",
            "rel/c/f",
            "abs/b/c",
            "a/b/up/f",
            "rel/up",
            "loop1",
            "dangling",
            "nope",
            "a/b/c/f/x",
            "rel",
            "abs",
        ] {
            let p = base.join(rel);
            assert_eq!(real(&p), std::fs::canonicalize(&p).ok(), "{rel}");
            // And again, from the memo.
            assert_eq!(
                real(&p),
                std::fs::canonicalize(&p).ok(),
                "{rel} (remembered)"
            );
        }
    }

    #[test]
    fn expand_paths() {
        let home = Path::new("/home/u");
        let base = Path::new("/p");
        assert_eq!(expand("~", home, base).unwrap(), PathBuf::from("/home/u"));
        assert_eq!(
            expand("~/x/./y", home, base).unwrap(),
            PathBuf::from("/home/u/x/y")
        );
        assert_eq!(expand(".", home, base).unwrap(), PathBuf::from("/p"));
        assert_eq!(expand("sub", home, base).unwrap(), PathBuf::from("/p/sub"));
        assert_eq!(expand("/abs", home, base).unwrap(), PathBuf::from("/abs"));
        assert!(expand("/tmp/../etc", home, base).is_err());
        assert!(expand("~root/x", home, base).is_err());
        assert!(expand("/a\nb", home, base).is_err());
    }

    #[test]
    fn macos_spelling() {
        assert_eq!(
            macos_real_spelling(Path::new("/tmp")).to_str(),
            Some("/private/tmp")
        );
        assert_eq!(
            macos_real_spelling(Path::new("/var/folders/x")),
            PathBuf::from("/private/var/folders/x")
        );
        assert_eq!(
            macos_real_spelling(Path::new("/private/tmp")),
            PathBuf::from("/private/tmp")
        );
        assert_eq!(
            macos_real_spelling(Path::new("/tmpx")),
            PathBuf::from("/tmpx")
        );
        assert_eq!(
            macos_real_spelling(Path::new("/Users/u")),
            PathBuf::from("/Users/u")
        );
    }

    #[test]
    fn project_root_never_home() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        std::fs::create_dir_all(home.join(".git")).unwrap();
        std::fs::create_dir_all(home.join("code/repo/.git")).unwrap();
        std::fs::create_dir_all(home.join("code/repo/sub")).unwrap();
        std::fs::create_dir_all(home.join("scratch")).unwrap();
        assert_eq!(
            find_project(&home.join("code/repo/sub"), &home),
            home.join("code/repo")
        );
        assert_eq!(
            find_project(&home.join("scratch"), &home),
            home.join("scratch")
        );
        assert_eq!(find_project(&home, &home), home);
    }

    #[test]
    fn allowlist_coverage() {
        let r = |s| HostRule::parse(s).unwrap();
        assert!(covers(&r("*.example.com"), &r("api.example.com")));
        assert!(covers(&r("example.com"), &r("example.com:443")));
        assert!(!covers(&r("example.com"), &r("example.com:22")));
        assert!(!covers(&r("*.example.com"), &r("example.com")));
        assert!(!covers(&r("example.com"), &r("evil.com")));
    }
}
