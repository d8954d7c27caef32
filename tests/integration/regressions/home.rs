//! With home writable (`--writable ~`), what runs later from a home stays
//! out of the command's reach: Python's user site, rustup's env file.

use super::*;
use std::ffi::OsStr;

/// A `.pth` file in Python's user site runs at every Python start on the
/// host; the command could make the directory and plant one.
#[test]
fn python_user_site_is_kept_from_a_writable_home() {
    require_sandbox!();
    let Some(python) = tool(&["/usr/bin/python3"]) else {
        return;
    };
    let world = World::new();
    let home = world.home.to_str().unwrap().to_string();
    let marker = world.home.join("PWNED-PTH");
    let out = sbx_sh(
        &world,
        &world.project,
        &["--writable", &home],
        r#"d=$("$1" -c 'import site; print(site.getusersitepackages())')
mkdir -p "$d" && printf 'import os; os.system("touch %s")\n' "$2" > "$d/evil.pth" && echo PLANTED
printf 'touch %s\n' "$2" >> "$HOME/.cargo/env" 2>/dev/null && echo CARGO-ENV
touch "$HOME/ok" && echo HOME-WRITABLE"#,
        &[python, marker.to_str().unwrap()],
    );
    if util::contained() {
        // Reduced mode refuses a writable home, which holds sbx's cache.
        assert_eq!(out.status.code(), Some(125), "{}", both(&out));
        assert!(stderr(&out).contains("cache directory"), "{}", both(&out));
        assert!(!marker.exists());
        return;
    }
    // Positive control: home is writable.
    assert!(stdout(&out).contains("HOME-WRITABLE"), "{}", both(&out));
    // Run by the host's Python as the user would.
    let host = world
        .host_cmd(python)
        .args(["-c", "import site; print(site.getusersitepackages())"])
        .output()
        .unwrap();
    assert!(host.status.success(), "{host:?}");
    assert!(
        !marker.exists(),
        "the host's Python ran the planted .pth file: {}",
        both(&out)
    );
    let _ = world
        .host_cmd("sh")
        .args(["-c", ". \"$HOME/.cargo/env\" 2>/dev/null; true"])
        .output()
        .unwrap();
    assert!(!marker.exists(), "~/.cargo/env ran: {}", both(&out));
}

/// `sbx run -- sh -c SCRIPT sh ARGS...` in `dir`, with the user database
/// (stood in for with nss_wrapper) giving `account` as this user's home
/// while `HOME` stays the world's; `None` without nss_wrapper.
///
/// A statically linked sbx (the musl release build) loads no preloaded
/// library and reads `/etc/passwd` itself: it runs where that file lacks
/// this user and `nsswitch.conf` names another source, so that it asks the
/// system's `getent`, which loads nss_wrapper (`crate::account`); with
/// `getent` false, there it cannot run (an empty file in its place).
fn run_with_account_home(
    world: &World,
    account: &Path,
    dir: &Path,
    script: &str,
    args: &[&str],
    getent: bool,
) -> Option<Output> {
    let mut cmd = sbx_with_account_home(world, account, dir, getent)?;
    sh_in(&mut cmd, &[], script, args);
    let out = cmd.output().unwrap();
    show(script, &out);
    Some(out)
}

/// sbx in `dir`, with no arguments yet, under the user database of
/// [`run_with_account_home`]; `None` without nss_wrapper.
fn sbx_with_account_home(
    world: &World,
    account: &Path,
    dir: &Path,
    getent: bool,
) -> Option<Command> {
    use std::os::unix::fs::MetadataExt;
    let wrapper = tool(&[
        "/usr/lib/x86_64-linux-gnu/libnss_wrapper.so",
        "/usr/lib/aarch64-linux-gnu/libnss_wrapper.so",
        "/usr/lib64/libnss_wrapper.so",
    ])?;
    let me = std::fs::metadata("/proc/self").unwrap();
    let passwd = world.root.join("passwd");
    let group = world.root.join("group");
    let line = format!(
        "me:x:{}:{}::{}:/bin/sh\n",
        me.uid(),
        me.gid(),
        account.display()
    );
    util::write(&passwd, &line);
    util::write(&group, &format!("me:x:{}:\n", me.gid()));
    let mut cmd = if util::statically_linked(&util::sbx_path()) {
        // The user database as musl reads it has no line for this user,
        // and names another source: sbx asks getent, which nss_wrapper
        // answers.
        let local = world.root.join("passwd.local");
        let others: String = std::fs::read_to_string("/etc/passwd")
            .unwrap()
            .lines()
            .filter(|l| l.split(':').nth(2) != Some(&me.uid().to_string()))
            .map(|l| format!("{l}\n"))
            .collect();
        util::write(&local, &others);
        let nsswitch = world.root.join("nsswitch.conf");
        util::write(
            &nsswitch,
            "passwd: files sss\ngroup: files\nhosts: files dns\n",
        );
        let mut binds: Vec<&OsStr> = vec![
            "--ro-bind".as_ref(),
            local.as_os_str(),
            "/etc/passwd".as_ref(),
            "--ro-bind".as_ref(),
            nsswitch.as_os_str(),
            "/etc/nsswitch.conf".as_ref(),
        ];
        if !getent {
            binds.extend::<[&OsStr; 3]>([
                "--ro-bind".as_ref(),
                "/dev/null".as_ref(),
                "/usr/bin/getent".as_ref(),
            ]);
        }
        if util::contained() {
            world.contained_with(&util::sbx_path(), &binds)
        } else {
            // A bubblewrap of the test's own, which binds those two and
            // nothing else.
            let mut cmd = world.host_cmd("/usr/bin/bwrap");
            cmd.args(["--dev-bind", "/", "/"])
                .args(&binds)
                .arg("--")
                .arg(util::sbx_path());
            cmd
        }
    } else {
        world.sbx_std()
    };
    cmd.current_dir(dir)
        .env("LD_PRELOAD", wrapper)
        .env("NSS_WRAPPER_PASSWD", &passwd)
        .env("NSS_WRAPPER_GROUP", &group);
    Some(cmd)
}

