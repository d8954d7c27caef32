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
//! 3. writable roots (`--bind`), shallowest first;
//! 4. pins: each directory between a writable root and a protected path is
//!    bound onto itself, so it becomes a mount point that cannot be renamed or
//!    replaced (which would free the protected path below it);
//! 5. "runs later" paths read-only (`--ro-bind P P`);
//! 6. credential masks, last so nothing can cover them: a directory becomes an
//!    empty, read-only tmpfs with mode 000; a file an empty, read-only file
//!    with mode 000 whose data bubblewrap reads from a descriptor open on
//!    `/dev/null`. Nothing is ever created on the host to serve as a mount
//!    point: only paths that exist are masked;
//! 7. `--cap-drop ALL`, the working directory, the environment changes, and
//!    the inner stage with the command after `--`.
//!
//! Every path is its own argument, after the flag that takes it, so no path,
//! even one starting with `--`, can be read as a flag.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::Plan;
use crate::config::FsSetting;
use crate::policy::{Kind, Network, Policy, SystemPath};

/// The first descriptor used for placeholder data.
const FIRST_EMPTY_FD: i32 = 3;

/// Render the bubblewrap plan. `bwrap` is the bubblewrap to run, `sbx` the
/// executable of the inner stage.
pub fn render(policy: &Policy, bwrap: &Path, sbx: &Path) -> Plan {
    let mut a = Args::default();
    a.flags(&["--as-pid-1", "--die-with-parent"]);
    a.flags(&[
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
    ]);
    if policy.network != Network::Allow {
        a.flags(&["--unshare-net"]);
    }

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
        for p in [&policy.project, &policy.cwd] {
            if !visible.iter().any(|v| p.starts_with(v)) {
                a.path2("--ro-bind", p, p);
                visible.push(p.clone());
            }
        }
    }

    for w in &policy.writable {
        a.path2("--bind", w, w);
    }
    for pin in &policy.pins {
        a.path2("--bind", pin, pin);
    }
    for p in &policy.protected {
        if p.kind != Kind::Missing {
            a.path2("--ro-bind", &p.path, &p.path);
        }
    }

    // Credential masks, shallowest first; one inside an already masked
    // directory is covered by it (and could not be mounted on anyway).
    let mut masks: Vec<(PathBuf, Kind)> = Vec::new();
    for c in &policy.credentials {
        if let (Some(real), Kind::Dir | Kind::File) = (&c.real, c.kind) {
            masks.push((real.clone(), c.kind));
        }
    }
    masks.extend(policy.env_files.iter().map(|p| (p.clone(), Kind::File)));
    masks.sort_by_key(|(p, _)| p.components().count());
    let mut masked_dirs: Vec<PathBuf> = Vec::new();
    let mut seen: Vec<PathBuf> = Vec::new();
    for (path, kind) in masks {
        if seen.contains(&path) || masked_dirs.iter().any(|d| path.starts_with(d)) {
            continue;
        }
        if policy.filesystem == FsSetting::ReadOnly && !visible.iter().any(|v| path.starts_with(v)) {
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
            _ => {
                let fd = FIRST_EMPTY_FD + a.empty_fds.len() as i32;
                a.empty_fds.push(fd);
                a.flags(&["--perms", "000", "--ro-bind-data", &fd.to_string()]);
                a.args.push(path.into_os_string());
            }
        }
    }

    a.flags(&["--cap-drop", "ALL"]);
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
    a.flags(&["--"]);
    a.args.push(sbx.as_os_str().to_owned());
    a.flags(&["__inner"]);
    if policy.unix_sockets {
        a.flags(&["--allow-unix-sockets"]);
    }
    a.flags(&["--"]);
    a.args.extend(policy.command.iter().cloned());

    let create = policy
        .protected
        .iter()
        .filter(|p| p.create)
        .map(|p| (p.path.clone(), p.kind))
        .collect();
    Plan {
        program: bwrap.to_path_buf(),
        args: a.args,
        env: None,
        empty_fds: a.empty_fds,
        create,
        profile: None,
    }
}

#[derive(Default)]
struct Args {
    args: Vec<OsString>,
    empty_fds: Vec<i32>,
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
