//! `sbx check`: the live self-test, and what it says when the sandbox is off
//! or cannot start.

use super::*;

fn check(world: &World, json: bool) -> Output {
    let mut cmd = world.sbx_std();
    cmd.arg("check");
    if json {
        cmd.args(["--format", "json"]);
    }
    cmd.stdin(Stdio::null()).output().unwrap()
}

fn check_json(world: &World) -> (Output, serde_json::Value) {
    let out = check(world, true);
    let value: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON: {e}\n{}", both(&out)));
    (out, value)
}

const CHECK_TESTS: [&str; 3] = [
    "write outside the writable roots",
    "read of a credential",
    "network to the host's loopback",
];

#[test]
fn check_reports_every_self_test_enforced() {
    require_sandbox!();
    let world = World::new();
    let out = check(&world, false);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    let text = stdout(&out);
    for name in CHECK_TESTS {
        assert!(
            text.contains(&format!("test:     {name}: enforced\n")),
            "{name}\n{}",
            both(&out)
        );
    }
    if util::contained() {
        // Reduced mode: the self-tests pass, and what it does not enforce
        // is listed and said in the result.
        assert!(text.contains("backend:  reduced mode"), "{}", both(&out));
        assert!(text.contains("reduced:  NOT enforced: "), "{}", both(&out));
        assert!(text.contains("result:   reduced mode:"), "{}", both(&out));
        return;
    }
    assert!(text.contains("backend:  /"), "{}", both(&out));
    assert!(
        text.contains("result:   everything the policy asks for is enforced"),
        "{}",
        both(&out)
    );

    let (out, v) = check_json(&world);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["enabled"], true, "{v}");
    assert!(v["backend"].is_string(), "{v}");
    assert!(v["backend_error"].is_null(), "{v}");
    assert!(v["sandbox_error"].is_null(), "{v}");
    let tests = v["tests"].as_array().unwrap();
    let names: Vec<&str> = tests.iter().map(|t| t["test"].as_str().unwrap()).collect();
    assert_eq!(names, CHECK_TESTS, "{v}");
    for t in tests {
        assert_eq!(t["result"], "enforced", "{v}");
        assert_eq!(t["ok"], true, "{v}");
    }
}

#[test]
fn check_with_network_allowed_says_so_and_passes() {
    require_sandbox!();
    let world = World::new();
    world.user_config("[sandbox]\nnetwork = \"allow\"\n");
    let out = check(&world, false);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    let text = stdout(&out);
    assert!(
        text.contains("test:     network to the host's loopback: allowed by the policy\n"),
        "{}",
        both(&out)
    );
    assert!(
        text.contains("test:     write outside the writable roots: enforced\n"),
        "{}",
        both(&out)
    );
    let (out, v) = check_json(&world);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["tests"][2]["result"], "allowed by the policy", "{v}");
}

#[test]
fn check_with_a_failing_bwrap_names_the_cause_and_fails() {
    let world = World::new();
    let bwrap = util::fake_bwrap(&world.root.join("fakebin"), UID_MAP_ERROR, None);
    config_bwrap(&world, &bwrap, "");
    let cause = expected_uid_map_cause();
    let out = check(&world, false);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.starts_with("sandbox:  cannot start:"))
        .unwrap_or_else(|| panic!("no `cannot start` line\n{}", both(&out)));
    assert!(line.contains(cause), "{}", both(&out));
    assert!(line.contains(UID_MAP_ERROR), "{}", both(&out));
    assert!(
        text.contains("result:   NOT everything the policy asks for is enforced"),
        "{}",
        both(&out)
    );
    assert!(
        !text.contains(": enforced"),
        "no self-test can pass\n{}",
        both(&out)
    );

    let (out, v) = check_json(&world);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    assert_eq!(v["ok"], false, "{v}");
    assert!(v["sandbox_error"].as_str().unwrap().contains(cause), "{v}");

    // The same for an old bubblewrap.
    let bwrap = util::fake_bwrap(&world.root.join("fakebin2"), UNKNOWN_OPTION_ERROR, None);
    config_bwrap(&world, &bwrap, "");
    let out = check(&world, false);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    assert!(stdout(&out).contains(WHAT_OLD_BWRAP), "{}", both(&out));
}

#[test]
fn check_with_a_missing_bwrap_fails() {
    let world = World::new();
    config_bwrap(&world, Path::new("/nonexistent/bwrap"), "");
    let out = check(&world, false);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    assert!(
        stdout(&out).contains("backend:  NOT available: the configured bwrap /nonexistent/bwrap"),
        "{}",
        both(&out)
    );
    let (out, v) = check_json(&world);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    assert_eq!(v["ok"], false, "{v}");
    assert!(v["backend"].is_null(), "{v}");
    assert!(
        v["backend_error"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/bwrap"),
        "{v}"
    );
}

#[test]
fn check_with_the_sandbox_disabled_says_so() {
    let world = World::new();
    world.user_config("[sandbox]\nenabled = false\n");
    let out = check(&world, false);
    let text = stdout(&out);
    assert!(
        text.contains("sandbox:  disabled (`enabled = false`)"),
        "{}",
        both(&out)
    );
    assert!(!text.contains("test:"), "no self-test runs\n{}", both(&out));
    let (_, v) = check_json(&world);
    assert_eq!(v["enabled"], false, "{v}");
    // Regression: with the sandbox disabled, `sbx check` once ended with
    // "everything the policy asks for is enforced" and exit 0.
    assert!(
        !text.contains("everything the policy asks for is enforced"),
        "sbx check claims enforcement with the sandbox disabled\n{}",
        both(&out)
    );
}
