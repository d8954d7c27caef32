//! Resource limits on Linux: each stops what it should, judged on the host
//! (the file's size, the processes the user holds), says so, and a project
//! file can lower a limit but not raise one.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::host::{both, stderr, stdout};
use crate::require_sandbox;
use crate::util::{self, World, DEADLINE};

fn sbx(world: &World, args: &[&str]) -> Output {
    world.sbx().args(args).timeout(DEADLINE).output().unwrap()
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// The host processes in the tree of `root` (it included): sbx, its
/// guardian, bubblewrap and the sandbox's processes. Other tests' processes
/// (the suite runs in parallel) are not counted.
fn tree_size(root: u32) -> usize {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_str()?.parse::<u32>().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let (_, after) = stat.rsplit_once(')')?;
            let ppid = after.split_whitespace().nth(1)?.parse::<u32>().ok()?;
            Some((pid, ppid))
        })
        .collect();
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i];
        tree.extend(
            parents
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    tree.len()
}

/// A bounded fork bomb: start up to 300 sleeping processes, stop at the
/// first refusal, say how many, hold them until the test says `go`, then
/// kill them all. (Python: a shell exits, or retries for long, when a fork
/// fails.)
const BOMB: &str = r#"
import os, signal, sys, time
kids = []
for _ in range(300):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(120)
        os._exit(0)
    kids.append(pid)
print("STARTED", len(kids), flush=True)
open("peak", "w").close()
end = time.time() + 120
while not os.path.exists("go") and time.time() < end:
    time.sleep(0.02)
for pid in kids:
    os.kill(pid, signal.SIGKILL)
for pid in kids:
    os.waitpid(pid, 0)
"#;

#[test]
fn a_fork_bomb_stops_at_the_process_cap() {
    require_sandbox!();
    let Some(python) = crate::host::tool(&["/usr/bin/python3"]) else {
        return;
    };
    let world = World::new();
    let child = world
        .sbx_std()
        .args(["run", "--max-processes", "64", "--", python, "-c", BOMB])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !world.project.join("peak").exists() {
        assert!(
            start.elapsed() < DEADLINE,
            "the bomb never reached its peak"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let during = tree_size(child.id());
    util::write(&world.project.join("go"), "");
    let out = child.wait_with_output().unwrap();
    let started: usize = stdout(&out)
        .lines()
        .find_map(|l| l.strip_prefix("STARTED "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("{}", both(&out)));
    if is_root() {
        // The kernel does not apply the cap to root: sbx says so.
        assert!(
            stderr(&out).contains("max_processes = 64 is NOT enforced"),
            "{}",
            both(&out)
        );
        return;
    }
    assert!(
        started > 10 && started < 64,
        "started {started}: {}",
        both(&out)
    );
    // On the host: the sandbox's processes, within the cap, and sbx, its
    // guardian, bubblewrap and the inner stage.
    assert!(
        during <= 64 + 4,
        "sbx's tree held {during} processes during the run"
    );
    assert!(!stderr(&out).contains("NOT enforced"), "{}", both(&out));
}

#[test]
fn max_file_size_stops_a_large_write_and_says_so() {
    require_sandbox!();
    let world = World::new();
    let out = sbx(
        &world,
        &[
            "run",
            "--max-file-size",
            "1M",
            "--",
            "dd",
            "if=/dev/zero",
            "of=big",
            "bs=1M",
            "count=3",
        ],
    );
    crate::scenarios::a_large_write_was_stopped(&world, &out);
    // A command that exits with the same status by itself is not blamed.
    let own = sbx(
        &world,
        &["run", "--max-file-size", "1M", "--", "sh", "-c", "exit 153"],
    );
    assert_eq!(own.status.code(), Some(153));
    assert!(!stderr(&own).contains("max_file_size"), "{}", both(&own));
}

#[test]
fn cpu_time_stops_a_spinning_command_and_says_so() {
    require_sandbox!();
    let world = World::new();
    let out = sbx(
        &world,
        &[
            "run",
            "--cpu-time",
            "1",
            "--",
            "sh",
            "-c",
            "while :; do :; done",
        ],
    );
    assert_eq!(out.status.code(), Some(128 + 24), "{}", both(&out));
    assert!(
        stderr(&out).contains("stopped by the cpu_time limit (1 s)"),
        "{}",
        both(&out)
    );
}

/// The limits as the command sees them, from `/proc/self/limits`.
fn limits_inside(world: &World) -> (String, Output) {
    let out = sbx(world, &["run", "--", "cat", "/proc/self/limits"]);
    (stdout(&out), out)
}

#[test]
fn a_project_file_can_lower_a_limit_and_cannot_raise_one() {
    require_sandbox!();
    let world = World::new();
    util::write(
        &world.project.join(".sbx.toml"),
        "[sandbox]\nmax_processes = 100\nmax_file_size = \"1M\"\n",
    );
    let (limits, out) = limits_inside(&world);
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max processes") && l.contains(" 100 ")),
        "{limits}\n{}",
        both(&out)
    );
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max file size") && l.contains(" 1048576 ")),
        "{limits}"
    );
    util::write(
        &world.project.join(".sbx.toml"),
        "[sandbox]\nmax_processes = 100000\n",
    );
    let (limits, out) = limits_inside(&world);
    assert!(
        limits
            .lines()
            .any(|l| l.starts_with("Max processes") && l.contains(" 4096 ")),
        "{limits}"
    );
    assert!(
        stderr(&out).contains("ignored `max_processes = 100000`: it would raise a limit"),
        "{}",
        both(&out)
    );
}

/// Where this host lets the test's user make a memory cgroup beside or
/// under its own, found by trying (not by sbx's code): the directory run
/// cgroups go in. None where the cgroup is not the user's to write.
pub fn memory_cgroup_here() -> Option<PathBuf> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let v1 = cgroups.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        controllers
            .split(',')
            .any(|c| c == "memory")
            .then_some(path)
    });
    let parent = match v1 {
        Some(path) => Path::new("/sys/fs/cgroup/memory").join(path.trim_start_matches('/')),
        None => {
            let path = cgroups.lines().find_map(|l| l.strip_prefix("0::"))?;
            let own = Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
            let controllers = std::fs::read_to_string(own.join("cgroup.controllers")).ok()?;
            if !controllers.split_whitespace().any(|c| c == "memory") {
                return None;
            }
            own.parent()?.to_path_buf()
        }
    };
    let probe = parent.join(format!("sbx-test-probe-{}", std::process::id()));
    std::fs::create_dir(&probe).ok()?;
    let limit = if v1.is_some() {
        "memory.limit_in_bytes"
    } else {
        "memory.max"
    };
    let settable = std::fs::write(probe.join(limit), "67108864").is_ok();
    std::fs::remove_dir(&probe).ok()?;
    settable.then_some(parent)
}

