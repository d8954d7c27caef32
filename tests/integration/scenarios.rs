//! Enforcement scenarios that are the same on Linux and macOS, written once.
//! `sandbox_linux` and `sandbox_macos` each call them from a `#[test]` of
//! their own, with their [`Runner`] (how that platform starts `sbx run`) and
//! the platform's own extras: more to try, more to judge. What a scenario
//! checks, it checks on both.
//!
//! Like `host.rs`, every item here is used by `sandbox_macos`, which compiles
//! on every platform, so nothing is dead on either.

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::host::{
    assert_line, assert_no_line_starting, assert_no_secret, both, diff, secret_files, shq,
    snapshot, stderr, stdout, unix_received, SocketFile,
};
use crate::util::{self, Runner, World, SECRET};

// ---------------------------------------------------------------------------
// What is allowed
// ---------------------------------------------------------------------------

/// Writes in the project and in `/tmp` land on the host (`/tmp` is read back
/// at `real_tmp`, its host path), the same for `$TMPDIR` where the run has
/// one; `/dev/null` and `/dev/stderr` are writable. `extra` judges the run
/// first, with the name the temporary files were given (and removes what it
/// made).
pub fn writes_in_project_and_tmp_reach_the_host<R: Runner>(
    r: &R,
    world: &World,
    real_tmp: &Path,
    extra: impl FnOnce(&Output, &str),
) {
    let name = format!("sbx-test-{}", crate::host::unique(1));
    let out = r.run_sh(
        world,
        &format!(
            "echo in-project > made.txt && mkdir -p 'sub dir' && echo nested > 'sub dir/f'
             echo in-tmp > /tmp/{name}
             [ -n \"$TMPDIR\" ] && echo in-tmpdir > \"$TMPDIR/{name}\"
             echo to-null > /dev/null && echo NULL-OK
             echo to-stderr > /dev/stderr && echo STDERR-OK"
        ),
    );
    let tmp_file = real_tmp.join(&name);
    let tmp_body = std::fs::read_to_string(&tmp_file);
    let _ = std::fs::remove_file(&tmp_file);
    extra(&out, &name);
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(
        std::fs::read_to_string(world.project.join("made.txt")).unwrap(),
        "in-project\n"
    );
    assert_eq!(
        std::fs::read_to_string(world.project.join("sub dir/f")).unwrap(),
        "nested\n"
    );
    assert_eq!(tmp_body.unwrap(), "in-tmp\n", "{}", both(&out));
    assert_line(&out, "NULL-OK");
    assert_line(&out, "STDERR-OK");
    assert!(stderr(&out).contains("to-stderr"));
}

/// The command's exit code is sbx's, and what it printed before comes back.
pub fn exit_code_comes_back<R: Runner>(r: &R) {
    let world = World::new();
    let out = r.run_sh(&world, "echo before; exit 7");
    assert_eq!(out.status.code(), Some(7), "{}", both(&out));
    assert_line(&out, "before");
}

/// What is piped to sbx reaches the command.
pub fn stdin_reaches_the_command<R: Runner>(_: &R) {
    let world = World::new();
    world
        .sbx()
        .args(["run", "--", "cat"])
        .timeout(R::LIMIT)
        .write_stdin("piped input line\n")
        .assert()
        .success()
        .stdout("piped input line\n");
}

// ---------------------------------------------------------------------------
// Writes outside the writable roots
// ---------------------------------------------------------------------------

/// Writes in HOME, in the project's parent, to an rc file and through a
/// link out of the project are refused; the same write in the project
/// works. `extra` lines of script run among them, and `judge` checks what
/// they did right after the run (before anything else is judged).
pub fn writes_outside_writable_roots_are_refused<R: Runner>(
    r: &R,
    world: &World,
    extra: &str,
    judge: impl FnOnce(&Output),
) {
    let outside = world.root.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    symlink(&outside, world.project.join("out-link")).unwrap();
    let out = r.run_sh(
        world,
        &format!(
            "echo pwn > \"$HOME/pwned-home\"
             echo pwn > ../pwned-parent
             echo pwn >> \"$HOME/.bashrc\"
             echo pwn > out-link/pwned-link
             mkdir out-link/pwned-dir
             {extra}
             echo ok > control.txt"
        ),
    );
    judge(&out);
    assert!(!world.home.join("pwned-home").exists(), "{}", both(&out));
    assert!(!world
        .project
        .parent()
        .unwrap()
        .join("pwned-parent")
        .exists());
    assert!(!outside.join("pwned-link").exists());
    assert!(!outside.join("pwned-dir").exists());
    assert_eq!(
        std::fs::read_to_string(world.home.join(".bashrc")).unwrap(),
        "# rc\n"
    );
    // Positive control: the same kind of write inside the project worked.
    assert_eq!(
        std::fs::read_to_string(world.project.join("control.txt")).unwrap_or_default(),
        "ok\n",
        "{}",
        both(&out)
    );
}

// ---------------------------------------------------------------------------
// Credentials
// ---------------------------------------------------------------------------

/// A script that tries to read each path and prints a marker per attempt.
pub fn cat_each(paths: &[String]) -> String {
    let mut s = String::new();
    for p in paths {
        s.push_str(&format!("cat {} ; echo \"attempted $?\"\n", shq(p)));
    }
    s
}

/// `.env` files holding the secret at three depths (returned), and a
/// template beside them, `.env.example`, holding `TOKEN=example-value`.
pub fn plant_env_files(world: &World) -> [&'static str; 3] {
    let secret_envs = [".env", "sub/.env.local", "a/b/c/d/.env.production"];
    for f in secret_envs {
        util::write(&world.project.join(f), &format!("TOKEN={SECRET}\n"));
    }
    util::write(&world.project.join(".env.example"), "TOKEN=example-value\n");
    secret_envs
}

/// Every file holding the planted secret, linked into the project (the file,
/// and its top directory), reads as nothing; so do the `extra` links the
/// caller planted in the project. A link to an ordinary home file reads.
pub fn credentials_are_unreadable_through_a_project_symlink<R: Runner>(
    r: &R,
    world: &World,
    extra: &[&str],
) {
    let files = secret_files(world);
    let mut paths = Vec::new();
    for (i, f) in files.iter().enumerate() {
        let link = world.project.join(format!("link{i}"));
        symlink(world.home.join(f), &link).unwrap();
        paths.push(format!("link{i}"));
        // The top directory of the credential, linked as a directory.
        let top = f.components().next().unwrap().as_os_str();
        let dir_link = world.project.join(format!("dirlink{i}"));
        symlink(world.home.join(top), &dir_link).unwrap();
        let rest = f.strip_prefix(top).unwrap();
        if !rest.as_os_str().is_empty() {
            paths.push(format!("dirlink{i}/{}", rest.display()));
        }
    }
    paths.extend(extra.iter().map(|p| p.to_string()));
    symlink(world.home.join(".bashrc"), world.project.join("rc-link")).unwrap();
    let script = cat_each(&paths) + "cat rc-link\ncat link*/* dirlink*/* dirlink*/*/* 2>&1\n";
    let out = r.run_sh(world, &script);
    assert_no_secret(&out);
    assert_eq!(
        stdout(&out).matches("attempted").count(),
        paths.len(),
        "{}",
        both(&out)
    );
    // Positive control: a symlink to an ordinary home file reads.
    assert_line(&out, "# rc");
}

/// `~/.aws` is a link into `~/dotfiles`: the credential is unreadable by
/// either spelling, while the rest of `~/dotfiles` reads.
pub fn symlinked_credential_dir_is_unreadable_at_both_spellings<R: Runner>(r: &R) {
    let world = World::new();
    let dotfiles = world.home.join("dotfiles");
    std::fs::create_dir_all(&dotfiles).unwrap();
    std::fs::rename(world.home.join(".aws"), dotfiles.join("aws")).unwrap();
    symlink("dotfiles/aws", world.home.join(".aws")).unwrap();
    util::write(&dotfiles.join("other.txt"), "dotfiles readable\n");
    let out = r.run_sh(
        &world,
        &(cat_each(&[
            world.home.join(".aws/credentials").to_str().unwrap().into(),
            dotfiles.join("aws/credentials").to_str().unwrap().into(),
            dotfiles.join("other.txt").to_str().unwrap().into(),
        ]) + "ls -la \"$HOME/.aws/\" \"$HOME/dotfiles/aws/\" 2>&1"),
    );
    assert_no_secret(&out);
    assert_line(&out, "dotfiles readable");
}

// ---------------------------------------------------------------------------
// Files that run later
// ---------------------------------------------------------------------------

/// Git hooks and config, `.sbx.toml`, `.envrc` and `.vscode` cannot be
/// changed, replaced, moved or removed, while the working tree and `.git`
/// itself stay writable.
pub fn runs_later_files_are_read_only<R: Runner>(r: &R) {
    let world = World::new();
    world.git_repo();
    let sbx_toml = "[sandbox]\nnetwork = \"deny\"\n";
    util::write(&world.project.join(".sbx.toml"), sbx_toml);
    util::write(
        &world.project.join(".git/hooks/pre-commit"),
        "#!/bin/sh\nexit 0\n",
    );
    util::write(&world.project.join(".envrc"), "export A=1\n");
    util::write(&world.project.join(".vscode/tasks.json"), "{}\n");
    let hooks_before = snapshot(&world.project.join(".git/hooks"));
    let vscode_before = snapshot(&world.project.join(".vscode"));
    let config_before = std::fs::read_to_string(world.project.join(".git/config")).unwrap();
    let out = r.run_sh(
        &world,
        &format!(
            "printf '#!/bin/sh\\ntouch \"$HOME/SBX_PWN\"\\n' > .git/hooks/pre-commit
             printf '#!/bin/sh\\ntouch \"$HOME/SBX_PWN\"\\n' > .git/hooks/post-checkout
             rm -f .git/hooks/pre-commit
             echo '[core]' >> .git/config
             {git} config core.fsmonitor ./evil.sh
             {git} config core.hooksPath .githooks
             echo 'network = \"allow\"' >> .sbx.toml
             rm -f .sbx.toml ; mv .sbx.toml moved.toml
             mv .git/hooks .git/hooks2
             echo evil > .git/x ; mv .git/x .git/hooks/pre-push
             mv .git .git2 ; mv .git/config .git/config2
             ls -la .git/hooks2 .git2 2>&1
             echo 'touch \"$HOME/SBX_PWN\"' >> .envrc ; rm -f .envrc
             echo '{{\"tasks\": []}}' > .vscode/tasks.json ; echo x > .vscode/settings.json
             mv .vscode .vscode2
             echo ok > control.txt",
            git = R::GIT
        ),
    );
    // Reduced mode (Linux, no mounts) lets the command make these changes
    // and puts the paths back after it: what it moved stays where it put
    // it, for the user to review; what runs later is as it was.
    let during = !util::unclaimed(&out, util::RUNS_LATER_WRITABLE);
    if during {
        assert!(!world.project.join(".git2").exists(), "{}", both(&out));
        assert!(!world.project.join(".git/hooks2").exists());
    }
    assert_eq!(
        snapshot(&world.project.join(".git/hooks")),
        hooks_before,
        "{}",
        both(&out)
    );
    assert_eq!(
        std::fs::read_to_string(world.project.join(".git/config")).unwrap(),
        config_before,
        "{}",
        both(&out)
    );
    assert_eq!(
        std::fs::read_to_string(world.project.join(".sbx.toml")).unwrap(),
        sbx_toml
    );
    assert_eq!(
        std::fs::read_to_string(world.project.join(".envrc")).unwrap(),
        "export A=1\n"
    );
    assert_eq!(snapshot(&world.project.join(".vscode")), vscode_before);
    assert!(!world.home.join("SBX_PWN").exists());
    if !during {
        return;
    }
    assert!(!world.project.join("moved.toml").exists());
    assert!(!world.project.join(".vscode2").exists());
    // Positive controls: the working tree and .git itself stay writable, so
    // the refusals above are the protection, not a read-only project.
    assert!(
        world.project.join("control.txt").is_file(),
        "{}",
        both(&out)
    );
    assert!(world.project.join(".git/x").is_file(), "{}", both(&out));
}

// ---------------------------------------------------------------------------
// Environment
// ---------------------------------------------------------------------------

/// Credential variables in sbx's environment (the common ones and `extra`)
/// do not reach the command: the secret is in nothing it prints, and no
/// variable named in `removed` is set. An ordinary variable is.
pub fn credential_env_vars_are_removed<R: Runner>(r: &R, extra: &[(&str, &str)], removed: &[&str]) {
    let world = World::new();
    let mut env = vec![("GITHUB_TOKEN", SECRET), ("AWS_SECRET_ACCESS_KEY", SECRET)];
    env.extend_from_slice(extra);
    env.push(("FOO", "bar"));
    let out = r.run_sh_env(&world, "env", &env);
    assert!(out.status.success(), "{}", both(&out));
    assert_no_secret(&out);
    for name in removed {
        assert_no_line_starting(&out, &format!("{name}="));
    }
    assert_line(&out, "FOO=bar");
}

// ---------------------------------------------------------------------------
// Nothing else changes on the host
// ---------------------------------------------------------------------------

/// The command tries every kind of change outside what it may write (HOME,
/// the project's parents, credentials, missing credential paths, sbx's own
/// config, git hooks and config, `.env`), plus the platform's `extra` lines;
/// the only changes on the host are its writes in the project (`allowed`
/// beside the common ones), and entries under `refreshed` that may change
/// but not appear. `prepare` runs once the world is set up, before the
/// "before" snapshot. Returns the "after" snapshot, for the caller's own
/// checks.
pub fn nothing_changes_on_the_host_but_allowed_writes<R: Runner>(
    r: &R,
    world: &World,
    prepare: impl FnOnce(),
    extra: &str,
    allowed: &[&str],
    refreshed: Option<&str>,
) -> BTreeMap<PathBuf, String> {
    world.git_repo();
    util::write(&world.project.join(".env"), &format!("K={SECRET}\n"));
    // Missing credential paths must stay missing (and not be created as
    // mount points).
    std::fs::remove_dir_all(world.home.join(".kube")).unwrap();
    std::fs::remove_file(world.home.join(".netrc")).unwrap();
    prepare();
    // A run in `prepare` leaves its config copies to its guardian, which
    // removes them a moment after sbx exits: not part of the picture.
    util::wait_until_config_copies_are_removed(&world.home);
    let before = snapshot(&world.root);
    let out = r.run_sh(
        world,
        &format!(
            "touch \"$HOME/SBX_PWN\" ; echo x >> \"$HOME/.bashrc\"
             echo x > ../parent-pwn ; echo x > ../../root-pwn
             echo x > \"$HOME/.ssh/id_new\" ; rm -f \"$HOME/.ssh/id_ed25519\" ; mv \"$HOME/.aws\" \"$HOME/aws2\"
             mkdir -p \"$HOME/.kube\" ; echo x > \"$HOME/.netrc\" ; echo x > \"$HOME/.config/sbx/config.toml\"
             printf evil > .git/hooks/pre-commit ; {git} config core.fsmonitor ./evil.sh ; mv .git .git2
             ln \"$HOME/.pypirc\" ./k ; cat ./k
             {extra}
             echo allowed > allowed.txt ; mkdir -p made/dir && echo y > made/dir/f",
            git = R::GIT
        ),
    );
    assert_no_secret(&out);
    // The run's config copies are removed by its guardian, a moment after
    // sbx exits.
    util::wait_until_config_copies_are_removed(&world.home);
    let after = snapshot(&world.root);
    let changes = diff(&before, &after);
    // Reduced mode (Linux, no mounts) leaves the whole project writable,
    // `.env` included, and says so: there, only what runs later must be as
    // it was (what the command moved elsewhere stays, disarmed).
    let reduced = util::unclaimed(&out, util::RUNS_LATER_WRITABLE);
    let runs_later = |c: &str| {
        [
            ".git/hooks",
            ".git/config",
            ".sbx.toml",
            ".envrc",
            ".vscode",
        ]
        .iter()
        .any(|p| c[2..].starts_with(&format!("home/my project/{p}")))
            && !c.starts_with("- ")
    };
    // What the command may leave: the files it wrote in the project.
    let allowed: Vec<&str> = [
        "+ home/my project/allowed.txt",
        "+ home/my project/made",
        "+ home/my project/made/dir",
        "+ home/my project/made/dir/f",
    ]
    .into_iter()
    .chain(allowed.iter().copied())
    .collect();
    let unexpected: Vec<&String> = changes
        .iter()
        .filter(|c| {
            let expected = allowed.iter().any(|a| c.starts_with(a))
                || refreshed.is_some_and(|prefix| c.starts_with(prefix))
                || (reduced && c[2..].starts_with("home/my project/") && !runs_later(c));
            !expected
        })
        .collect();
    assert!(
        unexpected.is_empty(),
        "unexpected host changes: {unexpected:#?}\n{}",
        both(&out)
    );
    assert!(
        changes
            .iter()
            .any(|c| c.starts_with("+ home/my project/made/dir/f")),
        "the allowed write did not happen: {changes:#?}\n{}",
        both(&out)
    );
    after
}

// ---------------------------------------------------------------------------
// Descriptors the caller passes down
// ---------------------------------------------------------------------------

/// A descriptor the caller leaves open (a connected Unix socket to a host
/// listener, passed as an inherited fd) must not reach the command. The
/// control runs the same child without sbx, and the bytes do arrive. `py`
/// is the host's Python; `socket(through_sbx)` makes each run's listener.
pub fn inherited_descriptors_do_not_reach_the_command<R: Runner>(
    r: &R,
    world: &World,
    py: &Path,
    socket: impl Fn(bool) -> SocketFile,
) {
    let child_code =
        "import socket,sys; socket.socket(fileno=int(sys.argv[1])).send(b'LEAK'); print('sent')";
    let parent_code = r#"import socket, subprocess, sys
path, use_sbx, sbx, py, child = sys.argv[1], sys.argv[2] == "1", sys.argv[3], sys.argv[4], sys.argv[5]
s = socket.socket(socket.AF_UNIX)
s.connect(path)
fd = s.fileno()
argv = [py, "-c", child, str(fd)]
if use_sbx:
    argv = [sbx, "run", "--"] + argv
r = subprocess.run(argv, pass_fds=[fd], capture_output=True, text=True)
print("child-exit", r.returncode)
print(r.stdout, r.stderr)
"#;
    for use_sbx in [false, true] {
        let sock = socket(use_sbx);
        // The parent script runs directly (not sandboxed), in the
        // environment the platform gives sbx.
        let env_source = r.sbx_cmd(world);
        let mut cmd = Command::new(py);
        cmd.arg("-c")
            .arg(parent_code)
            .arg(&sock.path)
            .arg(if use_sbx { "1" } else { "0" })
            .arg(util::sbx_path())
            .arg(py)
            .arg(child_code)
            .env_clear()
            .envs(
                env_source
                    .get_envs()
                    .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned()))),
            )
            .current_dir(&world.project);
        let out = r.output(cmd);
        let received = unix_received(&sock.listener, R::LISTEN_GRACE).unwrap_or_default();
        let leaked = received.windows(4).any(|w| w == b"LEAK");
        let text = both(&out);
        if use_sbx {
            assert!(!leaked, "the inherited socket reached the sandbox: {text}");
            assert!(!text.contains("\nsent"), "{text}");
        } else {
            assert!(
                leaked,
                "control: the socket should carry bytes without sbx: {text}"
            );
        }
    }
}

/// `dd` of 3 MiB to `big` in the project, run under `--max-file-size 1M`
/// (output `out`), was stopped by the limit: the file holds at most 1 MiB,
/// the status is SIGXFSZ's, and sbx names the limit.
pub fn a_large_write_was_stopped(world: &World, out: &Output) {
    let size = std::fs::metadata(world.project.join("big")).unwrap().len();
    assert!(size <= 1 << 20, "wrote {size} bytes: {}", both(out));
    assert_eq!(out.status.code(), Some(128 + 25), "{}", both(out));
    assert!(
        crate::host::stderr(out).contains("stopped by the max_file_size limit (1M)"),
        "{}",
        both(out)
    );
}
