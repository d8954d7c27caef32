//! The command line as typed: clap definitions only, no I/O and no policy.
//!
//! Shell mode (`sbx -c CMD`, `sbx -lc CMD`, a login shell named `-sbx`) is not a
//! clap subcommand: bash's option grammar cannot be expressed in clap, so
//! [`shell_invocation`] recognises it before clap ever sees the arguments.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// Run any command inside an OS-enforced sandbox.
#[derive(Debug, Parser)]
#[command(
    name = "sbx",
    version = env!("SBX_LONG_VERSION"),
    about = "Run any command inside an OS-enforced sandbox (bubblewrap on Linux, Seatbelt on macOS)",
    long_about = "Run any command inside an OS-enforced sandbox (bubblewrap on Linux, Seatbelt on \
macOS). By default the command may write only to the project and /tmp, cannot read credentials \
(~/.ssh, ~/.aws, .env, ...) and has no network.\n\nsbx also works as a shell: `sbx -c 'CMD'` \
behaves like `bash -c 'CMD'`, sandboxed, so agents and editors can use it as $SHELL.",
    after_help = "Exit status: the command's own; 125 when sbx failed before running it, 126 when \
it is not executable, 127 when it is not found, 128+N when it was killed by signal N.",
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Option<Cmd>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Cmd {
    /// Run a command inside the sandbox (argv as given, no shell).
    Run(RunArgs),
    /// Print exactly what `sbx run` would execute: the bubblewrap argv or the Seatbelt profile.
    Profile(ProfileArgs),
    /// Diagnose the backend and print the effective policy.
    Check(CheckArgs),
    /// Print a completion script for a shell.
    Completions {
        /// The shell to generate completions for.
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff), sbx.toml(5) with --section 5, or the config schema with --schema.
    #[command(hide = true)]
    Man(ManArgs),
    /// Internal: the second stage, run by bubblewrap inside the sandbox as PID 1.
    #[command(name = "__inner", hide = true)]
    Inner(InnerArgs),
    /// Reduced mode's stage: apply Landlock, no_new_privs and seccomp to
    /// this process, then exec the command.
    #[command(name = "__reduced", hide = true)]
    Reduced(ReducedArgs),
    /// Internal: the guardian of a run, which makes its checks if sbx is killed.
    #[command(name = "__guard", hide = true)]
    Guard {
        /// sbx's cache directory (the run's note is in its `pending`).
        #[arg(long, value_name = "DIR")]
        cache: PathBuf,
    },
    /// Internal: reduced mode's keeper, the stage's parent, which ends every
    /// process the command leaves, also when sbx is killed.
    #[command(name = "__keep", hide = true)]
    Keep {
        /// The read end of a pipe whose writer is sbx.
        #[arg(long, value_name = "FD")]
        parent_fd: i32,
        /// sbx's cache directory (the run's note is in its `pending`).
        #[arg(long, value_name = "DIR")]
        cache: Option<PathBuf>,
        /// A resource limit the stage sets (repeatable), to say which one
        /// stopped the command.
        #[arg(long = "limit", value_name = "NAME=VALUE")]
        limits: Vec<String>,
        /// The stage and its arguments.
        #[arg(required = true, allow_hyphen_values = true, last = true)]
        stage: Vec<OsString>,
    },
    /// Internal: add the Unix-socket filter, then exec the command.
    #[command(name = "__filter", hide = true)]
    Filter {
        /// The command and its arguments.
        #[arg(required = true, allow_hyphen_values = true, last = true)]
        command: Vec<OsString>,
    },
    /// Internal: the watcher of one project's `.env` files (see
    /// `envscan::watch`).
    #[command(name = "__watch", hide = true)]
    Watch(WatchArgs),
    /// Internal: an ssh ProxyCommand that tunnels through the allowlist proxy.
    #[command(name = "__connect", hide = true)]
    Connect { host: String, port: u16 },
    /// Internal: whether a socket stays in its directory under the macOS
    /// profile (see `run/socket_probe.rs`).
    #[command(name = "__socket-probe", hide = true)]
    SocketProbe {
        tmpdir: PathBuf,
        into: PathBuf,
        moved: PathBuf,
    },
    /// Internal: what `sbx check` runs inside a sandbox.
    #[command(name = "__probe", hide = true)]
    Probe {
        write: PathBuf,
        read: PathBuf,
        connect: String,
    },
}

