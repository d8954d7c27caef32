//! `Policy` → Seatbelt profile (SBPL) for `/usr/bin/sandbox-exec`.
//!
//! The profile starts from `(deny default)` and adds groups in a fixed order,
//! because between filtered rules on the same operation the *last* matching
//! rule wins: broad grants first, narrowing denies after them, and the
//! credential denies at the very end so that nothing emitted earlier (or
//! added there by mistake later) can reopen them.
//!
//! 1. header: `(version 1)` and `(deny default (with message "SBX"))`, a fixed
//!    tag so denials of sbx runs can be picked out of the unified log;
//! 2. process: exec, fork, and signals / process info within the sandbox only;
//! 3. sysctl: an explicit read list (a blanket allow would expose other
//!    processes' arguments and environment through `kern.procargs2`);
//! 4. mach/IPC: the services ordinary tools need (user lookup, preferences,
//!    logging). LaunchServices, Apple Events and the pasteboard are never
//!    allowed: each can start or drive a process *outside* the sandbox, or
//!    carry data out;
//! 5. devices and terminals: `/dev/null` and friends, ptys with `file-ioctl`
//!    so raw mode works;
//! 6. reads: everything, or (read-only mode) `/`, system paths and the project;
//! 7. writes: the writable roots, or everywhere with `filesystem = false`;
//! 8. network by mode (`remote ip`/`remote tcp` filters only, so Unix
//!    sockets stay shut);
//! 9. "runs later" paths made unwritable again inside the writable roots;
//! 10. credentials: read, write, unlink, hard link and clone denied under both
//!     the written and the real spelling, the project `.env` files by regex,
//!     and unlink denied on the directories above them that a writable root
//!     holds, so a secret cannot be renamed out from under its rule;
//! 11. defence in depth: explicit denies for the escape services, so a later
//!     mistaken allow cannot open them.
//!
//! Escaping: no host path is ever written into the profile text. Each is a
//! parameter, `(param "NAME")` in the profile and `-D NAME=VALUE` on the
//! command line, where sandbox-exec takes the value verbatim. Sub-paths are
//! built with `string-append` and constant suffixes only, and the `.env`
//! regex quotes the project root with `regex-quote` at load time, so user
//! text never reaches a `#"..."` literal. The profile itself is therefore
//! made of sbx's own constants and parameter names. Paths with NUL or
//! control characters are refused: they have no business in a policy.
//!
//! Arguments: `-p PROFILE`, then each parameter as the two arguments `-D`
//! and `NAME=VALUE` (a value is always its own argument, so no path can be
//! read as an option), then `--` and the command.

mod escape;
mod rules;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::{Plan, Proxy};
use crate::config::FsSetting;
use crate::policy::{Kind, Network, OwnSockets, Policy};
pub use escape::quote;
use escape::{quoted, Profile};
use rules::{
    CREDENTIAL_OPS, ENV_OPS, ENV_REGEX, ENV_TEMPLATE_REGEX, HOST_SOCKET_DIRS, LIBINFO,
    MACH_BASELINE, MACH_DNS, MACH_FORBIDDEN, MACH_TLS, READONLY_SYSTEM_DIRS, READONLY_SYSTEM_FILES,
    READONLY_TRAVERSAL, SHM_NAMES, SYSCTL_NAMES, SYSCTL_PREFIXES, SYSCTL_WRITE_NAMES,
};

/// The only `sandbox-exec` sbx ever runs: a copy earlier on PATH could be anything.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The message attached to every denial. A constant: no user text in the profile.
const TAG: &str = "SBX";

