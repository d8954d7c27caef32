//! "Never pretend": every way the sandbox can be missing, off or bypassed,
//! judged by host-side evidence.
//!
//! The backend is made unavailable in a controlled way (a configured bwrap
//! that does not exist, fake bwraps that fail the way real ones do), and each
//! case shows both sides: by default the command runs WITHOUT a sandbox,
//! provably (it writes a file in $HOME, which the sandbox forbids, and the file
//! is there afterwards) and loudly (`NOT sandboxed: <cause>` on stderr); with
//! `require` it is refused with 125 and provably did not run. `--unsandboxed`
//! needs a yes on a real terminal (a pseudo-terminal driven by Python here),
//! and nothing else (no terminal, a config, shell mode, an environment
//! variable, a nested sbx) can turn it on.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::host::{both, stderr, stdout, tool};
use crate::require_sandbox;
use crate::util::{self, Runner, Sbx, World, UID_MAP_ERROR};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// What an old bubblewrap prints for an option it lacks.
const UNKNOWN_OPTION_ERROR: &str = "bwrap: Unknown option --perms";

/// The `what` texts of the causes in src/probe.rs that these tests expect.
const WHAT_OLD_BWRAP: &str = "the installed bubblewrap lacks an option sbx needs";
const WHAT_USERNS_MAX_ZERO: &str = "user namespaces are disabled (user.max_user_namespaces = 0)";
const WHAT_USERNS_DEBIAN: &str =
    "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)";
const WHAT_APPARMOR: &str = "AppArmor forbids unprivileged user namespaces to this bwrap (kernel.apparmor_restrict_unprivileged_userns = 1)";
const WHAT_CONTAINER: &str = "this container does not allow creating namespaces (its seccomp profile or missing privileges block them)";
const WHAT_UNKNOWN: &str = "bubblewrap failed to start the sandbox";

/// The `what` sbx must name for a bwrap failing with the uid-map error on
/// this host: the cause depends on kernel settings, so the test reads the
/// same facts (src/probe.rs `Facts::read`) and expects the matching cause.
fn expected_uid_map_cause() -> &'static str {
    let num = |p: &str| -> Option<u64> {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    };
    let root = util::euid_is_root();
    let in_container = Path::new("/.dockerenv").exists()
        || Path::new("/run/.containerenv").exists()
        || std::fs::read_to_string("/proc/1/environ")
            .is_ok_and(|e| e.split('\0').any(|v| v.starts_with("container=")));
    if num("/proc/sys/user/max_user_namespaces") == Some(0) {
        WHAT_USERNS_MAX_ZERO
    } else if num("/proc/sys/kernel/unprivileged_userns_clone") == Some(0) && !root {
        WHAT_USERNS_DEBIAN
    } else if num("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == Some(1) && !root {
        WHAT_APPARMOR
    } else if in_container {
        WHAT_CONTAINER
    } else {
        WHAT_UNKNOWN
    }
}

/// The script every run uses: write a file in $HOME (refused by the
/// sandbox), then exit 7.
const WRITE_HOME_EXIT_7: &str = "touch \"$HOME/marker\" && exit 7; exit 99";

/// The file `WRITE_HOME_EXIT_7` writes.
fn marker(world: &World) -> PathBuf {
    world.home.join("marker")
}

/// A user config pointing `bwrap` at `path`, plus `extra` lines.
fn config_bwrap(world: &World, path: &Path, extra: &str) {
    world.user_config(&format!(
        "[sandbox]\nbwrap = \"{}\"\n{extra}",
        path.display()
    ));
}

/// By default: the command ran WITHOUT the sandbox (its $HOME write landed),
/// its exit status came back, and stderr said so loudly, naming `cause`.
fn assert_ran_unsandboxed(world: &World, out: &Output, cause: &str) {
    assert_eq!(out.status.code(), Some(7), "{}", both(out));
    assert!(
        marker(world).exists(),
        "the command should have run unsandboxed and written $HOME/marker\n{}",
        both(out)
    );
    let err = stderr(out);
    let line = err
        .lines()
        .find(|l| l.contains("NOT sandboxed:"))
        .unwrap_or_else(|| panic!("no `NOT sandboxed:` line\n{}", both(out)));
    assert!(
        line.contains(cause),
        "the NOT sandboxed line does not name the cause {cause:?}\n{}",
        both(out)
    );
    assert!(
        line.contains("running the command without a sandbox"),
        "{}",
        both(out)
    );
}

