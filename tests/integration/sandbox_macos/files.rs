//! Files: writes outside the writable roots, credentials, files that run
//! later, read-only mode, descriptors the caller passes down, and nothing else
//! changing on the host.

use super::*;

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn writes_outside_writable_roots_are_refused() {
    require_sandbox!();
    let world = World::new();
    let shared = PathBuf::from(format!("/Users/Shared/sbx-test-{}", unique(2)));
    scenarios::writes_outside_writable_roots_are_refused(
        &Seatbelt,
        &world,
        &format!(
            "echo pwn > \"$HOME/.zshrc\"
             echo pwn > {shared}",
            shared = shq_path(&shared)
        ),
        |out| {
            let shared_exists = shared.exists();
            let _ = std::fs::remove_file(&shared);
            assert!(!shared_exists, "/Users/Shared was written:\n{}", both(out));
            assert!(!world.home.join(".zshrc").exists(), "{}", both(out));
        },
    );
}

// ---------------------------------------------------------------------------
// Credentials
// ---------------------------------------------------------------------------

/// A script that tries `cat`, `ls` and `stat` on each path; a marker line
/// per success (`CAT-OK path`, `LS-OK path`, `STAT-OK path`).
fn probe_each(paths: &[String]) -> String {
    let mut s = String::new();
    for p in paths {
        let q = shq(p);
        s.push_str(&format!(
            "cat {q} && echo \"CAT-OK {p}\"
             ls -la {q} && echo \"LS-OK {p}\"
             stat {q} && echo \"STAT-OK {p}\"
             echo \"attempted {p}\"\n"
        ));
    }
    s
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn credentials_are_unreadable_directly() {
    require_sandbox!();
    let world = World::new();
    plant_keychain_file(&world);
    let mut paths: Vec<String> = secret_files(&world)
        .iter()
        .map(|f| world.home.join(f).to_str().unwrap().to_string())
        .collect();
    // The credential directories themselves.
    for dir in CREDENTIAL_DIRS {
        assert!(
            world.home.join(dir).is_dir(),
            "the harness did not plant {dir}"
        );
        paths.push(world.home.join(dir).to_str().unwrap().to_string());
    }
    let control = world.home.join(".bashrc").to_str().unwrap().to_string();
    let mut script = probe_each(&paths);
    script.push_str(&probe_each(std::slice::from_ref(&control)));
    // Listing the key directory must not even give the key's name, and
    // searching the whole home must not leak.
    script.push_str(
        "ls -a \"$HOME/.ssh\" 2>/dev/null | sed 's/^/SSH-LIST /'
         grep -r . \"$HOME\" 2>&1 ; ls -laR \"$HOME\" 2>&1\n",
    );
    let out = Seatbelt.run_sh(&world, &script);
    assert_no_secret(&out);
    for p in &paths {
        assert_line(&out, &format!("attempted {p}"));
        for op in ["CAT", "LS", "STAT"] {
            assert_no_line_starting(&out, &format!("{op}-OK {p}"));
        }
    }
    assert_no_line_starting(&out, "SSH-LIST");
    // Positive control: an ordinary file in the same home, all three ways.
    assert_line(&out, "# rc");
    for op in ["CAT", "LS", "STAT"] {
        assert_line(&out, &format!("{op}-OK {control}"));
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn credential_case_variants_are_unreadable() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join(".env"), &format!("TOKEN={SECRET}\n"));
    // A file whose own name is in mixed case: only the regex's character
    // classes can match it.
    util::write(
        &world.project.join("sub/.Env.Local"),
        &format!("TOKEN={SECRET}\n"),
    );
    let insensitive = world.home.join(".SSH/id_ed25519").exists();
    if !insensitive {
        loud_skip(
            "the home case variants",
            "this volume is case-sensitive, so ~/.SSH does not exist and proves nothing",
        );
    }
    let out = Seatbelt.run_sh(
        &world,
        "cat \"$HOME/.SSH/id_ed25519\" \"$HOME/.Ssh/ID_ED25519\" \"$HOME/.AWS/credentials\" \"$HOME/.NETRC\" \"$HOME/.Config/GH/hosts.yml\"
         ls -la \"$HOME/.SSH\" \"$HOME/.AWS\"
         cat .ENV .Env sub/.Env.Local sub/.ENV.LOCAL
         cat \"$HOME/.BASHRC\"
         echo RAN",
    );
    assert_no_secret(&out);
    assert_line(&out, "RAN");
    if insensitive {
        // Positive control: the case-folded spelling of an ordinary file reads.
        assert_line(&out, "# rc");
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn credentials_are_unreadable_through_a_project_symlink() {
    require_sandbox!();
    let world = World::new();
    plant_keychain_file(&world);
    util::write(&world.project.join(".env"), &format!("TOKEN={SECRET}\n"));
    // The project's own `.env` under an innocent name.
    symlink(".env", world.project.join("innocent.txt")).unwrap();
    scenarios::credentials_are_unreadable_through_a_project_symlink(
        &Seatbelt,
        &world,
        &["innocent.txt"],
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn credentials_are_unreadable_through_the_data_volume_spelling() {
    require_sandbox!();
    let world = World::new();
    // `/Users` is a firmlink to `/System/Volumes/Data/Users`: a second
    // spelling of every file in a home directory.
    let data = |p: &Path| PathBuf::from(format!("/System/Volumes/Data{}", p.display()));
    if !data(&world.home.join(".bashrc")).is_file() {
        loud_skip(
            "the /System/Volumes/Data spelling",
            &format!(
                "{} has no such second spelling on this host",
                world.home.display()
            ),
        );
        return;
    }
    let mut script = String::new();
    for f in secret_files(&world) {
        script.push_str(&format!("cat {}\n", shq_path(&data(&world.home.join(f)))));
    }
    script.push_str(&format!(
        "ls -la {}\ncat {}\n",
        shq_path(&data(&world.home.join(".ssh"))),
        shq_path(&data(&world.home.join(".bashrc")))
    ));
    let out = Seatbelt.run_sh(&world, &script);
    assert_no_secret(&out);
    // Positive control: the same spelling of an ordinary file reads.
    assert_line(&out, "# rc");
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn credentials_cannot_be_linked_cloned_moved_or_copied_into_the_project() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join(".env"), &format!("TOKEN={SECRET}\n"));
    let out = Seatbelt.run_sh(
        &world,
        "ln \"$HOME/.ssh/id_ed25519\" ./hard-ssh ; cat ./hard-ssh
         ln \"$HOME/.netrc\" ./hard-netrc ; cat ./hard-netrc
         ln .env ./hard-env ; cat ./hard-env
         cp -c \"$HOME/.aws/credentials\" ./clone-aws ; cat ./clone-aws
         cp -c .env ./clone-env ; cat ./clone-env
         cp \"$HOME/.pypirc\" ./copied ; cat ./copied
         cp -R \"$HOME/.ssh\" ./ssh-copy ; cat ./ssh-copy/*
         mv \"$HOME/.aws/credentials\" ./moved ; cat ./moved
         mv \"$HOME/.kube\" ./kube-dir ; cat ./kube-dir/config
         echo ok > control.txt",
    );
    assert_no_secret(&out);
    // Host side: the originals are intact and nothing in the project but
    // `.env` itself holds the secret.
    for f in [
        ".ssh/id_ed25519",
        ".aws/credentials",
        ".kube/config",
        ".netrc",
    ] {
        assert_eq!(
            std::fs::read_to_string(world.home.join(f)).unwrap(),
            SECRET,
            "{f}\n{}",
            both(&out)
        );
    }
    assert_eq!(
        files_holding_secret(&world.project),
        vec![PathBuf::from(".env")],
        "{}",
        both(&out)
    );
    assert!(!world.project.join("hard-env").exists(), "{}", both(&out));
    assert!(!world.project.join("clone-env").exists(), "{}", both(&out));
    // Positive control: the project is writable. (That hard links and
    // clones of ordinary files work is the next test.)
    assert!(
        world.project.join("control.txt").is_file(),
        "{}",
        both(&out)
    );
}

/// The control for the refusals above: `file-link` and `file-clone` are
/// operations of their own (not part of `file-write*`), and sbx must not
/// refuse them for ordinary files (git clone --local, pnpm and ccache use
/// hard links).
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn hard_links_and_clones_of_ordinary_files_work() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join("plain.txt"), "plain\n");
    let out = Seatbelt.run_sh(
        &world,
        "ln plain.txt plain-hard && echo HARDLINK-OK
         cp -c plain.txt plain-clone && echo CLONE-OK",
    );
    assert_line(&out, "HARDLINK-OK");
    assert_eq!(
        std::fs::metadata(world.project.join("plain.txt"))
            .unwrap()
            .nlink(),
        2,
        "{}",
        both(&out)
    );
    assert_line(&out, "CLONE-OK");
    assert_eq!(
        std::fs::read_to_string(world.project.join("plain-clone")).unwrap_or_default(),
        "plain\n",
        "{}",
        both(&out)
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn env_files_are_unreadable_and_unmovable_but_templates_are_readable() {
    require_sandbox!();
    let world = World::new();
    scenarios::plant_env_files(&world);
    util::write(&world.project.join(".envrc.txt"), "not an env file\n");
    let out = Seatbelt.run_sh(
        &world,
        "cat .env sub/.env.local a/b/c/d/.env.production
         grep -r TOKEN . 2>&1
         ls -la . sub 2>&1
         mv .env moved-env ; cat moved-env
         mv sub/.env.local sub/renamed ; cat sub/renamed
         mv sub sub2 ; cat sub2/.env.local sub/.env.local
         cat .env.example
         cat .envrc.txt
         echo ok > control.txt",
    );
    assert_no_secret(&out);
    // Positive controls: the template and a look-alike name read.
    assert_line(&out, "TOKEN=example-value");
    assert_line(&out, "not an env file");
    // Host side: `.env` was not renamed away.
    assert_eq!(
        std::fs::read_to_string(world.project.join(".env")).unwrap_or_default(),
        format!("TOKEN={SECRET}\n"),
        "{}",
        both(&out)
    );
    assert!(!world.project.join("moved-env").exists(), "{}", both(&out));
    assert!(
        !world.project.join("sub/renamed").exists(),
        "{}",
        both(&out)
    );
    // The only files holding the secret are `.env` files (the directory
    // `sub` may have been renamed: the any-depth rule still covers it).
    for p in files_holding_secret(&world.project) {
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        assert!(
            name == ".env" || name.starts_with(".env."),
            "{} holds the secret under a name the rule does not cover\n{}",
            p.display(),
            both(&out)
        );
    }
    assert!(
        world.project.join("control.txt").is_file(),
        "{}",
        both(&out)
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn symlinked_credential_dir_is_denied_at_both_spellings() {
    require_sandbox!();
    scenarios::symlinked_credential_dir_is_unreadable_at_both_spellings(&Seatbelt);
}

// ---------------------------------------------------------------------------
// Files that run later
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn runs_later_files_are_read_only() {
    require_sandbox!();
    scenarios::runs_later_files_are_read_only(&Seatbelt);
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn missing_runs_later_paths_cannot_be_created() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    std::fs::remove_dir_all(world.project.join(".git/hooks")).unwrap();
    let out = Seatbelt.run_sh(
        &world,
        "mkdir -p .git/hooks ; touch .git/hooks/pre-push
         printf '#!/bin/sh\\ntouch \"$HOME/SBX_PWN\"\\n' > .git/hooks/x
         chmod +x .git/hooks/x
         mkdir .git/hooks/sub
         echo 'touch \"$HOME/SBX_PWN\"' > .envrc
         mkdir -p .vscode ; echo '{}' > .vscode/tasks.json
         mkdir -p .claude ; echo '{}' > .claude/settings.json
         echo '{}' > .mcp.json
         echo '[sandbox]' > .sbx.toml
         echo ok > .git/control
         echo ok > control.txt",
    );
    let hooks = world.project.join(".git/hooks");
    let hook_entries: Vec<_> = std::fs::read_dir(&hooks)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        hook_entries.is_empty(),
        "hooks were created: {hook_entries:?}\n{}",
        both(&out)
    );
    for p in [".envrc", ".vscode", ".claude", ".mcp.json", ".sbx.toml"] {
        assert!(
            !world.project.join(p).exists(),
            "{p} was created\n{}",
            both(&out)
        );
    }
    // Positive controls: .git itself and the working tree are writable.
    assert!(
        world.project.join(".git/control").is_file(),
        "{}",
        both(&out)
    );
    assert!(
        world.project.join("control.txt").is_file(),
        "{}",
        both(&out)
    );
}

/// macOS volumes ignore letter case by default: `.VSCODE/tasks.json` is
/// the file VS Code reads. The "runs later" denials match any case.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn runs_later_paths_in_another_case_cannot_be_created() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let out = Seatbelt.run_sh(
        &world,
        "mkdir -p .VSCODE ; echo '{}' > .VSCODE/tasks.json
         mkdir -p .Claude ; echo '{}' > .Claude/settings.json
         echo 'touch \"$HOME/SBX_PWN\"' > .EnvRC
         echo '{}' > .MCP.json
         mkdir -p .GIT/HOOKS ; echo x > .GIT/HOOKS/pre-push
         echo ok > control.txt",
    );
    let made: Vec<String> = std::fs::read_dir(&world.project)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_lowercase())
        .collect();
    for p in [".vscode", ".claude", ".envrc", ".mcp.json"] {
        assert!(
            !made.contains(&p.to_string()),
            "{p} was made\n{}",
            both(&out)
        );
    }
    let hooks = world.project.join(".git/hooks");
    assert!(
        !std::fs::read_dir(&hooks)
            .map(|d| d.flatten().any(|e| e
                .file_name()
                .to_string_lossy()
                .eq_ignore_ascii_case("pre-push")))
            .unwrap_or(false),
        "{}",
        both(&out)
    );
    assert!(
        world.project.join("control.txt").is_file(),
        "{}",
        both(&out)
    );
}

/// A directory named `.env` (`python -m venv .env`) is not a `.env` file:
/// it can be made and used, while `.env` files stay hidden.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn a_directory_named_env_is_usable() {
    require_sandbox!();
    let world = World::new();
    scenarios::plant_env_files(&world);
    let out = Seatbelt.run_sh(
        &world,
        "mkdir -p tool/.env/bin && printf '#!/bin/sh\\necho RAN-FROM-ENV-DIR\\n' > tool/.env/bin/python
         chmod +x tool/.env/bin/python && tool/.env/bin/python
         ls tool/.env
         cat .env sub/.env.local",
    );
    assert_line(&out, "RAN-FROM-ENV-DIR");
    assert_line(&out, "bin");
    assert_no_secret(&out);
    assert!(
        world.project.join("tool/.env/bin/python").is_file(),
        "{}",
        both(&out)
    );
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn project_root_cannot_be_moved_away() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join(".env"), &format!("TOKEN={SECRET}\n"));
    let target = PathBuf::from(format!("/private/tmp/sbx-moved-{}", unique(3)));
    let out = Seatbelt.run_sh(
        &world,
        &format!(
            "mv \"$PWD\" {t} ; cat {t}/.env ; echo ok > control.txt",
            t = shq_path(&target)
        ),
    );
    let moved = target.exists();
    if moved {
        // Put it back so the world cleans up.
        let _ = std::fs::rename(&target, &world.project);
    }
    assert!(!moved, "the project root was moved:\n{}", both(&out));
    assert_no_secret(&out);
    assert!(
        world.project.join("control.txt").is_file(),
        "{}",
        both(&out)
    );
}