/// Flags that override the configuration files.
/// `sbx __watch`'s arguments (see `envscan::watch::daemon`).
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Start the watcher and return at once.
    #[arg(long)]
    pub detach: bool,
    /// sbx's cache directory (the socket is in its `watch`).
    #[arg(long, value_name = "DIR")]
    pub cache: PathBuf,
    /// The most directories watched (a test's stand-in for the
    /// kernel's limit).
    #[arg(long, value_name = "N")]
    pub max_watches: Option<usize>,
    /// Walk only once this process (`PID-START`, the sbx run that
    /// started the watcher) has ended, or a second has passed.
    #[arg(long, value_name = "KEY")]
    pub after: Option<String>,
    /// The tree watched (a real path).
    pub root: PathBuf,
}

#[derive(Debug, Clone, Default, Args)]
pub struct PolicyArgs {
    /// Read this configuration file (trusted like the user file) [env: SBX_CONFIG]
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Network mode.
    #[arg(long, value_enum, value_name = "MODE")]
    pub network: Option<NetworkArg>,
    /// Allow this host in allowlist mode: HOST, HOST:PORT or *.DOMAIN (repeatable; implies
    /// --network allowlist unless --network is given).
    #[arg(long = "allow-domain", value_name = "HOST")]
    pub allow_domain: Vec<String>,
    /// Also make PATH writable (repeatable).
    #[arg(long, value_name = "PATH")]
    pub writable: Vec<PathBuf>,
    /// Unix sockets: own (default: only those made inside the sandbox are
    /// reachable), deny (none), or allow, which reaches the host's sockets
    /// too (ssh-agent, D-Bus, docker.sock).
    #[arg(long, value_enum, value_name = "MODE")]
    pub unix_sockets: Option<UnixSocketsArg>,
    /// No writes at all; reads limited to the project and system paths.
    #[arg(long)]
    pub read_only: bool,
    /// Refuse to run (exit 125) when the full sandbox cannot be enforced;
    /// `--require=reduced` accepts Linux's reduced mode too.
    #[arg(long, value_enum, value_name = "LEVEL", num_args = 0..=1, require_equals = true, default_missing_value = "full")]
    pub require: Option<RequireArg>,
    /// Which Linux sandbox runs: auto (bubblewrap, else reduced mode),
    /// bwrap, or reduced (Landlock and seccomp).
    #[arg(long, value_enum, value_name = "BACKEND")]
    pub backend: Option<BackendArg>,
    /// Run this one command without the sandbox, after an interactive yes on the terminal.
    #[arg(long)]
    pub unsandboxed: bool,
    /// Do not print the banner (warnings are still printed).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Use DIR as the project root instead of the repository around the working directory.
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// At most N processes in the sandbox (default 4096).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_processes: Option<u64>,
    /// At most N open files per process.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_open_files: Option<u64>,
    /// No file written larger than SIZE (bytes, or with K, M, G, T).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_file_size: Option<u64>,
    /// At most SIZE of memory for all the command's processes (a cgroup of
    /// the run's own, where the machine allows one; said where it does not).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub max_memory: Option<u64>,
    /// At most SECS seconds of CPU time per process.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub cpu_time: Option<u64>,
}

fn parse_size(text: &str) -> Result<u64, String> {
    crate::limits::Size::parse(text).map(|s| s.0)
}

/// `sbx run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// The command and its arguments (put `--` before it).
    #[arg(required = true, trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// `sbx profile`.
#[derive(Debug, Args)]
pub struct ProfileArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// The platform to render for (default: this host).
    #[arg(long, value_enum, value_name = "PLATFORM")]
    pub platform: Option<PlatformArg>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    pub format: FormatArg,
    /// Pretend the home directory is DIR, the user database's included (for
    /// reproducible snapshots).
    #[arg(long, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// The command to show (default: the inner shell).
    #[arg(trailing_var_arg = true, value_name = "CMD")]
    pub command: Vec<OsString>,
}

