//! Private git config copies, the outer stage's side: made before the
//! command, applied after it.
//!
//! Each protected git config gets a copy in `CACHE/pending/copies-RUN/N`
//! with a link `N.link` to it; the inner stage mounts the link over the
//! config (`run/linux/copies.rs`), so git in the sandbox writes the copy and
//! never the host's file. After the run, what changed in a copy is read by
//! git and sorted: everyday settings (branch tracking, a remote with a
//! network URL, `user.*`, ... see [`allowed`]) are applied to the real file
//! by git itself; any other change is refused and named. A killed run's
//! copies are removed by the next run ([`super::journal::recover`]) without
//! being applied: nothing in them ever reaches the host's file unchecked.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::gitconfig::{self, Entry, EVERYDAY_KEYS, INIT_KEYS, TRUSTED_GIT};
use super::identity::GitConfigWatch;

/// The copies directory of this run in `cache`.
pub fn dir(cache: &Path) -> Option<PathBuf> {
    Some(dir_of(cache, &super::journal::this_process_key()?))
}

/// Make the copies of `configs` (in the order the inner stage mounts them)
/// and their links in `dir`, empty first.
pub fn prepare(dir: &Path, configs: &[&GitConfigWatch]) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("emptying {}", dir.display()))?;
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    for (i, config) in configs.iter().enumerate() {
        let copy = dir.join(i.to_string());
        std::fs::write(&copy, &config.before)
            .with_context(|| format!("writing {}", copy.display()))?;
        std::os::unix::fs::symlink(&copy, dir.join(format!("{i}.link")))
            .with_context(|| format!("linking to {}", copy.display()))?;
    }
    Ok(())
}

/// Apply what the command changed in each copy to the real config: the
/// everyday settings, through git; every other change is named in a
/// warning. False when something was refused or could not be applied.
/// The directory is left for the caller to remove ([`remove`]).
pub fn apply(dir: &Path, configs: &[&GitConfigWatch], warn: &dyn Fn(&str)) -> bool {
    let mut clean = true;
    // Looked up once, and only when a copy changed.
    let local = std::cell::OnceCell::new();
    for (i, config) in configs.iter().enumerate() {
        let after = match super::identity::read_regular_file(&dir.join(i.to_string()), 1 << 20) {
            Ok(Some(after)) if after == config.before => continue,
            Ok(Some(after)) => after,
            // git writes a file; something else put this there.
            Ok(None) | Err(_) => {
                warn(&format!(
                    "{}: the sandboxed command's copy of it was removed or replaced by something that is not a config file; nothing was applied",
                    config.path.display()
                ));
                clean = false;
                continue;
            }
        };
        let (before, after) = match gitconfig::read_pair(&config.before, &after) {
            Ok(both) => both,
            Err(why) => {
                warn(&format!(
                    "{}: the sandboxed command's changes were not applied: git cannot read them ({})",
                    config.path.display(),
                    crate::banner::sanitize(&why)
                ));
                clean = false;
                continue;
            }
        };
        let changes = changes(&before, &after, &|host| {
            is_local(host, local.get_or_init(local_names))
        });
        let failed = write(&config.path, &changes);
        if !changes.refused.is_empty() {
            warn(&format!(
                "{}: refused the settings the sandboxed command made, as some are not everyday ones git may act on outside the sandbox: [{}]; nothing was applied (make the changes yourself if you want them)",
                config.path.display(),
                crate::banner::sanitize(&changes.refused.join(", "))
            ));
            clean = false;
        }
        if let Some(why) = failed {
            warn(&format!(
                "{}: the sandboxed command's settings could not all be applied: {}",
                config.path.display(),
                crate::banner::sanitize(&why)
            ));
            clean = false;
        }
    }
    clean
}

