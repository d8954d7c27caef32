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

/// A user config pointing `bwrap` at `path`, plus `extra` lines. The
/// backend is bubblewrap alone: these tests are about what sbx does when
/// no sandbox at all can be had (reduced mode is `reduced.rs`'s).
fn config_bwrap(world: &World, path: &Path, extra: &str) {
    world.user_config(&format!(
        "[sandbox]\nbwrap = \"{}\"\nbackend = \"bwrap\"\n{extra}",
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
// The tests, by topic
// ---------------------------------------------------------------------------

mod disabled;
mod nested;
mod self_test;
mod unavailable;
mod unsandboxed;
