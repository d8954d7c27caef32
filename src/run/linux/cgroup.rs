//! `max_memory`: a cgroup of the run's own, where the machine lets this
//! user make one.
//!
//! Memory cannot be capped with an rlimit without breaking everyday
//! runtimes (`RLIMIT_AS` counts address space, which Go and JavaScript
//! reserve by the gigabyte), so sbx caps it the way containers do: the
//! sandbox is born in a cgroup of its own with a memory limit, and the
//! kernel's OOM killer stops whatever in it allocates past the limit.
//!
//! Where that cgroup goes:
//!
//! - **cgroup v1** (a `memory` hierarchy is mounted): a child of sbx's own
//!   memory cgroup. The kernel lets whoever may write a cgroup directory
//!   make children in it: root, or a user it was delegated to.
//! - **cgroup v2**: a sibling of sbx's own cgroup, since a cgroup that
//!   holds processes cannot give controllers to children of its own (the
//!   "no internal processes" rule). It needs the memory controller enabled
//!   for sbx's cgroup and its siblings, and write access to the parent,
//!   which is where moving a process between the two is decided: true of
//!   root, and of a user inside a delegated tree (a systemd user session's
//!   `user@UID.service`). The sibling is made directly, not through
//!   systemd, so systemd does not know it.
//!
//! sbx enters the run's cgroup only for the moment it starts the sandbox
//! (its own process, then back), so that the sandbox's first process is
//! born inside and everything it starts after it, with no window where a
//! child could be started outside. The command cannot leave: the cgroup
//! file system is read-only in the sandbox (bubblewrap's read-only root;
//! Landlock in reduced mode), and the sandbox holds no capability over the
//! host.
//!
//! The cgroup is removed after the run; one left by a killed sbx is
//! removed by the next run that makes one in the same place.

use std::io;
use std::path::{Path, PathBuf};

/// What the run groups are named: `sbx-run-PID-N`.
const PREFIX: &str = "sbx-run-";

/// The two cgroup hierarchies sbx knows how to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

/// Where run cgroups can be made on this machine, for this user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub version: Version,
    /// sbx's own cgroup: where it returns after starting the sandbox.
    pub home: PathBuf,
    /// Where run cgroups are made (v1: `home`; v2: its parent).
    pub parent: PathBuf,
}

impl Place {
    /// How `sbx check` names the mechanism.
    pub fn how(&self) -> &'static str {
        match self.version {
            Version::V1 => "a cgroup of the run's own, cgroup v1",
            Version::V2 => "a cgroup of the run's own, cgroup v2",
        }
    }
}

/// Why no run cgroup can be made here, as `sbx check` says it.
pub const NO_CONTROLLER: &str =
    "no cgroup memory controller is mounted here (containers often hide it)";
pub const NOT_DELEGATED: &str = "this user may not make a cgroup here (no delegated cgroup: run sbx in a systemd user session, or as root)";
pub const UNREADABLE: &str = "sbx's own cgroup could not be found in the mounted hierarchy";

/// Where a run cgroup with a memory limit can be made for this process.
pub fn place() -> Result<Place, &'static str> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").map_err(|_| UNREADABLE)?;
    // As bytes: a mount point's path need not be UTF-8.
    let mounts = std::fs::read("/proc/self/mountinfo").map_err(|_| UNREADABLE)?;
    find(&cgroups, &String::from_utf8_lossy(&mounts), &HostFs)
}

/// What [`find`] asks of the file system (a stand-in in tests).
pub trait Fs {
    fn writable(&self, path: &Path) -> bool;
    fn read(&self, path: &Path) -> Option<String>;
}

struct HostFs;

impl Fs for HostFs {
    fn writable(&self, path: &Path) -> bool {
        nix::unistd::access(path, nix::unistd::AccessFlags::W_OK).is_ok()
    }
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
}

