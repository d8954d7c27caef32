//! Shell mode as clients use it: agents and editors set `SHELL` to sbx and
//! run `$SHELL -c CMD`, `$SHELL -lc CMD`, a script on stdin, or an
//! interactive login shell in a terminal. sbx must then behave exactly like
//! bash (stdin, stdout, stderr, exit status), only sandboxed.
//!
//! Where it can, each test compares sbx with `/bin/bash` (the default inner
//! shell, so `$0` and bash's own messages are spelt the same) run directly on
//! the host with the same environment, working directory and stdin.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use crate::host::{both, shq, shq_path};
use crate::require_sandbox;
use crate::util::{self, sbx_path, World, DEADLINE, SECRET};

/// The inner shell sbx runs by default, used as the reference.
const BASH: &str = "/bin/bash";

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

/// `program` with exactly the World's environment and working directory (the
/// ones `World::sbx_std` uses), plus `SHELL` naming sbx, as a client that
/// uses sbx as its shell has it.
fn client(world: &World, program: impl AsRef<OsStr>) -> Command {
    let mut cmd = world.host_cmd(program);
    cmd.env("SHELL", sbx_path());
    cmd
}

/// `$SHELL ARGS...` with `SHELL` naming sbx.
fn sbx(world: &World, args: &[&str]) -> Command {
    let mut cmd = client(world, sbx_path());
    cmd.args(args);
    cmd
}

/// The same arguments given to bash directly, outside the sandbox.
fn bash(world: &World, args: &[&str]) -> Command {
    let mut cmd = client(world, BASH);
    cmd.args(args);
    cmd
}

/// `/bin/sh -c SCRIPT` on the host, for scripts that run `"$SHELL"` exactly
/// as a client's own shell code would.
fn host_sh(world: &World, script: &str) -> Command {
    let mut cmd = client(world, "/bin/sh");
    cmd.arg("-c").arg(script);
    cmd
}

/// Run to completion with `stdin` (closed when `None`), capturing stdout and
/// stderr; panic if it takes longer than `DEADLINE`.
fn output(cmd: Command, stdin: Option<&[u8]>) -> Output {
    output_within(cmd, stdin, DEADLINE)
}

/// The same with a deadline of `limit`.
fn output_within(mut cmd: Command, stdin: Option<&[u8]>, limit: Duration) -> Output {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let shown = format!("{cmd:?}");
    let mut child = cmd.spawn().unwrap();
    let input = stdin.map(<[u8]>::to_vec);
    let pipe = child.stdin.take();
    let writer = std::thread::spawn(move || {
        if let (Some(mut pipe), Some(data)) = (pipe, input) {
            // The command may exit without reading everything.
            let _ = pipe.write_all(&data);
        }
    });
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let _ = r.read_to_end(&mut buf);
            buf
        })
    };
    let out = reader(Box::new(child.stdout.take().unwrap()));
    let err = reader(Box::new(child.stderr.take().unwrap()));
    let status = wait_within(&mut child, limit)
        .unwrap_or_else(|| panic!("{shown} did not finish within {limit:?}"));
    writer.join().unwrap();
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Wait for `child` at most `limit`; on timeout kill it and return `None`.
fn wait_within(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The status as a calling shell reports it in `$?`: the exit code, or
/// 128+N for a process killed by signal N. (sbx reports a command killed by
/// signal N as exit code 128+N, by design; bash itself dies of the signal.)
fn shell_status(status: ExitStatus) -> i32 {
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A host tool the test needs; `None` (and a note) when it is missing, so the
/// test is skipped rather than failed on a machine without it.
/// A tool the test needs: skipped loudly when missing, and a failure when
/// SBX_TEST_REQUIRE_SANDBOX=1 (CI installs every one of them).
fn tool(path: &str) -> Option<PathBuf> {
    crate::host::tool(&[path]).map(PathBuf::from)
}

/// A number no other test in this run uses, to tell our processes apart:
/// [`unique`](crate::host::unique) without its dot, so that, as a `sleep`
/// duration, it outlasts the test.
fn unique(base: u32) -> String {
    crate::host::unique(base).replace('.', "")
}

/// Host PIDs of processes whose argv is exactly `argv`.
fn pids_with_argv(argv: &[&str]) -> Vec<u32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if std::fs::read(entry.path().join("cmdline")).is_ok_and(|c| c == want) {
            found.push(pid);
        }
    }
    found
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// Poll `probe` until it returns `Some`, at most `limit`.
fn poll<T>(limit: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = probe() {
            return Some(v);
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills a spawned process on drop, so a failing test leaves nothing behind
/// (sbx runs bubblewrap with `--die-with-parent`: the sandbox goes with it).
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// ---------------------------------------------------------------------------
// sbx as bash, byte for byte
// ---------------------------------------------------------------------------

/// One comparison: the shell's arguments and what goes to its stdin.
struct Case {
    args: &'static [&'static str],
    stdin: Option<&'static [u8]>,
}

const fn c(args: &'static [&'static str]) -> Case {
    Case { args, stdin: None }
}

const fn with_stdin(args: &'static [&'static str], stdin: &'static [u8]) -> Case {
    Case {
        args,
        stdin: Some(stdin),
    }
}

