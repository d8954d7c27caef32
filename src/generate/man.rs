//! The man page sbx(1).

use anyhow::{Context, Result};
use clap::CommandFactory;
use roff::{bold, italic, roman, Roff};

use super::*;
use crate::cli::Cli;

// ------------------------------------------------------------------- sbx(1)

/// The man page sbx(1), in roff.
pub fn man() -> Result<String> {
    let mut cmd = Cli::command();
    cmd.build();
    // The package version alone: the commit in `--version` would make the
    // page differ on every commit.
    let man = clap_mangen::Man::new(cmd.clone().version(env!("CARGO_PKG_VERSION")))
        .date(NO_DATE)
        .manual("User Commands");
    let mut out = String::new();
    for line in PREAMBLE {
        out.push_str(line);
        out.push('\n');
    }
    out += &render_with(&man, clap_mangen::Man::render_title)?;
    out += &render_with(&man, clap_mangen::Man::render_name_section)?;
    out += &render_with(&man, clap_mangen::Man::render_synopsis_section)?;
    out += &body(&synopsis_lines(&mut cmd).render());
    out += &render_with(&man, clap_mangen::Man::render_description_section)?;
    out += &render_with(&man, clap_mangen::Man::render_options_section)?;
    out += &subcommands(&mut cmd)?;
    out += &body(&sections_1().render());
    out += &render_with(&man, clap_mangen::Man::render_version_section)?;
    if cmd.get_author().is_some() {
        out += &render_with(&man, clap_mangen::Man::render_authors_section)?;
    }
    Ok(out)
}

/// The usage line of a subcommand, without clap's `Usage: ` prefix.
fn usage(sub: &mut clap::Command) -> String {
    let text = sub.render_usage().to_string();
    text.trim()
        .strip_prefix("Usage:")
        .unwrap_or(&text)
        .trim()
        .to_string()
}

fn visible_subcommands(cmd: &clap::Command) -> Vec<clap::Command> {
    cmd.get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect()
}

/// More SYNOPSIS lines: each subcommand's usage, and shell mode.
fn synopsis_lines(cmd: &mut clap::Command) -> Roff {
    let mut r = Roff::new();
    for mut sub in visible_subcommands(cmd) {
        r.control("br", []);
        r.text([bold(usage(&mut sub))]);
    }
    r.control("br", []);
    r.text([
        bold("sbx -c"),
        roman(" "),
        italic("CMD_STRING"),
        roman(" ["),
        italic("ARG0"),
        roman(" ["),
        italic("ARGS"),
        roman("...]]"),
    ]);
    r.control("br", []);
    r.text([bold("sbx -lc"), roman(" "), italic("CMD_STRING")]);
    r.control("br", []);
    r.text([
        bold("sbx -l"),
        roman(" | "),
        bold("-i"),
        roman(" | "),
        bold("--login"),
    ]);
    r
}

/// The ids of the policy options, shared by `run`, `profile` and `check`.
fn policy_ids() -> Vec<String> {
    use clap::Args;
    crate::cli::PolicyArgs::augment_args(clap::Command::new("sbx"))
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .collect()
}

/// clap_mangen's rendering of `args` as `.TP` paragraphs (its OPTIONS
/// section without the heading).
fn options_body(args: Vec<clap::Arg>) -> Result<String> {
    let cmd = clap::Command::new("sbx").disable_help_flag(true).args(args);
    let man = clap_mangen::Man::new(cmd);
    let options = render_with(&man, clap_mangen::Man::render_options_section)?;
    options
        .strip_prefix(".SH OPTIONS\n")
        .map(str::to_string)
        .context("clap_mangen's options section starts with .SH OPTIONS")
}

/// SUBCOMMANDS: each visible subcommand with its usage, description and own
/// options, then POLICY OPTIONS, the options `run`, `profile` and `check`
/// share (as clap_mangen renders options).
fn subcommands(cmd: &mut clap::Command) -> Result<String> {
    let policy = policy_ids();
    let mut out = String::new();
    sh_into(&mut out, "SUBCOMMANDS");
    let mut shared: Vec<clap::Arg> = Vec::new();
    for mut sub in visible_subcommands(cmd) {
        let mut r = Roff::new();
        r.control("SS", [arg(&usage(&mut sub)).as_str()]);
        let about = sub
            .get_long_about()
            .or_else(|| sub.get_about())
            .map(|s| s.to_string())
            .unwrap_or_default();
        let about = about.trim_end();
        if about.ends_with('.') || about.is_empty() {
            r.text(md(about));
        } else {
            r.text(md(&format!("{about}.")));
        }
        let (common, own): (Vec<clap::Arg>, Vec<clap::Arg>) = sub
            .get_arguments()
            .filter(|a| !a.is_hide_set() && a.get_id() != "help")
            .cloned()
            .partition(|a| policy.iter().any(|p| p == a.get_id().as_str()));
        if !common.is_empty() {
            r.control("PP", []);
            r.text(md("Options: the POLICY OPTIONS below, and"));
            if shared.is_empty() {
                shared = common;
            }
        }
        out += &body(&r.render());
        out += &options_body(own)?;
    }
    sh_into(&mut out, "POLICY OPTIONS");
    out += &body(
        &Roff::new()
            .text(md(
                "`run`, `profile` and `check` take these options. They override the \
configuration files (see sbx.toml(5)); shell mode takes none.",
            ))
            .render(),
    );
    out += &options_body(shared)?;
    Ok(out)
}

