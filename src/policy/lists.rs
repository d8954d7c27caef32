//! The built-in lists: data only, each with the reason it holds what it
//! holds. Configuration can add to the credential and "runs later" lists;
//! nothing removes an entry.

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
/// the name of sbx's per-project replacement, where the tool keeps it by
/// default, relative to home (on Linux and on macOS), and the file in the
/// replacement the variable names, when it names a file.
pub(super) const TOOL_CACHES: &[(&str, &str, &[&str], Option<&str>)] = &[
    ("npm_config_cache", "npm", &[".npm"], None),
    (
        "GOCACHE",
        "go-build",
        &[".cache/go-build", "Library/Caches/go-build"],
        None,
    ),
    ("UV_CACHE_DIR", "uv", &[".cache/uv"], None),
    (
        "PIP_CACHE_DIR",
        "pip",
        &[".cache/pip", "Library/Caches/pip"],
        None,
    ),
    ("GOMODCACHE", "go-mod", &["go/pkg/mod"], None),
    // Gradle cannot run without writing its home (locks, the daemon's
    // registry); its init scripts there would run on the host's next build
    // if it were the user's own.
    ("GRADLE_USER_HOME", "gradle", &[".gradle"], None),
    // An interactive shell's history: ~/.bash_history is read-only, and
    // bash says nothing when it cannot save it.
    (
        "HISTFILE",
        "shell",
        &[".bash_history", ".zsh_history"],
        Some("history"),
    ),
];

/// Tool caches of macOS, redirected like [`TOOL_CACHES`]. Clang's (and
/// Swift's) module cache defaults to the per-user cache directory there
/// (`getconf DARWIN_USER_CACHE_DIR`), which is not made writable: modules
/// precompiled there are loaded by every later build of the user's, so a
/// command could plant one that changes what those builds compile (Codex
/// removed that write for the same reason). Each project gets a module
/// cache of its own instead. (On Linux clang's modules are rare, and each
/// cache is one more mount per run.)
pub(super) const TOOL_CACHES_MACOS: &[(&str, &str, &[&str], Option<&str>)] =
    &[("CLANG_MODULE_CACHE_PATH", "clang-modules", &[], None)];

/// Tools whose cache only a fetch writes, redirected like [`TOOL_CACHES`]
/// only when the network is open: with it denied they work offline from
/// the user's own cache, read-only, and a cache of sbx's would be empty.
/// Cargo has no variable for its registry alone: its whole home moves
/// (its `config.toml` is still found above the project, `cargo install`s
/// go to the new home's `bin`).
pub(super) const FETCH_CACHES: &[(&str, &str, &[&str], Option<&str>)] =
    &[("CARGO_HOME", "cargo", &[".cargo/registry"], None)];

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
    // git's older remote files: `git push NAME` takes a URL from them (a
    // local repository's hooks run on push) when the config has none.
    ".git/remotes",
    ".git/branches",
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
/// home directory is writable. A missing one is watched at its first
/// missing component, so paths inside directories that tools create as
/// caches on first use (`~/.gradle/init.d`, `~/.m2/settings.xml`,
/// `~/go/bin`, `~/.config/go`, `~/.ipython`) are left out: watching them
/// would move those caches aside after the first build.
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
    // Sourced by shells at start-up: rustup's env file, completions,
    // frameworks and version managers the rc files load.
    ".cargo/env",
    ".bash_completion",
    ".bash_completion.d",
    ".local/share/bash-completion",
    ".oh-my-zsh",
    ".nvm",
    ".pyenv",
    ".sdkman",
    ".asdf",
    // Toolchains and programs run by every build or shell.
    ".rustup",
    ".docker/cli-plugins",
    ".local/share/systemd",
    // direnv's library (sourced before every .envrc) and its allow list
    // (an allowed .envrc runs without asking); mise's global config.
    ".config/direnv",
    ".local/share/direnv",
    ".config/mise",
    // Editors' plugins and start-up files, and their extensions.
    ".vim",
    ".emacs",
    ".emacs.d",
    ".config/emacs",
    ".vscode",
    ".vscode-server",
    // Interpreters' start-up files.
    ".irbrc",
    ".pryrc",
    ".Rprofile",
    ".psqlrc",
    // Where packages come from: an index of the command's choosing serves
    // the next install.
    ".config/pip",
    ".pip",
    ".yarnrc",
    ".yarnrc.yml",
];

/// Variables kept by `env = "minimal"` (plus `LC_*` and the passthrough list).
pub(super) const MINIMAL_ENV: &[&str] = &[
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
pub(super) const SECRET_VALUE_KEYS: &[&str] = &[
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
pub(super) const TOKEN_PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glpat-",
    "xox",
];

/// System directories readable in `filesystem = "read-only"` mode on Linux
/// (those that exist; a symlink such as `/bin -> usr/bin` stays a symlink).
pub(super) const SYSTEM_PATHS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix",
];