/// With `require`: 125, the cause named, and the command provably not run.
fn assert_refused(world: &World, out: &Output, cause: &str) {
    assert_eq!(out.status.code(), Some(125), "{}", both(out));
    assert!(
        !marker(world).exists(),
        "a refused command ran anyway (it wrote $HOME/marker)\n{}",
        both(out)
    );
    let err = stderr(out);
    assert!(
        err.contains(cause),
        "cause {cause:?} not named\n{}",
        both(out)
    );
    assert!(err.contains("refusing to run it"), "{}", both(out));
    assert!(!err.contains("NOT sandboxed:"), "{}", both(out));
}

/// Run one "backend unavailable" setup through all of its cases: default
/// (unsandboxed, loud, exit status kept), `--require`, `require = true` in
/// the user config, and a project `require = false` that cannot undo it.
/// `config` writes the user config with the given extra lines.
fn unavailable_cases(world: &World, config: &dyn Fn(&str), cause: &str) {
    config("");
    let out = Sbx.run_sh_flags(world, &[], WRITE_HOME_EXIT_7);
    assert_ran_unsandboxed(world, &out, cause);
    std::fs::remove_file(marker(world)).unwrap();

    let out = Sbx.run_sh_flags(world, &["--require"], WRITE_HOME_EXIT_7);
    assert_refused(world, &out, cause);

    config("require = true\n");
    let out = Sbx.run_sh_flags(world, &[], WRITE_HOME_EXIT_7);
    assert_refused(world, &out, cause);

    util::write(
        &world.project.join(".sbx.toml"),
        "[sandbox]\nrequire = false\n",
    );
    let out = Sbx.run_sh_flags(world, &[], WRITE_HOME_EXIT_7);
    assert_refused(world, &out, cause);
    assert!(
        stderr(&out).contains("ignored `require = false`"),
        "the ignored widening should be reported\n{}",
        both(&out)
    );
    std::fs::remove_file(world.project.join(".sbx.toml")).unwrap();
}

/// A bubblewrap that exists but cannot be trusted (it lies where the
/// sandboxed command could replace or delete it) is never a reason to run
/// unsandboxed: refused with and without `require`.
fn refused_cases(world: &World, config: &dyn Fn(&str), cause: &str) {
    config("");
    let out = Sbx.run_sh_flags(world, &[], WRITE_HOME_EXIT_7);
    assert_refused(world, &out, cause);
    let out = Sbx.run_sh_flags(world, &["--require"], WRITE_HOME_EXIT_7);
    assert_refused(world, &out, cause);
}

/// The Python driver for a pseudo-terminal: run ARGV with a controlling
/// terminal, answer ANSWER (`EOF` sends Ctrl-D) when the `[y/N]` prompt
/// appears, collect everything written to the terminal, and print it
/// followed by `@@EXIT <status>` and `@@PROMPTED <0|1>`.
const PTY_DRIVER: &str = r#"
import os, pty, select, signal, sys, time
answer = sys.argv[1]
answer = b"\x04" if answer == "EOF" else answer.encode()
argv = sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    try:
        os.execv(argv[0], argv)
    finally:
        os._exit(127)
out = b""
prompted = False
deadline = time.time() + 30
while True:
    if time.time() > deadline:
        os.kill(pid, signal.SIGKILL)
        out += b"\n@@TIMEOUT\n"
        break
    r, _, _ = select.select([fd], [], [], 0.2)
    if fd not in r:
        continue
    try:
        data = os.read(fd, 4096)
    except OSError:
        break
    if not data:
        break
    out += data
    if not prompted and b"[y/N]" in out:
        prompted = True
        os.write(fd, answer)
_, status = os.waitpid(pid, 0)
sys.stdout.write(out.decode(errors="replace"))
sys.stdout.write("\n@@EXIT %d\n@@PROMPTED %d\n" % (os.waitstatus_to_exitcode(status), prompted))
"#;

const PYTHON: &str = "/usr/bin/python3";

