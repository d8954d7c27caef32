//! The enforcement suite: real bubblewrap runs, each grant beside its denial.
//!
//! Every verdict rests on host-side evidence: does the file exist on the host
//! afterwards, did a host listener receive a connection, is a host file or
//! process unchanged. Exit codes alone prove nothing (a command can fail for
//! an unrelated reason), so each refusal runs beside a positive control that
//! shows the same kind of action works where it is allowed, and every
//! refusal that touches a credential also checks that the planted secret text
//! appears in neither stdout nor stderr.
//!
//! Tools used inside: sh, bash, git, unshare, `/usr/bin/python3` (for raw
//! syscalls and sockets) and `script` (for a terminal); `.ci/run` installs
//! them. `SBX_TEST_SHOW=1` prints every sandboxed run's output, to see why
//! a check holds.

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::host::{
    assert_line, assert_no_line_starting, assert_no_secret, both, kill_all, secret_files, shq,
    shq_path, snapshot, stdout, tcp_listener, tcp_received, tool, unique, unix_listener,
    unix_received, SocketFile, PY_UNIX_CONNECT,
};
use crate::require_sandbox;
use crate::scenarios::{self, cat_each};
use crate::util::{self, Runner, Sbx, World, SECRET};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// `sbx run -- python3 -c CODE ARGS...`.
fn run_py(world: &World, code: &str, args: &[&str]) -> Output {
    let py = python();
    let mut argv = vec![py.to_str().unwrap(), "-c", code];
    argv.extend_from_slice(args);
    Sbx.run(world, &[], &argv, &[])
}

/// How a host process's command line (arguments joined by spaces) is matched.
#[derive(Clone, Copy)]
enum Match<'a> {
    /// The needle appears anywhere (bwrap's and the inner stage's command
    /// lines contain the sandboxed command too).
    Contains(&'a str),
    /// The whole command line is the needle.
    Exact(&'a str),
    /// Both needles appear.
    Both(&'a str, &'a str),
}

/// PIDs of host processes whose command line matches, read from `/proc` (so
/// the suite does not depend on procps being installed).
fn pgrep(m: Match) -> Vec<u32> {
    let mut pids = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&raw)
            .trim_end_matches('\0')
            .replace('\0', " ");
        let hit = match m {
            Match::Contains(n) => cmdline.contains(n),
            Match::Exact(n) => cmdline == n,
            Match::Both(a, b) => cmdline.contains(a) && cmdline.contains(b),
        };
        if hit {
            pids.push(pid);
        }
    }
    pids
}

/// Poll until `want(pids)` holds or `timeout` passes; the last PIDs.
fn pgrep_until(m: Match, timeout: Duration, want: impl Fn(&[u32]) -> bool) -> Vec<u32> {
    let start = Instant::now();
    loop {
        let pids = pgrep(m);
        if want(&pids) || start.elapsed() > timeout {
            return pids;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// How long a host listener waits for a connection that may still be in
/// flight once the sandboxed command has exited.
const LISTEN_GRACE: Duration = Duration::from_millis(300);

/// Where the system Python is looked for (never a pyenv shim on PATH: it
/// needs the real HOME).
const PYTHONS: &[&str] = &["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"];

fn python() -> PathBuf {
    PathBuf::from(tool(PYTHONS).unwrap())
}

fn have_python() -> bool {
    tool(PYTHONS).is_some()
}

/// A Unix listener in the abstract namespace of the host's network namespace.
fn abstract_listener(name: &str) -> UnixListener {
    use std::os::linux::net::SocketAddrExt;
    let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let l = UnixListener::bind_addr(&addr).unwrap();
    l.set_nonblocking(true).unwrap();
    l
}

// ---------------------------------------------------------------------------
// What is allowed
// ---------------------------------------------------------------------------

#[test]
fn writes_in_project_and_tmp_reach_the_host() {
    require_sandbox!();
    let world = World::new();
    scenarios::writes_in_project_and_tmp_reach_the_host(&Sbx, &world, Path::new("/tmp"), |_, _| {});
}

#[test]
fn project_files_are_readable() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join("notes.txt"), "project notes 123\n");
    world
        .sbx()
        .args(["run", "--", "cat", "notes.txt"])
        .assert()
        .success()
        .stdout("project notes 123\n");
}

#[test]
fn git_works_in_a_repository() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let out = Sbx.run_sh_env(
        &world,
        "set -e
         git status --short
         git checkout -q -b feature
         echo change > file.txt
         git add file.txt
         git commit -q -m 'from the sandbox'
         echo DONE",
        &[
            ("GIT_AUTHOR_NAME", "t"),
            ("GIT_AUTHOR_EMAIL", "t@example.invalid"),
            ("GIT_COMMITTER_NAME", "t"),
            ("GIT_COMMITTER_EMAIL", "t@example.invalid"),
        ],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "DONE");
    // Host side: the branch and the commit exist.
    let log = Command::new("git")
        .args(["log", "--format=%s", "-1", "feature"])
        .current_dir(&world.project)
        .output()
        .unwrap();
    assert_eq!(stdout(&log), "from the sandbox\n", "{}", both(&log));
    let head = Command::new("git")
        .args(["rev-parse", "--abbrev-ref", "HEAD"])
        .current_dir(&world.project)
        .output()
        .unwrap();
    assert_eq!(stdout(&head), "feature\n");
}

