//! `--unsandboxed`: a yes on a real terminal, and nothing else, turns it on.

use super::*;

#[test]
fn unsandboxed_without_a_terminal_is_refused() {
    let world = World::new();
    let out = run_without_terminal(
        &world,
        &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
    );
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!marker(&world).exists(), "{}", both(&out));
    let err = stderr(&out);
    assert!(err.contains("needs a terminal"), "{}", both(&out));
    assert!(err.contains("the command was not run"), "{}", both(&out));
}

#[test]
fn unsandboxed_refused_by_user_config() {
    let world = World::new();
    world.user_config("[sandbox]\nallow_unsandboxed = false\n");
    let out = run_without_terminal(
        &world,
        &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
    );
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!marker(&world).exists(), "{}", both(&out));
    assert!(
        stderr(&out).contains("`allow_unsandboxed = false`"),
        "{}",
        both(&out)
    );
}

#[test]
fn unsandboxed_refused_by_user_config_even_on_a_terminal() {
    if !have_python() {
        return;
    }
    let world = World::new();
    world.user_config("[sandbox]\nallow_unsandboxed = false\n");
    let (text, code, prompted) = run_on_pty(
        &world,
        "y\n",
        &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
    );
    assert!(!prompted, "it must not even ask\n{text}");
    assert_eq!(code, 125, "{text}");
    assert!(text.contains("`allow_unsandboxed = false`"), "{text}");
    assert!(!marker(&world).exists(), "{text}");
}

#[test]
fn project_file_cannot_allow_unsandboxed_over_the_user() {
    let world = World::new();
    world.user_config("[sandbox]\nallow_unsandboxed = false\n");
    util::write(
        &world.project.join(".sbx.toml"),
        "[sandbox]\nallow_unsandboxed = true\n",
    );
    let out = run_without_terminal(
        &world,
        &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
    );
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!marker(&world).exists(), "{}", both(&out));
    let err = stderr(&out);
    assert!(
        err.contains("ignored `allow_unsandboxed = true`"),
        "{}",
        both(&out)
    );
    assert!(
        err.contains("`allow_unsandboxed = false`"),
        "{}",
        both(&out)
    );
}

#[test]
fn project_file_cannot_allow_unsandboxed_over_the_user_on_a_terminal() {
    if !have_python() {
        return;
    }
    let world = World::new();
    world.user_config("[sandbox]\nallow_unsandboxed = false\n");
    util::write(
        &world.project.join(".sbx.toml"),
        "[sandbox]\nallow_unsandboxed = true\n",
    );
    let (text, code, prompted) = run_on_pty(
        &world,
        "y\n",
        &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
    );
    assert!(!prompted, "{text}");
    assert_eq!(code, 125, "{text}");
    assert!(!marker(&world).exists(), "{text}");
}

#[test]
fn unsandboxed_yes_on_a_terminal_runs_it_unsandboxed() {
    if !have_python() {
        return;
    }
    let world = World::new();
    let (text, code, prompted) = run_on_pty(
        &world,
        "y\n",
        &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
    );
    assert!(prompted, "no prompt\n{text}");
    assert!(text.contains("run WITHOUT the sandbox"), "{text}");
    assert!(
        text.contains("$HOME/marker"),
        "the prompt shows the command\n{text}"
    );
    assert!(text.contains("NOT sandboxed:"), "{text}");
    assert_eq!(code, 7, "{text}");
    assert!(
        marker(&world).exists(),
        "the confirmed command did not run\n{text}"
    );
}

#[test]
fn unsandboxed_anything_but_yes_does_not_run() {
    if !have_python() {
        return;
    }
    for answer in ["n\n", "whatever\n", "\n", "EOF", "yes please\n"] {
        let world = World::new();
        let (text, code, prompted) = run_on_pty(
            &world,
            answer,
            &["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7],
        );
        assert!(prompted, "answer {answer:?}: no prompt\n{text}");
        assert_eq!(code, 125, "answer {answer:?}\n{text}");
        assert!(text.contains("not confirmed"), "answer {answer:?}\n{text}");
        assert!(
            !marker(&world).exists(),
            "answer {answer:?}: the command ran\n{text}"
        );
    }
}

#[test]
fn shell_mode_never_reads_unsandboxed() {
    require_sandbox!();
    let world = World::new();
    world.user_config("[sandbox]\nbanner = \"always\"\n");
    // As $0 after the command string, and inside it: just text for the shell.
    for args in [
        vec!["-c", "touch \"$HOME/marker\"; echo ran", "--unsandboxed"],
        vec![
            "-c",
            "echo \"$1\"; touch \"$HOME/marker\"; echo ran",
            "sh",
            "--unsandboxed",
        ],
        vec!["-lc", "touch \"$HOME/marker\"; echo ran", "--unsandboxed"],
    ] {
        let out = world
            .sbx_std()
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(stdout(&out).contains("ran"), "{args:?}\n{}", both(&out));
        assert!(!marker(&world).exists(), "{args:?} escaped\n{}", both(&out));
        let err = stderr(&out);
        let backend = if util::contained() {
            "reduced"
        } else {
            "bwrap"
        };
        assert!(
            err.contains(&format!("🔒 sbx: {backend}")),
            "{args:?}\n{}",
            both(&out)
        );
        assert!(!err.contains("NOT sandboxed"), "{args:?}\n{}", both(&out));
    }
    // `sbx -c --unsandboxed`: handed to the shell as bash would take it (an
    // invalid option), inside the sandbox, not read by sbx.
    let out = world
        .sbx_std()
        .args(["-c", "--unsandboxed"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let bash = Command::new("/bin/bash")
        .args(["-c", "--unsandboxed"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), bash.status.code(), "{}", both(&out));
    let err = stderr(&out);
    let backend = if util::contained() {
        "reduced"
    } else {
        "bwrap"
    };
    assert!(
        err.contains(&format!("🔒 sbx: {backend}")),
        "{}",
        both(&out)
    );
    assert!(!err.contains("needs a terminal"), "{}", both(&out));
    // Before the shell options it is not shell mode, and not a flag sbx takes
    // there: a usage error, nothing runs.
    let out = world
        .sbx_std()
        .args(["--unsandboxed", "-c", "touch \"$HOME/marker\""])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!marker(&world).exists(), "{}", both(&out));
}

#[test]
fn shell_mode_unsandboxed_on_a_terminal_never_prompts() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    let (text, _code, prompted) = run_on_pty(
        &world,
        "y\n",
        &["-c", "touch \"$HOME/marker\"; echo ran", "--unsandboxed"],
    );
    assert!(!prompted, "{text}");
    assert!(text.contains("ran"), "{text}");
    assert!(!marker(&world).exists(), "{text}");
}

#[test]
fn no_environment_variable_turns_unsandboxed_on() {
    require_sandbox!();
    let world = World::new();
    for var in [
        "SBX_UNSANDBOXED",
        "SBX_REQUIRE_UNSANDBOXED",
        "SBX_ENABLED",
        "SBX_DISABLE",
    ] {
        for value in ["1", "true", "0", "false"] {
            let out = world
                .sbx_std()
                .env(var, value)
                .args(["run", "--", "sh", "-c", "touch \"$HOME/marker\"; echo ran"])
                .stdin(Stdio::null())
                .output()
                .unwrap();
            assert_eq!(stdout(&out), "ran\n", "{var}={value}\n{}", both(&out));
            assert!(
                !marker(&world).exists(),
                "{var}={value} escaped\n{}",
                both(&out)
            );
            assert!(!stderr(&out).contains("NOT sandboxed"), "{}", both(&out));
        }
    }
}
