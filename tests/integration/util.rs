//! Test harness: every test gets its own temporary HOME (with planted fake
//! credentials) and a project whose path contains a space, both outside every
//! writable root of the default policy (so never under /tmp).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// A fake user: home with secrets, a project, and the environment to run sbx in.
pub struct World {
    _root: tempfile::TempDir,
    pub root: PathBuf,
    pub home: PathBuf,
    pub project: PathBuf,
}

/// The directory test worlds are created in: `$SBX_TEST_TMPDIR`, else the
/// cargo target's temporary directory. Never `/tmp`: it is writable inside
/// the sandbox, so "writes outside are refused" could not be observed there.
pub fn base_dir() -> PathBuf {
    let dir = std::env::var_os("SBX_TEST_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The fake secret planted in every credential file.
pub const SECRET: &str = "SBX-FAKE-SECRET-0451";

/// How long one invocation may take: a hang (say, a shell started by
/// mistake) is a failure, not a stalled test run.
pub const DEADLINE: Duration = Duration::from_secs(60);

impl World {
    pub fn new() -> World {
        let tmp = tempfile::Builder::new()
            .prefix("sbx-test-")
            .tempdir_in(base_dir())
            .unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let home = root.join("home");
        let project = root.join("home/my project");
        std::fs::create_dir_all(&project).unwrap();
        for (rel, body) in [
            (".ssh/id_ed25519", SECRET),
            (".ssh/config", "Host *"),
            (".aws/credentials", SECRET),
            (".gnupg/private-keys-v1.d/k.key", SECRET),
            (".config/gh/hosts.yml", SECRET),
            (".netrc", SECRET),
            (".docker/config.json", SECRET),
            (".kube/config", SECRET),
            (".git-credentials", SECRET),
            (".config/gcloud/credentials.db", SECRET),
            (".azure/accessTokens.json", SECRET),
            (".pypirc", SECRET),
            (".cargo/credentials.toml", SECRET),
            (".vault-token", SECRET),
            (".password-store/x.gpg", SECRET),
            (".local/share/keyrings/login.keyring", SECRET),
            (".claude/.credentials.json", SECRET),
            (".codex/auth.json", SECRET),
            (".gemini/oauth_creds.json", SECRET),
            (".bashrc", "# rc\n"),
            (
                ".gitconfig",
                "[user]\n\tname = Test\n\temail = t@example.invalid\n",
            ),
        ] {
            write(&home.join(rel), body);
        }
        World {
            _root: tmp,
            root,
            home,
            project,
        }
    }

    /// `sbx` with a clean environment, HOME set, run in the project.
    pub fn sbx(&self) -> assert_cmd::Command {
        assert_cmd::Command::from_std(self.sbx_std())
    }

    /// The same as a `std::process::Command` (for pipes, ptys, timing).
    /// With `SBX_TEST_CONTAINED=1`, inside the container-like place of
    /// [`World::contained`], where sbx runs in reduced mode: the whole suite
    /// can be run that way (`.ci/run` does for the enforcement suites).
    pub fn sbx_std(&self) -> Command {
        if contained() {
            return self.contained(&sbx_path());
        }
        self.host_cmd(sbx_path())
    }

    /// [`World::sbx_std`], with this world's own link to sbx (a copy where
    /// the file system refuses a link): its path, in the command lines of
    /// the processes it starts (bubblewrap's, the inner stage's, the
    /// guardian's), tells them from other tests'.
    pub fn own_sbx_std(&self) -> Command {
        let own = self.root.join("own-sbx");
        if !own.exists() && std::fs::hard_link(sbx_path(), &own).is_err() {
            std::fs::copy(sbx_path(), &own).unwrap();
        }
        if contained() {
            return self.contained(&own);
        }
        self.host_cmd(own)
    }

    /// `program` in a container-like place: an outer bubblewrap whose user
    /// namespace may not create another (as Docker's default seccomp
    /// profile forbids), with no capability, the host root read-only, the
    /// world and `/tmp` writable. sbx's own bubblewrap cannot start there.
    pub fn contained(&self, program: &Path) -> Command {
        self.contained_with(program, &[])
    }

    /// [`World::contained`] with more bubblewrap arguments for the place
    /// (`--ro-bind STAND-IN /etc/passwd`).
    pub fn contained_with(&self, program: &Path, extra: &[&OsStr]) -> Command {
        // By its absolute path: a test may put another `bwrap` on PATH.
        let mut cmd = self.host_cmd("/usr/bin/bwrap");
        // --die-with-parent: killing the returned process (a test's stand-in
        // for an agent's timeout) kills sbx, as it would without the wrapper.
        cmd.args(["--unshare-user", "--disable-userns", "--cap-drop", "ALL"])
            .arg("--die-with-parent")
            .args(["--ro-bind", "/", "/"])
            .arg("--bind")
            .arg(&self.root)
            .arg(&self.root)
            // No --chdir: bubblewrap keeps the working directory the
            // caller gives (the project, or another for a test).
            .args(["--bind", "/tmp", "/tmp", "--dev", "/dev", "--proc", "/proc"])
            .args(extra)
            .arg("--")
            .arg(program);
        cmd
    }

    /// A host program (not sandboxed) with exactly the environment and
    /// working directory `sbx_std` gives sbx: for wrapping sbx in `script`,
    /// `setsid` or a pty driver, and for a reference run beside sbx.
    pub fn host_cmd(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env("XDG_CACHE_HOME", self.home.join(".cache"))
            .current_dir(&self.project);
        cmd
    }

    /// Write the user config file.
    pub fn user_config(&self, toml: &str) {
        write(&self.home.join(".config/sbx/config.toml"), toml);
    }

    /// `git init` the project, with one commit.
    pub fn git_repo(&self) {
        repo_with_commit(&self.project);
    }

    /// Add a submodule to the project's repository at `vendor/lib` (its
    /// origin beside home), committed; returns the submodule's checkout.
    pub fn add_submodule(&self) -> PathBuf {
        let origin = self.root.join("sub-origin");
        repo_with_commit(&origin);
        git(
            &self.project,
            &[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "add",
                "-q",
                origin.to_str().unwrap(),
                "vendor/lib",
            ],
        );
        git(&self.project, &["commit", "-q", "-m", "submodule"]);
        self.project.join("vendor/lib")
    }
}

/// `git init` `dir` (created if needed), with one commit.
pub fn repo_with_commit(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    write(&dir.join("README"), "hello\n");
    git(dir, &["add", "README"]);
    git(dir, &["commit", "-q", "-m", "init"]);
}

/// SIGKILL sbx, as an agent's timeout does: `child` itself, or in the
/// container-like place the sbx inside the wrapper (waited for, for a
/// minute at most: killing the wrapper before it has started sbx would
/// test the wrapper), then the wrapper.
pub fn kill_sbx(child: &mut std::process::Child) {
    if contained() {
        let start = std::time::Instant::now();
        while start.elapsed() < DEADLINE && child.try_wait().unwrap().is_none() {
            if let Some(pid) = sbx_under(child.id()) {
                let _ = Command::new("kill")
                    .args(["-KILL", &pid.to_string()])
                    .status();
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let _ = child.kill();
}

/// The sbx process (sbx's own executable, started with `run`) whose
/// parent is `wrapper`.
fn sbx_under(wrapper: u32) -> Option<u32> {
    let sbx = sbx_path();
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
        let parent: u32 = stat[stat.rfind(')')? + 1..]
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
        let mut args = cmdline.split(|&b| b == 0);
        // sbx, or a world's own link to it (`World::own_sbx_std`).
        let is_sbx = args
            .next()
            .is_some_and(|a| a == sbx.as_os_str().as_encoded_bytes() || a.ends_with(b"/own-sbx"))
            && args.next() == Some(b"run".as_slice());
        (parent == wrapper && is_sbx).then_some(pid)
    })
}

/// The private git config copies runs left in the sbx cache of `home`.
pub fn config_copies_left(home: &Path) -> Vec<String> {
    std::fs::read_dir(home.join(".cache/sbx/pending"))
        .map(|dir| {
            dir.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("copies-"))
                .collect()
        })
        .unwrap_or_default()
}

/// Wait (for a minute at most) until no run's config copies are left in
/// the sbx cache of `home`: a run's guardian removes them once sbx is done,
/// a moment after sbx has exited. What is left then is returned.
pub fn wait_until_config_copies_are_removed(home: &Path) -> Vec<String> {
    let start = std::time::Instant::now();
    while start.elapsed() < DEADLINE && !config_copies_left(home).is_empty() {
        std::thread::sleep(Duration::from_millis(10));
    }
    config_copies_left(home)
}

/// Whether the suite runs sbx in the container-like place
/// (`SBX_TEST_CONTAINED=1`).
pub fn contained() -> bool {
    std::env::var_os("SBX_TEST_CONTAINED").is_some_and(|v| v == "1")
}

/// What reduced mode's banner calls the claims of full mode it does not
/// make, as the suite checks them (see [`unclaimed`]).
pub const ENV_READABLE: &str = "credential file(s) inside writable roots stay readable";
pub const RUNS_LATER_WRITABLE: &str = "\"runs later\" paths inside writable roots";
pub const PROCESSES_VISIBLE: &str = "other processes' command lines are visible";
pub const LOOPBACK_DENIED: &str = "loopback is the host's";

/// In the container-like place (reduced mode), a claim of full mode that
/// reduced mode does not make: the run must say so in its banner (`words`,
/// one of the constants above). True when the suite runs there, so that
/// the caller skips what only full mode enforces; false otherwise.
pub fn unclaimed(out: &Output, words: &str) -> bool {
    if !contained() {
        return false;
    }
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("reduced mode (") && err.contains(words),
        "reduced mode does not name what it leaves unenforced ({words:?}):\n{err}"
    );
    true
}

/// The `--require` that asks for the sandbox the suite runs in: the full
/// one, or reduced mode in the container-like place.
pub fn require() -> &'static str {
    if contained() {
        "--require=reduced"
    } else {
        "--require"
    }
}

