//! The ways clients invoke a shell: `-c` and its variants, a script on
//! stdin, quoting, statuses, and the sandbox around them.

use super::*;

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
        let out = output(sbx(&world, &["-c", "echo ok"]), None);
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
