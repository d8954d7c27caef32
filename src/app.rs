//! One function per subcommand: configuration → policy → plan → exec or print.

use std::convert::Infallible;
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
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

/// Entry point after `main`: decide the mode and run it.
pub fn run(argv: Vec<OsString>) -> Result<ExitCode> {
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let self_exe = std::env::current_exe()
        .ok()
        .and_then(|p| std::fs::canonicalize(p).ok());
    let is_the_shell = env
        .iter()
        .find(|(k, _)| k == "SHELL")
        .and_then(|(_, v)| std::fs::canonicalize(v).ok())
        .is_some_and(|s| Some(&s) == self_exe.as_ref());
    if let Some(inv) = cli::shell_invocation(&argv, is_the_shell) {
        return shell(inv, env, self_exe).map(|never| match never {});
    }
    let cli = match Cli::try_parse_from(&argv) {
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
        Some(Cmd::Run(args)) => run_command(&args.policy, args.command, env, self_exe, false)
            .map(|never| match never {}),
        Some(Cmd::Profile(args)) => {
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
            }
            let mut command = args.command;
            let mut policy = policy::resolve(&host, &args.policy)?;
            if command.is_empty() {
                command.push(policy.shell.clone().into_os_string());
            }
            policy.command = command;
            let plan = render(&policy, &host, true, None)?.map_err(anyhow::Error::msg)?;
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
        Some(Cmd::Check(args)) => check(&args.policy, args.format, env, self_exe),
        Some(Cmd::Completions { shell }) => {
            print!("{}", crate::generate::completions(shell)?);
            Ok(ExitCode::SUCCESS)
        }
        Some(Cmd::Man(args)) => {
            let text = match (args.schema, args.section.as_str()) {
                (true, _) => crate::generate::schema()?,
                (false, "5") => crate::generate::config_man()?,
                (false, _) => crate::generate::man()?,
            };
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Some(Cmd::Inner(args)) => inner(args),
        Some(Cmd::Filter { command }) => filter(&command),
        Some(Cmd::Connect { host, port }) => crate::proxy::connect_stdio(&host, port),
        Some(Cmd::Probe {
            write,
            read,
            connect,
        }) => Ok(crate::check::probe(&write, &read, &connect)),
    }
}

#[cfg(target_os = "linux")]
fn inner(args: cli::InnerArgs) -> Result<ExitCode> {
    let opts = crate::seccomp::Options {
        allow_unix_sockets: args.allow_unix_sockets,
    };
    crate::inner::run(
        &args.command,
        opts,
        args.ready_fd,
        args.proxy_socket.as_deref(),
    )
    .map(|never| match never {})
}

/// `sbx __filter -- CMD`: in allowlist mode PID 1 keeps Unix sockets (to
/// reach the proxy), so the command gets the Unix-socket rule from here.
#[cfg(target_os = "linux")]
fn filter(command: &[OsString]) -> Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    crate::seccomp::apply(&[crate::seccomp::unix_socket_program()?])?;
    let Some((program, args)) = command.split_first() else {
        bail!("no command given");
    };
    let err = std::process::Command::new(program).args(args).exec();
    Ok(ExitCode::from(crate::error::spawn_failure(program, &err)))
}

#[cfg(not(target_os = "linux"))]
fn filter(_command: &[OsString]) -> Result<ExitCode> {
    bail!("the inner stage exists only on Linux")
}