/// Remove a run's copies directory once they are applied (or of no use).
pub fn remove(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

/// The copies directory of the run of key `key` (`PID-START`) in `cache`.
pub fn dir_of(cache: &Path, key: &str) -> PathBuf {
    super::journal::dir(cache).join(format!("copies-{key}"))
}

/// What of the change from `before` to `after` (two versions of a config)
/// would be refused, as `key=value`; `None` when git cannot read them.
pub fn refused_between(before: &[u8], after: &[u8]) -> Option<Vec<String>> {
    let (before, after) = gitconfig::read_pair(before, after).ok()?;
    let local = std::cell::OnceCell::new();
    Some(
        changes(&before, &after, &|host| {
            is_local(host, local.get_or_init(local_names))
        })
        .refused,
    )
}

/// The most settings one run may change in one config.
const MAX_CHANGES: usize = 64;

/// What to do to a real config.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// Sections (`remote.origin`) that are gone whole.
    pub removed_sections: Vec<String>,
    /// Keys (`section[.sub].name`) and all their values now (none: unset).
    pub set: Vec<(String, Vec<String>)>,
    /// What is refused: `key=value`, or `key (removed)`.
    pub refused: Vec<String>,
}

/// Sort the differences between `before` and `after` into what may be
/// applied and what is refused. `local` tells whether a host name is this
/// machine.
pub fn changes(before: &[Entry], after: &[Entry], local: &dyn Fn(&str) -> bool) -> Changes {
    let values = |list: &[Entry], key: &str| -> Vec<String> {
        list.iter()
            .filter(|e| e.full_key == key)
            .map(|e| e.value.clone())
            .collect()
    };
    let mut keys: Vec<&Entry> = Vec::new();
    for e in after.iter().chain(before) {
        if !keys.iter().any(|k| k.full_key == e.full_key) {
            keys.push(e);
        }
    }
    let mut out = Changes::default();
    let mut gone_refused: BTreeSet<String> = BTreeSet::new();
    for e in keys {
        let (old, new) = (values(before, &e.full_key), values(after, &e.full_key));
        if old == new {
            continue;
        }
        let ok = allowed_key(&e.key)
            && new.iter().all(|v| {
                let candidate = Entry {
                    value: v.clone(),
                    ..e.clone()
                };
                old.contains(v) || allowed(&candidate, local)
            });
        if ok {
            out.set.push((e.full_key.clone(), new));
            continue;
        }
        if new.is_empty() {
            out.refused.push(format!("{} (removed)", e.full_key));
            gone_refused.insert(section_of(&e.full_key).to_string());
        } else {
            for v in new.iter().filter(|v| !old.contains(v)) {
                out.refused.push(format!("{}={v}", e.full_key));
            }
            if new.iter().all(|v| old.contains(v)) {
                out.refused.push(format!("{} (removed)", e.full_key));
            }
        }
    }
    out.refused.extend(dangling_remotes(before, after));
    // git rewrites the file once a setting: thousands would hold sbx for
    // minutes after the command.
    let count = out.set.len();
    if count > MAX_CHANGES {
        out.refused.push(format!(
            "{count} settings changed at once (at most {MAX_CHANGES} are applied)"
        ));
    }
    // All or nothing: a refused change applied in part could leave the
    // rest pointing somewhere it was not meant to (a branch naming a remote
    // whose URL was refused is a path to git).
    if !out.refused.is_empty() {
        out.set.clear();
        return out;
    }
    // A section whose every key is gone, all of them allowed to go, is
    // removed whole (no empty header is left behind).
    let sections: BTreeSet<&str> = before.iter().map(|e| section_of(&e.full_key)).collect();
    for section in sections {
        let gone = !after.iter().any(|e| section_of(&e.full_key) == section);
        if gone && !gone_refused.contains(section) {
            out.removed_sections.push(section.to_string());
            out.set
                .retain(|(key, values)| !(values.is_empty() && section_of(key) == section));
        }
    }
    out
}

/// The keys whose value names a remote, which git takes for a URL or a
/// path when no remote of that name (exactly: names are case-sensitive)
/// has a URL.
const REMOTE_REFERENCES: &[&str] = &["branch.remote", "branch.pushremote", "remote.pushdefault"];