/// Varied commands whose stdout, stderr and status must be the same through
/// sbx as with bash directly. None of them does anything the sandbox blocks
/// (writes outside the project, network, credentials), and none prints what
/// legitimately differs inside (PIDs, `$SHELL`, `SBX_SANDBOX`).
const CASES: &[Case] = &[
    c(&["-c", "echo hello world"]),
    c(&["-c", "printf '%s|%d|%x\\n' str 42 255; printf 'no newline at the end'"]),
    c(&["-c", "echo to-out; echo to-err >&2; echo again-out; echo again-err 1>&2"]),
    c(&["-c", "ls -d . no-such-file-here"]),
    c(&["-c", "no_such_command_sbx_test --flag"]),
    c(&["-c", "for i in 3 1 2; do echo \"item $i\"; done | sort -r"]),
    c(&[
        "-c",
        "cat <<'EOF'\n$HOME stays literal\n  indented \\ backslash\nEOF\ncat <<EOF\nhome is $HOME\nEOF\n",
    ]),
    c(&["-c", "echo 'héllo wörld 日本語 🎉' | wc -c; printf '%s\\n' 'ünïcödé ✓'"]),
    c(&["-c", "printf '\\000\\001\\377raw\\n'; printf '\\000\\377' | od -An -tx1"]),
    c(&["-c", "seq 1 100000"]),
    with_stdin(
        &["-c", "read -r a b; echo \"[$a] [$b]\"; cat; echo end"],
        b"first line here\nsecond\nthird without newline",
    ),
    with_stdin(&["-c", "tr a-z A-Z | wc -c"], &[b'x'; 300_000]),
    c(&["-ec", "echo before; false; echo after"]),
    c(&[
        "-c",
        "set -o pipefail; false | true; echo pipefail=$?; set +o pipefail; true | false | true; echo ${PIPESTATUS[*]}",
    ]),
    c(&["-c", "trap 'echo trap-ran >&2' EXIT; echo body; exit 9"]),
    c(&[
        "-c",
        "f() { local x=$1; echo \"$((x * 2))\"; return 5; }; f 21; echo rc=$?",
    ]),
    c(&["-c", "cd / && pwd && cd - && pwd && basename \"$PWD\""]),
    c(&["-c", "echo \"$HOME|$LANG|$PATH|$XDG_CONFIG_HOME\"; umask; echo $-"]),
    c(&[
        "-c",
        "printf '[%s]\\n' \"$0\" \"$@\"; echo \"$#\"",
        "zero",
        "it's",
        "say \"hi\"",
        "$HOME",
        "back\\slash",
        "new\nline",
        "",
        "*",
        " spaced  ",
    ]),
    c(&["-lc", "echo login; shopt -q login_shell && echo is-login"]),
    c(&["-c", "-l", "echo login; shopt -q login_shell && echo is-login"]),
    c(&["--login", "-c", "shopt -q login_shell && echo is-login"]),
    c(&["-o", "pipefail", "-c", "false | true; echo $?"]),
    c(&[
        "-c",
        "exec 3>&1; echo via-fd3 >&3; { echo grouped-out; echo grouped-err >&2; } 2>&1 | cat",
    ]),
    c(&[
        "-c",
        "sh -c 'echo nested $0 $1' named arg; bash -c 'echo $((6*7))'",
    ]),
    c(&[
        "-c",
        "x='a b  c'; set -- $x; echo $#; echo \"${x// /_}\"; echo ${x^^}; echo $'tab\\there'; printf '%q\\n' \"a b'c\"",
    ]),
    c(&["-c", "type cd; command -v sh; echo ${BASH_VERSINFO[0]}"]),
    c(&["-c", "date -u -d @0 +%Y-%m-%dT%H:%M:%S; TZ=UTC printf '%(%Y)T\\n' 0"]),
    with_stdin(&["-s", "one", "two words"], b"echo \"$# [$1] [$2]\"\nexit 4\n"),
    with_stdin(&[], b"x=5\necho $((x * 2))\necho oops >&2\n"),
];

