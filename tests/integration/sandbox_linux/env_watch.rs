//! `.env` files found by the watcher and by the walk alike: made just
//! before a run, by the previous command, renamed into place, in a
//! directory made a moment ago; a repository the command made is found
//! after the run; and a watcher that is killed, hung, out of
//! watches or has lost events makes sbx walk, never skip.
//!
//! `SBX_ENV_WATCH=always` starts a watcher after any walk (by default only
//! a walk through 500 directories does); `off` never asks one. Whether the
//! watcher answered is read on the host: sbx writes its walk's cache only
//! when it walked.

use super::*;

const WATCH: (&str, &str) = ("SBX_ENV_WATCH", "always");
const WALK: (&str, &str) = ("SBX_ENV_WATCH", "off");

fn sbx_dir(world: &World) -> PathBuf {
    world.home.join(".cache/sbx")
}

/// The walk's cache files (one per tree walked).
fn walk_caches(world: &World) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(sbx_dir(world))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    // Not `envscan-KEY.links`, the files `.env` links led to.
    out.retain(|p| {
        let name = p.file_name().unwrap().to_string_lossy();
        name.starts_with("envscan-") && !name.contains('.')
    });
    out
}

fn forget_walks(world: &World) {
    for cache in walk_caches(world) {
        std::fs::remove_file(cache).unwrap();
    }
}

/// The watcher of the project: its PID, once its socket is there.
fn watcher(world: &World) -> Option<u32> {
    let dir = sbx_dir(world).join("watch");
    let entries: Vec<PathBuf> = std::fs::read_dir(&dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    let socket = entries
        .iter()
        .find(|p| p.extension() == Some("sock".as_ref()))?;
    let pid = std::fs::read_to_string(socket.with_extension("lock")).ok()?;
    let pid: u32 = pid.trim().parse().ok()?;
    // A killed watcher's files stay until the next one replaces them, and
    // it stays a zombie until its parent (init) reaps it.
    (Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid)).then_some(pid)
}

