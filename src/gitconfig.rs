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

/// Everyday keys whose value names where git fetches from or pushes to: a
/// local repository there runs its own hooks when pushed to, and a
/// `transport::` URL runs a `git-remote-transport` helper. New values of
/// these count as everyday only when they name a remote by name or a
/// network URL.
const WHERE_KEYS: &[&str] = &[
    "remote.url",
    "remote.pushurl",
    "branch.remote",
    "branch.pushremote",
    "submodule.url",
];

/// Settings in `after` that were not in `before` and that git's everyday
/// commands do not write: `section[.subsection].name=value` each.
pub fn new_unusual(before: &[Entry], after: &[Entry]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in after {
        let known = before.iter().any(|b| b.full == e.full);
        let everyday = EVERYDAY_KEYS.contains(&e.key.as_str())
            && (!WHERE_KEYS.contains(&e.key.as_str()) || names_a_network_remote(value_of(&e.full)));
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

/// A remote's name (`origin`), or a URL that reaches another machine:
/// `https://`, `http://`, `ssh://`, `git://`, or scp-like `[user@]host:path`.
/// Anything else (a path, `file://`, `transport::address`) may be a
/// repository or a helper the sandboxed command prepared.
fn names_a_network_remote(value: &str) -> bool {
    let value = value.trim().trim_matches('"');
    let lower = value.to_ascii_lowercase();
    // This machine over ssh reaches a repository the command prepared too
    // (its hooks run under sshd, as the user).
    let this_machine = |host: &str| {
        let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
        let host = host.trim_start_matches('[');
        host == "localhost"
            || host.starts_with("localhost:")
            || host.starts_with("127.")
            || host.starts_with("::1")
            || host.starts_with("0.0.0.0")
    };
    const SCHEMES: &[&str] = &[
        "https://",
        "http://",
        "ssh://",
        "git://",
        "git+ssh://",
        "ssh+git://",
    ];
    for scheme in SCHEMES {
        if let Some(rest) = lower.strip_prefix(scheme) {
            let host = rest.split('/').next().unwrap_or("");
            return !value.contains("::") && !this_machine(host);
        }
    }
    if value.contains("::") || value.contains("://") {
        return false;
    }
    // scp-like: a host (no slash before the colon) and a path.
    if let Some((host, _)) = lower.split_once(':') {
        let bare = host.rsplit_once('@').map_or(host, |(_, h)| h);
        return !bare.is_empty()
            && !bare.contains('/')
            && !bare.starts_with('.')
            && !this_machine(host);
    }
    // A remote's name: one plain word.
    !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !value.starts_with('.')
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "[core]\n\tbare = false\n\tfsmonitor = touch /tmp/x\n[remote \"o\"]\n\turl = u\n\tfetch = +refs/*\n[branch \"main\"]\n\tremote = o\n[diff \"x\"]\n\ttextconv = evil\n",
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
            ("origin", false),
            ("/home/u/proj/.cache-evil.git", true),
            ("./.cache-evil.git", true),
            ("../elsewhere", true),
            (".cache-evil.git", true),
            ("file:///home/u/x.git", true),
            ("ext::sh -c evil", true),
            ("fd::3", true),
            ("https::evil", true),
            ("C:/repo", false),
            ("ssh://localhost/home/u/evil.git", true),
            ("localhost:/home/u/evil.git", true),
            ("u@127.0.0.1:evil.git", true),
            ("ssh://[::1]/evil.git", true),
        ] {
            for key in [
                "remote \"o\"]\n\turl",
                "remote \"o\"]\n\tpushurl",
                "branch \"main\"]\n\tpushremote",
            ] {
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
    fn lines_git_would_read_as_a_continuation_still_count() {
        // Reported although git reads the second line as part of the url:
        // the scan errs towards reporting.
        let after = entries("[remote \"o\"]\n\turl = https://h/a \\\nfsmonitor = x\n");
        assert_eq!(new_unusual(&[], &after), ["remote.o.fsmonitor=x"]);
    }
}
