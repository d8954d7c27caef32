//! The command line: help and version, usage errors (exit 125, stderr only),
//! `--` handling, 126/127 before anything runs, generated completions,
//! `sbx profile` output shape, and shell-mode detection.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use predicates::prelude::*;

use crate::require_sandbox;
use crate::util::{sbx_path, write, World, DEADLINE};

// ---------------------------------------------------------------- help, version

#[test]
fn help_prints_usage_on_stdout_and_exits_0() {
    let world = World::new();
    for flag in ["--help", "-h"] {
        world
            .sbx()
            .arg(flag)
            .timeout(DEADLINE)
            .assert()
            .code(0)
            .stdout(predicate::str::contains("Usage:"))
            .stdout(predicate::str::contains("run"))
            .stdout(predicate::str::contains("profile"));
    }
}

/// The version, the commit it was built from and the platform's backends
/// (what a bug report needs).
#[test]
fn version_prints_name_and_version_on_stdout_and_exits_0() {
    let world = World::new();
    for flag in ["--version", "-V"] {
        world
            .sbx()
            .arg(flag)
            .timeout(DEADLINE)
            .assert()
            .code(0)
            .stdout(predicate::str::starts_with(format!(
                "sbx {} (commit ",
                env!("CARGO_PKG_VERSION")
            )))
            .stdout(predicate::str::contains(if cfg!(target_os = "linux") {
                "backends: bubblewrap"
            } else {
                "backends: seatbelt"
            }));
    }
}

#[test]
fn subcommand_help_exits_0_on_stdout() {
    let world = World::new();
    for sub in ["run", "profile", "check", "completions"] {
        world
            .sbx()
            .args([sub, "--help"])
            .timeout(DEADLINE)
            .assert()
            .code(0)
            .stdout(predicate::str::contains("Usage:"));
    }
}

// ---------------------------------------------------------------- usage errors

/// A usage error: exit 125, a message on stderr, nothing on stdout.
fn assert_usage_error(world: &World, args: &[&str]) {
    world
        .sbx()
        .args(args)
        .write_stdin("")
        .timeout(DEADLINE)
        .assert()
        .code(125)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::is_empty().not());
}

#[test]
fn unknown_flag_exits_125_with_message_on_stderr_only() {
    let world = World::new();
    assert_usage_error(&world, &["--bogus"]);
    assert_usage_error(&world, &["-z"]);
    assert_usage_error(&world, &["check", "--bogus"]);
    assert_usage_error(&world, &["profile", "--platform", "windows"]);
    assert_usage_error(&world, &["profile", "--format", "yaml"]);
    world
        .sbx()
        .arg("--bogus")
        .assert()
        .stderr(predicate::str::contains("--bogus"));
}

#[test]
fn unknown_flag_of_run_before_the_separator_is_a_usage_error() {
    let world = World::new();
    let marker = world.project.join("MARKER");
    // Regression: an unknown flag once became the command (exit 127); a typo
    // in a policy flag (`--read-onyl`) must be a usage error (125).
    world
        .sbx()
        .args(["run", "--bogus", "--", "sh", "-c"])
        .arg(format!("touch '{}'", marker.display()))
        .timeout(DEADLINE)
        .assert()
        .code(125)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("--bogus"));
    assert!(!marker.exists(), "the command ran");
}

