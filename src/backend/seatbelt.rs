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

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Result};

use super::{Plan, Proxy};
use crate::config::FsSetting;
use crate::policy::{
    Kind, Network, Policy, AGENT_TOKENS, CREDENTIALS, CREDENTIALS_MACOS, HOME_PROTECTED,
    PROJECT_PROTECTED,
};

/// The only `sandbox-exec` sbx ever runs: a copy earlier on PATH could be anything.
pub const SANDBOX_EXEC: &str = "/usr/bin/sandbox-exec";

/// The message attached to every denial. A constant: no user text in the profile.
const TAG: &str = "SBX";

/// sysctl names readable by everyone: CPU, memory and OS facts that runtimes
/// probe at start-up (Node's `os.cpus()`, thread pools, Java, uname).
const SYSCTL_NAMES: &[&str] = &[
    "hw.activecpu",
    "hw.busfrequency_compat",
    "hw.byteorder",
    "hw.cacheconfig",
    "hw.cachelinesize",
    "hw.cachelinesize_compat",
    "hw.cpufamily",
    "hw.cpufrequency",
    "hw.cpufrequency_compat",
    "hw.cputype",
    "hw.l1dcachesize",
    "hw.l1dcachesize_compat",
    "hw.l1icachesize",
    "hw.l1icachesize_compat",
    "hw.l2cachesize",
    "hw.l2cachesize_compat",
    "hw.l3cachesize",
    "hw.l3cachesize_compat",
    "hw.logicalcpu",
    "hw.logicalcpu_max",
    "hw.machine",
    "hw.memsize",
    "hw.model",
    "hw.ncpu",
    "hw.nperflevels",
    "hw.packages",
    "hw.pagesize",
    "hw.pagesize_compat",
    "hw.physicalcpu",
    "hw.physicalcpu_max",
    "hw.tbfrequency",
    "hw.tbfrequency_compat",
    "hw.vectorunit",
    "kern.argmax",
    "kern.hostname",
    "kern.maxfilesperproc",
    "kern.maxproc",
    "kern.osproductversion",
    "kern.osrelease",
    "kern.ostype",
    "kern.osvariant_status",
    "kern.osversion",
    "kern.secure_kernel",
    "kern.usrstack64",
    "kern.version",
    "machdep.cpu.brand_string",
    "sysctl.proc_cputype",
    "vm.loadavg",
];

/// sysctl prefixes readable by everyone. `kern.proc.pid.` gives process
/// status (not arguments); `net.routetable.` is what resolvers read.
const SYSCTL_PREFIXES: &[&str] = &[
    "hw.optional.",
    "hw.perflevel",
    "kern.proc.pgrp.",
    "kern.proc.pid.",
    "net.routetable.",
];

/// "Write" sysctls that only read in practice (Java's CPU probe, V8).
const SYSCTL_WRITE_NAMES: &[&str] = &["kern.grade_cputype", "kern.tcsm_enable"];

/// The user lookup (getpwuid: `~`, `id`, git, ssh). The only mach service of
/// read-only mode.
const LIBINFO: &str = "com.apple.system.opendirectoryd.libinfo";

/// Mach services of the normal modes, after the user lookup.
const MACH_BASELINE: &[&str] = &[
    // group membership checks
    "com.apple.system.opendirectoryd.membership",
    // CFPreferences reads
    "com.apple.cfprefsd.daemon",
    "com.apple.cfprefsd.agent",
    // os_log; without these logging is dropped silently
    "com.apple.logd",
    "com.apple.system.logger",
    "com.apple.diagnosticd",
    // power assertions taken by runtimes
    "com.apple.PowerManagement.control",
];

/// Mach services for name resolution in `network = "allow"`.
const MACH_DNS: &[&str] = &[
    "com.apple.dnssd.service",
    "com.apple.SystemConfiguration.configd",
    "com.apple.SystemConfiguration.DNSConfiguration",
];

/// Mach services for TLS certificate trust in `network = "allow"`.
/// SecurityServer is also the way to the keychain, which is why
/// `~/Library/Keychains` is a credential path.
const MACH_TLS: &[&str] = &[
    "com.apple.trustd",
    "com.apple.trustd.agent",
    "com.apple.ocspd",
    "com.apple.networkd",
    "com.apple.SecurityServer",
    "com.apple.bsd.dirhelper",
];

