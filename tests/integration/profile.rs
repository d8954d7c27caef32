//! `sbx profile` for both platforms: exact output and round trips.
//!
//! The snapshots pin what resolution makes of a few representative projects
//! (a plain directory, a git repository with a linked worktree, a submodule
//! and `core.hooksPath`, the worktree itself, a symlinked `.git`, a `.env`
//! linked out of the project, a narrowing `.sbx.toml`). The Linux plan shows
//! the writable roots, pins, read-only paths, masks and environment; the
//! macOS profile, rendered from the same host, also names every protected
//! path that does not exist yet and every credential. Together they are the
//! resolved policy as a reviewer sees it, so a change of resolution shows up
//! here as a diff. `SBX_BLESS=1` rewrites the files in `tests/golden/resolve/`.
//! They record resolution on a Linux host (a macOS host spells its paths
//! and its temporary directory differently), so they run on Linux only.

use std::path::{Path, PathBuf};

use crate::util::{git, write, World, DEADLINE};

/// Variables a credential filter must remove or keep.
const ENV: &[(&str, &str)] = &[
    ("GITHUB_TOKEN", "ghp_0123456789"),
    ("KEEP_TOKEN", "kept-if-passed-through"),
    ("OTHER_TOKEN", "removed"),
    ("DATABASE_URL", "postgres://app:hunter2@db.invalid/app"),
    ("EDITOR", "vi"),
];

/// `sbx SUBCOMMAND ARGS` in `cwd` with the snapshot environment; gives back
/// stdout and stderr, and fails the test if sbx did not exit 0.
fn sbx_in(world: &World, cwd: &Path, args: &[&str]) -> (Vec<u8>, String) {
    let out = world
        .sbx()
        .current_dir(cwd)
        .envs(ENV.iter().copied())
        .args(args)
        .timeout(DEADLINE)
        .output()
        .unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(0), "sbx {args:?}: {stderr}");
    (out.stdout, stderr)
}

/// `sbx profile --format json` for `platform` in `cwd`, with the home
/// pinned to the world's: the JSON and stderr.
fn profile_json(world: &World, cwd: &Path, platform: &str) -> (serde_json::Value, String) {
    let home = world.home.to_str().unwrap();
    let args = [
        "profile",
        "--platform",
        platform,
        "--format",
        "json",
        "--home",
        home,
    ];
    let (stdout, stderr) = sbx_in(world, cwd, &args);
    (serde_json::from_slice(&stdout).unwrap(), stderr)
}