#[test]
fn output_and_status_match_bash_byte_for_byte() {
    require_sandbox!();
    let world = World::new();
    let mut mismatches = Vec::new();
    for case in CASES {
        let ours = output(sbx(&world, case.args), case.stdin);
        let theirs = output(bash(&world, case.args), case.stdin);
        let same = ours.stdout == theirs.stdout
            && ours.stderr == theirs.stderr
            && shell_status(ours.status) == shell_status(theirs.status);
        if !same {
            mismatches.push(format!(
                "=== {:?}\n--- sbx: {}\n--- bash: {}",
                case.args,
                both(&ours),
                both(&theirs)
            ));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{} of {} commands differ from bash:\n{}",
        mismatches.len(),
        CASES.len(),
        mismatches.join("\n")
    );
}

#[test]
fn a_writer_killed_by_sigpipe_dies_silently_as_in_bash() {
    // Regression: the command used to start with SIGPIPE ignored (inherited
    // from Rust's runtime through fork+exec), so a writer into a closed pipe
    // got EPIPE instead of dying: `yes | head` printed "yes: standard output:
    // Broken pipe" and its status was 1 instead of 141 (fixed in a883f8c).
    require_sandbox!();
    let world = World::new();
    for args in [
        &["-c", "yes | head -n 2; echo \"${PIPESTATUS[@]}\""][..],
        &["-c", "grep -E '^Sig(Ign|Blk)' /proc/self/status"][..],
    ] {
        let ours = output(sbx(&world, args), None);
        let theirs = output(bash(&world, args), None);
        assert_eq!(
            (text(&ours.stdout), text(&ours.stderr)),
            (text(&theirs.stdout), text(&theirs.stderr)),
            "{args:?}: sbx (left) differs from bash (right)"
        );
    }
    // The client side of a pipe closing early: `"$SHELL" -c yes | head -n 1`.
    let out = output(host_sh(&world, "\"$SHELL\" -c yes | head -n 1"), None);
    assert_eq!(text(&out.stdout), "y\n");
    assert_eq!(text(&out.stderr), "", "stderr must stay silent");
}

// ---------------------------------------------------------------------------
// The ways clients invoke a shell
// ---------------------------------------------------------------------------

#[test]
fn dash_c_variants_as_clients_send_them() {
    require_sandbox!();
    let world = World::new();
    // Each line runs "$SHELL" exactly as a client's shell code does.
    let script = r#"
"$SHELL" -c 'echo c-ok'
"$SHELL" -lc 'shopt -q login_shell && echo lc-ok'
"$SHELL" -c -l 'shopt -q login_shell && echo c-l-ok'
"$SHELL" -ec 'echo ec-first; false; echo ec-not-reached'; echo "ec-status=$?"
"$SHELL" -c 'echo $0 $1 "$@"' zero one two
"#;
    let out = output(host_sh(&world, script), None);
    assert_eq!(
        text(&out.stdout),
        "c-ok\nlc-ok\nc-l-ok\nec-first\nec-status=1\nzero one one two\n",
        "{}",
        both(&out)
    );
    assert_eq!(text(&out.stderr), "", "{}", both(&out));
    assert!(out.status.success(), "{}", both(&out));
}

#[test]
fn awkward_strings_survive_quoting() {
    require_sandbox!();
    let world = World::new();
    let awkward = [
        "it's",
        "say \"hi\"",
        "$HOME and `id` and $(id)",
        "back\\slash\\\\n",
        "two\nlines",
        "日本語 ünïcödé 🎉",
        "",
        "  spaces  ",
        "*",
        "-c",
        "--",
    ];
    // As arguments after the command string (argv, no client-side shell).
    let mut args = vec!["-c", "printf '[%s]\\n' \"$@\"", "zero"];
    args.extend(awkward);
    let out = output(sbx(&world, &args), None);
    let want: String = awkward.iter().map(|a| format!("[{a}]\n")).collect();
    assert_eq!(text(&out.stdout), want, "{}", both(&out));
    assert_eq!(text(&out.stderr), "");
    // Inside the command string itself, quoted for bash.
    let command: String = awkward
        .iter()
        .map(|a| format!("printf '[%s]\\n' {}\n", shq(a)))
        .collect();
    let out = output(sbx(&world, &["-c", &command]), None);
    assert_eq!(text(&out.stdout), want, "{}", both(&out));
    // Double quotes, `$` and backslashes interpreted by bash, and a newline
    // inside the command string.
    let out = output(
        sbx(
            &world,
            &[
                "-c",
                "v='x y'\necho \"[$v]\" \"\\$v\" '$v' \"a\\\\b\" \"q\\\"q\"\necho second-line",
            ],
        ),
        None,
    );
    assert_eq!(
        text(&out.stdout),
        "[x y] $v $v a\\b q\"q\nsecond-line\n",
        "{}",
        both(&out)
    );
}

#[test]
fn script_on_stdin_when_shell_names_sbx() {
    require_sandbox!();
    let world = World::new();
    let out = output(host_sh(&world, "echo 'echo hi' | \"$SHELL\""), None);
    assert_eq!(text(&out.stdout), "hi\n", "{}", both(&out));
    assert_eq!(text(&out.stderr), "");
    assert!(out.status.success());
    // A script with state, stderr and a status of its own.
    let out = output(
        sbx(&world, &[]),
        Some(b"x=5\necho $((x * 2))\necho to-err >&2\nexit 4\n"),
    );
    assert_eq!(text(&out.stdout), "10\n", "{}", both(&out));
    assert_eq!(text(&out.stderr), "to-err\n", "{}", both(&out));
    assert_eq!(out.status.code(), Some(4));
    // `-s` with positional parameters.
    let out = output(
        host_sh(
            &world,
            "echo 'echo \"$# [$1] [$2]\"' | \"$SHELL\" -s one 'two words'",
        ),
        None,
    );
    assert_eq!(text(&out.stdout), "2 [one] [two words]\n", "{}", both(&out));
    assert_eq!(text(&out.stderr), "");
}

#[test]
fn pipes_redirections_and_here_docs_inside_the_command() {
    require_sandbox!();
    let world = World::new();
    let command = r#"set -e
echo "to file" > out.txt
echo more >> out.txt
ls no-such-file 2>&1 | grep -c 'no-such-file'
{ echo grouped-out; echo grouped-err >&2; } 2>&1 | tr a-z A-Z
cat > here.txt <<EOF
home=$HOME
literal=\$HOME
EOF
cat < out.txt | wc -l
exec 2> err.log
echo into-the-log >&2
"#;
    let out = output(sbx(&world, &["-c", command]), None);
    assert_eq!(
        text(&out.stdout),
        "1\nGROUPED-OUT\nGROUPED-ERR\n2\n",
        "{}",
        both(&out)
    );
    assert_eq!(text(&out.stderr), "", "{}", both(&out));
    assert!(out.status.success(), "{}", both(&out));
    // Host-side evidence: the files are in the project, with that content.
    let read = |name: &str| std::fs::read_to_string(world.project.join(name)).unwrap();
    assert_eq!(read("out.txt"), "to file\nmore\n");
    assert_eq!(
        read("here.txt"),
        format!("home={}\nliteral=$HOME\n", world.home.display())
    );
    assert_eq!(read("err.log"), "into-the-log\n");
}

#[test]
fn exit_statuses_are_the_commands() {
    require_sandbox!();
    let world = World::new();
    let cases = [
        ("true", 0),
        ("false", 1),
        ("exit 7", 7),
        ("kill -INT $$", 130),
        ("kill -KILL $$", 137),
    ];
    for (command, want) in cases {
        let ours = output(sbx(&world, &["-c", command]), None);
        assert_eq!(
            shell_status(ours.status),
            want,
            "{command}: {}",
            both(&ours)
        );
        assert_eq!(text(&ours.stdout), "", "{command}");
        assert_eq!(text(&ours.stderr), "", "{command}: nothing from sbx");
        let theirs = output(bash(&world, &["-c", command]), None);
        assert_eq!(shell_status(theirs.status), want, "bash -c {command}");
    }
    // What a calling shell sees in `$?`.
    let script: String = cases
        .iter()
        .map(|(command, _)| format!("\"$SHELL\" -c {}; echo $?\n", shq(command)))
        .collect();
    let out = output(host_sh(&world, &script), None);
    assert_eq!(text(&out.stdout), "0\n1\n7\n130\n137\n", "{}", both(&out));
}

#[test]
fn dash_c_prints_nothing_of_its_own_on_stderr() {
    require_sandbox!();
    let world = World::new();
    let out = output(sbx(&world, &["-c", "echo hi"]), None);
    assert_eq!(text(&out.stdout), "hi\n");
    assert_eq!(text(&out.stderr), "", "no banner in -c mode");
    let out = output(sbx(&world, &["-lc", "echo oops >&2"]), None);
    assert_eq!(text(&out.stdout), "");
    assert_eq!(text(&out.stderr), "oops\n", "only the command's own stderr");
    // Not even on a terminal, where the banner would show for `sbx run`:
    // agents often run their shell on a pty.
    let Some(script) = tool("/usr/bin/script") else {
        return;
    };
    let inner = format!("{} -c 'echo hi'", shq_path(&sbx_path()));
    let mut cmd = client(&world, script);
    cmd.env("SHELL", "/bin/sh")
        .args(["-qec", &inner, "/dev/null"]);
    let out = output(cmd, None);
    assert_eq!(text(&out.stdout), "hi\r\n", "{}", both(&out));
    assert!(out.status.success());
}

#[test]
fn dash_c_prints_warnings_and_the_banner_when_asked() {
    require_sandbox!();
    let world = World::new();
    // A warning is due: it is printed even in -c mode, and stdout is untouched.
    world.user_config("[sandbox]\nwritable = [\"~/no-such-dir\"]\n");
    let out = output(sbx(&world, &["-c", "echo hi"]), None);
    assert_eq!(text(&out.stdout), "hi\n");
    let err = text(&out.stderr);
    assert!(
        err.starts_with("⚠ sbx: ") && err.contains("no-such-dir") && err.contains("does not exist"),
        "{}",
        both(&out)
    );
    assert_eq!(err.lines().count(), 1, "{}", both(&out));
    // `banner = "always"` asks for the banner in -c mode too.
    world.user_config("[sandbox]\nbanner = \"always\"\n");
    let out = output(sbx(&world, &["-c", "echo hi"]), None);
    assert_eq!(text(&out.stdout), "hi\n");
    assert!(text(&out.stderr).starts_with("🔒 sbx: "), "{}", both(&out));
}

#[test]
fn dash_c_returns_with_a_network_allowlist() {
    // Regression: with `network = "allowlist"` in the user config, `sbx -c
    // 'echo ok'` printed ok and then usually never returned (18 of 20 runs
    // hung for 10 s by hand). PID 1 started the proxy relay thread before
    // blocking signals for its signalfd, in its own thread only (the relay
    // thread's SigBlk was 0): the command's SIGCHLD went to the relay
    // thread, where it is ignored, so PID 1 never learnt the command ended.
    require_sandbox!();
    let world = World::new();
    world
        .user_config("[sandbox]\nnetwork = \"allowlist\"\nnetwork_allowlist = [\"example.com\"]\n");
    for _ in 0..5 {
        let out = output_within(
            sbx(&world, &["-c", "echo ok"]),
            None,
            Duration::from_secs(15),
        );
        assert_eq!(text(&out.stdout), "ok\n", "{}", both(&out));
        assert!(out.status.success(), "{}", both(&out));
    }
}

#[test]
fn dash_c_is_sandboxed() {
    require_sandbox!();
    let world = World::new();
    let outside = world.home.join("outside-dash-c");
    let out = output(
        sbx(&world, &["-c", &format!("touch {}", shq_path(&outside))]),
        None,
    );
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        text(&out.stderr).contains("Read-only file system"),
        "{}",
        both(&out)
    );
    assert!(
        !outside.exists(),
        "the write outside the project reached the host"
    );
}