#[test]
fn exit_code_comes_back() {
    require_sandbox!();
    scenarios::exit_code_comes_back(&Sbx);
}

#[test]
fn stdin_reaches_the_command() {
    require_sandbox!();
    scenarios::stdin_reaches_the_command(&Sbx);
}

#[test]
fn project_path_with_a_space_works() {
    require_sandbox!();
    let world = World::new();
    assert!(world.project.to_str().unwrap().contains(' '));
    let out = Sbx.run_sh(&world, "pwd && echo ok > 'a file with spaces.txt'");
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(stdout(&out), format!("{}\n", world.project.display()));
    assert!(world.project.join("a file with spaces.txt").is_file());
}

// ---------------------------------------------------------------------------
// Writes outside the writable roots
// ---------------------------------------------------------------------------

#[test]
fn writes_outside_writable_roots_are_refused() {
    require_sandbox!();
    let world = World::new();
    scenarios::writes_outside_writable_roots_are_refused(&Sbx, &world, "", |_| {});
}

// ---------------------------------------------------------------------------
// Credentials
// ---------------------------------------------------------------------------

#[test]
fn credentials_are_unreadable_directly() {
    require_sandbox!();
    let world = World::new();
    let files = secret_files(&world);
    let mut paths: Vec<String> = files
        .iter()
        .map(|f| world.home.join(f).to_str().unwrap().to_string())
        .collect();
    // Positive control: an ordinary file in the same home is readable.
    paths.push(world.home.join(".bashrc").to_str().unwrap().to_string());
    let mut script = cat_each(&paths);
    // Listing and searching the directories must not leak either.
    script
        .push_str("grep -r . \"$HOME\" 2>/dev/null | grep -v '^Binary' ; ls -laR \"$HOME\" 2>&1\n");
    let out = Sbx.run_sh(&world, &script);
    assert_no_secret(&out);
    assert_line(&out, "# rc");
    assert_eq!(
        stdout(&out).matches("attempted").count(),
        paths.len(),
        "{}",
        both(&out)
    );
}

#[test]
fn credentials_are_unreadable_through_a_project_symlink() {
    require_sandbox!();
    let world = World::new();
    scenarios::credentials_are_unreadable_through_a_project_symlink(&Sbx, &world, &[]);
}

#[test]
fn credentials_are_unreadable_through_proc_self_root() {
    require_sandbox!();
    let world = World::new();
    let files = secret_files(&world);
    let mut paths: Vec<String> = files
        .iter()
        .map(|f| format!("/proc/self/root{}", world.home.join(f).display()))
        .collect();
    paths.push(format!(
        "/proc/self/root{}",
        world.home.join(".bashrc").display()
    ));
    // Also through PID 1's root (the inner stage's view).
    paths.extend(
        files
            .iter()
            .map(|f| format!("/proc/1/root{}", world.home.join(f).display())),
    );
    let out = Sbx.run_sh(&world, &cat_each(&paths));
    assert_no_secret(&out);
    assert_line(&out, "# rc");
}

#[test]
fn credentials_cannot_be_moved_copied_or_linked_into_the_project() {
    require_sandbox!();
    let world = World::new();
    let out = Sbx.run_sh(
        &world,
        "mv \"$HOME/.aws/credentials\" ./moved ; cat ./moved
         mv \"$HOME/.aws\" ./aws-dir ; cat ./aws-dir/credentials
         ln \"$HOME/.git-credentials\" ./hardlink ; cat ./hardlink
         ln -s \"$HOME/.netrc\" ./softlink ; cat ./softlink
         cp \"$HOME/.pypirc\" ./copied ; cat ./copied
         cp -r \"$HOME/.ssh\" ./ssh-copy ; cat ./ssh-copy/*
         echo ok > control.txt",
    );
    assert_no_secret(&out);
    // Host side: the originals are intact and no copy in the project holds the secret.
    assert_eq!(
        std::fs::read_to_string(world.home.join(".aws/credentials")).unwrap(),
        SECRET
    );
    assert_eq!(
        std::fs::read_to_string(world.home.join(".git-credentials")).unwrap(),
        SECRET
    );
    // Whatever the command created, make it readable to look inside.
    Command::new("chmod")
        .args(["-R", "u+rwX"])
        .arg(&world.project)
        .status()
        .unwrap();
    for (path, body) in snapshot(&world.project) {
        assert!(
            !body.contains(SECRET),
            "{} holds the secret",
            path.display()
        );
    }
    assert!(world.project.join("control.txt").is_file());
}

