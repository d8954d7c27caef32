//! Resource limits: how many processes, open files, how large a file, how
//! much CPU time and memory the command may use.
//!
//! On Linux the first four are rlimits that the inner stage (PID 1 of the
//! sandbox) sets on itself before it starts the command, which inherits
//! them, soft and hard alike (a command without capabilities cannot raise a
//! hard limit). The process count is kept per user namespace (Linux 5.14
//! and later), so the cap counts the sandbox's processes only, not the
//! user's others; the kernel does not apply it to root. A memory cap needs a
//! cgroup, which sbx does not manage yet: `max_memory` is reported as not
//! enforced, never silently ignored.

use std::fmt;

use serde::Deserialize;

/// The default process cap: far above what a build starts, far below what a
/// fork bomb reaches.
pub const DEFAULT_MAX_PROCESSES: u64 = 4096;

/// A size in bytes, written as a number or with a K, M, G or T suffix
/// (powers of 1024), as in `max_file_size = "2G"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(pub u64);

impl Size {
    /// Parse `512`, `"512"`, `"100K"`, `"2G"`, `"1.5"` is refused.
    pub fn parse(text: &str) -> Result<Size, String> {
        let t = text.trim();
        let t = t
            .strip_suffix("iB")
            .or_else(|| t.strip_suffix('B'))
            .unwrap_or(t);
        let (digits, shift) = match t.char_indices().last() {
            Some((i, c)) if c.is_ascii_alphabetic() => {
                let shift = match c.to_ascii_uppercase() {
                    'K' => 10,
                    'M' => 20,
                    'G' => 30,
                    'T' => 40,
                    _ => return Err(format!("{text:?}: unknown unit (use K, M, G or T)")),
                };
                (&t[..i], shift)
            }
            _ => (t, 0),
        };
        let n: u64 = digits.parse().map_err(|_| {
            format!("{text:?}: not a size (write bytes, or a number with K, M, G or T)")
        })?;
        let bytes = n
            .checked_mul(1u64 << shift)
            .ok_or_else(|| format!("{text:?}: too large"))?;
        if bytes == 0 {
            return Err(format!("{text:?}: must be more than zero"));
        }
        Ok(Size(bytes))
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, shift) in [("T", 40), ("G", 30), ("M", 20), ("K", 10)] {
            if self.0 >= 1 << shift && self.0.is_multiple_of(1 << shift) {
                return write!(f, "{}{unit}", self.0 >> shift);
            }
        }
        write!(f, "{} bytes", self.0)
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Str(String),
        }
        match Raw::deserialize(d)? {
            Raw::Int(n) if n > 0 => Ok(Size(n.unsigned_abs())),
            Raw::Int(n) => Err(serde::de::Error::custom(format!(
                "invalid value {n}, expected a size above zero"
            ))),
            Raw::Str(s) => Size::parse(&s).map_err(serde::de::Error::custom),
        }
    }
}

/// A count above zero (`max_processes`, `max_open_files`, `cpu_time`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Count(pub u64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let n = i64::deserialize(d)?;
        if n > 0 {
            Ok(Count(n.unsigned_abs()))
        } else {
            Err(serde::de::Error::custom(format!(
                "invalid value {n}, expected a number above zero"
            )))
        }
    }
}

/// The limits of one run (`None`: not limited by sbx).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub processes: Option<u64>,
    pub open_files: Option<u64>,
    pub file_size: Option<u64>,
    pub cpu_time: Option<u64>,
    pub memory: Option<u64>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            processes: Some(DEFAULT_MAX_PROCESSES),
            open_files: None,
            file_size: None,
            cpu_time: None,
            memory: None,
        }
    }
}

/// One limit as `sbx check` and the warnings name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The configuration key.
    pub key: &'static str,
    /// The value, as a person reads it.
    pub value: String,
    /// How it is enforced, or why it is not.
    pub how: Result<&'static str, &'static str>,
}