/// Whether the ELF executable at `path` is statically linked (asks for no
/// program interpreter): the musl release build, which loads no
/// `LD_PRELOAD` library.
pub fn statically_linked(path: &Path) -> bool {
    let elf = std::fs::read(path).unwrap();
    assert_eq!(
        elf.get(..5),
        Some(&b"\x7fELF\x02"[..]),
        "{path:?} is not a 64-bit ELF file"
    );
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
    let u16_at = |o: usize| usize::from(u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()));
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    const PT_INTERP: u32 = 3;
    !(0..phnum).any(|i| {
        let o = phoff + i * phentsize;
        u32::from_le_bytes(elf[o..o + 4].try_into().unwrap()) == PT_INTERP
    })
}

/// The sbx under test: `$SBX_TEST_BIN` (CI copies the binaries to a place an
/// unprivileged user can reach), else the one cargo built.
pub fn sbx_path() -> PathBuf {
    std::env::var_os("SBX_TEST_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_sbx")))
}

// ---------------------------------------------------------------------------
// Running sbx
// ---------------------------------------------------------------------------

/// How a suite starts `sbx run`. [`Sbx`] starts it as the World does; a
/// platform may add what it needs (`sandbox_macos::Seatbelt`: the host's
/// `TMPDIR`, a deadline). The shared scenarios (`scenarios.rs`) take one, so
/// each platform runs the same scenario code its own way.
pub trait Runner {
    /// The shell scripts run with.
    const SH: &'static str;
    /// The git a script calls.
    const GIT: &'static str;
    /// How long one run may take where a scenario sets a deadline itself.
    const LIMIT: Duration;
    /// How long a host listener waits for a connection that may still be in
    /// flight once the sandboxed command has exited (a margin for a check
    /// that expects none: see `host::received`).
    const LISTEN_GRACE: Duration;

