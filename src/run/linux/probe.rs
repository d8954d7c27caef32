//! Why the sandbox could not start, named precisely, with the narrowest fix.
//!
//! sbx does not probe before every run (that would double its cost): it starts
//! the sandbox, and the inner stage reports through a pipe that it is up. Only
//! when that report never comes does sbx run a short diagnostic bubblewrap with
//! its stderr captured, and map what it says, together with a few kernel
//! settings, to one of the causes below. Nothing is cached, so a fix takes
//! effect on the next run.
//!
//! The README's "Troubleshooting" section lists every cause of `CAUSES` with
//! its fix; a test keeps the two in step.

use std::path::Path;

use crate::exec::Cause;

pub const USERNS_MAX_ZERO: Cause = Cause {
    id: "userns-max-zero",
    what: "user namespaces are disabled (user.max_user_namespaces = 0)",
    fix: "allow them: `sysctl -w user.max_user_namespaces=10000` (and set it in /etc/sysctl.d/ to keep it)",
};
pub const USERNS_DEBIAN: Cause = Cause {
    id: "userns-unprivileged-off",
    what: "unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0)",
    fix: "allow them: `sysctl -w kernel.unprivileged_userns_clone=1` (and set it in /etc/sysctl.d/ to keep it)",
};
pub const APPARMOR_USERNS: Cause = Cause {
    id: "apparmor-userns",
    what: "AppArmor forbids unprivileged user namespaces to this bwrap (kernel.apparmor_restrict_unprivileged_userns = 1)",
    fix: "give bwrap an AppArmor profile that allows them, rather than turning the restriction off: write `abi <abi/4.0>, include <tunables/global> profile bwrap /usr/bin/bwrap flags=(unconfined) { userns, }` to /etc/apparmor.d/bwrap and run `apparmor_parser -r /etc/apparmor.d/bwrap` (Ubuntu also ships /etc/apparmor.d/bwrap-userns-restrict for this)",
};
pub const CONTAINER: Cause = Cause {
    id: "container-namespaces",
    what: "this container does not allow creating namespaces (its seccomp profile or missing privileges block them)",
    fix: "start the container with a seccomp profile that allows unshare/clone of user namespaces (for Docker, `--security-opt seccomp=unconfined` is the blunt form), or treat the container as the sandbox and set `enabled = false` in the user config",
};
pub const PROC_MOUNT: Cause = Cause {
    id: "proc-mount",
    what: "a fresh /proc cannot be mounted here (a container masks the host's /proc)",
    fix: "run the container with an unmasked /proc (Docker: `--security-opt systempaths=unconfined`), or treat the container as the sandbox and set `enabled = false`",
};
pub const OLD_BWRAP: Cause = Cause {
    id: "bwrap-too-old",
    what: "the installed bubblewrap lacks an option sbx needs",
    fix: "install bubblewrap 0.5 or newer from your distribution",
};
pub const SECCOMP: Cause = Cause {
    id: "seccomp-unavailable",
    what: "the kernel refused the seccomp filter (no CONFIG_SECCOMP_FILTER, or seccomp is blocked)",
    fix: "use a kernel with seccomp filtering (every mainstream distribution kernel has it)",
};
pub const CAPABILITIES: Cause = Cause {
    id: "capabilities-retained",
    what: "capabilities survived inside the sandbox (a setuid or patched bwrap)",
    fix: "reinstall your distribution's bubblewrap, or point `bwrap` in the user config at an unmodified one",
};
pub const UNKNOWN: Cause = Cause {
    id: "unknown",
    what: "bubblewrap failed to start the sandbox",
    fix: "run `sbx check` for details, and report bubblewrap's message if it is not listed in the README's troubleshooting section",
};

/// Every cause, in the order the README lists them.
#[cfg(test)]
pub const CAUSES: &[Cause] = &[
    crate::exec::BWRAP_MISSING,
    USERNS_MAX_ZERO,
    USERNS_DEBIAN,
    APPARMOR_USERNS,
    CONTAINER,
    PROC_MOUNT,
    OLD_BWRAP,
    SECCOMP,
    CAPABILITIES,
    UNKNOWN,
];

/// Kernel and environment facts that tell the causes apart.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    pub max_user_namespaces: Option<u64>,
    pub unprivileged_userns_clone: Option<u64>,
    pub apparmor_restrict_userns: Option<u64>,
    pub in_container: bool,
}