/// `--require` takes its level after `=` only; written with a space, the
/// level would be the command. sbx refuses that shape instead of running
/// whatever is called `reduced` on PATH, and says how to write either.
#[test]
fn a_require_level_after_a_space_is_refused_not_run_as_a_command() {
    let world = World::new();
    let marker = world.project.join("MARKER");
    let bin = world.root.join("bin");
    write(
        &bin.join("reduced"),
        &format!("#!/bin/sh\ntouch '{}'\n", marker.display()),
    );
    std::fs::set_permissions(
        bin.join("reduced"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    world
        .sbx()
        .env("PATH", &path)
        .args(["run", "--require", "reduced", "--", "true"])
        .timeout(DEADLINE)
        .assert()
        .code(125)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("--require=reduced"));
    assert!(!marker.exists(), "the command named reduced ran");
}

#[test]
fn unknown_subcommand_exits_125_with_message_on_stderr_only() {
    let world = World::new();
    assert_usage_error(&world, &["bogus"]);
    assert_usage_error(&world, &["completions", "tcsh"]);
    world
        .sbx()
        .arg("bogus")
        .assert()
        .stderr(predicate::str::contains("bogus"));
}

#[test]
fn no_arguments_prints_help_and_does_not_start_a_shell() {
    let world = World::new();
    // A shell started by mistake would read this script from stdin.
    for shell in [None, Some("/bin/sh")] {
        let mut cmd = world.sbx();
        if let Some(shell) = shell {
            cmd.env("SHELL", shell);
        }
        cmd.write_stdin("echo SHELL-WAS-STARTED\n")
            .timeout(DEADLINE)
            .assert()
            .code(0)
            .stdout(predicate::str::contains("Usage:"))
            .stdout(predicate::str::contains("SHELL-WAS-STARTED").not());
    }
}

#[test]
fn no_arguments_is_a_shell_when_shell_names_sbx() {
    require_sandbox!();
    let world = World::new();
    world
        .sbx()
        .env("SHELL", sbx_path())
        .write_stdin("echo from-stdin\n")
        .timeout(DEADLINE)
        .assert()
        .code(0)
        .stdout("from-stdin\n");
}

// ---------------------------------------------------------------- sbx run

#[test]
fn run_passes_dash_arguments_to_the_command() {
    let world = World::new();
    world
        .sbx()
        .args(["run", "--", "sh", "-c", r#"printf %s "$1""#, "x", "-c"])
        .timeout(DEADLINE)
        .assert()
        .code(0)
        .stdout("-c");
}

#[test]
fn run_without_a_command_exits_125() {
    let world = World::new();
    assert_usage_error(&world, &["run"]);
    assert_usage_error(&world, &["run", "--"]);
    assert_usage_error(&world, &["run", "--network", "deny"]);
}

#[test]
fn run_missing_command_exits_127() {
    let world = World::new();
    world
        .sbx()
        .args(["run", "--", "no-such-command-xyz"])
        .timeout(DEADLINE)
        .assert()
        .code(127)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("no-such-command-xyz"))
        .stderr(predicate::str::contains("command not found"));
    world
        .sbx()
        .args(["run", "--", "./no-such-file-xyz"])
        .timeout(DEADLINE)
        .assert()
        .code(127)
        .stderr(predicate::str::contains("command not found"));
}

#[test]
fn run_non_executable_file_exits_126() {
    let world = World::new();
    let script = world.project.join("not-executable.sh");
    write(&script, "#!/bin/sh\necho RAN\n");
    world
        .sbx()
        .args(["run", "--", "./not-executable.sh"])
        .timeout(DEADLINE)
        .assert()
        .code(126)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("not-executable.sh"));
    world
        .sbx()
        .arg("run")
        .arg("--")
        .arg(&script)
        .timeout(DEADLINE)
        .assert()
        .code(126)
        .stdout(predicate::str::is_empty());
    // A directory is not executable either.
    world
        .sbx()
        .args(["run", "--", "/"])
        .timeout(DEADLINE)
        .assert()
        .code(126)
        .stdout(predicate::str::is_empty());
}

#[test]
fn run_non_executable_file_found_on_path_exits_126() {
    let world = World::new();
    let bin = world.root.join("bin");
    write(&bin.join("not-exec-xyz"), "#!/bin/sh\necho RAN\n");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    world
        .sbx()
        .env("PATH", path)
        .args(["run", "--", "not-exec-xyz"])
        .timeout(DEADLINE)
        .assert()
        .code(126)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains("not-exec-xyz"));
}

// ---------------------------------------------------------------- completions, man

#[test]
fn completions_for_each_shell() {
    let world = World::new();
    for shell in ["bash", "zsh", "fish"] {
        world
            .sbx()
            .args(["completions", shell])
            .timeout(DEADLINE)
            .assert()
            .code(0)
            .stdout(predicate::str::contains("sbx"));
    }
}

#[test]
fn man_page_is_roff() {
    let world = World::new();
    world
        .sbx()
        .arg("man")
        .timeout(DEADLINE)
        .assert()
        .code(0)
        .stdout(predicate::str::contains(".TH"));
}

// ---------------------------------------------------------------- sbx profile

/// The arguments of a `sbx profile` text output, still shell-quoted: the
/// output puts one argument per line, joined by ` \` line continuations, and
/// ends with ` N</dev/null` redirections for the placeholder descriptors.
fn profile_words(text: &str) -> Vec<String> {
    let mut words: Vec<String> = text
        .trim_end()
        .split(" \\\n")
        .map(|w| w.trim().to_string())
        .collect();
    if let Some(last) = words.last_mut() {
        *last = last
            .split(' ')
            .take_while(|part| !part.ends_with("</dev/null"))
            .collect::<Vec<_>>()
            .join(" ");
    }
    words
}

