//! Reduced mode's stage: `sbx __reduced [RULES] -- CMD` (rendered by
//! `backend::reduced`), for where bubblewrap cannot create namespaces.
//!
//! A fresh, single-threaded sbx started by the outer sbx applies to itself,
//! in this order:
//!
//! 1. it closes every inherited descriptor above 2 (as the inner stage of
//!    full mode does);
//! 2. a Landlock ruleset (ABI 3 or newer, all or nothing: a right the
//!    kernel cannot enforce is an error, never a silently smaller ruleset):
//!    the readable roots less the hidden paths, the writable roots, the
//!    device nodes; TCP bind and connect (ABI 4) refused but for the
//!    proxy's port; signals and abstract Unix sockets scoped to the
//!    sandbox (ABI 6);
//! 3. `no_new_privs` and the seccomp filter of full mode, with the network
//!    rules of [`seccomp::NetFilter`] on top (there is no network namespace);
//! 4. the resource limits;
//!
//! then reports on the ready pipe and execs the command, which inherits all
//! of it; nothing can remove a Landlock domain or a seccomp filter.
//!
//! Landlock only allows: a hidden path is hidden by granting everything
//! around it. Each directory above a hidden path (up to its readable root)
//! gets `READ_DIR` alone, and each of its entries is granted in full, but
//! the hidden one; entries above another hidden path are split the same
//! way. The rules name real inodes: a symlink is never granted (what it
//! points to has its own rule, or none), and one found where a directory
//! was expected is left out (fail closed).

use std::convert::Infallible;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use landlock::{
    Access as _, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};

use super::seccomp;
use crate::backend::reduced::Landlock;
use crate::cli::ReducedArgs;

/// At most this many path rules: a home of thousands of entries beside a
/// hidden one would make start-up slow; past it the stage refuses.
const MAX_RULES: usize = 20_000;

/// What this kernel's Landlock offers, probed with the syscall itself
/// (securityfs is often not mounted in containers); `None` below ABI 3,
/// where `truncate()` outside the writable roots is not ruled.
pub fn probe() -> Option<Landlock> {
    let supports = |f: &dyn Fn(Ruleset) -> Result<Ruleset, landlock::RulesetError>| {
        f(Ruleset::default().set_compatibility(CompatLevel::HardRequirement)).is_ok()
    };
    if !supports(&|r| r.handle_access(AccessFs::from_all(ABI::V3))) {
        return None;
    }
    let abi = if supports(&|r| r.scope(Scope::from_all(ABI::V6))) {
        6
    } else if supports(&|r| r.handle_access(AccessNet::from_all(ABI::V4))) {
        4
    } else {
        3
    };
    Some(Landlock { abi })
}

/// The network as the stage rules it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Net {
    Deny,
    Allow,
    /// TCP connections to this port alone (the allowlist proxy's).
    Proxy(u16),
}

impl Net {
    fn parse(text: &str) -> Result<Net> {
        Ok(match text {
            "deny" => Net::Deny,
            "allow" => Net::Allow,
            _ => match text.strip_prefix("proxy:").map(str::parse) {
                Some(Ok(port)) => Net::Proxy(port),
                _ => bail!("--network {text:?}: expected deny, allow or proxy:PORT"),
            },
        })
    }
}

/// Run the stage: returns only on failure (the command was not run).
pub fn run(args: ReducedArgs) -> Result<Infallible> {
    let Some(landlock) = probe() else {
        bail!("reduced mode needs Landlock ABI 3 (Linux 6.2) or newer, and this kernel does not offer it; the command was not run");
    };
    let mut net = Net::parse(&args.network)?;
    if matches!(net, Net::Proxy(_)) && !landlock.network() {
        // Said by the outer stage on every run: the allowlist is denied.
        net = Net::Deny;
    }
    let Some((program, rest)) = args.command.split_first() else {
        bail!("no command given to the reduced stage");
    };
    super::inner::close_inherited_fds(args.ready_fd.as_slice())?;
    // As root (a container, a CI job), the command would otherwise keep
    // every capability: bubblewrap drops them in full mode.
    give_up_capabilities()?;
    let ruleset = ruleset(&args, landlock, net)?;
    nix::sys::prctl::set_no_new_privs().context("setting PR_SET_NO_NEW_PRIVS")?;
    let status = ruleset
        .restrict_self()
        .context("applying the Landlock ruleset")?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        bail!("the kernel enforces only part of the Landlock ruleset; the command was not run");
    }
    let opts = seccomp::Options {
        unix: if args.allow_unix_sockets {
            seccomp::Unix::Allow
        } else {
            seccomp::Unix::Deny
        },
        network: match net {
            Net::Deny => seccomp::NetFilter::Deny,
            Net::Proxy(_) => seccomp::NetFilter::TcpOnly,
            Net::Allow => seccomp::NetFilter::Namespace,
        },
    };
    seccomp::apply(&seccomp::programs(opts)?)?;
    crate::limits::apply(&args.limits)?;
    if let Some(fd) = args.ready_fd {
        report_ready(fd)?;
    }
    let err = std::process::Command::new(program).args(rest).exec();
    std::process::exit(i32::from(super::spawn_failure(program, &err)))
}

