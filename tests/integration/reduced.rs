//! Reduced mode (Landlock and seccomp, no namespaces), run two ways: asked
//! for on this host (`backend = "reduced"`), and chosen by sbx itself
//! inside a container-like place where bubblewrap cannot create a user
//! namespace (an outer bubblewrap with `--disable-userns` and no
//! capabilities, as Docker's defaults are). CI runs the suite as root and
//! as an unprivileged user, so both run as both.
//!
//! Every verdict is host-side evidence, as in `sandbox_linux`: the shared
//! scenarios, plus what reduced mode does its own way (the network without
//! a namespace, leftovers killed by sbx, "runs later" paths put back after
//! the run).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::host::{assert_no_secret, both, stderr, stdout, tcp_listener, tcp_received};
use crate::scenarios;
use crate::util::{self, Runner, World, DEADLINE};

/// `sbx run` with `backend = "reduced"` from a trusted `--config` file.
pub struct Reduced;

impl Runner for Reduced {
    const SH: &'static str = "sh";
    const GIT: &'static str = "git";
    const LIMIT: Duration = DEADLINE;
    const LISTEN_GRACE: Duration = Duration::from_millis(300);

    fn sbx_cmd(&self, world: &World) -> Command {
        let config = world.root.join("reduced.toml");
        util::write(&config, "[sandbox]\nbackend = \"reduced\"\n");
        let mut cmd = world.sbx_std();
        cmd.env("SBX_CONFIG", config);
        cmd
    }

    fn output(&self, mut cmd: Command) -> Output {
        cmd.output().unwrap()
    }
}

/// `sbx run` on its defaults inside a container-like place: an outer
/// bubblewrap whose user namespace may not create another one, with no
/// capabilities, the host root read-only and the world writable. sbx's own
/// bubblewrap cannot start there, so it falls back to reduced mode.
pub struct Contained;

impl Runner for Contained {
    const SH: &'static str = "sh";
    const GIT: &'static str = "git";
    const LIMIT: Duration = DEADLINE;
    const LISTEN_GRACE: Duration = Duration::from_millis(300);

    fn sbx_cmd(&self, world: &World) -> Command {
        world.contained(&util::sbx_path())
    }

    fn output(&self, mut cmd: Command) -> Output {
        cmd.output().unwrap()
    }
}

/// Whether reduced mode can run here (Landlock ABI 3); as with the full
/// sandbox, `SBX_TEST_REQUIRE_SANDBOX=1` turns a skip into a failure.
fn landlock_available() -> bool {
    static PROBE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let result = PROBE.get_or_init(|| {
        let out = Reduced.run(&World::new(), &["--require=reduced"], &["true"], &[]);
        if out.status.success() {
            Ok(())
        } else {
            Err(stderr(&out))
        }
    });
    match result {
        Ok(()) => true,
        Err(why) if std::env::var_os("SBX_TEST_REQUIRE_SANDBOX").is_some_and(|v| v == "1") => {
            panic!("SBX_TEST_REQUIRE_SANDBOX=1 but reduced mode cannot run here: {why}")
        }
        Err(why) => {
            eprintln!("skipped: reduced mode cannot run here: {why}");
            false
        }
    }
}

macro_rules! require_landlock {
    () => {
        if !landlock_available() {
            return;
        }
    };
}

/// Each test, once per runner.
macro_rules! both_ways {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;
            #[test]
            fn asked_for() {
                require_landlock!();
                $body(&Reduced);
            }
            #[test]
            fn in_a_container() {
                require_landlock!();
                $body(&Contained);
            }
        }
    };
}

/// Every run says it is reduced mode, why, and what it does not enforce
/// (a `.env` in the project stays readable); never "NOT sandboxed".
fn says_what_it_does_not_enforce<R: Runner>(r: &R) {
    let world = World::new();
    util::write(&world.project.join(".env"), "K=V\n");
    let out = r.run(&world, &[], &["true"], &[]);
    assert!(out.status.success(), "{}", both(&out));
    let err = stderr(&out);
    assert!(err.contains("reduced mode ("), "{err}");
    assert!(err.contains("Landlock ABI"), "{err}");
    assert!(err.contains("not enforced here:"), "{err}");
    assert!(err.contains(".env"), "{err}");
    assert!(!err.contains("NOT sandboxed"), "{err}");
}

both_ways!(says_what_it_does_not_enforce, says_what_it_does_not_enforce);

