//! Narrowing only: a project `.sbx.toml` cannot widen what the user's own
//! configuration allows, and its narrowings are honoured.

use super::*;

/// The user's own, strict configuration.
const USER: &str = "[sandbox]\nnetwork = \"deny\"\nallow_unsandboxed = false\nenabled = true\nwritable = [\".\", \"/tmp\"]\n";

/// A world with the strict user file and a project file asking for `project`.
fn narrowing_world(project: &str) -> World {
    let world = World::new();
    world.user_config(USER);
    write(
        &world.project.join(".sbx.toml"),
        &format!("[sandbox]\n{project}\n"),
    );
    world
}

/// The warnings `sbx check --format json` reports (no sandbox needed).
fn check_warnings(world: &World) -> Vec<String> {
    let out = world
        .sbx()
        .args(["check", "--format", "json"])
        .timeout(DEADLINE)
        .output()
        .unwrap();
    // 0 with a backend, 1 without one; the report is printed either way.
    assert!(matches!(out.status.code(), Some(0 | 1)), "{out:?}");
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    value["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap().to_string())
        .collect()
}

/// Whether some line of `text` warns that `key` from the project file was ignored.
fn warns_ignored(text: &str, world: &World, key: &str) -> bool {
    let file = world.project.join(".sbx.toml").display().to_string();
    text.lines()
        .any(|l| l.contains(&file) && l.contains(&format!("ignored `{key}")))
}

fn assert_check_warns(world: &World, keys: &[&str]) {
    let warnings = check_warnings(world).join("\n");
    for key in keys {
        assert!(
            warns_ignored(&warnings, world, key),
            "no warning that the project's `{key}` was ignored:\n{warnings}"
        );
    }
}

/// The network cannot be opened: bwrap still unshares it.
fn assert_network_still_denied(world: &World) {
    let args = profile_args(world, &[]);
    assert!(
        args.iter().any(|a| a == "--unshare-net"),
        "the project file opened the network: {args:?}"
    );
}

/// Home is still not writable.
fn assert_home_still_read_only(world: &World) {
    let args = profile_args(world, &[]);
    assert!(
        !mounts(&args, "--bind", &world.home),
        "the project file made HOME writable: {args:?}"
    );
    assert!(
        !mounts(&args, "--bind", Path::new("/")),
        "the project file made / writable: {args:?}"
    );
}

/// `sbx run --unsandboxed` is still refused before anything runs (no terminal
/// is needed to be refused), and the warning for the project file is printed.
fn assert_unsandboxed_still_refused(world: &World) {
    let marker = world.project.join("MARKER");
    let out = world
        .sbx()
        .args(["run", "--unsandboxed", "--", "sh", "-c"])
        .arg(format!("touch '{}'", marker.display()))
        .write_stdin("yes\n")
        .timeout(DEADLINE)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("allow_unsandboxed"), "{stderr}");
    assert!(
        warns_ignored(&stderr, world, "allow_unsandboxed"),
        "no warning naming the key and the file:\n{stderr}"
    );
    assert!(!marker.exists(), "the command ran unsandboxed");
}

/// A real run: warnings naming each key and the file are printed on stderr,
/// the command is inside the sandbox, cannot write to HOME, and has no network.
fn assert_real_run_stays_narrow(world: &World, keys: &[&str]) {
    let outside = world.home.join("x");
    let out = world
        .sbx()
        .args(["run", "--", "sh", "-c"])
        .arg(
            "echo \"sandbox=$SBX_SANDBOX\"; \
             echo \"interfaces=$(grep -c : /proc/net/dev)\"; \
             touch ~/x && echo home-written",
        )
        .timeout(DEADLINE)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    for key in keys {
        assert!(
            warns_ignored(&stderr, world, key),
            "no warning on stderr that the project's `{key}` was ignored:\n{stderr}"
        );
    }
    assert!(
        stdout.contains("sandbox=1\n"),
        "the command did not run in the sandbox:\n{stdout}\n{stderr}"
    );
    // Reduced mode has no network namespace: the host's interfaces are
    // listed, and no socket can reach them (`reduced::the_network_is_denied`).
    if !crate::util::unclaimed(&out, crate::util::LOOPBACK_DENIED) {
        assert!(
            stdout.contains("interfaces=1\n"),
            "the command sees more than loopback:\n{stdout}\n{stderr}"
        );
    }
    assert!(!stdout.contains("home-written"), "{stdout}\n{stderr}");
    assert!(!outside.exists(), "the command wrote ~/x on the host");
    assert!(
        !stderr.contains("NOT sandboxed") && !stderr.contains("sandbox disabled"),
        "{stderr}"
    );
}

#[test]
fn project_cannot_open_the_network() {
    let world = narrowing_world("network = \"allow\"");
    assert_network_still_denied(&world);
    assert_check_warns(&world, &["network"]);
    let world = narrowing_world("network = \"allowlist\"\nnetwork_allowlist = [\"github.com\"]");
    assert_network_still_denied(&world);
    assert_check_warns(&world, &["network"]);
}

#[test]
fn project_cannot_open_the_network_in_a_real_run() {
    require_sandbox!();
    let world = narrowing_world("network = \"allow\"");
    assert_real_run_stays_narrow(&world, &["network"]);
}

#[test]
fn project_cannot_disable_the_sandbox() {
    let world = narrowing_world("enabled = false");
    assert_check_warns(&world, &["enabled"]);
    assert_network_still_denied(&world);
}

