//! One function per subcommand: configuration → policy → plan → exec or print.

use std::convert::Infallible;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{CommandFactory, Parser};

use crate::backend::{self, Plan};
use crate::banner::{self, Style};
use crate::cli::{self, Cli, Cmd, FormatArg, PlatformArg, PolicyArgs, ShellInvocation};
use crate::config;
use crate::error::EXIT_SBX_FAILED;
use crate::policy::{self, Host, Platform, Policy};
use crate::run;

/// Entry point after `main`: decide the mode and run it.
pub fn run(argv: Vec<OsString>) -> Result<ExitCode> {
    // The guardian, started with every run, needs neither the environment
    // nor where sbx lies (see `cli::quick_parse`).
    if let Some(Cmd::Guard { cache }) = cli::quick_parse(&argv) {
        return run::guard(&cache);
    }
    // An inner stage whose bubblewrap was started ahead reads its
    // arguments from a pipe.
    let argv = run::inner_argv(argv)?;
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let self_exe = std::env::current_exe()
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok());
    // Asked only of an sbx started without arguments (the one case where
    // it decides): a path resolved, one `readlink` per component, spared
    // to every other start (the runs, their guardians and inner stages).
    let is_the_shell = argv.len() <= 1
        && env
            .iter()
            .find(|(k, _)| k == "SHELL")
            .and_then(|(_, v)| std::fs::canonicalize(v).ok())
            .is_some_and(|s| Some(&s) == self_exe.as_ref());
    if let Some(inv) = cli::shell_invocation(&argv, is_the_shell) {
        return shell(inv, env, self_exe).map(|never| match never {});
    }
    let parsed = match cli::quick_parse(&argv).or_else(|| cli::stage_parse(&argv)) {
        Some(cmd) => Ok(Cli { cmd: Some(cmd) }),
        None => Cli::try_parse_from(&argv),
    };
    let cli = match parsed {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_SBX_FAILED } else { 0 };
            let _ = e.print();
            return Ok(ExitCode::from(code));
        }
    };
    match cli.cmd {
        None => {
            let _ = Cli::command().print_help();
            Ok(ExitCode::SUCCESS)
        }
        Some(Cmd::Run(args)) => {
            if let Some(level) = cli::level_read_as_command(&argv, &args.command) {
                bail!("`--require {level}` runs a command named {level}: write --require={level} (or `--require -- {level}` for such a command); nothing was run");
            }
            run_command(&args.policy, args.command, env, self_exe, false)
                .map(|never| match never {})
        }
        Some(Cmd::Profile(args)) => profile(args, env, self_exe),
        Some(Cmd::Check(args)) => check(&args.policy, args.format, env, self_exe),
        Some(Cmd::Completions { shell }) => {
            print!("{}", crate::generate::completions(shell)?);
            Ok(ExitCode::SUCCESS)
        }
        Some(Cmd::Man(args)) => man(&args),
        Some(Cmd::Inner(args)) => run::inner(args),
        Some(Cmd::Reduced(args)) => run::reduced_stage(args),
        Some(Cmd::Keep {
            parent_fd,
            cache,
            limits,
            stage,
        }) => run::keep(parent_fd, cache.as_deref(), &limits, &stage),
        Some(Cmd::Filter { command }) => run::filter(&command),
        Some(Cmd::Guard { cache }) => run::guard(&cache),
        Some(Cmd::Connect { host, port }) => crate::proxy::connect_stdio(&host, port),
        Some(Cmd::Watch(args)) => watch(&args),
        Some(Cmd::SocketProbe {
            tmpdir,
            into,
            moved,
        }) => Ok(run::socket_probe::inside(&tmpdir, &into, &moved)),
        Some(Cmd::Probe {
            write,
            read,
            connect,
        }) => Ok(crate::check::probe(&write, &read, &connect)),
    }
}

#[cfg(target_os = "linux")]
fn watch(args: &cli::WatchArgs) -> Result<ExitCode> {
    crate::envscan::watch::daemon::run(args)
}