/// What `sbx check --format json` says of the policy (not of the machine):
/// the project, the writable roots, the warnings and where values came from.
fn check_json(world: &World, cwd: &Path) -> String {
    let (stdout, _) = sbx_in(world, cwd, &["check", "--format", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
    let mut out = String::new();
    for key in ["project", "policy", "writable", "warnings", "origins"] {
        out.push_str(&format!("== check: {key}\n{:#}\n", json[key]));
    }
    out
}

/// The test world's and this machine's paths replaced by placeholders, so
/// the snapshot is the same on every machine and every run.
fn normalise(world: &World, text: &str) -> String {
    let sbx = std::fs::canonicalize(crate::util::sbx_path()).unwrap();
    let text = text
        .replace(sbx.to_str().unwrap(), "[SBX]")
        .replace(world.root.to_str().unwrap(), "[ROOT]");
    // The per-project tool cache key hashes the project's (random) path.
    let key = regex::Regex::new(r"projects/[0-9a-f]{16}").unwrap();
    let text = key.replace_all(&text, "projects/[KEY]");
    // The directory of the command's own sockets is the user's.
    let uid = regex::Regex::new(r"/tmp/sbx-[0-9]+\b").unwrap();
    uid.replace_all(&text, "/tmp/sbx-[UID]").into_owned()
}

/// The snapshot of one project: both platforms' plans, what `check` says of
/// the policy, and the warnings. Of the macOS profile only the lines that
/// depend on the project are kept (the fixed rules have golden files of
/// their own in `tests/golden/`).
fn snapshot(world: &World, cwd: &Path) -> String {
    let mut out = check_json(world, cwd);
    for platform in ["linux", "macos"] {
        let (json, stderr) = profile_json(world, cwd, platform);
        out.push_str(&format!("== {platform}: program\n{}\n", json["program"]));
        out.push_str(&format!("== {platform}: args\n"));
        for arg in json["args"].as_array().unwrap() {
            let arg = arg.as_str().unwrap();
            if arg.starts_with("(version") {
                out.push_str("[PROFILE: see the profile section]\n");
                continue;
            }
            out.push_str(arg);
            out.push('\n');
        }
        out.push_str(&format!("== {platform}: env\n{:#}\n", json["env"]));
        if let Some(profile) = json["profile"].as_str() {
            out.push_str(&format!("== {platform}: profile (lines naming paths)\n"));
            for line in profile.lines().filter(|l| {
                ["param", "literal", "subpath", "regex", "prefix"]
                    .iter()
                    .any(|w| l.contains(w))
            }) {
                out.push_str(line);
                out.push('\n');
            }
        }
        out.push_str(&format!("== {platform}: stderr\n{stderr}"));
    }
    normalise(world, &out)
}

/// Compare with `tests/golden/resolve/NAME.txt`, or write it when `SBX_BLESS=1`.
fn assert_snapshot(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden/resolve")
        .join(format!("{name}.txt"));
    if std::env::var_os("SBX_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("missing {}: run with SBX_BLESS=1", path.display()));
    assert!(
        expected == actual,
        "snapshot {name} differs (SBX_BLESS=1 rewrites it):\n--- expected\n{expected}\n--- actual\n{actual}"
    );
}

/// A few `.env` files, a template kept readable, and "runs later" files.
fn plant_project_files(project: &Path) {
    write(&project.join(".env"), "SECRET=1\n");
    write(&project.join("sub/deeper/.env.local"), "SECRET=1\n");
    write(&project.join(".env.example"), "SECRET=\n");
    write(&project.join(".envrc"), "use nix\n");
    write(&project.join(".vscode/settings.json"), "{}\n");
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "the snapshots are of resolution on a Linux host"
)]
fn snapshot_plain_directory() {
    let world = World::new();
    plant_project_files(&world.project);
    assert_snapshot("plain-directory", &snapshot(&world, &world.project));
}

/// A repository with a submodule, a linked worktree beside it (under home)
/// and hooks moved by `core.hooksPath`; returns the worktree's path.
fn repository_with_everything(world: &World) -> PathBuf {
    world.git_repo();
    plant_project_files(&world.project);
    world.add_submodule();
    write(&world.project.join(".husky/pre-commit"), "#!/bin/sh\n");
    git(&world.project, &["config", "core.hooksPath", ".husky"]);
    let worktree = world.home.join("wt-feature");
    git(
        &world.project,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "feature",
            worktree.to_str().unwrap(),
        ],
    );
    worktree
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "the snapshots are of resolution on a Linux host"
)]
fn snapshot_repository_with_worktree_submodule_and_hooks_path() {
    let world = World::new();
    repository_with_everything(&world);
    assert_snapshot("repository", &snapshot(&world, &world.project));
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "the snapshots are of resolution on a Linux host"
)]
fn snapshot_linked_worktree_as_the_project() {
    let world = World::new();
    let worktree = repository_with_everything(&world);
    assert_snapshot("linked-worktree", &snapshot(&world, &worktree));
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "the snapshots are of resolution on a Linux host"
)]
fn snapshot_symlinked_git_directory() {
    let world = World::new();
    world.git_repo();
    let elsewhere = world.home.join("gitdirs/proj.git");
    std::fs::create_dir_all(elsewhere.parent().unwrap()).unwrap();
    std::fs::rename(world.project.join(".git"), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, world.project.join(".git")).unwrap();
    write(&world.project.join(".env"), "SECRET=1\n");
    assert_snapshot("symlinked-git", &snapshot(&world, &world.project));
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "the snapshots are of resolution on a Linux host"
)]
fn snapshot_env_file_linked_out_of_the_project() {
    let world = World::new();
    world.git_repo();
    write(&world.home.join("secrets/app.env"), "SECRET=1\n");
    std::os::unix::fs::symlink(
        world.home.join("secrets/app.env"),
        world.project.join(".env"),
    )
    .unwrap();
    // A link to a system file is not masked (the command could otherwise
    // break every later sandbox by linking to libc).
    std::os::unix::fs::symlink("/etc/hostname", world.project.join(".env.system")).unwrap();
    assert_snapshot("env-linked-out", &snapshot(&world, &world.project));
}