// ---------------------------------------------------------------------------
// Read-only mode
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn read_only_mode_reads_the_project_only_and_writes_nothing() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join("notes.txt"), "project notes 456\n");
    let ro = ["--read-only"];
    let run = |argv: &[&str]| Seatbelt.run(&world, &ro, argv, &[]);

    // The loader works: no SIGABRT for plain system binaries.
    let t = run(&["/usr/bin/true"]);
    assert_eq!(t.status.signal(), None, "killed by a signal: {}", both(&t));
    assert!(t.status.success(), "{}", both(&t));
    let ls = run(&["/bin/ls", "."]);
    assert_eq!(ls.status.signal(), None, "{}", both(&ls));
    assert_line(&ls, "notes.txt");
    let cat = run(&["/bin/cat", "notes.txt"]);
    assert_line(&cat, "project notes 456");

    // Reads outside the project and the system paths are refused.
    let gitconfig = world.home.join(".gitconfig");
    let home_read = run(&["/bin/cat", gitconfig.to_str().unwrap()]);
    assert!(!home_read.status.success(), "{}", both(&home_read));
    assert_absent(&home_read, "t@example.invalid");
    let home_ls = run(&["/bin/ls", "-a", world.home.to_str().unwrap()]);
    assert!(!home_ls.status.success(), "{}", both(&home_ls));
    assert_absent(&home_ls, ".gitconfig");
    let cred = run(&["/bin/cat", world.home.join(".netrc").to_str().unwrap()]);
    assert_no_secret(&cred);

    // No writes: not in the project, not in /tmp.
    let name = format!("sbx-ro-{}", unique(10));
    let tmp_target = format!("/tmp/{name}");
    let touch_project = run(&["/usr/bin/touch", "ro-new.txt"]);
    let touch_tmp = run(&["/usr/bin/touch", &tmp_target]);
    let tmp_exists = Path::new("/private/tmp").join(&name).exists();
    let _ = std::fs::remove_file(Path::new("/private/tmp").join(&name));
    assert!(
        !world.project.join("ro-new.txt").exists(),
        "{}",
        both(&touch_project)
    );
    assert!(!tmp_exists, "{}", both(&touch_tmp));
    // A shell runs, and its writes fail the same way.
    let sh = run(&[
        "/bin/sh",
        "-c",
        "echo x > ro-sh.txt ; cat notes.txt ; echo SH-RAN",
    ]);
    assert_line(&sh, "SH-RAN");
    assert_line(&sh, "project notes 456");
    assert!(!world.project.join("ro-sh.txt").exists(), "{}", both(&sh));

    // For the first-run record: whether the xcrun shims work in this mode
    // (they load from Xcode or the Command Line Tools).
    for argv in [
        &["/usr/bin/git", "--version"][..],
        &[PYTHON, "-c", "print(1)"][..],
    ] {
        let o = run(argv);
        eprintln!(
            "record: read-only {argv:?}: {:?} {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
}

// ---------------------------------------------------------------------------
// Nothing else changes on the host
// ---------------------------------------------------------------------------

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn nothing_changes_on_the_host_but_allowed_writes() {
    require_sandbox!();
    let world = World::new();
    scenarios::nothing_changes_on_the_host_but_allowed_writes(
        &Seatbelt,
        &world,
        || plant_keychain_file(&world),
        "mkdir -p \"$HOME/Library/LaunchAgents\"
         rm -f \"$HOME/Library/Keychains/login.keychain-db\"
         rm -f .env ; mv .env env-moved",
        &[],
        None,
    );
}

// ---------------------------------------------------------------------------
// Descriptors the caller passes down
// ---------------------------------------------------------------------------

/// A descriptor the caller leaves open (a connected Unix socket to a host
/// listener) must not reach the command. Seatbelt only limits acquiring
/// resources, so an inherited socket would stay usable: sbx marks every
/// descriptor above 2 close-on-exec before it execs sandbox-exec. The
/// control runs the same child without sbx.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn inherited_descriptors_do_not_reach_the_command() {
    require_sandbox!();
    let Some(py) = tool(&[PYTHON]) else {
        return;
    };
    let world = World::new();
    scenarios::inherited_descriptors_do_not_reach_the_command(
        &Seatbelt,
        &world,
        Path::new(py),
        |use_sbx| SocketFile::tmp(if use_sbx { 11 } else { 12 }),
    );
}