#[cfg(not(target_os = "linux"))]
fn watch(_args: &cli::WatchArgs) -> Result<ExitCode> {
    anyhow::bail!("the .env watcher needs Linux (inotify)")
}

/// Shell mode: run the configured inner shell with the options as given.
fn shell(
    inv: ShellInvocation,
    env: Vec<(OsString, OsString)>,
    self_exe: Option<PathBuf>,
) -> Result<Infallible> {
    let shell_command = inv.args.iter().any(|a| {
        a.to_str()
            .is_some_and(|s| s.starts_with('-') && !s.starts_with("--") && s.contains('c'))
    });
    let mut command = Vec::new();
    if inv.login {
        command.push(OsString::from("-l"));
    }
    command.extend(inv.args);
    run_with(
        &PolicyArgs::default(),
        command,
        env,
        self_exe,
        shell_command,
        true,
    )
}

fn run_command(
    flags: &PolicyArgs,
    command: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    self_exe: Option<PathBuf>,
    shell_command: bool,
) -> Result<Infallible> {
    run_with(flags, command, env, self_exe, shell_command, false)
}

/// `sbx profile`: the plan a command would run with, as text or JSON.
fn profile(
    args: cli::ProfileArgs,
    env: Vec<(OsString, OsString)>,
    self_exe: Option<PathBuf>,
) -> Result<ExitCode> {
    // A dry run (CI) leaves no process behind.
    #[cfg(target_os = "linux")]
    crate::envscan::watch::start_none();
    let platform = match args.platform {
        Some(PlatformArg::Linux) => Platform::Linux,
        Some(PlatformArg::Macos) => Platform::Macos,
        None => Platform::host(),
    };
    let mut host = gather_host(platform, env, self_exe)?;
    if let Some(home) = &args.home {
        host.home = host.cwd.join(home);
        // sbx's own files (the credential placeholder, tool caches)
        // follow the pinned home, or the output would still name
        // this machine's.
        host.cache_dir = Some(host.home.join(".cache/sbx"));
        // And the user database's home too: this machine's account (its
        // `~/.ssh`, say) has no place in a pinned output.
        host.account_home = None;
        host.account_problem = None;
    }
    let mut command = args.command;
    let mut policy = policy::resolve(&host, &args.policy)?;
    if command.is_empty() {
        command.push(policy.shell.clone().into_os_string());
    }
    policy.command = command;
    let plan = render(&policy, &host, true, None, None)?.map_err(anyhow::Error::msg)?;
    let text = match args.format {
        FormatArg::Text => match &plan.profile {
            Some(profile) => profile.clone(),
            None => plan.to_shell_text(),
        },
        FormatArg::Json => plan.to_json(),
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .context("writing to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// `sbx man`: the man page, the configuration's man page, or its schema.
fn man(args: &cli::ManArgs) -> Result<ExitCode> {
    let text = match (args.schema, args.section.as_str()) {
        (true, _) => crate::generate::schema()?,
        (false, "5") => crate::generate::config_man()?,
        (false, _) => crate::generate::man()?,
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

/// Resolve, check, render and exec one command. In shell mode `command` holds
/// only the inner shell's arguments.
fn run_with(
    flags: &PolicyArgs,
    command: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    self_exe: Option<PathBuf>,
    shell_command: bool,
    shell_mode: bool,
) -> Result<Infallible> {
    let style = Style::detect(&env);
    let host = gather_host(Platform::host(), env, self_exe)?;
    // Before this run's policy sees the project: what an earlier run's
    // command left behind, if that sbx died before checking it.
    let inside = run::already_sandboxed();
    if let Some(cache) = host.cache_dir.as_deref().filter(|_| !inside) {
        run::recover_killed_runs(cache, style)?;
    }
    if inside {
        return run_inside(flags, &host, command, shell_mode);
    }
    // Bubblewrap starts while the policy is resolved; killed on every way
    // out of here that does not run it (errors included).
    let _ahead = Ahead::start(&host, flags);
    let mut policy = policy::resolve(&host, flags)?;
    policy.command = full_command(&policy, command, shell_mode);
    for w in &policy.warnings {
        banner::warn(style, w);
    }
    let linux = policy.platform == Platform::Linux;
    let asked = |key: &str| policy.origins.iter().any(|(k, _)| *k == key);
    for w in policy.limits.unenforced(linux, asked) {
        banner::warn(style, &w);
    }
    let path_var = host.var("PATH").cloned();
    crate::exec::check_command(&policy.command, path_var.as_deref(), &host.cwd)?;
    create_tool_caches(&policy)?;

    if flags.unsandboxed {
        confirm_unsandboxed(&policy)?;
        banner::not_sandboxed(style, "--unsandboxed was confirmed for this one command");
        return crate::exec::exec_unsandboxed(&policy.command);
    }
    if !policy.enabled {
        return run_disabled(&policy, style, shell_command);
    }
    run_sandboxed(&policy, &host, style, shell_command)
}

/// The bubblewrap started ahead of the plan (see `run::start_ahead`), killed
/// when dropped unless a plan took it.
struct Ahead;

impl Ahead {
    fn start(host: &Host, flags: &PolicyArgs) -> Ahead {
        // `--unsandboxed` asks on the terminal first, and runs no sandbox.
        if let Some(sbx) = host.self_exe.as_deref().filter(|_| !flags.unsandboxed) {
            run::start_ahead(sbx);
        }
        Ahead
    }
}

impl Drop for Ahead {
    fn drop(&mut self) {
        run::abandon_ahead();
    }
}

/// Inside an sbx sandbox already: the command runs in the sandbox it is in.
fn run_inside(
    flags: &PolicyArgs,
    host: &Host,
    command: Vec<OsString>,
    shell_mode: bool,
) -> Result<Infallible> {
    // Nothing can be added from inside: namespaces cannot be created here,
    // and leaving is impossible by construction.
    if flags.unsandboxed {
        bail!("--unsandboxed cannot be used inside an sbx sandbox: the command stays in the sandbox it is in");
    }
    let mut policy = policy::resolve(host, flags)?;
    policy.command = full_command(&policy, command, shell_mode);
    crate::exec::exec_unsandboxed(&policy.command)
}

/// `enabled = false`: the command runs as it is, unless `require` is set.
fn run_disabled(policy: &Policy, style: Style, shell_command: bool) -> Result<Infallible> {
    // `require` asks for a sandbox or nothing: a disabled one is nothing.
    if policy.require != config::Require::Nothing {
        bail!("the sandbox is disabled (`enabled = false` in your configuration) and `require` is set (--require or `require = true`); the command was not run");
    }
    if banner::wanted(policy.banner, shell_command) {
        banner::warn(
            style,
            "sandbox disabled (`enabled = false` in your configuration); running the command as is",
        );
    }
    crate::exec::exec_unsandboxed(&policy.command)
}

/// Start what the sandbox needs (the allowlist proxy), render the plan and
/// run it; without a sandbox to be had here, see [`run::unavailable`].
fn run_sandboxed(
    policy: &Policy,
    host: &Host,
    style: Style,
    shell_command: bool,
) -> Result<Infallible> {
    if policy.platform == Platform::Linux && policy.backend == config::Backend::Reduced {
        return run::run_reduced(policy, host, style, shell_command, "backend = \"reduced\"");
    }
    if policy.platform == Platform::Macos && policy.unix_sockets == config::UnixSockets::Allow {
        banner::warn(
            style,
            "unix_sockets = \"allow\" is not honoured on macOS: the host's Unix sockets stay unreachable, and the command gets only its own (as with \"own\")",
        );
    }
    let proxy = match &policy.network {
        policy::Network::Allowlist(rules) => Some(run::allowlist::start_proxy(
            rules,
            host,
            policy.platform == Platform::Macos,
            &policy.writable,
            policy.banner != config::BannerMode::Never,
        )?),
        _ => None,
    };
    if let Some(exe) = &host.self_exe {
        if policy.writable.iter().any(|w| exe.starts_with(w)) {
            banner::warn(
                style,
                &format!(
                    "sbx itself ({}) lies inside a writable root: the sandboxed command could replace it for the next run (install sbx outside the project)",
                    exe.display()
                ),
            );
        }
    }
    let sockets = socket_dir(policy, host, style);
    let rendered = render(
        policy,
        host,
        false,
        proxy.as_ref().map(|p| &p.proxy),
        sockets.as_deref(),
    );
    // A macOS run's own directory is the run's alone: gone if it never runs.
    let made_for_run = sockets.filter(|_| policy.platform == Platform::Macos);
    if !matches!(rendered, Ok(Ok(_))) {
        if let Some(dir) = &made_for_run {
            let _ = std::fs::remove_dir(dir);
        }
    }
    let plan = match rendered {
        Ok(Ok(plan)) => plan,
        Ok(Err(cause)) => {
            drop(proxy);
            let reduced =
                policy.platform == Platform::Linux && policy.backend == config::Backend::Auto;
            if reduced {
                return run::run_reduced(policy, host, style, shell_command, &cause);
            }
            return run::unavailable(policy, style, &cause);
        }
        Err(e) => return Err(e),
    };
    run::run_plan(&plan, policy, style, shell_command, proxy, host)
}

/// The directory of the command's own Unix sockets, where the policy gives
/// it some. A bubblewrap run: the mount point, the user's empty
/// `/tmp/sbx-UID`, made if missing. macOS: a directory made for this run
/// (removed after it) in the user's `/private/tmp/sbx-UID`. Without it, the
/// command gets no Unix socket, and is told.
fn socket_dir(policy: &Policy, host: &Host, style: Style) -> Option<PathBuf> {
    let dir = &policy.own_sockets.as_ref()?.dir;
    if policy.backend == config::Backend::Reduced {
        return None;
    }
    // sbx inside its own Seatbelt sandbox (a tool there running `$SHELL
    // -c` with SHELL=sbx) runs the command in the sandbox it is in, whose
    // `TMPDIR` it already has: no directory of runs is writable there.
    let nested = std::env::var_os("SBX_SANDBOX").is_some_and(|v| v == "1");
    if policy.platform == Platform::Macos && nested {
        return None;
    }
    let made = own_empty_dir(dir).and_then(|()| match policy.platform {
        Platform::Linux => Ok(dir.clone()),
        Platform::Macos => run::sockets_stay(policy, host, dir).and_then(|()| fresh_dir_in(dir)),
    });
    made.map_err(|why| {
        banner::warn(
            style,
            &format!(
                "the command has no Unix sockets in this run: {} {why}",
                dir.display()
            ),
        );
    })
    .ok()
}

/// A new directory of this run's in `dir` (mode 0700, a short random name:
/// a socket's path holds 104 bytes at most on macOS).
fn fresh_dir_in(dir: &Path) -> Result<PathBuf, String> {
    use std::os::unix::fs::DirBuilderExt;
    let token =
        crate::proxy::random_token().map_err(|e| format!("gives this run no name ({e})"))?;
    // `create` fails on a name already there: a directory found is never
    // taken for this run's.
    let fresh = dir.join(token.get(..10).unwrap_or(&token));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&fresh)
        .map_err(|e| format!("has no room for this run's directory ({e})"))?;
    Ok(fresh)
}

/// Make sure `dir` is a directory of this user's that only they can enter
/// (a link, another user's, or a file there is refused: on a shared
/// machine anyone can make a name in /tmp first).
fn own_empty_dir(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
            return Err(format!("could not be made ({e})"));
        }
        _ => {}
    }
    // Looked at and made private through one descriptor, never a link.
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_NOFOLLOW)
        .open(dir)
        .map_err(|_| "is not a directory of yours; remove it".to_string())?;
    let meta = opened
        .metadata()
        .map_err(|e| format!("cannot be read ({e})"))?;
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return Err("is not a directory of yours; remove it".into());
    }
    if meta.mode() & 0o077 != 0 {
        opened
            .set_permissions(std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot be made private ({e})"))?;
    }
    Ok(())
}

/// The argv to run: in shell mode the inner shell and its arguments.
fn full_command(policy: &Policy, command: Vec<OsString>, shell_mode: bool) -> Vec<OsString> {
    if !shell_mode {
        return command;
    }
    let mut full = vec![policy.shell.clone().into_os_string()];
    full.extend(command);
    full
}

/// Render the plan for the policy's platform. The outer error is a policy
/// that cannot be rendered (sbx refuses: 125); the inner one a backend that is
/// not available here, with its cause. For a dry run a missing backend is not
/// an error: the plan names the bubblewrap that would be used.
fn render(
    policy: &Policy,
    host: &Host,
    dry_run: bool,
    proxy: Option<&backend::Proxy>,
    sockets: Option<&Path>,
) -> Result<Result<Plan, String>> {
    let sbx = host
        .self_exe
        .clone()
        .unwrap_or_else(|| PathBuf::from("sbx"));
    // A dry run shows where the per-run proxy would be.
    let reduced = policy.backend == config::Backend::Reduced;
    let shown = dry_run.then(|| backend::Proxy {
        listen: match policy.platform {
            Platform::Linux if !reduced => backend::Listen::UnixSocket(PathBuf::from(
                "$XDG_RUNTIME_DIR/sbx-proxy-PER-RUN/proxy.sock",
            )),
            _ => backend::Listen::Loopback(DRY_RUN_PORT),
        },
        token: "PER-RUN-TOKEN".into(),
    });
    let proxy = proxy.or(shown.as_ref());
    match policy.platform {
        Platform::Linux if reduced => Ok(Ok(run::reduced_plan(policy, &sbx, proxy))),
        Platform::Linux => {
            let path_var = host.var("PATH").map(|p| p.as_os_str());
            let bwrap = match crate::exec::find_bwrap(policy, path_var) {
                Ok(b) => b,
                Err(_) if dry_run => PathBuf::from(crate::exec::SYSTEM_BWRAP),
                // Only a machine without bubblewrap may fall back; a
                // bubblewrap that is there but cannot be trusted never does.
                Err(no) if no.missing => return Ok(Err(no.text)),
                Err(no) => bail!(
                    "{}; refusing to run it (a bubblewrap sbx cannot trust is never a reason to run unsandboxed)",
                    no.text
                ),
            };
            // A dry run shows where a run's private git config copies go.
            let copies = match &host.cache_dir {
                Some(cache) if dry_run => Some(cache.join("pending/copies-PER-RUN")),
                Some(cache) => run::config_copies(cache),
                None => None,
            };
            // And the directory of the command's own sockets.
            let shown = policy.own_sockets.as_ref().filter(|_| dry_run);
            let per_run = backend::PerRun {
                copies: copies.as_deref(),
                sockets: sockets.or(shown.map(|o| o.dir.as_path())),
            };
            Ok(Ok(backend::bwrap::render(
                policy, &bwrap, &sbx, proxy, per_run,
            )))
        }
        Platform::Macos => {
            // A dry run shows where a run's own directory would be.
            let shown = policy
                .own_sockets
                .as_ref()
                .filter(|_| dry_run)
                .map(|o| o.dir.join("PER-RUN"));
            let plan =
                backend::seatbelt::render(policy, &sbx, proxy, sockets.or(shown.as_deref()))?;
            if !dry_run && !Path::new(backend::seatbelt::SANDBOX_EXEC).exists() {
                return Ok(Err(format!(
                    "{} is missing",
                    backend::seatbelt::SANDBOX_EXEC
                )));
            }
            Ok(Ok(plan))
        }
    }
}

/// The proxy port a dry run shows for macOS; each real run gets its own.
const DRY_RUN_PORT: u16 = 3128;

/// Ask on the terminal before running one command without the sandbox.
fn confirm_unsandboxed(policy: &Policy) -> Result<()> {
    if !policy.allow_unsandboxed {
        bail!("--unsandboxed is refused: `allow_unsandboxed = false` in your configuration");
    }
    let mut tty = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
        .context("--unsandboxed needs a terminal to ask for confirmation, and there is none; the command was not run")?;
    let shown: Vec<String> = policy
        .command
        .iter()
        .map(|a| backend::shell_quote(&a.to_string_lossy()))
        .collect();
    write!(
        tty,
        "sbx: run WITHOUT the sandbox: {}\nRun it unsandboxed? [y/N] ",
        banner::sanitize(&shown.join(" "))
    )
    .context("writing to the terminal")?;
    let mut answer = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(&mut tty), &mut answer)
        .context("reading the answer from the terminal")?;
    if !matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        bail!("not confirmed; the command was not run");
    }
    Ok(())
}