/// `sbx check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    #[command(flatten)]
    pub policy: PolicyArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Text)]
    pub format: FormatArg,
}

/// `sbx man` (hidden): the generated documents committed under `man/` and
/// `sbx.schema.json`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// The manual section: 1 for sbx(1), 5 for the configuration file, sbx.toml(5).
    #[arg(long, value_name = "N", default_value = "1", value_parser = ["1", "5"])]
    pub section: String,
    /// Print the JSON Schema (draft 2020-12) of the configuration file instead.
    #[arg(long, conflicts_with = "section")]
    pub schema: bool,
}

/// `sbx __inner`: options decided by the outer stage.
#[derive(Debug, Args)]
pub struct InnerArgs {
    /// The command's Unix sockets: none (deny), its own, or the host's too.
    #[arg(long, value_enum, default_value = "deny")]
    pub unix_sockets: UnixSocketsArg,
    /// With `--unix-sockets own`: the only directory where the command may
    /// make sockets (a tmpfs of its own).
    #[arg(long, value_name = "DIR")]
    pub socket_dir: Option<PathBuf>,
    /// With `--unix-sockets own`: a directory beneath which the command may
    /// make symbolic links, besides the socket directory (repeatable).
    #[arg(long = "symlinks-in", value_name = "DIR")]
    pub symlinks_in: Vec<PathBuf>,
    /// A pipe on which to report that the sandbox is up.
    #[arg(long, value_name = "FD")]
    pub ready_fd: Option<i32>,
    /// Relay 127.0.0.1:3128 inside the sandbox to this proxy socket.
    #[arg(long, value_name = "PATH")]
    pub proxy_socket: Option<PathBuf>,
    /// A resource limit for the command (repeatable).
    #[arg(long = "limit", value_name = "NAME=VALUE")]
    pub limits: Vec<String>,
    /// Say, when the command fails, whether it tried the network this
    /// sandbox denies (`deny`) or reaches only through the proxy
    /// (`allowlist`).
    #[arg(long, value_name = "MODE")]
    pub network_hint: Option<String>,
    /// The run's directory of private git config copies (`N`, `N.link`).
    #[arg(long, value_name = "DIR")]
    pub config_copies: Option<PathBuf>,
    /// A git config to mount the link `N.link` over, N counting from 0 in
    /// the order given (repeatable).
    #[arg(
        long = "private-config",
        value_name = "PATH",
        requires = "config_copies"
    )]
    pub private_configs: Vec<PathBuf>,
    /// A directory to bind onto itself, so that it cannot be renamed
    /// (repeatable; with the config copies, whose set-up has the
    /// capability to mount).
    #[arg(long = "pin", value_name = "DIR", requires = "config_copies")]
    pub pins: Vec<PathBuf>,
    /// A symbolic link to mount onto itself after the pins, so that it
    /// cannot be removed or replaced (repeatable; with the config copies).
    #[arg(long = "pin-link", value_name = "LINK", requires = "config_copies")]
    pub pinned_links: Vec<PathBuf>,
    /// A file to mask with a read-only bind of `--mask-with`, after the
    /// pins and the copies (repeatable; with the config copies, whose
    /// set-up has the capability to mount). In a writable root: gone now,
    /// it was moved, and the set-up is refused.
    #[arg(long = "mask", value_name = "FILE", requires = "mask_with")]
    pub masks: Vec<PathBuf>,
    /// The same for a file outside every writable root, skipped when the
    /// sandbox does not show it (a path under its own `/dev` or `/proc`).
    #[arg(long = "mask-if-present", value_name = "FILE", requires = "mask_with")]
    pub masks_if_present: Vec<PathBuf>,
    /// The empty file every `--mask` shows (sbx's placeholder).
    #[arg(long, value_name = "FILE", requires = "config_copies")]
    pub mask_with: Option<PathBuf>,
    /// The command and its arguments.
    #[arg(required = true, allow_hyphen_values = true, last = true)]
    pub command: Vec<OsString>,
}