impl Facts {
    /// Read them from this host.
    pub fn read() -> Facts {
        let num = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|s| s.trim().parse().ok())
        };
        let in_container = Path::new("/.dockerenv").exists()
            || Path::new("/run/.containerenv").exists()
            || std::fs::read_to_string("/proc/1/environ")
                .is_ok_and(|e| e.split('\0').any(|v| v.starts_with("container=")));
        Facts {
            max_user_namespaces: num("/proc/sys/user/max_user_namespaces"),
            unprivileged_userns_clone: num("/proc/sys/kernel/unprivileged_userns_clone"),
            apparmor_restrict_userns: num("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
            in_container,
        }
    }
}

/// Map what a failed bubblewrap printed, and the host facts, to a cause.
pub fn diagnose(stderr: &str, facts: &Facts, root: bool) -> Cause {
    let s = stderr.to_ascii_lowercase();
    if s.contains("unknown option") || s.contains("unrecognized option") {
        return OLD_BWRAP;
    }
    if s.contains("still holds capabilities") {
        return CAPABILITIES;
    }
    if s.contains("seccomp") {
        return SECCOMP;
    }
    if s.contains("can't mount proc") {
        return PROC_MOUNT;
    }
    let userns_refused = s.contains("setting up uid map")
        || s.contains("no permissions to create new namespace")
        || s.contains("creating new namespace failed")
        || s.contains("failed rtm_newaddr")
        || s.contains("rtm_newlink")
        || s.contains("operation not permitted")
        || s.contains("permission denied");
    if userns_refused || s.is_empty() {
        if facts.max_user_namespaces == Some(0) {
            return USERNS_MAX_ZERO;
        }
        if facts.unprivileged_userns_clone == Some(0) && !root {
            return USERNS_DEBIAN;
        }
        if facts.apparmor_restrict_userns == Some(1) && !root {
            return APPARMOR_USERNS;
        }
        if facts.in_container {
            return CONTAINER;
        }
    }
    UNKNOWN
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_are_told_apart() {
        let none = Facts::default();
        let ubuntu = Facts {
            apparmor_restrict_userns: Some(1),
            ..Facts::default()
        };
        let debian = Facts {
            unprivileged_userns_clone: Some(0),
            ..Facts::default()
        };
        let docker = Facts {
            in_container: true,
            ..Facts::default()
        };
        let uid_map = "bwrap: setting up uid map: Permission denied\n";
        assert_eq!(diagnose(uid_map, &ubuntu, false), APPARMOR_USERNS);
        assert_eq!(
            diagnose(
                "bwrap: loopback: Failed RTM_NEWADDR: Operation not permitted",
                &ubuntu,
                false
            ),
            APPARMOR_USERNS
        );
        assert_eq!(diagnose(uid_map, &debian, false), USERNS_DEBIAN);
        assert_eq!(
            diagnose("bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.", &Facts { max_user_namespaces: Some(0), ..Facts::default() }, false),
            USERNS_MAX_ZERO
        );
        assert_eq!(
            diagnose(
                "bwrap: Creating new namespace failed: Operation not permitted",
                &docker,
                true
            ),
            CONTAINER
        );
        assert_eq!(
            diagnose(
                "bwrap: Creating new namespace failed: Operation not permitted",
                &none,
                true
            ),
            UNKNOWN
        );
        assert_eq!(
            diagnose(
                "bwrap: Can't mount proc on /newroot/proc: Operation not permitted",
                &docker,
                true
            ),
            PROC_MOUNT
        );
        assert_eq!(
            diagnose("bwrap: Unknown option --perms", &none, false),
            OLD_BWRAP
        );
        assert_eq!(
            diagnose(
                "sbx: error: installing the seccomp filter: ...",
                &none,
                false
            ),
            SECCOMP
        );
        assert_eq!(diagnose("something else entirely", &none, false), UNKNOWN);
    }

    #[test]
    fn readme_troubleshooting_lists_every_cause() {
        let readme = include_str!("../../../README.md");
        let section = readme
            .split("## Troubleshooting")
            .nth(1)
            .expect("README has a Troubleshooting section");
        for cause in CAUSES {
            assert!(section.contains(cause.what), "README lacks: {}", cause.what);
            assert!(
                section.contains(cause.fix),
                "README lacks the fix: {}",
                cause.fix
            );
        }
    }
}
