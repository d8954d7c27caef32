//! The macOS enforcement suite: real `/usr/bin/sandbox-exec` runs, each grant
//! beside its denial, judged by host-side evidence (does the file exist on
//! the host afterwards, did a host listener receive a connection, is a host
//! process still alive, did an app start outside the sandbox). Exit codes
//! alone prove nothing, so every refusal runs beside a positive control, and
//! every refusal that touches a credential also checks that the planted
//! secret appears in neither stdout nor stderr.
//!
//! It compiles on every Unix (Linux is where it is type-checked) and runs
//! only on macOS, in the macOS CI job: each test carries
//! `cfg_attr(not(target_os = "macos"), ignore)`. Only std and the system's
//! own tools are used (`/bin/sh`, `/bin/bash`, `/usr/bin/{git,python3,curl,
//! nc,script,open,osascript,security,pgrep}`). `SBX_TEST_SHOW=1` prints
//! every sandboxed run's output. Checks that change the user's session
//! (launching an app on the host, adding keychain items, the pasteboard) run
//! only under CI (`CI=true`) or with `SBX_TEST_INTRUSIVE=1`.
//!
//! Nobody has run this yet. The first macOS run must confirm these
//! assumptions (the VERIFY items of reference/macos-sbpl.md); a failure of
//! one of them is a finding about the profile first, and about the test
//! second:
//!
//!  1. The profile compiles on the runner's macOS: every operation and filter
//!     name in it exists there. Most are used by Apple's own profiles in
//!     `/System/Library/Sandbox/Profiles` (a public catalogue extracted from
//!     macOS 26.4.1 lists `file-link`, `file-clone`, `file-read-xattr`,
//!     `file-write-unlink`, `lsopen`, `appleevent-send`,
//!     `ipc-posix-name-regex`, `(regex (string-append "^" (regex-quote
//!     (param ...))))`, `(remote ip "localhost:PORT")` and `(deny default
//!     (with message ...))`); `(remote unix-socket (path-regex ...))`,
//!     `(target same-sandbox)` and `(vnode-type CHARACTER-DEVICE)` only by
//!     other tools' working profiles. If one is unknown, the harness probe
//!     (`sbx run --require -- true`) fails and every test reports it.
//!  2. Between filtered rules the last match wins, and a credential deny that
//!     names both `file-read*` and the concrete read operations beats the
//!     earlier `(allow file-read*)` for `cat`, `ls` and `stat`.
//!  3. Case variants (`~/.SSH/...`) are denied on case-insensitive APFS:
//!     `subpath` is matched against the path of the vnode, or case-folded.
//!  4. `-D NAME=VALUE` passes a path with a space, `"`, `\`, parentheses,
//!     `;` and non-ASCII verbatim, `regex-quote` quotes it, and the `#"..."`
//!     `.env` regexes (character classes, `require-not` for the templates)
//!     match what the reference says they match.
//!  5. A `literal` + `subpath` deny on a path that does not exist yet stops
//!     its first creation (missing `.git/hooks`, `.envrc`, `.vscode`).
//!  6. `file-link` is checked against the source of link(2) and `file-clone`
//!     stops clonefile(2) (`cp -c`); and both, being operations of their
//!     own outside `file-write*`, are still allowed for ordinary files in
//!     the project (the profile has no explicit allow for them: if
//!     `hard_links_and_clones_of_ordinary_files_work` fails, it needs one).
//!  7. `(allow file-read*)` also lets dyld map code outside the shared cache
//!     (`file-map-executable`): the `/usr/bin/python3` and `/usr/bin/git`
//!     xcrun shims, which load from Xcode or the Command Line Tools.
//!  8. The xcrun shim works with `$TMPDIR` writable (its `xcrun_db` cache).
//!  9. `network = "allow"`: DNS through `com.apple.dnssd.service` and the
//!     mDNSResponder socket, TLS through trustd; `remote ip "*:*"` does not
//!     cover `AF_UNIX` connects.
//! 10. Without launchservicesd, Apple Events and `lsopen`, `open` and
//!     `osascript` fail and start nothing outside the sandbox.
//! 11. Read-only mode: `(literal "/")` plus the system list is enough for
//!     `/usr/bin/true`, `/bin/ls`, `/bin/cat`, `/usr/bin/touch` (no SIGABRT
//!     from dyld on the newest macOS).
//! 12. `ipc-posix-sem` is all Python's `multiprocessing.Lock` needs;
//!     `pseudo-tty` plus `file-ioctl` on the tty nodes is all `script` and
//!     `stty raw` need; `(target same-sandbox)` keeps job control working
//!     and host processes out of reach of `kill`.
//! 13. The firmlinked spelling `/System/Volumes/Data/Users/...` of a
//!     credential is denied as well (Seatbelt sees the resolved path).
//! 14. Keychain: `security` cannot reach SecurityServer without a network
//!     mode; with `network = "allow"` (which grants SecurityServer for TLS)
//!     the file deny on `~/Library/Keychains` is what keeps items unreadable.

use std::io::Read;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::host::{
    assert_absent, assert_line, assert_no_line_starting, assert_no_secret, both, kill_all, lines,
    secret_files, show, shq, shq_path, snapshot, stdout, tcp_listener, tcp_received, tool, unique,
    unix_listener, unix_received, SocketFile, PY_UNIX_CONNECT,
};
use crate::require_sandbox;
use crate::scenarios;
use crate::util::{self, Runner, World, SECRET};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// How long one sandboxed run may take before it is killed (a hung `open`
/// or keychain prompt must fail the test, not the CI job).
const LIMIT: Duration = Duration::from_secs(90);

/// How long a host listener waits for a connection that may still be in
/// flight once the sandboxed command has exited.
const LISTEN_GRACE: Duration = Duration::from_millis(500);

/// The identity git needs to commit, in every run that commits.
const GIT_IDENTITY: &[(&str, &str)] = &[
    ("GIT_AUTHOR_NAME", "t"),
    ("GIT_AUTHOR_EMAIL", "t@example.invalid"),
    ("GIT_COMMITTER_NAME", "t"),
    ("GIT_COMMITTER_EMAIL", "t@example.invalid"),
];

/// sbx as the macOS suite starts it: the world's isolated environment plus
/// the host's `TMPDIR`, system tools by their full paths, and every run killed
/// after [`LIMIT`].
struct Seatbelt;

impl Runner for Seatbelt {
    const SH: &'static str = "/bin/sh";
    const GIT: &'static str = "/usr/bin/git";
    const LIMIT: Duration = LIMIT;
    const LISTEN_GRACE: Duration = LISTEN_GRACE;

    /// `sbx` in the world's isolated environment, plus the host's `TMPDIR`:
    /// on macOS it is the per-user `/var/folders/.../T`, which sbx makes
    /// writable and which the xcrun shims (`/usr/bin/git`,
    /// `/usr/bin/python3`) use.
    fn sbx_cmd(&self, world: &World) -> Command {
        let mut cmd = world.sbx_std();
        if let Some(t) = std::env::var_os("TMPDIR") {
            cmd.env("TMPDIR", t);
        }
        cmd
    }

    fn output(&self, cmd: Command) -> Output {
        output_within(cmd, LIMIT, false)
    }
}

/// Run `cmd` with stdout and stderr captured, for at most `limit` (then its
/// whole process group is killed). With `hold_stdin` its stdin is a pipe
/// kept open until it exits (for `script`, which ends early on EOF); else
/// `/dev/null`. A leftover process still holding the pipes cannot hang the
/// test: what arrived within a few seconds of the exit is what counts.
fn output_within(mut cmd: Command, limit: Duration, hold_stdin: bool) -> Output {
    cmd.process_group(0)
        .stdin(if hold_stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stdin = child.stdin.take();
    let reader = |mut r: Box<dyn Read + Send>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            let _ = tx.send(buf);
        });
        rx
    };
    let out_rx = reader(Box::new(child.stdout.take().unwrap()));
    let err_rx = reader(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            eprintln!("timed out after {limit:?}: killing the process group");
            kill_group(child.id());
            break child.wait().unwrap();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    drop(stdin);
    let grace = Duration::from_secs(5);
    Output {
        status,
        stdout: out_rx.recv_timeout(grace).unwrap_or_default(),
        stderr: err_rx.recv_timeout(grace).unwrap_or_default(),
    }
}