/// With `filesystem = false`, writes go anywhere, and so must links and
/// clones: Rust's `fs::copy` clones (`fclonefileat`) and takes EPERM for
/// an error, so cargo would fail. Credentials stay out of reach of both.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn filesystem_false_allows_clones() {
    require_sandbox!();
    let world = World::new();
    world.user_config("[sandbox]\nfilesystem = false\n");
    util::write(&world.project.join("plain.txt"), "plain\n");
    let out = Seatbelt.run_sh(
        &world,
        "cp -c plain.txt \"$HOME/clone.txt\" && echo CLONE-OK
         ln plain.txt \"$HOME/hard.txt\" && echo HARDLINK-OK
         cp -c \"$HOME/.ssh/id_ed25519\" stolen 2>/dev/null && echo STOLEN",
    );
    assert_line(&out, "CLONE-OK");
    assert_line(&out, "HARDLINK-OK");
    assert_eq!(
        std::fs::read_to_string(world.home.join("clone.txt")).unwrap_or_default(),
        "plain\n",
        "{}",
        both(&out)
    );
    assert_no_line_starting(&out, "STOLEN");
    assert!(!world.project.join("stolen").exists(), "{}", both(&out));
}

/// The build the clone rule is for: cargo copies with `fs::copy`, which
/// clones on APFS and takes EPERM for an error, so `cargo build` with
/// `filesystem = false` must get as far as running what it built.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn filesystem_false_runs_a_cargo_build() {
    require_sandbox!();
    let Some(cargo) = on_path("cargo") else {
        return;
    };
    let world = World::new();
    world.user_config("[sandbox]\nfilesystem = false\n");
    util::write(
        &world.project.join("Cargo.toml"),
        "[package]\nname = \"hello\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    util::write(
        &world.project.join("src/main.rs"),
        "fn main() { println!(\"BUILT-AND-RAN\"); }\n",
    );
    // The toolchain rustup installed for the real user (the world's home
    // is a fresh one); cargo's own home is the world's.
    let real_home = std::env::var_os("HOME").map(PathBuf::from).unwrap();
    let rustup = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| real_home.join(".rustup"));
    let cargo_home = world.root.join("cargo-home");
    let out = Seatbelt.run(
        &world,
        &[],
        &[cargo.to_str().unwrap(), "run", "--offline", "-q"],
        &[
            ("RUSTUP_HOME", rustup.to_str().unwrap()),
            ("CARGO_HOME", cargo_home.to_str().unwrap()),
        ],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "BUILT-AND-RAN");
    assert!(world.project.join("target").is_dir(), "{}", both(&out));
}