#[test]
fn env_files_are_unreadable_but_templates_are() {
    require_sandbox!();
    let world = World::new();
    let secret_envs = [".env", "sub/.env.local", "a/b/c/d/.env.production"];
    for f in secret_envs {
        util::write(&world.project.join(f), &format!("TOKEN={SECRET}\n"));
    }
    util::write(&world.project.join(".env.example"), "TOKEN=example-value\n");
    let mut paths: Vec<String> = secret_envs.iter().map(|s| s.to_string()).collect();
    paths.push(".env.example".into());
    let script = cat_each(&paths)
        + "grep -r TOKEN . 2>&1
           echo overwritten > .env ; echo overwritten > sub/.env.local
           mv a/b/c/d/.env.production moved ; cat moved 2>&1
           echo ok > control.txt";
    let out = Sbx.run_sh(&world, &script);
    assert_no_secret(&out);
    assert_line(&out, "TOKEN=example-value");
    // Host side: the files are unchanged, the control write worked.
    for f in secret_envs {
        assert_eq!(
            std::fs::read_to_string(world.project.join(f)).unwrap(),
            format!("TOKEN={SECRET}\n"),
            "{f}"
        );
    }
    assert!(world.project.join("control.txt").is_file());
}

#[test]
fn symlinked_credential_dir_is_masked_at_both_spellings() {
    require_sandbox!();
    scenarios::symlinked_credential_dir_is_unreadable_at_both_spellings(&Sbx);
}

// ---------------------------------------------------------------------------
// Files that run later
// ---------------------------------------------------------------------------

#[test]
fn runs_later_files_are_read_only() {
    require_sandbox!();
    scenarios::runs_later_files_are_read_only(&Sbx);
}

#[test]
fn missing_git_hooks_cannot_be_created() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    std::fs::remove_dir_all(world.project.join(".git/hooks")).unwrap();
    let status = || {
        let out = Command::new("git")
            .args(["status", "--porcelain", "--ignored"])
            .current_dir(&world.project)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", both(&out));
        stdout(&out)
    };
    let before = status();
    let out = Sbx.run_sh(
        &world,
        "mkdir -p .git/hooks ; touch .git/hooks/pre-push
         printf '#!/bin/sh\\ntouch \"$HOME/SBX_PWN\"\\n' > .git/hooks/pre-commit
         chmod +x .git/hooks/pre-commit
         mv .git/hooks .git/h2 ; mkdir .git/hooks/sub
         echo ok > .git/control",
    );
    let hooks = world.project.join(".git/hooks");
    if hooks.exists() {
        let entries: Vec<_> = std::fs::read_dir(&hooks)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            entries.is_empty(),
            "hooks were created: {entries:?}\n{}",
            both(&out)
        );
    }
    assert!(!world.project.join(".git/h2").exists());
    assert_eq!(status(), before, "the working tree changed");
    // Positive control: .git itself is writable (git needs it).
    assert!(
        world.project.join(".git/control").is_file(),
        "{}",
        both(&out)
    );
}

// ---------------------------------------------------------------------------
// Namespaces, environment, processes
// ---------------------------------------------------------------------------

#[test]
fn nested_namespace_cannot_remount_root_writable() {
    require_sandbox!();
    let world = World::new();
    let target = world.home.join("remount-pwn");
    let out = Sbx.run_sh(
        &world,
        &format!(
            "export T={t}
             unshare -rm sh -c 'mount -o remount,rw / && echo pwn > \"$T\"'; echo \"unshare=$?\"
             unshare -rm true; echo \"plain-unshare=$?\"
             echo ok > control.txt",
            t = shq_path(&target)
        ),
    );
    assert!(!target.exists(), "{}", both(&out));
    assert!(stdout(&out).contains("unshare="), "{}", both(&out));
    assert_no_line_starting(&out, "unshare=0");
    assert_no_line_starting(&out, "plain-unshare=0");
    assert!(
        world.project.join("control.txt").is_file(),
        "{}",
        both(&out)
    );
}

#[test]
fn credential_env_vars_are_removed() {
    require_sandbox!();
    let jdbc = format!("jdbc:postgresql://db/x?password={SECRET}");
    let header = format!("Authorization: Bearer {SECRET}");
    scenarios::credential_env_vars_are_removed(
        &Sbx,
        &[
            ("MY_API_KEY", SECRET),
            ("AWS_BEARER_TOKEN_BEDROCK", SECRET),
            ("JDBC_URL", &jdbc),
            ("GIT_CONFIG_COUNT", "1"),
            ("GIT_CONFIG_KEY_0", "http.extraHeader"),
            ("GIT_CONFIG_VALUE_0", &header),
        ],
        &[
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "MY_API_KEY",
            "AWS_BEARER_TOKEN_BEDROCK",
            "JDBC_URL",
            "GIT_CONFIG_COUNT",
            "GIT_CONFIG_KEY_0",
        ],
    );
}

#[test]
fn env_passthrough_keeps_a_named_variable() {
    require_sandbox!();
    let world = World::new();
    world.user_config("[sandbox]\nenv_passthrough = [\"MY_API_KEY\"]\n");
    let out = Sbx.run_sh_env(
        &world,
        "env",
        &[
            ("MY_API_KEY", "passed-through-value"),
            ("GITHUB_TOKEN", SECRET),
        ],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "MY_API_KEY=passed-through-value");
    assert_no_secret(&out);
}