#[test]
fn project_cannot_disable_the_sandbox_in_a_real_run() {
    require_sandbox!();
    let world = narrowing_world("enabled = false");
    assert_real_run_stays_narrow(&world, &["enabled"]);
}

#[test]
fn project_cannot_make_home_writable() {
    let world = narrowing_world("writable = [\"~\"]");
    assert_home_still_read_only(&world);
    assert_check_warns(&world, &["writable"]);
    // Nor through an absolute path, nor through `filesystem = false`.
    let world = narrowing_world("");
    write(
        &world.project.join(".sbx.toml"),
        &format!("[sandbox]\nwritable = [\"{}\"]\n", world.home.display()),
    );
    assert_home_still_read_only(&world);
    assert_check_warns(&world, &["writable"]);
    let world = narrowing_world("filesystem = false");
    assert_home_still_read_only(&world);
    assert_check_warns(&world, &["filesystem"]);
}

#[test]
fn project_cannot_make_home_writable_in_a_real_run() {
    require_sandbox!();
    let world = narrowing_world("writable = [\"~\"]");
    assert_real_run_stays_narrow(&world, &["writable"]);
}

#[test]
fn project_cannot_allow_unsandboxed() {
    let world = narrowing_world("allow_unsandboxed = true");
    assert_check_warns(&world, &["allow_unsandboxed"]);
    assert_unsandboxed_still_refused(&world);
}

#[test]
fn project_cannot_widen_anything_at_once() {
    let all = "network = \"allow\"\nenabled = false\nwritable = [\"~\"]\nallow_unsandboxed = true";
    let world = narrowing_world(all);
    assert_network_still_denied(&world);
    assert_home_still_read_only(&world);
    assert_check_warns(
        &world,
        &["network", "enabled", "writable", "allow_unsandboxed"],
    );
    assert_unsandboxed_still_refused(&world);
}

#[test]
fn project_cannot_widen_anything_at_once_in_a_real_run() {
    require_sandbox!();
    let all = "network = \"allow\"\nenabled = false\nwritable = [\"~\"]\nallow_unsandboxed = true";
    let world = narrowing_world(all);
    assert_real_run_stays_narrow(
        &world,
        &["network", "enabled", "writable", "allow_unsandboxed"],
    );
}

#[test]
fn project_read_only_is_honoured_in_the_plan() {
    let world = narrowing_world("filesystem = \"read-only\"");
    let args = profile_args(&world, &[]);
    assert!(
        !mounts(&args, "--bind", &world.project),
        "the project is still writable: {args:?}"
    );
    assert!(
        mounts(&args, "--ro-bind", &world.project),
        "the project is not readable: {args:?}"
    );
    assert!(
        args.windows(2).any(|w| w == ["--tmpfs", "/"]),
        "read-only mode starts from an empty root: {args:?}"
    );
    assert!(check_warnings(&world).is_empty());
}

#[test]
fn project_read_only_makes_project_writes_fail() {
    require_sandbox!();
    let world = narrowing_world("filesystem = \"read-only\"");
    let target = world.project.join("written");
    // Regression: read-only mode once could not start when sbx lived outside
    // the system paths (the inner stage was not visible in the empty root).
    let out = world
        .sbx()
        .args(["run", "--", "sh", "-c"])
        .arg("echo ran; cat .sbx.toml >/dev/null && echo can-read; touch written && echo written")
        .timeout(DEADLINE)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!target.exists(), "the project write reached the host");
    assert_eq!(stdout, "ran\ncan-read\n", "stderr: {stderr}");
    assert_eq!(out.status.code(), Some(1), "touch must fail: {stderr}");
}

#[test]
fn project_deny_read_is_honoured() {
    let world = narrowing_world("deny_read = [\"secret.txt\"]");
    let secret = world.project.join("secret.txt");
    write(&secret, "PROJECT-SECRET-7731\n");
    let args = profile_args(&world, &[]);
    let secret_text = secret.display().to_string();
    assert!(
        args.windows(3).any(|w| w[0] == "--ro-bind"
            && w[1].ends_with("/.cache/sbx/empty")
            && w[2] == secret_text),
        "secret.txt is not masked by an unreadable placeholder: {args:?}"
    );
    assert!(check_warnings(&world).is_empty());
}

#[test]
fn project_deny_read_hides_the_file_in_a_real_run() {
    require_sandbox!();
    let world = narrowing_world("deny_read = [\"secret.txt\"]");
    write(&world.project.join("secret.txt"), "PROJECT-SECRET-7731\n");
    write(&world.project.join("public.txt"), "public\n");
    let out = world
        .sbx()
        .args(["run", "--", "sh", "-c"])
        .arg("cat public.txt; cat secret.txt; cat \"$PWD/secret.txt\"; echo done")
        .timeout(DEADLINE)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // A file in the project, a writable root: reduced mode cannot hide it,
    // and says so.
    if crate::util::unclaimed(&out, crate::util::ENV_READABLE) {
        assert!(stderr.contains("secret.txt"), "{stderr}");
        return;
    }
    assert!(!stdout.contains("PROJECT-SECRET-7731"), "{stdout}");
    assert_eq!(stdout, "public\ndone\n", "stderr: {stderr}");
    // The file is still there on the host, untouched.
    assert_eq!(
        std::fs::read_to_string(world.project.join("secret.txt")).unwrap(),
        "PROJECT-SECRET-7731\n"
    );
}