// ---------------------------------------------------------------------------
// Being stopped by the client
// ---------------------------------------------------------------------------

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
    let status = wait_within(&mut child.0, Duration::from_secs(10));
    let gone = poll(Duration::from_secs(10), || {
        Some(()).filter(|()| pids_with_argv(&["sleep", &secs]).is_empty())
    });
    let log = std::fs::read_to_string(&log).unwrap();
    let Some(status) = status else {
        panic!("sbx was still running 10 s after SIGTERM (stdout so far: {log:?})");
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
    let eof = poll(Duration::from_secs(10), || {
        Some(()).filter(|()| reader.is_finished())
    });
    assert!(eof.is_some(), "stdout stayed open after SIGKILL");
    assert_eq!(
        text(&reader.join().unwrap()),
        "",
        "nothing ran after SIGKILL"
    );
    let gone = poll(Duration::from_secs(10), || {
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

// ---------------------------------------------------------------------------
// Terminals: TIOCSTI, and an interactive login shell in tmux
// ---------------------------------------------------------------------------

#[test]
fn tiocsti_is_refused_in_shell_mode_on_a_pty() {
    require_sandbox!();
    let (Some(script), Some(python)) = (tool("/usr/bin/script"), tool("/usr/bin/python3")) else {
        return;
    };
    let world = World::new();
    let py = |code: &str| format!("{} -c {}", shq_path(&python), shq(code));
    let sbx_c = |command: &str| format!("{} -c {}", shq_path(&sbx_path()), shq(command));
    let run = |command: &str| {
        let mut cmd = client(&world, &script);
        // `script` runs its command with $SHELL: make that a plain shell, so
        // the command line below is the only sbx involved.
        cmd.env("SHELL", "/bin/sh")
            .args(["-qec", &sbx_c(command), "/dev/null"]);
        output(cmd, None)
    };
    // Control: the command does have a terminal on stdin.
    let out = run(&py("import os; print(os.isatty(0))"));
    assert_eq!(text(&out.stdout), "True\r\n", "{}", both(&out));
    let out = run(&py(
        "import fcntl,termios; fcntl.ioctl(0, termios.TIOCSTI, b\"x\")",
    ));
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        text(&out.stdout).contains("Operation not permitted"),
        "{}",
        both(&out)
    );
}

/// A tmux server on its own socket, killed on drop (also on panic).
struct Tmux {
    tmux: PathBuf,
    sock: PathBuf,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    cwd: PathBuf,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.tmux);
        cmd.env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .arg("-S")
            .arg(&self.sock)
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str]) -> String {
        let out = output(self.cmd(args), None);
        assert!(out.status.success(), "tmux {args:?}: {}", both(&out));
        text(&out.stdout)
    }

    fn pane(&self) -> String {
        self.run(&["capture-pane", "-p", "-J", "-S", "-500"])
    }

    fn type_line(&self, line: &str) {
        self.run(&["send-keys", "-l", line]);
        self.run(&["send-keys", "Enter"]);
    }

    /// Wait until the pane satisfies `ok`; panic with the pane otherwise.
    fn wait(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        poll(Duration::from_secs(30), || {
            Some(self.pane()).filter(|p| ok(p))
        })
        .unwrap_or_else(|| panic!("timed out waiting for {what}; pane:\n{}", self.pane()))
    }

    fn foreground_command(&self) -> String {
        self.run(&["display-message", "-p", "#{pane_current_command}"])
            .trim()
            .to_string()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).output();
    }
}

