//! Resolution: command line + configuration layers + host facts → [`Policy`].
//!
//! This is the one place where precedence is decided (defaults, user file,
//! `--config`/`$SBX_CONFIG`, project `.sbx.toml` which may only narrow, flags)
//! and where paths become absolute real paths. Apart from reading files and
//! resolving symlinks it has no side effects: nothing here creates, changes or
//! runs anything, so `sbx profile` can call it on any host.
//!
//! [`resolve`] reads as the table of contents; each step lives in its own
//! file and returns what it decided:
//!
//! | step | file |
//! | --- | --- |
//! | configuration layers and precedence | `settings.rs` |
//! | built-in lists (data only) | `lists.rs` |
//! | real paths, the project root, system paths | `paths.rs` |
//! | writable roots and sbx's tool caches | `writable.rs` |
//! | credentials and `.env` files | `credentials.rs` |
//! | "runs later" paths, git's layout, pins | `runs_later.rs` |
//! | the command's environment | `environment.rs` |

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Result;

use crate::cli::PolicyArgs;
use crate::config::{Backend, BannerMode, FsSetting, NetworkMode, Require, Source, UnixSockets};
use crate::netrule::HostRule;

mod credentials;
mod environment;
#[cfg(test)]
mod fixture;
mod lists;
mod own_sockets;
mod paths;
mod runs_later;
mod settings;
mod writable;

pub use crate::integrity::identity::{GitConfigWatch, Identity, Repositories};
#[cfg(target_os = "linux")]
pub(crate) use credentials::clone_gits;
/// The repositories of a tree as resolution records them (for the tests
/// of the checks that compare against them).
#[cfg(all(test, target_os = "linux"))]
pub(crate) use credentials::walked as walked_repositories;
#[cfg(test)]
pub use environment::{is_credential_env, is_credential_var};
#[cfg(test)]
pub(crate) use fixture::test_policy;
pub use lists::{
    AGENT_TOKENS, CREDENTIALS, CREDENTIALS_MACOS, CREDENTIAL_VAR_NAMES, CREDENTIAL_VAR_PARTS,
    CREDENTIAL_VAR_SUFFIXES, HOME_PROTECTED, PROJECT_PROTECTED,
};
pub use own_sockets::OwnSockets;
#[cfg(target_os = "linux")]
pub(crate) use runs_later::module_dirs;
pub use writable::TOOL_CACHE_OWNER;

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
    /// replaced meanwhile, and is neutralised (see `integrity::Checks::verify`).
    pub identity: Option<Identity>,
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
    /// Which sandboxes are good enough to run the command in.
    pub require: Require,
    /// Which Linux sandbox runs.
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub backend: Backend,
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
    /// Symbolic links in writable roots on the way to protected paths (or
    /// protected themselves), mounted onto themselves during the run
    /// (Linux, by the inner stage: a mount made by path follows the link).
    pub pinned_links: Vec<PathBuf>,
    /// Git config files that exist and are mounted read-only, with what
    /// they set before the run. git on the host replaces such a file
    /// whenever it writes it (a lock file renamed over it), which detaches
    /// the read-only mount inside a running sandbox: after the run, a
    /// replaced one is checked for settings it did not have before (Linux;
    /// Seatbelt's rules follow the path, whatever is there).
    // Resolved on every platform like the rest of the policy, read by the
    // Linux run path only: not unused code, unused on macOS.
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
    /// The repositories under the project before the run (its `.git`
    /// entries), so that one the command creates is found after it.
    // Resolved on every platform, read by the Linux run path only (as
    // `git_configs`).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub repositories: Option<Repositories>,
    /// The repositories in the other writable roots, walked the same way
    /// (`credentials::other_repositories`).
    #[cfg_attr(not(target_os = "linux"), allow(dead_code))]
    pub other_repositories: Vec<Repositories>,
    /// The empty, unreadable file bound over credential files (in sbx's
    /// cache directory, which is read-only inside if it lies in a writable root).
    pub placeholder: PathBuf,
    pub network: Network,
    pub unix_sockets: UnixSockets,
    /// With `unix_sockets = "own"` (Linux, the network not the host's, the
    /// file system not unrestricted): where the command's own sockets are
    /// made, and where it may make symbolic links (see `own_sockets.rs`).
    /// `None`: no own sockets in this run, and none are allowed (unless the
    /// host's are).
    pub own_sockets: Option<OwnSockets>,
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
    /// Resource limits for the command.
    pub limits: crate::limits::Limits,
}