both_ways!(writes_outside_writable_roots_are_refused, |r| {
    let world = World::new();
    scenarios::writes_outside_writable_roots_are_refused(r, &world, "", |_| {});
});

both_ways!(writes_in_project_and_tmp_reach_the_host, |r| {
    let world = World::new();
    scenarios::writes_in_project_and_tmp_reach_the_host(r, &world, Path::new("/tmp"), |_, _| {});
});

both_ways!(credentials_are_unreadable, |r| {
    let world = World::new();
    scenarios::credentials_are_unreadable_through_a_project_symlink(r, &world, &[]);
});

both_ways!(a_symlinked_credential_dir_is_unreadable, |r| {
    scenarios::symlinked_credential_dir_is_unreadable_at_both_spellings(r);
});

both_ways!(credential_variables_are_removed, |r| {
    scenarios::credential_env_vars_are_removed(r, &[], &["GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY"]);
});

both_ways!(the_exit_code_comes_back, |r| {
    scenarios::exit_code_comes_back(r);
});

/// The host's loopback receives nothing over TCP or UDP, and the same
/// connection works without sbx (the control).
fn network_is_denied<R: Runner>(r: &R) {
    let world = World::new();
    let (tcp, port) = tcp_listener();
    let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let udp_port = udp.local_addr().unwrap().port();
    let script = format!(
        "import socket
for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
    try:
        s = socket.socket(socket.AF_INET, kind)
        if kind == socket.SOCK_STREAM:
            s.connect(('127.0.0.1', {port})); s.send(b'TCP-LEAK')
        else:
            s.sendto(b'UDP-LEAK', ('127.0.0.1', {udp_port}))
        print('sent', kind)
    except OSError as e:
        print('refused', kind, e)
try:
    s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM); s.connect(('::1', {port})); print('sent v6')
except OSError as e:
    print('refused v6', e)
"
    );
    let out = r.run(&world, &[], &["python3", "-c", &script], &[]);
    assert!(
        tcp_received(&tcp, R::LISTEN_GRACE).is_none(),
        "{}",
        both(&out)
    );
    let mut buf = [0u8; 64];
    assert!(udp.recv(&mut buf).is_err(), "{}", both(&out));
    assert_eq!(stdout(&out).matches("refused").count(), 3, "{}", both(&out));
    // Control: with the network allowed, the same connection arrives.
    let out = r.run(
        &world,
        &["--network", "allow"],
        &["python3", "-c", &script],
        &[],
    );
    assert!(
        tcp_received(&tcp, Duration::from_secs(5)).is_some(),
        "{}",
        both(&out)
    );
}

both_ways!(the_network_is_denied, network_is_denied);

/// In allowlist mode only the proxy's port can be reached: a direct
/// connection to another loopback port is refused, and the proxy answers.
fn allowlist_goes_through_the_proxy_only<R: Runner>(r: &R) {
    let world = World::new();
    let (tcp, port) = tcp_listener();
    let script = format!(
        "import os, socket
proxy = os.environ['HTTP_PROXY'].rsplit(':', 1)[1]
try:
    s = socket.create_connection(('127.0.0.1', {port}), timeout=5); s.send(b'DIRECT'); print('direct sent')
except OSError as e:
    print('direct refused', e)
try:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', int(proxy))); print('udp sent')
except OSError as e:
    print('udp refused', e)
try:
    l = socket.socket(); l.listen(); print('listen allowed', l.getsockname())
except OSError as e:
    print('listen refused', e.errno)
s = socket.create_connection(('127.0.0.1', int(proxy)), timeout=5)
s.send(b'GET http://not-allowed.invalid/ HTTP/1.1\\r\\nHost: not-allowed.invalid\\r\\n\\r\\n')
print('proxy said', s.recv(64).split(b'\\r\\n')[0].decode())
"
    );
    let out = r.run(
        &world,
        &["--allow-domain", "example.invalid"],
        &["python3", "-c", &script],
        &[],
    );
    assert!(
        tcp_received(&tcp, R::LISTEN_GRACE).is_none(),
        "{}",
        both(&out)
    );
    let text = stdout(&out);
    assert!(text.contains("direct refused"), "{}", both(&out));
    assert!(text.contains("udp refused"), "{}", both(&out));
    // Listening would bind a port of every address, unseen by Landlock.
    assert!(text.contains("listen refused 1"), "{}", both(&out));
    assert!(text.contains("proxy said HTTP/1.1"), "{}", both(&out));
}

