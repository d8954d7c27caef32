//! `Policy` → bubblewrap argv.
//!
//! Mounts are applied in the order given, so the order is the security model:
//!
//! 1. process and namespace flags: `--as-pid-1` (sbx's inner stage is PID 1,
//!    see `inner.rs`), `--die-with-parent`, a new user, PID, IPC, UTS and
//!    cgroup namespace, and a new (empty) network namespace unless the network
//!    is allowed;
//! 2. the base: the host root read-only (`--ro-bind / /`), or for
//!    `filesystem = "read-only"` an empty root with only system paths and the
//!    project, or for `filesystem = false` the host root writable; then a fresh
//!    `/dev` and `/proc`;
//! 3. writable roots (`--bind`), shallowest first, then the directory of
//!    the command's own Unix sockets, its `TMPDIR`: a tmpfs of the
//!    sandbox's own, which no host path leads to;
//! 4. pins: each directory between a writable root and a protected path is
//!    bound onto itself, so it becomes a mount point that cannot be renamed or
//!    replaced (which would free the protected path below it). With private
//!    config copies or a symbolic link on the way (group 7) the inner
//!    stage makes these binds itself, recursively, before the command
//!    exists (`--pin`; `--pin-link` for a link, which only it can mount
//!    onto itself; `run/linux/copies.rs`):
//!    bubblewrap reads its mount table again after each bind, which made
//!    every deep `.env` cost a few milliseconds; a recursive bind made after
//!    groups 5 and 6 carries their mounts along;
//! 5. "runs later" paths read-only (`--ro-bind P P`), then the run's
//!    private git config copies writable (the inner stage mounts a link to
//!    each copy over its config: `run/linux/copies.rs`);
//! 6. credential masks, last so nothing can cover them: a directory becomes an
//!    empty, read-only tmpfs with mode 000; a file gets sbx's placeholder (an
//!    empty file with mode 000 in sbx's cache directory) bound read-only over
//!    it. Nothing is ever created on the host to serve as a mount point: only
//!    paths that exist are masked. With config copies (and a placeholder the
//!    sandbox sees: not in read-only mode) the inner stage masks the files
//!    itself (`--mask`), after its pins and copies, for the pins' reason: a
//!    `--ro-bind` cost bubblewrap about 0.4 ms of mount-table reading per
//!    `.env`;
//! 7. `--cap-drop ALL` (with config copies, `--uid 0` and the two
//!    capabilities the inner stage needs to mount them, which it drops with
//!    all others before the command exists), the working directory (which
//!    the inner stage enters again once its own mounts are made), the
//!    environment changes, and the inner stage with the command after `--`.
//!
//! [`render`] emits each group with a function of its own, in this order.
//!
//! Every path is its own argument, after the flag that takes it, so no path,
//! even one starting with `--`, can be read as a flag.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::{PerRun, Plan, Proxy};
use crate::config::{FsSetting, UnixSockets};
use crate::policy::{GitConfigWatch, Kind, Network, Policy, SystemPath};

/// The descriptor on which the inner stage reports that the sandbox is up:
/// high, so that a descriptor the caller passes down is unlikely to be there.
pub const READY_FD: i32 = 100;

/// The port the inner stage listens on inside the sandbox's own network
/// namespace (nothing else is there) and relays to the proxy.
pub const RELAY_PORT: u16 = 3128;

/// The process and namespace flags every sandbox starts with (the network
/// namespace is separate: `network = "allow"` keeps the host's). The
/// diagnostic sandbox of `run::linux::bwrap::diagnose` uses the same list, so it tests
/// what a real run needs.
pub const NAMESPACE_FLAGS: &[&str] = &[
    "--as-pid-1",
    "--die-with-parent",
    "--unshare-user",
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--unshare-cgroup-try",
];

