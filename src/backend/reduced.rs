//! `Policy` → the argv of reduced mode: `sbx __reduced [RULES] -- CMD`.
//!
//! Reduced mode is for the places where bubblewrap cannot create its
//! namespaces (containers, CI runners, an AppArmor that forbids them): sbx
//! applies a Landlock ruleset, `no_new_privs` and its seccomp filter to
//! itself, then execs the command (`run/linux/reduced.rs`). What this
//! renderer decides is the whole rule set, as arguments, so that
//! `sbx profile --backend reduced` shows exactly what runs:
//!
//! - `--read PATH`: readable, with everything beneath it but the hidden
//!   paths. Landlock only allows, so the stage grants a hidden path's
//!   siblings one by one, down from the root (`reduced.rs`);
//! - `--write PATH`: every right, beneath it (the writable roots);
//! - `--device PATH`: the device nodes programs write (`/dev/null`, the
//!   terminals, `/dev/shm`);
//! - `--hide PATH`: a credential's real path, unreadable;
//! - `--writes-unrestricted`: `filesystem = false`, only reads are ruled;
//! - `--network deny|allow|proxy:PORT` and `--allow-unix-sockets`: the
//!   seccomp filter's and Landlock's network rules;
//! - `--limit NAME=VALUE`: as in full mode.
//!
//! What Landlock cannot do here is named by [`unenforced`], on every run.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{Listen, Plan, Proxy};
use crate::config::{FsSetting, UnixSockets};
use crate::policy::{Network, Policy, SystemPath};

/// The descriptor on which the stage reports that the rules are in force.
pub const READY_FD: i32 = 100;

/// Device nodes and directories that programs write to: writable in every
/// mode (the stage skips those this machine lacks).
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/shm",
];

/// Unreadable in every mode: the terminals of the host's other sessions
/// (their input could be read, their output written). The stage grants
/// back the terminals the command inherits on descriptors 0 to 2.
pub const TERMINALS: &str = "/dev/pts";

/// Render the reduced-mode plan. `sbx` is this executable, `proxy` the
/// allowlist proxy of the run (on a host loopback port).
pub fn render(policy: &Policy, sbx: &Path, proxy: Option<&Proxy>) -> Plan {
    let mut args: Vec<OsString> = vec!["__reduced".into()];
    let mut flag = |name: &str, value: &Path| {
        args.push(name.into());
        args.push(value.as_os_str().to_owned());
    };
    let roots = readable(policy, sbx);
    for r in &roots {
        flag("--read", r);
    }
    if policy.filesystem == FsSetting::Restricted {
        for w in &policy.writable {
            flag("--write", w);
        }
    }
    for d in DEVICES {
        flag("--device", Path::new(d));
    }
    let (hidden, _) = hidden(policy, &roots);
    for h in &hidden {
        flag("--hide", h);
    }
    if roots.iter().any(|r| Path::new(TERMINALS).starts_with(r)) {
        flag("--hide", Path::new(TERMINALS));
    }
    if policy.filesystem == FsSetting::Unrestricted {
        args.push("--writes-unrestricted".into());
    }
    let network = match (&policy.network, proxy.map(|p| &p.listen)) {
        (Network::Allow, _) => "allow".to_string(),
        (Network::Allowlist(_), Some(Listen::Loopback(port))) => format!("proxy:{port}"),
        _ => "deny".to_string(),
    };
    args.extend(["--network".into(), network.into()]);
    // The command's own sockets need PID 1 of a sandbox to decide each
    // connection: reduced mode refuses Unix sockets unless all are allowed.
    if policy.unix_sockets == UnixSockets::Allow {
        args.push("--allow-unix-sockets".into());
    }
    args.extend(["--ready-fd".into(), READY_FD.to_string().into()]);
    args.extend(policy.limits.inner_args().into_iter().map(OsString::from));
    args.push("--".into());
    args.extend(policy.command.iter().cloned());
    let mut env = policy.env.clone();
    if let (Network::Allowlist(_), Some(p)) = (&policy.network, proxy) {
        env.set.extend(p.env(sbx));
    }
    Plan {
        program: sbx.to_path_buf(),
        args,
        env: Some(env),
        placeholder: None,
        create: Vec::new(),
        profile: None,
        ready_fd: Some(READY_FD),
        inner_at: None,
        copies: None,
        without_copies: None,
        tmpdir: None,
        masked: Vec::new(),
    }
}