    /// `sbx` with the World's environment, in the project.
    fn sbx_cmd(&self, world: &World) -> Command {
        world.sbx_std()
    }

    /// Run `cmd` to its end, stdout and stderr captured.
    fn output(&self, cmd: Command) -> Output;

    /// `sbx run FLAGS -- ARGV` in the project, with extra variables in sbx's
    /// environment, stdin closed. `SBX_TEST_SHOW=1` prints its output.
    fn run(&self, world: &World, flags: &[&str], argv: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = self.sbx_cmd(world);
        cmd.arg("run")
            .args(flags)
            .arg("--")
            .args(argv)
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = self.output(cmd);
        crate::host::show(&format!("{flags:?} {argv:?}"), &out);
        out
    }

    /// `sbx run -- sh -c SCRIPT`.
    fn run_sh(&self, world: &World, script: &str) -> Output {
        self.run(world, &[], &[Self::SH, "-c", script], &[])
    }

    /// `sbx run FLAGS -- sh -c SCRIPT`.
    fn run_sh_flags(&self, world: &World, flags: &[&str], script: &str) -> Output {
        self.run(world, flags, &[Self::SH, "-c", script], &[])
    }

    /// `sbx run -- sh -c SCRIPT` with extra variables in sbx's environment.
    fn run_sh_env(&self, world: &World, script: &str, env: &[(&str, &str)]) -> Output {
        self.run(world, &[], &[Self::SH, "-c", script], env)
    }
}