/// What the changes leave pointing at a remote without a URL, judged on
/// the whole config after the run: a new reference must name a remote
/// with a URL (or `.`, this repository), and a remote's URL may go only
/// with the whole remote, nothing still naming it.
pub fn dangling_remotes(before: &[Entry], after: &[Entry]) -> Vec<String> {
    let has_url = |list: &[Entry], name: &str| {
        list.iter()
            .any(|e| e.key == "remote.url" && e.full_key == format!("remote.{name}.url"))
    };
    let mut out = Vec::new();
    for e in after
        .iter()
        .filter(|e| REMOTE_REFERENCES.contains(&e.key.as_str()))
    {
        let known = before
            .iter()
            .any(|b| b.full_key == e.full_key && b.value == e.value);
        let broken = e.value != "." && !has_url(after, &e.value);
        if broken && (!known || has_url(before, &e.value)) {
            out.push(format!(
                "{}={} (no remote of that name)",
                e.full_key, e.value
            ));
        }
    }
    for e in before.iter().filter(|e| e.key == "remote.url") {
        let section = section_of(&e.full_key);
        let remains = after.iter().any(|a| section_of(&a.full_key) == section);
        let text = format!("{} (removed while {section} remains)", e.full_key);
        if !after.iter().any(|a| a.full_key == e.full_key) && remains && !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

/// `remote.origin` of `remote.origin.url`.
fn section_of(full_key: &str) -> &str {
    full_key.rsplit_once('.').map_or(full_key, |(s, _)| s)
}

/// Keys a command may set or remove in a repository's config from inside
/// the sandbox: what `git init` writes, the everyday keys, and the ones
/// common tools add (GitHub's CLI, VS Code, partial clones, submodules).
/// None of them makes git run a command; the values of some are checked
/// further by [`allowed`].
fn allowed_key(key: &str) -> bool {
    const MORE: &[&str] = &[
        "remote.gh-resolved",
        "remote.promisor",
        "remote.partialclonefilter",
        "branch.vscode-merge-base",
        "submodule.branch",
        "submodule.update",
        "submodule.ignore",
        "submodule.fetchrecursesubmodules",
    ];
    INIT_KEYS.contains(&key) || EVERYDAY_KEYS.contains(&key) || MORE.contains(&key)
}

/// Whether one new value of an allowed key may be applied. What a value
/// naming a remote points at is judged on the whole config
/// ([`dangling_remotes`]).
fn allowed(e: &Entry, local: &dyn Fn(&str) -> bool) -> bool {
    allowed_key(&e.key)
        && match e.key.as_str() {
            "remote.url" | "remote.pushurl" | "submodule.url" => network_url(&e.value, local),
            // `!command` runs the command.
            "submodule.update" => {
                matches!(e.value.as_str(), "checkout" | "rebase" | "merge" | "none")
            }
            _ => true,
        }
}

/// A URL over the network to another machine: `https://`, `http://`,
/// `ssh://`, `git://`, or scp-like `[user@]host:path`. Not a path, not
/// `file://`, not a `transport::` helper, not this machine (a repository
/// here, reached over ssh, runs its hooks when the user pushes).
pub fn network_url(value: &str, local: &dyn Fn(&str) -> bool) -> bool {
    if value.is_empty() || value.contains(|c: char| c.is_whitespace() || c.is_control()) {
        return false;
    }
    let (raw, over_ssh) = if value.contains("://") {
        let Ok(url) = url::Url::parse(value) else {
            return false;
        };
        let over_ssh = match url.scheme() {
            "https" | "http" => false,
            "ssh" | "git" | "git+ssh" | "ssh+git" => true,
            _ => return false,
        };
        match url.host_str() {
            Some(host) => (
                host.trim_matches(|c| c == '[' || c == ']').to_string(),
                over_ssh,
            ),
            None => return false,
        }
    } else {
        // scp-like: no slash before the first colon, and no `::`.
        let Some((head, _)) = value.split_once(':') else {
            return false;
        };
        if head.contains('/') || value.contains("::") {
            return false;
        }
        (
            head.rsplit_once('@').map_or(head, |(_, h)| h).to_string(),
            true,
        )
    };
    if raw.is_empty() || raw.starts_with('-') {
        return false;
    }
    // Read the way a resolver does (`127.1`, `2130706433`, `%6cocalhost`):
    // the `url` crate leaves the host of an ssh or git URL as written.
    let host = match url::Host::parse(&raw).or_else(|_| url::Host::parse(&format!("[{raw}]"))) {
        Ok(host) => host,
        Err(_) => return false,
    };
    match host {
        // ssh names a machine by DNS name; an address there is this
        // machine's or a neighbour's too often to tell.
        url::Host::Ipv4(_) | url::Host::Ipv6(_) if over_ssh => false,
        url::Host::Ipv4(a) => !is_loopback(a.into()) && !local(&a.to_string()),
        url::Host::Ipv6(a) => !is_loopback(a.into()) && !local(&a.to_string()),
        url::Host::Domain(name) => {
            let name = name.trim_end_matches('.').to_ascii_lowercase();
            // A single label over ssh may be an alias of ~/.ssh/config or
            // a name the resolver's search list completes.
            let plain = !over_ssh || name.contains('.');
            plain && !name.is_empty() && !name.starts_with('-') && !local(&name)
        }
    }
}

/// Names this machine answers to by itself: its host name, the names
/// `/etc/hosts` gives a loopback address, and the addresses of its network
/// interfaces.
fn local_names() -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    if let Ok(interfaces) = nix::ifaddrs::getifaddrs() {
        for interface in interfaces {
            let address = interface.address.as_ref();
            if let Some(v4) = address.and_then(|a| a.as_sockaddr_in()) {
                names.push(v4.ip().to_string());
            }
            if let Some(v6) = address.and_then(|a| a.as_sockaddr_in6()) {
                names.push(v6.ip().to_string());
            }
        }
    }
    if let Ok(name) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
        let name = name.trim().to_ascii_lowercase();
        if !name.is_empty() {
            names.push(format!("{name}.local"));
            names.push(name);
        }
    }
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap_or_default();
    for line in hosts.lines() {
        let line = line.split('#').next().unwrap_or("");
        let mut fields = line.split_whitespace();
        let Some(addr) = fields
            .next()
            .and_then(|a| a.parse::<std::net::IpAddr>().ok())
        else {
            continue;
        };
        if is_loopback(addr) {
            names.extend(fields.map(str::to_ascii_lowercase));
        }
    }
    names
}