/// The capability sets of this process, from `/proc/self/status`, by name
/// (`CapEff`, `CapBnd`, ...).
fn capability_sets() -> Result<Vec<(String, u64)>> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let mut sets = Vec::new();
    for line in status.lines().filter(|l| l.starts_with("Cap")) {
        if let Some((name, value)) = line.split_once(':') {
            let value = u64::from_str_radix(value.trim(), 16)
                .with_context(|| format!("parsing {name} in /proc/self/status"))?;
            sets.push((name.to_string(), value));
        }
    }
    Ok(sets)
}

/// Make sure the command starts with no capability. As root (a container, a
/// CI job) this process holds them all, and bubblewrap is not there to drop
/// them: drop every set, the bounding set included, and check. A process
/// that holds none (a user's) cannot drop its bounding set, and needs not:
/// with `no_new_privs` no exec can raise what it holds.
fn give_up_capabilities() -> Result<()> {
    let held = |sets: &[(String, u64)], name: &str| sets.iter().any(|(n, v)| n == name && *v != 0);
    let before = capability_sets()?;
    if held(&before, "CapEff") || held(&before, "CapPrm") {
        super::copies::drop_capabilities()?;
    }
    let after = capability_sets()?;
    let mut must_be_empty = vec!["CapInh", "CapPrm", "CapEff", "CapAmb"];
    if held(&before, "CapEff") {
        must_be_empty.push("CapBnd");
    }
    for name in must_be_empty {
        if held(&after, name) {
            bail!("capabilities are still held ({name}); the command was not run");
        }
    }
    Ok(())
}

/// Tell the outer stage the rules are in force. The inherited descriptor
/// is closed and the byte written through a close-on-exec one: the command
/// never holds the pipe.
fn report_ready(fd: i32) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::FileTypeExt;
    // No pipe there (a pasted `sbx profile` line, `sbx check`'s probe):
    // nobody to tell.
    let path = format!("/proc/self/fd/{fd}");
    if !std::fs::metadata(&path).is_ok_and(|m| m.file_type().is_fifo()) {
        return Ok(());
    }
    let mut pipe = std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .context("opening the ready pipe")?;
    nix::unistd::close(fd).context("closing the inherited ready descriptor")?;
    if pipe.write_all(&[super::bwrap::READY]).is_err() {
        // Nobody reads: the outer sbx is gone.
        std::process::exit(125);
    }
    Ok(())
}

/// Build the ruleset of `args` for this kernel.
fn ruleset(args: &ReducedArgs, landlock: Landlock, net: Net) -> Result<RulesetCreated> {
    let abi = ABI::V3;
    let handled = if args.writes_unrestricted {
        AccessFs::from_read(abi)
    } else {
        AccessFs::from_all(abi)
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .context("Landlock refused the file system rights")?;
    if net != Net::Allow && landlock.network() {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .context("Landlock refused the network rights")?;
    }
    if landlock.scopes() {
        ruleset = ruleset
            .scope(Scope::AbstractUnixSocket | Scope::Signal)
            .context("Landlock refused the scopes")?;
    }
    let mut created = ruleset.create().context("creating the Landlock ruleset")?;
    let rules = path_rules(args, handled)?;
    for rule in rules {
        created = add_path_rule(created, &rule, handled)?;
    }
    if let (Net::Proxy(port), true) = (net, landlock.network()) {
        created = created
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .context("adding the proxy's port to the Landlock ruleset")?;
    }
    Ok(created)
}

/// One path rule: where, what, and whether a link there may be followed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PathRule {
    path: PathBuf,
    access: Grant,
    follow: bool,
}

/// The rights of a path rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Grant {
    /// List it, nothing beneath (a directory above a hidden path).
    List,
    /// Read and run everything beneath.
    Read,
    /// Every right, beneath.
    All,
}

/// Every path rule of `args`: the readable roots split around the hidden
/// paths, the writable roots, the device nodes.
fn path_rules(args: &ReducedArgs, handled: landlock::BitFlags<AccessFs>) -> Result<Vec<PathRule>> {
    let mut rules = Vec::new();
    for root in &args.read {
        split(root, &args.hide, &mut rules, &mut list_dir)?;
    }
    if handled.contains(AccessFs::WriteFile) {
        let writable = args.write.iter().chain(&args.devices);
        for path in writable.cloned().chain(own_terminals()) {
            rules.push(PathRule {
                path,
                access: Grant::All,
                follow: true,
            });
        }
    }
    Ok(rules)
}

/// The terminals this process was given on descriptors 0 to 2: the
/// command may reopen its own terminal by name, never another session's.
fn own_terminals() -> Vec<PathBuf> {
    let terminals = Path::new(crate::backend::reduced::TERMINALS);
    (0..3)
        .filter_map(|fd| std::fs::read_link(format!("/proc/self/fd/{fd}")).ok())
        .filter(|target| target.starts_with(terminals) && target != terminals)
        .collect()
}