#[test]
fn host_processes_are_invisible_and_unkillable() {
    require_sandbox!();
    let world = World::new();
    let duration = unique(60);
    let mut host = Command::new("sleep")
        .arg(&duration)
        .env("SBX_HOST_ONLY", SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = host.id();
    let out = Sbx.run_sh(
        &world,
        &format!(
            "P={pid} D={frac}
             # Durations are split so this script's own command line does not
             # contain them; `case` runs in the shell, spawning nothing.
             seen() {{
               for f in /proc/[0-9]*/cmdline; do
                 c=$(tr '\\0' ' ' < \"$f\"); case \"$c\" in *\"$1\"*) return 0;; esac
               done
               return 1
             }}
             ls /proc | grep -qx $P && echo VISIBLE-PROC
             if command -v ps >/dev/null; then ps -eo pid= | tr -d ' ' | grep -qx $P && echo VISIBLE-PS; fi
             seen \"{int}$D\" && echo VISIBLE-ARGS
             cat /proc/$P/environ ; echo \"environ=$?\"
             kill $P ; echo \"kill=$?\"
             kill -9 $P ; echo \"kill9=$?\"
             # Positive controls: the same probes work on a sandboxed process.
             sleep 49$D & O=$!
             ls /proc | grep -qx $O && echo OWN-PID-SEEN
             seen \"49$D\" && echo OWN-ARGS-SEEN
             cat /proc/$O/environ >/dev/null && echo OWN-ENVIRON-OK
             kill $O && echo OWN-KILL-OK",
            int = duration.split('.').next().unwrap(),
            frac = shq(&duration[duration.find('.').unwrap()..]),
        ),
    );
    std::thread::sleep(Duration::from_millis(100));
    let alive = host.try_wait().unwrap().is_none();
    let _ = host.kill();
    let _ = host.wait();
    assert!(
        alive,
        "the host process was killed from inside:\n{}",
        both(&out)
    );
    assert_no_secret(&out);
    assert_no_line_starting(&out, "VISIBLE");
    assert_no_line_starting(&out, "environ=0");
    assert_no_line_starting(&out, "kill=0");
    assert_no_line_starting(&out, "kill9=0");
    for control in [
        "OWN-PID-SEEN",
        "OWN-ARGS-SEEN",
        "OWN-ENVIRON-OK",
        "OWN-KILL-OK",
    ] {
        assert_line(&out, control);
    }
}

// ---------------------------------------------------------------------------
// Network
// ---------------------------------------------------------------------------

fn tcp_probe_script(port: u16) -> String {
    format!(
        "bash -c 'echo hi-bash > /dev/tcp/127.0.0.1/{port}' && echo BASH-CONNECTED
         {py} -c 'import socket; s = socket.create_connection((\"127.0.0.1\", {port}), timeout=2); s.sendall(b\"hi-py\"); s.close()' && echo PY-CONNECTED
         echo RAN",
        py = shq_path(&python())
    )
}

#[test]
fn host_loopback_is_unreachable() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    let (listener, port) = tcp_listener();
    let out = Sbx.run_sh(&world, &tcp_probe_script(port));
    assert_line(&out, "RAN");
    let got = tcp_received(&listener, LISTEN_GRACE);
    assert!(
        got.is_none(),
        "the host listener received {got:?}:\n{}",
        both(&out)
    );
    assert_no_line_starting(&out, "BASH-CONNECTED");
    assert_no_line_starting(&out, "PY-CONNECTED");
}

#[test]
fn network_allow_reaches_host_loopback() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    world.user_config("[sandbox]\nnetwork = \"allow\"\n");
    let (listener, port) = tcp_listener();
    let out = Sbx.run_sh(
        &world,
        &format!("bash -c 'echo hi-bash > /dev/tcp/127.0.0.1/{port}' && echo BASH-CONNECTED"),
    );
    let got = tcp_received(&listener, LISTEN_GRACE);
    assert_eq!(got.as_deref(), Some(&b"hi-bash\n"[..]), "{}", both(&out));
    assert_line(&out, "BASH-CONNECTED");
}

struct UnixSockets {
    in_project: (PathBuf, UnixListener),
    in_tmp: (PathBuf, UnixListener),
    abstract_name: String,
    abstract_l: UnixListener,
}

impl UnixSockets {
    fn new(world: &World) -> UnixSockets {
        let p = world.project.join("sub/agent.sock");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        let lp = unix_listener(&p);
        let t = PathBuf::from(format!("/tmp/sbx-test-{}.sock", unique(2)));
        let lt = unix_listener(&t);
        let name = format!("sbx-test-{}", unique(3));
        let la = abstract_listener(&name);
        UnixSockets {
            in_project: (p, lp),
            in_tmp: (t, lt),
            abstract_name: name,
            abstract_l: la,
        }
    }

    fn args(&self) -> Vec<String> {
        vec![
            self.in_project.0.to_str().unwrap().to_string(),
            self.in_tmp.0.to_str().unwrap().to_string(),
            format!("@{}", self.abstract_name),
        ]
    }
}

impl Drop for UnixSockets {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.in_tmp.0);
    }
}