/// `sbx __reduced`: the rules decided by the outer stage
/// (`backend::reduced`).
#[derive(Debug, Args)]
pub struct ReducedArgs {
    /// Readable, with everything beneath it but the hidden paths (repeatable).
    #[arg(long = "read", value_name = "PATH")]
    pub read: Vec<PathBuf>,
    /// Writable, with everything beneath it (repeatable).
    #[arg(long = "write", value_name = "PATH")]
    pub write: Vec<PathBuf>,
    /// A device node or directory programs write to (skipped when missing).
    #[arg(long = "device", value_name = "PATH")]
    pub devices: Vec<PathBuf>,
    /// A real path left unreadable (repeatable).
    #[arg(long = "hide", value_name = "PATH")]
    pub hide: Vec<PathBuf>,
    /// Rule reads only (`filesystem = false`).
    #[arg(long)]
    pub writes_unrestricted: bool,
    /// `deny`, `allow`, or `proxy:PORT` (TCP to that port only).
    #[arg(long, value_name = "MODE")]
    pub network: String,
    /// Let the command create Unix sockets.
    #[arg(long)]
    pub allow_unix_sockets: bool,
    /// A pipe on which to report that the rules are in force.
    #[arg(long, value_name = "FD")]
    pub ready_fd: Option<i32>,
    /// A resource limit for the command (repeatable).
    #[arg(long = "limit", value_name = "NAME=VALUE")]
    pub limits: Vec<String>,
    /// The command and its arguments.
    #[arg(required = true, allow_hyphen_values = true, last = true)]
    pub command: Vec<OsString>,
}

/// `--require[=LEVEL]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RequireArg {
    Full,
    Reduced,
}

/// `--backend`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    Auto,
    Bwrap,
    Reduced,
}

/// `--unix-sockets`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum UnixSocketsArg {
    Deny,
    Own,
    Allow,
}

/// `--network`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NetworkArg {
    Deny,
    Allow,
    Allowlist,
}

/// `--platform`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlatformArg {
    Linux,
    Macos,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    Text,
    Json,
}

/// The two command lines sbx is started with at every run, read without
/// clap, which builds the definition of every subcommand and option first
/// (about a tenth of a millisecond, in sbx and again in its guardian):
/// `run -- CMD...` and `__guard --cache DIR` (as `run/linux/guardian.rs`
/// starts it). Only exactly those shapes, for which clap's answer is known
/// (no option given, `--` before the command; a value that cannot be taken
/// for an option); every other command line, and a login shell's, is
/// clap's, as before. Shell mode is recognised first all the same.
pub fn quick_parse(argv: &[OsString]) -> Option<Cmd> {
    let login = argv
        .first()
        .and_then(|a0| std::path::Path::new(a0).file_name())
        .is_some_and(|name| name.as_encoded_bytes().first() == Some(&b'-'));
    if login {
        return None;
    }
    match argv.get(1..)? {
        [sub, sep, command @ ..] if sub == "run" && sep == "--" && !command.is_empty() => {
            Some(Cmd::Run(RunArgs {
                policy: PolicyArgs::default(),
                command: command.to_vec(),
            }))
        }
        [sub, flag, cache] if sub == "__guard" && flag == "--cache" => {
            let plain = cache.as_encoded_bytes().first().is_some_and(|&b| b != b'-');
            plain.then(|| Cmd::Guard {
                cache: PathBuf::from(cache),
            })
        }
        _ => None,
    }
}

/// `--require LEVEL` with a space: `--require` takes its level after `=`
/// only (so that `--require -- CMD` needs none), and LEVEL was read as the
/// command. The level, when `argv` has that shape right before `command`.
pub fn level_read_as_command(argv: &[OsString], command: &[OsString]) -> Option<String> {
    let first = command.first()?;
    let level = ["full", "reduced"].into_iter().find(|l| first == l)?;
    argv.windows(2)
        .any(|w| w[0] == "--require" && w[1] == *first)
        .then(|| level.to_string())
}