both_ways!(the_allowlist_goes_through_the_proxy_only, |r| {
    allowlist_goes_through_the_proxy_only(r)
});

/// The seccomp list of full mode holds: no new namespace, no terminal
/// injection request, no Unix socket, no ptrace.
fn the_seccomp_list_holds<R: Runner>(r: &R) {
    let world = World::new();
    let script = "import ctypes, fcntl, os, socket, termios
libc = ctypes.CDLL(None, use_errno=True)
print('unshare', libc.unshare(0x10000000), ctypes.get_errno())
try:
    socket.socket(socket.AF_UNIX); print('unix allowed')
except OSError as e:
    print('unix refused', e.errno)
print('ptrace', libc.ptrace(16, os.getppid(), 0, 0), ctypes.get_errno())
r, w = os.pipe()
try:
    fcntl.ioctl(r, termios.TIOCSTI, b'x'); print('tiocsti allowed')
except OSError as e:
    print('tiocsti', e.errno)
";
    let out = r.run(&world, &[], &["python3", "-c", script], &[]);
    let text = stdout(&out);
    assert!(text.contains("unshare -1 1\n"), "{}", both(&out));
    assert!(text.contains("unix refused 1\n"), "{}", both(&out));
    assert!(text.contains("ptrace -1 1\n"), "{}", both(&out));
    assert!(text.contains("tiocsti 1\n"), "{}", both(&out));
}

both_ways!(the_seccomp_list_holds, the_seccomp_list_holds);

/// A host process of the same user cannot be signalled, and a process the
/// command leaves in the background is gone once sbx has returned.
fn processes_stay_inside<R: Runner>(r: &R) {
    let world = World::new();
    let mut victim = Command::new("sleep")
        .arg("300")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid_file = world.project.join("bg.pid");
    let out = r.run_sh(
        &world,
        &format!(
            "kill -9 {victim} ; echo kill-exit $?
             (setsid sleep 300 > /dev/null 2>&1 & echo $! > bg.pid) ; sleep 300 &
             echo started",
            victim = victim.id()
        ),
    );
    let alive = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(
        alive,
        "a host process was killed from the sandbox: {}",
        both(&out)
    );
    assert!(stdout(&out).contains("started"), "{}", both(&out));
    let bg: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The contained runner sees the pid of its own PID namespace: look
    // for a `sleep 300` of ours instead.
    let deadline = Instant::now() + Duration::from_secs(10);
    let leftover = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
            cmdline == b"sleep\x00300\x00"
                && env
                    .windows(world.home.as_os_str().len())
                    .any(|w| w == world.home.as_os_str().as_encoded_bytes())
        })
    };
    while leftover() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !leftover(),
        "a background process outlived sbx ({bg}): {}",
        both(&out)
    );
}

both_ways!(processes_stay_inside, processes_stay_inside);

/// "Runs later" paths are writable during the run, and put back after it:
/// an edited hook, a new hook, an appended `.envrc`, a new `.vscode` file
/// and a dangerous git setting are all gone from their places afterwards
/// (exit 125); what the command wrote is kept aside, never deleted; an
/// everyday git setting made alone lands.
fn runs_later_paths_are_put_back<R: Runner>(r: &R) {
    let world = World::new();
    world.git_repo();
    util::write(
        &world.project.join(".git/hooks/pre-commit"),
        "#!/bin/sh\nexit 0\n",
    );
    util::write(&world.project.join(".envrc"), "export A=1\n");
    util::write(&world.project.join(".vscode/settings.json"), "{}\n");
    let out = r.run_sh(
        &world,
        "echo 'touch \"$HOME/SBX_PWN\"' >> .git/hooks/pre-commit
         printf '#!/bin/sh\\ntouch \"$HOME/SBX_PWN\"\\n' > .git/hooks/post-checkout
         echo 'touch \"$HOME/SBX_PWN\"' >> .envrc
         echo '{}' > .vscode/tasks.json
         git config user.email agent@example.invalid
         git config core.fsmonitor ./evil.sh
         echo ok > control.txt",
    );
    let p = &world.project;
    assert_eq!(
        std::fs::read_to_string(p.join(".git/hooks/pre-commit")).unwrap(),
        "#!/bin/sh\nexit 0\n",
        "{}",
        both(&out)
    );
    assert!(
        !p.join(".git/hooks/post-checkout").exists(),
        "{}",
        both(&out)
    );
    assert_eq!(
        std::fs::read_to_string(p.join(".envrc")).unwrap(),
        "export A=1\n"
    );
    assert!(!p.join(".vscode/tasks.json").exists(), "{}", both(&out));
    // All or nothing, as in full mode: the refused setting keeps the
    // everyday one out too, and both are named.
    let config = std::fs::read_to_string(p.join(".git/config")).unwrap();
    assert!(!config.contains("fsmonitor"), "{config}\n{}", both(&out));
    assert!(stderr(&out).contains("core.fsmonitor"), "{}", both(&out));
    // Nothing deleted: the command's versions are kept aside.
    let aside: Vec<PathBuf> = std::fs::read_dir(p)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|e| e.to_string_lossy().contains(".sbx-blocked"))
        .collect();
    assert!(!aside.is_empty(), "{}", both(&out));
    assert!(!world.home.join("SBX_PWN").exists());
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(p.join("control.txt").is_file(), "{}", both(&out));
    assert_no_secret(&out);
    // An everyday setting alone lands, and the run is clean.
    let out = r.run_sh(&world, "git config user.email agent@example.invalid");
    assert!(out.status.success(), "{}", both(&out));
    let config = std::fs::read_to_string(p.join(".git/config")).unwrap();
    assert!(
        config.contains("agent@example.invalid"),
        "{config}\n{}",
        both(&out)
    );
}