/// Run `sbx ARGS` on a pseudo-terminal (its controlling terminal), in the
/// world's clean environment, answering `answer` to the prompt. Returns what
/// appeared on the terminal, the exit status and whether it prompted.
fn run_on_pty(world: &World, answer: &str, args: &[&str]) -> (String, i32, bool) {
    let mut py = world.host_cmd(PYTHON);
    py.arg("-c")
        .arg(PTY_DRIVER)
        .arg(answer)
        .arg(util::sbx_path())
        .args(args)
        .stdin(Stdio::null());
    let out = py.output().unwrap();
    let text = stdout(&out);
    assert!(out.status.success(), "pty driver failed\n{}", both(&out));
    assert!(!text.contains("@@TIMEOUT"), "sbx hung on the pty\n{text}");
    let code = text
        .lines()
        .find_map(|l| l.strip_prefix("@@EXIT "))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let prompted = text.lines().any(|l| l == "@@PROMPTED 1");
    (text, code, prompted)
}

/// Whether Python, which drives the pseudo-terminal, is installed.
fn have_python() -> bool {
    tool(&[PYTHON]).is_some()
}

/// `setsid -w sbx ARGS`: sbx in a new session, so it has no controlling
/// terminal and /dev/tty cannot be opened; stdin, stdout, stderr are pipes.
fn run_without_terminal(world: &World, args: &[&str]) -> Output {
    world
        .host_cmd("setsid")
        .arg("-w")
        .arg(util::sbx_path())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

// ---------------------------------------------------------------------------
// 1. The backend made unavailable
// ---------------------------------------------------------------------------

#[test]
fn configured_bwrap_missing_runs_unsandboxed_loudly_or_refuses() {
    let world = World::new();
    let cause = "the configured bwrap /nonexistent/bwrap does not exist";
    unavailable_cases(
        &world,
        &|extra| config_bwrap(&world, Path::new("/nonexistent/bwrap"), extra),
        cause,
    );
}

#[test]
fn bwrap_refused_user_namespaces_names_the_cause() {
    let world = World::new();
    let ran = world.root.join("fake-ran");
    let bwrap = util::fake_bwrap(&world.root.join("fakebin"), UID_MAP_ERROR, Some(&ran));
    let cause = expected_uid_map_cause();
    unavailable_cases(&world, &|extra| config_bwrap(&world, &bwrap, extra), cause);
    // The message carries bubblewrap's own words too.
    config_bwrap(&world, &bwrap, "");
    let out = Sbx.run_sh_flags(&world, &[], WRITE_HOME_EXIT_7);
    assert!(
        stderr(&out).contains(&format!("[{UID_MAP_ERROR}]")),
        "{}",
        both(&out)
    );
    assert!(ran.exists(), "the fake bwrap was never executed");
}

#[test]
fn bwrap_lacking_an_option_names_the_cause() {
    let world = World::new();
    let bwrap = util::fake_bwrap(&world.root.join("fakebin"), UNKNOWN_OPTION_ERROR, None);
    unavailable_cases(
        &world,
        &|extra| config_bwrap(&world, &bwrap, extra),
        WHAT_OLD_BWRAP,
    );
    config_bwrap(&world, &bwrap, "");
    let out = Sbx.run_sh_flags(&world, &[], WRITE_HOME_EXIT_7);
    let err = stderr(&out);
    assert!(
        err.contains(&format!("[{UNKNOWN_OPTION_ERROR}]")),
        "{}",
        both(&out)
    );
    assert!(
        err.contains("install bubblewrap 0.5 or newer"),
        "the fix is named\n{}",
        both(&out)
    );
}

#[test]
fn unsandboxed_fallback_keeps_other_exit_codes() {
    let world = World::new();
    config_bwrap(&world, Path::new("/nonexistent/bwrap"), "");
    for code in [0, 1, 42] {
        let out = Sbx.run_sh_flags(&world, &[], &format!("exit {code}"));
        assert_eq!(out.status.code(), Some(code), "{}", both(&out));
        assert!(stderr(&out).contains("NOT sandboxed:"), "{}", both(&out));
    }
    // stdout stays the command's.
    let out = Sbx.run_sh_flags(&world, &[], "echo hello");
    assert_eq!(stdout(&out), "hello\n", "{}", both(&out));
}

#[test]
fn the_warning_cannot_be_silenced() {
    let world = World::new();
    let cause = "the configured bwrap /nonexistent/bwrap does not exist";
    config_bwrap(
        &world,
        Path::new("/nonexistent/bwrap"),
        "banner = \"never\"\n",
    );
    // `--quiet` and `banner = "never"` silence the banner, never this line.
    let out = Sbx.run_sh_flags(&world, &["--quiet"], WRITE_HOME_EXIT_7);
    assert_ran_unsandboxed(&world, &out, cause);
    std::fs::remove_file(marker(&world)).unwrap();
    // Shell mode (`sbx -c`, as agents call it) says it too.
    let out = world
        .sbx_std()
        .args(["-c", WRITE_HOME_EXIT_7])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ran_unsandboxed(&world, &out, cause);
    std::fs::remove_file(marker(&world)).unwrap();
    // Without a UTF-8 locale, with the plain prefix.
    let out = world
        .sbx_std()
        .env("LANG", "C")
        .args(["run", "--", "sh", "-c", WRITE_HOME_EXIT_7])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ran_unsandboxed(&world, &out, cause);
    assert!(
        stderr(&out).contains("[sbx WARNING] NOT sandboxed:"),
        "{}",
        both(&out)
    );
    std::fs::remove_file(marker(&world)).unwrap();
    // And shell mode refuses with `require = true` like `run` does.
    config_bwrap(&world, Path::new("/nonexistent/bwrap"), "require = true\n");
    let out = world
        .sbx_std()
        .args(["-c", WRITE_HOME_EXIT_7])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_refused(&world, &out, cause);
}

#[test]
fn configured_bwrap_in_the_project_is_never_used() {
    let world = World::new();
    let ran = world.root.join("fake-ran");
    let bwrap = util::fake_bwrap(&world.project.join("bin"), UID_MAP_ERROR, Some(&ran));
    let cause = format!(
        "the configured bwrap {} lies inside a writable root",
        bwrap.display()
    );
    refused_cases(&world, &|extra| config_bwrap(&world, &bwrap, extra), &cause);
    assert!(!ran.exists(), "a bwrap inside the project was executed");
}

#[test]
fn configured_bwrap_in_an_extra_writable_root_is_never_used() {
    let world = World::new();
    let ran = world.root.join("fake-ran");
    let extra_root = world.root.join("scratch");
    let bwrap = util::fake_bwrap(&extra_root, UID_MAP_ERROR, Some(&ran));
    let cause = format!(
        "the configured bwrap {} lies inside a writable root",
        bwrap.display()
    );
    refused_cases(
        &world,
        &|extra| {
            config_bwrap(
                &world,
                &bwrap,
                &format!("writable = [\".\", \"{}\"]\n{extra}", extra_root.display()),
            )
        },
        &cause,
    );
    assert!(!ran.exists(), "a bwrap inside a writable root was executed");
}

#[test]
fn configured_bwrap_reached_through_a_symlink_into_the_project_is_never_used() {
    let world = World::new();
    let ran = world.root.join("fake-ran");
    let real = util::fake_bwrap(&world.project.join("bin"), UID_MAP_ERROR, Some(&ran));
    let link = world.root.join("fakebin/bwrap-link");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let cause = format!(
        "the configured bwrap {} lies inside a writable root",
        real.display()
    );
    refused_cases(&world, &|extra| config_bwrap(&world, &link, extra), &cause);
    assert!(!ran.exists(), "a bwrap inside the project was executed");
}

#[test]
fn configured_bwrap_in_the_working_directory_is_never_used() {
    let world = World::new();
    let ran = world.root.join("fake-ran");
    // The project is not writable here: only the working directory rule
    // keeps this bwrap out.
    let bwrap = util::fake_bwrap(&world.project, UID_MAP_ERROR, Some(&ran));
    let cause = format!("the configured bwrap {}", bwrap.display());
    refused_cases(
        &world,
        &|extra| config_bwrap(&world, &bwrap, &format!("writable = [\"/tmp\"]\n{extra}")),
        &cause,
    );
    assert!(
        !ran.exists(),
        "a bwrap in the working directory was executed"
    );
}

#[test]
fn bwrap_on_path_in_the_project_is_never_used() {
    require_sandbox!();
    let world = World::new();
    let ran = world.root.join("fake-ran");
    let bin = world.project.join("bin");
    util::fake_bwrap(&bin, UID_MAP_ERROR, Some(&ran));
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = world
        .sbx_std()
        .env("PATH", &path)
        .args(["run", "--require", "--"])
        .args([
            "sh",
            "-c",
            "touch ok-in-project; touch \"$HOME/marker\"; exit 0",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        !ran.exists(),
        "the bwrap on PATH in the project was executed"
    );
    assert!(!stderr(&out).contains("NOT sandboxed"), "{}", both(&out));
    // Sandboxed by the real bwrap: the project write landed, the $HOME one did not.
    assert!(
        world.project.join("ok-in-project").exists(),
        "{}",
        both(&out)
    );
    assert!(!marker(&world).exists(), "{}", both(&out));
}

// ---------------------------------------------------------------------------
// 2. enabled = false
// ---------------------------------------------------------------------------

#[test]
fn disabled_runs_the_command_as_is_and_is_quiet_off_a_terminal() {
    let world = World::new();
    world.user_config("[sandbox]\nenabled = false\n");
    let out = Sbx.run_sh_flags(&world, &[], WRITE_HOME_EXIT_7);
    assert_eq!(out.status.code(), Some(7), "{}", both(&out));
    assert!(marker(&world).exists(), "{}", both(&out));
    assert_eq!(
        stderr(&out),
        "",
        "the default banner is silent off a terminal"
    );
}

/// `--require` asks for a sandbox or nothing: with the sandbox disabled in
/// a trusted config, nothing (eighth review: it ran unsandboxed, silently).
#[test]
fn disabled_with_require_refuses() {
    let world = World::new();
    world.user_config("[sandbox]\nenabled = false\n");
    let out = Sbx.run_sh_flags(&world, &["--require"], WRITE_HOME_EXIT_7);
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!marker(&world).exists(), "the command ran: {}", both(&out));
    assert!(stderr(&out).contains("enabled = false"), "{}", both(&out));
    world.user_config("[sandbox]\nenabled = false\nrequire = true\n");
    let out = Sbx.run_sh_flags(&world, &[], WRITE_HOME_EXIT_7);
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!marker(&world).exists(), "the command ran: {}", both(&out));
}

