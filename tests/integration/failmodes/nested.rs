//! Nested sbx: a run inside a run stays in the outer sandbox.

use super::*;

#[test]
fn nested_unsandboxed_is_refused() {
    require_sandbox!();
    let world = World::new();
    let sbx = util::sbx_path();
    let out = world
        .sbx_std()
        .args(["run", "--"])
        .arg(&sbx)
        .args(["run", "--unsandboxed", "--", "sh", "-c", WRITE_HOME_EXIT_7])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", both(&out));
    assert!(
        stderr(&out).contains("--unsandboxed cannot be used inside an sbx sandbox"),
        "{}",
        both(&out)
    );
    assert!(!marker(&world).exists(), "{}", both(&out));
}

#[test]
fn nested_run_stays_confined() {
    require_sandbox!();
    let world = World::new();
    let sbx = util::sbx_path();
    let out = world
        .sbx_std()
        .args(["run", "--"])
        .arg(&sbx)
        .args([
            "run",
            "--",
            "sh",
            "-c",
            "touch nested-ok; touch \"$HOME/marker\"; echo done",
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(stdout(&out), "done\n", "{}", both(&out));
    // Positive control: the nested command ran, and could write the project.
    assert!(world.project.join("nested-ok").exists(), "{}", both(&out));
    assert!(
        !marker(&world).exists(),
        "the nested run escaped\n{}",
        both(&out)
    );
    // A nested sbx pointed at a config written inside, which turns the
    // sandbox off: still confined (inside, nothing can leave).
    let script = format!(
        "printf '[sandbox]\\nenabled = false\\n' > off.toml && '{}' run --config off.toml -- sh -c '{}'",
        sbx.display(),
        WRITE_HOME_EXIT_7
    );
    let out = Sbx.run_sh_flags(&world, &[], &script);
    assert!(world.project.join("off.toml").exists(), "{}", both(&out));
    assert!(
        !marker(&world).exists(),
        "the nested run escaped\n{}",
        both(&out)
    );
}
