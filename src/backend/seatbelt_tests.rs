//! Tests of the Seatbelt renderer. There is no Mac here, so the profile is
//! checked as text: golden files, a small s-expression reader that every
//! generated profile must pass, structural checks (order, escaping, forbidden
//! services), a property test with arbitrary paths, and the `.env` regex run
//! through the `regex` crate. Enforcement itself is tested on a macOS runner.

use std::path::PathBuf;

use super::*;
use crate::config::FsSetting;
use crate::policy::{
    Credential, Kind, Network, OwnSockets, Platform, Policy, Protected, CREDENTIALS,
    CREDENTIALS_MACOS,
};
use checks::{check, credential_filters, has, mach_allowed, network_allows, unlink_filters};
use sexpr::{eval, path_filters, read_forms, Sx};

// The tests by topic; the fixtures, the argv and the golden files are here.
#[path = "seatbelt_tests/checks.rs"]
mod checks;
#[path = "seatbelt_tests/env_regex.rs"]
mod env_regex;
#[path = "seatbelt_tests/escaping.rs"]
mod escaping;
#[path = "seatbelt_tests/network.rs"]
mod network;
#[path = "seatbelt_tests/profiles.rs"]
mod profiles;
#[path = "seatbelt_tests/sexpr.rs"]
mod sexpr;

// ---------------------------------------------------------------- policies

const HOME: &str = "/Users/t";
const PROJECT: &str = "/Users/t/proj";
const TMPDIR: &str = "/private/var/folders/ab/xyz/T";
const SBX: &str = "/Users/t/.cargo/bin/sbx";

/// A macOS policy as `policy::resolve` would produce it for home `home` and
/// project `project` with the default configuration: writable project,
/// `/private/tmp` and TMPDIR; the project's "runs later" paths; every built-in
/// credential, a few existing (one of them through a symlink), the rest missing.
fn policy_for(home: &str, project: &str) -> Policy {
    let home = PathBuf::from(home);
    let project = PathBuf::from(project);
    let credentials = CREDENTIALS
        .iter()
        .chain(CREDENTIALS_MACOS)
        .chain(crate::policy::AGENT_TOKENS.iter().map(|(_, token)| token))
        .map(|rel| {
            let written = home.join(rel);
            let (real, kind) = match *rel {
                ".ssh" | "Library/Keychains" => (Some(written.clone()), Kind::Dir),
                ".netrc" | ".docker/config.json" => (Some(written.clone()), Kind::File),
                // A dotfiles-managed directory: the real path is elsewhere.
                ".aws" => (Some(home.join("dotfiles/aws")), Kind::Dir),
                _ => (None, Kind::Missing),
            };
            Credential {
                written,
                real,
                kind,
            }
        })
        .collect();
    let prot = |rel: &str, kind: Kind, create: bool| Protected {
        path: project.join(rel),
        kind,
        create,
        identity: None,
    };
    let mut writable = vec![
        PathBuf::from("/private/tmp"),
        project.clone(),
        PathBuf::from(TMPDIR),
    ];
    writable.sort_by_key(|p| p.components().count());
    Policy {
        home: home.clone(),
        project: project.clone(),
        cwd: project.clone(),
        writable,
        protected: vec![
            prot(".sbx.toml", Kind::Missing, false),
            prot(".envrc", Kind::File, false),
            prot(".vscode", Kind::Missing, false),
            prot(".git/hooks", Kind::Dir, true),
            prot(".git/config", Kind::File, false),
        ],
        pins: vec![project.join(".git")],
        pinned_links: Vec::new(),
        credentials,
        env_files: Vec::new(),
        placeholder: PathBuf::from("/Users/t/.cache/sbx/empty"),
        // The temporary directories are where host programs look for
        // their servers: the project alone keeps its links.
        own_sockets: Some(OwnSockets {
            dir: PathBuf::from(RUNS),
            symlinks: vec![project.clone()],
        }),
        command: vec!["/bin/echo".into(), "hi".into()],
        ..crate::policy::test_policy(Platform::Macos)
    }
}

/// The user's directory of runs' own directories, and this run's.
const RUNS: &str = "/private/tmp/sbx-501";
const RUN_DIR: &str = "/private/tmp/sbx-501/0a1b2c3d4e";

fn default_policy() -> Policy {
    policy_for(HOME, PROJECT)
}