/// Facts about the host that resolution depends on.
#[derive(Debug, Clone)]
pub struct Host {
    pub platform: Platform,
    pub cwd: PathBuf,
    pub home: PathBuf,
    /// The home directory the user database gives this user, when `HOME`
    /// names another (a wrapper that points `HOME` at a scratch directory,
    /// `su` without `-`): its credentials are hidden too.
    pub account_home: Option<PathBuf>,
    /// Why the user database could not be asked for that home as the
    /// system would (see `crate::account`): said on every run.
    pub account_problem: Option<String>,
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

/// Where one run takes place: the working directory, home and project, as
/// every step needs them, and the spelling of paths for the platform.
pub(crate) struct Places<'a> {
    pub host: &'a Host,
    /// Real path of the working directory.
    pub cwd: PathBuf,
    /// The home directory as given, and its real path.
    pub home: PathBuf,
    pub home_real: PathBuf,
    /// The real path of the user database's home, when `HOME` names
    /// another (see [`Host::account_home`]).
    pub account_real: Option<PathBuf>,
    /// Real path of the project root.
    pub project: PathBuf,
}

/// The homes a project never reaches up to or past: `HOME`'s real path,
/// and the user database's home when `HOME` names another.
fn homes<'a>(home_real: &'a Path, account_real: Option<&'a Path>) -> Vec<&'a Path> {
    std::iter::once(home_real).chain(account_real).collect()
}

impl Places<'_> {
    fn find<'a>(host: &'a Host, flags: &PolicyArgs) -> Result<Places<'a>> {
        let cwd = paths::real(&host.cwd).unwrap_or_else(|| host.cwd.clone());
        let home = host.home.clone();
        let home_real = paths::real(&home).unwrap_or_else(|| home.clone());
        let account_real = host.account_home.as_deref().and_then(paths::real);
        let homes = homes(&home_real, account_real.as_deref());
        let project = match &flags.project {
            Some(p) => paths::real(&host.cwd.join(p)).ok_or_else(|| {
                anyhow::anyhow!(
                    "--project {}: no such directory (give an existing directory)",
                    p.display()
                )
            })?,
            None => paths::find_project(&cwd, &homes),
        };
        Ok(Places {
            host,
            cwd,
            home,
            home_real,
            account_real,
            project,
        })
    }

    /// The homes a project never reaches up to or past.
    pub fn homes(&self) -> Vec<&Path> {
        homes(&self.home_real, self.account_real.as_deref())
    }

    /// A real path as the platform spells it (on macOS `/tmp` is
    /// `/private/tmp`, also when rendering for macOS on another host).
    pub fn alias(&self, p: PathBuf) -> PathBuf {
        match self.host.platform {
            Platform::Macos => paths::macos_real_spelling(&p),
            Platform::Linux => p,
        }
    }

    /// The real path of `p` as the platform spells it.
    pub fn real(&self, p: &Path) -> Option<PathBuf> {
        paths::real(p).map(|r| self.alias(r))
    }
}

/// The paths a run masks: existing credentials (by their real path) and
/// the project's `.env` files, shallowest first. The one list the backends
/// mask and the pins above them are made from.
pub(crate) fn masked(credentials: &[Credential], env_files: &[PathBuf]) -> Vec<(PathBuf, Kind)> {
    let mut masks: Vec<(PathBuf, Kind)> = Vec::new();
    for c in credentials {
        if let (Some(real), Kind::Dir | Kind::File) = (&c.real, c.kind) {
            masks.push((real.clone(), c.kind));
        }
    }
    masks.extend(env_files.iter().map(|p| (p.clone(), Kind::File)));
    masks.sort_by_cached_key(|(p, _)| p.components().count());
    masks
}

/// Resolve the policy for one run (the command is filled in by the caller).
pub fn resolve(host: &Host, flags: &PolicyArgs) -> Result<Policy> {
    paths::forget_real_paths();
    let policy = resolve_now(host, flags);
    paths::forget_real_paths();
    policy
}