#[test]
fn disabled_with_banner_always_says_so_once() {
    let world = World::new();
    world.user_config("[sandbox]\nenabled = false\nbanner = \"always\"\n");
    let out = Sbx.run_sh_flags(&world, &[], WRITE_HOME_EXIT_7);
    assert_eq!(out.status.code(), Some(7), "{}", both(&out));
    assert!(marker(&world).exists(), "{}", both(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{}", both(&out));
    assert!(lines[0].contains("sandbox disabled"), "{}", both(&out));
    assert!(lines[0].contains("enabled = false"), "{}", both(&out));
    assert_eq!(stdout(&out), "", "sbx never speaks on stdout");
}

// ---------------------------------------------------------------------------
// 3. --unsandboxed
// ---------------------------------------------------------------------------

#[test]
fn unsandboxed_without_a_terminal_is_refused() {
    let world = World::new();
    let out = run_without_terminal(
        &world,
        &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
    );
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!marker(&world).exists(), "{}", both(&out));
    let err = stderr(&out);
    assert!(err.contains("needs a terminal"), "{}", both(&out));
    assert!(err.contains("the command was not run"), "{}", both(&out));
}

#[test]
fn unsandboxed_refused_by_user_config() {
    let world = World::new();
    world.user_config("[sandbox]\nallow_unsandboxed = false\n");
    let out = run_without_terminal(
        &world,
        &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
    );
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!marker(&world).exists(), "{}", both(&out));
    assert!(
        stderr(&out).contains("`allow_unsandboxed = false`"),
        "{}",
        both(&out)
    );
}

