//! Kernel interfaces and credentials.

use super::*;

/// Tries each datagram-like socketpair type and, if one is created, sends
/// through it to the path in argv[1]; then checks stream and seqpacket pairs.
const PY_SOCKETPAIR: &str = r#"
import socket, sys
for name, t in [("RAW", socket.SOCK_RAW), ("DGRAM", socket.SOCK_DGRAM),
                 ("DGRAM-CLOEXEC", socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)]:
    try:
        a, b = socket.socketpair(socket.AF_UNIX, t)
    except OSError as e:
        print("REFUSED", name, e.errno)
        continue
    try:
        a.sendto(b"leak-" + name.encode(), sys.argv[1])
        print("SENT", name)
    except OSError as e:
        print("CREATED", name, e.errno)
for name, t in [("STREAM", socket.SOCK_STREAM), ("SEQPACKET", socket.SOCK_SEQPACKET)]:
    a, b = socket.socketpair(socket.AF_UNIX, t)
    a.sendall(b"p")
    print("PAIR-OK" if b.recv(1) == b"p" else "PAIR-BAD", name)
"#;

/// Everything a non-blocking datagram socket holds. Asked once the sender
/// has exited, it needs no wait: a Unix datagram is queued on the receiving
/// socket before `sendto` returns.
fn datagrams(sock: &UnixDatagram) -> Vec<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    while let Ok(n) = sock.recv(&mut buf) {
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    got
}

/// Round 1: seccomp refused `socket(AF_UNIX)` but not `socketpair(AF_UNIX,
/// SOCK_RAW)`, which the kernel turns into a datagram socket that can
/// `sendto` any host socket by path. Now every socketpair type but stream
/// and seqpacket is EPERM; a host datagram socket receives nothing.
#[test]
fn datagram_socketpairs_are_refused() {
    require_sandbox!();
    let Some(python) = tool(&["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]) else {
        return;
    };
    let world = World::new();
    let path = world.project.join("d.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_nonblocking(true).unwrap();
    let mut cmd = world.sbx_std();
    cmd.arg("run")
        .arg("--")
        .args([python, "-c", PY_SOCKETPAIR, path.to_str().unwrap()])
        .stdin(Stdio::null());
    let out = cmd.output().unwrap();
    show("socketpair", &out);
    assert_ok(&out);
    let got = datagrams(&sock);
    assert!(
        got.is_empty(),
        "the host socket received {got:?}\n{}",
        both(&out)
    );
    let lines: Vec<String> = stdout(&out).lines().map(String::from).collect();
    for want in [
        "REFUSED RAW 1",
        "REFUSED DGRAM 1",
        "REFUSED DGRAM-CLOEXEC 1",
        "PAIR-OK STREAM",
        "PAIR-OK SEQPACKET",
    ] {
        assert!(
            lines.iter().any(|l| l == want),
            "no {want:?}\n{}",
            both(&out)
        );
    }
    // Positive control: unsandboxed, the same script reaches the listener.
    let host = Command::new(python)
        .args(["-c", PY_SOCKETPAIR, path.to_str().unwrap()])
        .output()
        .unwrap();
    let got = datagrams(&sock);
    assert!(
        got.iter().any(|g| g == "leak-RAW"),
        "the control did not reach the listener: {got:?}\n{}",
        both(&host)
    );
}

/// Rounds 1 and 2: more credential variables (`*_PASS`, `*PASSPHRASE`,
/// `*APIKEY`, `*_JWT`, `*WEBHOOK_URL`, `*TOKEN`, `*_DSN`, a URL with a
/// password, ...) and files (~/.pgpass, git's ~/.config/git/credentials)
/// reached the command.
#[test]
fn credential_variables_and_files_added_by_the_reviews_are_hidden() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.home.join(".pgpass"), SECRET);
    util::write(&world.home.join(".config/git/credentials"), SECRET);
    let mut cmd = world.sbx_std();
    for name in [
        "DB_PASS",
        "GPG_PASSPHRASE",
        "STRIPE_APIKEY",
        "SESSION_JWT",
        "SLACK_WEBHOOK_URL",
        "TEAMS_WEBHOOK",
        "GITHUB_TOKEN",
        "MYSQL_PASSWORD",
        "SENTRY_DSN",
        "GL_PAT",
        "NPM_AUTH",
        "X_AUTH_HEADER",
        "ADMIN_PWD",
        "KUBECONFIG",
    ] {
        cmd.env(name, SECRET);
    }
    cmd.env("DATABASE_URL", format!("postgres://app:{SECRET}@db/app"))
        .env("KEEP_ME", "visible");
    sh_in(
        &mut cmd,
        &[],
        "env; cat ~/.pgpass ~/.config/git/credentials; true",
        &[],
    );
    let out = cmd.output().unwrap();
    show("credentials", &out);
    assert_ok(&out);
    assert!(
        stdout(&out).lines().any(|l| l == "KEEP_ME=visible"),
        "{}",
        both(&out)
    );
    assert_no_secret(&out);
}

