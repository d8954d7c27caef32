//! `enabled = false`: the command runs as is, and says so only when asked.

use super::*;

#[test]
fn disabled_runs_the_command_as_is_and_is_quiet_off_a_terminal() {
    let world = World::new();
    world.user_config("[sandbox]\nenabled = false\n");
    let out = Sbx.run_sh_flags(&world, &[], WRITE_HOME_EXIT_7);
    assert_eq!(out.status.code(), Some(7), "{}", both(&out));
    assert!(marker(&world).exists(), "{}", both(&out));
    assert_eq!(
        stderr(&out),
        "",
        "the default banner is silent off a terminal"
    );
}

/// `--require` asks for a sandbox or nothing: with the sandbox disabled in
/// a trusted config, nothing (eighth review: it ran unsandboxed, silently).
#[test]
fn disabled_with_require_refuses() {
    let world = World::new();
    world.user_config("[sandbox]\nenabled = false\n");
    let out = Sbx.run_sh_flags(&world, &["--require"], WRITE_HOME_EXIT_7);
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!marker(&world).exists(), "the command ran: {}", both(&out));
    assert!(stderr(&out).contains("enabled = false"), "{}", both(&out));
    world.user_config("[sandbox]\nenabled = false\nrequire = true\n");
    let out = Sbx.run_sh_flags(&world, &[], WRITE_HOME_EXIT_7);
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(!marker(&world).exists(), "the command ran: {}", both(&out));
}

#[test]
fn disabled_with_banner_always_says_so_once() {
    let world = World::new();
    world.user_config("[sandbox]\nenabled = false\nbanner = \"always\"\n");
    let out = Sbx.run_sh_flags(&world, &[], WRITE_HOME_EXIT_7);
    assert_eq!(out.status.code(), Some(7), "{}", both(&out));
    assert!(marker(&world).exists(), "{}", both(&out));
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{}", both(&out));
    assert!(lines[0].contains("sandbox disabled"), "{}", both(&out));
    assert!(lines[0].contains("enabled = false"), "{}", both(&out));
    assert_eq!(stdout(&out), "", "sbx never speaks on stdout");
}