#[test]
fn unsandboxed_refused_by_user_config_even_on_a_terminal() {
    if !have_python() {
        return;
    }
    let world = World::new();
    world.user_config("[sandbox]\nallow_unsandboxed = false\n");
    let (text, code, prompted) = run_on_pty(
        &world,
        "y\n",
        &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
    );
    assert!(!prompted, "it must not even ask\n{text}");
    assert_eq!(code, 125, "{text}");
    assert!(text.contains("`allow_unsandboxed = false`"), "{text}");
    assert!(!marker(&world).exists(), "{text}");
}

#[test]
fn project_file_cannot_allow_unsandboxed_over_the_user() {
    let world = World::new();
    world.user_config("[sandbox]\nallow_unsandboxed = false\n");
    util::write(
        &world.project.join(".sbx.toml"),
        "[sandbox]\nallow_unsandboxed = true\n",
    );
    let out = run_without_terminal(
        &world,
        &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
    );
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!marker(&world).exists(), "{}", both(&out));
    let err = stderr(&out);
    assert!(
        err.contains("ignored `allow_unsandboxed = true`"),
        "{}",
        both(&out)
    );
    assert!(
        err.contains("`allow_unsandboxed = false`"),
        "{}",
        both(&out)
    );
}

#[test]
fn project_file_cannot_allow_unsandboxed_over_the_user_on_a_terminal() {
    if !have_python() {
        return;
    }
    let world = World::new();
    world.user_config("[sandbox]\nallow_unsandboxed = false\n");
    util::write(
        &world.project.join(".sbx.toml"),
        "[sandbox]\nallow_unsandboxed = true\n",
    );
    let (text, code, prompted) = run_on_pty(
        &world,
        "y\n",
        &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
    );
    assert!(!prompted, "{text}");
    assert_eq!(code, 125, "{text}");
    assert!(!marker(&world).exists(), "{text}");
}