/// sbx as the World starts it: `sh` and `git` from PATH, no deadline of its
/// own.
pub struct Sbx;

impl Runner for Sbx {
    const SH: &'static str = "sh";
    const GIT: &'static str = "git";
    const LIMIT: Duration = DEADLINE;
    const LISTEN_GRACE: Duration = Duration::from_millis(300);

    fn output(&self, mut cmd: Command) -> Output {
        cmd.output().unwrap()
    }
}

// ---------------------------------------------------------------------------
// Files and fakes
// ---------------------------------------------------------------------------

pub fn write(path: &Path, body: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
}

pub fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

/// Install an executable shell script at `dest` without this process ever
/// holding a write descriptor on it: `install` writes it in a child that has
/// exited before anyone executes it, so a concurrent fork in another test
/// thread cannot make the exec fail with "Text file busy".
pub fn install_script(dest: &Path, body: &str) {
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    let src = dest.with_file_name(format!(
        "{}.src",
        dest.file_name().unwrap().to_string_lossy()
    ));
    std::fs::write(&src, body).unwrap();
    let status = Command::new("install")
        .arg("-m")
        .arg("755")
        .arg(&src)
        .arg(dest)
        .status()
        .unwrap();
    assert!(status.success(), "install {}", dest.display());
    std::fs::remove_file(&src).unwrap();
}

/// What a real bubblewrap prints when user namespaces are refused.
pub const UID_MAP_ERROR: &str = "bwrap: setting up uid map: Permission denied";

/// A fake bwrap at `dir/bwrap` that prints `line` on stderr and exits 1,
/// as a bubblewrap that cannot start the sandbox does. If `ran` is given,
/// every execution also appends a line to that file.
pub fn fake_bwrap(dir: &Path, line: &str, ran: Option<&Path>) -> PathBuf {
    let path = dir.join("bwrap");
    let record = ran
        .map(|r| format!("echo ran >> {}\n", crate::host::shq_path(r)))
        .unwrap_or_default();
    install_script(
        &path,
        &format!("#!/bin/sh\n{record}echo '{line}' >&2\nexit 1\n"),
    );
    path
}

/// Whether this test process runs as root (its effective UID is 0).
pub fn euid_is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2).map(|e| e == "0"))
        .unwrap()
}

/// Whether real sandbox tests can run here. When they cannot, say why and
/// return false; with `SBX_TEST_REQUIRE_SANDBOX=1` (set by CI) fail instead,
/// so a sandbox test can never pass by skipping.
pub fn sandbox_available() -> bool {
    static PROBE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    let result = PROBE.get_or_init(|| {
        let world = World::new();
        let out = world
            .sbx_std()
            .args(["run", require(), "--", "true"])
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
        }
    });
    match result {
        Ok(()) => true,
        Err(why) if std::env::var_os("SBX_TEST_REQUIRE_SANDBOX").is_some_and(|v| v == "1") => {
            panic!("SBX_TEST_REQUIRE_SANDBOX=1 but the sandbox cannot run here: {why}")
        }
        Err(why) => {
            eprintln!("skipped: the sandbox cannot run here: {why}");
            false
        }
    }
}

/// Skip the current test (returning early) unless the sandbox can run.
#[macro_export]
macro_rules! require_sandbox {
    () => {
        if !$crate::util::sandbox_available() {
            return;
        }
    };
}