/// Render the bubblewrap plan. `bwrap` is the bubblewrap to run, `sbx` the
/// executable of the inner stage, `proxy` the allowlist proxy of this run
/// (in allowlist mode; without one, allowlist mode has no network at all),
/// `per_run` what the run made ready for itself. Without its socket
/// directory, the command has no Unix socket at all (unless the policy
/// allows the host's).
pub fn render(
    policy: &Policy,
    bwrap: &Path,
    sbx: &Path,
    proxy: Option<&Proxy>,
    per_run: PerRun,
) -> Plan {
    let proxy = match policy.network {
        Network::Allowlist(_) => proxy,
        _ => None,
    };
    // The inner stage's set-up (which may mount) runs for config copies,
    // and for links to pin, which only it can mount.
    let copies = per_run
        .copies
        .filter(|_| !private_configs(policy).is_empty() || !policy.pinned_links.is_empty());
    let sockets = per_run.sockets.filter(|_| policy.own_sockets.is_some());
    let mut a = Args::default();
    namespaces(&mut a, policy, copies.is_some());
    let visible = root(&mut a, policy, sbx);
    writable_binds(&mut a, policy, sockets);
    pins_and_protected(&mut a, policy, proxy, copies);
    // The inner stage masks files when it mounts at all and sees the
    // placeholder (not in read-only mode, whose root is a tmpfs).
    let inner_masks = copies.is_some() && policy.filesystem != FsSetting::ReadOnly;
    let (file_masks, masked) = credential_masks(&mut a, policy, &visible, inner_masks);
    environment(&mut a, policy, sbx, proxy, copies.is_some(), sockets);
    let inner_at = inner_stage(
        &mut a,
        policy,
        sbx,
        proxy,
        PerRun { copies, sockets },
        &file_masks,
    );
    Plan {
        program: bwrap.to_path_buf(),
        args: a.args,
        env: None,
        placeholder: Some(policy.placeholder.clone()),
        create: to_create(policy),
        profile: None,
        ready_fd: Some(READY_FD),
        inner_at: Some(inner_at),
        copies: copies.map(Path::to_path_buf),
        without_copies: copies.map(|_| {
            let sockets = PerRun {
                copies: None,
                sockets,
            };
            Box::new(render(policy, bwrap, sbx, proxy, sockets))
        }),
        // The mount point of the own sockets stays: it is the user's.
        tmpdir: None,
        masked,
    }
}

/// Group 1: process and namespace flags, and a new network namespace unless the
/// network is allowed. With private config copies the inner stage starts as
/// uid 0 of the namespace, to mount them, and becomes the user again itself.
fn namespaces(a: &mut Args, policy: &Policy, copies: bool) {
    a.flags(NAMESPACE_FLAGS);
    if policy.network != Network::Allow {
        a.flags(&["--unshare-net"]);
    }
    if copies {
        a.flags(&["--uid", "0", "--gid", "0"]);
    }
}

/// The git configs that get a private copy: the protected ones whose
/// content was read (an empty or unreadable one stays read-only) and that
/// no credential mask hides. The inner stage mounts them in this order,
/// and the checks after the run read the copies in it.
pub fn private_configs(policy: &Policy) -> Vec<&GitConfigWatch> {
    let masks = masks(policy);
    policy
        .git_configs
        .iter()
        .filter(|c| c.gets_a_copy())
        .filter(|c| !masks.iter().any(|(m, _)| c.path.starts_with(m)))
        .collect()
}

/// Group 2: the base, then `/dev` and `/proc` (and in read-only mode `/tmp`, the
/// project, the working directory and sbx). Returns what is visible at all
/// in read-only mode.
fn root(a: &mut Args, policy: &Policy, sbx: &Path) -> Vec<PathBuf> {
    // What is visible at all in read-only mode: masks outside it are moot.
    let mut visible: Vec<PathBuf> = Vec::new();
    match policy.filesystem {
        FsSetting::Restricted => a.path2("--ro-bind", Path::new("/"), Path::new("/")),
        FsSetting::Unrestricted => a.path2("--bind", Path::new("/"), Path::new("/")),
        FsSetting::ReadOnly => {
            a.path("--tmpfs", Path::new("/"));
            for sys in &policy.system_paths {
                match sys {
                    SystemPath::Dir(p) => {
                        a.path2("--ro-bind", p, p);
                        visible.push(p.clone());
                    }
                    SystemPath::Symlink { path, target } => a.path2("--symlink", target, path),
                }
            }
        }
    }
    a.path("--dev", Path::new("/dev"));
    a.path("--proc", Path::new("/proc"));
    if policy.filesystem == FsSetting::ReadOnly {
        // A private, empty /tmp: tools need one, and nothing written there
        // reaches the host.
        a.path("--tmpfs", Path::new("/tmp"));
        // The project, the working directory, and sbx itself (the inner
        // stage must be able to start).
        for p in [&policy.project, &policy.cwd, &sbx.to_path_buf()] {
            if !visible.iter().any(|v| p.starts_with(v)) {
                a.path2("--ro-bind", p, p);
                visible.push(p.clone());
            }
        }
    }
    visible
}