/// `--home` and `--project` pin the host facts a snapshot would otherwise
/// take from the machine: nothing of the real home is left in the output,
/// sbx's own files (placeholder, tool caches) included.
#[test]
fn profile_with_pinned_home_names_nothing_of_the_real_one() {
    let world = World::new();
    let project = world.root.join("pinned-project");
    std::fs::create_dir_all(&project).unwrap();
    crate::util::git(&project, &["init", "-q"]);
    let pinned = world.root.join("pinned-home");
    std::fs::create_dir_all(&pinned).unwrap();
    for platform in ["linux", "macos"] {
        let out = world
            .sbx()
            .current_dir(&project)
            .args([
                "profile",
                "--platform",
                platform,
                "--format",
                "json",
                "--home",
            ])
            .arg(&pinned)
            .arg("--project")
            .arg(&project)
            .timeout(DEADLINE)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            !text.contains(world.home.to_str().unwrap()),
            "{platform}: the real home is in the output:\n{text}"
        );
    }
}

#[test]
fn profile_linux_prints_the_bwrap_command_line() {
    let world = World::new();
    let out = world
        .sbx()
        .args(["profile", "--platform", "linux", "--", "echo", "hi"])
        .timeout(DEADLINE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let words = profile_words(&text);
    let program = &words[0];
    assert!(
        program.starts_with('/') && program.ends_with("/bwrap"),
        "the command line must start with the absolute bwrap path:\n{text}"
    );
    for flag in ["--unshare-net", "--cap-drop"] {
        assert!(words.iter().any(|w| w == flag), "{flag} missing:\n{text}");
    }
    let cap = words.iter().position(|w| w == "--cap-drop").unwrap();
    assert_eq!(words[cap + 1], "ALL", "{text}");
    // The project path has a space: it is one argument, single-quoted.
    let quoted = format!("'{}'", world.project.display());
    assert!(
        words.contains(&quoted),
        "the project path must be one quoted argument ({quoted}):\n{text}"
    );
    let chdir = words.iter().position(|w| w == "--chdir").unwrap();
    assert_eq!(words[chdir + 1], quoted, "{text}");
    // Never split at the space.
    let first_half = format!("{}/home/my", world.root.display());
    assert!(
        !words.contains(&first_half),
        "the project path was split:\n{text}"
    );
    // The command comes last, after the separator.
    assert_eq!(&words[words.len() - 3..], ["--", "echo", "hi"], "{text}");
    assert!(
        !text.contains(['\u{1b}']),
        "no terminal escapes in the output"
    );
}

#[test]
fn profile_linux_text_is_a_valid_shell_command_line() {
    // The quoting round-trips through a real shell: `printf '%s\n'` over the
    // printed words gives back each argument whole.
    let world = World::new();
    let out = world
        .sbx()
        .args(["profile", "--platform", "linux", "--", "echo", "it's"])
        .timeout(DEADLINE)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    // The trailing `N</dev/null` redirections apply to `set` and are harmless.
    let script = format!("set -- {text}printf '%s\\n' \"$@\"\n");
    let args = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    let args = String::from_utf8(args.stdout).unwrap();
    let project = world.project.display().to_string();
    assert!(
        args.lines().any(|l| l == project),
        "the project path did not survive the shell:\n{args}"
    );
    assert_eq!(args.lines().last(), Some("it's"), "{args}");
}

#[test]
fn profile_json_has_program_args_env_profile() {
    let world = World::new();
    let out = world
        .sbx()
        .args([
            "profile",
            "--platform",
            "linux",
            "--format",
            "json",
            "--",
            "echo",
            "hi",
        ])
        .timeout(DEADLINE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let obj = value.as_object().expect("a JSON object");
    for key in ["program", "args", "env", "profile"] {
        assert!(obj.contains_key(key), "key {key} missing: {value}");
    }
    let program = obj["program"].as_str().unwrap();
    assert!(
        program.starts_with('/') && program.ends_with("/bwrap"),
        "{value}"
    );
    let args: Vec<&str> = obj["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.contains(&"--unshare-net"), "{value}");
    let project = world.project.display().to_string();
    assert!(args.contains(&project.as_str()), "{value}");
    assert_eq!(&args[args.len() - 2..], ["echo", "hi"], "{value}");

    let out = world
        .sbx()
        .args(["profile", "--platform", "macos", "--format", "json"])
        .timeout(DEADLINE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        value["profile"]
            .as_str()
            .is_some_and(|p| p.starts_with("(version 1)")),
        "{value}"
    );
}

#[test]
fn profile_macos_prints_an_sbpl_profile() {
    let world = World::new();
    world
        .sbx()
        .args(["profile", "--platform", "macos", "--", "echo", "hi"])
        .timeout(DEADLINE)
        .assert()
        .code(0)
        .stdout(predicate::str::starts_with("(version 1)"))
        .stdout(predicate::str::contains("(deny default"));
}

#[test]
fn profile_prints_nothing_but_the_plan_on_stdout() {
    // stdout is the plan only; with a clean world there is nothing to warn about.
    let world = World::new();
    world
        .sbx()
        .args(["profile", "--platform", "linux", "--", "true"])
        .timeout(DEADLINE)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("sbx:").not())
        .stdout(predicate::str::contains("🔒").not());
}

// ---------------------------------------------------------------- shell mode

#[test]
fn shell_mode_dash_c_sets_dollar_zero_and_positional_arguments() {
    require_sandbox!();
    let world = World::new();
    world
        .sbx()
        .args(["-c", "echo $0 $1", "zero", "one"])
        .timeout(DEADLINE)
        .assert()
        .code(0)
        .stdout("zero one\n");
}

#[test]
fn shell_mode_exit_status_is_the_commands() {
    require_sandbox!();
    let world = World::new();
    world
        .sbx()
        .args(["-c", "exit 7"])
        .timeout(DEADLINE)
        .assert()
        .code(7)
        .stdout(predicate::str::is_empty());
}

#[test]
fn shell_mode_option_clusters() {
    require_sandbox!();
    let world = World::new();
    // `-ec`: errexit and a command string, as agents send them.
    world
        .sbx()
        .args(["-ec", "false; echo not-reached"])
        .timeout(DEADLINE)
        .assert()
        .code(1)
        .stdout(predicate::str::is_empty());
    // `-c` then `-l`: bash accepts options after the command string's flag.
    world
        .sbx()
        .args(["-lc", "echo login-ok"])
        .timeout(DEADLINE)
        .assert()
        .code(0)
        .stdout(predicate::str::contains("login-ok"));
}

#[test]
fn shell_mode_is_sandboxed() {
    require_sandbox!();
    let world = World::new();
    let outside = world.home.join("written-by-shell-mode");
    world
        .sbx()
        .arg("-c")
        .arg(format!("touch '{}'", outside.display()))
        .timeout(DEADLINE)
        .assert()
        .failure();
    assert!(!outside.exists(), "shell mode wrote outside the project");
}

/// `unix_sockets` had no flag: `--unix-sockets allow` opens them for one
/// run, says on every run what that reaches, and a project file still
/// cannot (it may only narrow).
#[test]
fn unix_sockets_have_a_flag_that_says_what_it_opens() {
    require_sandbox!();
    let world = World::new();
    let plan = |args: &[&str]| {
        let out = world
            .sbx()
            .current_dir(&world.project)
            .args(["profile", "--platform", "linux"])
            .args(args)
            .args(["--", "true"])
            .timeout(DEADLINE)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0));
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // The inner stage's `--unix-sockets` and the value after it.
    let mode = |plan: &str| {
        let words: Vec<&str> = plan.split_whitespace().filter(|w| *w != "\\").collect();
        words
            .iter()
            .position(|w| *w == "--unix-sockets")
            .map(|i| words[i + 1].to_string())
    };
    let (opened, _) = plan(&["--unix-sockets", "allow"]);
    assert_eq!(mode(&opened).as_deref(), Some("allow"), "{opened}");
    let (own, _) = plan(&[]);
    assert_eq!(mode(&own).as_deref(), Some("own"), "{own}");
    write(
        &world.project.join(".sbx.toml"),
        "[sandbox]\nunix_sockets = \"allow\"\n",
    );
    let (widened, _) = plan(&[]);
    assert_eq!(mode(&widened).as_deref(), Some("own"), "{widened}");
    let (denied, _) = plan(&["--unix-sockets", "deny"]);
    assert_eq!(mode(&denied), None, "{denied}");
    // A run says what the flag opens.
    let out = world
        .sbx()
        .current_dir(&world.project)
        .args(["run", "--unix-sockets", "allow", "--", "true"])
        .timeout(DEADLINE)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("host's Unix sockets"), "{said}");
}
