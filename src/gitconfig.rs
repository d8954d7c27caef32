//! Just enough of git's config syntax to tell which settings a file holds:
//! for a repository created during a run, and for a repository's config
//! that something replaced while a run lasted.
//!
//! It is a line scan, not git's parser, and it errs towards reporting: every
//! line that is not a section header or a comment counts as a key (git would
//! read some of them as the continuation of a value), so a setting can be
//! reported that git does not see, but not the other way round.

/// One setting as written.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    /// `section.name`, lower case, without the subsection: what decides
    /// whether the setting can make git run something.
    pub key: String,
    /// `section[.subsection].name=value` as written (section and name lower
    /// case): what tells two settings apart.
    pub full: String,
}

/// The keys `git init` writes.
pub const INIT_KEYS: &[&str] = &[
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "core.symlinks",
    "extensions.objectformat",
    "extensions.refstorage",
    "init.defaultbranch",
];

/// Keys that everyday git commands on the host add to a repository's config
/// (`remote add`, `push -u`, `branch -u`, `sparse-checkout`, `maintenance`,
/// `lfs install`), none of which makes git run a command. Any other new key
/// is reported: a list of the dangerous ones would always miss one.
const EVERYDAY_KEYS: &[&str] = &[
    "remote.url",
    "remote.pushurl",
    "remote.fetch",
    "remote.push",
    "remote.tagopt",
    "remote.prune",
    "remote.mirror",
    "branch.remote",
    "branch.merge",
    "branch.rebase",
    "branch.pushremote",
    "branch.description",
    "core.autocrlf",
    "core.eol",
    "core.sparsecheckout",
    "core.sparsecheckoutcone",
    "extensions.worktreeconfig",
    "user.name",
    "user.email",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "push.autosetupremote",
    "fetch.prune",
    "gc.auto",
    "maintenance.auto",
    "maintenance.strategy",
    "lfs.repositoryformatversion",
    "submodule.url",
    "submodule.active",
];

/// The settings in a config file's text.
pub fn entries(text: &str) -> Vec<Entry> {
    let mut section = String::new();
    let mut subsection = String::new();
    let mut out = Vec::new();
    for line in text.lines() {
        let mut line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(head) = line.strip_prefix('[') {
            // `[section]` or `[section "sub"]`, possibly followed by a key
            // on the same line.
            let (name, rest) = head.split_once(']').unwrap_or((head, ""));
            let mut parts = name.splitn(2, '"');
            section = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            subsection = parts.next().unwrap_or("").trim_end_matches('"').to_string();
            line = rest.trim();
            if line.is_empty() {
                continue;
            }
        }
        let (name, value) = line.split_once('=').unwrap_or((line, ""));
        let name = name.trim().to_ascii_lowercase();
        let full = if subsection.is_empty() {
            format!("{section}.{name}={}", value.trim())
        } else {
            format!("{section}.{subsection}.{name}={}", value.trim())
        };
        out.push(Entry {
            key: format!("{section}.{name}"),
            full,
        });
    }
    out
}

/// Everyday keys whose value is a URL of where git fetches from or pushes
/// to: a local repository there runs its own hooks when pushed to, and a
/// `transport::` URL runs a `git-remote-transport` helper. New values count
/// as everyday only when they reach another machine.
const URL_KEYS: &[&str] = &["remote.url", "remote.pushurl", "submodule.url"];

/// Everyday keys whose value names a remote (or, for git, a URL or a path
/// when no remote has that name). New values count as everyday only when a
/// remote of that name is configured.
const REMOTE_KEYS: &[&str] = &["branch.remote", "branch.pushremote"];

/// Settings in `after` that were not in `before` and that git's everyday
/// commands do not write: `section[.subsection].name=value` each.
pub fn new_unusual(before: &[Entry], after: &[Entry]) -> Vec<String> {
    new_unusual_with(before, after, &resolves_elsewhere)
}

/// [`new_unusual`] with the name resolution given (tests never touch DNS).
fn new_unusual_with(
    before: &[Entry],
    after: &[Entry],
    elsewhere: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    let remotes: Vec<&str> = after
        .iter()
        .filter(|e| e.key == "remote.url")
        .filter_map(|e| e.full.strip_prefix("remote."))
        .filter_map(|rest| rest.rsplit_once(".url=").map(|(name, _)| name))
        .collect();
    let mut out: Vec<String> = Vec::new();
    for e in after {
        let known = before.iter().any(|b| b.full == e.full);
        let key = e.key.as_str();
        let value = value_of(&e.full).trim().trim_matches('"');
        let everyday = EVERYDAY_KEYS.contains(&key)
            && if URL_KEYS.contains(&key) {
                reaches_another_machine(value, elsewhere)
            } else if REMOTE_KEYS.contains(&key) {
                remotes.contains(&value)
            } else {
                true
            };
        if !known && !everyday && !out.contains(&e.full) {
            out.push(e.full.clone());
        }
    }
    out
}