both_ways!(runs_later_paths_are_put_back, runs_later_paths_are_put_back);

/// `require = true` refuses reduced mode (the full sandbox only), and the
/// command does not run; `--require=reduced` accepts it.
#[test]
fn require_true_refuses_reduced_mode() {
    require_landlock!();
    let world = World::new();
    let marker = world.project.join("ran");
    let out = Contained.run(
        &world,
        &["--require"],
        &["touch", marker.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!marker.exists());
    assert!(
        stderr(&out).contains("refusing reduced mode"),
        "{}",
        both(&out)
    );
    let out = Contained.run(
        &world,
        &["--require=reduced"],
        &["touch", marker.to_str().unwrap()],
        &[],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert!(marker.exists());
}

/// An agent's timeout kills sbx with its whole process group, after the
/// command started a process in a session of its own that waits to plant
/// a git hook. The keeper, outside that group, kills it before it can: the
/// planted file never appears, even once the host lets it go ahead.
#[test]
fn a_leftover_dies_when_sbx_is_killed_with_its_group() {
    require_landlock!();
    let world = World::new();
    world.git_repo();
    let mark = crate::host::unique(7);
    let script = format!(
        "setsid sh -c 'while [ ! -e go ]; do sleep 0.05; done; echo evil > .git/hooks/pre-commit; echo late > late; sleep {mark}' </dev/null >/dev/null 2>&1 &
         echo up > up; exec sleep {mark}"
    );
    leftover_planted_nothing(&world, &["sh", "-c", &script], &mark);
}

/// The same with the leftover waiting for its `vfork` child, which loops
/// before any exec (dash starts every command with vfork): the parent,
/// asleep in the kernel, could not be stopped, so the keeper's freezing
/// rounds ran out their minute, the killing rounds never came, and both
/// outlived the run, stopped (the test above failed that way, rarely,
/// when the keeper met a `sleep` between its vfork and its exec).
#[test]
fn a_leftover_waiting_for_its_vfork_child_dies_when_sbx_is_killed() {
    require_landlock!();
    let world = World::new();
    world.git_repo();
    let mark = crate::host::unique(7);
    let code = "import ctypes, os, time
if ctypes.CDLL(None).vfork() == 0:
    open('forked', 'w').close()
    while not os.path.exists('go'):
        time.sleep(0.05)
    open('.git/hooks/pre-commit', 'w').write('evil')
    open('late', 'w').close()
";
    let script = format!(
        "setsid python3 -c \"$1\" {mark} </dev/null >/dev/null 2>&1 &
         while [ ! -e forked ]; do sleep 0.05; done; echo up > up; exec sleep {mark}"
    );
    leftover_planted_nothing(&world, &["sh", "-c", &script, "sh", code], &mark);
}

/// `sbx run -q -- COMMAND` in a process group of its own, killed with it
/// once the command is up (see [`killed_with_its_group_then_let_go`]);
/// what its leftover would plant once let go never appears.
fn leftover_planted_nothing(world: &World, command: &[&str], mark: &str) {
    use std::os::unix::process::CommandExt;
    let mut cmd = Reduced.sbx_cmd(world);
    cmd.args(["run", "-q", "--"])
        .args(command)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    killed_with_its_group_then_let_go(world, cmd, mark);
    assert!(!world.project.join("late").exists());
    assert!(!world.project.join(".git/hooks/pre-commit").exists());
}

/// The command holds no capability, also when sbx runs as root (bubblewrap
/// drops them in full mode; here the stage does), and System V IPC, which
/// has no namespace of its own here, is refused: a host segment is
/// neither reached nor removed.
fn no_capabilities_and_no_host_ipc<R: Runner>(r: &R) {
    let world = World::new();
    let script = "import ctypes
libc = ctypes.CDLL(None, use_errno=True)
caps = [l for l in open('/proc/self/status') if l.startswith('Cap')]
print('caps', ' '.join(l.split()[1] for l in caps))
print('shmget', libc.shmget(0, 4096, 0o1600), ctypes.get_errno())
print('msgget', libc.msgget(0, 0o1600), ctypes.get_errno())
";
    let out = r.run(&world, &[], &["python3", "-c", script], &[]);
    let text = stdout(&out);
    let caps = text
        .lines()
        .find_map(|l| l.strip_prefix("caps "))
        .unwrap_or_else(|| panic!("{}", both(&out)));
    for set in caps.split(' ').take(3) {
        // CapInh, CapPrm, CapEff.
        assert_eq!(set, "0000000000000000", "{}", both(&out));
    }
    assert!(text.contains("shmget -1 1\n"), "{}", both(&out));
    assert!(text.contains("msgget -1 1\n"), "{}", both(&out));
}

both_ways!(
    no_capabilities_and_no_host_ipc,
    no_capabilities_and_no_host_ipc
);

/// Another terminal of the host (a pty this test opens, with "typed"
/// input waiting) can be neither read nor written from inside: the input
/// is still there for its owner afterwards.
#[test]
fn another_terminal_is_out_of_reach() {
    use std::io::{Read, Write};
    require_landlock!();
    let world = World::new();
    let pty = nix::pty::openpty(None, None).unwrap();
    let name = std::fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&pty.slave)
    ))
    .unwrap();
    let mut master = std::fs::File::from(pty.master);
    master.write_all(b"typed-secret\n").unwrap();
    let out = Reduced.run_sh(
        &world,
        &format!(
            "timeout 3 dd if={0} bs=100 count=1 2>&1; echo written > {0} && echo WROTE",
            name.display()
        ),
    );
    assert!(!stdout(&out).contains("typed-secret"), "{}", both(&out));
    assert!(!stdout(&out).contains("WROTE"), "{}", both(&out));
    // The owner still reads what was typed.
    let mut slave = std::fs::File::from(pty.slave);
    let mut buf = [0u8; 64];
    let n = slave.read(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"typed-secret\n");
}