/// [`place`] from the text of `/proc/self/cgroup` and `/proc/self/mountinfo`.
/// v1's memory hierarchy comes first: where it is mounted, the controller
/// is not available to v2.
pub fn find(cgroups: &str, mountinfo: &str, fs: &dyn Fs) -> Result<Place, &'static str> {
    let mounts: Vec<Mount> = mountinfo.lines().filter_map(Mount::parse).collect();
    let v1 = mounts
        .iter()
        .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "memory"));
    if let Some(mount) = v1 {
        let path = cgroups
            .lines()
            .filter_map(|l| l.split_once(':').map(|(_, rest)| rest))
            .filter_map(|rest| rest.split_once(':'))
            .find(|(controllers, _)| controllers.split(',').any(|c| c == "memory"))
            .map(|(_, path)| path)
            .ok_or(UNREADABLE)?;
        let home = mount.join(path).ok_or(UNREADABLE)?;
        if !(fs.writable(&home) && fs.writable(&home.join("cgroup.procs"))) {
            return Err(NOT_DELEGATED);
        }
        return Ok(Place {
            version: Version::V1,
            parent: home.clone(),
            home,
        });
    }
    let mount = mounts
        .iter()
        .find(|m| m.fstype == "cgroup2")
        .ok_or(NO_CONTROLLER)?;
    let path = cgroups
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or(UNREADABLE)?;
    let home = mount.join(path).ok_or(UNREADABLE)?;
    let has_memory = |file: &Path| {
        fs.read(file)
            .is_some_and(|t| t.split_whitespace().any(|c| c == "memory"))
    };
    // At the top of the hierarchy (a container's own root, or the real
    // one) there is no sibling: children of the top itself, if it hands
    // the controller down.
    let parent = if home == mount.point {
        if !has_memory(&home.join("cgroup.subtree_control")) {
            return Err(NO_CONTROLLER);
        }
        home.clone()
    } else {
        if !has_memory(&home.join("cgroup.controllers")) {
            return Err(NO_CONTROLLER);
        }
        home.parent().ok_or(UNREADABLE)?.to_path_buf()
    };
    let may = fs.writable(&parent)
        && fs.writable(&parent.join("cgroup.procs"))
        && fs.writable(&home.join("cgroup.procs"));
    if !may {
        return Err(NOT_DELEGATED);
    }
    Ok(Place {
        version: Version::V2,
        home,
        parent,
    })
}

/// The parts of a `/proc/self/mountinfo` line this needs.
struct Mount {
    /// The mount's root inside its hierarchy.
    root: String,
    point: PathBuf,
    fstype: String,
    options: String,
}

impl Mount {
    fn parse(line: &str) -> Option<Mount> {
        let (before, after) = line.split_once(" - ")?;
        let fields: Vec<&str> = before.split(' ').collect();
        let mut after = after.split(' ');
        let fstype = after.next()?.to_string();
        let _source = after.next()?;
        let options = after.next()?.to_string();
        let (root, point) = (fields.get(3)?, fields.get(4)?);
        // Escaped names (`\040` for a space) are not worth the risk of
        // getting wrong: such a mount is not used.
        if root.contains('\\') || point.contains('\\') {
            return None;
        }
        Some(Mount {
            root: root.to_string(),
            point: PathBuf::from(point),
            fstype,
            options,
        })
    }

    /// The directory of the cgroup at `path` (as `/proc/self/cgroup` names
    /// it) under this mount, if it is visible there.
    fn join(&self, path: &str) -> Option<PathBuf> {
        let rest = if self.root == "/" {
            path
        } else {
            let rest = path.strip_prefix(self.root.as_str())?;
            if !(rest.is_empty() || rest.starts_with('/')) {
                return None;
            }
            rest
        };
        let rest = rest.trim_start_matches('/');
        if rest.split('/').any(|c| c == ".." || c == ".") {
            return None;
        }
        Some(if rest.is_empty() {
            self.point.clone()
        } else {
            self.point.join(rest)
        })
    }
}