/// The value part of `section[.subsection].name=value`.
fn value_of(full: &str) -> &str {
    full.split_once('=').map_or("", |(_, v)| v)
}

/// A URL that reaches another machine: `https://`, `http://`, `ssh://`,
/// `git://` or scp-like `[user@]host:path`, with a host name or address
/// that is not this machine. Anything else (a path, even a plain word, which
/// git reads as a relative path; `file://`; `transport::address`; this
/// machine over ssh, where a repository the command prepared is as close as
/// a path) may be a repository or a helper the sandboxed command prepared.
fn reaches_another_machine(value: &str, elsewhere: &dyn Fn(&str) -> bool) -> bool {
    let lower = value.to_ascii_lowercase();
    if lower.contains("::") {
        return false;
    }
    const SCHEMES: &[&str] = &[
        "https://",
        "http://",
        "ssh://",
        "git://",
        "git+ssh://",
        "ssh+git://",
    ];
    let host = if let Some(rest) = SCHEMES.iter().find_map(|s| lower.strip_prefix(s)) {
        let authority = rest.split('/').next().unwrap_or("");
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        // A port may follow.
        host.split(':').next().unwrap_or("")
    } else if lower.contains("://") {
        return false;
    } else {
        // scp-like: a host (no slash before the colon) and a path.
        let Some((host, _)) = lower.split_once(':') else {
            return false;
        };
        host.rsplit_once('@').map_or(host, |(_, h)| h)
    };
    let is_name = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        && !host.starts_with(['.', '-']);
    is_name && !is_this_machine(host, elsewhere)
}

/// Whether a host name or IPv4 address may name this machine: `localhost`,
/// its own name, or anything that resolves to a loopback or unspecified
/// address (`127.1`, `2130706433`, `0x7f.1`, an /etc/hosts alias, a public
/// name that points at 127.0.0.1). A name that cannot be resolved within two
/// seconds counts as this machine too: the check runs only when a config
/// was replaced during a run, where being wrong the other way runs code.
fn is_this_machine(host: &str, elsewhere: &dyn Fn(&str) -> bool) -> bool {
    let host = host.trim_end_matches('.');
    if host == "localhost" || host.ends_with(".localhost") {
        return true;
    }
    let mine = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .is_some_and(|me| {
            let me = me.to_ascii_lowercase();
            host == me || me.split('.').next() == Some(host)
        });
    mine || !elsewhere(host)
}