/// Group 3: writable roots, in the policy's order (shallowest first), then
/// the directory of the command's own Unix sockets: a fresh tmpfs, over
/// the host's empty directory (and so over what another sandbox made
/// there).
fn writable_binds(a: &mut Args, policy: &Policy, sockets: Option<&Path>) {
    for w in &policy.writable {
        a.path2("--bind", w, w);
    }
    if let Some(dir) = sockets {
        a.path("--tmpfs", dir);
    }
}

/// Groups 4 and 5: pins, then "runs later" paths read-only, then the directory of
/// the proxy's socket read-only and the run's private config copies
/// writable.
fn pins_and_protected(a: &mut Args, policy: &Policy, proxy: Option<&Proxy>, copies: Option<&Path>) {
    // With config copies the inner stage, which may mount, pins (`--pin`).
    if copies.is_none() {
        for pin in pins(policy) {
            a.path2("--bind", pin, pin);
        }
    }
    for p in &policy.protected {
        if p.kind != Kind::Missing {
            a.path2("--ro-bind", &p.path, &p.path);
        }
    }
    if let Some(dir) = proxy.and_then(Proxy::socket).and_then(Path::parent) {
        a.path2("--ro-bind", dir, dir);
    }
    if let Some(dir) = copies {
        a.path2("--bind", dir, dir);
    }
}

/// The directories to pin, but those a directory mask covers (itself a
/// mount point, over which nothing below moves): the inner stage, which
/// pins after the masks, could not even reach them.
fn pins(policy: &Policy) -> impl Iterator<Item = &PathBuf> {
    let masked_dirs: Vec<PathBuf> = masks(policy)
        .into_iter()
        .filter(|(_, kind)| *kind == Kind::Dir)
        .map(|(path, _)| path)
        .collect();
    policy
        .pins
        .iter()
        .filter(move |pin| !masked_dirs.iter().any(|d| pin.starts_with(d)))
}

/// The paths to mask, shallowest first (see [`crate::policy::masked`]).
pub(crate) fn masks(policy: &Policy) -> Vec<(PathBuf, Kind)> {
    crate::policy::masked(&policy.credentials, &policy.env_files)
}

/// Group 6: credential masks, last so nothing can cover them. With
/// `inner_masks`, files are left to the inner stage, which masks them after
/// its pins and copies: returned, in order, then every path masked either
/// way.
fn credential_masks(
    a: &mut Args,
    policy: &Policy,
    visible: &[PathBuf],
    inner_masks: bool,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut files = Vec::new();
    // Credential masks, shallowest first; one inside an already masked
    // directory is covered by it (and could not be mounted on anyway).
    let mut masked_dirs: Vec<PathBuf> = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    let mut once = std::collections::HashSet::new();
    for (path, kind) in masks(policy) {
        if !once.insert(path.clone()) || masked_dirs.iter().any(|d| path.starts_with(d)) {
            continue;
        }
        if policy.filesystem == FsSetting::ReadOnly && !visible.iter().any(|v| path.starts_with(v))
        {
            continue;
        }
        seen.push(path.clone());
        match kind {
            Kind::Dir => {
                a.flags(&["--perms", "000"]);
                a.path("--tmpfs", &path);
                a.path("--remount-ro", &path);
                masked_dirs.push(path);
            }
            _ if inner_masks => files.push(path),
            _ => a.path2("--ro-bind", &policy.placeholder, &path),
        }
    }
    (files, seen)
}