/// The entries of a directory; `None` when it cannot be listed (it is then
/// not granted at all).
fn list_dir(dir: &Path) -> Option<Vec<PathBuf>> {
    let entries = std::fs::read_dir(dir).ok()?;
    Some(entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
}

/// The read rules of `root` less the `hidden` paths beneath it.
fn split(
    root: &Path,
    hidden: &[PathBuf],
    rules: &mut Vec<PathRule>,
    list: &mut dyn FnMut(&Path) -> Option<Vec<PathBuf>>,
) -> Result<()> {
    if hidden.iter().any(|h| root.starts_with(h)) {
        return Ok(());
    }
    if !hidden.iter().any(|h| h.starts_with(root)) {
        rules.push(PathRule {
            path: root.to_path_buf(),
            access: Grant::Read,
            follow: false,
        });
        return Ok(());
    }
    // Above a hidden path: only a real directory is split; a link or a
    // file found here (replaced since the policy was resolved) is left out.
    let is_dir = std::fs::symlink_metadata(root).is_ok_and(|m| m.is_dir());
    let Some(entries) = list(root).filter(|_| is_dir) else {
        return Ok(());
    };
    rules.push(PathRule {
        path: root.to_path_buf(),
        access: Grant::List,
        follow: false,
    });
    for entry in entries {
        split(&entry, hidden, rules, list)?;
        if rules.len() > MAX_RULES {
            bail!(
                "more than {MAX_RULES} Landlock rules would be needed to hide the credentials near {} (reduced mode grants what is around a hidden path one entry at a time); the command was not run",
                root.display()
            );
        }
    }
    Ok(())
}

/// Add one path rule. A path that does not exist is skipped (a device this
/// machine lacks, an entry removed since it was listed); a link is never
/// granted unless the rule follows it.
fn add_path_rule(
    created: RulesetCreated,
    rule: &PathRule,
    handled: landlock::BitFlags<AccessFs>,
) -> Result<RulesetCreated> {
    let mut flags = nix::libc::O_PATH | nix::libc::O_CLOEXEC;
    if !rule.follow {
        flags |= nix::libc::O_NOFOLLOW;
    }
    let Ok(file) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(&rule.path)
    else {
        return Ok(created);
    };
    let Ok(meta) = file.metadata() else {
        return Ok(created);
    };
    if meta.file_type().is_symlink() {
        return Ok(created);
    }
    let abi = ABI::V3;
    let mut access = match rule.access {
        Grant::List => AccessFs::ReadDir.into(),
        Grant::Read => AccessFs::from_read(abi),
        // No device nodes: a writable root is no place for one.
        Grant::All => AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock),
    } & handled;
    if !meta.is_dir() {
        access &= AccessFs::from_file(abi);
    }
    if access.is_empty() {
        return Ok(created);
    }
    created
        .add_rule(PathBeneath::new(file, access))
        .with_context(|| format!("adding {} to the Landlock ruleset", rule.path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hidden_path_is_left_out_and_its_siblings_granted() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        for d in [".ssh", ".config/gcloud", ".config/git", "work"] {
            std::fs::create_dir_all(h.join(d)).unwrap();
        }
        std::fs::write(h.join(".netrc"), "x").unwrap();
        std::fs::write(h.join(".bashrc"), "x").unwrap();
        let hidden = vec![h.join(".ssh"), h.join(".config/gcloud"), h.join(".netrc")];
        let mut rules = Vec::new();
        split(h, &hidden, &mut rules, &mut list_dir).unwrap();
        let mut got: Vec<(PathBuf, Grant)> =
            rules.into_iter().map(|r| (r.path, r.access)).collect();
        got.sort();
        let mut want = vec![
            (h.to_path_buf(), Grant::List),
            (h.join(".bashrc"), Grant::Read),
            (h.join(".config"), Grant::List),
            (h.join(".config/git"), Grant::Read),
            (h.join("work"), Grant::Read),
        ];
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn a_link_where_a_directory_was_is_not_split() {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        std::fs::create_dir(h.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink(h.join("elsewhere"), h.join(".config")).unwrap();
        let hidden = vec![h.join(".config/gcloud")];
        let mut rules = Vec::new();
        split(&h.join(".config"), &hidden, &mut rules, &mut list_dir).unwrap();
        assert!(rules.is_empty(), "{rules:?}");
    }

    #[test]
    fn too_many_rules_are_refused() {
        // `/` is split (a hidden path lies beneath it) into more entries
        // than the bound.
        let mut rules = Vec::new();
        let mut many = |_: &Path| {
            Some(
                (0..=MAX_RULES)
                    .map(|i| PathBuf::from(format!("/r/{i}")))
                    .collect(),
            )
        };
        let hidden = [PathBuf::from("/hidden-nowhere/x")];
        assert!(split(Path::new("/"), &hidden, &mut rules, &mut many).is_err());
    }

    #[test]
    fn network_modes_parse() {
        assert_eq!(Net::parse("deny").unwrap(), Net::Deny);
        assert_eq!(Net::parse("allow").unwrap(), Net::Allow);
        assert_eq!(Net::parse("proxy:3128").unwrap(), Net::Proxy(3128));
        assert!(Net::parse("proxy:x").is_err());
        assert!(Net::parse("all").is_err());
    }
}