/// The command line of `sbx run` with options, and of a sandbox's own
/// stage (`__inner`, which bubblewrap starts at every run, and reduced
/// mode's `__reduced`), read by clap with only that subcommand's options
/// defined: building the definition of every subcommand first cost about
/// 0.7 ms with the static build, at every command. Anything else, and any
/// error or request for help, is the whole parser's, which says it as
/// `sbx` would.
pub fn stage_parse(argv: &[OsString]) -> Option<Cmd> {
    fn parse<A: Args>(name: &'static str, argv: &[OsString]) -> Option<A> {
        let cmd = A::augment_args(clap::Command::new(name).no_binary_name(true));
        let matches = cmd.try_get_matches_from(argv).ok()?;
        A::from_arg_matches(&matches).ok()
    }
    match argv.get(1)?.to_str()? {
        "run" => parse::<RunArgs>("run", argv.get(2..)?).map(Cmd::Run),
        "__inner" => parse::<InnerArgs>("__inner", argv.get(2..)?).map(Cmd::Inner),
        "__reduced" => parse::<ReducedArgs>("__reduced", argv.get(2..)?).map(Cmd::Reduced),
        _ => None,
    }
}

/// How sbx was asked to behave as a shell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellInvocation {
    /// Invoked as a login shell (`argv[0]` starts with `-`).
    pub login: bool,
    /// The arguments for the inner shell, unchanged and in order.
    pub args: Vec<OsString>,
}

/// Recognise shell mode: `argv[1]` is a bash option cluster, or `argv[0]` starts
/// with `-` (a login shell). `is_the_shell` says whether `$SHELL` names this
/// executable; only then does sbx with no arguments act as a shell.
pub fn shell_invocation(argv: &[OsString], is_the_shell: bool) -> Option<ShellInvocation> {
    let login = argv
        .first()
        .and_then(|a0| std::path::Path::new(a0).file_name())
        .is_some_and(|name| name.as_encoded_bytes().first() == Some(&b'-'));
    let args: Vec<OsString> = argv.iter().skip(1).cloned().collect();
    match args.first() {
        None if login || is_the_shell => Some(ShellInvocation { login, args }),
        None => None,
        Some(first) if login || is_shell_option(first) => Some(ShellInvocation { login, args }),
        Some(_) => None,
    }
}

