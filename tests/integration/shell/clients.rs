//! Real clients: being stopped by the client (SIGTERM, SIGKILL), and an
//! agent harness in Python.

use super::*;

#[test]
fn sigterm_from_the_client_stops_the_command() {
    // What a client does on timeout or cancel. bash dies at once (143).
    // Regression: SIGTERM to sbx used to be swallowed and the command ran to
    // its end: sbx blocked the signals it forwards before spawning
    // bubblewrap, which inherited that mask (SigBlk 0x14a07), so the
    // forwarded SIGTERM stayed pending forever (fixed in a883f8c).
    require_sandbox!();
    let world = World::new();
    let secs = unique(1);
    let log = world.root.join("sigterm.log");
    let command = format!("echo started; sleep {secs}; echo after");
    let mut cmd = sbx(&world, &["-c", &command]);
    cmd.stdin(Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(Stdio::null());
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    let started = poll(DEADLINE, || {
        std::fs::read_to_string(&log)
            .ok()
            .filter(|s| s.contains("started"))
    });
    assert!(started.is_some(), "the command never started");
    let sleeping = poll(DEADLINE, || {
        Some(()).filter(|()| !pids_with_argv(&["sleep", &secs]).is_empty())
    });
    assert!(sleeping.is_some(), "the sleep never started");
    let status = Command::new("kill")
        .args(["-TERM", &child.0.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let status = wait_within(&mut child.0, DEADLINE);
    let gone = poll(DEADLINE, || {
        Some(()).filter(|()| pids_with_argv(&["sleep", &secs]).is_empty())
    });
    let log = std::fs::read_to_string(&log).unwrap();
    let Some(status) = status else {
        panic!("sbx was still running {DEADLINE:?} after SIGTERM (stdout so far: {log:?})");
    };
    assert_eq!(shell_status(status), 143, "{status:?}");
    assert!(!log.contains("after"), "the command went on after SIGTERM");
    assert!(gone.is_some(), "the sandboxed sleep survived");
}

#[test]
fn sigkill_from_the_client_ends_the_whole_sandbox() {
    // What `subprocess.run(..., timeout=...)` does: SIGKILL to the shell,
    // then read the pipes to their end. Nothing in the sandbox may survive
    // holding them open.
    require_sandbox!();
    let world = World::new();
    let secs = unique(2);
    let command = format!("echo started; sleep {secs}; echo after");
    let mut cmd = sbx(&world, &["-c", &command]);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = KillOnDrop(cmd.spawn().unwrap());
    let mut stdout = child.0.stdout.take().unwrap();
    let mut first = [0u8; 8];
    stdout.read_exact(&mut first).unwrap();
    assert_eq!(&first, b"started\n");
    let sleeping = poll(DEADLINE, || {
        Some(()).filter(|()| !pids_with_argv(&["sleep", &secs]).is_empty())
    });
    assert!(sleeping.is_some(), "the sleep never started");
    child.0.kill().unwrap();
    let reader = std::thread::spawn(move || {
        let mut rest = Vec::new();
        let _ = stdout.read_to_end(&mut rest);
        rest
    });
    let eof = poll(DEADLINE, || Some(()).filter(|()| reader.is_finished()));
    assert!(eof.is_some(), "stdout stayed open after SIGKILL");
    assert_eq!(
        text(&reader.join().unwrap()),
        "",
        "nothing ran after SIGKILL"
    );
    let gone = poll(DEADLINE, || {
        Some(()).filter(|()| pids_with_argv(&["sleep", &secs]).is_empty())
    });
    assert!(gone.is_some(), "the sandboxed sleep survived SIGKILL");
}

// ---------------------------------------------------------------------------
// A real client: an agent harness in Python
// ---------------------------------------------------------------------------

const PY_CLIENT: &str = r#"
import os, subprocess, sys, time

SHELL = os.environ["SHELL"]
HOME = os.environ["HOME"]
PROJECT = os.getcwd()
SECRET = sys.argv[1].encode()
failures = []

def sh(cmd, **kw):
    return subprocess.run([SHELL, "-c", cmd], capture_output=True, **kw)

def check(name, ok, r):
    if not ok:
        failures.append(f"{name}: rc={r.returncode} out={r.stdout!r} err={r.stderr!r}")

r = sh("echo hello")
check("echo", r.returncode == 0 and r.stdout == b"hello\n" and r.stderr == b"", r)
r = sh("echo oops >&2; exit 3")
check("stderr and status", r.returncode == 3 and r.stdout == b"" and r.stderr == b"oops\n", r)
r = sh("pwd")
check("cwd", r.stdout == (PROJECT + "\n").encode(), r)
r = sh('printf %s "$HOME"')
check("home", r.stdout == HOME.encode(), r)
r = sh("tr a-z A-Z", input=b"abc\n")
check("stdin", r.stdout == b"ABC\n", r)
r = sh("mkdir -p build && echo built > build/out.txt && cat build/out.txt")
check("write in project", r.returncode == 0 and r.stdout == b"built\n", r)
with open(os.path.join(PROJECT, "build", "out.txt")) as f:
    if f.read() != "built\n":
        failures.append("build/out.txt not on the host")
r = sh("cd build && ls && cd .. && grep -rn built build | wc -l")
check("multi-step", r.returncode == 0 and r.stdout == b"out.txt\n1\n", r)
outside = os.path.join(HOME, "outside-client")
r = sh(f"echo pwned > '{outside}'")
check("write outside refused", r.returncode != 0 and b"Read-only file system" in r.stderr, r)
if os.path.exists(outside):
    failures.append(f"{outside} exists on the host")
r = sh("cat ~/.ssh/id_ed25519")
check("credential unreadable", r.returncode != 0 and SECRET not in r.stdout + r.stderr, r)
t0 = time.monotonic()
try:
    sh("sleep 600", timeout=2)
    failures.append("timeout: no TimeoutExpired")
except subprocess.TimeoutExpired:
    pass
if time.monotonic() - t0 > 20:
    failures.append(f"timeout took {time.monotonic() - t0:.1f} s")

print("\n".join(failures) or "CLIENT-OK")
sys.exit(1 if failures else 0)
"#;

#[test]
fn python_agent_harness_runs_commands_through_shell() {
    require_sandbox!();
    let Some(python) = tool("/usr/bin/python3") else {
        return;
    };
    let world = World::new();
    let program = world.root.join("client.py");
    util::write(&program, PY_CLIENT);
    let mut cmd = client(&world, python);
    cmd.arg(&program).arg(SECRET);
    let out = output(cmd, None);
    assert_eq!(text(&out.stdout), "CLIENT-OK\n", "{}", both(&out));
    assert!(out.status.success(), "{}", both(&out));
    assert!(!world.home.join("outside-client").exists());
    assert_eq!(
        std::fs::read_to_string(world.project.join("build/out.txt")).unwrap(),
        "built\n"
    );
}