fn is_loopback(addr: std::net::IpAddr) -> bool {
    match addr {
        std::net::IpAddr::V4(a) => a.is_loopback() || a.is_unspecified(),
        std::net::IpAddr::V6(a) => {
            a.is_loopback()
                || a.is_unspecified()
                || a.to_ipv4_mapped()
                    .is_some_and(|v4| v4.is_loopback() || v4.is_unspecified())
        }
    }
}

/// Whether `host` (lower case) is this machine: a loopback or unspecified
/// address, `localhost`, or one of `names`.
fn is_local(host: &str, names: &[String]) -> bool {
    let loopback = host.parse::<std::net::IpAddr>().is_ok_and(is_loopback);
    loopback
        || host == "localhost"
        || host.ends_with(".localhost")
        || names.iter().any(|n| n == host)
}

/// Apply `changes` to the config at `path` with git; what failed, if
/// anything.
///
/// All at once: git changes one setting a call, so the calls go to a copy
/// of the file beside it, which replaces it (a rename) only when the result
/// as a whole names no remote without a URL and the file has not changed
/// meanwhile. Half applied, a change set could send the user's git to a
/// path for as long as the calls take (or for good, if sbx is killed then).
fn write(path: &Path, changes: &Changes) -> Option<String> {
    use super::identity::{read_regular_file, Identity};
    if changes.set.is_empty() && changes.removed_sections.is_empty() {
        return None;
    }
    let identity = Identity::of(path);
    let now = match read_regular_file(path, 1 << 20) {
        Ok(Some(now)) => now,
        _ => return Some("it cannot be read now".into()),
    };
    let name = format!(
        "{}.sbx-apply-{}",
        path.file_name()
            .map_or("config".into(), |n| n.to_string_lossy()),
        std::process::id()
    );
    let staged = path.with_file_name(name);
    let result = stage(&staged, path, &now, changes);
    let result = result.and_then(|()| {
        if Identity::of(path) != identity {
            return Err("it changed on the host meanwhile".into());
        }
        std::fs::rename(&staged, path).map_err(|e| format!("replacing it: {e}"))
    });
    let _ = std::fs::remove_file(&staged);
    result.err()
}