impl Limits {
    /// What each limit that is set amounts to on this machine, for a
    /// sandbox run on Linux (`linux`) by root (`root`), where a memory cap
    /// is enforced as `memory` says (how, or why not).
    pub fn status(
        &self,
        linux: bool,
        root: bool,
        memory: Result<&'static str, &'static str>,
    ) -> Vec<Status> {
        // macOS: set on sandbox-exec before it applies the profile, and
        // inherited by the command.
        let rlimit = |why_not_root: Option<&'static str>| match (root, why_not_root) {
            (true, Some(why)) => Err(why),
            _ if linux => Ok("an rlimit set in the sandbox"),
            _ => Ok("an rlimit set for the command"),
        };
        let mut out = Vec::new();
        if let Some(n) = self.processes {
            out.push(Status {
                key: "max_processes",
                value: n.to_string(),
                how: if linux {
                    rlimit(Some(
                        "the kernel does not count root's processes: run sbx as a user",
                    ))
                    .map(|_| "an rlimit counted in the sandbox's user namespace")
                } else {
                    Err("macOS counts processes per user, not per sandbox: a cap would count all of yours, so sbx sets none there")
                },
            });
        }
        if let Some(n) = self.open_files {
            out.push(Status {
                key: "max_open_files",
                value: n.to_string(),
                how: rlimit(None),
            });
        }
        if let Some(n) = self.file_size {
            out.push(Status {
                key: "max_file_size",
                value: Size(n).to_string(),
                how: rlimit(None),
            });
        }
        if let Some(n) = self.cpu_time {
            out.push(Status {
                key: "cpu_time",
                value: format!("{n} s"),
                how: rlimit(None),
            });
        }
        if let Some(n) = self.memory {
            out.push(Status {
                key: "max_memory",
                value: Size(n).to_string(),
                how: memory,
            });
        }
        out
    }

    /// What each limit that is set amounts to for a run of `policy` on this
    /// host.
    pub fn status_here(&self, platform_linux: bool) -> Vec<Status> {
        // Looked for only when asked for: it reads the cgroup files.
        let memory = match self.memory {
            Some(_) => crate::run::memory_cap(),
            None => Err("not asked for"),
        };
        self.status(platform_linux, nix::unistd::geteuid().is_root(), memory)
    }

    /// One warning per limit the user asked for (`asked` says which keys a
    /// file or flag set) that this host does not enforce: said on every run.
    pub fn unenforced(&self, platform_linux: bool, asked: impl Fn(&str) -> bool) -> Vec<String> {
        self.status_here(platform_linux)
            .into_iter()
            .filter(|s| asked(s.key))
            .filter_map(|s| {
                s.how
                    .err()
                    .map(|why| format!("{} = {} is NOT enforced: {why}", s.key, s.value))
            })
            .collect()
    }

    /// The inner stage's arguments for the limits it applies.
    pub fn inner_args(&self) -> Vec<String> {
        self.values()
            .into_iter()
            .flat_map(|v| ["--limit".to_string(), v])
            .collect()
    }

    /// The rlimits to set, as `NAME=VALUE` (what [`planned`] and
    /// [`stopped_by`] read).
    pub fn values(&self) -> Vec<String> {
        [
            ("processes", self.processes),
            ("open-files", self.open_files),
            ("file-size", self.file_size),
            ("cpu-time", self.cpu_time),
        ]
        .into_iter()
        .filter_map(|(name, value)| value.map(|v| format!("{name}={v}")))
        .collect()
    }
}

/// One rlimit to set: the resource, its soft and its hard value.
pub type Rlimit = (nix::sys::resource::Resource, u64, u64);

/// The rlimits `NAME=VALUE` arguments ask for, each soft and hard (CPU
/// time's hard one second above), never above the hard limit already in
/// force (a process without privileges cannot raise it).
pub fn planned(args: &[String]) -> anyhow::Result<Vec<Rlimit>> {
    use anyhow::{bail, Context};
    use nix::sys::resource::{getrlimit, Resource};
    let mut out = Vec::new();
    for arg in args {
        let Some((name, value)) = arg.split_once('=') else {
            bail!("--limit {arg}: expected NAME=VALUE");
        };
        let value: u64 = value
            .parse()
            .with_context(|| format!("--limit {arg}: not a number"))?;
        let resource = match name {
            #[cfg(target_os = "linux")]
            "processes" => Resource::RLIMIT_NPROC,
            // Not set elsewhere (`Limits::status` says why).
            #[cfg(not(target_os = "linux"))]
            "processes" => continue,
            "open-files" => Resource::RLIMIT_NOFILE,
            "file-size" => Resource::RLIMIT_FSIZE,
            "cpu-time" => Resource::RLIMIT_CPU,
            _ => bail!("--limit {arg}: unknown limit"),
        };
        let (_, hard) = getrlimit(resource).with_context(|| format!("reading the {name} limit"))?;
        // CPU time: at the soft limit the kernel sends SIGXCPU, at the hard
        // one SIGKILL; one second apart, so the first one is what stops it
        // (and can be told).
        let ceiling = match resource {
            Resource::RLIMIT_CPU => value.saturating_add(1),
            _ => value,
        };
        #[allow(unused_mut)]
        let (mut soft, mut ceiling) = (value.min(hard), ceiling.min(hard));
        // macOS refuses an open-file limit above OPEN_MAX (10240, in
        // <sys/syslimits.h>) even when the hard limit is "unlimited": lower,
        // never higher, than asked.
        #[cfg(target_os = "macos")]
        if resource == Resource::RLIMIT_NOFILE {
            const OPEN_MAX: u64 = 10240;
            (soft, ceiling) = (soft.min(OPEN_MAX), ceiling.min(OPEN_MAX));
        }
        out.push((resource, soft, ceiling));
    }
    Ok(out)
}

