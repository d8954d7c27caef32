//! Configuration files.
//!
//! Bad input: in every source (user file, `--config FILE`, `$SBX_CONFIG`, a
//! project `.sbx.toml`, and shell mode) a bad file exits 125 with one line on
//! stderr naming the file, the line and the key, and the command never runs
//! (judged by a marker file it would have created).
//!
//! The narrowing rule: a project `.sbx.toml` cannot widen what the user's own
//! configuration allows; each attempt is ignored with a warning that names the
//! key and the file. Narrowings it asks for are honoured.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a panic is how a test fails

use std::path::{Path, PathBuf};

use predicates::prelude::*;

use crate::require_sandbox;
use crate::util::{write, World, DEADLINE};

// ================================================================ bad input

/// Where the bad file is put, and how sbx is told about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Src {
    /// `~/.config/sbx/config.toml`, `sbx run`.
    User,
    /// `sbx run --config FILE`.
    Flag,
    /// `SBX_CONFIG=FILE sbx run`.
    Env,
    /// `.sbx.toml` in the project, `sbx run`.
    Project,
    /// The user file, in shell mode: `sbx -c CMD`.
    Shell,
}

const ALL_SOURCES: &[Src] = &[Src::User, Src::Flag, Src::Env, Src::Project, Src::Shell];

/// One bad file: its text, and the line and key the message must name.
struct Bad {
    what: &'static str,
    toml: &'static str,
    line: usize,
    key: &'static str,
}

/// Put `toml` where `src` says, run a command that would create a marker
/// file, and return a description of every way the outcome is wrong.
fn run_bad(src: Src, toml: &str, line: usize, key: &str) -> Vec<String> {
    let world = World::new();
    let marker = world.project.join("MARKER");
    let touch = format!("touch '{}'", marker.display());
    let file: PathBuf = match src {
        Src::User | Src::Shell => world.home.join(".config/sbx/config.toml"),
        Src::Flag | Src::Env => world.root.join("explicit config.toml"),
        Src::Project => world.project.join(".sbx.toml"),
    };
    write(&file, toml);
    let mut cmd = world.sbx();
    match src {
        Src::User | Src::Project => {
            cmd.args(["run", "--", "sh", "-c", &touch]);
        }
        Src::Flag => {
            cmd.arg("run")
                .arg("--config")
                .arg(&file)
                .args(["--", "sh", "-c", &touch]);
        }
        Src::Env => {
            cmd.env("SBX_CONFIG", &file)
                .args(["run", "--", "sh", "-c", &touch]);
        }
        Src::Shell => {
            cmd.args(["-c", &touch]);
        }
    }
    let out = cmd.timeout(DEADLINE).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut wrong = Vec::new();
    if marker.exists() {
        wrong.push("THE COMMAND RAN (the marker file exists)".to_string());
    }
    if out.status.code() != Some(125) {
        wrong.push(format!("exit status {:?}, not 125", out.status.code()));
    }
    if !stdout.is_empty() {
        wrong.push(format!("stdout is not empty: {stdout:?}"));
    }
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() != 1 {
        wrong.push(format!("stderr has {} lines, not one", lines.len()));
    }
    let located = format!("{}:{line}:", file.display());
    if !stderr.contains(&located) {
        wrong.push(format!(
            "stderr does not name the file and line as `{located}`"
        ));
    }
    if !stderr.contains(&format!("`{key}`")) {
        wrong.push(format!("stderr does not name the key `{key}`"));
    }
    if wrong.is_empty() {
        Vec::new()
    } else {
        vec![format!(
            "{src:?}: {}\n    stderr: {stderr:?}",
            wrong.join("; ")
        )]
    }
}

/// Run `bad` through every source in `sources` and fail listing them all.
fn assert_refused(bad: &Bad, sources: &[Src]) {
    let failures: Vec<String> = sources
        .iter()
        .flat_map(|&src| run_bad(src, bad.toml, bad.line, bad.key))
        .collect();
    assert!(
        failures.is_empty(),
        "{} ({:?}):\n  {}",
        bad.what,
        bad.toml,
        failures.join("\n  ")
    );
}

// Line 2 is a valid key (valid in a project file too), so the line number in
// the message is not an accident of the first key.

#[test]
fn malformed_toml_is_refused() {
    assert_refused(
        &Bad {
            what: "unterminated string",
            toml: "[sandbox]\nrequire = false\nnetwork = \"deny\n",
            line: 3,
            key: "network",
        },
        ALL_SOURCES,
    );
}