#[cfg(not(target_os = "linux"))]
fn inner(_args: cli::InnerArgs) -> Result<ExitCode> {
    bail!("the inner stage exists only on Linux")
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
    let inside = already_sandboxed();
    #[cfg(target_os = "linux")]
    if let Some(cache) = host.cache_dir.as_deref().filter(|_| !inside) {
        if !crate::integrity::journal::recover(cache, &|text: &str| banner::warn(style, text)) {
            bail!("an earlier sbx run was killed before its checks, and they found what is named above; review it, then run the command again");
        }
    }
    if inside {
        // Nothing can be added from inside: namespaces cannot be created here,
        // and leaving is impossible by construction.
        if flags.unsandboxed {
            bail!("--unsandboxed cannot be used inside an sbx sandbox: the command stays in the sandbox it is in");
        }
        let mut policy = policy::resolve(&host, flags)?;
        policy.command = full_command(&policy, command, shell_mode);
        return crate::exec::exec_unsandboxed(&policy.command);
    }
    let mut policy = policy::resolve(&host, flags)?;
    policy.command = full_command(&policy, command, shell_mode);
    for w in &policy.warnings {
        banner::warn(style, w);
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
        // `require` asks for a sandbox or nothing: a disabled one is nothing.
        if policy.require {
            bail!("the sandbox is disabled (`enabled = false` in your configuration) and `require` is set (--require or `require = true`); the command was not run");
        }
        if banner::wanted(policy.banner, shell_command) {
            banner::warn(style, "sandbox disabled (`enabled = false` in your configuration); running the command as is");
        }
        return crate::exec::exec_unsandboxed(&policy.command);
    }
    if policy.platform == Platform::Macos && policy.unix_sockets {
        banner::warn(
            style,
            "unix_sockets = \"allow\" is not supported on macOS yet: Unix sockets stay denied",
        );
    }
    let proxy = match &policy.network {
        policy::Network::Allowlist(rules) => Some(start_proxy(
            rules,
            &host,
            policy.platform,
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
    let plan = match render(&policy, &host, false, proxy.as_ref().map(|p| &p.proxy))? {
        Ok(plan) => plan,
        Err(cause) => {
            drop(proxy);
            return unavailable(&policy, style, &cause);
        }
    };
    run_plan(
        &plan,
        &policy,
        style,
        shell_command,
        proxy,
        host.cache_dir.as_deref(),
    )
}

/// The allowlist proxy of one run, served by this process; its private
/// directory, if it has one, is removed when it is dropped.
struct RunningProxy {
    dir: Option<PathBuf>,
    proxy: backend::Proxy,
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Start the allowlist proxy with a random credential: on Linux on a Unix
/// socket in a fresh private directory (0700, under `$XDG_RUNTIME_DIR` or
/// sbx's cache directory), bound into the sandbox; on macOS on a port of
/// `127.0.0.1` chosen by the system, the one address the profile lets the
/// command reach. Each refusal is reported on stderr when `log` is set.
fn start_proxy(
    rules: &[crate::netrule::HostRule],
    host: &Host,
    platform: Platform,
    writable: &[PathBuf],
    log: bool,
) -> Result<RunningProxy> {
    let token = crate::proxy::random_token().context("making the proxy credential")?;
    let mut config = crate::proxy::Config::new(rules.to_vec(), token.clone(), move |line: &str| {
        if log {
            eprintln!("sbx: {}", banner::sanitize(line));
        }
    });
    if let Ok((soft, _)) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
    {
        config.fit_descriptor_limit(soft);
    }
    let config = std::sync::Arc::new(config);
    let (running, serve): (RunningProxy, Box<dyn FnOnce() + Send>) = match platform {
        Platform::Linux => {
            let dir = proxy_dir(host, writable)?;
            let running = RunningProxy {
                dir: Some(dir.clone()),
                proxy: backend::Proxy {
                    listen: backend::Listen::UnixSocket(dir.join("proxy.sock")),
                    token,
                },
            };
            let socket = dir.join("proxy.sock");
            let listener = std::os::unix::net::UnixListener::bind(&socket)
                .with_context(|| format!("listening on {}", socket.display()))?;
            let serve = move || {
                let _ = crate::proxy::serve_unix(listener, config);
            };
            (running, Box::new(serve))
        }
        Platform::Macos => {
            let (v4, v6) = loopback_listeners()?;
            let port = v4.local_addr().context("reading the proxy's port")?.port();
            let running = RunningProxy {
                dir: None,
                proxy: backend::Proxy {
                    listen: backend::Listen::Loopback(port),
                    token,
                },
            };
            if let Some(v6) = v6 {
                let config = config.clone();
                crate::supervise::spawn_without_signals(move || {
                    let _ = crate::proxy::serve_tcp(v6, config);
                })
                .context("starting the proxy")?;
            }
            let serve = move || {
                let _ = crate::proxy::serve_tcp(v4, config);
            };
            (running, Box::new(serve))
        }
    };
    // Signals are for the main thread (its signalfd on Linux, its sigwait
    // thread on macOS): a SIGCHLD or SIGTERM taken by another thread would be
    // lost. The connection threads inherit the blocked mask.
    crate::supervise::spawn_without_signals(serve).context("starting the proxy")?;
    Ok(running)
}

/// The proxy's listeners on macOS: a port of 127.0.0.1 chosen by the system,
/// and the same port of `::1`. The profile's `localhost:PORT` covers both
/// addresses, so the second is taken too: held by anything else, it would
/// be reachable from the sandbox. A port whose `::1` side is taken is
/// given up for another; without IPv6 there is no second listener.
fn loopback_listeners() -> Result<(std::net::TcpListener, Option<std::net::TcpListener>)> {
    use std::net::{Ipv6Addr, TcpListener};
    for _ in 0..32 {
        let v4 = TcpListener::bind(("127.0.0.1", 0))
            .context("listening on a port of 127.0.0.1 for the allowlist proxy")?;
        let port = v4.local_addr().context("reading the proxy's port")?.port();
        match TcpListener::bind((Ipv6Addr::LOCALHOST, port)) {
            Ok(v6) => return Ok((v4, Some(v6))),
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => continue,
            Err(_) => return Ok((v4, None)),
        }
    }
    bail!("no port of 127.0.0.1 is free on ::1 as well, for the allowlist proxy")
}

/// A fresh private directory (0700) for the proxy's Unix socket, under
/// `$XDG_RUNTIME_DIR` unless that lies in a writable root (where the command
/// could rename the directories above the socket), else under sbx's cache
/// directory (read-only, and pinned, inside the sandbox). Its name carries
/// nothing of the credential.
fn proxy_dir(host: &Host, writable: &[PathBuf]) -> Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let base = host
        .var("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_absolute() && d.is_dir())
        .filter(|d| {
            let real = std::fs::canonicalize(d).unwrap_or_else(|_| d.clone());
            !writable.iter().any(|w| real.starts_with(w))
        })
        .or_else(|| host.cache_dir.clone())
        .context("no directory for the proxy socket (set XDG_RUNTIME_DIR)")?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&base)
        .with_context(|| format!("creating {}", base.display()))?;
    let nonce = crate::proxy::random_token().context("naming the proxy directory")?;
    let dir = base.join(format!(
        "sbx-proxy-{}-{}",
        std::process::id(),
        nonce.get(..8).unwrap_or(&nonce)
    ));
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("creating the proxy directory {}", dir.display()))?;
    Ok(dir)
}

/// The sandbox cannot be enforced here: refuse with `require`, else run the
/// command without it, loudly.
fn unavailable(policy: &Policy, style: Style, cause: &str) -> Result<Infallible> {
    if policy.require {
        bail!("cannot sandbox the command: {cause}; refusing to run it because `require` is set");
    }
    banner::not_sandboxed(
        style,
        &format!(
            "{cause}; running the command without a sandbox (set require = true to refuse instead)"
        ),
    );
    crate::exec::exec_unsandboxed(&policy.command)
}

/// Execute a sandbox plan. On Linux sbx stays as the parent of bubblewrap: to
/// tell a sandbox that could not start from a command that failed, and to
/// neutralise "runs later" paths that did not exist (so could not be mounted
/// read-only) if the command creates them.
#[cfg(target_os = "linux")]
fn run_plan(
    plan: &Plan,
    policy: &Policy,
    style: Style,
    shell_command: bool,
    proxy: Option<RunningProxy>,
    cache: Option<&Path>,
) -> Result<Infallible> {
    // Written down before the command starts, for the next run to check if
    // this sbx dies before it can (dropped once the checks are done).
    let checks = crate::integrity::Checks::record(policy, cache)?;
    let show_banner = banner::wanted(policy.banner, shell_command);
    let on_started = || {
        if show_banner {
            banner::print_active(style, &banner::summary(policy, "bwrap"));
        }
    };
    // What the checks after the command find is said once they are all
    // done: the command may have stopped the terminal's output (`tcflow`),
    // and a warning blocking on it must not keep a planted file in place.
    let said = std::cell::RefCell::new(Vec::<String>::new());
    let warn = |text: &str| said.borrow_mut().push(text.to_string());
    let say_all = || {
        let said = said.take();
        if !said.is_empty() {
            resume_terminal_output();
        }
        for text in said {
            banner::warn(style, &text);
        }
    };
    let outcome = crate::exec::run_sandboxed(plan, &on_started);
    drop(proxy);
    match outcome? {
        crate::exec::Outcome::Exited(code) => {
            let mut code = code;
            if !checks.verify(&warn) {
                code = crate::error::EXIT_SBX_FAILED;
            }
            say_all();
            std::process::exit(i32::from(code))
        }
        crate::exec::Outcome::NotStarted(why) => {
            // Nothing ran: nothing for a later run to check.
            drop(checks);
            say_all();
            match why {
                crate::exec::NotStarted::Environment(cause, detail) => unavailable(
                    policy,
                    style,
                    &format!("{}{} ({})", cause.what, bracket(&detail), cause.fix),
                ),
                // A sandbox starts here, just not this one: whatever broke it
                // (a project file, a planted path) may be the command's doing,
                // so it never earns an unsandboxed run.
                crate::exec::NotStarted::Policy(detail) => bail!(
                    "the sandbox could not be set up for this project{}; the command was not run (sbx never falls back to running unsandboxed when only this project's sandbox fails: check the paths named above and the project's .sbx.toml)",
                    bracket(&detail)
                ),
            }
        }
    }
}

/// Restart output on sbx's terminal if the command stopped it
/// (`tcflow(TCOOFF)`), so that what sbx has to say is not left blocking.
#[cfg(target_os = "linux")]
fn resume_terminal_output() {
    use std::os::fd::AsFd;
    let stderr = std::io::stderr();
    if stderr.is_terminal() {
        let _ = nix::sys::termios::tcflow(stderr.as_fd(), nix::sys::termios::FlowArg::TCOON);
    }
}

/// ` [text]`, or nothing for empty text.
#[cfg(target_os = "linux")]
fn bracket(text: &str) -> String {
    if text.is_empty() {
        String::new()
    } else {
        format!(" [{text}]")
    }
}

/// Execute a Seatbelt plan. sbx stays the parent of sandbox-exec: to serve
/// the allowlist proxy, and to tell a profile sandbox-exec refused (nothing
/// ran) from a command that failed.
#[cfg(not(target_os = "linux"))]
fn run_plan(
    plan: &Plan,
    policy: &Policy,
    style: Style,
    shell_command: bool,
    proxy: Option<RunningProxy>,
    _cache: Option<&Path>,
) -> Result<Infallible> {
    let true_program = Path::new(backend::seatbelt::TRUE);
    // Inside sbx's own sandbox (a tool there running `$SHELL -c` with
    // SHELL=sbx), macOS refuses a second profile: the command runs in the
    // sandbox it is in, as on Linux. The variable says it may be sbx's, the
    // refusal of a trial run proves a sandbox is there (a variable alone
    // proves nothing: anyone can set it); the trial also keeps
    // sandbox-exec's complaint off the command's stderr.
    if std::env::var_os("SBX_SANDBOX").is_some_and(|v| v == "1")
        && matches!(
            crate::exec::profile_refusal(plan, true_program),
            Some(crate::exec::Ended::Refused { nested: true, .. })
        )
    {
        return crate::exec::exec_unsandboxed(&policy.command);
    }
    if banner::wanted(policy.banner, shell_command) {
        banner::print_active(style, &banner::summary(policy, "seatbelt"));
    }
    let ended = crate::exec::run_seatbelt(plan, true_program);
    drop(proxy);
    match ended? {
        crate::exec::Ended::Exited(code) => std::process::exit(code),
        // Inside another Seatbelt sandbox (an agent's own): a fact about
        // where sbx runs, like a machine without bubblewrap.
        crate::exec::Ended::Refused {
            nested: true,
            words,
        } => unavailable(
            policy,
            style,
            &format!(
                "sbx already runs inside a Seatbelt sandbox, and macOS does not nest them ({})",
                banner::sanitize(&words)
            ),
        ),
        crate::exec::Ended::Refused {
            nested: false,
            words,
        } => bail!(
            "sandbox-exec refused the profile, so the command was not run ({}); `sbx profile` prints it, and this is a bug worth reporting with your macOS version",
            banner::sanitize(&words)
        ),
    }
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
) -> Result<Result<Plan, String>> {
    let sbx = host
        .self_exe
        .clone()
        .unwrap_or_else(|| PathBuf::from("sbx"));
    // A dry run shows where the per-run proxy would be.
    let shown = dry_run.then(|| backend::Proxy {
        listen: match policy.platform {
            Platform::Linux => backend::Listen::UnixSocket(PathBuf::from(
                "$XDG_RUNTIME_DIR/sbx-proxy-PER-RUN/proxy.sock",
            )),
            Platform::Macos => backend::Listen::Loopback(DRY_RUN_PORT),
        },
        token: "PER-RUN-TOKEN".into(),
    });
    let proxy = proxy.or(shown.as_ref());
    match policy.platform {
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
            Ok(Ok(backend::bwrap::render(policy, &bwrap, &sbx, proxy)))
        }
        Platform::Macos => {
            let plan = backend::seatbelt::render(policy, &sbx, proxy)?;
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
    for dir in &policy.tool_caches {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating the tool cache {}", dir.display()))?;
        let Some(owner) = dir.parent().map(|p| p.join(policy::TOOL_CACHE_OWNER)) else {
            continue;
        };
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
    let home = env
        .iter()
        .find(|(k, _)| k == "HOME")
        .map(|(_, v)| PathBuf::from(v))
        .filter(|h| h.is_absolute())
        .or_else(home_from_passwd)
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
    #[cfg(target_os = "macos")]
    let env = with_darwin_tmpdir(env);
    Ok(Host {
        platform,
        cwd,
        home,
        env,
        self_exe,
        cache_dir: Some(cache_dir),
        scan_env_files: platform == Platform::Linux,
    })
}

/// Without `$TMPDIR`, macOS programs use the per-user temporary directory
/// the system names (`confstr(_CS_DARWIN_USER_TEMP_DIR)`); it is made
/// writable like `$TMPDIR`, so it is looked up here (with `getconf`, by
/// absolute path, only when the variable is missing).
#[cfg(target_os = "macos")]
fn with_darwin_tmpdir(mut env: Vec<(OsString, OsString)>) -> Vec<(OsString, OsString)> {
    if env.iter().any(|(k, v)| k == "TMPDIR" && !v.is_empty()) {
        return env;
    }
    let found = std::process::Command::new("/usr/bin/getconf")
        .arg("DARWIN_USER_TEMP_DIR")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| s.starts_with('/'));
    if let Some(dir) = found {
        env.retain(|(k, _)| k != "TMPDIR");
        env.push(("TMPDIR".into(), dir.into()));
    }
    env
}

fn home_from_passwd() -> Option<PathBuf> {
    nix::unistd::User::from_uid(nix::unistd::getuid())
        .ok()
        .flatten()
        .map(|u| u.dir)
}

/// Whether this process already runs inside an sbx sandbox. Decided from
/// what the sandbox cannot fake away and the host cannot fake into existence
/// for sbx: PID 1 is sbx's inner stage and this process is filtered.
#[cfg(target_os = "linux")]
fn already_sandboxed() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let filtered = status
        .lines()
        .any(|l| l.starts_with("Seccomp:") && l.trim_end().ends_with('2'))
        && status
            .lines()
            .any(|l| l.starts_with("NoNewPrivs:") && l.trim_end().ends_with('1'));
    let init = std::fs::read("/proc/1/cmdline").unwrap_or_default();
    filtered && init.split(|&b| b == 0).nth(1) == Some(b"__inner".as_slice())
}

#[cfg(not(target_os = "linux"))]
fn already_sandboxed() -> bool {
    false
}

#[allow(dead_code)]
fn stdin_is_terminal() -> bool {
    std::io::stdin().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_macos_proxy_holds_its_port_on_both_loopback_addresses() {
        let (v4, v6) = loopback_listeners().unwrap();
        let port = v4.local_addr().unwrap().port();
        assert!(v4.local_addr().unwrap().ip().is_loopback());
        if let Some(v6) = v6 {
            assert_eq!(v6.local_addr().unwrap().port(), port);
            assert_eq!(v6.local_addr().unwrap().ip(), std::net::Ipv6Addr::LOCALHOST);
        }
        // Nothing else can take either side while the proxy holds them.
        assert!(std::net::TcpListener::bind(("127.0.0.1", port)).is_err());
    }
}