/// The readable roots: everything in the usual mode; in read-only mode the
/// system paths, the project, the working directory and sbx.
fn readable(policy: &Policy, sbx: &Path) -> Vec<PathBuf> {
    if policy.filesystem != FsSetting::ReadOnly {
        return vec![PathBuf::from("/")];
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    let dirs = policy.system_paths.iter().filter_map(|s| match s {
        SystemPath::Dir(p) => Some(p.clone()),
        SystemPath::Symlink { .. } => None,
    });
    for p in dirs.chain([
        policy.project.clone(),
        policy.cwd.clone(),
        sbx.to_path_buf(),
    ]) {
        if !roots.iter().any(|r| p.starts_with(r)) {
            roots.push(p);
        }
    }
    roots
}

/// The credentials to hide (real paths under a readable root), and those
/// Landlock cannot hide: inside a writable root, whose every right reaches
/// everything beneath it.
fn hidden(policy: &Policy, roots: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let writable: &[PathBuf] = match policy.filesystem {
        FsSetting::Restricted => &policy.writable,
        _ => &[],
    };
    let mut hide = Vec::new();
    let mut open = Vec::new();
    for (path, _) in super::bwrap::masks(policy) {
        if !roots.iter().any(|r| path.starts_with(r))
            || hide.contains(&path)
            || open.contains(&path)
        {
            continue;
        }
        if writable.iter().any(|w| path.starts_with(w)) {
            open.push(path);
        } else {
            hide.push(path);
        }
    }
    (hide, open)
}

/// What the kernel's Landlock offers, as far as reduced mode uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Landlock {
    /// The highest ABI the features sbx uses show (3, 4, 6).
    pub abi: u8,
}

impl Landlock {
    /// TCP bind and connect rules (ABI 4).
    pub fn network(self) -> bool {
        self.abi >= 4
    }
    /// Signal and abstract Unix socket scoping (ABI 6).
    pub fn scopes(self) -> bool {
        self.abi >= 6
    }
}