#[test]
fn unknown_key_is_refused() {
    assert_refused(
        &Bad {
            what: "misspelt key",
            toml: "[sandbox]\nrequire = false\nnetwrok = \"allow\"\n",
            line: 3,
            key: "netwrok",
        },
        ALL_SOURCES,
    );
}

#[test]
fn wrong_type_is_refused() {
    assert_refused(
        &Bad {
            what: "string for a boolean",
            toml: "[sandbox]\nrequire = false\nenabled = \"yes\"\n",
            line: 3,
            key: "enabled",
        },
        ALL_SOURCES,
    );
    assert_refused(
        &Bad {
            what: "string for a list",
            toml: "[sandbox]\nrequire = false\nwritable = \".\"\n",
            line: 3,
            key: "writable",
        },
        &[Src::User, Src::Project],
    );
}

#[test]
fn invalid_value_is_refused() {
    assert_refused(
        &Bad {
            what: "unknown network mode",
            toml: "[sandbox]\nrequire = false\nnetwork = \"sometimes\"\n",
            line: 3,
            key: "network",
        },
        ALL_SOURCES,
    );
    assert_refused(
        &Bad {
            what: "unknown filesystem mode",
            toml: "[sandbox]\nrequire = false\nfilesystem = \"rw\"\n",
            line: 3,
            key: "filesystem",
        },
        &[Src::User, Src::Project],
    );
}

#[test]
fn bare_wildcard_in_allowlist_is_refused() {
    assert_refused(
        &Bad {
            what: "`*` allows every host",
            toml: "[sandbox]\nrequire = false\nnetwork_allowlist = [\"*\"]\n",
            line: 3,
            key: "network_allowlist",
        },
        ALL_SOURCES,
    );
}

#[test]
fn top_level_domain_wildcard_in_allowlist_is_refused() {
    assert_refused(
        &Bad {
            what: "`*.com` allows a whole TLD",
            toml: "[sandbox]\nrequire = false\nnetwork_allowlist = [\"*.com\"]\n",
            line: 3,
            key: "network_allowlist",
        },
        ALL_SOURCES,
    );
    // In a multi-line array the line is the bad entry's own.
    assert_refused(
        &Bad {
            what: "`*.com` on its own line",
            toml: "[sandbox]\nrequire = false\nnetwork_allowlist = [\n  \"github.com\",\n  \"*.com\",\n]\n",
            line: 5,
            key: "network_allowlist",
        },
        &[Src::User, Src::Project],
    );
}

#[test]
fn newline_in_a_path_is_refused() {
    assert_refused(
        &Bad {
            what: "newline in writable",
            toml: "[sandbox]\nrequire = false\nwritable = [\".\", \"/tmp/a\\nb\"]\n",
            line: 3,
            key: "writable",
        },
        ALL_SOURCES,
    );
    assert_refused(
        &Bad {
            what: "newline in deny_read",
            toml: "[sandbox]\nrequire = false\ndeny_read = [\"/x\\ny\"]\n",
            line: 3,
            key: "deny_read",
        },
        &[Src::User, Src::Project],
    );
}

#[test]
fn nul_in_a_path_is_refused() {
    assert_refused(
        &Bad {
            what: "NUL in deny_read",
            toml: "[sandbox]\nrequire = false\ndeny_read = [\"/x\\u0000y\"]\n",
            line: 3,
            key: "deny_read",
        },
        ALL_SOURCES,
    );
    assert_refused(
        &Bad {
            what: "NUL in writable",
            toml: "[sandbox]\nrequire = false\nwritable = [\"/tmp/a\\u0000b\"]\n",
            line: 3,
            key: "writable",
        },
        &[Src::User, Src::Project],
    );
}

#[test]
fn relative_shell_is_refused() {
    assert_refused(
        &Bad {
            what: "shell not absolute",
            toml: "[sandbox]\nrequire = false\nshell = \"bash\"\n",
            line: 3,
            key: "shell",
        },
        ALL_SOURCES,
    );
}