/// Round 3, F1: a protected path that is a symlink to a directory inside the
/// project (`.git/hooks -> ../githooks`, hooks kept in the tree) protects its
/// target too: the command cannot plant a hook there, and host git runs none.
#[test]
fn linked_hooks_directory_target_is_read_only() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let hooks = world.project.join("githooks");
    std::fs::create_dir_all(&hooks).unwrap();
    std::fs::remove_dir_all(world.project.join(".git/hooks")).unwrap();
    std::os::unix::fs::symlink("../githooks", world.project.join(".git/hooks")).unwrap();
    let planted = world.home.join("R3_linked_hooks");
    let out = Sbx.run_sh(
        &world,
        &format!(
            "printf '#!/bin/sh\\ntouch {}\\n' > githooks/pre-commit && chmod +x githooks/pre-commit && echo planted",
            shq_path(&planted)
        ),
    );
    assert_absent(&out, "NOT sandboxed");
    if !util::unclaimed(&out, util::RUNS_LATER_WRITABLE) {
        assert!(!stdout(&out).contains("planted"), "{}", both(&out));
    }
    assert!(!present(&hooks.join("pre-commit")), "{}", both(&out));
    util::git(
        &world.project,
        &["commit", "-q", "--allow-empty", "-m", "x"],
    );
    assert!(
        !present(&planted),
        "host git ran a hook the command planted"
    );
}

/// Round 3, F2: a `.git` the command creates is caught in both shapes it
/// slipped through: a risky key written on the section line of a new
/// repository's config is reported, and a `.git` *file* pointing git at a
/// repository prepared elsewhere is moved aside.
#[test]
fn new_git_with_same_line_key_or_gitdir_file_is_caught() {
    require_sandbox!();
    let world = World::new();
    let out = Sbx.run_sh(
        &world,
        "git init -q . && printf '[core] fsmonitor = \"touch /x; false\"\\n' >> .git/config",
    );
    assert!(
        stderr(&out).contains("core.fsmonitor"),
        "a same-line key went unreported\n{}",
        both(&out)
    );
    let other = World::new();
    let out = Sbx.run_sh(&other, "echo 'gitdir: /tmp/somewhere' > .git");
    assert!(
        !present(&other.project.join(".git")),
        "a .git file was left in place\n{}",
        both(&out)
    );
    assert!(
        present(&other.project.join(".git.sbx-blocked")),
        "{}",
        both(&out)
    );
}

/// Round 4, F1: when the project's `.git` is a symlink to a separate git
/// directory, the command cannot swap the link for a repository of its own
/// whose hooks and config host git would run: in full mode the link is a
/// mount point for the run; in reduced mode the replacement is moved aside.
#[test]
fn linked_git_directory_cannot_be_swapped() {
    require_sandbox!();
    let world = World::new();
    let gitdir = world.home.join("gitdirs/p.git");
    std::fs::create_dir_all(gitdir.parent().unwrap()).unwrap();
    util::git(
        &world.project,
        &[
            "init",
            "-q",
            "-b",
            "main",
            "--separate-git-dir",
            gitdir.to_str().unwrap(),
        ],
    );
    // `--separate-git-dir` leaves a `.git` file; make it the symlink layout.
    std::fs::remove_file(world.project.join(".git")).unwrap();
    std::os::unix::fs::symlink(&gitdir, world.project.join(".git")).unwrap();
    let planted = world.home.join("R4_gitlink_hook");
    let out = Sbx.run_sh(
        &world,
        &format!(
            "rm .git && git init -q . && printf '#!/bin/sh\\ntouch {}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
            shq_path(&planted)
        ),
    );
    assert_absent(&out, "NOT sandboxed");
    if !util::contained() {
        // Full mode mounts the link onto itself for the run: it stays.
        assert_eq!(
            std::fs::read_link(world.project.join(".git")).ok(),
            Some(gitdir.clone()),
            "{}",
            both(&out)
        );
        assert!(!present(&world.project.join(".git.sbx-blocked")));
        assert!(!present(&planted));
        return;
    }
    let now = std::fs::symlink_metadata(world.project.join(".git")).ok();
    assert!(
        now.is_none(),
        "the command's .git was left in place\n{}",
        both(&out)
    );
    assert!(
        present(&world.project.join(".git.sbx-blocked")),
        "{}",
        both(&out)
    );
    assert!(
        gitdir.join("HEAD").is_file(),
        "the real git directory must be untouched"
    );
    assert!(!present(&planted));
}