/// A run's own cgroup, with its memory limit: removed when dropped.
pub struct RunGroup {
    place: Place,
    dir: PathBuf,
}

impl RunGroup {
    /// Make the run's cgroup in `place`, limited to `bytes` of memory (and
    /// no swap where the kernel counts it), after removing any that killed
    /// runs left there.
    pub fn create(place: Place, bytes: u64) -> io::Result<RunGroup> {
        sweep(&place.parent);
        let pid = std::process::id();
        let mut n = 0;
        let dir = loop {
            let dir = place.parent.join(format!("{PREFIX}{pid}-{n}"));
            match std::fs::create_dir(&dir) {
                Ok(()) => break dir,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && n < 16 => n += 1,
                Err(e) => return Err(e),
            }
        };
        let group = RunGroup { place, dir };
        let value = bytes.to_string();
        match group.place.version {
            Version::V1 => {
                group.write("memory.limit_in_bytes", &value)?;
                // Present only where the kernel accounts swap.
                if group.dir.join("memory.memsw.limit_in_bytes").exists() {
                    group.write("memory.memsw.limit_in_bytes", &value)?;
                }
            }
            Version::V2 => {
                group.write("memory.max", &value)?;
                if group.dir.join("memory.swap.max").exists() {
                    group.write("memory.swap.max", "0")?;
                }
            }
        }
        Ok(group)
    }

    /// Run `start` (which starts the sandbox's first process) with sbx
    /// inside the run's cgroup, then bring sbx back to its own.
    pub fn born_inside<T>(&self, start: impl FnOnce() -> T) -> io::Result<T> {
        let me = std::process::id().to_string();
        self.write("cgroup.procs", &me)?;
        let started = start();
        std::fs::write(self.place.home.join("cgroup.procs"), &me)?;
        Ok(started)
    }

    /// Whether the kernel killed a process of the run for going past the
    /// limit.
    pub fn limit_was_hit(&self) -> bool {
        let (file, key) = match self.place.version {
            Version::V1 => ("memory.oom_control", "oom_kill"),
            Version::V2 => ("memory.events", "oom_kill"),
        };
        std::fs::read_to_string(self.dir.join(file))
            .ok()
            .and_then(|text| counter(&text, key))
            .is_some_and(|n| n > 0)
    }

    fn write(&self, file: &str, value: &str) -> io::Result<()> {
        std::fs::write(self.dir.join(file), value)
    }
}

