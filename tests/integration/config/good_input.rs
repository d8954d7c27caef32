//! Good input: the seed schema loads from every trusted source, other tables
//! are ignored, trusted files may widen.

use super::*;

/// The schema the issue was opened with.
const SEED: &str = r#"[sandbox]
enabled = true
filesystem = true
network = "deny"          # deny | allow | allowlist
network_allowlist = ["registry.npmjs.org", "github.com"]
writable = [".", "/tmp"]
allow_unsandboxed = true
"#;

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