#[test]
fn unsandboxed_yes_on_a_terminal_runs_it_unsandboxed() {
    if !have_python() {
        return;
    }
    let world = World::new();
    let (text, code, prompted) = run_on_pty(
        &world,
        "y\n",
        &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
    );
    assert!(prompted, "no prompt\n{text}");
    assert!(text.contains("run WITHOUT the sandbox"), "{text}");
    assert!(
        text.contains("$HOME/marker"),
        "the prompt shows the command\n{text}"
    );
    assert!(text.contains("NOT sandboxed:"), "{text}");
    assert_eq!(code, 7, "{text}");
    assert!(
        marker(&world).exists(),
        "the confirmed command did not run\n{text}"
    );
}

#[test]
fn unsandboxed_anything_but_yes_does_not_run() {
    if !have_python() {
        return;
    }
    for answer in ["n\n", "whatever\n", "\n", "EOF", "yes please\n"] {
        let world = World::new();
        let (text, code, prompted) = run_on_pty(
            &world,
            answer,
            &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
        );
        assert!(prompted, "answer {answer:?}: no prompt\n{text}");
        assert_eq!(code, 125, "answer {answer:?}\n{text}");
        assert!(text.contains("not confirmed"), "answer {answer:?}\n{text}");
        assert!(
            !marker(&world).exists(),
            "answer {answer:?}: the command ran\n{text}"
        );
    }
}

#[test]
fn shell_mode_never_reads_unsandboxed() {
    require_sandbox!();
    let world = World::new();
    world.user_config("[sandbox]\nbanner = \"always\"\n");
    // As $0 after the command string, and inside it: just text for the shell.
    for args in [
        vec!["-c", "touch \"$HOME/marker\"; echo ran", "--unsandboxed"],
        vec![
            "-c",
            "echo \"$1\"; touch \"$HOME/marker\"; echo ran",
            "sh",
            "--unsandboxed",
        ],
        vec!["-lc", "touch \"$HOME/marker\"; echo ran", "--unsandboxed"],
    ] {
        let out = world
            .sbx_std()
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(stdout(&out).contains("ran"), "{args:?}\n{}", both(&out));
        assert!(!marker(&world).exists(), "{args:?} escaped\n{}", both(&out));
        let err = stderr(&out);
        assert!(err.contains("🔒 sbx: bwrap"), "{args:?}\n{}", both(&out));
        assert!(!err.contains("NOT sandboxed"), "{args:?}\n{}", both(&out));
    }
    // `sbx -c --unsandboxed`: handed to the shell as bash would take it (an
    // invalid option), inside the sandbox, not read by sbx.
    let out = world
        .sbx_std()
        .args(["-c", "--unsandboxed"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let bash = Command::new("/bin/bash")
        .args(["-c", "--unsandboxed"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), bash.status.code(), "{}", both(&out));
    let err = stderr(&out);
    assert!(err.contains("🔒 sbx: bwrap"), "{}", both(&out));
    assert!(!err.contains("needs a terminal"), "{}", both(&out));
    // Before the shell options it is not shell mode, and not a flag sbx takes
    // there: a usage error, nothing runs.
    let out = world
        .sbx_std()
        .args(["--unsandboxed", "-c", "touch \"$HOME/marker\""])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!marker(&world).exists(), "{}", both(&out));
}

#[test]
fn shell_mode_unsandboxed_on_a_terminal_never_prompts() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    let (text, _code, prompted) = run_on_pty(
        &world,
        "y\n",
        &["-c", "touch \"$HOME/marker\"; echo ran", "--unsandboxed"],
    );
    assert!(!prompted, "{text}");
    assert!(text.contains("ran"), "{text}");
    assert!(!marker(&world).exists(), "{text}");
}