/// Review finding: a process tree that keeps moving (each process in a
/// session of its own, one of them forking a new process and exiting
/// again and again) outlasted a generation-by-generation kill, and with sbx
/// killed meanwhile the checks never ran. The keeper now freezes the whole
/// tree first: nothing survives to plant the hook once the host lets it.
#[test]
fn a_moving_process_tree_dies_when_sbx_is_killed() {
    use std::os::unix::process::CommandExt;
    require_landlock!();
    let world = World::new();
    world.git_repo();
    let mark = crate::host::unique(9);
    // 27 sleepers three levels deep, and one walker; each plants the hook
    // once `go` appears. All of them carry `mark` in their command line.
    let script = format!(
        r#"import os, sys, time
def plant():
    while not os.path.exists('go'):
        time.sleep(0.02)
    open('.git/hooks/pre-commit', 'w').write('#!/bin/sh\ntouch "$HOME/PWNED"\n')
    os.chmod('.git/hooks/pre-commit', 0o755)
def tree(depth):
    for _ in range(3):
        if os.fork() == 0:
            os.setsid()
            if depth < 2:
                tree(depth + 1)
            plant(); os._exit(0)
if os.fork() == 0:
    os.setsid()
    while not os.path.exists('go'):
        if os.fork() != 0:
            os._exit(0)
        time.sleep(0.005)
    plant(); os._exit(0)
tree(0)
open('up', 'w').write('up')
time.sleep(300)
# {mark}
"#
    );
    let mut cmd = Reduced.sbx_cmd(&world);
    cmd.args(["run", "-q", "--", "python3", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    killed_with_its_group_then_let_go(&world, cmd, &mark);
    assert!(!world.project.join(".git/hooks/pre-commit").exists());
    let _ = world
        .host_cmd("git")
        .args(["commit", "-q", "--allow-empty", "-m", "host"])
        .output()
        .unwrap();
    assert!(!world.home.join("PWNED").exists());
}

/// Review finding: Landlock does not rule `chmod`, so the command could
/// make sbx's cache unreadable, and the check that could not read its copy
/// left the planted hook in place. sbx takes its directories back first,
/// and a copy it cannot trust still moves the command's version away. (As
/// root the check reads a mode-000 file anyway: the unprivileged run of
/// `.ci/run` is the one that fails without the fix.)
#[test]
fn a_cache_made_unreadable_does_not_keep_a_planted_hook() {
    require_landlock!();
    let world = World::new();
    world.git_repo();
    let cache = world.home.join(".cache/sbx");
    let out = Reduced.run_sh(
        &world,
        &format!(
            "printf '#!/bin/sh\\ntouch \"$HOME/PWNED\"\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit
             for d in {c}/pending/* {c}/pending {c}; do chmod 000 \"$d\" && echo LOCKED; done; true",
            c = crate::host::shq_path(&cache)
        ),
    );
    assert!(
        stdout(&out).contains("LOCKED"),
        "the scenario did not happen: {}",
        both(&out)
    );
    assert!(
        !world.project.join(".git/hooks/pre-commit").exists(),
        "{}",
        both(&out)
    );
    let _ = world
        .host_cmd("git")
        .args(["commit", "-q", "--allow-empty", "-m", "host"])
        .output()
        .unwrap();
    assert!(!world.home.join("PWNED").exists(), "{}", both(&out));
    // The next run is not held by it.
    let out = Reduced.run_sh(&world, "echo NEXT");
    assert!(stdout(&out).contains("NEXT"), "{}", both(&out));
}

/// Start `cmd` (sbx, in a process group of its own), wait until its command
/// has written `up`, SIGKILL the whole group (an agent's timeout), write
/// `go` (what a survivor waits for before planting), and wait until no
/// process carrying `mark` in its command line is left: a survivor would
/// have planted by then.
fn killed_with_its_group_then_let_go(world: &World, mut cmd: Command, mark: &str) {
    let mut child = cmd.spawn().unwrap();
    let start = Instant::now();
    while !world.project.join("up").exists() {
        assert!(start.elapsed() < DEADLINE, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let group = format!("-{}", child.id());
    let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    let _ = child.wait();
    // The processes whose command line has every needle, as their stat
    // line and command line (what a failure shows: seen twice, never
    // explained, under load).
    let matching = |needles: &[&str]| -> Vec<String> {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
                needles
                    .iter()
                    .all(|n| cmdline.contains(n))
                    .then(|| format!("{} | {}", stat.trim(), cmdline.trim()))
            })
            .collect()
    };
    let running = |needles: &[&str]| !matching(needles).is_empty();
    // The keeper ends the run once sbx is gone: the leftover is let go
    // only after it has done so (else it could act in the moment between
    // sbx's death and the keeper's kill, which this test is not about).
    let keeper = world.home.join(".cache/sbx");
    let keeper = keeper.to_string_lossy();
    let start = Instant::now();
    while running(&["__keep", &keeper]) {
        assert!(
            start.elapsed() < DEADLINE,
            "the keeper never ended:\n{}\nthe run's:\n{}",
            matching(&["__keep", &keeper]).join("\n"),
            matching(&[mark]).join("\n")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(world.project.join("go"), "").unwrap();
    let start = Instant::now();
    while running(&[mark]) {
        assert!(
            start.elapsed() < DEADLINE,
            "the run's processes never ended:\n{}",
            matching(&[mark]).join("\n")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether a runner starts sbx in the container-like place.
trait Place {
    fn contained(&self) -> bool;
}

impl Place for Reduced {
    fn contained(&self) -> bool {
        util::contained()
    }
}

impl Place for Contained {
    fn contained(&self) -> bool {
        true
    }
}

/// `max_memory` in reduced mode: the keeper and the stage are born in the
/// run's cgroup, as bubblewrap is in full mode.
fn max_memory_holds<R: Runner + Place>(r: &R) {
    let world = World::new();
    crate::limits::max_memory_holds_or_is_named(&world, r.contained(), &|| r.sbx_cmd(&world));
}
both_ways!(max_memory_is_enforced_or_named, max_memory_holds);