/// Render the Seatbelt plan. `sbx` is sbx's own executable (for git over
/// ssh through the proxy), `proxy` the allowlist proxy of this run (in
/// allowlist mode; without one, allowlist mode has no network at all),
/// `tmpdir` the directory this run made for the command's own sockets, its
/// `TMPDIR` (see `policy/own_sockets.rs`; without one, no Unix socket).
pub fn render(
    policy: &Policy,
    sbx: &Path,
    proxy: Option<&Proxy>,
    tmpdir: Option<&Path>,
) -> Result<Plan> {
    let proxy = match policy.network {
        Network::Allowlist(_) => proxy,
        _ => None,
    };
    let own = policy
        .own_sockets
        .as_ref()
        .zip(tmpdir)
        .map(|(o, dir)| Own { sockets: o, dir });
    let (profile, params) = Profile::build(policy, sbx, proxy.map(Proxy::port), own.as_ref())?;
    let mut env = policy.env.clone();
    if let Some(own) = &own {
        let Some(dir) = own.dir.to_str() else {
            bail!("{}: the path is not valid UTF-8", own.dir.display());
        };
        // tmux and screen ignore TMPDIR: their servers' sockets go there
        // too (the temporary directories take no directory of theirs).
        let vars = [
            ("TMPDIR", dir.to_string()),
            ("TMUX_TMPDIR", dir.to_string()),
            ("SCREENDIR", format!("{dir}/.screen")),
        ];
        env.set.retain(|(k, _)| !vars.iter().any(|(v, _)| k == v));
        env.set
            .extend(vars.into_iter().map(|(k, v)| (k.to_string(), v)));
    }
    if let Some(p) = proxy {
        env.set.extend(p.env(sbx));
    }
    let mut args: Vec<OsString> = vec!["-p".into(), profile.clone().into()];
    for (name, value) in &params {
        args.push("-D".into());
        args.push(format!("{name}={value}").into());
    }
    args.push("--".into());
    args.extend(policy.command.iter().cloned());
    Ok(Plan {
        program: SANDBOX_EXEC.into(),
        args,
        env: Some(env),
        placeholder: None,
        create: Vec::new(),
        ready_fd: None,
        inner_at: None,
        copies: None,
        without_copies: None,
        tmpdir: own.as_ref().map(|o| o.dir.to_path_buf()),
        masked: Vec::new(),
        profile: Some(profile),
    })
}

/// The command's own Unix sockets in one run: where the policy lets them
/// be, and the directory made for them.
struct Own<'a> {
    sockets: &'a OwnSockets,
    dir: &'a Path,
}

impl Profile {
    /// The profile, group by group in the order of the module documentation,
    /// and the parameters it refers to.
    fn build(
        policy: &Policy,
        sbx: &Path,
        proxy_port: Option<u16>,
        own: Option<&Own>,
    ) -> Result<(String, Vec<(String, String)>)> {
        let mut p = Profile::new(policy);
        p.header()?;
        p.process();
        p.sysctl()?;
        p.mach_ipc(policy)?;
        p.devices();
        p.reads(policy, sbx)?;
        // Writable roots as the rest of the profile sees them (for move
        // protection): with `filesystem = false` that is all of `/`.
        let write_roots = p.writes(policy)?;
        p.network(policy, proxy_port)?;
        if let Some(own) = own {
            p.own_sockets(own)?;
        }
        p.credential_denies(policy, &write_roots, own)?;
        p.defence_in_depth()?;
        Ok(p.finish())
    }

    /// Group 1: `(version 1)` and the default deny, with sbx's tag.
    fn header(&mut self) -> Result<()> {
        self.line("(version 1)");
        self.line(&format!("(deny default (with message {}))", quote(TAG)?));
        Ok(())
    }

    /// Group 2: exec and fork; signals and process info within the sandbox only.
    fn process(&mut self) {
        self.section(
            "process: children inherit the sandbox; signals and process info stay inside it",
        );
        self.line("(allow process-exec)");
        self.line("(allow process-fork)");
        self.line("(allow signal (target same-sandbox))");
        self.line("(allow process-info* (target same-sandbox))");
    }