#[test]
fn no_environment_variable_turns_unsandboxed_on() {
    require_sandbox!();
    let world = World::new();
    for var in [
        "SBX_UNSANDBOXED",
        "SBX_REQUIRE_UNSANDBOXED",
        "SBX_ENABLED",
        "SBX_DISABLE",
    ] {
        for value in ["1", "true", "0", "false"] {
            let out = world
                .sbx_std()
                .env(var, value)
                .args(["run", "--", "sh", "-c", "touch \"$HOME/marker\"; echo ran"])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert_eq!(stdout(&out), "ran\n", "{var}={value}\n{}", both(&out));
            assert!(
                !marker(&world).exists(),
                "{var}={value} escaped\n{}",
                both(&out)
            );
            assert!(!stderr(&out).contains("NOT sandboxed"), "{}", both(&out));
        }
    }
}

// ---------------------------------------------------------------------------
// 4. sbx check
// ---------------------------------------------------------------------------

fn check(world: &World, json: bool) -> Output {
    let mut cmd = world.sbx_std();
    cmd.arg("check");
    if json {
        cmd.args(["--format", "json"]);
    }
    cmd.stdin(Stdio::null()).output().unwrap()
}

fn check_json(world: &World) -> (Output, serde_json::Value) {
    let out = check(world, true);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON: {e}\n{}", both(&out)));
    (out, value)
}

const CHECK_TESTS: [&str; 3] = [
    "write outside the writable roots",
    "read of a credential",
    "network to the host's loopback",
];

#[test]
fn check_reports_every_self_test_enforced() {
    require_sandbox!();
    let world = World::new();
    let out = check(&world, false);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    let text = stdout(&out);
    for name in CHECK_TESTS {
        assert!(
            text.contains(&format!("test:     {name}: enforced\n")),
            "{name}\n{}",
            both(&out)
        );
    }
    assert!(text.contains("backend:  /"), "{}", both(&out));
    assert!(
        text.contains("result:   everything the policy asks for is enforced"),
        "{}",
        both(&out)
    );

    let (out, v) = check_json(&world);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["enabled"], true, "{v}");
    assert!(v["backend"].is_string(), "{v}");
    assert!(v["backend_error"].is_null(), "{v}");
    assert!(v["sandbox_error"].is_null(), "{v}");
    let tests = v["tests"].as_array().unwrap();
    let names: Vec<&str> = tests.iter().map(|t| t["test"].as_str().unwrap()).collect();
    assert_eq!(names, CHECK_TESTS, "{v}");
    for t in tests {
        assert_eq!(t["result"], "enforced", "{v}");
        assert_eq!(t["ok"], true, "{v}");
    }
}

#[test]
fn check_with_network_allowed_says_so_and_passes() {
    require_sandbox!();
    let world = World::new();
    world.user_config("[sandbox]\nnetwork = \"allow\"\n");
    let out = check(&world, false);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    let text = stdout(&out);
    assert!(
        text.contains("test:     network to the host's loopback: allowed by the policy\n"),
        "{}",
        both(&out)
    );
    assert!(
        text.contains("test:     write outside the writable roots: enforced\n"),
        "{}",
        both(&out)
    );
    let (out, v) = check_json(&world);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["tests"][2]["result"], "allowed by the policy", "{v}");
}

