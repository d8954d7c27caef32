//! Configuration layers and their precedence: built-in defaults, the user
//! file, `--config`/`$SBX_CONFIG` (trusted), the project's `.sbx.toml`
//! (which may only narrow), then the command line.

use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Result};

use super::Places;
use crate::cli::{NetworkArg, PolicyArgs};
use crate::config::{
    self, Backend, BannerMode, EnvMode, FsSetting, Layer, NetworkMode, Require, Source, UnixSockets,
};
use crate::limits::Limits;
use crate::netrule::{HostPattern, HostRule};

/// The configuration files of one run, found and parsed.
pub(super) struct ConfigFiles {
    /// The user file's path (read-only inside even when it does not exist).
    pub user_path: PathBuf,
    pub user: Option<Layer>,
    /// `--config FILE` or `$SBX_CONFIG`, made absolute.
    pub explicit_path: Option<PathBuf>,
    pub explicit: Option<Layer>,
    /// The nearest `.sbx.toml`, whether or not it is also the explicit file.
    pub project_path: Option<PathBuf>,
    pub project: Option<Layer>,
}

impl ConfigFiles {
    pub fn find(places: &Places, flags: &PolicyArgs) -> Result<ConfigFiles> {
        let host = places.host;
        let xdg = host.var("XDG_CONFIG_HOME").map(PathBuf::from);
        let user_path = config::user_file(xdg.as_deref(), &places.home);
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
        let project_path = config::project_file(&places.cwd, &places.project);
        let project = match &project_path {
            // A project file that is also the explicit config is trusted as such.
            Some(p) if Some(p) != explicit_path.as_ref() => {
                config::load(Source::Project(p.clone()), true)?
            }
            _ => None,
        };
        Ok(ConfigFiles {
            user_path,
            user,
            explicit_path,
            explicit,
            project_path,
            project,
        })
    }
}

/// The merged settings before paths are resolved.
#[derive(Debug, Clone)]
pub(super) struct Settings {
    pub enabled: bool,
    pub require: Require,
    pub backend: Backend,
    pub filesystem: FsSetting,
    pub writable: Vec<(PathBuf, Source)>,
    /// Writable entries from the project file: may only narrow `writable`.
    pub project_writable: Option<(Vec<PathBuf>, PathBuf)>,
    pub deny_read: Vec<PathBuf>,
    pub deny_write: Vec<PathBuf>,
    pub network: NetworkMode,
    pub allowlist: Vec<HostRule>,
    pub allow_unsandboxed: bool,
    pub unix_sockets: UnixSockets,
    pub env: EnvMode,
    pub env_passthrough: Vec<String>,
    pub shell: Option<PathBuf>,
    pub banner: BannerMode,
    pub bwrap: Option<PathBuf>,
    pub origins: Vec<(&'static str, Source)>,
    pub warnings: Vec<String>,
    pub limits: Limits,
}

impl Settings {
    /// The layers applied in order of precedence, lowest first.
    pub fn merge(files: &ConfigFiles, places: &Places, flags: &PolicyArgs) -> Result<Settings> {
        let (home, project) = (&places.home, &places.project);
        let mut s = Settings::defaults(project);
        for layer in [&files.user, &files.explicit].into_iter().flatten() {
            s.apply_trusted(layer, home, project)?;
        }
        if let Some(layer) = &files.project {
            s.apply_project(layer, home, project)?;
        }
        s.apply_flags(flags, &places.host.cwd, home)?;
        Ok(s)
    }