#[test]
fn host_unix_sockets_are_unreachable() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    let socks = UnixSockets::new(&world);
    let args = socks.args();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_py(&world, PY_UNIX_CONNECT, &argv);
    // Positive control: Python ran and a stream socketpair works.
    assert_line(&out, "PAIR-OK");
    assert_no_line_starting(&out, "CONNECTED");
    for (name, l) in [
        ("project", &socks.in_project.1),
        ("/tmp", &socks.in_tmp.1),
        ("abstract", &socks.abstract_l),
    ] {
        let got = unix_received(l, LISTEN_GRACE);
        assert!(
            got.is_none(),
            "the {name} socket received {got:?}:\n{}",
            both(&out)
        );
    }
    // The refusal is the filter's (EPERM), not a missing path.
    for a in &args {
        assert_line(&out, &format!("REFUSED {a} 1"));
    }
}

/// With `unix_sockets = "allow"` path sockets connect. The abstract one stays
/// unreachable: abstract names belong to a network namespace, and the
/// sandbox has its own.
#[test]
fn unix_sockets_allow_connects_path_sockets_only() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    world.user_config("[sandbox]\nunix_sockets = \"allow\"\n");
    let socks = UnixSockets::new(&world);
    let args = socks.args();
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = run_py(&world, PY_UNIX_CONNECT, &argv);
    assert_line(&out, &format!("CONNECTED {}", args[0]));
    assert_line(&out, &format!("CONNECTED {}", args[1]));
    assert_eq!(
        unix_received(&socks.in_project.1, LISTEN_GRACE).as_deref(),
        Some(&b"hi"[..]),
        "{}",
        both(&out)
    );
    assert_eq!(
        unix_received(&socks.in_tmp.1, LISTEN_GRACE).as_deref(),
        Some(&b"hi"[..]),
        "{}",
        both(&out)
    );
    // The abstract socket: the network namespace keeps it out of reach.
    assert!(
        unix_received(&socks.abstract_l, LISTEN_GRACE).is_none(),
        "{}",
        both(&out)
    );
    assert_no_line_starting(&out, &format!("CONNECTED {}", args[2]));
}

// ---------------------------------------------------------------------------
// seccomp: terminal injection, io_uring, ptrace, /proc/1/mem
// ---------------------------------------------------------------------------

#[test]
fn tiocsti_is_refused_on_a_terminal() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let Some(script) = tool(&["/usr/bin/script", "/bin/script"]) else {
        return;
    };
    let world = World::new();
    util::write(
        &world.project.join("inject.py"),
        r#"import fcntl, os, termios
print("TTY", os.isatty(0))
fcntl.ioctl(0, termios.TIOCGWINSZ, b"\0" * 8)
print("WINSZ-OK")
try:
    fcntl.ioctl(0, termios.TIOCSTI, b"x")
    print("TIOCSTI-OK")
except OSError as e:
    print("TIOCSTI-ERR", e.errno)
"#,
    );
    // `script` gives sbx a terminal on the host side, as an interactive
    // shell would: the ioctl targets the tty sbx itself was started on.
    let inner = format!(
        "{} run -- {} inject.py",
        shq_path(&util::sbx_path()),
        shq_path(&python())
    );
    let out = world
        .host_cmd(script)
        .args(["-qec", &inner, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let text = stdout(&out).replace('\r', "");
    assert!(
        text.lines().any(|l| l == "TTY True"),
        "no terminal: {}",
        both(&out)
    );
    assert!(text.lines().any(|l| l == "WINSZ-OK"), "{}", both(&out));
    assert!(
        text.lines().any(|l| l == "TIOCSTI-ERR 1"),
        "TIOCSTI was not refused with EPERM:\n{}",
        both(&out)
    );
}

#[test]
fn io_uring_setup_is_refused() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    let getpid = if cfg!(target_arch = "x86_64") {
        39
    } else {
        172
    };
    let code = format!(
        r#"import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print("GETPID-OK" if libc.syscall({getpid}) == os.getpid() else "GETPID-BAD")
params = ctypes.create_string_buffer(120)
r = libc.syscall(425, 1, params)
print("io_uring_setup", r, ctypes.get_errno() if r < 0 else 0)
"#
    );
    let out = run_py(&world, &code, &[]);
    assert_line(&out, "GETPID-OK");
    assert_line(&out, "io_uring_setup -1 1");
}

#[test]
fn ptrace_of_sandboxed_processes_is_refused() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    let duration = unique(40);
    let code = r#"import ctypes, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
p = subprocess.Popen(["sleep", sys.argv[1]])
os.kill(p.pid, 0)
print("SIBLING-ALIVE")
for target in (p.pid, 1):
    r = libc.ptrace(16, target, None, None)  # PTRACE_ATTACH
    print("attach", "pid1" if target == 1 else "sibling", r, ctypes.get_errno() if r < 0 else 0)
    r = libc.ptrace(0x4206, target, None, None)  # PTRACE_SEIZE
    print("seize", "pid1" if target == 1 else "sibling", r, ctypes.get_errno() if r < 0 else 0)