#[test]
#[cfg_attr(
    not(target_os = "linux"),
    ignore = "the snapshots are of resolution on a Linux host"
)]
fn snapshot_narrowing_project_file() {
    let world = World::new();
    world.git_repo();
    std::fs::create_dir_all(world.home.join("shared")).unwrap();
    world.user_config(
        "[sandbox]\n\
         network = \"allowlist\"\n\
         network_allowlist = [\"example.com\", \"*.example.org\"]\n\
         writable = [\".\", \"/tmp\", \"~/shared\"]\n\
         env_passthrough = [\"KEEP_TOKEN\"]\n",
    );
    write(
        &world.project.join(".sbx.toml"),
        "[sandbox]\n\
         network = \"allow\"\n\
         network_allowlist = [\"api.example.org\", \"evil.test\"]\n\
         writable = [\".\", \"/var\"]\n\
         deny_read = [\"private\"]\n\
         deny_write = [\"scripts\"]\n\
         env_passthrough = [\"KEEP_TOKEN\", \"OTHER_TOKEN\"]\n\
         filesystem = false\n\
         shell = \"/bin/sh\"\n",
    );
    std::fs::create_dir_all(world.project.join("private")).unwrap();
    std::fs::create_dir_all(world.project.join("scripts")).unwrap();
    assert_snapshot("narrowing-project-file", &snapshot(&world, &world.project));
}

/// The text form of a Linux plan is a shell command line that parses back
/// into exactly the JSON form's program and arguments; the macOS text form
/// is the JSON form's profile.
#[test]
fn text_and_json_forms_agree() {
    let world = World::new();
    world.git_repo();
    plant_project_files(&world.project);
    for platform in ["linux", "macos"] {
        let (json, _) = profile_json(&world, &world.project, platform);
        let home = world.home.to_str().unwrap();
        let (stdout, _) = sbx_in(
            &world,
            &world.project,
            &["profile", "--platform", platform, "--home", home],
        );
        let text = String::from_utf8(stdout).unwrap();
        if platform == "macos" {
            assert_eq!(json["profile"].as_str(), Some(text.as_str()));
            continue;
        }
        // The line goes in as `$1`: the shell parses it, nothing else does.
        let parsed = std::process::Command::new("/bin/sh")
            .args(["-c", "eval \"set -- $1\"; printf '%s\\0' \"$@\"", "sh"])
            .arg(text.trim_end())
            .output()
            .unwrap();
        assert!(parsed.status.success(), "{parsed:?}");
        let mut expected = vec![json["program"].as_str().unwrap().to_string()];
        expected.extend(
            json["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_string()),
        );
        let got: Vec<String> = String::from_utf8(parsed.stdout)
            .unwrap()
            .split_terminator('\0')
            .map(str::to_string)
            .collect();
        assert_eq!(got, expected);
    }
}

/// macOS: the command's own Unix sockets by default and with `allow` (which
/// macOS does not honour beyond them), none with `deny`, in read-only mode
/// or with `filesystem = false`; with them, `TMPDIR` is the run's own.
#[test]
fn macos_own_sockets_follow_the_setting() {
    let world = World::new();
    world.git_repo();
    let home = world.home.to_str().unwrap();
    let plan = |extra: &[&str]| {
        let mut args = vec![
            "profile",
            "--platform",
            "macos",
            "--format",
            "json",
            "--home",
            home,
        ];
        args.extend_from_slice(extra);
        let (stdout, _) = sbx_in(&world, &world.project, &args);
        let json: serde_json::Value = serde_json::from_slice(&stdout).unwrap();
        let profile = json["profile"].as_str().unwrap().to_string();
        let tmpdir = json["env"]["set"]["TMPDIR"].as_str().map(str::to_string);
        (
            profile.contains("(allow system-socket (socket-domain AF_UNIX))"),
            tmpdir,
        )
    };
    for extra in [
        &[][..],
        &["--unix-sockets", "own"],
        &["--unix-sockets", "allow"],
    ] {
        let (sockets, tmpdir) = plan(extra);
        assert!(sockets, "{extra:?}");
        let tmpdir = tmpdir.unwrap_or_default();
        assert!(
            tmpdir.starts_with("/private/tmp/sbx-") && tmpdir.ends_with("/PER-RUN"),
            "{extra:?}: {tmpdir}"
        );
    }
    for extra in [&["--unix-sockets", "deny"][..], &["--read-only"]] {
        assert_eq!(plan(extra), (false, None), "{extra:?}");
    }
    world.user_config("[sandbox]\nfilesystem = false\n");
    assert_eq!(plan(&[]), (false, None), "filesystem = false");
}