/// Append a section heading to rendered roff.
fn sh_into(out: &mut String, title: &str) {
    let mut r = Roff::new();
    sh(&mut r, title);
    *out += &body(&r.render());
}

/// sbx's own sections: shell mode, exit status, environment, files, security.
// Over the project's 80-line guide on purpose: it is the man page's text,
// read top to bottom like the page itself; cutting it would only scatter it.
fn sections_1() -> Roff {
    let mut r = Roff::new();
    sh(&mut r, "SHELL MODE");
    pp(
        &mut r,
        "When the first argument is one of bash's invocation options (`-c`, `-lc`, `-ec`, `-i`, \
`-l`, `-s`, `--login`, `--noprofile`, ...), or sbx is started as a login shell (its name begins \
with `-`), sbx acts as a shell: it runs the inner shell (the `shell` key; default `/bin/bash`, \
else `/bin/sh`) with those arguments, unchanged and in order, inside the sandbox. `-h` and `-V` \
stay sbx's help and version. With no arguments sbx is a shell only when `$SHELL` names it (it then \
reads a script from standard input, or is an interactive shell on a terminal); otherwise it prints \
its help.",
    );
    pp(
        &mut r,
        "Standard input, output, error and the exit status are the shell's, and in `-c` mode sbx \
prints nothing of its own unless a warning is due, so agents and editors can use sbx as `$SHELL`. \
Shell mode takes no policy options: the policy comes from the configuration files.",
    );

    sh(&mut r, "EXIT STATUS");
    pp(
        &mut r,
        "The command's own exit status. sbx's own failures follow the convention of env(1), \
timeout(1) and chroot(1):",
    );
    tp(
        &mut r,
        "125",
        "sbx failed before running anything: a usage error, an invalid configuration (one line \
naming the file, the line and the key), a sandbox that cannot be set up for this project, a \
machine that cannot run a sandbox at all with `require`, an `--unsandboxed` that was not \
confirmed.",
    );
    tp(
        &mut r,
        "126",
        "The command was found but is not executable.",
    );
    tp(&mut r, "127", "The command was not found.");
    tp(&mut r, "128+N", "The command was killed by signal N.");
    pp(
        &mut r,
        "`sbx check` exits 0 when everything the policy asks for is enforced, and 1 otherwise.",
    );

    sh(&mut r, "ENVIRONMENT");
    tp(
        &mut r,
        "SBX_CONFIG",
        "A configuration file read like `--config FILE` (trusted like the user file); `--config` \
wins, an empty value is ignored, and a relative path is refused (it would name another file in \
every directory sbx starts in).",
    );
    tp(
        &mut r,
        "XDG_CONFIG_HOME",
        "The user file is `$XDG_CONFIG_HOME/sbx/config.toml` when this is an absolute path, else \
`~/.config/sbx/config.toml`.",
    );
    tp(
        &mut r,
        "XDG_CACHE_HOME",
        "sbx's cache directory is `$XDG_CACHE_HOME/sbx` when this is an absolute path, else \
`~/.cache/sbx` (see FILES).",
    );
    tp(
        &mut r,
        "XDG_RUNTIME_DIR",
        "In allowlist mode the proxy's socket is created in a fresh private directory here \
(else in the cache directory) and removed after the run.",
    );
    tp(
        &mut r,
        "HOME",
        "The home directory (else the password database): `~` in the configuration, the \
credential paths and the user file are relative to it.",
    );
    tp(
        &mut r,
        "PATH",
        "Where the command is looked up, and bubblewrap when `/usr/bin/bwrap` does not exist.",
    );
    tp(
        &mut r,
        "SHELL",
        "When it names sbx, sbx with no arguments acts as a shell; inside the sandbox `SHELL` is \
then set to the inner shell.",
    );
    tp(
        &mut r,
        "NO_COLOR",
        "When set and not empty, sbx's messages are not coloured (they are coloured only on a \
terminal anyway).",
    );
    tp(
        &mut r,
        "LC_ALL, LC_CTYPE, LANG",
        "The first one set decides the banner's style: symbols when the locale is UTF-8, plain \
`[sbx]` and `[sbx WARNING]` prefixes otherwise.",
    );
    tp(
        &mut r,
        "TMPDIR",
        "On macOS, also made writable (the per-user temporary directory).",
    );
    pp(&mut r, "Inside the sandbox:");
    tp(
        &mut r,
        "SBX_SANDBOX=1",
        "Always set: tells a command it runs in sbx.",
    );
    tp(&mut r, "Credential variables", &credential_vars_text());
    tp(
        &mut r,
        "HTTP_PROXY, HTTPS_PROXY, ALL_PROXY",
        "In allowlist mode (Linux), in both cases, the proxy's URL with a per-run credential; also \
`NO_PROXY` (empty), `NODE_USE_ENV_PROXY=1`, `JAVA_TOOL_OPTIONS` (proxy host and port) and \
`GIT_SSH_COMMAND` (ssh through the proxy, for allowed `host:22` entries).",
    );

    sh(&mut r, "FILES");
    tp(
        &mut r,
        "~/.config/sbx/config.toml",
        "The user configuration (`$XDG_CONFIG_HOME/sbx/config.toml`): see sbx.toml(5). Read-only \
inside the sandbox when a writable path covers it.",
    );
    tp(
        &mut r,
        ".sbx.toml",
        "The project configuration: the nearest one in the working directory or its ancestors, up \
to the project root. It can only narrow the policy; read-only inside the sandbox.",
    );
    tp(
        &mut r,
        "~/.cache/sbx/",
        "The cache directory (`$XDG_CACHE_HOME/sbx`), read-only inside the sandbox when a \
writable path covers it. It holds `envscan-HASH`, one file per project that caches the search for \
`.env` files between runs (its content is checked, never trusted), and `empty`, the empty \
mode-000 placeholder file that is mounted over each credential file (`/dev/null` is used instead \
when the cache directory lies inside a writable path). sbx creates it (mode 0700) before each run.",
    );
    tp(
        &mut r,
        "/usr/bin/bwrap",
        "The bubblewrap sbx prefers (Linux); see the `bwrap` key.",
    );
    tp(
        &mut r,
        "/usr/bin/sandbox-exec",
        "The only Seatbelt launcher sbx runs (macOS), never one found on `PATH`.",
    );
    tp(
        &mut r,
        "NAME.sbx-blocked",
        "A \"runs later\" path that did not exist before the run (so could not be made read-only) \
and that the command created: sbx moves it aside after the run and says so (Linux).",
    );

    sh(&mut r, "SECURITY");
    pp(
        &mut r,
        "What sbx enforces on Linux, with bubblewrap and its own PID 1 inside: writes only to the \
writable paths (the host root is mounted read-only); the credential files hidden at their real \
paths, so a symlink does not reach them; \"runs later\" paths (`.git/hooks`, `.git/config`, `.envrc`, `.vscode`, agent settings, \
sbx's configuration, shell startup files) read-only even inside writable paths; no network, or \
the host's, or only allowlisted hosts through sbx's proxy; new user, PID, IPC, UTS and cgroup \
namespaces; no capabilities; `no_new_privs`; a seccomp filter on Unix sockets, new namespaces, \
the mount API, `ptrace`, keyrings, `bpf`, `io_uring`, terminal injection and more; inherited \
descriptors above 2 closed; nothing in the sandbox outlives the command.",
    );
    pp(
        &mut r,
        "sbx owns the bubblewrap argument list and so the security model: no option reaches \
bubblewrap from outside, and `sbx profile` prints the exact list `sbx run` executes.",
    );
    pp(
        &mut r,
        "On macOS sbx runs `/usr/bin/sandbox-exec` with a deny-default Seatbelt profile, as its \
parent: the same write, credential and \"runs later\" rules, and the three network modes \
(`allowlist` through sbx's proxy on a per-run port of 127.0.0.1, the profile's only network \
hole, with no DNS); the command's own Unix sockets in a `$TMPDIR` made for each run (where a \
probe shows this macOS keeps a socket in its directory), and `unix_sockets = \"allow\"` not \
honoured beyond them (with a warning). A profile \
sandbox-exec refuses is never a reason to run the command unsandboxed (exit 125); inside another \
Seatbelt sandbox, which macOS does not nest, `require` decides as for a missing backend. \
`sandbox-exec` is deprecated by Apple but still shipped with macOS, and used by the major coding \
agents for the same purpose. The macOS backend has not been verified on a real Mac yet.",
    );
    pp(
        &mut r,
        "What sbx does not do: reads outside the credential list are allowed; files the command \
writes in the project (a `Makefile`, test files, package scripts) are code that runs later, and \
sbx cannot tell good edits from bad; an allowed host can receive anything the command can read; \
the allowlist proxy cannot see domain fronting inside TLS; only programs that honour the proxy \
variables get network in allowlist mode; `unix_sockets = \"allow\"` and `network = \"allow\"` \
each open ways out.",
    );
    pp(
        &mut r,
        "When this machine cannot run a sandbox at all (no bubblewrap, user namespaces disabled, \
...), sbx names the cause on every run and runs the command without the sandbox, or with \
`require` refuses (125). When a sandbox runs here but not this project's (a planted path, a \
project file), sbx never falls back: it exits 125 without running the command.",
    );

    sh(&mut r, "SEE ALSO");
    r.text(md(
        "sbx.toml(5), bwrap(1), sandbox-exec(1), and the README: quick start, recipes for agents \
and editors, troubleshooting.",
    ));
    r
}