/// What reduced mode does not enforce for this policy, compared with full
/// mode, each in a few words (said on every run and by `sbx check`).
pub fn unenforced(policy: &Policy, landlock: Landlock) -> Vec<String> {
    let mut out = Vec::new();
    let roots = readable(policy, Path::new("/"));
    let (_, open) = hidden(policy, &roots);
    if !open.is_empty() {
        let names: Vec<String> = open
            .iter()
            .take(3)
            .map(|p| p.display().to_string())
            .collect();
        let more = open.len().saturating_sub(3);
        out.push(format!(
            "{} credential file(s) inside writable roots stay readable ({}{}): Landlock cannot hide a file inside a directory it lets the command write",
            open.len(),
            names.join(", "),
            if more > 0 { format!(", and {more} more") } else { String::new() }
        ));
    }
    if policy.filesystem != FsSetting::Unrestricted {
        out.push("the mode, owner and times of files outside the writable roots can be changed (chmod, chown, touch: Landlock does not rule them)".into());
        out.push("/dev/shm is shared with your other programs".into());
    }
    if policy.filesystem == FsSetting::Restricted && !policy.protected.is_empty() {
        out.push("\"runs later\" paths inside writable roots (git hooks and config, .vscode, .envrc, ...) are writable during the run: every change is undone after it, yours made meanwhile included".into());
    }
    if policy.filesystem == FsSetting::ReadOnly {
        out.push("read-only mode has no private /tmp here: nothing is writable".into());
    }
    match &policy.network {
        Network::Allowlist(_) if landlock.network() => out.push(
            "the allowlist proxy's port is reachable on every address, not only the proxy's (Landlock rules name ports, not addresses)".into(),
        ),
        Network::Allowlist(_) => out.push(
            "the allowlist needs Landlock ABI 4 (Linux 6.7): the network is denied instead".into(),
        ),
        Network::Deny => out.push(
            "loopback is the host's, so it is denied too (a test server on 127.0.0.1 cannot be reached)".into(),
        ),
        Network::Allow => {}
    }
    if policy.own_sockets.is_some() {
        out.push("the command has no Unix sockets of its own (Python's multiprocessing, tsx and the like fail): reduced mode has no PID 1 to decide each connection".into());
    }
    if !landlock.scopes() {
        out.push("the command can signal your other processes, sbx included, and a command that kills sbx leaves its background processes running (Landlock ABI 6, Linux 6.12, scopes signals)".into());
        if policy.unix_sockets == UnixSockets::Allow {
            out.push(
                "abstract Unix sockets of the host are reachable (Landlock ABI 6 scopes them)"
                    .into(),
            );
        }
    }
    if policy.limits.processes.is_some() {
        out.push("max_processes counts all of your processes, not only the sandbox's (there is no user namespace of its own)".into());
    }
    if !policy.credentials.is_empty() {
        out.push("the names inside a hidden directory can be listed, not read".into());
    }
    out.push("other processes' command lines are visible in /proc".into());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{test_policy, Credential, Kind};

    fn policy() -> Policy {
        let mut p = test_policy(crate::policy::Platform::Linux);
        p.command = vec!["make".into(), "--".into()];
        // A credential that does not exist is not hidden: nothing to hide.
        p.credentials.push(Credential {
            written: "/home/t/.gone".into(),
            real: None,
            kind: Kind::Missing,
        });
        p
    }

    #[test]
    fn the_plan_names_every_rule() {
        let p = policy();
        let plan = render(&p, Path::new("/usr/bin/sbx"), None);
        let text: Vec<String> = plan
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let mut expected = vec!["__reduced", "--read", "/"];
        let writable: Vec<String> = p
            .writable
            .iter()
            .flat_map(|w| ["--write".to_string(), w.display().to_string()])
            .collect();
        let devices: Vec<String> = DEVICES
            .iter()
            .flat_map(|d| ["--device".to_string(), d.to_string()])
            .collect();
        expected.extend(writable.iter().map(String::as_str));
        expected.extend(devices.iter().map(String::as_str));
        expected.extend([
            "--hide",
            "/home/t/.ssh",
            "--hide",
            "/home/t/.netrc",
            "--hide",
            "/dev/pts",
            "--network",
            "deny",
            "--ready-fd",
            "100",
        ]);
        let limits = p.limits.inner_args();
        expected.extend(limits.iter().map(String::as_str));
        expected.extend(["--", "make", "--"]);
        assert_eq!(text, expected);
        assert_eq!(plan.program, Path::new("/usr/bin/sbx"));
        assert_eq!(plan.env.as_ref(), Some(&p.env));
    }

    #[test]
    fn a_credential_inside_a_writable_root_is_named_not_hidden() {
        let p = policy();
        let said = unenforced(&p, Landlock { abi: 6 });
        assert!(said[0].starts_with("2 credential file(s)"), "{said:?}");
        assert!(said[0].contains(".env"), "{said:?}");
        let plan = render(&p, Path::new("/usr/bin/sbx"), None);
        assert!(!plan
            .args
            .iter()
            .any(|a| a.to_string_lossy().ends_with("/.env")));
    }

    #[test]
    fn the_allowlist_goes_through_the_proxy_port_and_names_its_limit() {
        let mut p = policy();
        p.network = Network::Allowlist(Vec::new());
        let proxy = Proxy {
            listen: Listen::Loopback(41000),
            token: "T".into(),
        };
        let plan = render(&p, Path::new("/usr/bin/sbx"), Some(&proxy));
        let args: Vec<String> = plan
            .args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.windows(2).any(|w| w == ["--network", "proxy:41000"]));
        let env = plan.env.unwrap();
        assert!(env
            .set
            .iter()
            .any(|(k, v)| k == "HTTPS_PROXY" && v.ends_with("@127.0.0.1:41000")));
        assert!(unenforced(&p, Landlock { abi: 4 })
            .iter()
            .any(|s| s.contains("every address")));
        assert!(unenforced(&p, Landlock { abi: 3 })
            .iter()
            .any(|s| s.contains("denied instead")));
        // Without a proxy the allowlist has no network at all.
        let plan = render(&p, Path::new("/usr/bin/sbx"), None);
        assert!(plan
            .args
            .windows(2)
            .any(|w| w[0] == "--network" && w[1] == "deny"));
    }

    #[test]
    fn without_scopes_signals_are_named() {
        let p = policy();
        assert!(unenforced(&p, Landlock { abi: 4 })
            .iter()
            .any(|s| s.contains("signal")));
        assert!(!unenforced(&p, Landlock { abi: 6 })
            .iter()
            .any(|s| s.contains("signal")));
    }
}