/// SIGKILL a process group.
fn kill_group(pgid: u32) {
    let _ = Command::new("/bin/sh")
        .args(["-c", &format!("kill -9 -- -{pgid}")])
        .stderr(Stdio::null())
        .status();
}

/// A host command (not sandboxed) with a time limit.
fn host(program: &str, args: &[&str], limit: Duration) -> Output {
    let mut cmd = Command::new(program);
    cmd.args(args);
    let out = output_within(cmd, limit, false);
    show(&format!("host: {program} {args:?}"), &out);
    out
}

/// Whether checks that touch the user's session (apps, keychain,
/// pasteboard) may run: on CI, or when asked for.
fn intrusive_ok(what: &str) -> bool {
    let on = std::env::var_os("CI").is_some_and(|v| v == "true")
        || std::env::var_os("SBX_TEST_INTRUSIVE").is_some_and(|v| v == "1");
    if !on {
        eprintln!("skipped: {what} changes the user's session; set SBX_TEST_INTRUSIVE=1 to run it outside CI");
    }
    on
}

/// Say loudly that part of a test could not run, and why.
fn loud_skip(what: &str, why: &str) {
    eprintln!("!!!!!!!! sbx macOS suite: SKIPPED {what}: {why} !!!!!!!!");
}

/// The system Python (the xcrun shim; never a pyenv shim on PATH, which
/// needs the real HOME).
const PYTHON: &str = "/usr/bin/python3";