/// Round 4, F2: a `.env` in a directory above the project (python-dotenv's
/// find_dotenv walks up to it) is masked like the project's own.
#[test]
fn env_file_above_the_project_is_masked() {
    require_sandbox!();
    let world = World::new();
    let parent_env = world.project.parent().unwrap().join(".env");
    util::write(&parent_env, &format!("TOKEN={}\n", util::SECRET));
    let out = Sbx.run_sh(&world, "cat ../.env; cat \"$HOME/.env\"; echo done");
    assert_no_secret(&out);
    assert!(stdout(&out).contains("done"), "{}", both(&out));
}

/// The same for names in any case and names that are not UTF-8: the
/// listing of the directories above skipped those (the walk of the
/// project never did).
#[test]
fn env_files_above_the_project_are_masked_whatever_their_names_spell() {
    use std::os::unix::ffi::OsStrExt;
    require_sandbox!();
    let world = World::new();
    let parent = world.project.parent().unwrap();
    let odd = std::ffi::OsStr::from_bytes(b".env.\xff");
    for name in [std::ffi::OsStr::new(".ENV.Local"), odd] {
        util::write(&parent.join(name), &format!("TOKEN={}\n", util::SECRET));
    }
    let out = Sbx.run_sh(&world, "cat ../.ENV.Local ../.env.*; echo done");
    assert_no_secret(&out);
    assert!(stdout(&out).contains("done"), "{}", both(&out));
}

/// In a git repository the inner stage pins and masks after bubblewrap
/// has entered the working directory: run from a subdirectory it pins,
/// the command's working directory stayed on the mount below the pin, and
/// `cat .env` read the secret there (found in stop 32's own review).
#[test]
fn env_files_stay_masked_for_a_command_started_in_a_subdirectory() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    for rel in [".env", "pkg/.env", "pkg/a/.env.local"] {
        util::write(&world.project.join(rel), &format!("TOKEN={SECRET}\n"));
    }
    let pkg = world.project.join("pkg");
    let out = sbx_sh(
        &world,
        &pkg,
        &[],
        "cat .env a/.env.local ../.env 2>&1; grep -r TOKEN . 2>&1
         git config --local user.email me@example.invalid && echo CONFIG-OK",
        &[],
    );
    // The config copies were set up (bubblewrap's own plan, after a failed
    // set-up, masks too: this test is about the inner stage's).
    assert_line(&out, "CONFIG-OK");
    if util::unclaimed(&out, util::ENV_READABLE) {
        return;
    }
    assert_no_secret(&out);
}

/// The same for a project inside another writable root, where every
/// directory between that root and the project's `.git` is pinned, the
/// project itself included: relative paths from the working directory
/// missed the masks and the config copies (`git config` failed with
/// "Device or resource busy").
#[test]
fn a_project_inside_another_writable_root_keeps_its_masks_and_config_copies() {
    require_sandbox!();
    let world = World::new();
    let app = world.project.join("apps/app");
    std::fs::create_dir_all(&app).unwrap();
    util::repo_with_commit(&app);
    util::write(&app.join(".env"), &format!("TOKEN={SECRET}\n"));
    let outer = world.project.to_str().unwrap().to_string();
    let out = sbx_sh(
        &world,
        &app,
        &["--writable", &outer],
        "cat .env 2>&1; git config --local user.email me@example.invalid && echo CONFIG-OK",
        &[],
    );
    assert_line(&out, "CONFIG-OK");
    let config = std::fs::read_to_string(app.join(".git/config")).unwrap();
    assert!(config.contains("me@example.invalid"), "{config}");
    if util::unclaimed(&out, util::ENV_READABLE) {
        return;
    }
    assert_no_secret(&out);
}