const PROMPT: &str = "sbx-prompt>";

fn prompts(pane: &str) -> usize {
    pane.lines().filter(|l| l.starts_with(PROMPT)).count()
}

fn has_line(pane: &str, want: &str) -> bool {
    pane.lines().any(|l| l.trim_end() == want)
}

#[test]
fn tmux_default_shell_is_an_interactive_sandboxed_login_shell() {
    require_sandbox!();
    let Some(tmux) = tool("/usr/bin/tmux") else {
        return;
    };
    let world = World::new();
    // A fixed prompt, read by the login shell as any user's profile is.
    util::write(
        &world.home.join(".bash_profile"),
        &format!("PS1='{PROMPT} '\n"),
    );
    let template = client(&world, "tmux");
    let env = template
        .get_envs()
        .filter(|(k, _)| *k != "SHELL")
        .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
        .collect();
    let tmux = Tmux {
        tmux,
        sock: world.root.join("tmux.sock"),
        env,
        cwd: world.project.clone(),
    };
    let sbx = sbx_path();
    // The first window runs a placeholder; the window opened after
    // `default-shell` is set runs sbx as a login shell (argv[0] "-sbx").
    let pane = tmux.run(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-x",
        "120",
        "-y",
        "40",
        "cat",
        ";",
        "set",
        "-g",
        "default-shell",
        sbx.to_str().unwrap(),
        ";",
        "new-window",
        "-P",
        "-F",
        "#{pane_id} #{pane_pid}",
        ";",
        "kill-window",
        "-t",
        ":0",
    ]);
    let (_pane_id, pane_pid) = pane.trim().split_once(' ').unwrap();
    let pane_pid: u32 = pane_pid.parse().unwrap();

    tmux.wait("a prompt", |p| prompts(p) >= 1);
    tmux.type_line("echo marker-$((6*7)); shopt -q login_shell && echo login-yes");
    tmux.wait("marker-42", |p| {
        has_line(p, "marker-42") && has_line(p, "login-yes")
    });
    tmux.type_line("pwd");
    tmux.wait("the project as working directory", |p| {
        has_line(p, world.project.to_str().unwrap())
    });

    // Job control: stop a foreground job, list it, kill it.
    let secs = unique(3);
    let sleep = format!("sleep {secs}");
    tmux.type_line(&sleep);
    poll(Duration::from_secs(30), || {
        Some(()).filter(|()| tmux.foreground_command() == "sleep")
    })
    .expect("sleep never became the foreground job");
    tmux.run(&["send-keys", "C-z"]);
    tmux.wait("Stopped", |p| p.contains("Stopped"));
    tmux.type_line("jobs");
    tmux.wait("jobs listing the stopped sleep", |p| {
        p.lines()
            .filter(|l| l.contains("Stopped") && l.contains(&sleep))
            .count()
            >= 2
    });
    tmux.type_line("kill %1");
    let dead = poll(Duration::from_secs(30), || {
        Some(()).filter(|()| pids_with_argv(&["sleep", &secs]).is_empty())
    });
    assert!(dead.is_some(), "kill %1 did not end the stopped sleep");
    // bash reports the job's end before a later prompt. (Under load, bash
    // 5.2 itself, sandbox or not, sometimes misses the SIGCHLD of a stopped
    // job killed this way and shows it as Stopped until it next reaps a
    // child: running an external command makes it look again.)
    let reported = poll(Duration::from_secs(30), || {
        tmux.type_line("/bin/true; jobs");
        std::thread::sleep(Duration::from_millis(300));
        Some(()).filter(|()| tmux.pane().contains("Terminated"))
    });
    assert!(
        reported.is_some(),
        "bash never reported the job as ended:\n{}",
        tmux.pane()
    );

    // Ctrl-C interrupts the foreground command and the prompt returns.
    tmux.type_line(&sleep);
    poll(Duration::from_secs(30), || {
        Some(()).filter(|()| tmux.foreground_command() == "sleep")
    })
    .expect("sleep never became the foreground job");
    let before = prompts(&tmux.pane());
    tmux.run(&["send-keys", "C-c"]);
    tmux.wait("the prompt after Ctrl-C", |p| prompts(p) > before);
    tmux.type_line("echo status=$?");
    tmux.wait("status 130", |p| has_line(p, "status=130"));

    // Writes: refused outside the project, allowed inside.
    let outside = world.home.join("outside");
    tmux.type_line(&format!(
        "touch {} || echo touch-failed; touch inside-ok && echo touch-ok",
        shq_path(&outside)
    ));
    tmux.wait("the touch results", |p| {
        has_line(p, "touch-failed") && has_line(p, "touch-ok")
    });
    assert!(
        tmux.pane().contains("Read-only file system"),
        "{}",
        tmux.pane()
    );
    assert!(!outside.exists(), "the write outside reached the host");
    assert!(world.project.join("inside-ok").exists());

    // Closing the terminal ends the sandboxed shell.
    drop(tmux);
    let gone = poll(Duration::from_secs(10), || {
        Some(()).filter(|()| !alive(pane_pid))
    });
    assert!(gone.is_some(), "sbx (pid {pane_pid}) outlived its terminal");
}