/// Group 7: no capabilities, the working directory, and the environment changes
/// (`TMPDIR` then the proxy's variables last).
fn environment(
    a: &mut Args,
    policy: &Policy,
    sbx: &Path,
    proxy: Option<&Proxy>,
    copies: bool,
    sockets: Option<&Path>,
) {
    a.flags(&["--cap-drop", "ALL"]);
    if copies {
        // For the inner stage alone: CAP_SYS_ADMIN to mount the copies,
        // CAP_SETFCAP to map this namespace's uid 0 in the user namespace it
        // then moves to (the kernel asks for it). It drops both, and every
        // other capability, before the command exists.
        a.flags(&["--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETFCAP"]);
    }
    a.path("--chdir", &policy.cwd);
    if policy.env.clear {
        a.flags(&["--clearenv"]);
    }
    for name in &policy.env.unset {
        a.flags(&["--unsetenv", name]);
    }
    for (k, v) in &policy.env.set {
        a.flags(&["--setenv", k, v]);
    }
    if let Some(dir) = sockets {
        a.flags(&["--setenv", "TMPDIR"]);
        a.args.push(dir.as_os_str().to_owned());
    }
    for (k, v) in proxy.map(|p| p.env(sbx)).unwrap_or_default() {
        a.flags(&["--setenv", &k, &v]);
    }
}

/// Group 7: the inner stage with its options, then the command after `--`.
/// Where bubblewrap's own `--` is.
fn inner_stage(
    a: &mut Args,
    policy: &Policy,
    sbx: &Path,
    proxy: Option<&Proxy>,
    per_run: PerRun,
    file_masks: &[PathBuf],
) -> usize {
    let at = a.args.len();
    a.flags(&["--"]);
    a.args.push(sbx.as_os_str().to_owned());
    a.flags(&["__inner"]);
    match (&policy.own_sockets, per_run.sockets) {
        (Some(own), Some(dir)) => {
            a.flags(&["--unix-sockets", "own"]);
            a.path("--socket-dir", dir);
            for root in &own.symlinks {
                a.path("--symlinks-in", root);
            }
        }
        _ if policy.unix_sockets == UnixSockets::Allow => {
            a.flags(&["--unix-sockets", "allow"]);
        }
        _ => {}
    }
    a.flags(&["--ready-fd", &READY_FD.to_string()]);
    if let Some(socket) = proxy.and_then(Proxy::socket) {
        a.path("--proxy-socket", socket);
    }
    for arg in policy.limits.inner_args() {
        a.flags(&[&arg]);
    }
    match policy.network {
        Network::Deny => a.flags(&["--network-hint", "deny"]),
        Network::Allowlist(_) => a.flags(&["--network-hint", "allowlist"]),
        Network::Allow => {}
    }
    if let Some(dir) = per_run.copies {
        a.path("--config-copies", dir);
        for config in private_configs(policy) {
            a.path("--private-config", &config.path);
        }
        for pin in pins(policy) {
            a.path("--pin", pin);
        }
        for link in &policy.pinned_links {
            a.path("--pin-link", link);
        }
        if !file_masks.is_empty() {
            a.path("--mask-with", &policy.placeholder);
            // A file gone at set-up was moved, where the host's tree shows
            // through: in a writable root, but not under the fresh tmpfs of
            // the command's own sockets, which hides what the host has there.
            let own_tmpfs = per_run.sockets.filter(|_| policy.own_sockets.is_some());
            for file in file_masks {
                let shown = policy.writable.iter().any(|w| file.starts_with(w))
                    && !own_tmpfs.is_some_and(|d| file.starts_with(d));
                let flag = if shown { "--mask" } else { "--mask-if-present" };
                a.path(flag, file);
            }
        }
    }
    a.flags(&["--"]);
    a.args.extend(policy.command.iter().cloned());
    at
}

/// Missing "runs later" paths the executor creates before the run.
fn to_create(policy: &Policy) -> Vec<(PathBuf, Kind)> {
    policy
        .protected
        .iter()
        .filter(|p| p.create)
        .map(|p| (p.path.clone(), p.kind))
        .collect()
}

#[derive(Default)]
struct Args {
    args: Vec<OsString>,
}