/// Services that start or drive processes outside the sandbox (`open`,
/// `osascript`) or carry data out (the pasteboard). Never allowed; denied
/// again explicitly at the end.
const MACH_FORBIDDEN: &[&str] = &[
    "com.apple.coreservices.launchservicesd",
    "com.apple.lsd.mapdb",
    "com.apple.lsd.modifydb",
    "com.apple.coreservices.appleevents",
    "com.apple.coreservices.quarantine-resolver",
    "com.apple.pasteboard.1",
];

/// System directories readable (and mappable as code) in read-only mode.
/// `/System/Library` rather than `/System`, which also holds
/// `/System/Volumes/Data`, another spelling of every user file.
const READONLY_SYSTEM_DIRS: &[&str] = &[
    "/bin",
    "/sbin",
    "/usr/bin",
    "/usr/sbin",
    "/usr/libexec",
    "/usr/lib",
    "/usr/share",
    "/System/Library",
    "/System/Cryptexes",
    "/System/Volumes/Preboot/Cryptexes",
    "/Library/Apple",
    "/Library/Preferences/Logging",
    "/Library/Filesystems/NetFSPlugins",
    "/Library/Developer/CommandLineTools",
    "/private/var/db/timezone",
    "/private/etc/ssl",
];

/// System files readable in read-only mode (the last three serve the
/// `/usr/bin/git` xcrun shim).
const READONLY_SYSTEM_FILES: &[&str] = &[
    "/private/etc/localtime",
    "/private/etc/passwd",
    "/private/etc/services",
    "/private/etc/protocols",
    "/private/etc/hosts",
    "/private/etc/resolv.conf",
    "/private/etc/shells",
    "/private/etc/zshenv",
    "/private/etc/zprofile",
    "/private/etc/zlogin",
    "/private/var/select/sh",
    "/private/var/select/developer_dir",
    "/private/var/db/xcode_select_link",
];

/// Nodes whose metadata path resolution needs in read-only mode: the
/// `/etc` and `/var` symlinks and the way down to the data volume.
const READONLY_TRAVERSAL: &[&str] = &[
    "/etc",
    "/var",
    "/System",
    "/System/Volumes",
    "/System/Volumes/Data",
    "/System/Volumes/Data/private",
];

/// Operations denied on credential paths. The wildcard and the concrete read
/// operations are both named: a rule on a concrete operation is reported not
/// to be overridden by one on the wildcard, so naming both makes the deny win
/// against an earlier allow in either form. `file-link` is checked against the
/// source of `link(2)` and `file-clone` stops `clonefile(2)`: both would give
/// the secret a second, unlisted path.
const CREDENTIAL_OPS: &str = "file-read* file-read-data file-read-metadata file-read-xattr file-write* file-write-unlink file-link file-clone";

/// Operations denied on project `.env` files: as for credentials, except
/// writes, so a template can still be copied into place; unlink stays denied
/// so a file cannot be renamed to a name the rule does not cover.
const ENV_OPS: &str = "file-read* file-read-data file-read-metadata file-read-xattr file-write-unlink file-link file-clone";

/// Below the quoted project root: a `.env` or `.env.*` entry at any depth,
/// any letter case (AppleMatch has no case-insensitive flag).
const ENV_REGEX: &str = r"/(.*/)?[.][eE][nN][vV]([.][^/]*)?$";

/// The committed templates excepted from [`ENV_REGEX`] (through `require-not`:
/// AppleMatch has no look-ahead). Same names as `envscan::ENV_TEMPLATES`.
const ENV_TEMPLATE_REGEX: &str = r"/(.*/)?[.][eE][nN][vV][.]([eE][xX][aA][mM][pP][lL][eE]|[sS][aA][mM][pP][lL][eE]|[tT][eE][mM][pP][lL][aA][tT][eE])$";

/// What sbx runs to find out whether sandbox-exec applies a profile at all.
#[cfg_attr(target_os = "linux", allow(dead_code))]
pub const TRUE: &str = "/usr/bin/true";