p.kill()
"#;
    let out = run_py(&world, code, &[&duration]);
    assert_line(&out, "SIBLING-ALIVE");
    for line in [
        "attach sibling -1 1",
        "seize sibling -1 1",
        "attach pid1 -1 1",
        "seize pid1 -1 1",
    ] {
        assert_line(&out, line);
    }
    // strace, when installed, as a second opinion (optional: CI lacks it).
    if let Some(strace) = Some(PathBuf::from("/usr/bin/strace")).filter(|p| p.is_file()) {
        let out = Sbx.run_sh(
            &world,
            &format!(
                "sleep {d} & {s} -p $! -e trace=none -o /dev/null & S=$!; sleep 0.5; kill $S 2>/dev/null; wait $S; echo \"strace=$?\"",
                d = unique(41),
                s = shq_path(&strace)
            ),
        );
        assert_no_line_starting(&out, "strace=0");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("Operation not permitted"),
            "{}",
            both(&out)
        );
    }
}

#[test]
fn proc_1_mem_is_not_writable() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    let code = r#"import os
for path in ("/proc/self/mem", "/proc/1/mem"):
    try:
        open(path, "r+b").close()
        print("OPEN-RW", path)
    except OSError as e:
        print("DENIED", path, e.errno)
try:
    open("/proc/1/environ", "rb").read()
    print("READ pid1 environ")
except OSError as e:
    print("DENIED pid1 environ", e.errno)
"#;
    let out = run_py(&world, code, &[]);
    // Positive control: opening memory for writing works on the process itself.
    assert_line(&out, "OPEN-RW /proc/self/mem");
    assert_no_line_starting(&out, "OPEN-RW /proc/1/mem");
    assert!(
        stdout(&out)
            .lines()
            .any(|l| l.starts_with("DENIED /proc/1/mem")),
        "{}",
        both(&out)
    );
}

// ---------------------------------------------------------------------------
// Process lifetime
// ---------------------------------------------------------------------------

#[test]
fn background_jobs_die_with_the_command() {
    require_sandbox!();
    let world = World::new();
    let duration = unique(31);
    let needle = format!("sleep {duration}");
    let start = Instant::now();
    let out = Sbx.run_sh(
        &world,
        &format!("sleep {duration} >/dev/null 2>&1 & echo $!"),
    );
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        stdout(&out).trim().parse::<u32>().is_ok(),
        "the job did not start: {}",
        both(&out)
    );
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "sbx waited for the background job"
    );
    let left = pgrep_until(Match::Contains(&needle), Duration::from_secs(2), |p| {
        p.is_empty()
    });
    kill_all(&left);
    assert!(
        left.is_empty(),
        "background job survived the sandbox: {left:?}"
    );
}