/// `sbx check`: the backend, the effective policy, a live self-test.
fn check(
    flags: &PolicyArgs,
    format: FormatArg,
    env: Vec<(OsString, OsString)>,
    self_exe: Option<PathBuf>,
) -> Result<ExitCode> {
    #[cfg(target_os = "linux")]
    crate::envscan::watch::start_none();
    let host = gather_host(Platform::host(), env, self_exe)?;
    let policy = policy::resolve(&host, flags)?;
    create_tool_caches(&policy)?;
    crate::check::run(&policy, &host, format)
}

/// Make sbx's per-project tool caches (writable roots of the policy) exist,
/// in a directory that records whose they are.
fn create_tool_caches(policy: &Policy) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::DirBuilderExt;
    // The caches share one directory: its owner file is read once.
    let mut owners_seen: Vec<PathBuf> = Vec::new();
    for dir in &policy.tool_caches {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating the tool cache {}", dir.display()))?;
        let Some(owner) = dir.parent().map(|p| p.join(policy::TOOL_CACHE_OWNER)) else {
            continue;
        };
        if owners_seen.contains(&owner) {
            continue;
        }
        owners_seen.push(owner.clone());
        let project = policy.project.as_os_str().as_encoded_bytes();
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&owner)
        {
            Ok(mut f) => f
                .write_all(project)
                .with_context(|| format!("writing {}", owner.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let recorded = std::fs::read(&owner)
                    .with_context(|| format!("reading {}", owner.display()))?;
                if recorded != project {
                    bail!(
                        "{} belongs to another project; the command was not run (run it again)",
                        owner.display()
                    );
                }
            }
            Err(e) => {
                return Err(e).with_context(|| format!("creating {}", owner.display()));
            }
        }
    }
    Ok(())
}