#[test]
fn dot_dot_in_a_writable_path_is_refused() {
    // Regression: `..` was once refused only during resolution, with a
    // message naming neither file, line nor key.
    assert_refused(
        &Bad {
            what: "`..` in writable",
            toml: "[sandbox]\nrequire = false\nwritable = [\".\", \"../escape\"]\n",
            line: 3,
            key: "writable",
        },
        ALL_SOURCES,
    );
    assert_refused(
        &Bad {
            what: "`..` inside an absolute writable path",
            toml: "[sandbox]\nrequire = false\nwritable = [\"/tmp/../etc\"]\n",
            line: 3,
            key: "writable",
        },
        &[Src::User, Src::Project],
    );
}

#[test]
fn bad_config_stops_profile_and_check_too() {
    for sub in [
        &["profile", "--platform", "linux", "--", "true"][..],
        &["check"][..],
    ] {
        let world = World::new();
        let file = world.home.join(".config/sbx/config.toml");
        world.user_config("[sandbox]\nrequire = false\nnetwrok = \"allow\"\n");
        world
            .sbx()
            .args(sub)
            .timeout(DEADLINE)
            .assert()
            .code(125)
            .stdout(predicate::str::is_empty())
            .stderr(predicate::str::contains(format!("{}:3:", file.display())))
            .stderr(predicate::str::contains("`netwrok`"));
    }
}

#[test]
fn missing_config_file_is_refused() {
    let world = World::new();
    let marker = world.project.join("MARKER");
    let missing = world.root.join("no such config.toml");
    world
        .sbx()
        .arg("run")
        .arg("--config")
        .arg(&missing)
        .args(["--", "sh", "-c"])
        .arg(format!("touch '{}'", marker.display()))
        .timeout(DEADLINE)
        .assert()
        .code(125)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(missing.display().to_string()));
    assert!(!marker.exists(), "the command ran");
    world
        .sbx()
        .env("SBX_CONFIG", &missing)
        .args(["run", "--", "sh", "-c"])
        .arg(format!("touch '{}'", marker.display()))
        .timeout(DEADLINE)
        .assert()
        .code(125)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(missing.display().to_string()));
    assert!(!marker.exists(), "the command ran");
}

/// A relative SBX_CONFIG would name another file in every directory sbx
/// starts in, one the sandboxed command could write (`enabled = false`):
/// refused, and the command never runs.
#[test]
fn a_relative_sbx_config_is_refused() {
    let world = World::new();
    write(
        &world.project.join("sbx-config.toml"),
        "[sandbox]
enabled = false
",
    );
    let marker = world.home.join("ran-unsandboxed");
    world
        .sbx()
        .env("SBX_CONFIG", "sbx-config.toml")
        .args(["run", "--", "sh", "-c"])
        .arg(format!("touch '{}'", marker.display()))
        .timeout(DEADLINE)
        .assert()
        .code(125)
        .stdout(predicate::str::is_empty())
        .stderr(predicate::str::contains(
            "SBX_CONFIG=sbx-config.toml: not an absolute path",
        ));
    assert!(!marker.exists(), "the command ran");
}

#[test]
fn a_missing_user_file_is_fine() {
    // sbx works with no configuration at all.
    let world = World::new();
    world
        .sbx()
        .args(["profile", "--platform", "linux", "--", "true"])
        .timeout(DEADLINE)
        .assert()
        .code(0)
        .stderr(predicate::str::is_empty());
}

// ================================================================ good input

/// The schema the issue was opened with.
const SEED: &str = r#"[sandbox]
enabled = true
filesystem = true
network = "deny"          # deny | allow | allowlist
network_allowlist = ["registry.npmjs.org", "github.com"]
writable = [".", "/tmp"]
allow_unsandboxed = true
"#;