/// Write `now` (the content of `real`, with its permissions) to `staged`,
/// apply `changes` there, and check the result.
fn stage(staged: &Path, real: &Path, now: &[u8], changes: &Changes) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mode = std::fs::metadata(real).map_or(0o644, |m| m.permissions().mode() & 0o777);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(staged)
        .map_err(|e| format!("writing {}: {e}", staged.display()))?;
    file.write_all(now)
        .map_err(|e| format!("writing {}: {e}", staged.display()))?;
    drop(file);
    let git = |args: &[&str]| -> Result<std::process::Output, String> {
        std::process::Command::new(TRUSTED_GIT)
            .arg("config")
            .arg("--file")
            .arg(staged)
            .args(args)
            .env_clear()
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", "/nonexistent")
            // No repository is discovered from here.
            .current_dir("/")
            .stdin(std::process::Stdio::null())
            .output()
            .map_err(|e| format!("running {TRUSTED_GIT}: {e}"))
    };
    for section in &changes.removed_sections {
        // Absent already (the user removed it meanwhile): nothing to do.
        let _ = git(&["--remove-section", section]);
    }
    for (key, values) in &changes.set {
        // Exit 5: the key was not there.
        let _ = git(&["--unset-all", key]);
        for value in values {
            let out = git(&["--add", key, value])?;
            if !out.status.success() {
                return Err(format!(
                    "{key}={value} ({})",
                    String::from_utf8_lossy(&out.stderr).trim()
                ));
            }
        }
    }
    // The user may have changed the file during the run: the result is
    // judged whole once more.
    let result = std::fs::read(staged).map_err(|e| format!("reading {}: {e}", staged.display()))?;
    let (before, after) = gitconfig::read_pair(now, &result)?;
    let dangling = dangling_remotes(&before, &after);
    if !dangling.is_empty() {
        return Err(format!("the result would leave [{}]", dangling.join(", ")));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Vec<Entry> {
        gitconfig::scan(text)
    }

    fn no_local(_: &str) -> bool {
        false
    }

    const BASE: &str = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[remote \"origin\"]\n\turl = https://example.com/r.git\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n";

    #[test]
    fn everyday_changes_are_applied() {
        let after = format!(
            "{BASE}[branch \"topic\"]\n\tremote = origin\n\tmerge = refs/heads/main\n[user]\n\temail = a@example.com\n"
        );
        let c = changes(&entries(BASE), &entries(&after), &no_local);
        assert_eq!(
            c.set,
            vec![
                (
                    "branch.topic.remote".to_string(),
                    vec!["origin".to_string()]
                ),
                (
                    "branch.topic.merge".to_string(),
                    vec!["refs/heads/main".to_string()]
                ),
                ("user.email".to_string(), vec!["a@example.com".to_string()]),
            ]
        );
        assert!(c.refused.is_empty());
    }

    #[test]
    fn one_refused_change_stops_them_all_and_each_is_named() {
        let after = format!(
            "{BASE}[user]\n\temail = a@example.com\n[core]\n\tfsmonitor = /tmp/x\n[alias]\n\tst = !sh\n"
        );
        let c = changes(&entries(BASE), &entries(&after), &no_local);
        assert_eq!(c.refused, vec!["core.fsmonitor=/tmp/x", "alias.st=!sh"]);
        assert!(c.set.is_empty() && c.removed_sections.is_empty(), "{c:?}");
    }

    /// Review findings: a branch naming a remote whose URL was refused, a
    /// remote named in another case, a remote's URL removed (git then
    /// takes the name for a path).
    #[test]
    fn nothing_is_left_naming_a_remote_without_a_url() {
        for (after, refused) in [
            (
                format!("{BASE}[remote \"/tmp/evil\"]\n\turl = /tmp/evil\n[branch \"main\"]\n\tpushremote = /tmp/evil\n"),
                // Refused, so nothing is applied: not the branch either.
                vec!["remote./tmp/evil.url=/tmp/evil"],
            ),
            (
                format!("{BASE}[branch \"main\"]\n\tremote = ORIGIN\n"),
                vec!["branch.main.remote=ORIGIN (no remote of that name)"],
            ),
            (
                "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[remote \"origin\"]\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n".to_string(),
                vec!["remote.origin.url (removed while remote.origin remains)"],
            ),
        ] {
            let c = changes(&entries(BASE), &entries(&after), &no_local);
            assert_eq!(c.refused, refused, "{after}");
            assert!(c.set.is_empty(), "{c:?}");
        }
        // An existing branch still naming the removed remote.
        let before = format!("{BASE}[branch \"main\"]\n\tremote = origin\n");
        let after = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n[branch \"main\"]\n\tremote = origin\n";
        let c = changes(&entries(&before), &entries(after), &no_local);
        assert_eq!(
            c.refused,
            vec!["branch.main.remote=origin (no remote of that name)"]
        );
    }

    #[test]
    fn a_new_remote_needs_a_network_url_to_another_machine() {
        for (url, ok) in [
            ("https://github.com/o/r.git", true),
            ("git@github.com:o/r.git", true),
            ("ssh://git@example.com:22/r.git", true),
            ("git://example.com/r.git", true),
            ("/home/u/evil.git", false),
            ("../evil.git", false),
            ("file:///tmp/evil.git", false),
            ("ext::sh -c evil", false),
            ("fd::3", false),
            ("ssh://localhost/tmp/evil.git", false),
            ("ssh://127.0.0.2/tmp/evil.git", false),
            ("ssh://[::1]/tmp/evil.git", false),
            ("git@localhost:evil.git", false),
            ("https://-oProxyCommand=x/r", false),
            ("ssh://myhost/r.git", false),
            ("http://localhost./r.git", false),
            ("http://127.1/r.git", false),
            ("git@127.1:r.git", false),
            ("git@0x7f000001:r.git", false),
            ("git@[::1]:r.git", false),
            ("ssh://git@MyHost./r.git", false),
            ("http://10.0.0.8/r.git", true),
            ("http://10.0.0.9/r.git", false),
            // Review findings: ssh and git URLs' hosts as ssh reads them.
            ("ssh://127.1/x", false),
            ("ssh://0/x", false),
            ("git://2130706433/x", false),
            ("ssh://%31%32%37.0.0.1/x", false),
            ("ssh://%6cocalhost/x", false),
            ("ssh://10.0.0.8/x", false),
            ("ssh://myalias/x", false),
            ("myalias:r.git", false),
            ("git+ssh://git@gitlab.example.com/r.git", true),
        ] {
            let after = format!("{BASE}[remote \"up\"]\n\turl = {url}\n");
            let names = ["myhost".to_string(), "10.0.0.9".to_string()];
            let c = changes(&entries(BASE), &entries(&after), &|h| is_local(h, &names));
            assert_eq!(c.refused.is_empty(), ok, "{url}: {c:?}");
        }
    }

    #[test]
    fn branch_tracking_names_a_remote_or_this_repository() {
        for (remote, ok) in [
            ("origin", true),
            (".", true),
            ("/tmp/evil", false),
            ("nope", false),
            ("ORIGIN", false),
        ] {
            let after = format!("{BASE}[branch \"t\"]\n\tremote = {remote}\n");
            let c = changes(&entries(BASE), &entries(&after), &no_local);
            assert_eq!(c.refused.is_empty(), ok, "{remote}");
        }
    }

    #[test]
    fn a_removed_remote_goes_whole_and_a_removed_dangerous_key_is_refused() {
        let before = format!("{BASE}[core]\n\thookspath = .githooks\n");
        let after = "[core]\n\trepositoryformatversion = 0\n\tbare = false\n";
        let c = changes(&entries(&before), &entries(after), &no_local);
        assert_eq!(c.refused, vec!["core.hookspath (removed)"]);
        assert!(c.set.is_empty() && c.removed_sections.is_empty(), "{c:?}");
        // Without the refused part, the remote goes whole.
        let c = changes(&entries(BASE), &entries(after), &no_local);
        assert_eq!(c.removed_sections, vec!["remote.origin"]);
        assert!(c.set.is_empty() && c.refused.is_empty(), "{c:?}");
    }

    #[test]
    fn submodule_update_may_not_run_a_command() {
        let after = format!("{BASE}[submodule \"s\"]\n\tupdate = !sh evil\n");
        let c = changes(&entries(BASE), &entries(&after), &no_local);
        assert_eq!(c.refused, vec!["submodule.s.update=!sh evil"]);
        let after = format!("{BASE}[submodule \"s\"]\n\tupdate = rebase\n");
        assert!(changes(&entries(BASE), &entries(&after), &no_local)
            .refused
            .is_empty());
    }

    #[test]
    fn this_machine_is_local() {
        // Its own interfaces' addresses, read from the system.
        assert!(local_names().iter().any(|n| n == "127.0.0.1"));
        let names = vec!["box".to_string()];
        for host in [
            "localhost",
            "a.localhost",
            "127.0.0.1",
            "::1",
            "0.0.0.0",
            "box",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_local(host, &names), "{host}");
        }
        for host in ["github.com", "10.0.0.5", "boxes"] {
            assert!(!is_local(host, &names), "{host}");
        }
    }

    #[test]
    fn more_than_a_few_dozen_changes_are_refused() {
        let many: String = (0..65)
            .map(|i| format!("[branch \"b{i}\"]\n\tdescription = x\n"))
            .collect();
        let c = changes(
            &entries(BASE),
            &entries(&format!("{BASE}{many}")),
            &no_local,
        );
        assert_eq!(
            c.refused,
            vec!["65 settings changed at once (at most 64 are applied)"]
        );
        assert!(c.set.is_empty());
    }

    /// The user changed the file during the run: applied to what it is
    /// now, a change that was fine against the old content may leave a
    /// branch naming a remote that is gone. The file stays as it is.
    #[test]
    fn the_result_is_judged_whole_before_it_replaces_the_file() {
        if !Path::new(TRUSTED_GIT).is_file() {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let config = tmp.path().join("config");
        let now = format!("{BASE}[branch \"main\"]\n\tremote = origin\n");
        std::fs::write(&config, &now).unwrap();
        let remove_origin = Changes {
            removed_sections: vec!["remote.origin".into()],
            ..Changes::default()
        };
        let failed = write(&config, &remove_origin).unwrap();
        assert!(failed.contains("branch.main.remote=origin"), "{failed}");
        assert_eq!(std::fs::read_to_string(&config).unwrap(), now);
        // Nothing is left beside it.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
        // A change that leaves the whole sound replaces it.
        let email = Changes {
            set: vec![("user.email".into(), vec!["a@example.com".into()])],
            ..Changes::default()
        };
        assert_eq!(write(&config, &email), None);
        assert!(std::fs::read_to_string(&config)
            .unwrap()
            .contains("a@example.com"));
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 1);
    }
}