    /// Group 3: the sysctls that may be read (and the few "written").
    fn sysctl(&mut self) -> Result<()> {
        self.section("sysctl: an explicit read list");
        let mut filters = quoted("sysctl-name", SYSCTL_NAMES)?;
        filters.extend(quoted("sysctl-name-prefix", SYSCTL_PREFIXES)?);
        self.rule("allow sysctl-read", &filters);
        self.rule(
            "allow sysctl-write",
            &quoted("sysctl-name", SYSCTL_WRITE_NAMES)?,
        );
        Ok(())
    }

    /// Group 4, mach services and IPC: the user lookup only in read-only mode.
    fn mach_ipc(&mut self, policy: &Policy) -> Result<()> {
        if policy.filesystem == FsSetting::ReadOnly {
            self.section("mach: the user lookup only");
            self.rule("allow mach-lookup", &quoted("global-name", &[LIBINFO])?);
            self.line("(allow ipc-posix-sem)");
            return Ok(());
        }
        self.section("mach and IPC: user lookup, preferences, logging, power assertions");
        let mut filters = quoted("global-name", &[LIBINFO])?;
        filters.extend(quoted("global-name", MACH_BASELINE)?);
        filters.extend(quoted("local-name", &["com.apple.cfprefsd.agent"])?);
        self.rule("allow mach-lookup", &filters);
        self.line("(allow user-preference-read)");
        self.line(r#"(allow ipc-posix-shm-read* (ipc-posix-name-prefix "apple.cfprefs."))"#);
        self.line(
            r#"(allow ipc-posix-shm-read-data (ipc-posix-name "apple.shm.notification_center"))"#,
        );
        self.line(r#"(allow iokit-open (iokit-registry-entry-class "RootDomainUserClient"))"#);
        self.comment("Python multiprocessing locks; shared memory by name (see SHM_NAMES)");
        self.line("(allow ipc-posix-sem)");
        let shm: Vec<String> = SHM_NAMES
            .iter()
            .map(|r| format!(r##"(ipc-posix-name-regex #"{r}")"##))
            .collect();
        self.rule(
            "allow ipc-posix-shm-read* ipc-posix-shm-write-data ipc-posix-shm-write-create ipc-posix-shm-write-unlink",
            &shm,
        );
        // Node's os.cpus() asks the host port for per-CPU figures
        // (host_processor_info). `mach-host*` names setting the host's
        // special and exception ports, which needs the privileged host
        // port, and that (`mach-priv-host-port`) is never allowed.
        self.comment("host statistics (Node's os.cpus()); the privileged host port stays shut");
        self.line("(allow mach-host*)");
        Ok(())
    }

    /// Group 5: devices and terminals.
    fn devices(&mut self) {
        self.section("devices and terminals (file-ioctl on ttys, or raw mode breaks)");
        self.rule(
            "allow file-read* file-write-data",
            &[r#"(require-all (literal "/dev/null") (vnode-type CHARACTER-DEVICE))"#.to_string()],
        );
        self.rule(
            "allow file-read* file-write-data",
            &[
                r#"(literal "/dev/zero")"#.to_string(),
                r#"(literal "/dev/stdout")"#.to_string(),
                r#"(literal "/dev/stderr")"#.to_string(),
                r#"(subpath "/dev/fd")"#.to_string(),
            ],
        );
        self.rule(
            "allow file-read*",
            &[
                r#"(literal "/dev/random")"#.to_string(),
                r#"(literal "/dev/urandom")"#.to_string(),
                r#"(literal "/dev/autofs_nowait")"#.to_string(),
            ],
        );
        self.line(r#"(allow file-read* file-write-data file-ioctl (literal "/dev/dtracehelper"))"#);
        self.line("(allow pseudo-tty)");
        self.rule(
            "allow file-read* file-write-data file-ioctl",
            &[
                r#"(literal "/dev/ptmx")"#.to_string(),
                r#"(literal "/dev/tty")"#.to_string(),
                r#"(regex #"^/dev/ttys[0-9]+$")"#.to_string(),
            ],
        );
        self.line(r#"(allow file-read-metadata (subpath "/dev"))"#);
    }

    /// Group 6, reads: everything, or in read-only mode a short list.
    fn reads(&mut self, policy: &Policy, sbx: &Path) -> Result<()> {
        match policy.filesystem {
            FsSetting::ReadOnly => self.read_only_reads(policy, sbx)?,
            FsSetting::Restricted | FsSetting::Unrestricted => {
                self.section("reads: everything (the credentials are denied at the end)");
                self.line("(allow file-read*)");
            }
        }
        Ok(())
    }

    /// Group 7, writes: the writable roots, or everywhere with `filesystem = false`.
    /// Returns the writable roots as the rest of the profile sees them.
    fn writes(&mut self, policy: &Policy) -> Result<Vec<PathBuf>> {
        Ok(match policy.filesystem {
            FsSetting::Restricted => {
                self.section("writes: the writable roots (real paths)");
                for root in &policy.writable {
                    let expr = self.path_expr("WRITABLE_ROOT", root)?;
                    self.line(&format!("(allow file-write* (subpath {expr}))"));
                    // Hard links and clones are operations of their own
                    // (checked on the source); git, pnpm and ccache need them
                    // inside the project. The credential block still denies
                    // them on every credential path.
                    self.line(&format!("(allow file-link file-clone (subpath {expr}))"));
                }
                policy.writable.clone()
            }
            FsSetting::Unrestricted => {
                self.section("writes: everywhere (filesystem = false)");
                self.line(r#"(allow file-write* (subpath "/"))"#);
                // As for the writable roots: links and clones are not
                // `file-write*` (Rust's fs::copy clones, and takes EPERM
                // for an error). The credential block still denies them.
                self.line(r#"(allow file-link file-clone (subpath "/"))"#);
                vec![PathBuf::from("/")]
            }
            FsSetting::ReadOnly => Vec::new(),
        })
    }

    /// Group 8: the network by mode.
    fn network(&mut self, policy: &Policy, proxy_port: Option<u16>) -> Result<()> {
        let read_only = policy.filesystem == FsSetting::ReadOnly;
        match (&policy.network, proxy_port) {
            // Read-only mode permits none of the services `allow` needs;
            // deny, or an allowlist without its proxy: no rule at all.
            (Network::Allow, _) if read_only => self.section("network: none"),
            (Network::Allow, _) => self.network_allow()?,
            (Network::Allowlist(_), Some(port)) => self.network_proxy(port)?,
            (Network::Deny | Network::Allowlist(_), _) => self.section("network: none"),
        }
        Ok(())
    }

    /// `network = "allow"`: any remote host by IP, listeners, DNS, TLS trust.
    fn network_allow(&mut self) -> Result<()> {
        self.section(
            "network: any remote host by IP (not Unix sockets), listeners, DNS, TLS trust",
        );
        self.line(r#"(allow network-outbound (remote ip "*:*"))"#);
        self.line(r#"(allow network-bind (local ip "*:*"))"#);
        self.line(r#"(allow network-inbound (local ip "*:*"))"#);
        self.line(r#"(allow network-outbound (literal "/private/var/run/mDNSResponder"))"#);
        let filters = quoted("global-name", &[MACH_DNS, MACH_TLS].concat())?;
        self.rule("allow mach-lookup", &filters);
        self.line(
            "(allow system-socket (require-all (socket-domain AF_SYSTEM) (socket-protocol 2)))",
        );
        Ok(())
    }

    /// `network = "allowlist"` with its proxy: the proxy's port only.
    fn network_proxy(&mut self, port: u16) -> Result<()> {
        if port == 0 {
            bail!("the allowlist proxy has no port");
        }
        // Nothing else: no DNS (the proxy resolves names, and a
        // resolver reachable from inside carries data out in its
        // queries), and no trustd, which fetches certificate URLs
        // on the caller's behalf, to any host.
        self.section("network: only the allowlist proxy sbx serves for this run, on a port chosen per run; no DNS");
        // `tcp`, not `ip`: nothing of the proxy's is UDP.
        self.line(&format!(
            "(allow network-outbound (remote tcp {}))",
            quote(&format!("localhost:{port}"))?
        ));
        Ok(())
    }

    /// Group 8, the command's own Unix sockets: its `TMPDIR`, writable
    /// whatever the writable roots, and the only place where a socket is
    /// bound, accepted on or connected to.
    fn own_sockets(&mut self, own: &Own) -> Result<()> {
        self.section("the command's own Unix sockets: bound and reached in its TMPDIR only, a directory sbx made for this run");
        let dir = self.named("OWN_TMPDIR", own.dir)?;
        self.line(&format!("(allow file-write* (subpath {dir}))"));
        self.line(&format!("(allow file-link file-clone (subpath {dir}))"));
        self.line("(allow system-socket (socket-domain AF_UNIX))");
        self.line(&format!(
            "(allow network-bind network-inbound (local unix-socket (subpath {dir})))"
        ));
        self.line(&format!(
            "(allow network-outbound (remote unix-socket (subpath {dir})))"
        ));
        Ok(())
    }

    /// Group 9, the places of sockets (see `policy/own_sockets.rs`): no
    /// socket file enters or leaves the command's `TMPDIR`, other runs'
    /// directories are out of reach, and where host programs look for their
    /// servers no directory or symbolic link is made, and no directory
    /// removed or renamed.
    fn socket_places(&mut self, own: &Own, home: &Path, guarded: &mut Vec<Guarded>) -> Result<()> {
        self.section("sockets stay where they are: none of the host's enters the command's TMPDIR, none of the command's leaves it");
        let dir = self.named("OWN_TMPDIR", own.dir)?;
        let outside = format!("(require-not (subpath {dir}))");
        self.line(&format!(
            "(deny file-write-create file-write-unlink (require-all (vnode-type SOCKET) {outside}))"
        ));
        // Judged on the source, whatever the destination: no second name
        // for a socket, nor a link or directory copied elsewhere.
        self.line("(deny file-link file-clone (require-any (vnode-type SOCKET) (vnode-type SYMLINK) (vnode-type DIRECTORY)))");
        // Only sbx makes it: a job left from the run cannot make it again.
        self.line(&format!(
            "(deny file-write-unlink file-write-create (literal {dir}))"
        ));
        // Where container engines and agents keep their sockets: never
        // carried into TMPDIR, even from a writable root (`~` made
        // writable) where directories may move.
        for rel in HOST_SOCKET_DIRS {
            guarded.push(Guarded::Contents(home.join(rel)));
        }
        let runs = self.named("OWN_TMPDIR_PARENT", &own.sockets.dir)?;
        // Their parent itself stays readable: the way to this run's.
        self.comment("other runs' directories: neither read nor written");
        self.line(&format!(
            "(deny {CREDENTIAL_OPS} (require-all (subpath {runs}) (require-not (literal {runs})) {outside}))"
        ));
        self.comment(
            "where host programs look for their servers (the temporary directories): files only",
        );
        let mut kept = vec![outside];
        for root in &own.sockets.symlinks {
            let expr = self.path_expr("LINKS_OK", root)?;
            kept.push(format!("(require-not (subpath {expr}))"));
        }
        let kept = kept.join("\n    ");
        self.line(&format!(
            "(deny file-write-create\n  (require-all\n    (require-any (vnode-type DIRECTORY) (vnode-type SYMLINK))\n    {kept}))"
        ));
        self.line(&format!(
            "(deny file-write-unlink\n  (require-all\n    (vnode-type DIRECTORY)\n    {kept}))"
        ));
        Ok(())
    }

    /// Groups 9 and 10, the denies at the end: "runs later" paths, the
    /// places of sockets, credentials, `.env` files, and the directories
    /// above them that must not move.
    fn credential_denies(
        &mut self,
        policy: &Policy,
        write_roots: &[PathBuf],
        own: Option<&Own>,
    ) -> Result<()> {
        // Paths whose parents must not be renamed: everything denied below.
        let mut guarded: Vec<Guarded> = Vec::new();
        self.protected(policy, &mut guarded)?;
        if let Some(own) = own {
            self.socket_places(own, &policy.home, &mut guarded)?;
        }
        self.credentials(policy, &mut guarded)?;
        self.env_files(policy, &mut guarded)?;
        self.unrenamable(&guarded, write_roots)
    }

    /// Group 9: "runs later" paths made unwritable again inside the writable roots.
    fn protected(&mut self, policy: &Policy, guarded: &mut Vec<Guarded>) -> Result<()> {
        if !policy.protected.is_empty() {
            self.section("\"runs later\" paths: not writable, not even creatable");
            for prot in &policy.protected {
                let expr = self.path_expr("PROTECTED", &prot.path)?;
                let mut filters = vec![format!("(literal {expr})"), format!("(subpath {expr})")];
                // In any letter case too: `.VSCODE/tasks.json` is VS Code's
                // file on a case-insensitive volume.
                filters.extend(self.any_case(&prot.path)?);
                self.rule("deny file-write*", &filters);
                guarded.push(Guarded::Path(prot.path.clone()));
            }
        }
        Ok(())
    }

    /// Group 10: credentials, under both the written and the real spelling.
    fn credentials(&mut self, policy: &Policy, guarded: &mut Vec<Guarded>) -> Result<()> {
        self.section("credentials: last, so no earlier rule can reopen them");
        for cred in &policy.credentials {
            let mut spellings = vec![&cred.written];
            if let Some(real) = cred.real.as_ref().filter(|r| **r != cred.written) {
                spellings.push(real);
            }
            let mut filters = Vec::new();
            for path in spellings {
                let expr = self.path_expr("CREDENTIAL", path)?;
                if cred.kind != Kind::Dir {
                    filters.push(format!("(literal {expr})"));
                }
                if cred.kind != Kind::File {
                    filters.push(format!("(subpath {expr})"));
                }
                guarded.push(Guarded::Path(path.clone()));
            }
            self.rule(&format!("deny {CREDENTIAL_OPS}"), &filters);
        }
        Ok(())
    }

    /// Group 10, the project's `.env` files: by regex, and those found by name.
    fn env_files(&mut self, policy: &Policy, guarded: &mut Vec<Guarded>) -> Result<()> {
        self.section(".env and .env.* at any depth in the project, any case; templates excepted");
        self.env_rule(&policy.project)?;
        if !policy.env_files.is_empty() {
            let mut filters = Vec::new();
            for file in &policy.env_files {
                let expr = self.path_expr("ENV_FILE", file)?;
                filters.push(format!("(literal {expr})"));
            }
            self.rule(&format!("deny {ENV_OPS}"), &filters);
        }
        // The regex is anchored at the project root, so the root itself must
        // not move either.
        guarded.push(Guarded::Contents(policy.project.clone()));
        Ok(())
    }

    /// Group 10: unlink denied on the directories above the guarded paths that a
    /// writable root holds.
    fn unrenamable(&mut self, guarded: &[Guarded], write_roots: &[PathBuf]) -> Result<()> {
        let ancestors = ancestors_in_roots(guarded, write_roots);
        if !ancestors.is_empty() {
            self.section("directories above those paths that a writable root holds: not renamable");
            let mut filters = Vec::new();
            for dir in &ancestors {
                let expr = self.path_expr("ANCESTOR", dir)?;
                filters.push(format!("(literal {expr})"));
            }
            self.rule("deny file-write-unlink", &filters);
        }
        Ok(())
    }

    /// Group 11: explicit denies for the escape services.
    fn defence_in_depth(&mut self) -> Result<()> {
        self.section(
            "defence in depth: the escape services stay shut even if allowed above by mistake",
        );
        self.rule("deny mach-lookup", &quoted("global-name", MACH_FORBIDDEN)?);
        self.line("(deny lsopen)");
        self.line("(deny appleevent-send)");
        // TIOCSTI pushes bytes into the input of the terminal the command
        // inherited: the user's shell would run them once sbx has exited.
        // Seatbelt refuses it without this line on recent macOS (as
        // `hid-control`); the explicit deny keeps it refused should that
        // change. The symbol is known from macOS 13 on (a number would
        // match its low 16 bits only).
        self.comment("keystrokes pushed into the terminal's input (TIOCSTI)");
        self.line("(deny file-ioctl (ioctl-command TIOCSTI))");
        self.comment("launchd's per-user sockets (the ssh agent among them)");
        self.line(r#"(deny network-outbound (remote unix-socket (path-regex #"^/private/(tmp|var/run)/com\.apple\.launchd\.[^/]+/Listeners$")))"#);
        Ok(())
    }

    /// Reads of `filesystem = "read-only"`: the root node, traversal
    /// metadata, system paths, the project (and working directory), and sbx
    /// itself (`sbx __connect` for ssh through the proxy, `sbx check`'s probe).
    fn read_only_reads(&mut self, policy: &Policy, sbx: &Path) -> Result<()> {
        self.section("reads: the root node, system paths and the project only");
        self.comment("dyld aborts every process without the root node (macOS 26)");
        self.line(r#"(allow file-read* (literal "/"))"#);
        let mut roots = vec![policy.project.clone()];
        if !policy.cwd.starts_with(&policy.project) {
            roots.push(policy.cwd.clone());
        }
        self.traversal(&roots)?;
        let dirs = quoted("subpath", READONLY_SYSTEM_DIRS)?;
        let files = quoted("literal", READONLY_SYSTEM_FILES)?;
        self.rule("allow file-read*", &[dirs.clone(), files].concat());
        let developer = self.developer_dir(policy)?;
        self.project_reads(policy, &roots, dirs, developer)?;
        self.sbx_itself(sbx, &roots)
    }

    /// Metadata of the traversal nodes and of the ancestors of `roots`.
    fn traversal(&mut self, roots: &[PathBuf]) -> Result<()> {
        let mut filters = quoted("literal", READONLY_TRAVERSAL)?;
        let mut seen: Vec<PathBuf> = Vec::new();
        for root in roots {
            for dir in root.ancestors().skip(1) {
                if dir == Path::new("/") || seen.iter().any(|s| s == dir) {
                    continue;
                }
                seen.push(dir.to_path_buf());
                let expr = self.path_expr("ANCESTOR", dir)?;
                filters.push(format!("(literal {expr})"));
            }
        }
        self.rule("allow file-read-metadata", &filters);
        Ok(())
    }

    /// Reads of the developer directory; returns its `subpath` filters.
    fn developer_dir(&mut self, policy: &Policy) -> Result<Vec<String>> {
        // The developer directory (Xcode or the Command Line Tools) the
        // policy found for the xcrun shims.
        let mut developer = Vec::new();
        for sys in &policy.system_paths {
            if let crate::policy::SystemPath::Dir(dir) = sys {
                let expr = self.path_expr("DEVELOPER_DIR", dir)?;
                developer.push(format!("(subpath {expr})"));
            }
        }
        if !developer.is_empty() {
            self.comment(
                "the developer directory the xcrun shims (/usr/bin/git, python3) run from",
            );
            self.rule("allow file-read*", &developer);
        }
        Ok(developer)
    }

    /// Code loading from the system directories `dirs`, the `developer`
    /// directory and the project; reads of the project and working directory.
    fn project_reads(
        &mut self,
        policy: &Policy,
        roots: &[PathBuf],
        dirs: Vec<String>,
        developer: Vec<String>,
    ) -> Result<()> {
        let project = self.path_expr("PROJECT_ROOT", &policy.project)?;
        self.comment("loading code: the same system directories and the project");
        let mut code = dirs;
        code.extend(developer);
        code.push(format!("(subpath {project})"));
        self.rule("allow file-map-executable", &code);
        let mut own = vec![format!("(subpath {project})")];
        for root in roots.iter().skip(1) {
            let expr = self.path_expr("CWD", root)?;
            own.push(format!("(subpath {expr})"));
        }
        self.rule("allow file-read*", &own);
        Ok(())
    }

    /// sbx's own executable, unless a read rule covers it already.
    fn sbx_itself(&mut self, sbx: &Path, roots: &[PathBuf]) -> Result<()> {
        let covered = roots.iter().any(|r| sbx.starts_with(r))
            || READONLY_SYSTEM_DIRS.iter().any(|d| sbx.starts_with(d));
        if sbx.is_absolute() && !covered {
            let expr = self.path_expr("SBX_EXE", sbx)?;
            self.line(&format!(
                "(allow file-read* file-map-executable (literal {expr}))"
            ));
        }
        Ok(())
    }

    /// The `.env` denial for one project root. The root is quoted by
    /// `regex-quote` when the profile is loaded; the regex text after it is
    /// sbx's constant.
    fn env_rule(&mut self, root: &Path) -> Result<()> {
        let expr = if root == Path::new("/") {
            String::new()
        } else {
            self.path_expr("PROJECT_ROOT", root)?
        };
        let regex = |tail: &str| {
            if root == Path::new("/") {
                // `regex-quote "/"` followed by the tail would need `//`.
                format!(r##"(regex #"^{tail}")"##)
            } else {
                format!(r##"(regex (string-append "^" (regex-quote {expr}) #"{tail}"))"##)
            }
        };
        // Files only: `python -m venv .env` makes a directory of that name
        // (Linux leaves such a directory alone too). A path being created
        // whose type is unknown stays denied.
        let text = format!(
            "(deny {ENV_OPS}\n  (require-all\n    {}\n    (require-not {})\n    (require-not (vnode-type DIRECTORY))))",
            regex(ENV_REGEX),
            regex(ENV_TEMPLATE_REGEX)
        );
        self.line(&text);
        Ok(())
    }
}

/// A path denied by a rule, as far as moving it is concerned.
enum Guarded {
    /// The rule names the path itself and denies its unlink already.
    Path(PathBuf),
    /// The rule names what is below this directory (the `.env` regex), so
    /// the directory itself must not move either.
    Contents(PathBuf),
}

/// The directories that must not be renamed so that each guarded path keeps
/// the name its rule matches: its ancestors inside the writable root that
/// holds it, the root included. (`rename(2)` asks Seatbelt about the source,
/// which a writable root allows even for the root itself, and about the
/// destination, which a second writable root provides.) Paths outside every
/// writable root need nothing: their parents cannot be written. `/` is left
/// out: it cannot move.
fn ancestors_in_roots(guarded: &[Guarded], roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for g in guarded {
        let (path, skip) = match g {
            Guarded::Path(p) => (p, 1),
            Guarded::Contents(p) => (p, 0),
        };
        let Some(root) = roots
            .iter()
            .find(|r| path.starts_with(r) && (skip == 0 || path != *r))
        else {
            continue;
        };
        for dir in path.ancestors().skip(skip) {
            if !dir.starts_with(root) {
                break;
            }
            if dir != Path::new("/") && !out.iter().any(|o| o == dir) {
                out.push(dir.to_path_buf());
            }
        }
    }
    out.sort_by(|a, b| {
        a.components()
            .count()
            .cmp(&b.components().count())
            .then(a.cmp(b))
    });
    out
}

#[cfg(test)]
#[path = "seatbelt_tests.rs"]
mod tests;