/// `max_memory` where this host allows it: an allocation loop is killed
/// before it can finish (the file it writes after the loop never appears),
/// sbx says which limit stopped it, a run under its limit is not touched,
/// and no run's cgroup is left behind. Where the host does not allow it:
/// said on every run and by `sbx check`, and the command runs. `sbx` is
/// how the runner starts sbx (arguments follow: `run ...`, `check ...`).
/// `contained`: sbx runs in the container-like place, whose cgroup file
/// system is read-only.
pub fn max_memory_holds_or_is_named(
    world: &World,
    contained: bool,
    sbx: &dyn Fn() -> std::process::Command,
) {
    let run = |args: &[&str]| {
        sbx()
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let alloc = |mib: u32, mark: &str| {
        format!(
            "a = []\nfor _ in range({}):\n    a.append(b'x' * (8 << 20))\nopen('{mark}', 'w').close()\n",
            mib / 8
        )
    };
    let big = alloc(512, "big-done");
    let child = run(&["run", "--max-memory", "64M", "--", "python3", "-c", &big]);
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    // What `sbx check` says of the limit: its line starts with `said`.
    let check_says = |said: &str| {
        let check = run(&["check", "--max-memory", "1G"])
            .wait_with_output()
            .unwrap();
        assert!(
            stdout(&check)
                .lines()
                .any(|l| l.starts_with(&format!("limit:    max_memory 1G: {said}"))),
            "{}",
            both(&check)
        );
    };
    let Some(place) = memory_cgroup_here().filter(|_| !contained) else {
        assert!(
            stderr(&out).contains("max_memory = 64M is NOT enforced"),
            "{}",
            both(&out)
        );
        assert!(world.project.join("big-done").exists(), "{}", both(&out));
        check_says("NOT enforced");
        return;
    };
    assert!(!world.project.join("big-done").exists(), "{}", both(&out));
    assert_eq!(out.status.code(), Some(128 + 9), "{}", both(&out));
    assert!(
        stderr(&out).contains("stopped by the max_memory limit (64M)"),
        "{}",
        both(&out)
    );
    assert!(!stderr(&out).contains("NOT enforced"), "{}", both(&out));
    // Another run's allowance is its own: 32 MiB under 256M go through.
    let small = alloc(32, "small-done");
    let second = run(&["run", "--max-memory", "256M", "--", "python3", "-c", &small]);
    let out2 = second.wait_with_output().unwrap();
    assert!(out2.status.success(), "{}", both(&out2));
    assert!(world.project.join("small-done").exists(), "{}", both(&out2));
    assert!(!stderr(&out2).contains("max_memory"), "{}", both(&out2));
    // The first run's cgroup is gone: removed by it, or else by the second.
    assert!(
        !place.join(format!("sbx-run-{pid}-0")).exists(),
        "left behind in {}",
        place.display()
    );
    check_says("enforced (a cgroup of the run's own");
}

#[test]
fn max_memory_stops_an_allocation_loop_or_is_named() {
    require_sandbox!();
    let world = World::new();
    max_memory_holds_or_is_named(&world, util::contained(), &|| world.sbx_std());
    // Bad values are refused before anything runs.
    let bad = sbx(&world, &["run", "--max-memory", "lots", "--", "true"]);
    assert_eq!(bad.status.code(), Some(125), "{}", both(&bad));
    util::write(
        &world.home.join(".config/sbx/config.toml"),
        "[sandbox]\nmax_file_size = \"2Q\"\n",
    );
    let bad = sbx(&world, &["run", "--", "true"]);
    assert_eq!(bad.status.code(), Some(125), "{}", both(&bad));
    assert!(stderr(&bad).contains("max_file_size"), "{}", both(&bad));
}