#[test]
fn killing_sbx_kills_the_whole_sandbox() {
    require_sandbox!();
    let world = World::new();
    let duration = unique(1000);
    let needle = format!("sleep {duration}");
    let mut child = world
        .sbx_std()
        .args([
            "run",
            "--",
            "sh",
            "-c",
            &format!("sleep {duration} & sleep {duration}; wait"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the command itself runs: both `sleep` processes (the exact
    // command line, not bwrap's or the inner stage's, which contain it too).
    let started = pgrep_until(Match::Exact(&needle), Duration::from_secs(3), |p| {
        p.len() >= 2
    });
    assert_eq!(started.len(), 2, "the sandboxed sleeps never started");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let left = pgrep_until(Match::Contains(&needle), Duration::from_secs(2), |p| {
        p.is_empty()
    });
    kill_all(&left);
    assert!(
        left.is_empty(),
        "sandboxed processes outlived sbx: {left:?}"
    );
}

/// The same, with sbx killed while the sandbox is still being set up (an
/// agent's timeout can strike at any moment).
// Regression: a SIGKILL to sbx in its first milliseconds once left the
// sandbox running, orphaned: sbx died before bubblewrap's `--die-with-parent`
// held, or bubblewrap died before its child's did. The inner stage now holds
// a pipe to sbx as a lifeline and ends the sandbox when sbx is gone.
#[test]
fn killing_sbx_during_setup_kills_the_sandbox() {
    require_sandbox!();
    let world = World::new();
    let mut needles = Vec::new();
    for i in 0..32u64 {
        let duration = unique(1001);
        needles.push(format!("sleep {duration}"));
        let mut child = world
            .sbx_std()
            .args(["run", "--", "sleep", &duration])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        if i % 2 == 0 {
            // Kill at staggered moments after the start: sbx's own start,
            // bubblewrap's start, its clone, the inner stage's start.
            std::thread::sleep(Duration::from_micros(500 + 500 * (i / 2 % 8)));
        } else {
            // Kill once bubblewrap runs, at staggered moments of its setup.
            let needle = needles.last().unwrap();
            pgrep_until(
                Match::Both(needle, "--as-pid-1"),
                Duration::from_secs(2),
                |p| !p.is_empty(),
            );
            std::thread::sleep(Duration::from_micros(250 * (i / 2 % 8)));
        }
        child.kill().unwrap();
        child.wait().unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    let left: Vec<u32> = needles
        .iter()
        .flat_map(|n| pgrep(Match::Contains(n)))
        .collect();
    kill_all(&left);
    assert!(left.is_empty(), "sandboxes outlived a killed sbx: {left:?}");
}

// ---------------------------------------------------------------------------
// Nothing else changes on the host
// ---------------------------------------------------------------------------

#[test]
fn nothing_changes_on_the_host_but_allowed_writes() {
    require_sandbox!();
    let world = World::new();
    // sbx's own first-run files (its cache) are written by the trusted outer
    // stage; let a first run create them so the diff shows only the command.
    let warmup = || {
        let warmup = Sbx.run_sh(&world, "true");
        assert!(warmup.status.success(), "{}", both(&warmup));
    };
    // A new `.sbx.toml` in the project can only narrow the policy. sbx's own
    // cache (outside every writable root) is refreshed by the trusted outer
    // stage on each run: existing entries may change, nothing may be added,
    // and none may hold what the command tried to write.
    let after = scenarios::nothing_changes_on_the_host_but_allowed_writes(
        &Sbx,
        &world,
        warmup,
        "mkdir -p \"$HOME/.config/autostart\"
         echo x > .env ; rm -f .env ; echo x > .sbx.toml
         unshare -rm sh -c 'mount -o remount,rw / && touch \"$HOME/SBX_PWN\"'
         mkdir -p \"$HOME/.cache/sbx\" ; echo evil > \"$HOME/.cache/sbx/planted\"
         for f in \"$HOME\"/.cache/sbx/*; do echo evil > \"$f\"; done",
        &["+ home/my project/.sbx.toml"],
        Some("~ home/.cache/sbx/"),
    );
    for (path, body) in &after {
        if path.starts_with("home/.cache/sbx") {
            assert!(
                !body.contains("evil"),
                "the command wrote {}",
                path.display()
            );
        }
    }
}

// ---------------------------------------------------------------------------
// More of the seccomp filter, and descriptors the caller passes down
// ---------------------------------------------------------------------------

/// Every syscall of the filter's unconditional list answers EPERM (clone3
/// ENOSYS), while an ordinary syscall still works (the control).
#[cfg(target_arch = "x86_64")]
#[test]
fn kernel_interfaces_are_refused() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    // x86_64 numbers; arguments are harmless if a call were allowed.
    let code = r#"import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print("GETPID-OK" if libc.syscall(39) == os.getpid() else "GETPID-BAD")
calls = {
    "keyctl": (250, 0, 0, 0, 0),
    "add_key": (248, 0, 0, 0, 0, 0),
    "request_key": (249, 0, 0, 0, 0),
    "bpf": (321, 0, 0, 0),
    "perf_event_open": (298, 0, 0, -1, -1, 0),
    "userfaultfd": (323, 0),
    "process_vm_readv": (310, 1, 0, 0, 0, 0, 0),
    "mount": (165, 0, 0, 0, 0, 0),
    "umount2": (166, 0, 0),
    "pivot_root": (155, 0, 0),
    "open_tree": (428, -1, 0, 0),
    "fsopen": (430, 0, 0),
    "setns": (308, -1, 0),
    "unshare-user": (272, 0x10000000),
    "unshare-mount": (272, 0x00020000),
    "clone-newuser": (56, 0x10000000 | 17, 0, 0, 0, 0),
    "clone3": (435, 0, 0),
    "socket-vsock": (41, 40, 1, 0),
    "socketpair-unix-dgram": (53, 1, 2, 0, 0),
}
for name, args in calls.items():
    r = libc.syscall(*[ctypes.c_long(a) for a in args])
    print(name, r, ctypes.get_errno() if r < 0 else 0)
"#;
    let out = run_py(&world, code, &[]);
    assert_line(&out, "GETPID-OK");
    for name in [
        "keyctl",
        "add_key",
        "request_key",
        "bpf",
        "perf_event_open",
        "userfaultfd",
        "process_vm_readv",
        "mount",
        "umount2",
        "pivot_root",
        "open_tree",
        "fsopen",
        "setns",
        "unshare-user",
        "unshare-mount",
        "clone-newuser",
        "socket-vsock",
        "socketpair-unix-dgram",
    ] {
        assert_line(&out, &format!("{name} -1 1"));
    }
    assert_line(&out, "clone3 -1 38");
}

/// A descriptor the caller leaves open (here a connected Unix socket to a
/// host listener, passed as an inherited fd) does not reach the command:
/// every descriptor above 2 is closed before it starts. The control runs
/// the same child without sbx and the bytes do arrive.
#[test]
fn inherited_descriptors_do_not_reach_the_command() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    let sock_dir = world.root.join("sock");
    std::fs::create_dir_all(&sock_dir).unwrap();
    scenarios::inherited_descriptors_do_not_reach_the_command(&Sbx, &world, &python(), |use_sbx| {
        SocketFile::at(sock_dir.join(if use_sbx { "sbx.sock" } else { "plain.sock" }))
    });
}

/// An agent's token is hidden from the commands it runs, and readable (with
/// its state writable) only when the user gives the agent its own state
/// directory: `sbx run --writable ~/.claude -- claude`. Neither a broader
/// grant (all of home) nor a project file can make it readable.
#[test]
fn agent_tokens_are_readable_only_when_the_agents_directory_is_granted() {
    require_sandbox!();
    let world = World::new();
    let token = world.home.join(".claude/.credentials.json");
    let state = world.home.join(".claude");
    let home = world.home.to_str().unwrap().to_string();
    let read = format!(
        "cat {} ; echo ; echo > {}/settings.json && echo STATE-WRITTEN",
        shq(token.to_str().unwrap()),
        shq(state.to_str().unwrap())
    );
    let sbx = |flags: &[&str]| {
        let mut cmd = world.sbx_std();
        cmd.arg("run")
            .args(flags)
            .args(["--", "sh", "-c", &read])
            .stdin(Stdio::null());
        cmd.output().unwrap()
    };
    // Given the agent's directory: its token and state are the agent's.
    let given = sbx(&["--writable", state.to_str().unwrap()]);
    assert!(stdout(&given).contains(SECRET), "{}", both(&given));
    assert_line(&given, "STATE-WRITTEN");
    // Home writable, which holds the directory: still hidden.
    let home_out = sbx(&["--writable", &home]);
    assert_no_secret(&home_out);
    assert_line(&home_out, "STATE-WRITTEN");
    // A project file narrowing that grant to the agent's directory: hidden.
    util::write(
        &world.project.join(".sbx.toml"),
        &format!("[sandbox]\nwritable = [{:?}]\n", state.to_str().unwrap()),
    );
    let narrowed = sbx(&["--writable", &home]);
    assert_no_secret(&narrowed);
    // Nothing given: hidden, and the state read-only as any other file
    // outside the project.
    std::fs::remove_file(world.project.join(".sbx.toml")).unwrap();
    let none = sbx(&[]);
    assert_no_secret(&none);
    assert_no_line_starting(&none, "STATE-WRITTEN");
}

/// npm, go's build cache and uv fail without a writable cache. When theirs
/// in home is not writable, each project gets one of sbx's: writable, seen
/// by no other project, while the user's own cache stays read-only.
#[test]
fn tools_get_a_per_project_cache_when_theirs_is_read_only() {
    require_sandbox!();
    let world = World::new();
    std::fs::create_dir_all(world.home.join(".npm")).unwrap();
    let script =
        "echo \"npm=$npm_config_cache\"; echo \"go=$GOCACHE\"; echo \"uv=$UV_CACHE_DIR\"; \
                  touch \"$npm_config_cache/written\" && echo CACHE-WRITTEN; \
                  touch \"$HOME/.npm/written\" && echo OWN-WRITTEN";
    let out = Sbx.run_sh(&world, script);
    let text = stdout(&out);
    let npm = text
        .lines()
        .find_map(|l| l.strip_prefix("npm="))
        .unwrap_or_default()
        .to_string();
    let cache = world.home.join(".cache/sbx/projects");
    assert!(
        std::path::Path::new(&npm).starts_with(&cache),
        "{}",
        both(&out)
    );
    for var in ["go=", "uv="] {
        let line = text
            .lines()
            .find(|l| l.starts_with(var))
            .unwrap_or_default();
        assert!(
            line.contains("/.cache/sbx/projects/"),
            "{var}: {}",
            both(&out)
        );
    }
    assert_line(&out, "CACHE-WRITTEN");
    assert!(std::path::Path::new(&npm).join("written").exists());
    assert_no_line_starting(&out, "OWN-WRITTEN");
    assert!(!world.home.join(".npm/written").exists());
    // Another project: another cache.
    let other = world.home.join("other project");
    std::fs::create_dir_all(&other).unwrap();
    util::git(&other, &["init", "-q"]);
    let mut cmd = world.sbx_std();
    cmd.current_dir(&other)
        .args(["run", "--", "sh", "-c", "echo \"npm=$npm_config_cache\""])
        .stdin(Stdio::null());
    let out2 = cmd.output().unwrap();
    let npm2 = stdout(&out2)
        .lines()
        .find_map(|l| l.strip_prefix("npm=").map(str::to_string))
        .unwrap_or_default();
    assert!(
        std::path::Path::new(&npm2).starts_with(&cache),
        "{}",
        both(&out2)
    );
    assert_ne!(npm, npm2);
    // With its own cache made writable, the tool keeps it.
    let mut cmd = world.sbx_std();
    cmd.args(["run", "--writable"])
        .arg(world.home.join(".npm"))
        .args(["--", "sh", "-c", "echo \"npm=${npm_config_cache:-unset}\""])
        .stdin(Stdio::null());
    let out3 = cmd.output().unwrap();
    assert_line(&out3, "npm=unset");
    // The cache directory says whose it is.
    let owner = std::path::Path::new(&npm).parent().unwrap().join("PROJECT");
    assert_eq!(
        std::fs::read(&owner).unwrap(),
        world.project.as_os_str().as_encoded_bytes()
    );
    // sbx's cache directory inside a writable root is read-only, so its
    // caches would be too: no redirect then.
    let mut cmd = world.sbx_std();
    cmd.env("XDG_CACHE_HOME", world.project.join("cache"))
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "echo \"npm=${npm_config_cache:-unset}\"",
        ])
        .stdin(Stdio::null());
    let out4 = cmd.output().unwrap();
    assert_line(&out4, "npm=unset");
}