fn resolve_now(host: &Host, flags: &PolicyArgs) -> Result<Policy> {
    let places = Places::find(host, flags)?;
    // A watcher answers while the rest is resolved (see `credentials::env_files`).
    let early = places
        .host
        .scan_env_files
        .then(|| paths::outermost_repository(&places.project, &places.homes()))
        .map_or(crate::envscan::Early::NotAsked, |root| {
            crate::envscan::ask_early(&root, host.cache_dir.as_deref())
        });
    let files = settings::ConfigFiles::find(&places, flags)?;
    let mut s = settings::Settings::merge(&files, &places, flags)?;
    let mut warnings = std::mem::take(&mut s.warnings);
    if let Some(why) = &host.account_problem {
        warnings.push(format!(
            "{why}: the home directory of your account is unknown, and if HOME ({}) is not that home, the credentials there stay readable",
            host.home.display()
        ));
    }
    let restricted = s.filesystem == FsSetting::Restricted;
    if s.unix_sockets == UnixSockets::Allow && host.platform == Platform::Linux {
        warnings.push(
            "unix_sockets = \"allow\": the command can connect to the host's Unix sockets too (ssh-agent, D-Bus, docker.sock, tmux), and each can be a way out of the sandbox".into(),
        );
    }

    let (mut writable, mut tool_caches, mut asked) = (Vec::new(), Vec::new(), Vec::new());
    if restricted {
        let roots = writable::roots(&s, &places, flags.project.is_some());
        warnings.extend(roots.warnings);
        asked = roots.asked;
        let network_open = s.network != NetworkMode::Deny;
        (writable, tool_caches) = writable::with_tool_caches(roots.paths, &places, network_open);
    }
    let own_sockets = own_sockets::plan(&s, &places, &writable, &asked);
    let mut credentials = credentials::listed(&s, &places, &writable);
    let mut later = runs_later::RunsLater::default();
    if restricted {
        later = runs_later::RunsLater::find(&files, &s, &places, &writable)?;
    }
    let dotenv = credentials::env_files(&places, early)?;
    // pip's clones of editable installs, which the walk prunes: nested
    // repositories like those it finds, checked after the run too.
    let clone_dirs =
        credentials::clone_dirs(dotenv.scan_root.as_deref(), &places.project, &places.cwd);
    // One that cannot be listed now is opened to look after the run.
    let clones = credentials::clone_gits(&clone_dirs).gits;
    let mut other_repositories = Vec::new();
    if restricted {
        other_repositories =
            credentials::other_repositories(&places, &writable, dotenv.scan_root.as_deref());
        // Too many in one root: not kept read-only, and said so.
        let mounted: Vec<&Repositories> = other_repositories
            .iter()
            .filter(|r| {
                let count = r.git_entries.len() + r.bare.len();
                let fits = count <= credentials::MAX_OTHER_REPOSITORIES;
                if !fits {
                    warnings.push(format!(
                        "{} holds {count} git repositories: sbx keeps the hooks and config of at most {} per writable root read-only, so theirs are writable during this run (a new one is still checked after it); make the one you work in writable instead",
                        r.scan_root.display(),
                        credentials::MAX_OTHER_REPOSITORIES
                    ));
                }
                fits
            })
            .collect();
        let nested: Vec<PathBuf> = dotenv
            .git_entries
            .iter()
            .chain(mounted.iter().flat_map(|r| &r.git_entries))
            .chain(&clones)
            .filter_map(|g| g.parent().map(Path::to_path_buf))
            .collect();
        let bare: Vec<PathBuf> = dotenv
            .bare
            .iter()
            .chain(mounted.iter().flat_map(|r| &r.bare))
            .cloned()
            .collect();
        later.add_repositories(&nested, &bare, &places, &writable)?;
    }
    credentials.extend(dotenv.unreadable_dirs());
    for (file, list) in &dotenv.remembered {
        warnings.push(format!(
            "still masking {}: a .env link in this project led to it before (to read it in the sandbox again, remove its line from {})",
            file.display(),
            list.display()
        ));
    }
    if s.filesystem != FsSetting::ReadOnly {
        let paths: Vec<PathBuf> = masked(&credentials, &dotenv.files)
            .into_iter()
            .map(|(path, _)| path)
            .collect();
        later.pin_masked(&paths, &writable);
    }
    let placeholder = credentials::placeholder(&places, &writable, s.filesystem);
    let shell = environment::shell(s.shell.as_deref());
    let mut env = environment::plan_env(host, s.env, &s.env_passthrough, &shell);
    env.add_tool_caches(&tool_caches);
    if s.network == NetworkMode::Deny {
        env.add_fail_fast(host);
    }

    Ok(Policy {
        platform: host.platform,
        enabled: s.enabled,
        require: s.require,
        backend: s.backend,
        allow_unsandboxed: s.allow_unsandboxed,
        filesystem: s.filesystem,
        home: places.alias(places.home.clone()),
        project: places.alias(places.project.clone()),
        cwd: places.alias(places.cwd.clone()),
        writable,
        protected: later.protected,
        pins: later.pins,
        pinned_links: later.links,
        git_configs: later.git_configs,
        tool_caches: tool_caches.into_iter().map(|(_, dir, _)| dir).collect(),
        credentials,
        repositories: dotenv.scan_root.map(|scan_root| {
            let mut git_entries = dotenv.git_entries;
            git_entries.extend(clones);
            git_entries.sort();
            git_entries.dedup();
            Repositories {
                scan_root,
                modules: runs_later::module_dirs(&git_entries),
                indexes: Repositories::index_identities(&git_entries),
                git_entries,
                unreadable: dotenv.unreadable.clone(),
                bare: dotenv.bare,
                clone_dirs,
            }
        }),
        other_repositories,
        env_files: dotenv.files,
        placeholder,
        network: match s.network {
            NetworkMode::Deny => Network::Deny,
            NetworkMode::Allow => Network::Allow,
            NetworkMode::Allowlist => Network::Allowlist(s.allowlist.clone()),
        },
        unix_sockets: s.unix_sockets,
        own_sockets,
        env,
        shell,
        banner: s.banner,
        bwrap: s.bwrap,
        system_paths: paths::readable_system_paths(s.filesystem, host),
        command: Vec::new(),
        warnings,
        origins: s.origins,
        limits: s.limits,
    })
}
