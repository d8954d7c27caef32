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
//!     stops clonefile(2) (`cp -c`); both are operations of their own
//!     outside `file-write*`, so the profile allows them explicitly where it
//!     allows writes (each writable root, or `/` with `filesystem = false`)
//!     and denies them again on credentials
//!     (`hard_links_and_clones_of_ordinary_files_work`,
//!     `filesystem_false_allows_clones`).
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
//! 15. A `regex` deny built from `regex-quote` of the project root and a
//!     character-class tail stops the creation of `.VSCODE/tasks.json` and
//!     other spellings of a "runs later" path (the root part stays
//!     case-sensitive, as the `literal` rules are)
//!     (`runs_later_paths_in_another_case_cannot_be_created`).
//! 16. `(require-not (vnode-type DIRECTORY))` exempts an existing or
//!     newly made directory named `.env` from the `.env` deny, and a file
//!     being created there is still denied
//!     (`a_directory_named_env_is_usable`).
//! 17. `(ioctl-command TIOCSTI)` is a known symbol (macOS 13 and newer), and
//!     TIOCSTI on a terminal the command inherited fails inside while it
//!     works outside (`tiocsti_cannot_push_input_into_the_terminal`).
//! 18. `kern.proc.all` and the `kern.proc.{uid,ruid,tty}.` prefixes are all
//!     `/bin/ps` and `pgrep` need (no `com.apple.sysmond`), and arguments
//!     stay unreadable without `kern.procargs2`
//!     (`ps_lists_processes_but_not_their_arguments`).
//! 19. `mach-host*` is what Node's `os.cpus()` (host_processor_info)
//!     needs, and `com.apple.FSEvents` what `fs.watch` needs
//!     (`node_sees_its_cpus_and_watches_files`); POSIX shared-memory names
//!     are matched with their leading `/` (`^/psm_...`)
//!     (`shared_memory_of_its_own_works_and_others_stay_out_of_reach`).
//! 20. Own Unix sockets: `(system-socket (socket-domain AF_UNIX))` plus
//!     `network-bind`/`network-inbound` on `(local unix-socket (subpath
//!     DIR))` and `network-outbound` on `(remote unix-socket (subpath DIR))`
//!     are what a server and a client in `$TMPDIR` need, and the remote
//!     path is the socket file's real path (a link in `$TMPDIR` to a host
//!     socket is refused).
//! 21. `vnode-type` on `file-write-create` is the type of what is being
//!     made, and for `rename(2)` the type of what is moved: a socket or a
//!     directory renamed out of `$TMPDIR` into `/tmp` is refused as their
//!     creation there would be; `file-link` is judged on the source's type
//!     (`own_sockets_connect_and_the_hosts_stay_out_of_reach`). sbx checks
//!     this itself before it gives a command Unix sockets (`sbx
//!     __socket-probe`, once per macOS build): where it fails, the command
//!     gets none, with a warning, and that test fails.

use std::io::Read;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::host::{
    assert_absent, assert_line, assert_no_line_starting, assert_no_secret, both, kill_all, lines,
    secret_files, show, shq, shq_path, snapshot, started_until, stderr, stdout, tcp_listener,
    tcp_received, tool, unique, unix_listener, unix_received, SocketFile, PY_UNIX_CONNECT,
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
// The tests, by topic
// ---------------------------------------------------------------------------

mod allowed;
mod files;
mod network;
mod processes;
mod runtimes;
mod services;
mod sockets;