/// Render the Seatbelt plan. `sbx` is sbx's own executable (for git over
/// ssh through the proxy), `proxy` the allowlist proxy of this run (in
/// allowlist mode; without one, allowlist mode has no network at all).
pub fn render(policy: &Policy, sbx: &Path, proxy: Option<&Proxy>) -> Result<Plan> {
    let proxy = match policy.network {
        Network::Allowlist(_) => proxy,
        _ => None,
    };
    let (profile, params) = Profile::build(policy, sbx, proxy.map(Proxy::port))?;
    let mut env = policy.env.clone();
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
        profile: Some(profile),
    })
}

/// Quote `s` as an SBPL string literal: `\` and `"` are escaped, everything
/// else is kept. Control characters are refused, because the reader would turn
/// escapes like `\n` into bytes, and a raw newline does not belong in a rule.
/// Host paths do not go through here (they are parameters); this is for
/// constants that end up in the profile.
pub fn quote(s: &str) -> Result<String> {
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        bail!("{s:?}: control character {c:?} cannot appear in a Seatbelt profile");
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '\\' || c == '"' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    Ok(out)
}

/// A host path as a parameter value: absolute, valid UTF-8 (APFS names
/// always are), with no NUL or control character, and without `..` (which
/// only the file system can resolve). Spellings that mean the same path
/// lexically (`//`, `/./`, a trailing `/`, as `$HOME` may be written) are
/// normalised.
fn param_value(path: &Path) -> Result<String> {
    let Some(text) = path.to_str() else {
        bail!(
            "{}: the path is not valid UTF-8 and cannot be passed to sandbox-exec",
            path.display()
        );
    };
    if let Some(c) = text.chars().find(|c| c.is_control()) {
        bail!("{text:?}: a path with the control character {c:?} cannot be sandboxed");
    }
    if !path.is_absolute() || path.components().any(|c| c == Component::ParentDir) {
        bail!("{text:?}: only absolute paths without `..` can be put in a Seatbelt profile");
    }
    let normal: PathBuf = path.components().collect();
    match normal.to_str() {
        Some(n) => Ok(n.to_string()),
        None => bail!("{text:?}: the path is not valid UTF-8"),
    }
}

/// The relative paths sbx itself names below the home directory or the
/// project, and each of their parents: the only suffixes ever appended to a
/// parameter with `string-append`.
fn constant_suffix(rel: &Path) -> Option<&'static str> {
    let lists = [
        CREDENTIALS,
        CREDENTIALS_MACOS,
        PROJECT_PROTECTED,
        HOME_PROTECTED,
    ];
    let tokens = AGENT_TOKENS.iter().map(|(_, token)| token);
    lists
        .into_iter()
        .flatten()
        .chain(tokens)
        .flat_map(|entry| Path::new(*entry).ancestors())
        .find(|a| *a == rel && !a.as_os_str().is_empty())
        .and_then(Path::to_str)
}