/// Whether `arg` is one of bash's invocation options (and not one of sbx's own).
fn is_shell_option(arg: &OsStr) -> bool {
    let Some(arg) = arg.to_str() else {
        return false;
    };
    const LONG: &[&str] = &[
        "--login",
        "--noprofile",
        "--norc",
        "--posix",
        "--rcfile",
        "--init-file",
        "--restricted",
        "--verbose",
        "--noediting",
        "--debugger",
        "--dump-strings",
        "--dump-po-strings",
        "--pretty-print",
        "--wordexp",
    ];
    if LONG.contains(&arg) {
        return true;
    }
    // sbx's own short flags win: `sbx -h` is help, `sbx -V` the version.
    if arg == "-h" || arg == "-V" {
        return false;
    }
    // A cluster of bash's single-letter options: `-c`, `-lc`, `-ec`, `-i`, `-s`, `-o`, `+O`, ...
    const LETTERS: &str = "abcefhiklmnoprstuvxBCEHOPT";
    let (sign, rest) = arg.split_at(1);
    (sign == "-" || sign == "+") && !rest.is_empty() && rest.chars().all(|c| LETTERS.contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn argv(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_level_after_a_space_is_told_from_a_command_named_so() {
        let argv = |a: &[&str]| -> Vec<OsString> { a.iter().map(OsString::from).collect() };
        let cases: [(&[&str], &[&str], Option<&str>); 5] = [
            (
                &["sbx", "run", "--require", "reduced", "--", "true"],
                &["reduced", "--", "true"],
                Some("reduced"),
            ),
            (
                &["sbx", "run", "--require", "full", "make"],
                &["full", "make"],
                Some("full"),
            ),
            // A command named so, after `--`.
            (
                &["sbx", "run", "--require", "--", "reduced"],
                &["reduced"],
                None,
            ),
            (
                &["sbx", "run", "--require=full", "--", "reduced"],
                &["reduced"],
                None,
            ),
            (&["sbx", "run", "--require", "make"], &["make"], None),
        ];
        for (line, command, level) in cases {
            assert_eq!(
                level_read_as_command(&argv(line), &argv(command)).as_deref(),
                level,
                "{line:?}"
            );
        }
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Every `__inner` command line the golden bwrap argv hold, and
    /// `__reduced` ones: the stage's own parser answers as the whole one;
    /// what it cannot read (an error) is left to the whole parser.
    #[test]
    fn the_stage_parse_answers_as_clap_does() {
        let golden = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
        let mut shapes: Vec<Vec<OsString>> = Vec::new();
        for entry in std::fs::read_dir(golden).unwrap() {
            let path = entry.unwrap().path();
            if !path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("bwrap-")
            {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let args: Vec<&str> = text
                .lines()
                .map(|l| l.trim().trim_end_matches('\\').trim_end())
                .collect();
            let at = args
                .iter()
                .position(|a| *a == "__inner")
                .expect("an __inner stage");
            let mut shape = vec![OsString::from("sbx")];
            shape.extend(args[at..].iter().map(OsString::from));
            shapes.push(shape);
        }
        assert!(shapes.len() >= 5, "{shapes:?}");
        shapes.extend(
            [
                &["sbx", "__inner", "--", "-x", "--help"][..],
                &[
                    "sbx",
                    "__inner",
                    "--unix-sockets",
                    "own",
                    "--socket-dir",
                    "/s",
                    "--",
                    "sh",
                ],
                &[
                    "sbx",
                    "__reduced",
                    "--network",
                    "deny",
                    "--read",
                    "/",
                    "--write",
                    "/p",
                    "--",
                    "true",
                ],
                &[
                    "sbx",
                    "__reduced",
                    "--network",
                    "allow",
                    "--writes-unrestricted",
                    "--limit",
                    "nofile=9",
                    "--",
                    "-c",
                ],
            ]
            .map(argv),
        );
        // `sbx run` with options, as people and agents type it.
        shapes.extend(
            [
                &["sbx", "run", "--network", "deny", "--", "true"][..],
                &["sbx", "run", "-q", "--read-only", "make", "-j4"],
                &["sbx", "run", "--require", "--", "sh", "-c", "exit 3"],
                &[
                    "sbx",
                    "run",
                    "--require=reduced",
                    "--backend",
                    "reduced",
                    "--",
                    "id",
                ],
                &[
                    "sbx",
                    "run",
                    "--allow-domain",
                    "crates.io",
                    "--allow-domain",
                    "*.npmjs.org:443",
                    "--writable",
                    "/w",
                    "--config",
                    "/c.toml",
                    "--project",
                    "/p",
                    "--unix-sockets",
                    "deny",
                    "--",
                    "npm",
                    "ci",
                ],
                &[
                    "sbx",
                    "run",
                    "--max-processes",
                    "9",
                    "--max-open-files",
                    "64",
                    "--max-file-size",
                    "1G",
                    "--max-memory",
                    "512M",
                    "--cpu-time",
                    "30",
                    "--unsandboxed",
                    "--",
                    "cargo",
                    "test",
                    "--",
                    "--nocapture",
                ],
                &["sbx", "run", "--", "--network", "deny"],
                // `reduced` is the command: `--require` takes `=LEVEL` only.
                &["sbx", "run", "--require", "reduced", "--", "true"],
                &["sbx", "run", "echo", "--network", "-q"],
            ]
            .map(argv),
        );
        for shape in &shapes {
            let stage = stage_parse(shape).unwrap_or_else(|| panic!("not read: {shape:?}"));
            let clap = Cli::try_parse_from(shape).unwrap().cmd.unwrap();
            assert_eq!(format!("{stage:?}"), format!("{clap:?}"), "{shape:?}");
        }
        for wrong in [
            &["sbx", "__inner"][..],
            &["sbx", "__inner", "--bogus", "--", "true"],
            &["sbx", "__inner", "--pin", "/d", "--", "true"],
            &["sbx", "__inner", "--unix-sockets", "maybe", "--", "true"],
            &["sbx", "__reduced", "--", "true"],
            &["sbx", "__inner", "--help"],
            &["sbx", "run"],
            &["sbx", "run", "--help"],
            &["sbx", "run", "-h", "--", "true"],
            &["sbx", "run", "--version"],
            &["sbx", "run", "--network", "sometimes", "--", "true"],
            &["sbx", "run", "--max-processes", "0", "--", "true"],
            &["sbx", "run", "--bogus", "--", "true"],
            &["sbx", "runs", "--", "true"],
        ] {
            assert!(stage_parse(&argv(wrong)).is_none(), "{wrong:?}");
        }
    }

    #[test]
    fn the_quick_parse_answers_as_clap_does() {
        let shapes: &[&[&str]] = &[
            &["sbx", "run", "--", "true"],
            &[
                "/usr/bin/sbx",
                "run",
                "--",
                "sh",
                "-c",
                "echo hi",
                "--",
                "-x",
            ],
            &["sbx", "run", "--", "--help"],
            &["sbx", "run", "--", ""],
            &["sbx", "run", "--", "-q", "--network", "allow"],
            &["sbx", "__guard", "--cache", "/home/u/.cache/sbx"],
            &["sbx", "__guard", "--cache", "relative dir"],
        ];
        for shape in shapes {
            let args = argv(shape);
            let quick = quick_parse(&args).expect("a shape it reads");
            let clap = Cli::try_parse_from(&args).unwrap().cmd.unwrap();
            assert_eq!(format!("{quick:?}"), format!("{clap:?}"), "{shape:?}");
        }
        // Everything else is clap's.
        let others: &[&[&str]] = &[
            &["sbx"],
            &["sbx", "run"],
            &["sbx", "run", "--"],
            &["sbx", "run", "true"],
            &["sbx", "run", "-q", "--", "true"],
            &["sbx", "run", "--help"],
            &["-sbx", "run", "--", "true"],
            &["sbx", "profile", "--", "true"],
            &["sbx", "__guard", "--cache"],
            &["sbx", "__guard", "--cache", "-x"],
            &["sbx", "__guard", "--cache", ""],
            &["sbx", "__guard", "--cache=/c"],
            &["sbx", "__guard", "--cache", "/c", "extra"],
            &["sbx", "__inner", "--", "true"],
        ];
        for shape in others {
            assert!(quick_parse(&argv(shape)).is_none(), "{shape:?}");
        }
    }

    #[test]
    fn dash_c_is_shell_mode() {
        let inv = shell_invocation(&argv(&["sbx", "-c", "echo hi"]), false).unwrap();
        assert!(!inv.login);
        assert_eq!(inv.args, argv(&["-c", "echo hi"]));
    }

    #[test]
    fn option_clusters_are_shell_mode() {
        for first in [
            "-lc",
            "-ec",
            "-ic",
            "-l",
            "-i",
            "-s",
            "--login",
            "--noprofile",
            "-o",
            "+O",
        ] {
            assert!(
                shell_invocation(&argv(&["sbx", first, "x"]), false).is_some(),
                "{first}"
            );
        }
    }

    #[test]
    fn subcommands_and_sbx_flags_are_not_shell_mode() {
        for first in [
            "run",
            "profile",
            "-h",
            "--help",
            "-V",
            "--version",
            "--network",
            "-z",
        ] {
            assert!(
                shell_invocation(&argv(&["sbx", first]), false).is_none(),
                "{first}"
            );
        }
    }

    #[test]
    fn login_shell_by_argv0() {
        let inv = shell_invocation(&argv(&["-sbx"]), false).unwrap();
        assert!(inv.login);
        assert!(inv.args.is_empty());
    }

    #[test]
    fn no_arguments_is_a_shell_only_when_sbx_is_the_shell() {
        assert!(shell_invocation(&argv(&["sbx"]), false).is_none());
        assert!(shell_invocation(&argv(&["sbx"]), true).is_some());
    }

    #[test]
    fn run_passes_dash_flags_to_the_command() {
        let cli = Cli::try_parse_from(["sbx", "run", "--", "grep", "-c", "foo", "file"]).unwrap();
        let Some(Cmd::Run(run)) = cli.cmd else {
            panic!("not run")
        };
        assert_eq!(run.command, argv(&["grep", "-c", "foo", "file"]));
        let cli = Cli::try_parse_from(["sbx", "run", "--network", "allow", "ls", "-la"]).unwrap();
        let Some(Cmd::Run(run)) = cli.cmd else {
            panic!("not run")
        };
        assert_eq!(run.policy.network, Some(NetworkArg::Allow));
        assert_eq!(run.command, argv(&["ls", "-la"]));
    }
}
