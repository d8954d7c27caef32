//! sbx as bash, byte for byte: the same output and status for the same
//! arguments and stdin.

use super::*;

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