/// The profile being built, and the parameters it refers to.
struct Profile {
    text: String,
    /// `(name, value)` in the order defined; each value appears once.
    params: Vec<(String, String)>,
    /// Next index for each indexed parameter prefix.
    counters: BTreeMap<&'static str, usize>,
    /// `(name, path)` of the fixed parameters: the project root and home.
    /// Defined when first used; sbx's constant suffixes are appended to them.
    bases: Vec<(&'static str, PathBuf)>,
}

impl Profile {
    fn build(
        policy: &Policy,
        sbx: &Path,
        proxy_port: Option<u16>,
    ) -> Result<(String, Vec<(String, String)>)> {
        let mut p = Profile {
            text: String::new(),
            params: Vec::new(),
            counters: BTreeMap::new(),
            bases: Vec::new(),
        };
        p.bases.push(("PROJECT_ROOT", policy.project.clone()));
        p.bases.push(("HOME_DIR", policy.home.clone()));

        let read_only = policy.filesystem == FsSetting::ReadOnly;

        p.line("(version 1)");
        p.line(&format!("(deny default (with message {}))", quote(TAG)?));

        p.section("process: children inherit the sandbox; signals and process info stay inside it");
        p.line("(allow process-exec)");
        p.line("(allow process-fork)");
        p.line("(allow signal (target same-sandbox))");
        p.line("(allow process-info* (target same-sandbox))");

        p.section("sysctl: an explicit read list");
        let mut filters = Vec::new();
        for name in SYSCTL_NAMES {
            filters.push(format!("(sysctl-name {})", quote(name)?));
        }
        for prefix in SYSCTL_PREFIXES {
            filters.push(format!("(sysctl-name-prefix {})", quote(prefix)?));
        }
        p.rule("allow sysctl-read", &filters);
        let filters = SYSCTL_WRITE_NAMES
            .iter()
            .map(|n| Ok(format!("(sysctl-name {})", quote(n)?)))
            .collect::<Result<Vec<_>>>()?;
        p.rule("allow sysctl-write", &filters);

        if read_only {
            p.section("mach: the user lookup only");
            p.rule(
                "allow mach-lookup",
                &[format!("(global-name {})", quote(LIBINFO)?)],
            );
            p.line("(allow ipc-posix-sem)");
        } else {
            p.section("mach and IPC: user lookup, preferences, logging, power assertions");
            let mut filters = vec![format!("(global-name {})", quote(LIBINFO)?)];
            for name in MACH_BASELINE {
                filters.push(format!("(global-name {})", quote(name)?));
            }
            filters.push(format!(
                "(local-name {})",
                quote("com.apple.cfprefsd.agent")?
            ));
            p.rule("allow mach-lookup", &filters);
            p.line("(allow user-preference-read)");
            p.line(r#"(allow ipc-posix-shm-read* (ipc-posix-name-prefix "apple.cfprefs."))"#);
            p.line(r#"(allow ipc-posix-shm-read-data (ipc-posix-name "apple.shm.notification_center"))"#);
            p.line(r#"(allow iokit-open (iokit-registry-entry-class "RootDomainUserClient"))"#);
            p.comment("Python multiprocessing locks; OpenMP runtime registration (PyTorch)");
            p.line("(allow ipc-posix-sem)");
            p.rule(
                "allow ipc-posix-shm-read-data ipc-posix-shm-write-create ipc-posix-shm-write-unlink",
                &[r#"(ipc-posix-name-regex #"^/__KMP_REGISTERED_LIB_[0-9]+$")"#.to_string()],
            );
        }

        p.section("devices and terminals (file-ioctl on ttys, or raw mode breaks)");
        p.rule(
            "allow file-read* file-write-data",
            &[r#"(require-all (literal "/dev/null") (vnode-type CHARACTER-DEVICE))"#.to_string()],
        );
        p.rule(
            "allow file-read* file-write-data",
            &[
                r#"(literal "/dev/zero")"#.to_string(),
                r#"(literal "/dev/stdout")"#.to_string(),
                r#"(literal "/dev/stderr")"#.to_string(),
                r#"(subpath "/dev/fd")"#.to_string(),
            ],
        );
        p.rule(
            "allow file-read*",
            &[
                r#"(literal "/dev/random")"#.to_string(),
                r#"(literal "/dev/urandom")"#.to_string(),
                r#"(literal "/dev/autofs_nowait")"#.to_string(),
            ],
        );
        p.line(r#"(allow file-read* file-write-data file-ioctl (literal "/dev/dtracehelper"))"#);
        p.line("(allow pseudo-tty)");
        p.rule(
            "allow file-read* file-write-data file-ioctl",
            &[
                r#"(literal "/dev/ptmx")"#.to_string(),
                r#"(literal "/dev/tty")"#.to_string(),
                r#"(regex #"^/dev/ttys[0-9]+$")"#.to_string(),
            ],
        );
        p.line(r#"(allow file-read-metadata (subpath "/dev"))"#);

        match policy.filesystem {
            FsSetting::ReadOnly => p.read_only_reads(policy, sbx)?,
            FsSetting::Restricted | FsSetting::Unrestricted => {
                p.section("reads: everything (the credentials are denied at the end)");
                p.line("(allow file-read*)");
            }
        }

        // Writable roots as the rest of the profile sees them (for move
        // protection): with `filesystem = false` that is all of `/`.
        let write_roots: Vec<PathBuf> = match policy.filesystem {
            FsSetting::Restricted => {
                p.section("writes: the writable roots (real paths)");
                for root in &policy.writable {
                    let expr = p.path_expr("WRITABLE_ROOT", root)?;
                    p.line(&format!("(allow file-write* (subpath {expr}))"));
                    // Hard links and clones are operations of their own
                    // (checked on the source); git, pnpm and ccache need them
                    // inside the project. The credential block still denies
                    // them on every credential path.
                    p.line(&format!("(allow file-link file-clone (subpath {expr}))"));
                }
                policy.writable.clone()
            }
            FsSetting::Unrestricted => {
                p.section("writes: everywhere (filesystem = false)");
                p.line(r#"(allow file-write* (subpath "/"))"#);
                vec![PathBuf::from("/")]
            }
            FsSetting::ReadOnly => Vec::new(),
        };

        match (&policy.network, proxy_port) {
            // Read-only mode permits none of the services `allow` needs;
            // deny, or an allowlist without its proxy: no rule at all.
            (Network::Allow, _) if read_only => p.section("network: none"),
            (Network::Allow, _) => {
                p.section(
                    "network: any remote host by IP (not Unix sockets), listeners, DNS, TLS trust",
                );
                p.line(r#"(allow network-outbound (remote ip "*:*"))"#);
                p.line(r#"(allow network-bind (local ip "*:*"))"#);
                p.line(r#"(allow network-inbound (local ip "*:*"))"#);
                p.line(r#"(allow network-outbound (literal "/private/var/run/mDNSResponder"))"#);
                let filters = MACH_DNS
                    .iter()
                    .chain(MACH_TLS)
                    .map(|n| Ok(format!("(global-name {})", quote(n)?)))
                    .collect::<Result<Vec<_>>>()?;
                p.rule("allow mach-lookup", &filters);
                p.line("(allow system-socket (require-all (socket-domain AF_SYSTEM) (socket-protocol 2)))");
            }
            (Network::Allowlist(_), Some(port)) => {
                if port == 0 {
                    bail!("the allowlist proxy has no port");
                }
                // Nothing else: no DNS (the proxy resolves names, and a
                // resolver reachable from inside carries data out in its
                // queries), and no trustd, which fetches certificate URLs
                // on the caller's behalf, to any host.
                p.section("network: only the allowlist proxy sbx serves for this run, on a port chosen per run; no DNS");
                // `tcp`, not `ip`: nothing of the proxy's is UDP.
                p.line(&format!(
                    "(allow network-outbound (remote tcp {}))",
                    quote(&format!("localhost:{port}"))?
                ));
            }
            (Network::Deny | Network::Allowlist(_), _) => p.section("network: none"),
        }

        // Paths whose parents must not be renamed: everything denied below.
        let mut guarded: Vec<Guarded> = Vec::new();

        if !policy.protected.is_empty() {
            p.section("\"runs later\" paths: not writable, not even creatable");
            for prot in &policy.protected {
                let expr = p.path_expr("PROTECTED", &prot.path)?;
                p.rule(
                    "deny file-write*",
                    &[format!("(literal {expr})"), format!("(subpath {expr})")],
                );
                guarded.push(Guarded::Path(prot.path.clone()));
            }
        }

        p.section("credentials: last, so no earlier rule can reopen them");
        for cred in &policy.credentials {
            let mut spellings = vec![&cred.written];
            if let Some(real) = cred.real.as_ref().filter(|r| **r != cred.written) {
                spellings.push(real);
            }
            let mut filters = Vec::new();
            for path in spellings {
                let expr = p.path_expr("CREDENTIAL", path)?;
                if cred.kind != Kind::Dir {
                    filters.push(format!("(literal {expr})"));
                }
                if cred.kind != Kind::File {
                    filters.push(format!("(subpath {expr})"));
                }
                guarded.push(Guarded::Path(path.clone()));
            }
            p.rule(&format!("deny {CREDENTIAL_OPS}"), &filters);
        }

        p.section(".env and .env.* at any depth in the project, any case; templates excepted");
        p.env_rule(&policy.project)?;
        if !policy.env_files.is_empty() {
            let mut filters = Vec::new();
            for file in &policy.env_files {
                let expr = p.path_expr("ENV_FILE", file)?;
                filters.push(format!("(literal {expr})"));
            }
            p.rule(&format!("deny {ENV_OPS}"), &filters);
        }
        // The regex is anchored at the project root, so the root itself must
        // not move either.
        guarded.push(Guarded::Contents(policy.project.clone()));

        let ancestors = ancestors_in_roots(&guarded, &write_roots);
        if !ancestors.is_empty() {
            p.section("directories above those paths that a writable root holds: not renamable");
            let mut filters = Vec::new();
            for dir in &ancestors {
                let expr = p.path_expr("ANCESTOR", dir)?;
                filters.push(format!("(literal {expr})"));
            }
            p.rule("deny file-write-unlink", &filters);
        }

        p.section(
            "defence in depth: the escape services stay shut even if allowed above by mistake",
        );
        let filters = MACH_FORBIDDEN
            .iter()
            .map(|n| Ok(format!("(global-name {})", quote(n)?)))
            .collect::<Result<Vec<_>>>()?;
        p.rule("deny mach-lookup", &filters);
        p.line("(deny lsopen)");
        p.line("(deny appleevent-send)");
        p.comment("launchd's per-user sockets (the ssh agent among them)");
        p.line(r#"(deny network-outbound (remote unix-socket (path-regex #"^/private/(tmp|var/run)/com\.apple\.launchd\.[^/]+/Listeners$")))"#);

        Ok((p.text, p.params))
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
        let mut filters = READONLY_TRAVERSAL
            .iter()
            .map(|t| Ok(format!("(literal {})", quote(t)?)))
            .collect::<Result<Vec<_>>>()?;
        let mut seen: Vec<PathBuf> = Vec::new();
        for root in &roots {
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
        let mut dirs = Vec::new();
        for d in READONLY_SYSTEM_DIRS {
            dirs.push(format!("(subpath {})", quote(d)?));
        }
        let mut files = Vec::new();
        for f in READONLY_SYSTEM_FILES {
            files.push(format!("(literal {})", quote(f)?));
        }
        self.rule("allow file-read*", &[dirs.clone(), files].concat());
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
        let text = format!(
            "(deny {ENV_OPS}\n  (require-all\n    {}\n    (require-not {})))",
            regex(ENV_REGEX),
            regex(ENV_TEMPLATE_REGEX)
        );
        self.line(&text);
        Ok(())
    }

    /// Define (or reuse) the parameter named `name` for `path`.
    fn named(&mut self, name: &str, path: &Path) -> Result<String> {
        let value = param_value(path)?;
        if let Some((existing, _)) = self.params.iter().find(|(_, v)| *v == value) {
            return Ok(param_ref(existing));
        }
        debug_assert!(name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'));
        self.params.push((name.to_string(), value));
        Ok(param_ref(name))
    }

    /// The profile expression for a host path: an existing parameter with the
    /// same value, a base parameter plus one of sbx's constant suffixes, or a
    /// new parameter `PREFIX_<n>`.
    fn path_expr(&mut self, prefix: &'static str, path: &Path) -> Result<String> {
        let value = param_value(path)?;
        let bases = self.bases.clone();
        if let Some((name, base)) = bases.iter().find(|(_, b)| b == path) {
            return self.named(name, base);
        }
        if let Some((existing, _)) = self.params.iter().find(|(_, v)| *v == value) {
            return Ok(param_ref(existing));
        }
        // `/` as a base would give `//.ssh`, which matches nothing.
        for (name, base) in bases.iter().filter(|(_, b)| b.parent().is_some()) {
            let suffix = path.strip_prefix(base).ok().and_then(constant_suffix);
            if let Some(suffix) = suffix {
                let expr = self.named(name, base)?;
                return Ok(format!(
                    "(string-append {expr} {})",
                    quote(&format!("/{suffix}"))?
                ));
            }
        }
        let counter = self.counters.entry(prefix).or_insert(0);
        let name = format!("{prefix}_{counter}");
        *counter += 1;
        self.named(&name, path)
    }

    fn line(&mut self, line: &str) {
        self.text.push_str(line);
        self.text.push('\n');
    }

    /// A comment line. Only sbx's own constant text is ever passed here.
    fn comment(&mut self, text: &'static str) {
        self.line(&format!(";; {text}"));
    }

    /// A blank line and a comment: the start of a group.
    fn section(&mut self, text: &'static str) {
        self.text.push('\n');
        self.comment(text);
    }

    /// `(HEAD FILTER)` on one line, or one filter per line when there are more.
    fn rule(&mut self, head: &str, filters: &[String]) {
        match filters {
            [] => {}
            [one] => self.line(&format!("({head} {one})")),
            many => {
                let mut text = format!("({head}");
                for f in many {
                    text.push_str("\n  ");
                    text.push_str(f);
                }
                text.push(')');
                self.line(&text);
            }
        }
    }
}

fn param_ref(name: &str) -> String {
    format!("(param \"{name}\")")
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
