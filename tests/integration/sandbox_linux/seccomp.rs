//! The seccomp filter (terminal injection, io_uring, ptrace, /proc/1/mem,
//! kernel interfaces) and descriptors the caller passes down.

use super::*;

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
    // Refused, it exits at once; let in, it would trace the sleep to its
    // end (some 41 s) and exit 0.
    if let Some(strace) = Some(PathBuf::from("/usr/bin/strace")).filter(|p| p.is_file()) {
        let out = Sbx.run_sh(
            &world,
            &format!(
                "sleep {d} & {s} -p $! -e trace=none -o /dev/null; echo \"strace=$?\"",
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
    // Positive control: opening memory for writing works on the process
    // itself (reduced mode refuses that too: Landlock keeps /proc read-only).
    if !util::contained() {
        assert_line(&out, "OPEN-RW /proc/self/mem");
    }
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