/// Wait (a minute at most) for the watcher started by a first run.
fn wait_for_watcher(world: &World) -> u32 {
    let start = Instant::now();
    loop {
        if let Some(pid) = watcher(world) {
            return pid;
        }
        assert!(start.elapsed() < util::DEADLINE, "no watcher started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Live processes running `sbx __watch` for a tree of this world: the first
/// process of a watcher as well as the watcher itself (a fork of it, with
/// the same command line), so one that is still starting is seen too.
fn watch_processes(world: &World) -> Vec<u32> {
    use std::os::unix::ffi::OsStrExt;
    let root = world.root.as_os_str().as_bytes();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let watches = args.iter().any(|a| *a == b"__watch");
        if watches && args.iter().any(|a| a.starts_with(root)) && !is_zombie(pid) {
            found.push(pid);
        }
    }
    found
}

/// `sbx check`, watchers on.
fn check(world: &World) -> Output {
    world
        .sbx()
        .arg("check")
        .env(WATCH.0, WATCH.1)
        .output()
        .unwrap()
}

/// `sbx check` says a watcher answers for the project (it asked one).
fn assert_watcher_answers(world: &World) {
    let out = check(world);
    assert!(
        stdout(&out).contains("walk:     a watcher answers instead of the walk"),
        "{}",
        both(&out)
    );
}

fn wait_until_gone(pid: u32) {
    let start = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists() && !is_zombie(pid) {
        assert!(
            start.elapsed() < util::DEADLINE,
            "watcher {pid} did not end"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('Z'))
    })
}

fn signal(pid: u32, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Ends the test's watcher, whatever the test's outcome.
struct EndWatcher<'a>(&'a World);

impl Drop for EndWatcher<'_> {
    fn drop(&mut self) {
        for pid in watch_processes(self.0) {
            let _ = Command::new("kill")
                .args(["-CONT", &pid.to_string()])
                .status();
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// A project of a few directories, a readable control file, and a first
/// run (which starts the watcher in `WATCH` mode).
fn project(world: &World, mode: (&str, &str)) -> Option<u32> {
    for d in ["src/a/b", "lib/c", "docs"] {
        std::fs::create_dir_all(world.project.join(d)).unwrap();
    }
    util::write(&world.project.join("src/a/b/visible.txt"), "VISIBLE\n");
    let out = Sbx.run(world, &[], &["true"], &[mode]);
    assert!(out.status.success(), "{}", both(&out));
    (mode == WATCH).then(|| wait_for_watcher(world))
}

/// `cat` each path (relative to the project) and the control file: the
/// control is read, no secret shows.
fn assert_masked(world: &World, mode: (&str, &str), rels: &[&str]) {
    let mut paths: Vec<String> = rels.iter().map(|r| r.to_string()).collect();
    paths.push("src/a/b/visible.txt".into());
    let out = Sbx.run_sh_env(world, &cat_each(&paths), &[mode]);
    assert_line(&out, "VISIBLE");
    // Reduced mode cannot hide a file in a directory the command may
    // write (it says so); what the watcher answers is still checked by the
    // callers (which of it and the walk answered).
    if util::unclaimed(&out, util::ENV_READABLE) {
        return;
    }
    assert_no_secret(&out);
    assert_eq!(
        stdout(&out).matches("attempted").count(),
        paths.len(),
        "{}",
        both(&out)
    );
}

/// Run `check` once with a watcher and once walking, each in a new world;
/// with a watcher, it must have answered (no walk's cache written). In the
/// container-like place each sbx runs in a mount namespace of its own, so
/// the watcher a first run started must not answer the next: there sbx
/// walks every time.
fn both_ways(check: impl Fn(&World, (&str, &str))) {
    for mode in [WATCH, WALK] {
        let world = World::new();
        let _end = EndWatcher(&world);
        let pid = project(&world, mode);
        forget_walks(&world);
        check(&world, mode);
        if pid.is_some() && util::contained() {
            assert!(
                !walk_caches(&world).is_empty(),
                "a watcher of another mount namespace answered"
            );
        } else if let Some(pid) = pid {
            assert!(
                walk_caches(&world).is_empty(),
                "sbx walked although the watcher runs"
            );
            assert_eq!(watcher(&world), Some(pid), "the same watcher answered");
        } else {
            assert!(!walk_caches(&world).is_empty(), "sbx walked");
            assert_eq!(watcher(&world), None, "no watcher with SBX_ENV_WATCH=off");
        }
    }
}

#[test]
fn a_env_file_made_just_before_the_run_is_masked() {
    require_sandbox!();
    both_ways(|world, mode| {
        util::write(&world.project.join("lib/c/.env"), SECRET);
        util::write(&world.project.join(".env.local"), SECRET);
        assert_masked(world, mode, &["lib/c/.env", ".env.local"]);
    });
}

#[test]
fn a_env_file_made_by_the_previous_command_is_masked() {
    require_sandbox!();
    both_ways(|world, mode| {
        let made = format!(
            "mkdir -p deep/er/still && printf '%s' {SECRET} > deep/er/still/.env && printf '%s' {SECRET} > docs/.ENV.production"
        );
        let out = Sbx.run_sh_env(world, &made, &[mode]);
        assert!(out.status.success(), "{}", both(&out));
        assert!(world.project.join("deep/er/still/.env").is_file());
        assert_masked(world, mode, &["deep/er/still/.env", "docs/.ENV.production"]);
    });
}

#[test]
fn a_env_file_renamed_into_place_is_masked() {
    require_sandbox!();
    both_ways(|world, mode| {
        // A file renamed to `.env`, and a directory holding one moved in
        // from outside the project, then renamed inside it.
        let notes = world.project.join("src/a/notes.txt");
        util::write(&notes, SECRET);
        std::fs::rename(&notes, world.project.join("src/a/.env")).unwrap();
        let outside = world.root.join("outside");
        util::write(&outside.join("sub/.env.local"), SECRET);
        std::fs::rename(&outside, world.project.join("lib/c/moved")).unwrap();
        std::fs::rename(world.project.join("lib/c"), world.project.join("lib/d")).unwrap();
        assert_masked(world, mode, &["src/a/.env", "lib/d/moved/sub/.env.local"]);
    });
}

#[test]
fn a_env_file_in_a_directory_made_a_moment_ago_is_masked() {
    require_sandbox!();
    both_ways(|world, mode| {
        util::write(&world.project.join("fresh/a/b/c/.env"), SECRET);
        assert_masked(world, mode, &["fresh/a/b/c/.env"]);
    });
}

/// The check after the run, answered by the watcher (asked as soon as the
/// command has ended) as by a walk: a repository the command made deep in
/// the project, with a setting that runs a program, is moved aside.
#[test]
fn a_repository_the_command_made_is_found_after_the_run() {
    require_sandbox!();
    both_ways(|world, mode| {
        let made = "git init -q lib/c/sub && git -C lib/c/sub config core.fsmonitor 'touch planted' && echo MADE";
        let out = Sbx.run_sh_env(world, made, &[mode]);
        assert!(stdout(&out).contains("MADE"), "{}", both(&out));
        let sub = world.project.join("lib/c/sub");
        assert!(
            std::fs::symlink_metadata(sub.join(".git")).is_err(),
            "{}",
            both(&out)
        );
        assert!(sub.join(".git.sbx-blocked").is_dir(), "{}", both(&out));
        assert!(stderr(&out).contains("core.fsmonitor"), "{}", both(&out));
    });
}

/// A watcher that ends or cannot answer: the next run walks (its cache is
/// written) and masks what was made meanwhile.
fn walks_instead(world: &World, rel: &str) {
    forget_walks(world);
    util::write(&world.project.join(rel), SECRET);
    assert_masked(world, WATCH, &[rel]);
    assert!(!walk_caches(world).is_empty(), "sbx did not walk");
}

#[test]
fn a_killed_watcher_makes_sbx_walk() {
    require_sandbox!();
    let world = World::new();
    let _end = EndWatcher(&world);
    let pid = project(&world, WATCH).unwrap();
    signal(pid, "-KILL");
    wait_until_gone(pid);
    walks_instead(&world, "new/dir/.env");
    // And a new watcher takes over.
    let again = wait_for_watcher(&world);
    assert_ne!(again, pid);
}

#[test]
fn a_watcher_that_does_not_answer_makes_sbx_walk() {
    require_sandbox!();
    let world = World::new();
    let _end = EndWatcher(&world);
    let pid = project(&world, WATCH).unwrap();
    signal(pid, "-STOP");
    let start = Instant::now();
    walks_instead(&world, "src/hung/.env");
    // It was asked, and waited for (3 s), before sbx walked; a contained
    // sbx does not ask a watcher of another mount namespace at all.
    if !util::contained() {
        assert!(
            start.elapsed() >= Duration::from_secs(3),
            "{:?}",
            start.elapsed()
        );
    }
    signal(pid, "-CONT");
}

#[test]
fn a_watcher_that_lost_events_ends_and_sbx_walks() {
    require_sandbox!();
    let world = World::new();
    let _end = EndWatcher(&world);
    let flood = world.project.join("flood");
    std::fs::create_dir(&flood).unwrap();
    // Watched from its start.
    let pid = project(&world, WATCH).unwrap();
    // Stopped, it cannot read its queue: more events than the kernel keeps
    // overflow it.
    let queue: usize = std::fs::read_to_string("/proc/sys/fs/inotify/max_queued_events")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    signal(pid, "-STOP");
    for i in 0..queue + 100 {
        std::fs::File::create(flood.join(format!("f{i}"))).unwrap();
    }
    util::write(&world.project.join("flood/x/.env"), SECRET);
    signal(pid, "-CONT");
    walks_instead(&world, "after/.env");
    wait_until_gone(pid);
    assert_masked(&world, WATCH, &["flood/x/.env", "after/.env"]);
}

#[test]
fn a_watcher_out_of_watches_makes_sbx_walk_and_is_not_restarted_at_once() {
    require_sandbox!();
    let world = World::new();
    let _end = EndWatcher(&world);
    for d in ["a/b/c/d/e", "f/g/h"] {
        std::fs::create_dir_all(world.project.join(d)).unwrap();
    }
    util::write(&world.project.join("f/g/h/.env"), SECRET);
    util::write(&world.project.join("src/a/b/visible.txt"), "VISIBLE\n");
    let limit = [WATCH, ("SBX_ENV_WATCH_LIMIT", "3")];
    let out = Sbx.run(&world, &[], &["true"], &limit);
    assert!(out.status.success(), "{}", both(&out));
    // The watcher gives up and says why.
    let watch = sbx_dir(&world).join("watch");
    let start = Instant::now();
    let off = loop {
        let off = std::fs::read_dir(&watch).ok().and_then(|d| {
            d.flatten()
                .map(|e| e.path())
                .find(|p| p.extension() == Some("off".as_ref()))
        });
        if let Some(off) = off {
            break off;
        }
        assert!(
            start.elapsed() < util::DEADLINE,
            "the watcher did not give up"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(
        std::fs::read_to_string(&off).unwrap(),
        "out of inotify watches\n"
    );
    forget_walks(&world);
    // Without the limit now: a watcher started again would run (and be
    // seen, from its first process on, as soon as this run has ended).
    let out = Sbx.run_sh_env(
        &world,
        &cat_each(&["f/g/h/.env".into(), "src/a/b/visible.txt".into()]),
        &[WATCH],
    );
    assert_line(&out, "VISIBLE");
    if !util::unclaimed(&out, util::ENV_READABLE) {
        assert_no_secret(&out);
    }
    assert!(!walk_caches(&world).is_empty(), "sbx did not walk");
    assert_eq!(
        watch_processes(&world),
        Vec::<u32>::new(),
        "a watcher was started again at once"
    );
    // `sbx check` says why every run walks, and how to try again.
    let out = check(&world);
    let said = stdout(&out);
    assert!(
        said.contains("walk:     no watcher for up to an hour after the last one ended (out of inotify watches)"),
        "{}",
        both(&out)
    );
}

/// A mount made inside the project after the watcher started (here a bind
/// of a directory holding a `.env`): no event shows what it brings, so the
/// watcher ends on the mount table's change, and sbx walks.
#[test]
fn a_mount_inside_the_project_makes_sbx_walk() {
    require_sandbox!();
    if !util::euid_is_root() || util::contained() {
        eprintln!("NOTE: needs root outside the container-like place, to mount");
        return;
    }
    let world = World::new();
    let _end = EndWatcher(&world);
    let pid = project(&world, WATCH).unwrap();
    let other = world.root.join("other");
    util::write(&other.join(".env"), SECRET);
    let target = world.project.join("docs");
    let status = Command::new("mount")
        .arg("--bind")
        .arg(&other)
        .arg(&target)
        .status()
        .unwrap();
    assert!(status.success());
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let unmount = Unmount(target);
    wait_until_gone(pid);
    walks_instead(&world, "src/a/.env");
    assert_masked(&world, WATCH, &["docs/.env"]);
    drop(unmount);
    // A mount inside is a lasting reason: no watcher for an hour, unless
    // its note is removed.
    let offs: Vec<PathBuf> = std::fs::read_dir(sbx_dir(&world).join("watch"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension() == Some("off".as_ref()))
        .collect();
    assert_eq!(offs.len(), 1, "{offs:?}");
    assert_eq!(
        std::fs::read_to_string(&offs[0]).unwrap(),
        "a mount point inside the project\n"
    );
    std::fs::remove_file(&offs[0]).unwrap();
    let out = Sbx.run(&world, &[], &["true"], &[WATCH]);
    assert!(out.status.success(), "{}", both(&out));

    // A mount made outside, moved in, then removed: the move changes no
    // mount table entry the watcher is told of, so the watcher refuses any
    // directory on another mount than the root's. It must end while the
    // mount is still there: once it is removed, a watcher that only now
    // reads the move sees the plain directory and its `.env`, rightly stays,
    // and would prove nothing.
    let pid = wait_for_watcher(&world);
    let outside = world.root.join("outside");
    util::write(&outside.join("m/sub/.env"), SECRET);
    let empty = world.root.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let sub = outside.join("m/sub");
    let status = Command::new("mount")
        .arg("--bind")
        .arg(&empty)
        .arg(&sub)
        .status()
        .unwrap();
    assert!(status.success());
    // The watcher answers once more: the mount table's change (outside the
    // project) is behind it, so only the rename can end it now, through
    // its own check of each directory's mount.
    assert_watcher_answers(&world);
    let moved = world.project.join("m");
    std::fs::rename(outside.join("m"), &moved).unwrap();
    let _unmount = Unmount(moved.join("sub"));
    wait_until_gone(pid);
    let status = Command::new("umount")
        .arg(moved.join("sub"))
        .status()
        .unwrap();
    assert!(status.success());
    assert_masked(&world, WATCH, &["m/sub/.env"]);
}

/// A dry run leaves no process behind: `sbx profile` and `sbx check` walk,
/// and start no watcher.
#[test]
fn a_dry_run_starts_no_watcher() {
    require_sandbox!();
    let world = World::new();
    let _end = EndWatcher(&world);
    for args in [&["profile", "--platform", "linux"][..], &["check"][..]] {
        let out = world
            .sbx()
            .args(args)
            .env(WATCH.0, WATCH.1)
            .output()
            .unwrap();
        assert!(!walk_caches(&world).is_empty(), "{}", both(&out));
        assert_eq!(watch_processes(&world), Vec::<u32>::new(), "{args:?}");
        forget_walks(&world);
    }
    // A run starts one (the positive control), so none appeared before.
    assert!(!sbx_dir(&world).join("watch").exists());
    assert!(project(&world, WATCH).is_some());
    // And `sbx check` says that it answers (not to a caller in another
    // mount namespace, as each contained sbx is).
    if !util::contained() {
        assert_watcher_answers(&world);
    }
}
