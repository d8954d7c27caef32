//! The constant rule text of the Seatbelt profile: sysctl names, mach
//! services, the system paths of read-only mode, and the operations and
//! regexes of the credential and `.env` denies. Only sbx's own constants:
//! every one of them is quoted (or is a regex literal) where it is used.

/// sysctl names readable by everyone: CPU, memory and OS facts that runtimes
/// probe at start-up (Node's `os.cpus()`, thread pools, Java, uname).
pub(super) const SYSCTL_NAMES: &[&str] = &[
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

/// sysctl prefixes readable by everyone. The `kern.proc.` tables give
/// process status: pid, parent, owner, terminal, command name, never the
/// arguments or environment (`kern.procargs2`, which often hold tokens,
/// stays unreadable). The whole table (`kern.proc.all`) is what `ps -A`,
/// `pgrep` and `brew shellenv` (which runs `/bin/ps`) read; the names of
/// other processes are no secret that the sandbox keeps.
/// `net.routetable.` is what resolvers read.
pub(super) const SYSCTL_PREFIXES: &[&str] = &[
    "hw.optional.",
    "hw.perflevel",
    "kern.proc.all",
    "kern.proc.pgrp.",
    "kern.proc.pid.",
    "kern.proc.ruid.",
    "kern.proc.tty.",
    "kern.proc.uid.",
    "net.routetable.",
];

/// "Write" sysctls that only read in practice (Java's CPU probe, V8).
pub(super) const SYSCTL_WRITE_NAMES: &[&str] = &["kern.grade_cputype", "kern.tcsm_enable"];

/// The user lookup (getpwuid: `~`, `id`, git, ssh). The only mach service of
/// read-only mode.
pub(super) const LIBINFO: &str = "com.apple.system.opendirectoryd.libinfo";

/// Mach services of the normal modes, after the user lookup.
pub(super) const MACH_BASELINE: &[&str] = &[
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
    // file watchers (Node's fs.watch, watchman, the notify crate): FSEvents
    // reports the paths that change, anywhere on the volume, never their
    // contents; every path but the credentials' is readable anyway, and
    // their names are no secret
    "com.apple.FSEvents",
];

/// Mach services for name resolution in `network = "allow"`.
pub(super) const MACH_DNS: &[&str] = &[
    "com.apple.dnssd.service",
    "com.apple.SystemConfiguration.configd",
    "com.apple.SystemConfiguration.DNSConfiguration",
];

/// Mach services for TLS certificate trust in `network = "allow"`.
/// SecurityServer is also the way to the keychain, which is why
/// `~/Library/Keychains` is a credential path.
pub(super) const MACH_TLS: &[&str] = &[
    "com.apple.trustd",
    "com.apple.trustd.agent",
    "com.apple.ocspd",
    "com.apple.networkd",
    "com.apple.SecurityServer",
    "com.apple.bsd.dirhelper",
];

/// POSIX shared memory the command may make and use, by name:
/// Python's `multiprocessing.shared_memory` (`/psm_` and hex), PyTorch's
/// tensors shared between workers (`/torch_PID_N`, optionally `_N`), and
/// the OpenMP runtime's registration (libomp, in PyTorch and NumPy builds).
/// By name only: other same-user programs' segments (the preferences
/// daemon's, an app's) stay out of reach. A host program's segment made
/// under one of these names could be opened if its random part were
/// guessed; it holds data, never code.
pub(super) const SHM_NAMES: &[&str] = &[
    r"^/psm_[0-9a-f]+$",
    r"^/torch_[0-9]+_[0-9]+(_[0-9]+)?$",
    r"^/__KMP_REGISTERED_LIB_[0-9]+$",
];

/// Directories below home where host programs keep sockets that are a way
/// out (container engines, which are root on the host, and a password
/// manager's agent). With own Unix sockets they must not move, lest one
/// be carried into the command's `TMPDIR` from a writable root.
pub(super) const HOST_SOCKET_DIRS: &[&str] = &[
    ".docker/run",
    ".colima",
    ".orbstack/run",
    ".rd",
    ".lima",
    "Library/Containers/com.docker.docker/Data",
    "Library/Group Containers/2BUA8C4S2C.com.1password/t",
];

/// Services that start or drive processes outside the sandbox (`open`,
/// `osascript`) or carry data out (the pasteboard). Never allowed; denied
/// again explicitly at the end.
pub(super) const MACH_FORBIDDEN: &[&str] = &[
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
pub(super) const READONLY_SYSTEM_DIRS: &[&str] = &[
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
pub(super) const READONLY_SYSTEM_FILES: &[&str] = &[
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
pub(super) const READONLY_TRAVERSAL: &[&str] = &[
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
pub(super) const CREDENTIAL_OPS: &str = "file-read* file-read-data file-read-metadata file-read-xattr file-write* file-write-unlink file-link file-clone";

/// Operations denied on project `.env` files: as for credentials, except
/// writes, so a template can still be copied into place; unlink stays denied
/// so a file cannot be renamed to a name the rule does not cover.
pub(super) const ENV_OPS: &str = "file-read* file-read-data file-read-metadata file-read-xattr file-write-unlink file-link file-clone";

/// Below the quoted project root: a `.env` or `.env.*` entry at any depth,
/// any letter case (AppleMatch has no case-insensitive flag).
pub(super) const ENV_REGEX: &str = r"/(.*/)?[.][eE][nN][vV]([.][^/]*)?$";

/// The committed templates excepted from [`ENV_REGEX`] (through `require-not`:
/// AppleMatch has no look-ahead). Same names as `envscan::ENV_TEMPLATES`.
pub(super) const ENV_TEMPLATE_REGEX: &str = r"/(.*/)?[.][eE][nN][vV][.]([eE][xX][aA][mM][pP][lL][eE]|[sS][aA][mM][pP][lL][eE]|[tT][eE][mM][pP][lL][aA][tT][eE])$";