/// `sbx profile --home DIR` pins the home the user database gives as well:
/// the account's own credentials are in a plain profile (they are masked
/// in a run), and in no pinned one (a snapshot must not depend on whether
/// the machine's account has a `~/.ssh`).
#[test]
fn a_pinned_profile_names_no_credential_of_the_account_home() {
    let world = World::new();
    let account = world.root.join("account home");
    util::write(&account.join(".ssh/id_ed25519"), &format!("{SECRET}\n"));
    let needle = account.join(".ssh");
    let needle = needle.to_str().unwrap();
    let home = world.home.to_str().unwrap();
    for (pinned, args) in [
        (false, vec!["profile", "--platform", "linux"]),
        (true, vec!["profile", "--platform", "linux", "--home", home]),
    ] {
        let Some(mut cmd) = sbx_with_account_home(&world, &account, &world.project, true) else {
            return;
        };
        let out = cmd.args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", both(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(!text.contains(needle), pinned, "{args:?}: {}", both(&out));
    }
}

/// With `HOME` pointing elsewhere (a harness's scratch home, `su` without
/// `-`), the credentials of the home the user database names stayed
/// readable: only those under `HOME` were hidden (found by stop 32's
/// review).
#[test]
fn the_account_homes_credentials_are_hidden_when_home_is_elsewhere() {
    require_sandbox!();
    let world = World::new();
    let account = world.root.join("account home");
    for rel in [".ssh/id_ed25519", ".aws/credentials"] {
        util::write(&account.join(rel), &format!("{SECRET}\n"));
    }
    let Some(out) = run_with_account_home(
        &world,
        &account,
        &world.project,
        "cat \"$1/.ssh/id_ed25519\" \"$1/.aws/credentials\" 2>&1; echo DONE",
        &[account.to_str().unwrap()],
        true,
    ) else {
        return;
    };
    assert_no_secret(&out);
    assert_line(&out, "DONE");
}

/// And a dotfiles repository in that home made the whole home the project,
/// writable, for a command started below it: the search for the project
/// stops at either home now (same review).
#[test]
fn a_dotfiles_repository_in_the_account_home_is_never_the_project() {
    require_sandbox!();
    let world = World::new();
    let account = world.root.join("account home");
    let work = account.join("scratch");
    std::fs::create_dir_all(&work).unwrap();
    util::repo_with_commit(&account);
    util::write(&account.join(".bashrc"), "# rc\n");
    let Some(out) = run_with_account_home(
        &world,
        &account,
        &work,
        "echo 'touch PWNED' >> \"$1/.bashrc\" 2>&1; echo DONE",
        &[account.to_str().unwrap()],
        true,
    ) else {
        return;
    };
    assert_line(&out, "DONE");
    assert_eq!(
        std::fs::read_to_string(account.join(".bashrc")).unwrap(),
        "# rc\n",
        "{}",
        both(&out)
    );
}

/// A static build that cannot ask `getent` (none, or it fails) where
/// `nsswitch.conf` names other sources than `/etc/passwd` does not know the
/// account's home, and says so on every run (found by the review of the
/// musl build: it said nothing). A glibc build asks its C library, which
/// answers here.
#[test]
fn an_account_home_that_cannot_be_asked_for_is_said() {
    require_sandbox!();
    let world = World::new();
    let account = world.root.join("account home");
    util::write(&account.join(".ssh/id_ed25519"), &format!("{SECRET}\n"));
    let Some(out) = run_with_account_home(
        &world,
        &account,
        &world.project,
        "cat \"$1/.ssh/id_ed25519\" 2>&1; echo DONE",
        &[account.to_str().unwrap()],
        false,
    ) else {
        return;
    };
    assert_line(&out, "DONE");
    if util::statically_linked(&util::sbx_path()) {
        assert!(
            stderr(&out).contains("the home directory of your account is unknown"),
            "{}",
            both(&out)
        );
    } else {
        assert_no_secret(&out);
        assert!(
            !stderr(&out).contains("your account is unknown"),
            "{}",
            both(&out)
        );
    }
}
