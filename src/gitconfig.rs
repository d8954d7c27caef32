//! Just enough of git's config syntax to tell which settings a file holds:
//! for a repository created during a run, and for a repository's config
//! that something replaced while a run lasted.
//!
//! It is a line scan, not git's parser, and it errs towards reporting: every
//! line that is not a section header or a comment counts as a key (git would
//! read some of them as the continuation of a value), so a setting can be
//! reported that git does not see, but not the other way round.

/// One setting as written.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Settings in `after` that were not in `before` and that git's everyday
/// commands do not write: `section[.subsection].name=value` each.
pub fn new_unusual(before: &[Entry], after: &[Entry]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in after {
        let known = before.iter().any(|b| b.full == e.full);
        if !known && !EVERYDAY_KEYS.contains(&e.key.as_str()) && !out.contains(&e.full) {
            out.push(e.full.clone());
        }
    }
    out
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
    fn lines_git_would_read_as_a_continuation_still_count() {
        // Reported although git reads the second line as part of the url:
        // the scan errs towards reporting.
        let after = entries("[remote \"o\"]\n\turl = a \\\nfsmonitor = x\n");
        assert_eq!(new_unusual(&[], &after), ["remote.o.fsmonitor=x"]);
    }
}