/// `filesystem = "read-only"` as resolution leaves it: no writable roots and
/// no "runs later" paths; the developer directory `xcode-select` chose.
fn read_only_policy() -> Policy {
    let mut p = default_policy();
    p.filesystem = FsSetting::ReadOnly;
    p.own_sockets = None;
    p.writable.clear();
    p.protected.clear();
    p.pins.clear();
    p.system_paths = vec![crate::policy::SystemPath::Dir(PathBuf::from(XCODE))];
    p
}

const XCODE: &str = "/Applications/Xcode_16.app/Contents/Developer";

/// `filesystem = false`: no writable roots listed (everything is).
fn fs_false_policy() -> Policy {
    let mut p = read_only_policy();
    p.filesystem = FsSetting::Unrestricted;
    p
}

/// Extra `deny_read` (a directory inside the project, a file with a space in
/// a directory of home) and `deny_write` entries, and found `.env` files.
fn deny_extra_policy() -> Policy {
    let mut p = default_policy();
    p.credentials.push(Credential {
        written: PathBuf::from("/Users/t/proj/secrets"),
        real: Some(PathBuf::from("/Users/t/proj/secrets")),
        kind: Kind::Dir,
    });
    p.credentials.push(Credential {
        written: PathBuf::from("/Users/t/work notes/token.txt"),
        real: None,
        kind: Kind::Missing,
    });
    p.protected.push(Protected {
        path: PathBuf::from("/Users/t/proj/tools/deploy.sh"),
        kind: Kind::File,
        create: false,
        identity: None,
    });
    p.env_files = vec![
        PathBuf::from("/Users/t/proj/.env"),
        PathBuf::from("/Users/t/proj/sub/.env.local"),
    ];
    p
}

const AWKWARD: &str = r#"/Users/t/p q"r\s (x)"#;

fn awkward_policy() -> Policy {
    policy_for(HOME, AWKWARD)
}

/// The plan of `policy`, with this run's directory where it has own sockets.
fn plan(policy: &Policy) -> Plan {
    let run_dir = policy.own_sockets.as_ref().map(|_| Path::new(RUN_DIR));
    render(policy, Path::new(SBX), None, run_dir).unwrap()
}

// ---------------------------------------------------------------- argv

/// The parts of a sandbox-exec argv, after checking its shape:
/// `-p PROFILE (-D NAME=VALUE)* -- COMMAND...`.
struct Argv {
    profile: String,
    params: Vec<(String, String)>,
    command: Vec<String>,
}

fn split_argv(plan: &Plan) -> Argv {
    assert_eq!(plan.program, PathBuf::from(SANDBOX_EXEC));
    let args: Vec<String> = plan
        .args
        .iter()
        .map(|a| a.to_str().unwrap().to_string())
        .collect();
    assert_eq!(args[0], "-p");
    let profile = args[1].clone();
    assert_eq!(plan.profile.as_deref(), Some(profile.as_str()));
    let mut params = Vec::new();
    let mut i = 2;
    while args[i] == "-D" {
        let (name, value) = args[i + 1].split_once('=').unwrap();
        assert!(
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
            "parameter name {name:?}"
        );
        params.push((name.to_string(), value.to_string()));
        i += 2;
    }
    assert_eq!(args[i], "--", "{args:?}");
    Argv {
        profile,
        params,
        command: args[i + 1..].to_vec(),
    }
}

// ---------------------------------------------------------------- golden files

/// The golden-file text of a plan: the argv around the profile as comments,
/// then the profile (so the file can be loaded with `sandbox-exec -f`).
fn golden_text(plan: &Plan) -> String {
    let argv = split_argv(plan);
    let mut text = String::from(
        ";; Golden file of src/backend/seatbelt_tests.rs: the Seatbelt plan for one fixed policy.\n\
         ;; Regenerate with `SBX_BLESS=1 cargo test seatbelt` and review the diff.\n",
    );
    text.push_str(&format!(";; {SANDBOX_EXEC} -p PROFILE\n"));
    for (name, value) in &argv.params {
        text.push_str(&format!(";;   -D {name}={value}\n"));
    }
    text.push_str(&format!(";;   -- {}\n", argv.command.join(" ")));
    text.push_str(";; PROFILE:\n");
    text.push_str(&argv.profile);
    text
}

/// Compare with `tests/golden/NAME`, or write it when `SBX_BLESS=1`.
fn golden(name: &str, plan: &Plan) {
    crate::backend::assert_golden(name, &golden_text(plan));
}