/// PIDs of host processes named exactly `name`.
fn pgrep_exact(name: &str) -> Vec<u32> {
    let out = Command::new("pgrep").args(["-x", name]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// PIDs of host processes whose arguments contain `needle`.
fn pids_with_args(needle: &str) -> Vec<u32> {
    let out = Command::new("ps")
        .args(["-axo", "pid=,args="])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(needle))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// Host processes of the named apps that are not in `before`, waiting up to
/// `wait` for them to appear.
fn new_app_pids(names: &[&str], before: &[u32], wait: Duration) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let new: Vec<u32> = names
            .iter()
            .flat_map(|n| pgrep_exact(n))
            .filter(|p| !before.contains(p))
            .collect();
        if !new.is_empty() || start.elapsed() > wait {
            return new;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Credential directories the harness (and [`plant_keychain_file`]) plant,
/// relative to HOME.
const CREDENTIAL_DIRS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".config/gh",
    ".kube",
    ".config/gcloud",
    ".azure",
    ".password-store",
    ".local/share/keyrings",
    "Library/Keychains",
];

/// The macOS-only credential directory, planted with a fake keychain file.
fn plant_keychain_file(world: &World) {
    util::write(
        &world.home.join("Library/Keychains/login.keychain-db"),
        SECRET,
    );
}

/// Whether any file under `root` holds the secret (after the command ran).
fn files_holding_secret(root: &Path) -> Vec<PathBuf> {
    snapshot(root)
        .into_iter()
        .filter(|(_, body)| body.contains(SECRET))
        .map(|(p, _)| p)
        .collect()
}

/// Shell lines that try to reach a TCP port on loopback three ways and a
/// Unix socket two ways, then print `RAN`.
fn connect_script(port: u16, unix: &Path) -> String {
    format!(
        "/usr/bin/nc -z -w 3 127.0.0.1 {port} && echo NC-CONNECTED
         /usr/bin/curl -sS -m 5 http://127.0.0.1:{port}/ >/dev/null && echo CURL-CONNECTED
         /bin/bash -c 'echo hi-bash > /dev/tcp/127.0.0.1/{port}' && echo BASH-CONNECTED
         echo hi-nc | /usr/bin/nc -U -w 3 {u} && echo NCU-CONNECTED
         {py} -c {code} {u}
         echo RAN",
        u = shq_path(unix),
        py = PYTHON,
        code = shq(PY_UNIX_CONNECT),
    )
}

/// A keychain item planted for one test, deleted on drop.
struct KeychainItem {
    service: String,
    /// The keychain it lives in; `None`: the default (login) keychain.
    keychain: Option<PathBuf>,
    /// A keychain file this test created (deleted, and removed from the
    /// search list, on drop).
    created: bool,
}

impl Drop for KeychainItem {
    fn drop(&mut self) {
        let mut args = vec!["delete-generic-password", "-s", &self.service];
        let kc = self
            .keychain
            .as_ref()
            .map(|k| k.to_str().unwrap().to_string());
        if let Some(k) = &kc {
            args.push(k);
        }
        let _ = host("/usr/bin/security", &args, Duration::from_secs(30));
        if let (true, Some(k)) = (self.created, &kc) {
            let _ = host(
                "/usr/bin/security",
                &["delete-keychain", k],
                Duration::from_secs(30),
            );
        }
    }
}

/// `security find-generic-password -s SERVICE -w [KEYCHAIN]` as a shell line
/// printing `FOUND=<status>`.
fn find_password_line(service: &str, keychain: Option<&Path>) -> String {
    let kc = keychain.map(shq_path).unwrap_or_default();
    format!(
        "/usr/bin/security find-generic-password -s {} -w {kc} ; echo \"FOUND=$?\"",
        shq(service)
    )
}

// ---------------------------------------------------------------------------
// What is allowed
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn writes_in_project_tmp_and_tmpdir_reach_the_host() {
    require_sandbox!();
    let world = World::new();
    let tmpdir = std::env::var_os("TMPDIR").map(PathBuf::from);
    // `/tmp` is a symlink to `/private/tmp`: the write lands at the real path.
    scenarios::writes_in_project_and_tmp_reach_the_host(
        &Seatbelt,
        &world,
        Path::new("/private/tmp"),
        |out, name| {
            let tmpdir_file = tmpdir
                .as_ref()
                .map(|t| std::fs::canonicalize(t).unwrap().join(name));
            let tmpdir_body = tmpdir_file.as_ref().map(std::fs::read_to_string);
            if let Some(f) = &tmpdir_file {
                let _ = std::fs::remove_file(f);
            }
            match tmpdir_body {
                Some(body) => assert_eq!(body.unwrap(), "in-tmpdir\n", "{}", both(out)),
                None => loud_skip("the $TMPDIR write", "TMPDIR is not set in the test process"),
            }
        },
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn project_and_ordinary_home_files_are_readable() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join("notes.txt"), "project notes 123\n");
    let out = Seatbelt.run_sh(&world, "cat notes.txt; cat \"$HOME/.gitconfig\"; ls -la");
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "project notes 123");
    // Broad read: an ordinary dotfile outside the project is readable.
    assert_line(&out, "\temail = t@example.invalid");
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn system_git_init_status_and_commit_work() {
    require_sandbox!();
    let Some(git) = tool(&["/usr/bin/git"]) else {
        return;
    };
    let world = World::new();
    let out = Seatbelt.run_sh_env(
        &world,
        &format!(
            "set -e
             {git} init -q
             {git} status --short
             echo hello > README
             {git} add README
             {git} commit -q -m 'from the sandbox'
             {git} status --short
             echo DONE"
        ),
        GIT_IDENTITY,
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "DONE");
    // Host side: the repository and the commit exist.
    let log = Command::new("git")
        .args(["log", "--format=%s", "-1"])
        .current_dir(&world.project)
        .output()
        .unwrap();
    assert_eq!(stdout(&log), "from the sandbox\n", "{}", both(&log));
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn exit_code_comes_back() {
    require_sandbox!();
    scenarios::exit_code_comes_back(&Seatbelt);
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn sandbox_execs_own_exit_codes_are_the_commands_when_it_ran() {
    require_sandbox!();
    let world = World::new();
    // 65 and 71 are also what sandbox-exec exits with when it cannot apply
    // the profile or start the command: sbx checks, and passes them on.
    for code in [65, 71] {
        let out = Seatbelt.run_sh(&world, &format!("echo ran > ran-{code}; exit {code}"));
        assert_eq!(out.status.code(), Some(code), "{}", both(&out));
        assert!(world.project.join(format!("ran-{code}")).exists());
        assert!(!both(&out).contains("refused"), "{}", both(&out));
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn signals_sent_to_sbx_reach_the_command() {
    require_sandbox!();
    let world = World::new();
    // sbx stays the parent of sandbox-exec (it serves the allowlist proxy
    // and checks sandbox-exec's exit): a supervisor's SIGTERM to sbx must
    // still reach the command, which can then clean up.
    let mut child = Seatbelt.sbx_cmd(&world)
        .args(["run", "--", "/bin/sh", "-c"])
        .arg("trap 'echo term > got-term; exit 9' TERM; echo up > up; i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !world.project.join("up").exists() {
        assert!(start.elapsed() < LIMIT, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = Command::new("/bin/kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(9), "{status:?}");
    assert!(world.project.join("got-term").exists());
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn sbx_inside_sbx_runs_the_command_in_the_outer_sandbox() {
    require_sandbox!();
    let world = World::new();
    // A tool in the sandbox that runs `$SHELL -c` with SHELL=sbx starts sbx
    // again inside: the command runs in the sandbox it is already in, with
    // no warning, even with --require.
    let sbx = crate::util::sbx_path();
    let out = Seatbelt.run(
        &world,
        &[],
        &[
            sbx.to_str().unwrap(),
            "run",
            "--require",
            "--",
            "/bin/sh",
            "-c",
            "echo ran > inner-ran; echo x > \"$HOME/inner-outside\"; echo INNER-DONE",
        ],
        &[],
    );
    assert_line(&out, "INNER-DONE");
    assert!(world.project.join("inner-ran").exists(), "{}", both(&out));
    assert!(!world.home.join("inner-outside").exists(), "{}", both(&out));
    assert_absent(&out, "NOT sandboxed");
    assert_absent(&out, "refused");
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn inside_another_seatbelt_sandbox_require_refuses() {
    require_sandbox!();
    let world = World::new();
    // An agent that runs its tools in its own Seatbelt sandbox runs sbx in
    // it. Whatever macOS does with a second profile there, a command run
    // with --require is either sandboxed by sbx or not run at all.
    let outside = world.home.join("nested-outside");
    let mut cmd = world.host_cmd("/usr/bin/sandbox-exec");
    cmd.args(["-p", "(version 1)(allow default)", "--"])
        .arg(crate::util::sbx_path())
        .args(["run", "--require", "--", "/bin/sh", "-c"])
        .arg(format!(
            "echo ran > ran-marker; echo x > {} && echo WROTE",
            shq_path(&outside)
        ));
    let out = output_within(cmd, LIMIT, false);
    show("nested", &out);
    assert!(
        !outside.exists(),
        "the nested run wrote outside: {}",
        both(&out)
    );
    assert_no_line_starting(&out, "WROTE");
    let ran = world.project.join("ran-marker").exists();
    if out.status.code() == Some(125) {
        // Refused: said why, and nothing ran.
        assert!(
            both(&out).contains("Seatbelt sandbox"),
            "refused without saying why: {}",
            both(&out)
        );
        assert!(!ran, "refused, yet the command ran: {}", both(&out));
    } else {
        // macOS applied the second profile: the command ran in it, and its
        // write outside was refused.
        assert!(ran, "neither refused nor run: {}", both(&out));
        assert!(!both(&out).contains("sandbox_apply"), "{}", both(&out));
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn check_runs_the_live_self_test() {
    require_sandbox!();
    let world = World::new();
    for flags in [&[][..], &["--read-only"][..]] {
        let mut cmd = Seatbelt.sbx_cmd(&world);
        cmd.arg("check").args(flags);
        let out = output_within(cmd, LIMIT, false);
        show("check", &out);
        assert!(out.status.success(), "{flags:?}: {}", both(&out));
        for test in [
            "write outside the writable roots",
            "read of a credential",
            "network to the host's loopback",
        ] {
            assert_line(&out, &format!("test:     {test}: enforced"));
        }
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn stdin_reaches_the_command() {
    require_sandbox!();
    scenarios::stdin_reaches_the_command(&Seatbelt);
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn user_lookup_works() {
    require_sandbox!();
    let world = World::new();
    let expected = stdout(&Command::new("id").arg("-un").output().unwrap());
    let expected = expected.trim();
    assert!(!expected.is_empty());
    let out = Seatbelt.run_sh(
        &world,
        "echo \"id=$(id -un)\"; echo \"whoami=$(whoami)\"; echo \"tilde=$(cd ~ && pwd)\"",
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, &format!("id={expected}"));
    assert_line(&out, &format!("whoami={expected}"));
    assert_line(&out, &format!("tilde={}", world.home.display()));
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn job_control_signals_work_inside() {
    require_sandbox!();
    let world = World::new();
    let start = Instant::now();
    let out = Seatbelt.run(
        &world,
        &[],
        &[
            "/bin/bash",
            "-c",
            "sleep 5 & kill %1 && echo KILLED; wait; echo WAITED",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "KILLED");
    assert_line(&out, "WAITED");
    assert!(
        start.elapsed() < Duration::from_secs(4),
        "the killed job ran to its end: {:?}\n{}",
        start.elapsed(),
        both(&out)
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn python_multiprocessing_lock_works() {
    require_sandbox!();
    let Some(py) = tool(&[PYTHON]) else {
        return;
    };
    let world = World::new();
    let out = Seatbelt.run(
        &world,
        &[],
        &[
            py,
            "-c",
            "import multiprocessing as m; l = m.Lock(); l.acquire(); l.release(); print('LOCK-OK')",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "LOCK-OK");
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn pty_and_raw_mode_work() {
    require_sandbox!();
    let Some(script) = tool(&["/usr/bin/script"]) else {
        return;
    };
    let world = World::new();
    let mut cmd = Seatbelt.sbx_cmd(&world);
    cmd.args([
        "run",
        "--",
        script,
        "-q",
        "/dev/null",
        "/bin/bash",
        "-c",
        "[ -t 0 ] && echo IS-TTY; stty raw -echo && G=$(stty -g) && echo \"STTY-OK $G\"",
    ]);
    // `script` reads its stdin: keep it open (and empty) until it is done.
    let out = output_within(cmd, LIMIT, true);
    show("script", &out);
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "IS-TTY");
    assert!(
        lines(&out).iter().any(|l| l.starts_with("STTY-OK ")),
        "stty could not set raw mode on the pty:\n{}",
        both(&out)
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn awkward_project_path_works() {
    require_sandbox!();
    let world = World::new();
    // Space, quote, backslash, parentheses, semicolon, non-ASCII: proves the
    // paths reach the profile as parameters, not as text.
    let project = world.home.join("p q\"r\\s (x);é");
    std::fs::create_dir_all(&project).unwrap();
    let project = std::fs::canonicalize(project).unwrap();
    let mut cmd = Seatbelt.sbx_cmd(&world);
    cmd.current_dir(&project).args([
        "run",
        "--",
        "/bin/sh",
        "-c",
        "echo inside > inside.txt; echo outside > ../outside.txt; pwd",
    ]);
    let out = output_within(cmd, LIMIT, false);
    show("awkward", &out);
    assert_eq!(
        std::fs::read_to_string(project.join("inside.txt")).unwrap_or_default(),
        "inside\n",
        "{}",
        both(&out)
    );
    assert!(!world.home.join("outside.txt").exists(), "{}", both(&out));
}

// ---------------------------------------------------------------------------
// Writes outside the writable roots
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn writes_outside_writable_roots_are_refused() {
    require_sandbox!();
    let world = World::new();
    let shared = PathBuf::from(format!("/Users/Shared/sbx-test-{}", unique(2)));
    scenarios::writes_outside_writable_roots_are_refused(
        &Seatbelt,
        &world,
        &format!(
            "echo pwn > \"$HOME/.zshrc\"
             echo pwn > {shared}",
            shared = shq_path(&shared)
        ),
        |out| {
            let shared_exists = shared.exists();
            let _ = std::fs::remove_file(&shared);
            assert!(!shared_exists, "/Users/Shared was written:\n{}", both(out));
            assert!(!world.home.join(".zshrc").exists(), "{}", both(out));
        },
    );
}

// ---------------------------------------------------------------------------
// Credentials
// ---------------------------------------------------------------------------

/// A script that tries `cat`, `ls` and `stat` on each path; a marker line
/// per success (`CAT-OK path`, `LS-OK path`, `STAT-OK path`).
fn probe_each(paths: &[String]) -> String {
    let mut s = String::new();
    for p in paths {
        let q = shq(p);
        s.push_str(&format!(
            "cat {q} && echo \"CAT-OK {p}\"
             ls -la {q} && echo \"LS-OK {p}\"
             stat {q} && echo \"STAT-OK {p}\"
             echo \"attempted {p}\"\n"
        ));
    }
    s
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn credentials_are_unreadable_directly() {
    require_sandbox!();
    let world = World::new();
    plant_keychain_file(&world);
    let mut paths: Vec<String> = secret_files(&world)
        .iter()
        .map(|f| world.home.join(f).to_str().unwrap().to_string())
        .collect();
    // The credential directories themselves.
    for dir in CREDENTIAL_DIRS {
        assert!(
            world.home.join(dir).is_dir(),
            "the harness did not plant {dir}"
        );
        paths.push(world.home.join(dir).to_str().unwrap().to_string());
    }
    let control = world.home.join(".bashrc").to_str().unwrap().to_string();
    let mut script = probe_each(&paths);
    script.push_str(&probe_each(std::slice::from_ref(&control)));
    // Listing the key directory must not even give the key's name, and
    // searching the whole home must not leak.
    script.push_str(
        "ls -a \"$HOME/.ssh\" 2>/dev/null | sed 's/^/SSH-LIST /'
         grep -r . \"$HOME\" 2>&1 ; ls -laR \"$HOME\" 2>&1\n",
    );
    let out = Seatbelt.run_sh(&world, &script);
    assert_no_secret(&out);
    for p in &paths {
        assert_line(&out, &format!("attempted {p}"));
        for op in ["CAT", "LS", "STAT"] {
            assert_no_line_starting(&out, &format!("{op}-OK {p}"));
        }
    }
    assert_no_line_starting(&out, "SSH-LIST");
    // Positive control: an ordinary file in the same home, all three ways.
    assert_line(&out, "# rc");
    for op in ["CAT", "LS", "STAT"] {
        assert_line(&out, &format!("{op}-OK {control}"));
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn credential_case_variants_are_unreadable() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join(".env"), &format!("TOKEN={SECRET}\n"));
    // A file whose own name is in mixed case: only the regex's character
    // classes can match it.
    util::write(
        &world.project.join("sub/.Env.Local"),
        &format!("TOKEN={SECRET}\n"),
    );
    let insensitive = world.home.join(".SSH/id_ed25519").exists();
    if !insensitive {
        loud_skip(
            "the home case variants",
            "this volume is case-sensitive, so ~/.SSH does not exist and proves nothing",
        );
    }
    let out = Seatbelt.run_sh(
        &world,
        "cat \"$HOME/.SSH/id_ed25519\" \"$HOME/.Ssh/ID_ED25519\" \"$HOME/.AWS/credentials\" \"$HOME/.NETRC\" \"$HOME/.Config/GH/hosts.yml\"
         ls -la \"$HOME/.SSH\" \"$HOME/.AWS\"
         cat .ENV .Env sub/.Env.Local sub/.ENV.LOCAL
         cat \"$HOME/.BASHRC\"
         echo RAN",
    );
    assert_no_secret(&out);
    assert_line(&out, "RAN");
    if insensitive {
        // Positive control: the case-folded spelling of an ordinary file reads.
        assert_line(&out, "# rc");
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn credentials_are_unreadable_through_a_project_symlink() {
    require_sandbox!();
    let world = World::new();
    plant_keychain_file(&world);
    util::write(&world.project.join(".env"), &format!("TOKEN={SECRET}\n"));
    // The project's own `.env` under an innocent name.
    symlink(".env", world.project.join("innocent.txt")).unwrap();
    scenarios::credentials_are_unreadable_through_a_project_symlink(
        &Seatbelt,
        &world,
        &["innocent.txt"],
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn credentials_are_unreadable_through_the_data_volume_spelling() {
    require_sandbox!();
    let world = World::new();
    // `/Users` is a firmlink to `/System/Volumes/Data/Users`: a second
    // spelling of every file in a home directory.
    let data = |p: &Path| PathBuf::from(format!("/System/Volumes/Data{}", p.display()));
    if !data(&world.home.join(".bashrc")).is_file() {
        loud_skip(
            "the /System/Volumes/Data spelling",
            &format!(
                "{} has no such second spelling on this host",
                world.home.display()
            ),
        );
        return;
    }
    let mut script = String::new();
    for f in secret_files(&world) {
        script.push_str(&format!("cat {}\n", shq_path(&data(&world.home.join(f)))));
    }
    script.push_str(&format!(
        "ls -la {}\ncat {}\n",
        shq_path(&data(&world.home.join(".ssh"))),
        shq_path(&data(&world.home.join(".bashrc")))
    ));
    let out = Seatbelt.run_sh(&world, &script);
    assert_no_secret(&out);
    // Positive control: the same spelling of an ordinary file reads.
    assert_line(&out, "# rc");
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn credentials_cannot_be_linked_cloned_moved_or_copied_into_the_project() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join(".env"), &format!("TOKEN={SECRET}\n"));
    let out = Seatbelt.run_sh(
        &world,
        "ln \"$HOME/.ssh/id_ed25519\" ./hard-ssh ; cat ./hard-ssh
         ln \"$HOME/.netrc\" ./hard-netrc ; cat ./hard-netrc
         ln .env ./hard-env ; cat ./hard-env
         cp -c \"$HOME/.aws/credentials\" ./clone-aws ; cat ./clone-aws
         cp -c .env ./clone-env ; cat ./clone-env
         cp \"$HOME/.pypirc\" ./copied ; cat ./copied
         cp -R \"$HOME/.ssh\" ./ssh-copy ; cat ./ssh-copy/*
         mv \"$HOME/.aws/credentials\" ./moved ; cat ./moved
         mv \"$HOME/.kube\" ./kube-dir ; cat ./kube-dir/config
         echo ok > control.txt",
    );
    assert_no_secret(&out);
    // Host side: the originals are intact and nothing in the project but
    // `.env` itself holds the secret.
    for f in [
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".kube/config",
        ".netrc",
    ] {
        assert_eq!(
            std::fs::read_to_string(world.home.join(f)).unwrap(),
            SECRET,
            "{f}\n{}",
            both(&out)
        );
    }
    assert_eq!(
        files_holding_secret(&world.project),
        vec![PathBuf::from(".env")],
        "{}",
        both(&out)
    );
    assert!(!world.project.join("hard-env").exists(), "{}", both(&out));
    assert!(!world.project.join("clone-env").exists(), "{}", both(&out));
    // Positive control: the project is writable. (That hard links and
    // clones of ordinary files work is the next test.)
    assert!(
        world.project.join("control.txt").is_file(),
        "{}",
        both(&out)
    );
}

/// The control for the refusals above: `file-link` and `file-clone` are
/// operations of their own (not part of `file-write*`), and sbx must not
/// refuse them for ordinary files (git clone --local, pnpm and ccache use
/// hard links).
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn hard_links_and_clones_of_ordinary_files_work() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join("plain.txt"), "plain\n");
    let out = Seatbelt.run_sh(
        &world,
        "ln plain.txt plain-hard && echo HARDLINK-OK
         cp -c plain.txt plain-clone && echo CLONE-OK",
    );
    assert_line(&out, "HARDLINK-OK");
    assert_eq!(
        std::fs::metadata(world.project.join("plain.txt"))
            .unwrap()
            .nlink(),
        2,
        "{}",
        both(&out)
    );
    assert_line(&out, "CLONE-OK");
    assert_eq!(
        std::fs::read_to_string(world.project.join("plain-clone")).unwrap_or_default(),
        "plain\n",
        "{}",
        both(&out)
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn env_files_are_unreadable_and_unmovable_but_templates_are_readable() {
    require_sandbox!();
    let world = World::new();
    let secret_envs = [".env", "sub/.env.local", "a/b/c/d/.env.production"];
    for f in secret_envs {
        util::write(&world.project.join(f), &format!("TOKEN={SECRET}\n"));
    }
    util::write(&world.project.join(".env.example"), "TOKEN=example-value\n");
    util::write(&world.project.join(".envrc.txt"), "not an env file\n");
    let out = Seatbelt.run_sh(
        &world,
        "cat .env sub/.env.local a/b/c/d/.env.production
         grep -r TOKEN . 2>&1
         ls -la . sub 2>&1
         mv .env moved-env ; cat moved-env
         mv sub/.env.local sub/renamed ; cat sub/renamed
         mv sub sub2 ; cat sub2/.env.local sub/.env.local
         cat .env.example
         cat .envrc.txt
         echo ok > control.txt",
    );
    assert_no_secret(&out);
    // Positive controls: the template and a look-alike name read.
    assert_line(&out, "TOKEN=example-value");
    assert_line(&out, "not an env file");
    // Host side: `.env` was not renamed away.
    assert_eq!(
        std::fs::read_to_string(world.project.join(".env")).unwrap_or_default(),
        format!("TOKEN={SECRET}\n"),
        "{}",
        both(&out)
    );
    assert!(!world.project.join("moved-env").exists(), "{}", both(&out));
    assert!(
        !world.project.join("sub/renamed").exists(),
        "{}",
        both(&out)
    );
    // The only files holding the secret are `.env` files (the directory
    // `sub` may have been renamed: the any-depth rule still covers it).
    for p in files_holding_secret(&world.project) {
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        assert!(
            name == ".env" || name.starts_with(".env."),
            "{} holds the secret under a name the rule does not cover\n{}",
            p.display(),
            both(&out)
        );
    }
    assert!(
        world.project.join("control.txt").is_file(),
        "{}",
        both(&out)
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn symlinked_credential_dir_is_denied_at_both_spellings() {
    require_sandbox!();
    scenarios::symlinked_credential_dir_is_unreadable_at_both_spellings(&Seatbelt);
}

// ---------------------------------------------------------------------------
// Files that run later
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn runs_later_files_are_read_only() {
    require_sandbox!();
    scenarios::runs_later_files_are_read_only(&Seatbelt);
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn missing_runs_later_paths_cannot_be_created() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    std::fs::remove_dir_all(world.project.join(".git/hooks")).unwrap();
    let out = Seatbelt.run_sh(
        &world,
        "mkdir -p .git/hooks ; touch .git/hooks/pre-push
         printf '#!/bin/sh\\ntouch \"$HOME/SBX_PWN\"\\n' > .git/hooks/x
         chmod +x .git/hooks/x
         mkdir .git/hooks/sub
         echo 'touch \"$HOME/SBX_PWN\"' > .envrc
         mkdir -p .vscode ; echo '{}' > .vscode/tasks.json
         mkdir -p .claude ; echo '{}' > .claude/settings.json
         echo '{}' > .mcp.json
         echo '[sandbox]' > .sbx.toml
         echo ok > .git/control
         echo ok > control.txt",
    );
    let hooks = world.project.join(".git/hooks");
    let hook_entries: Vec<_> = std::fs::read_dir(&hooks)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        hook_entries.is_empty(),
        "hooks were created: {hook_entries:?}\n{}",
        both(&out)
    );
    for p in [".envrc", ".vscode", ".claude", ".mcp.json", ".sbx.toml"] {
        assert!(
            !world.project.join(p).exists(),
            "{p} was created\n{}",
            both(&out)
        );
    }
    // Positive controls: .git itself and the working tree are writable.
    assert!(
        world.project.join(".git/control").is_file(),
        "{}",
        both(&out)
    );
    assert!(
        world.project.join("control.txt").is_file(),
        "{}",
        both(&out)
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn project_root_cannot_be_moved_away() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join(".env"), &format!("TOKEN={SECRET}\n"));
    let target = PathBuf::from(format!("/private/tmp/sbx-moved-{}", unique(3)));
    let out = Seatbelt.run_sh(
        &world,
        &format!(
            "mv \"$PWD\" {t} ; cat {t}/.env ; echo ok > control.txt",
            t = shq_path(&target)
        ),
    );
    let moved = target.exists();
    if moved {
        // Put it back so the world cleans up.
        let _ = std::fs::rename(&target, &world.project);
    }
    assert!(!moved, "the project root was moved:\n{}", both(&out));
    assert_no_secret(&out);
    assert!(
        world.project.join("control.txt").is_file(),
        "{}",
        both(&out)
    );
}

// ---------------------------------------------------------------------------
// Services that act outside the sandbox
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn open_cannot_launch_anything_outside() {
    require_sandbox!();
    let Some(open) = tool(&["/usr/bin/open"]) else {
        return;
    };
    let world = World::new();
    let apps = ["TextEdit", "Calculator", "Terminal"];
    let before: Vec<u32> = apps.iter().flat_map(|a| pgrep_exact(a)).collect();
    // A `.command` file opens in Terminal, outside the sandbox: if it ran,
    // the marker (outside every writable root) would appear.
    let marker = world.root.join("opened-outside");
    let command_file = PathBuf::from(format!("/private/tmp/sbx-{}.command", unique(4)));
    std::fs::write(
        &command_file,
        format!("#!/bin/sh\ntouch {}\n", shq_path(&marker)),
    )
    .unwrap();
    std::fs::set_permissions(&command_file, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Seatbelt.run_sh(
        &world,
        &format!(
            "{open} -a TextEdit ; echo \"textedit=$?\"
             {open} -g -a Calculator ; echo \"calculator=$?\"
             {open} {cf} ; echo \"command-file=$?\"
             {open} . ; echo \"finder=$?\"
             echo RAN",
            cf = shq_path(&command_file)
        ),
    );
    let new = new_app_pids(&apps, &before, Duration::from_secs(5));
    kill_all(&new);
    let _ = std::fs::remove_file(&command_file);
    assert_line(&out, "RAN");
    assert!(new.is_empty(), "apps started: {new:?}\n{}", both(&out));
    assert!(
        !marker.exists(),
        "the .command file ran outside:\n{}",
        both(&out)
    );
    for l in ["textedit=0", "calculator=0", "command-file=0", "finder=0"] {
        assert_no_line_starting(&out, l);
    }
    // Positive control: the same `open` on the host does start the app, so
    // its absence above is the sandbox's doing.
    if intrusive_ok("launching Calculator on the host") {
        let before: Vec<u32> = pgrep_exact("Calculator");
        let host_out = host(open, &["-g", "-a", "Calculator"], Duration::from_secs(30));
        let started = new_app_pids(&["Calculator"], &before, Duration::from_secs(15));
        kill_all(&started);
        if started.is_empty() {
            loud_skip(
                "the host control of `open`",
                &format!(
                    "this runner cannot launch apps at all, so the refusal above proves less\n{}",
                    both(&host_out)
                ),
            );
        }
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn osascript_cannot_drive_other_apps() {
    require_sandbox!();
    let Some(osa) = tool(&["/usr/bin/osascript"]) else {
        return;
    };
    let world = World::new();
    let before = pgrep_exact("Terminal");
    let marker = world.root.join("terminal-ran");
    let out = Seatbelt.run_sh(
        &world,
        &format!(
            "{osa} -e 'return \"OSA-\" & \"ALIVE\"'
             {osa} -e 'tell application \"Finder\" to get name' ; echo \"finder=$?\"
             {osa} -e {terminal} ; echo \"terminal=$?\"
             echo RAN",
            terminal = shq(&format!(
                "tell application \"Terminal\" to do script \"touch {}\"",
                marker.display()
            ))
        ),
    );
    std::thread::sleep(Duration::from_secs(2));
    let new = new_app_pids(&["Terminal"], &before, Duration::from_secs(1));
    kill_all(&new);
    assert_line(&out, "RAN");
    assert!(
        !lines(&out).iter().any(|l| l == "Finder"),
        "Finder answered an Apple Event:\n{}",
        both(&out)
    );
    assert_no_line_starting(&out, "finder=0");
    assert_no_line_starting(&out, "terminal=0");
    assert!(!marker.exists(), "Terminal ran a command:\n{}", both(&out));
    assert!(new.is_empty(), "Terminal started: {new:?}\n{}", both(&out));
    // The control that osascript itself runs in the sandbox (so the refusals
    // are the Apple Events'): reported, not required.
    if !lines(&out).iter().any(|l| l == "OSA-ALIVE") {
        loud_skip(
            "the osascript control",
            &format!(
                "osascript does not run at all in the sandbox, so the refusals above prove less\n{}",
                both(&out)
            ),
        );
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn login_keychain_items_are_unreadable() {
    require_sandbox!();
    if tool(&["/usr/bin/security"]).is_none()
        || !intrusive_ok("adding an item to the login keychain")
    {
        return;
    }
    let world = World::new();
    let service = format!("sbx-test-{}", unique(5));
    let added = host(
        "/usr/bin/security",
        &[
            "add-generic-password",
            "-a",
            "sbx",
            "-s",
            &service,
            "-w",
            SECRET,
        ],
        Duration::from_secs(30),
    );
    if !added.status.success() {
        loud_skip(
            "the login keychain check",
            &format!("the runner has no usable login keychain\n{}", both(&added)),
        );
        return;
    }
    let _item = KeychainItem {
        service: service.clone(),
        keychain: None,
        created: false,
    };
    // Host control: the item reads outside the sandbox.
    let found = host(
        "/usr/bin/security",
        &["find-generic-password", "-s", &service, "-w"],
        Duration::from_secs(30),
    );
    if !stdout(&found).contains(SECRET) {
        loud_skip(
            "the login keychain check",
            &format!(
                "the item does not read even outside the sandbox\n{}",
                both(&found)
            ),
        );
        return;
    }
    // The real login keychain file lies outside the test's fake HOME, so no
    // file rule covers it here: only SecurityServer being out of reach does.
    let default_kc = stdout(&host(
        "/usr/bin/security",
        &["default-keychain"],
        Duration::from_secs(30),
    ))
    .trim()
    .trim_matches('"')
    .to_string();
    let mut script = find_password_line(&service, None);
    if !default_kc.is_empty() {
        script.push('\n');
        script.push_str(&find_password_line(&service, Some(Path::new(&default_kc))));
    }
    script.push_str("\necho RAN");
    let out = Seatbelt.run_sh(&world, &script);
    assert_line(&out, "RAN");
    assert_no_secret(&out);
    assert_no_line_starting(&out, "FOUND=0");
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn keychain_in_home_is_unreadable_even_with_network_allow() {
    require_sandbox!();
    if tool(&["/usr/bin/security"]).is_none()
        || !intrusive_ok("creating a keychain (it joins the search list)")
    {
        return;
    }
    let world = World::new();
    let dir = world.home.join("Library/Keychains");
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("sbx-test.keychain-db");
    let kc_s = kc.to_str().unwrap();
    let service = format!("sbx-test-{}", unique(6));
    let security = |args: &[&str]| host("/usr/bin/security", args, Duration::from_secs(30));
    let created = security(&["create-keychain", "-p", "pw", kc_s]);
    if !created.status.success() {
        loud_skip(
            "the home keychain check",
            &format!("cannot create a keychain here\n{}", both(&created)),
        );
        return;
    }
    let _item = KeychainItem {
        service: service.clone(),
        keychain: Some(kc.clone()),
        created: true,
    };
    let _ = security(&["unlock-keychain", "-p", "pw", kc_s]);
    let added = security(&[
        "add-generic-password",
        "-a",
        "sbx",
        "-s",
        &service,
        "-w",
        SECRET,
        kc_s,
    ]);
    let found = security(&["find-generic-password", "-s", &service, "-w", kc_s]);
    if !added.status.success() || !stdout(&found).contains(SECRET) {
        loud_skip(
            "the home keychain check",
            &format!(
                "the item does not read even outside the sandbox\n{}\n{}",
                both(&added),
                both(&found)
            ),
        );
        return;
    }
    let script = format!(
        "{}\ncat {} >/dev/null && echo CAT-OK\necho RAN",
        find_password_line(&service, Some(&kc)),
        shq_path(&kc)
    );
    // `network = "allow"` grants SecurityServer (TLS needs it): the file
    // rule on ~/Library/Keychains must hold on its own. Deny mode as well.
    for flags in [&["--network", "allow"][..], &[][..]] {
        let out = Seatbelt.run_sh_flags(&world, flags, &script);
        assert_line(&out, "RAN");
        assert_no_secret(&out);
        assert_no_line_starting(&out, "FOUND=0");
        assert_no_line_starting(&out, "CAT-OK");
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn pasteboard_is_out_of_reach() {
    require_sandbox!();
    if tool(&["/usr/bin/pbcopy"]).is_none() || !intrusive_ok("using the pasteboard") {
        return;
    }
    let world = World::new();
    let clip = format!("SBX-CLIP-{}", unique(7));
    let mut copy = Command::new("/usr/bin/pbcopy")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut copy.stdin.take().unwrap(), clip.as_bytes()).unwrap();
    let _ = copy.wait();
    let pasted = host("/usr/bin/pbpaste", &[], Duration::from_secs(30));
    if stdout(&pasted) != clip {
        loud_skip(
            "the pasteboard check",
            &format!(
                "the pasteboard does not work on this host\n{}",
                both(&pasted)
            ),
        );
        return;
    }
    let out = Seatbelt.run_sh(
        &world,
        "/usr/bin/pbpaste ; echo ; echo sbx-wrote-this | /usr/bin/pbcopy ; echo RAN",
    );
    let after = stdout(&host("/usr/bin/pbpaste", &[], Duration::from_secs(30)));
    assert_line(&out, "RAN");
    assert_absent(&out, &clip);
    assert_eq!(
        after,
        clip,
        "the sandbox wrote the pasteboard:\n{}",
        both(&out)
    );
}

// ---------------------------------------------------------------------------
// Processes
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn host_processes_cannot_be_signalled() {
    require_sandbox!();
    let world = World::new();
    let mut victim = Command::new("sleep")
        .arg(unique(60))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = victim.id();
    let out = Seatbelt.run_sh(
        &world,
        &format!(
            "kill {pid} ; echo \"kill=$?\"
             kill -9 {pid} ; echo \"kill9=$?\"
             kill -0 {pid} ; echo \"kill0=$?\"
             sleep 30 & O=$!
             kill $O && echo OWN-KILL-OK"
        ),
    );
    std::thread::sleep(Duration::from_millis(200));
    let alive = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(
        alive,
        "a host process was killed from inside:\n{}",
        both(&out)
    );
    assert_no_line_starting(&out, "kill=0");
    assert_no_line_starting(&out, "kill9=0");
    // Positive control: signals within the sandbox work.
    assert_line(&out, "OWN-KILL-OK");
    // Whether `kill -0` (existence only) is refused too is recorded, not required.
    if lines(&out).iter().any(|l| l == "kill0=0") {
        eprintln!(
            "note: kill -0 of a host process succeeds inside the sandbox (existence is visible)"
        );
    }
}

/// Nothing ties a background job to sbx on macOS (sbx becomes sandbox-exec,
/// which becomes the command): a job may outlive it, but stays sandboxed.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn background_job_that_outlives_sbx_stays_sandboxed() {
    require_sandbox!();
    let world = World::new();
    let duration = unique(1);
    let out = Seatbelt.run_sh(
        &world,
        &format!(
            "(sleep {duration}; echo late > \"$HOME/late-pwn\"; echo late > late-ok.txt) >/dev/null 2>&1 &
             echo STARTED"
        ),
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "STARTED");
    let ok = world.project.join("late-ok.txt");
    let start = Instant::now();
    while !ok.exists() && start.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(300));
    kill_all(&pids_with_args(&format!("sleep {duration}")));
    // Positive control: the job did run after sbx had exited.
    assert!(ok.exists(), "the background job never ran");
    assert!(
        !world.home.join("late-pwn").exists(),
        "a job that outlived sbx wrote outside the sandbox"
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn credential_env_vars_are_removed() {
    require_sandbox!();
    scenarios::credential_env_vars_are_removed(&Seatbelt, &[("SSH_AUTH_SOCK", SECRET)], &[]);
}

// ---------------------------------------------------------------------------
// Network
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn network_deny_refuses_dns_loopback_and_unix_sockets() {
    require_sandbox!();
    let world = World::new();
    let (tcp, port) = tcp_listener();
    let sock = SocketFile::tmp(8);
    // A socket in the project too, when the path fits in `sun_path`.
    let in_project = world.project.join("p.sock");
    let project_listener = (in_project.as_os_str().len() < 100).then(|| unix_listener(&in_project));
    let script = format!(
        "/usr/bin/curl -sS -m 20 https://example.com/ && echo CURL-INTERNET
         {py} -c 'import socket; socket.getaddrinfo(\"example.com\", 443); print(\"RESOLVED\")'
         {connect}
         echo hi | /usr/bin/nc -U -w 3 {p} && echo PROJECT-SOCK-CONNECTED",
        py = PYTHON,
        connect = connect_script(port, &sock.path),
        p = shq_path(&in_project),
    );
    let out = Seatbelt.run_sh(&world, &script);
    assert_line(&out, "RAN");
    let got = tcp_received(&tcp, LISTEN_GRACE);
    assert!(
        got.is_none(),
        "the host TCP listener received {got:?}:\n{}",
        both(&out)
    );
    let got = unix_received(&sock.listener, LISTEN_GRACE);
    assert!(
        got.is_none(),
        "the /tmp socket received {got:?}:\n{}",
        both(&out)
    );
    let got = project_listener
        .as_ref()
        .and_then(|l| unix_received(l, LISTEN_GRACE));
    assert!(
        got.is_none(),
        "the project socket received {got:?}:\n{}",
        both(&out)
    );
    for l in [
        "CURL-INTERNET",
        "RESOLVED",
        "NC-CONNECTED",
        "CURL-CONNECTED",
        "BASH-CONNECTED",
        "NCU-CONNECTED",
        "CONNECTED",
        "PROJECT-SOCK-CONNECTED",
    ] {
        assert_no_line_starting(&out, l);
    }
    // Positive control: the same probes, run on the host, reach both listeners.
    let host_out = host("/bin/sh", &["-c", &connect_script(port, &sock.path)], LIMIT);
    assert!(
        tcp_received(&tcp, LISTEN_GRACE).is_some(),
        "host control: {}",
        both(&host_out)
    );
    assert!(
        unix_received(&sock.listener, LISTEN_GRACE).is_some(),
        "host control: {}",
        both(&host_out)
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn network_allow_reaches_the_internet_and_loopback_but_not_unix_sockets() {
    require_sandbox!();
    let world = World::new();
    let (tcp, port) = tcp_listener();
    let sock = SocketFile::tmp(9);
    let out = Seatbelt.run_sh_flags(
        &world,
        &["--network", "allow"],
        &format!(
            "/usr/bin/curl -sS -m 30 -o /dev/null https://example.com/ && echo CURL-INTERNET
             echo hi-loopback | /usr/bin/nc -w 3 127.0.0.1 {port} && echo LOOPBACK-CONNECTED
             echo hi | /usr/bin/nc -U -w 3 {u} && echo NCU-CONNECTED
             {py} -c {code} {u}
             echo RAN",
            u = shq_path(&sock.path),
            py = PYTHON,
            code = shq(PY_UNIX_CONNECT),
        ),
    );
    assert_line(&out, "RAN");
    // Loopback TCP is reachable (`remote ip "*:*"`): host-side evidence.
    let got = tcp_received(&tcp, LISTEN_GRACE);
    assert!(
        got.as_deref()
            .is_some_and(|b| b.starts_with(b"hi-loopback")),
        "the host TCP listener received {got:?}:\n{}",
        both(&out)
    );
    // Unix sockets stay shut: `remote ip` does not cover them.
    let got = unix_received(&sock.listener, LISTEN_GRACE);
    assert!(
        got.is_none(),
        "the /tmp socket received {got:?}:\n{}",
        both(&out)
    );
    assert_no_line_starting(&out, "NCU-CONNECTED");
    assert_no_line_starting(&out, "CONNECTED");
    // The internet, if the host has it (GitHub runners do).
    let host_curl = host(
        "/usr/bin/curl",
        &["-sS", "-m", "30", "-o", "/dev/null", "https://example.com/"],
        LIMIT,
    );
    if host_curl.status.success() {
        assert_line(&out, "CURL-INTERNET");
    } else {
        loud_skip(
            "the internet half of network allow",
            &format!(
                "the host itself cannot reach example.com\n{}",
                both(&host_curl)
            ),
        );
    }
}

/// A program on the host's PATH (the CI job installs node and go); missing:
/// skip, or fail when CI requires the sandbox tests to run.
fn on_path(name: &str) -> Option<PathBuf> {
    let found = which::which(name).ok();
    if found.is_none() {
        if std::env::var_os("SBX_TEST_REQUIRE_SANDBOX").is_some_and(|v| v == "1") {
            panic!("SBX_TEST_REQUIRE_SANDBOX=1 but {name} is not on PATH");
        }
        loud_skip(name, "not on PATH");
    }
    found
}

/// A Go program that fetches a URL and prints `STATUS <code>` or `ERR ...`.
const GO_GET: &str = r#"package main

import (
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	c := &http.Client{Timeout: 30 * time.Second}
	r, err := c.Get(os.Args[1])
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Println("STATUS", r.StatusCode)
}
"#;

const NODE_GET: &str = "require('https').get(process.argv[1], r => { console.log('STATUS', r.statusCode); process.exit(0); }).on('error', e => { console.log('ERR', e.message); process.exit(1); });";

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn network_allow_lets_node_and_go_verify_tls() {
    require_sandbox!();
    // Go verifies certificates through Security.framework (trustd), Node
    // with its own store: the two ways TLS is checked on macOS.
    let host_curl = host(
        "/usr/bin/curl",
        &["-sS", "-m", "30", "-o", "/dev/null", "https://example.com/"],
        LIMIT,
    );
    if !host_curl.status.success() {
        loud_skip(
            "HTTPS from node and go",
            &format!(
                "the host itself cannot reach example.com\n{}",
                both(&host_curl)
            ),
        );
        return;
    }
    let world = World::new();
    let url = "https://example.com/";
    if let Some(node) = on_path("node") {
        let node = node.to_str().unwrap();
        let out = Seatbelt.run(
            &world,
            &["--network", "allow"],
            &[node, "-e", NODE_GET, url],
            &[],
        );
        assert_line(&out, "STATUS 200");
        let denied = Seatbelt.run(&world, &[], &[node, "-e", NODE_GET, url], &[]);
        assert_no_line_starting(&denied, "STATUS");
    }
    if let Some(go) = on_path("go") {
        // Built on the host (the build cache lives outside the sandbox).
        let dir = world.root.join("goget");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("main.go"), GO_GET).unwrap();
        let bin = dir.join("goget");
        let built = Command::new(&go)
            .args(["build", "-o"])
            .arg(&bin)
            .arg("main.go")
            .current_dir(&dir)
            .env("GO111MODULE", "off")
            .output()
            .unwrap();
        assert!(built.status.success(), "go build: {}", both(&built));
        let bin = bin.to_str().unwrap();
        let out = Seatbelt.run(&world, &["--network", "allow"], &[bin, url], &[]);
        assert_line(&out, "STATUS 200");
        let denied = Seatbelt.run(&world, &[], &[bin, url], &[]);
        assert_no_line_starting(&denied, "STATUS");
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn network_allowlist_refuses_dns_and_direct_connections() {
    require_sandbox!();
    let world = World::new();
    let (listed, listed_port) = tcp_listener();
    let (other, other_port) = tcp_listener();
    // The listed listener is reached through the proxy (positive control);
    // DNS, a direct connection to it, and any other port are not.
    let out = Seatbelt.run_sh_flags(
        &world,
        &[
            "--network",
            "allowlist",
            "--allow-domain",
            &format!("127.0.0.1:{listed_port}"),
        ],
        &format!(
            "/usr/bin/curl -sS -m 5 -o /dev/null http://127.0.0.1:{listed_port}/via-proxy; echo CURL-PROXY=$?
             /usr/bin/curl --noproxy '*' -sS -m 20 -o /dev/null https://example.com/ && echo CURL-DIRECT
             {py} -c 'import socket; socket.getaddrinfo(\"example.com\", 443); print(\"RESOLVED\")'
             /usr/bin/nc -z -w 3 127.0.0.1 {other_port} && echo NC-CONNECTED
             /usr/bin/curl --noproxy '*' -sS -m 5 -o /dev/null http://127.0.0.1:{other_port}/direct && echo CURL-DIRECT-LOOPBACK
             echo RAN",
            py = PYTHON,
        ),
    );
    assert_line(&out, "RAN");
    let got = tcp_received(&listed, LISTEN_GRACE);
    assert!(
        got.as_deref()
            .is_some_and(|b| b.starts_with(b"GET /via-proxy HTTP/1.1")),
        "the listed listener received {got:?}:\n{}",
        both(&out)
    );
    assert!(
        tcp_received(&other, LISTEN_GRACE).is_none(),
        "{}",
        both(&out)
    );
    for l in [
        "CURL-DIRECT",
        "RESOLVED",
        "NC-CONNECTED",
        "CURL-DIRECT-LOOPBACK",
    ] {
        assert_no_line_starting(&out, l);
    }
}

// ---------------------------------------------------------------------------
// Read-only mode
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn read_only_mode_reads_the_project_only_and_writes_nothing() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join("notes.txt"), "project notes 456\n");
    let ro = ["--read-only"];
    let run = |argv: &[&str]| Seatbelt.run(&world, &ro, argv, &[]);

    // The loader works: no SIGABRT for plain system binaries.
    let t = run(&["/usr/bin/true"]);
    assert_eq!(t.status.signal(), None, "killed by a signal: {}", both(&t));
    assert!(t.status.success(), "{}", both(&t));
    let ls = run(&["/bin/ls", "."]);
    assert_eq!(ls.status.signal(), None, "{}", both(&ls));
    assert_line(&ls, "notes.txt");
    let cat = run(&["/bin/cat", "notes.txt"]);
    assert_line(&cat, "project notes 456");

    // Reads outside the project and the system paths are refused.
    let gitconfig = world.home.join(".gitconfig");
    let home_read = run(&["/bin/cat", gitconfig.to_str().unwrap()]);
    assert!(!home_read.status.success(), "{}", both(&home_read));
    assert_absent(&home_read, "t@example.invalid");
    let home_ls = run(&["/bin/ls", "-a", world.home.to_str().unwrap()]);
    assert!(!home_ls.status.success(), "{}", both(&home_ls));
    assert_absent(&home_ls, ".gitconfig");
    let cred = run(&["/bin/cat", world.home.join(".netrc").to_str().unwrap()]);
    assert_no_secret(&cred);

    // No writes: not in the project, not in /tmp.
    let name = format!("sbx-ro-{}", unique(10));
    let tmp_target = format!("/tmp/{name}");
    let touch_project = run(&["/usr/bin/touch", "ro-new.txt"]);
    let touch_tmp = run(&["/usr/bin/touch", &tmp_target]);
    let tmp_exists = Path::new("/private/tmp").join(&name).exists();
    let _ = std::fs::remove_file(Path::new("/private/tmp").join(&name));
    assert!(
        !world.project.join("ro-new.txt").exists(),
        "{}",
        both(&touch_project)
    );
    assert!(!tmp_exists, "{}", both(&touch_tmp));
    // A shell runs, and its writes fail the same way.
    let sh = run(&[
        "/bin/sh",
        "-c",
        "echo x > ro-sh.txt ; cat notes.txt ; echo SH-RAN",
    ]);
    assert_line(&sh, "SH-RAN");
    assert_line(&sh, "project notes 456");
    assert!(!world.project.join("ro-sh.txt").exists(), "{}", both(&sh));

    // For the first-run record: whether the xcrun shims work in this mode
    // (they load from Xcode or the Command Line Tools).
    for argv in [
        &["/usr/bin/git", "--version"][..],
        &[PYTHON, "-c", "print(1)"][..],
    ] {
        let o = run(argv);
        eprintln!(
            "record: read-only {argv:?}: {:?} {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
}

// ---------------------------------------------------------------------------
// Nothing else changes on the host
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn nothing_changes_on_the_host_but_allowed_writes() {
    require_sandbox!();
    let world = World::new();
    scenarios::nothing_changes_on_the_host_but_allowed_writes(
        &Seatbelt,
        &world,
        || plant_keychain_file(&world),
        "mkdir -p \"$HOME/Library/LaunchAgents\"
         rm -f \"$HOME/Library/Keychains/login.keychain-db\"
         rm -f .env ; mv .env env-moved",
        &[],
        None,
    );
}

// ---------------------------------------------------------------------------
// Descriptors the caller passes down
// ---------------------------------------------------------------------------

/// A descriptor the caller leaves open (a connected Unix socket to a host
/// listener) must not reach the command. Seatbelt only limits acquiring
/// resources, so an inherited socket would stay usable: sbx marks every
/// descriptor above 2 close-on-exec before it execs sandbox-exec. The
/// control runs the same child without sbx.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn inherited_descriptors_do_not_reach_the_command() {
    require_sandbox!();
    let Some(py) = tool(&[PYTHON]) else {
        return;
    };
    let world = World::new();
    scenarios::inherited_descriptors_do_not_reach_the_command(
        &Seatbelt,
        &world,
        Path::new(py),
        |use_sbx| SocketFile::tmp(if use_sbx { 11 } else { 12 }),
    );
}