    fn defaults(project: &Path) -> Settings {
        Settings {
            enabled: true,
            require: Require::Nothing,
            backend: Backend::Auto,
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
            unix_sockets: UnixSockets::Own,
            env: EnvMode::Inherit,
            env_passthrough: Vec::new(),
            shell: None,
            banner: BannerMode::Auto,
            bwrap: None,
            origins: Vec::new(),
            warnings: Vec::new(),
            limits: Limits::default(),
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
        take!(backend);
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
        for key in LIMIT_KEYS {
            if let Some(v) = table_limit(t, key) {
                *limit_slot(&mut self.limits, key) = Some(v);
                self.origin(key, src);
            }
        }
        Ok(())
    }

    /// Apply the project file: only values that narrow the policy are taken;
    /// each attempted widening is ignored with a warning.
    fn apply_project(&mut self, layer: &Layer, home: &Path, project: &Path) -> Result<()> {
        let mut file = ProjectFile {
            path: layer
                .source
                .path()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
            taken: Vec::new(),
            ignored: Vec::new(),
        };
        self.narrow_switches(layer, &mut file);
        self.narrow_access(layer, &mut file);
        self.narrow_paths(layer, &mut file, home, project)?;
        for key in LIMIT_KEYS {
            if let Some(v) = table_limit(&layer.table, key) {
                // A limit may be set or lowered, never raised or removed.
                let slot = limit_slot(&mut self.limits, key);
                let narrows = slot.is_none_or(|current| v <= current);
                let shown = v.to_string();
                file.scalar(slot, Some(v), narrows, key, shown, "it would raise a limit");
            }
        }
        self.warnings.append(&mut file.ignored);
        for key in file.taken {
            self.origin(key, &layer.source);
        }
        Ok(())
    }

    /// `enabled`, `require`, `filesystem`, `network` and its allowlist.
    fn narrow_switches(&mut self, layer: &Layer, file: &mut ProjectFile) {
        let t = &layer.table;
        if let Some(v) = t.enabled {
            let narrows = v || !self.enabled;
            file.scalar(
                &mut self.enabled,
                v,
                narrows,
                "enabled",
                "false".into(),
                "it would turn the sandbox off",
            );
        }
        if let Some(v) = t.require {
            let narrows = v >= self.require;
            file.scalar(
                &mut self.require,
                v,
                narrows,
                "require",
                v.to_string(),
                "it would accept a weaker sandbox, or none",
            );
        }
        if let Some(v) = t.filesystem {
            let narrows = fs_rank(v) <= fs_rank(self.filesystem);
            file.scalar(
                &mut self.filesystem,
                v,
                narrows,
                "filesystem",
                fs_text(v),
                "it would allow more writes",
            );
        }
        if let Some(v) = t.network {
            let narrows = net_rank(v) <= net_rank(self.network);
            let shown = format!("{:?}", net_text(v));
            file.scalar(
                &mut self.network,
                v,
                narrows,
                "network",
                shown,
                "it would open the network",
            );
        }
        if let Some(list) = &layer.allowlist {
            let trusted = &self.allowlist;
            let (kept, refused): (Vec<HostRule>, Vec<HostRule>) = list
                .iter()
                .cloned()
                .partition(|rule| trusted.iter().any(|t| covers(t, rule)));
            for rule in refused {
                file.ignore(
                    "network_allowlist",
                    format!("[\"{rule}\"]"),
                    "the host is not in your own allowlist",
                );
            }
            self.allowlist = kept;
            file.taken.push("network_allowlist");
        }
    }

    /// `allow_unsandboxed`, `unix_sockets`, `env` and `env_passthrough`.
    fn narrow_access(&mut self, layer: &Layer, file: &mut ProjectFile) {
        let t = &layer.table;
        if let Some(v) = t.allow_unsandboxed {
            let narrows = !v || self.allow_unsandboxed;
            file.scalar(
                &mut self.allow_unsandboxed,
                v,
                narrows,
                "allow_unsandboxed",
                "true".into(),
                "it would allow leaving the sandbox",
            );
        }
        if let Some(v) = t.unix_sockets {
            let narrows = v <= self.unix_sockets;
            file.scalar(
                &mut self.unix_sockets,
                v,
                narrows,
                "unix_sockets",
                "\"allow\"".into(),
                "it would open Unix sockets",
            );
        }
        if let Some(v) = t.env {
            let narrows = v == EnvMode::Minimal || self.env == EnvMode::Inherit;
            file.scalar(
                &mut self.env,
                v,
                narrows,
                "env",
                "\"inherit\"".into(),
                "it would pass more variables in",
            );
        }
        if let Some(list) = &t.env_passthrough {
            let mut kept = Vec::new();
            for name in list.iter().map(|s| s.get_ref()) {
                if self.env_passthrough.contains(name) {
                    kept.push(name.clone());
                } else {
                    file.ignore(
                        "env_passthrough",
                        format!("[\"{name}\"]"),
                        "it would pass a credential variable in",
                    );
                }
            }
            self.env_passthrough = kept;
            file.taken.push("env_passthrough");
        }
    }

    /// `writable` (checked against the trusted roots once they are real
    /// paths), `deny_read` and `deny_write` (always narrowing), and the keys
    /// a project file may not set at all.
    fn narrow_paths(
        &mut self,
        layer: &Layer,
        file: &mut ProjectFile,
        home: &Path,
        project: &Path,
    ) -> Result<()> {
        let t = &layer.table;
        if let Some(list) = &t.writable {
            let paths = list
                .iter()
                .map(|s| expand(s.get_ref(), home, project))
                .collect::<Result<Vec<_>>>()?;
            self.project_writable = Some((paths, file.path.clone()));
            file.taken.push("writable");
        }
        for s in t.deny_read.iter().flatten() {
            self.deny_read.push(expand(s.get_ref(), home, project)?);
            file.taken.push("deny_read");
        }
        for s in t.deny_write.iter().flatten() {
            self.deny_write.push(expand(s.get_ref(), home, project)?);
            file.taken.push("deny_write");
        }
        for (key, set) in [
            ("shell", t.shell.is_some()),
            ("banner", t.banner.is_some()),
            ("bwrap", t.bwrap.is_some()),
            ("backend", t.backend.is_some()),
        ] {
            if set {
                file.ignore(key, "…".into(), "this key is for trusted files only");
            }
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
        if let Some(u) = flags.unix_sockets {
            self.unix_sockets = match u {
                crate::cli::UnixSocketsArg::Deny => UnixSockets::Deny,
                crate::cli::UnixSocketsArg::Own => UnixSockets::Own,
                crate::cli::UnixSocketsArg::Allow => UnixSockets::Allow,
            };
            self.origin("unix_sockets", &src);
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
        if let Some(r) = flags.require {
            self.require = match r {
                crate::cli::RequireArg::Full => Require::Full,
                crate::cli::RequireArg::Reduced => Require::Reduced,
            };
            self.origin("require", &src);
        }
        if let Some(b) = flags.backend {
            self.backend = match b {
                crate::cli::BackendArg::Auto => Backend::Auto,
                crate::cli::BackendArg::Bwrap => Backend::Bwrap,
                crate::cli::BackendArg::Reduced => Backend::Reduced,
            };
            self.origin("backend", &src);
        }
        if flags.quiet {
            self.banner = BannerMode::Never;
            self.origin("banner", &src);
        }
        for (key, value) in LIMIT_KEYS.into_iter().zip([
            flags.max_processes,
            flags.max_open_files,
            flags.max_file_size,
            flags.max_memory,
            flags.cpu_time,
        ]) {
            if let Some(v) = value {
                *limit_slot(&mut self.limits, key) = Some(v);
                self.origin(key, &src);
            }
        }
        Ok(())
    }
}

/// The limit keys, in the order they are applied and reported.
const LIMIT_KEYS: [&str; 5] = [
    "max_processes",
    "max_open_files",
    "max_file_size",
    "max_memory",
    "cpu_time",
];

/// Where a limit key's value lives.
fn limit_slot<'l>(l: &'l mut Limits, key: &str) -> &'l mut Option<u64> {
    match key {
        "max_processes" => &mut l.processes,
        "max_open_files" => &mut l.open_files,
        "max_file_size" => &mut l.file_size,
        "max_memory" => &mut l.memory,
        _ => &mut l.cpu_time,
    }
}

/// The value a configuration table gives a limit key.
fn table_limit(t: &crate::config::SandboxTable, key: &str) -> Option<u64> {
    match key {
        "max_processes" => t.max_processes.map(|c| c.0),
        "max_open_files" => t.max_open_files.map(|c| c.0),
        "max_file_size" => t.max_file_size.map(|s| s.0),
        "max_memory" => t.max_memory.map(|s| s.0),
        _ => t.cpu_time.map(|c| c.0),
    }
}

/// The project file being applied: the keys it set, and the widenings it
/// attempted (each ignored, with a warning naming the file).
struct ProjectFile {
    path: PathBuf,
    taken: Vec<&'static str>,
    ignored: Vec<String>,
}

impl ProjectFile {
    fn ignore(&mut self, key: &str, value: String, why: &str) {
        self.ignored.push(format!(
            "{}: ignored `{key} = {value}`: {why} (a project file can only narrow the policy; set it in your user config instead)",
            self.path.display()
        ));
    }

    /// Take `value` into `slot` when it narrows the policy, else ignore it.
    fn scalar<T>(
        &mut self,
        slot: &mut T,
        value: T,
        narrows: bool,
        key: &'static str,
        shown: String,
        why: &str,
    ) {
        if narrows {
            *slot = value;
            self.taken.push(key);
        } else {
            self.ignore(key, shown, why);
        }
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
pub(super) fn net_text(n: NetworkMode) -> &'static str {
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
pub(super) fn expand(path: &str, home: &Path, base: &Path) -> Result<PathBuf> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
    fn allowlist_coverage() {
        let r = |s| HostRule::parse(s).unwrap();
        assert!(covers(&r("*.example.com"), &r("api.example.com")));
        assert!(covers(&r("example.com"), &r("example.com:443")));
        assert!(!covers(&r("example.com"), &r("example.com:22")));
        assert!(!covers(&r("*.example.com"), &r("example.com")));
        assert!(!covers(&r("example.com"), &r("evil.com")));
    }
}