/// Whether `host` resolves, within two seconds, only to addresses that are
/// neither loopback nor unspecified.
fn resolves_elsewhere(host: &str) -> bool {
    use std::net::ToSocketAddrs;
    let (tx, rx) = std::sync::mpsc::channel();
    let name = host.to_string();
    std::thread::spawn(move || {
        let addrs: Option<Vec<std::net::IpAddr>> = (name.as_str(), 22)
            .to_socket_addrs()
            .ok()
            .map(|a| a.map(|s| s.ip()).collect());
        let _ = tx.send(addrs);
    });
    match rx.recv_timeout(std::time::Duration::from_secs(2)) {
        Ok(Some(addrs)) => {
            !addrs.is_empty()
                && addrs.iter().all(|ip| {
                    let ip = match ip {
                        std::net::IpAddr::V6(v6) => {
                            v6.to_ipv4_mapped().map_or(*ip, std::net::IpAddr::V4)
                        }
                        v4 => *v4,
                    };
                    !ip.is_loopback() && !ip.is_unspecified()
                })
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Name resolution for the tests: these names are elsewhere, every
    /// other name is loopback or unknown.
    fn fake_dns(host: &str) -> bool {
        ["h", "github.com", "host", "corp.example"].contains(&host)
    }

    fn new_unusual(before: &[Entry], after: &[Entry]) -> Vec<String> {
        new_unusual_with(before, after, &fake_dns)
    }

    fn keys(text: &str) -> Vec<String> {
        entries(text).into_iter().map(|e| e.full).collect()
    }

    #[test]
    fn sections_subsections_and_same_line_keys() {
        let text =
            "[core]\n\tbare = false\n[remote \"origin\"] url = x\n# c\n; c\n[Core]\n\tFsMonitor\n";
        assert_eq!(
            keys(text),
            ["core.bare=false", "remote.origin.url=x", "core.fsmonitor="]
        );
        assert_eq!(entries(text)[1].key, "remote.url");
    }

    #[test]
    fn new_settings_that_run_things_are_told_from_everyday_ones() {
        let before = entries("[core]\n\tbare = false\n");
        let after = entries(
            "[core]\n\tbare = false\n\tfsmonitor = touch /tmp/x\n[remote \"o\"]\n\turl = https://h/r\n\tfetch = +refs/*\n[branch \"main\"]\n\tremote = o\n[diff \"x\"]\n\ttextconv = evil\n",
        );
        assert_eq!(
            new_unusual(&before, &after),
            ["core.fsmonitor=touch /tmp/x", "diff.x.textconv=evil"]
        );
        // A changed value of a setting that runs things is new too.
        let before = entries("[core]\n\tpager = less\n");
        let after = entries("[core]\n\tpager = evil\n");
        assert_eq!(new_unusual(&before, &after), ["core.pager=evil"]);
        assert!(new_unusual(&after, &after).is_empty());
    }

    #[test]
    fn remotes_that_are_local_repositories_are_unusual() {
        let before = entries("[core]\n\tbare = false\n");
        for (value, unusual) in [
            ("https://github.com/o/r.git", false),
            ("git@github.com:o/r.git", false),
            ("ssh://git@host/r", false),
            ("origin", true),
            ("/home/u/proj/.cache-evil.git", true),
            ("./.cache-evil.git", true),
            ("../elsewhere", true),
            (".cache-evil.git", true),
            ("file:///home/u/x.git", true),
            ("ext::sh -c evil", true),
            ("fd::3", true),
            ("https::evil", true),
            // A one-letter host (as a Windows drive would read) is looked
            // up like any other: unknown here, so unusual.
            ("C:/repo", true),
            // Numeric spellings of 127.0.0.1 resolve to it.
            ("2130706433:repo", true),
            ("0x7f.1:repo", true),
            ("ssh://localhost/home/u/evil.git", true),
            ("localhost:/home/u/evil.git", true),
            ("u@127.0.0.1:evil.git", true),
            ("ssh://[::1]/evil.git", true),
            // Found by the ninth review: a plain word is a relative path.
            ("evil.git", true),
            ("0:repo", true),
            ("127.1:repo", true),
            ("[::ffff:127.0.0.1]:x", true),
            ("ssh://git@github.com:22/o/r", false),
        ] {
            for key in ["remote \"o\"]\n\turl", "remote \"o\"]\n\tpushurl"] {
                let after = entries(&format!("[core]\n\tbare = false\n[{key} = {value}\n"));
                assert_eq!(
                    !new_unusual(&before, &after).is_empty(),
                    unusual,
                    "{key} = {value}"
                );
            }
        }
    }

    #[test]
    fn loopback_in_any_spelling_is_this_machine() {
        // Numeric forms and /etc/hosts: resolved without the network.
        for host in ["2130706433", "0x7f.1", "127.1", "0", "localhost"] {
            assert!(!resolves_elsewhere(host), "{host}");
        }
        assert!(resolves_elsewhere("192.0.2.1"));
        assert!(!resolves_elsewhere("no-such-host.invalid"));
    }

    #[test]
    fn a_branch_follows_only_a_configured_remote() {
        let before = entries("[remote \"origin\"]\n\turl = https://h/r\n");
        let after = |branch: &str| {
            entries(&format!(
                "[remote \"origin\"]\n\turl = https://h/r\n[branch \"main\"]\n\tremote = {branch}\n\tpushremote = {branch}\n"
            ))
        };
        assert!(new_unusual(&before, &after("origin")).is_empty());
        // git reads a name that is no remote as a path or a URL.
        assert_eq!(new_unusual(&before, &after("evil.git")).len(), 2);
        assert_eq!(new_unusual(&before, &after("../x")).len(), 2);
        // A remote added at the same time counts (git remote add; push -u).
        let added = entries(
            "[remote \"origin\"]\n\turl = https://h/r\n[remote \"up\"]\n\turl = git@h:r\n[branch \"main\"]\n\tremote = up\n",
        );
        assert!(new_unusual(&before, &added).is_empty());
    }

    #[test]
    fn lines_git_would_read_as_a_continuation_still_count() {
        // Reported although git reads the second line as part of the url:
        // the scan errs towards reporting.
        let after = entries("[remote \"o\"]\n\turl = https://h/a \\\nfsmonitor = x\n");
        assert_eq!(new_unusual(&[], &after), ["remote.o.fsmonitor=x"]);
    }
}