/// Collect the host facts resolution needs.
fn gather_host(
    platform: Platform,
    env: Vec<(OsString, OsString)>,
    self_exe: Option<PathBuf>,
) -> Result<Host> {
    let cwd = std::env::current_dir().context("the working directory is not accessible")?;
    let account = crate::account::home();
    let home = env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| PathBuf::from(v))
        .filter(|h| h.is_absolute())
        .or_else(|| account.home.clone())
        .context("cannot tell the home directory: set HOME to an absolute path")?;
    let var = |name: &str| {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| PathBuf::from(v))
    };
    let cache_dir = var("XDG_CACHE_HOME")
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| home.join(".cache"))
        .join("sbx");
    // Made before the policy is resolved, so that it exists when the policy
    // looks at it: inside a writable root it is then mounted read-only (a
    // missing one could be created, and filled, by the sandboxed command).
    {
        use std::os::unix::fs::DirBuilderExt;
        let _ = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&cache_dir);
    }
    let env = run::host_env(env);
    let account_home = account.home.filter(|h| h.is_absolute() && *h != home);
    Ok(Host {
        platform,
        cwd,
        home,
        account_home,
        account_problem: account.problem,
        env,
        self_exe,
        cache_dir: Some(cache_dir),
        scan_env_files: platform == Platform::Linux,
    })
}