impl Drop for RunGroup {
    /// The sandbox's last processes may still be on their way out (the
    /// kernel kills a PID namespace's processes after its PID 1 ends): a
    /// few tries, then the cgroup is left to the next run's sweep.
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() || !self.dir.exists() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

/// `key N` among the lines of a cgroup counter file.
fn counter(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Remove the run cgroups of sbx processes that are gone. Removing a cgroup
/// that still holds a process fails, so a live run's is never touched.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{HashMap, HashSet};

    #[derive(Default)]
    struct FakeFs {
        writable: HashSet<PathBuf>,
        files: HashMap<PathBuf, String>,
    }

    impl Fs for FakeFs {
        fn writable(&self, path: &Path) -> bool {
            self.writable.contains(path)
        }
        fn read(&self, path: &Path) -> Option<String> {
            self.files.get(path).cloned()
        }
    }

    const V1_MOUNTS: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const V1_CGROUPS: &str = "8:pids:/\n4:memory:/ci/job7\n1:cpu:/\n0::/\n";
    const V2_MOUNTS: &str = "\
25 1 0:22 / / rw - ext4 /dev/sda1 rw
30 25 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
";
    const V2_CGROUPS: &str =
        "0::/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope\n";

    fn paths(list: &[&str]) -> HashSet<PathBuf> {
        list.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn v1_uses_a_child_of_sbxs_own_memory_cgroup() {
        let fs = FakeFs {
            writable: paths(&[
                "/sys/fs/cgroup/memory/ci/job7",
                "/sys/fs/cgroup/memory/ci/job7/cgroup.procs",
            ]),
            ..FakeFs::default()
        };
        let place = find(V1_CGROUPS, V1_MOUNTS, &fs).unwrap();
        assert_eq!(place.version, Version::V1);
        assert_eq!(place.parent, PathBuf::from("/sys/fs/cgroup/memory/ci/job7"));
        assert_eq!(place.home, place.parent);
        // Not this user's to write: none.
        let fs = FakeFs::default();
        assert_eq!(find(V1_CGROUPS, V1_MOUNTS, &fs), Err(NOT_DELEGATED));
    }

    #[test]
    fn v2_uses_a_sibling_in_a_delegated_tree() {
        let home =
            "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice/term.scope";
        let parent = "/sys/fs/cgroup/user.slice/user-1000.slice/user@1000.service/app.slice";
        let mut fs = FakeFs {
            writable: paths(&[
                parent,
                &format!("{parent}/cgroup.procs"),
                &format!("{home}/cgroup.procs"),
            ]),
            files: HashMap::from([(
                PathBuf::from(format!("{home}/cgroup.controllers")),
                "cpu memory pids\n".to_string(),
            )]),
        };
        let place = find(V2_CGROUPS, V2_MOUNTS, &fs).unwrap();
        assert_eq!(place.version, Version::V2);
        assert_eq!(place.home, PathBuf::from(home));
        assert_eq!(place.parent, PathBuf::from(parent));
        // Moving sbx back and forth is decided at the parent.
        fs.writable
            .remove(&PathBuf::from(format!("{parent}/cgroup.procs")));
        assert_eq!(find(V2_CGROUPS, V2_MOUNTS, &fs), Err(NOT_DELEGATED));
        // No memory controller handed down: none.
        fs.files.clear();
        assert_eq!(find(V2_CGROUPS, V2_MOUNTS, &fs), Err(NO_CONTROLLER));
    }

    #[test]
    fn v2_at_the_top_uses_children_of_the_top() {
        let fs = FakeFs {
            writable: paths(&["/sys/fs/cgroup", "/sys/fs/cgroup/cgroup.procs"]),
            files: HashMap::from([(
                PathBuf::from("/sys/fs/cgroup/cgroup.subtree_control"),
                "memory pids".to_string(),
            )]),
        };
        let place = find("0::/\n", V2_MOUNTS, &fs).unwrap();
        assert_eq!(place.parent, PathBuf::from("/sys/fs/cgroup"));
        assert_eq!(place.home, PathBuf::from("/sys/fs/cgroup"));
    }

    #[test]
    fn what_cannot_be_placed_is_refused() {
        let fs = FakeFs::default();
        // Nothing mounted.
        assert_eq!(find(V2_CGROUPS, "", &fs), Err(NO_CONTROLLER));
        // A cgroup outside what the mount shows (another namespace's).
        let mounts = "30 25 0:26 /lxc/c1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(find("0::/other\n", mounts, &fs), Err(UNREADABLE));
        assert_eq!(find("0::/lxc/c1x\n", mounts, &fs), Err(UNREADABLE));
        assert_eq!(find("0::/lxc/c1/../x\n", mounts, &fs), Err(UNREADABLE));
        // An escaped mount point is not used.
        let escaped = "30 25 0:26 / /sys/fs/c\\040g rw - cgroup2 cgroup2 rw\n";
        assert_eq!(find(V2_CGROUPS, escaped, &fs), Err(NO_CONTROLLER));
    }

    #[test]
    fn counters() {
        let v2 = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n";
        assert_eq!(counter(v2, "oom_kill"), Some(1));
        assert_eq!(counter(v2, "oom"), Some(1));
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n";
        assert_eq!(counter(v1, "oom_kill"), Some(0));
        assert_eq!(counter(v1, "missing"), None);
    }
}