/// `sbx profile --platform linux --format json -- true`: the bwrap arguments.
fn profile_args(world: &World, extra: &[&str]) -> Vec<String> {
    let out = world
        .sbx()
        .args(["profile", "--platform", "linux", "--format", "json"])
        .args(extra)
        .args(["--", "true"])
        .timeout(DEADLINE)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "sbx profile failed: {out:?}");
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    value["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

/// Whether the bwrap arguments mount `path` with `flag` (`--bind`, `--ro-bind`).
fn mounts(args: &[String], flag: &str, path: &Path) -> bool {
    let path = path.display().to_string();
    args.windows(3)
        .any(|w| w[0] == flag && w[1] == path && w[2] == path)
}

#[test]
fn seed_schema_loads_from_every_trusted_source() {
    for src in [Src::User, Src::Flag, Src::Env] {
        let world = World::new();
        let file = match src {
            Src::User => world.home.join(".config/sbx/config.toml"),
            _ => world.root.join("seed.toml"),
        };
        write(&file, SEED);
        let mut cmd = world.sbx();
        cmd.args(["profile", "--platform", "linux", "--format", "json"]);
        match src {
            Src::Flag => {
                cmd.arg("--config").arg(&file);
            }
            Src::Env => {
                cmd.env("SBX_CONFIG", &file);
            }
            _ => {}
        }
        let out = cmd
            .arg("--")
            .arg("true")
            .timeout(DEADLINE)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{src:?}: {out:?}");
        assert!(out.stderr.is_empty(), "{src:?}: {out:?}");
        let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let args: Vec<&str> = value["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        assert!(args.contains(&"--unshare-net"), "{src:?}: {value}");
        let project = world.project.display().to_string();
        assert!(
            args.windows(3)
                .any(|w| w == ["--bind", project.as_str(), project.as_str()]),
            "{src:?}: the project is not writable: {value}"
        );
    }
}

#[test]
fn seed_schema_runs_from_user_and_project_files() {
    require_sandbox!();
    for in_project in [false, true] {
        let world = World::new();
        if in_project {
            write(&world.project.join(".sbx.toml"), SEED);
        } else {
            world.user_config(SEED);
        }
        world
            .sbx()
            .args(["run", "--", "echo", "ran"])
            .timeout(DEADLINE)
            .assert()
            .code(0)
            .stdout("ran\n");
    }
}

#[test]
fn other_tables_are_ignored() {
    // Keys in other tables are neither checked nor applied: not even a
    // `network = "allow"` or a misspelt key outside `[sandbox]`.
    let text = "[other]\nx = 1\nnetwork = \"allow\"\nnetwrok = true\n\n[sandbox]\nnetwork = \"deny\"\n\n[tool.more]\nenabled = \"yes\"\n";
    for src in [Src::User, Src::Flag, Src::Project] {
        let world = World::new();
        let file = match src {
            Src::User => world.home.join(".config/sbx/config.toml"),
            Src::Project => world.project.join(".sbx.toml"),
            _ => world.root.join("tool.toml"),
        };
        write(&file, text);
        let extra: Vec<String> = if src == Src::Flag {
            vec!["--config".into(), file.display().to_string()]
        } else {
            Vec::new()
        };
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        let args = profile_args(&world, &extra);
        assert!(
            args.iter().any(|a| a == "--unshare-net"),
            "{src:?}: {args:?}"
        );
    }
    // A file without a `[sandbox]` table at all is fine too.
    let world = World::new();
    world.user_config("[other]\nx = 1\n");
    let args = profile_args(&world, &[]);
    assert!(args.iter().any(|a| a == "--unshare-net"), "{args:?}");
}

#[test]
fn other_tables_are_ignored_in_a_real_run() {
    require_sandbox!();
    let world = World::new();
    world.user_config("[other]\nx = 1\n[sandbox]\nnetwork = \"deny\"\n");
    world
        .sbx()
        .args(["run", "--", "echo", "ran"])
        .timeout(DEADLINE)
        .assert()
        .code(0)
        .stdout("ran\n");
}

#[test]
fn trusted_files_may_widen_and_the_explicit_file_wins() {
    // The grant beside the denial below: the user file may open the network.
    let world = World::new();
    world.user_config("[sandbox]\nnetwork = \"allow\"\n");
    let args = profile_args(&world, &[]);
    assert!(!args.iter().any(|a| a == "--unshare-net"), "{args:?}");
    // `--config` is applied over the user file.
    let explicit = world.root.join("deny.toml");
    write(&explicit, "[sandbox]\nnetwork = \"deny\"\n");
    let args = profile_args(&world, &["--config", &explicit.display().to_string()]);
    assert!(args.iter().any(|a| a == "--unshare-net"), "{args:?}");
}

// ================================================================ narrowing only

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
    assert!(
        stdout.contains("interfaces=1\n"),
        "the command sees more than loopback:\n{stdout}\n{stderr}"
    );
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
    assert!(!stdout.contains("PROJECT-SECRET-7731"), "{stdout}");
    assert_eq!(stdout, "public\ndone\n", "stderr: {stderr}");
    // The file is still there on the host, untouched.
    assert_eq!(
        std::fs::read_to_string(world.project.join("secret.txt")).unwrap(),
        "PROJECT-SECRET-7731\n"
    );
}