impl Args {
    fn flags(&mut self, flags: &[&str]) {
        self.args.extend(flags.iter().map(OsString::from));
    }
    fn path(&mut self, flag: &str, p: &Path) {
        self.args.push(flag.into());
        self.args.push(p.as_os_str().to_owned());
    }
    fn path2(&mut self, flag: &str, src: &Path, dest: &Path) {
        self.args.push(flag.into());
        self.args.push(src.as_os_str().to_owned());
        self.args.push(dest.as_os_str().to_owned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{test_policy, Credential, Platform, Protected};

    const BWRAP: &str = "/usr/bin/bwrap";
    const SBX: &str = "/usr/local/bin/sbx";

    fn plan(policy: &Policy) -> Plan {
        plan_with(policy, PerRun::default())
    }

    fn plan_with(policy: &Policy, per_run: PerRun) -> Plan {
        render(policy, Path::new(BWRAP), Path::new(SBX), None, per_run)
    }

    fn golden(name: &str, actual: &str) {
        crate::backend::assert_golden(name, actual);
    }

    fn args(plan: &Plan) -> Vec<String> {
        plan.args
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    /// Index of the first occurrence of `window` in `args`.
    fn find(args: &[String], window: &[&str]) -> usize {
        args.windows(window.len())
            .position(|w| w == window)
            .unwrap_or_else(|| panic!("{window:?} not in {args:?}"))
    }

    #[test]
    fn default_policy_exact_argv() {
        let p = plan(&test_policy(Platform::Linux));
        let expected: Vec<&str> = vec![
            "--as-pid-1",
            "--die-with-parent",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--unshare-net",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--bind",
            "/tmp",
            "/tmp",
            "--bind",
            "/home/t/proj",
            "/home/t/proj",
            "--bind",
            "/home/t/proj/.git",
            "/home/t/proj/.git",
            "--ro-bind",
            "/home/t/proj/.envrc",
            "/home/t/proj/.envrc",
            "--ro-bind",
            "/home/t/proj/.git/config",
            "/home/t/proj/.git/config",
            "--ro-bind",
            "/home/t/proj/.git/hooks",
            "/home/t/proj/.git/hooks",
            "--perms",
            "000",
            "--tmpfs",
            "/home/t/.ssh",
            "--remount-ro",
            "/home/t/.ssh",
            "--ro-bind",
            "/home/t/.cache/sbx/empty",
            "/home/t/.netrc",
            "--ro-bind",
            "/home/t/.cache/sbx/empty",
            "/home/t/proj/.env",
            "--ro-bind",
            "/home/t/.cache/sbx/empty",
            "/home/t/proj/sub/.env.local",
            "--cap-drop",
            "ALL",
            "--chdir",
            "/home/t/proj",
            "--unsetenv",
            "GITHUB_TOKEN",
            "--setenv",
            "SBX_SANDBOX",
            "1",
            "--",
            SBX,
            "__inner",
            "--ready-fd",
            "100",
            "--limit",
            "processes=4096",
            "--network-hint",
            "deny",
            "--",
            "echo",
            "hi",
        ];
        assert_eq!(args(&p), expected);
        assert_eq!(p.program, PathBuf::from(BWRAP));
        assert_eq!(
            p.placeholder,
            Some(PathBuf::from("/home/t/.cache/sbx/empty"))
        );
        assert_eq!(
            p.create,
            vec![(PathBuf::from("/home/t/proj/.git/hooks"), Kind::Dir)]
        );
        assert_eq!(p.env, None);
        golden("bwrap-default.txt", &p.to_shell_text());
    }

    #[test]
    fn mount_order_is_the_security_model() {
        let a = args(&plan(&test_policy(Platform::Linux)));
        let base = find(&a, &["--ro-bind", "/", "/"]);
        let writable = find(&a, &["--bind", "/home/t/proj", "/home/t/proj"]);
        let pin = find(&a, &["--bind", "/home/t/proj/.git", "/home/t/proj/.git"]);
        let hooks = find(&a, &["--ro-bind", "/home/t/proj/.git/hooks"]);
        let mask = find(&a, &["--tmpfs", "/home/t/.ssh"]);
        let env_mask = find(&a, &["/home/t/.cache/sbx/empty", "/home/t/proj/.env"]);
        let inner = find(&a, &["--", SBX, "__inner"]);
        assert!(base < writable && writable < pin && pin < hooks && hooks < mask);
        assert!(mask < env_mask && env_mask < inner);
    }

    #[test]
    fn network_allow_shares_the_host_network() {
        let mut policy = test_policy(Platform::Linux);
        policy.network = Network::Allow;
        let p = plan(&policy);
        assert!(!args(&p).contains(&"--unshare-net".to_string()));
        golden("bwrap-network-allow.txt", &p.to_shell_text());
    }

    #[test]
    fn allowlist_is_denied_until_the_proxy_exists() {
        let mut policy = test_policy(Platform::Linux);
        policy.network =
            Network::Allowlist(vec![crate::netrule::HostRule::parse("github.com").unwrap()]);
        let p = plan(&policy);
        assert!(args(&p).contains(&"--unshare-net".to_string()));
        golden("bwrap-network-allowlist.txt", &p.to_shell_text());
    }

    #[test]
    fn unix_sockets_reach_the_inner_stage() {
        let mut policy = test_policy(Platform::Linux);
        policy.own_sockets = Some(crate::policy::OwnSockets {
            dir: PathBuf::from("/tmp/sbx-1000"),
            symlinks: vec![PathBuf::from("/home/t/proj")],
        });
        let dir = Path::new("/tmp/sbx-1000");
        let per_run = PerRun {
            copies: None,
            sockets: Some(dir),
        };
        let a = args(&plan_with(&policy, per_run));
        // A tmpfs of its own, after the writable roots; the command's
        // TMPDIR; and the inner stage told where sockets and links may go.
        let mounted = find(&a, &["--tmpfs", "/tmp/sbx-1000"]);
        assert!(mounted > find(&a, &["--bind", "/tmp", "/tmp"]));
        assert!(find(&a, &["--setenv", "TMPDIR", "/tmp/sbx-1000"]) > mounted);
        find(
            &a,
            &[
                "__inner",
                "--unix-sockets",
                "own",
                "--socket-dir",
                "/tmp/sbx-1000",
                "--symlinks-in",
                "/home/t/proj",
                "--ready-fd",
            ],
        );
        // Without the run's directory, no Unix socket at all.
        let a = args(&plan(&policy));
        assert!(!a.contains(&"--unix-sockets".to_string()));
        assert!(!a.contains(&"TMPDIR".to_string()));
        // Nor when the policy gives none, directory or not.
        policy.own_sockets = None;
        let a = args(&plan_with(&policy, per_run));
        assert!(!a.contains(&"--unix-sockets".to_string()));
        assert!(!a.contains(&"/tmp/sbx-1000".to_string()));
        policy.unix_sockets = UnixSockets::Allow;
        let a = args(&plan(&policy));
        find(
            &a,
            &[
                "__inner",
                "--unix-sockets",
                "allow",
                "--ready-fd",
                "100",
                "--limit",
                "processes=4096",
                "--network-hint",
                "deny",
                "--",
                "echo",
            ],
        );
    }

    /// With config copies, the inner stage can mount: it pins, then masks
    /// files (credentials and `.env`) after its copies, with sbx's
    /// placeholder; directories stay bubblewrap's tmpfs masks. The plan it
    /// falls back to without copies masks every file in bubblewrap's argv.
    #[test]
    fn with_config_copies_the_inner_stage_masks_files() {
        use crate::integrity::identity::GitConfigWatch;
        let mut policy = test_policy(Platform::Linux);
        policy.git_configs = vec![GitConfigWatch {
            path: "/home/t/proj/.git/config".into(),
            identity: None,
            before: b"[core]\n".to_vec(),
        }];
        policy.pins = vec!["/home/t/proj/a".into(), "/home/t/proj/a/b".into()];
        policy.env_files = vec!["/home/t/proj/a/b/.env".into(), "/home/t/proj/.env".into()];
        // Inside a masked directory: covered by it, mounted by no one.
        policy.env_files.push("/home/t/.ssh/.env".into());
        let copies = Path::new("/home/t/.cache/sbx/pending/copies-1");
        let per_run = PerRun {
            copies: Some(copies),
            sockets: None,
        };
        let p = plan_with(&policy, per_run);
        let a = args(&p);
        let inner = find(&a, &["__inner"]);
        let tail = find(
            &a,
            &[
                "--pin",
                "/home/t/proj/a",
                "--pin",
                "/home/t/proj/a/b",
                "--mask-with",
                "/home/t/.cache/sbx/empty",
                "--mask-if-present",
                "/home/t/.netrc",
                "--mask",
                "/home/t/proj/.env",
                "--mask",
                "/home/t/proj/a/b/.env",
                "--",
                "echo",
            ],
        );
        assert!(tail > inner);
        assert!(
            !a.iter()
                .take(inner)
                .any(|x| x.ends_with(".env") || x.ends_with(".netrc")),
            "{a:?}"
        );
        assert!(!a.iter().any(|x| x == "/home/t/.ssh/.env"), "{a:?}");
        assert!(find(&a, &["--tmpfs", "/home/t/.ssh"]) < inner);
        // The fallback: bubblewrap binds the placeholder over each file.
        let plain = args(p.without_copies.as_deref().unwrap());
        assert!(!plain.iter().any(|x| x.starts_with("--mask")), "{plain:?}");
        for file in [
            "/home/t/.netrc",
            "/home/t/proj/.env",
            "/home/t/proj/a/b/.env",
        ] {
            find(&plain, &["--ro-bind", "/home/t/.cache/sbx/empty", file]);
        }
        // A pin a directory mask covers is of no use, and the inner stage
        // (after the masks) could not reach it: in neither plan.
        policy.pins.push("/home/t/.ssh".into());
        policy.pins.push("/home/t/.ssh/keys".into());
        let p = plan_with(&policy, per_run);
        for a in [args(&p), args(p.without_copies.as_deref().unwrap())] {
            assert!(!a.iter().any(|x| x.starts_with("/home/t/.ssh/")), "{a:?}");
            assert_eq!(
                a.iter().filter(|x| *x == "/home/t/.ssh").count(),
                2,
                "{a:?}"
            );
        }
        // Read-only mode: the placeholder is not under the sandbox's root.
        policy.filesystem = FsSetting::ReadOnly;
        let a = args(&plan_with(&policy, per_run));
        assert!(!a.iter().any(|x| x.starts_with("--mask")), "{a:?}");
        find(
            &a,
            &["--ro-bind", "/home/t/.cache/sbx/empty", "/home/t/proj/.env"],
        );
    }

    #[test]
    fn read_only_mode() {
        let mut policy = test_policy(Platform::Linux);
        policy.filesystem = FsSetting::ReadOnly;
        policy.writable.clear();
        policy.protected.clear();
        policy.pins.clear();
        policy.system_paths = vec![
            SystemPath::Dir("/usr".into()),
            SystemPath::Symlink {
                path: "/bin".into(),
                target: "usr/bin".into(),
            },
            SystemPath::Dir("/etc".into()),
        ];
        let p = plan(&policy);
        let a = args(&p);
        assert!(!a.iter().any(|x| x == "--bind"), "{a:?}");
        find(&a, &["--tmpfs", "/"]);
        find(&a, &["--symlink", "usr/bin", "/bin"]);
        find(&a, &["--ro-bind", "/home/t/proj", "/home/t/proj"]);
        find(&a, &["--tmpfs", "/tmp"]);
        // Credentials outside what is visible need no mask; .env files inside do.
        assert!(!a.iter().any(|x| x == "/home/t/.ssh"), "{a:?}");
        find(
            &a,
            &["--ro-bind", "/home/t/.cache/sbx/empty", "/home/t/proj/.env"],
        );
        // The host's changes are watched for what is masked, nothing else.
        assert_eq!(
            p.masked,
            vec![
                PathBuf::from("/home/t/proj/.env"),
                PathBuf::from("/home/t/proj/sub/.env.local")
            ]
        );
        golden("bwrap-read-only.txt", &p.to_shell_text());
    }

    #[test]
    fn filesystem_false_still_masks_credentials() {
        let mut policy = test_policy(Platform::Linux);
        policy.filesystem = FsSetting::Unrestricted;
        policy.writable.clear();
        policy.protected.clear();
        policy.pins.clear();
        let a = args(&plan(&policy));
        find(&a, &["--bind", "/", "/"]);
        find(&a, &["--tmpfs", "/home/t/.ssh"]);
    }

    #[test]
    fn extra_deny_read_and_deny_write() {
        let mut policy = test_policy(Platform::Linux);
        policy.credentials.push(Credential {
            written: "/home/t/.config/tool".into(),
            real: Some("/srv/secrets/tool".into()),
            kind: Kind::Dir,
        });
        // Inside an already masked directory: covered, not mounted again.
        policy.credentials.push(Credential {
            written: "/home/t/.ssh/id_rsa".into(),
            real: Some("/home/t/.ssh/id_rsa".into()),
            kind: Kind::File,
        });
        policy.protected.push(Protected {
            path: "/home/t/proj/Makefile".into(),
            kind: Kind::File,
            create: false,
            identity: None,
        });
        let p = plan(&policy);
        let a = args(&p);
        find(
            &a,
            &[
                "--tmpfs",
                "/srv/secrets/tool",
                "--remount-ro",
                "/srv/secrets/tool",
            ],
        );
        find(
            &a,
            &[
                "--ro-bind",
                "/home/t/proj/Makefile",
                "/home/t/proj/Makefile",
            ],
        );
        assert!(!a.iter().any(|x| x == "/home/t/.ssh/id_rsa"), "{a:?}");
        // Watched for the host's changes: what is mounted over, not what a
        // masked directory covers.
        assert!(p.masked.contains(&PathBuf::from("/srv/secrets/tool")));
        assert!(p.masked.contains(&PathBuf::from("/home/t/.ssh")));
        assert!(!p.masked.contains(&PathBuf::from("/home/t/.ssh/id_rsa")));
        golden("bwrap-deny-extra.txt", &p.to_shell_text());
    }

    #[test]
    fn awkward_project_path() {
        let mut policy = test_policy(Platform::Linux);
        let odd = PathBuf::from("/home/t/my \"odd\" (proj)\\x");
        policy.project = odd.clone();
        policy.cwd = odd.clone();
        policy.writable = vec!["/tmp".into(), odd.clone()];
        policy.protected = vec![Protected {
            path: odd.join(".sbx.toml"),
            kind: Kind::File,
            create: false,
            identity: None,
        }];
        policy.pins.clear();
        policy.env_files = vec![odd.join(".env")];
        let p = plan(&policy);
        let a = args(&p);
        let o = odd.to_string_lossy().into_owned();
        find(&a, &["--bind", &o, &o]);
        find(&a, &["--chdir", &o]);
        golden("bwrap-awkward-path.txt", &p.to_shell_text());
    }

    #[test]
    fn missing_protected_paths_are_not_mounted() {
        let mut policy = test_policy(Platform::Linux);
        policy.protected = vec![Protected {
            path: "/home/t/proj/.vscode".into(),
            kind: Kind::Missing,
            create: false,
            identity: None,
        }];
        let a = args(&plan(&policy));
        assert!(!a.iter().any(|x| x == "/home/t/proj/.vscode"), "{a:?}");
    }

    proptest::proptest! {
        /// Whatever a path contains, even a leading `--`, it stays exactly one
        /// argument right after the flag that takes it.
        #[test]
        fn paths_stay_single_arguments(name in "[^\\x00/]{1,40}", dash in proptest::bool::ANY) {
            let name = if dash { format!("--{name}") } else { name };
            let dir = PathBuf::from("/home/t").join(&name);
            let mut policy = test_policy(Platform::Linux);
            policy.project = dir.clone();
            policy.cwd = dir.clone();
            policy.writable = vec![dir.clone()];
            policy.env_files = vec![dir.join(".env")];
            let p = plan(&policy);
            let a: Vec<std::ffi::OsString> = p.args.clone();
            let d = dir.as_os_str().to_owned();
            let bind = a.windows(3).position(|w| w[0] == "--bind" && w[1] == d && w[2] == d);
            proptest::prop_assert!(bind.is_some());
            let chdir = a.windows(2).position(|w| w[0] == "--chdir" && w[1] == d);
            proptest::prop_assert!(chdir.is_some());
            let env = dir.join(".env").into_os_string();
            proptest::prop_assert_eq!(a.iter().filter(|x| **x == env).count(), 1);
            // The command still follows the inner stage's `--`.
            let n = a.len();
            proptest::prop_assert_eq!(&a[n - 3..], &["--".into(), "echo".into(), "hi".into()] as &[std::ffi::OsString]);
        }
    }
}