/// Apply `--limit NAME=VALUE` arguments to this process (the inner stage,
/// before it starts the command, which inherits them).
#[cfg(target_os = "linux")]
pub fn apply(args: &[String]) -> anyhow::Result<()> {
    use anyhow::Context;
    for (resource, soft, hard) in planned(args)? {
        nix::sys::resource::setrlimit(resource, soft, hard)
            .with_context(|| format!("setting the {resource:?} limit"))?;
    }
    Ok(())
}

/// What to say when the command was killed by `signal` while the limits
/// `args` were set: the limit that stopped it, if any.
pub fn stopped_by(signal: i32, args: &[String]) -> Option<String> {
    let (name, key) = match signal {
        nix::libc::SIGXFSZ => ("file-size", "max_file_size"),
        nix::libc::SIGXCPU => ("cpu-time", "cpu_time"),
        _ => return None,
    };
    let value = args
        .iter()
        .find_map(|a| a.strip_prefix(&format!("{name}=")))?;
    let shown = match name {
        "file-size" => value.parse().map(|n| Size(n).to_string()).ok()?,
        _ => format!("{value} s"),
    };
    Some(stopped_message(key, &shown))
}

/// What sbx says when the limit `key` (set to `shown`) stopped the command.
pub fn stopped_message(key: &str, shown: &str) -> String {
    format!(
        "the command was stopped by the {key} limit ({shown}); raise it with --{} or `{key}` in your config",
        key.replace('_', "-")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(Size::parse("512"), Ok(Size(512)));
        assert_eq!(Size::parse("100K"), Ok(Size(100 << 10)));
        assert_eq!(Size::parse("2g"), Ok(Size(2 << 30)));
        assert_eq!(Size::parse("1TiB"), Ok(Size(1 << 40)));
        assert_eq!(Size::parse("3MB"), Ok(Size(3 << 20)));
        for bad in ["", "0", "1.5G", "-1", "12Q", "G", "99999999999999999999T"] {
            assert!(Size::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Size(2 << 30).to_string(), "2G");
        assert_eq!(Size(1000).to_string(), "1000 bytes");
    }

    #[test]
    fn inner_args_and_what_stopped_the_command() {
        let limits = Limits {
            processes: Some(64),
            open_files: None,
            file_size: Some(1 << 20),
            cpu_time: Some(5),
            memory: Some(1 << 30),
        };
        let args = limits.inner_args();
        assert_eq!(
            args,
            [
                "--limit",
                "processes=64",
                "--limit",
                "file-size=1048576",
                "--limit",
                "cpu-time=5"
            ]
        );
        let values: Vec<String> = args.iter().filter(|a| a.contains('=')).cloned().collect();
        assert!(stopped_by(25, &values).is_some_and(
            |t| t.contains("max_file_size limit (1M)") && t.contains("--max-file-size")
        ));
        assert!(stopped_by(24, &values).is_some_and(|t| t.contains("cpu_time limit (5 s)")));
        assert_eq!(stopped_by(9, &values), None);
        assert_eq!(stopped_by(25, &[]), None);
    }

    #[test]
    fn what_is_enforced_is_said() {
        let limits = Limits {
            memory: Some(1 << 30),
            ..Limits::default()
        };
        let user = limits.status(true, false, Err("no cgroup"));
        assert!(user[0].how.is_ok());
        assert_eq!(user[1].how, Err("no cgroup"), "memory: {user:?}");
        let delegated = limits.status(true, false, Ok("a cgroup"));
        assert_eq!(delegated[1].how, Ok("a cgroup"));
        let root = limits.status(true, true, Ok("a cgroup"));
        assert!(root[0].how.is_err(), "processes as root: {root:?}");
        let mac = limits.status(false, false, Err("macOS"));
        assert!(mac[0].how.is_err_and(|why| why.contains("per user")));
        assert_eq!(mac[1].how, Err("macOS"));
        let files = Limits {
            file_size: Some(1 << 20),
            ..Limits::default()
        };
        assert!(files.status(false, false, Err("macOS"))[1].how.is_ok());
    }
}
