//! Bad input: in every source, exit 125 with one line naming the file, the
//! line and the key, and the command never runs.

use super::*;

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

/// Written above every table, a key of `[sandbox]` belongs to no table:
/// it was ignored, and a `deny_read` there left its secret readable.
#[test]
fn a_sandbox_key_outside_the_table_is_refused() {
    assert_refused(
        &Bad {
            what: "key above the table",
            toml: "# sbx\ndeny_read = [\"~/secrets\"]\n[sandbox]\nrequire = false\n",
            line: 2,
            key: "deny_read",
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
