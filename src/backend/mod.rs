//! From a resolved [`Policy`](crate::policy::Policy) to a [`Plan`]: the exact program, arguments and
//! environment that run. `sbx profile` prints a plan, `sbx run` executes the
//! same plan, so what is reviewed is what runs.
//!
//! Both renderers are pure string building and compile on every platform, so a
//! macOS profile can be produced and tested on Linux and the other way round.

pub mod bwrap;
pub mod reduced;
pub mod seatbelt;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::policy::EnvPlan;

/// What a run makes ready for itself before it starts (Linux; a dry run
/// shows where each would be).
#[derive(Debug, Clone, Copy, Default)]
pub struct PerRun<'a> {
    /// The run's private git config copies (see `integrity::copies`).
    pub copies: Option<&'a Path>,
    /// The mount point of the command's own Unix sockets, its `TMPDIR` (see
    /// `policy/own_sockets.rs`), once made sure of.
    pub sockets: Option<&'a Path>,
}

/// What will be executed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The program (an absolute path).
    pub program: PathBuf,
    /// Its arguments, without `argv[0]`.
    pub args: Vec<OsString>,
    /// Environment changes the executor applies itself; `None` when the
    /// arguments already carry them (bubblewrap's `--setenv`/`--unsetenv`).
    pub env: Option<EnvPlan>,
    /// The empty, unreadable file that masks credential files (bound
    /// read-only over each one); made sure of before the run.
    pub placeholder: Option<PathBuf>,
    /// Missing "runs later" paths to create (empty) before the run so they can be
    /// made read-only; the kind tells a directory from a file.
    pub create: Vec<(PathBuf, crate::policy::Kind)>,
    /// The Seatbelt profile, when there is one (it is also in `args`).
    pub profile: Option<String>,
    /// The descriptor on which the inner stage reports that the sandbox is
    /// up (Linux), so a failure to start is told apart from the command's.
    pub ready_fd: Option<i32>,
    /// Where in `args` bubblewrap's own `--` is, after which come `SBX
    /// __inner` and the inner stage's arguments (bubblewrap plans).
    pub inner_at: Option<usize>,
    /// The run's directory of private git config copies, made before the
    /// run (Linux; see `integrity::copies`).
    pub copies: Option<PathBuf>,
    /// The same plan without the copies, for when the inner stage cannot
    /// set them up here (Linux).
    pub without_copies: Option<Box<Plan>>,
    /// The directory this run made for the command, removed after it
    /// (macOS: its `TMPDIR`, where its own Unix sockets are made).
    pub tmpdir: Option<PathBuf>,
    /// The paths this plan mounts a mask over (Linux), watched on the host
    /// during the run (a file replaced there lifts its mask).
    pub masked: Vec<PathBuf>,
}

/// Where the allowlist proxy of one run listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Listen {
    /// A Unix socket on the host, in a private directory outside every
    /// writable root (Linux: PID 1 of the sandbox relays
    /// `127.0.0.1:`[`bwrap::RELAY_PORT`] inside to it).
    UnixSocket(PathBuf),
    /// A port on the host's `127.0.0.1` (macOS: the only address the
    /// profile lets the command connect to).
    Loopback(u16),
}

/// The allowlist proxy of one run: where it listens and the credential it
/// requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proxy {
    pub listen: Listen,
    pub token: String,
}

impl Proxy {
    /// The port the command connects to on `127.0.0.1`.
    pub fn port(&self) -> u16 {
        match self.listen {
            Listen::UnixSocket(_) => bwrap::RELAY_PORT,
            Listen::Loopback(port) => port,
        }
    }

    /// The Unix socket, when the proxy listens on one.
    pub fn socket(&self) -> Option<&std::path::Path> {
        match &self.listen {
            Listen::UnixSocket(path) => Some(path),
            Listen::Loopback(_) => None,
        }
    }

    /// The proxy URL the command is given. An address, not `localhost`:
    /// resolving a name may itself be impossible inside the sandbox.
    pub fn url(&self) -> String {
        format!("http://sbx:{}@127.0.0.1:{}", self.token, self.port())
    }

    /// The variables that point proxy-aware programs at it. `sbx` is the
    /// executable as the command sees it, for git over ssh (the allowlist
    /// must list `host:22`).
    pub fn env(&self, sbx: &std::path::Path) -> Vec<(String, String)> {
        let url = self.url();
        let port = self.port();
        let mut vars = Vec::new();
        for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
            vars.push((name.to_string(), url.clone()));
            vars.push((name.to_ascii_lowercase(), url.clone()));
        }
        vars.push(("NO_PROXY".into(), String::new()));
        vars.push(("no_proxy".into(), String::new()));
        vars.push(("NODE_USE_ENV_PROXY".into(), "1".into()));
        // On a host port (macOS), Java's dual-stack sockets would connect
        // from ::ffff:127.0.0.1, which the profile's `localhost` does not
        // match: IPv4 sockets there.
        let ipv4 = match self.listen {
            Listen::Loopback(_) => " -Djava.net.preferIPv4Stack=true",
            Listen::UnixSocket(_) => "",
        };
        vars.push((
            "JAVA_TOOL_OPTIONS".into(),
            format!(
                "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort={port} -Dhttps.proxyHost=127.0.0.1 -Dhttps.proxyPort={port}{ipv4}"
            ),
        ));
        // ssh reaches an allowed host:22 through the proxy with sbx itself as
        // the ProxyCommand, so no netcat is needed inside.
        vars.push((
            "GIT_SSH_COMMAND".into(),
            format!(
                "ssh -o ProxyCommand='{} __connect %h %p'",
                sbx.display().to_string().replace('\'', "'\\''")
            ),
        ));
        vars
    }
}

/// Quote one argument for a POSIX shell, only when needed.
pub fn shell_quote(arg: &str) -> String {
    let safe = !arg.is_empty()
        && arg
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./-_".contains(&b));
    if safe {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', r"'\''"))
    }
}

impl Plan {
    /// The plan as a command line that can be pasted into a shell: one
    /// argument per line, each shell-quoted.
    pub fn to_shell_text(&self) -> String {
        let mut lines = vec![shell_quote(&self.program.to_string_lossy())];
        lines.extend(self.args.iter().map(|a| shell_quote(&a.to_string_lossy())));
        let mut text = lines.join(" \\\n  ");
        text.push('\n');
        text
    }

    /// The plan as JSON: `{program, args, env, profile}`.
    pub fn to_json(&self) -> String {
        let env = self.env.as_ref().map(|e| {
            serde_json::json!({
                "clear": e.clear,
                "set": e.set.iter().map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect::<serde_json::Map<_, _>>(),
                "unset": e.unset,
            })
        });
        let value = serde_json::json!({
            "program": self.program.to_string_lossy(),
            "args": self.args.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>(),
            "env": env,
            "profile": self.profile,
        });
        let mut text = serde_json::to_string_pretty(&value).unwrap_or_default();
        text.push('\n');
        text
    }
}

/// Compare `actual` with `tests/golden/NAME`, or write it when `SBX_BLESS=1`.
#[cfg(test)]
pub(crate) fn assert_golden(name: &str, actual: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    if std::env::var_os("SBX_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing {}: run with SBX_BLESS=1", path.display()));
    assert_eq!(
        expected, actual,
        "golden file {name} differs (SBX_BLESS=1 rewrites it)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting() {
        assert_eq!(shell_quote("--bind"), "--bind");
        assert_eq!(shell_quote("/a b"), "'/a b'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("$HOME"), "'$HOME'");
    }
}