#[test]
fn check_with_a_failing_bwrap_names_the_cause_and_fails() {
    let world = World::new();
    let bwrap = util::fake_bwrap(&world.root.join("fakebin"), UID_MAP_ERROR, None);
    config_bwrap(&world, &bwrap, "");
    let cause = expected_uid_map_cause();
    let out = check(&world, false);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("sandbox:  cannot start:"))
        .unwrap_or_else(|| panic!("no `cannot start` line\n{}", both(&out)));
    assert!(line.contains(cause), "{}", both(&out));
    assert!(line.contains(UID_MAP_ERROR), "{}", both(&out));
    assert!(
        text.contains("result:   NOT everything the policy asks for is enforced"),
        "{}",
        both(&out)
    );
    assert!(
        !text.contains(": enforced"),
        "no self-test can pass\n{}",
        both(&out)
    );

    let (out, v) = check_json(&world);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    assert_eq!(v["ok"], false, "{v}");
    assert!(v["sandbox_error"].as_str().unwrap().contains(cause), "{v}");

    // The same for an old bubblewrap.
    let bwrap = util::fake_bwrap(&world.root.join("fakebin2"), UNKNOWN_OPTION_ERROR, None);
    config_bwrap(&world, &bwrap, "");
    let out = check(&world, false);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    assert!(stdout(&out).contains(WHAT_OLD_BWRAP), "{}", both(&out));
}

#[test]
fn check_with_a_missing_bwrap_fails() {
    let world = World::new();
    config_bwrap(&world, Path::new("/nonexistent/bwrap"), "");
    let out = check(&world, false);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    assert!(
        stdout(&out).contains("backend:  NOT available: the configured bwrap /nonexistent/bwrap"),
        "{}",
        both(&out)
    );
    let (out, v) = check_json(&world);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    assert_eq!(v["ok"], false, "{v}");
    assert!(v["backend"].is_null(), "{v}");
    assert!(
        v["backend_error"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/bwrap"),
        "{v}"
    );
}

#[test]
fn check_with_the_sandbox_disabled_says_so() {
    let world = World::new();
    world.user_config("[sandbox]\nenabled = false\n");
    let out = check(&world, false);
    let text = stdout(&out);
    assert!(
        text.contains("sandbox:  disabled (`enabled = false`)"),
        "{}",
        both(&out)
    );
    assert!(!text.contains("test:"), "no self-test runs\n{}", both(&out));
    let (_, v) = check_json(&world);
    assert_eq!(v["enabled"], false, "{v}");
    // Regression: with the sandbox disabled, `sbx check` once ended with
    // "everything the policy asks for is enforced" and exit 0.
    assert!(
        !text.contains("everything the policy asks for is enforced"),
        "sbx check claims enforcement with the sandbox disabled\n{}",
        both(&out)
    );
}

// ---------------------------------------------------------------------------
// 5. Nested sbx
// ---------------------------------------------------------------------------

#[test]
fn nested_unsandboxed_is_refused() {
    require_sandbox!();
    let world = World::new();
    let sbx = util::sbx_path();
    let out = world
        .sbx_std()
        .args(["run", "--"])
        .arg(&sbx)
        .args(["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(
        stderr(&out).contains("--unsandboxed cannot be used inside an sbx sandbox"),
        "{}",
        both(&out)
    );
    assert!(!marker(&world).exists(), "{}", both(&out));
}

#[test]
fn nested_run_stays_confined() {
    require_sandbox!();
    let world = World::new();
    let sbx = util::sbx_path();
    let out = world
        .sbx_std()
        .args(["run", "--"])
        .arg(&sbx)
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "touch nested-ok; touch \"$HOME/marker\"; echo done",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "done\n", "{}", both(&out));
    // Positive control: the nested command ran, and could write the project.
    assert!(world.project.join("nested-ok").exists(), "{}", both(&out));
    assert!(
        !marker(&world).exists(),
        "the nested run escaped\n{}",
        both(&out)
    );
    // A nested sbx pointed at a config written inside, which turns the
    // sandbox off: still confined (inside, nothing can leave).
    let script = format!(
        "printf '[sandbox]\\nenabled = false\\n' > off.toml && '{}' run --config off.toml -- sh -c '{}'",
        sbx.display(),
        WRITE_HOME_EXIT_7
    );
    let out = Sbx.run_sh_flags(&world, &[], &script);
    assert!(world.project.join("off.toml").exists(), "{}", both(&out));
    assert!(
        !marker(&world).exists(),
        "the nested run escaped\n{}",
        both(&out)
    );
}
