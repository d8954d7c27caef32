//! What a git config file sets: for a repository created during a run, and
//! for a repository's config that something replaced while a run lasted.
//!
//! Two readers. [`read`] asks git itself (`/usr/bin/git config --file -
//! --list`, no includes, nothing from the environment), so that what is
//! checked is what git will act on: quoting, escapes, continuation lines and
//! inline comments are git's business, and a hand-written approximation of
//! them was fooled more than once. [`scan`] is a line scan for when no
//! trusted git is installed; it errs towards reporting: every line that is
//! not a section header or a comment counts as a key.

use std::path::Path;

use super::identity::{GitConfigWatch, Identity};

/// One setting.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `section.name`, lower case, without the subsection: what decides
    /// whether the setting can make git run something.
    pub key: String,
    /// `section[.subsection].name` as git reports it.
    pub full_key: String,
    pub value: String,
}

impl Entry {
    /// `full_key=value`, as reported to the user.
    pub fn text(&self) -> String {
        format!("{}={}", self.full_key, self.value)
    }
}

/// The only git sbx runs itself: one the sandboxed command cannot have put
/// on a PATH.
pub(super) const TRUSTED_GIT: &str = "/usr/bin/git";

/// The settings of a config file's content as git reads them, or why git
/// refuses it; the line scan when no trusted git is installed.
pub fn read(content: &[u8]) -> Result<Vec<Entry>, String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    if !std::path::Path::new(TRUSTED_GIT).is_file() {
        return Ok(scan(&String::from_utf8_lossy(content)));
    }
    let child = Command::new(TRUSTED_GIT)
        .args(["config", "--file", "-", "--no-includes", "--null", "--list"])
        .env_clear()
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("HOME", "/nonexistent")
        // No repository is discovered from here.
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(_) => return Ok(scan(&String::from_utf8_lossy(content))),
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(content);
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("running git: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(out
        .stdout
        .split(|&b| b == 0)
        .filter(|item| !item.is_empty())
        .map(|item| {
            let item = String::from_utf8_lossy(item);
            let (full_key, value) = item.split_once('\n').unwrap_or((&item, ""));
            entry(full_key, value)
        })
        .collect())
}

/// [`read`] for a config before and after a run: both, or why git refuses
/// either.
pub fn read_pair(before: &[u8], after: &[u8]) -> Result<(Vec<Entry>, Vec<Entry>), String> {
    Ok((read(before)?, read(after)?))
}

/// An entry from git's `section[.subsection].name` and a value.
fn entry(full_key: &str, value: &str) -> Entry {
    let section = full_key.split('.').next().unwrap_or("");
    let name = full_key.rsplit('.').next().unwrap_or("");
    Entry {
        key: format!(
            "{}.{}",
            section.to_ascii_lowercase(),
            name.to_ascii_lowercase()
        ),
        full_key: full_key.to_string(),
        value: value.to_string(),
    }
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
/// (`push -u`, `branch -u`, `sparse-checkout`, `maintenance`, `lfs
/// install`), none of which makes git run a command (for the ones that say
/// where git pushes, see [`URL_KEYS`]). Any other new key is reported: a
/// list of the dangerous ones would always miss one.
pub(super) const EVERYDAY_KEYS: &[&str] = &[
    "remote.url",
    "remote.pushurl",
    "remote.fetch",
    "remote.tagopt",
    "remote.prune",
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

/// The settings in a config file's text, by a line scan (see the module).
pub fn scan(text: &str) -> Vec<Entry> {
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
        let full_key = if subsection.is_empty() {
            format!("{section}.{name}")
        } else {
            format!("{section}.{subsection}.{name}")
        };
        out.push(Entry {
            key: format!("{section}.{name}"),
            full_key,
            value: value.trim().to_string(),
        });
    }
    out
}

/// Everyday keys whose value says where git fetches from or pushes to: a
/// local repository there runs its own hooks when pushed to, a
/// `transport::` URL runs a helper, and a name that resolves to this
/// machine reaches a repository the command prepared as surely as a path.
/// No test of the value itself tells them apart reliably (it was fooled
/// more than once), so a new value counts as everyday only when it is a URL
/// the config already had before the run.
const URL_KEYS: &[&str] = &["remote.url", "remote.pushurl", "submodule.url"];

/// Everyday keys whose value names a remote (or, for git, a URL or a path
/// when no remote has that name). A new value counts as everyday only when
/// it names a remote the config had before the run.
const REMOTE_KEYS: &[&str] = &["branch.remote", "branch.pushremote"];

/// Settings in `after` that were not in `before` and that git's everyday
/// commands do not write: `section[.subsection].name=value` each.
pub fn new_unusual(before: &[Entry], after: &[Entry]) -> Vec<String> {
    let old_urls: Vec<&str> = before
        .iter()
        .filter(|e| URL_KEYS.contains(&e.key.as_str()))
        .map(|e| e.value.as_str())
        .collect();
    let old_remote = |name: &str| {
        before
            .iter()
            .any(|e| e.key == "remote.url" && e.full_key == format!("remote.{name}.url"))
    };
    let mut out: Vec<String> = Vec::new();
    for e in after {
        let known = before
            .iter()
            .any(|b| b.full_key == e.full_key && b.value == e.value);
        let key = e.key.as_str();
        let everyday = EVERYDAY_KEYS.contains(&key)
            && if URL_KEYS.contains(&key) {
                old_urls.contains(&e.value.as_str())
            } else if REMOTE_KEYS.contains(&key) {
                old_remote(&e.value)
            } else {
                true
            };
        let text = e.text();
        if !known && !everyday && !out.contains(&text) {
            out.push(text);
        }
    }
    out
}

/// Check the git config files that were replaced during the run (git on
/// the host does so whenever it writes one, which detaches the read-only
/// mount on it inside the sandbox, so the command may have written it
/// since): any setting they did not have before, beyond those everyday git
/// commands write, is reported. False when one is: the file is left as it
/// is (it may hold the user's own changes), for the user to review.
pub fn check_git_configs(configs: &[GitConfigWatch], warn: &dyn Fn(&str)) -> bool {
    let mut clean = true;
    for c in configs {
        if Identity::of(&c.path) == c.identity {
            continue;
        }
        // Not followed if a link, never waited on if a FIFO.
        let after = match super::identity::read_regular_file(&c.path, MAX_CONFIG_BYTES) {
            Ok(Some(content)) => content,
            Ok(None) => continue,
            Err(why) => {
                warn(&format!(
                    "{} was replaced during the run and cannot be read ({why}): review it before using git there",
                    c.path.display()
                ));
                clean = false;
                continue;
            }
        };
        let (before, after) = match read_pair(&c.before, &after) {
            Ok(both) => both,
            Err(why) => {
                warn(&format!(
                    "{} was replaced during the run and git cannot read it ({}): review it before using git there",
                    c.path.display(),
                    crate::banner::sanitize(&why)
                ));
                clean = false;
                continue;
            }
        };
        let mut new = new_unusual(&before, &after);
        // A setting that was there may now name a remote that is gone.
        new.extend(super::copies::dangling_remotes(&before, &after));
        if !new.is_empty() {
            warn(&format!(
                "{} was replaced during the run (git on the host rewrites it, which lets the sandbox write it too) and now has settings it did not have before that git may act on outside the sandbox: [{}]; review them before using git there",
                c.path.display(),
                crate::banner::sanitize(&new.join(", "))
            ));
            clean = false;
        }
    }
    clean
}

/// A setting a new repository may have: what `git init` writes, and the
/// everyday settings `git clone` adds, with a remote only over HTTP(S) (a
/// local path or an ssh URL to this machine would have the user's next push
/// run that repository's hooks; ssh cannot authenticate from the sandbox
/// anyway).
fn benign_in_a_new_repository(entry: &Entry) -> bool {
    let key = entry.key.as_str();
    let http = {
        let v = entry.value.to_ascii_lowercase();
        (v.starts_with("https://") || v.starts_with("http://"))
            && !v.contains(|c: char| c.is_whitespace() || c.is_control())
    };
    // `branch.NAME.remote` and `.pushremote` may name a URL or a path as well
    // as a remote: here only a remote's name.
    let names_a_remote = !entry.value.is_empty()
        && !entry.value.starts_with('.')
        && entry
            .value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let value_ok = if URL_KEYS.contains(&key) {
        http
    } else if matches!(key, "branch.remote" | "branch.pushremote") {
        names_a_remote
    } else {
        true
    };
    INIT_KEYS.contains(&key) || (EVERYDAY_KEYS.contains(&key) && value_ok)
}

/// A repository created inside the sandbox (`git init`) has hooks and config
/// written by the sandboxed command, and git runs them later outside it. Say
/// so, and give true, when they hold anything `git init` would not have put
/// there, or cannot be read (the caller moves the repository aside).
///
/// Nothing here follows a link or waits on a file: a `config` that is a
/// link (say to `/proc/self/cwd/...`, which reads differently for git in
/// the repository than for sbx) or not a regular file (a FIFO would block
/// the read for good) is itself a reason.
pub fn inspect_new_git(git: &Path, warn: &dyn Fn(&str)) -> bool {
    inspect_git_dir(git, None, warn)
}

/// [`inspect_new_git`] for a submodule's git directory made during the run
/// (`git submodule update --init`): its `core.worktree` may name the
/// submodule's checkout, a directory inside `tree`, the superproject's
/// working tree, and nothing else (the user's next checkout of that
/// submodule would write its files wherever it points).
pub fn inspect_new_module(git: &Path, tree: &Path, warn: &dyn Fn(&str)) -> bool {
    inspect_git_dir(git, Some(tree), warn)
}

fn inspect_git_dir(git: &Path, tree: Option<&Path>, warn: &dyn Fn(&str)) -> bool {
    if !std::fs::symlink_metadata(git).is_ok_and(|m| m.is_dir()) {
        return false;
    }
    let (hooks, mut risky) = new_hooks(&git.join("hooks"));
    for name in ["config", "config.worktree"] {
        match super::identity::read_regular_file(&git.join(name), MAX_CONFIG_BYTES) {
            Ok(None) => {}
            Ok(Some(bytes)) => match read(&bytes) {
                Ok(entries) => {
                    for entry in entries {
                        let benign = benign_in_a_new_repository(&entry)
                            || tree.is_some_and(|t| worktree_inside(&entry, git, t));
                        if !benign && !risky.contains(&entry.key) {
                            risky.push(entry.key);
                        }
                    }
                }
                Err(_) => risky.push(format!("{name} (git cannot read it)")),
            },
            Err(why) => risky.push(format!("{name} ({why})")),
        }
    }
    if std::fs::symlink_metadata(git.join("commondir")).is_ok() {
        risky.push("commondir".into());
    }
    // git's older remote files (`git init` makes an empty `branches`).
    for name in ["remotes", "branches"] {
        let dir = git.join(name);
        let empty_dir = std::fs::symlink_metadata(&dir).is_ok_and(|m| m.is_dir())
            && std::fs::read_dir(&dir).is_ok_and(|mut e| e.next().is_none());
        if std::fs::symlink_metadata(&dir).is_ok() && !empty_dir {
            risky.push(name.into());
        }
    }
    if hooks.is_empty() && risky.is_empty() {
        return false;
    }
    warn(&format!(
        "the command created the git repository {} with hooks [{}] and config keys [{}] that git runs outside the sandbox",
        git.display(),
        crate::banner::sanitize(&hooks.join(", ")),
        crate::banner::sanitize(&risky.join(", "))
    ));
    true
}

/// Whether `entry` is a `core.worktree` naming a directory inside `tree`
/// (relative to the git directory `git`), lexically and, where it exists,
/// by its real path.
fn worktree_inside(entry: &Entry, git: &Path, tree: &Path) -> bool {
    use std::path::Component;
    if entry.key != "core.worktree" {
        return false;
    }
    let mut path = std::path::PathBuf::new();
    for c in git.join(&entry.value).components() {
        match c {
            Component::ParentDir => {
                path.pop();
            }
            Component::CurDir => {}
            other => path.push(other),
        }
    }
    let real_inside = std::fs::canonicalize(&path).map_or(true, |r| r.starts_with(tree));
    path.starts_with(tree) && path != tree && real_inside
}

/// A config file larger than this is not one `git init` or `git clone` wrote.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// The hooks of a new repository (other than git's samples), and what makes
/// its hooks directory itself a reason to move the repository aside (a link,
/// not a directory, unreadable).
fn new_hooks(hooks: &Path) -> (Vec<String>, Vec<String>) {
    match std::fs::symlink_metadata(hooks) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Vec::new(), Vec::new()),
        Ok(m) if m.is_dir() => match std::fs::read_dir(hooks) {
            Ok(entries) => (
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.ends_with(".sample"))
                    .collect(),
                Vec::new(),
            ),
            Err(_) => (Vec::new(), vec!["hooks (unreadable)".into()]),
        },
        Ok(_) => (Vec::new(), vec!["hooks (not a directory)".into()]),
        Err(_) => (Vec::new(), vec!["hooks (unreadable)".into()]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(entries: &[Entry]) -> Vec<String> {
        entries.iter().map(Entry::text).collect()
    }

    #[test]
    fn the_line_scan_reads_sections_subsections_and_same_line_keys() {
        let text =
            "[core]\n\tbare = false\n[remote \"origin\"] url = x\n# c\n; c\n[Core]\n\tFsMonitor\n";
        assert_eq!(
            texts(&scan(text)),
            ["core.bare=false", "remote.origin.url=x", "core.fsmonitor="]
        );
        assert_eq!(scan(text)[1].key, "remote.url");
    }

    /// git itself on the tricks that fooled the line scan (skipped, loudly,
    /// where git is not installed).
    #[test]
    fn git_reads_what_git_will_act_on() {
        if !std::path::Path::new(TRUSTED_GIT).is_file() {
            eprintln!("skipped: {TRUSTED_GIT} is not installed");
            return;
        }
        // An inline comment ends the value; a continuation line is part of
        // it; a subsection may hold `=`.
        let text = b"[remote \"origin\"]\n\tpushurl = ./evil.git #@192.0.2.1:x\n[user]\n\tname = a \\\n[remote \"evil.git\"] url = https://192.0.2.1/r\n[remote \"a=b\"]\n\turl = ./x\n";
        let got = texts(&read(text).unwrap());
        assert!(
            got.contains(&"remote.origin.pushurl=./evil.git".to_string()),
            "{got:?}"
        );
        assert!(
            !got.iter().any(|t| t.starts_with("remote.evil.git.")),
            "{got:?}"
        );
        assert!(got.contains(&"remote.a=b.url=./x".to_string()), "{got:?}");
        // What git cannot parse is an error.
        assert!(read(b"[core\n").is_err());
    }

    #[test]
    fn new_settings_that_run_things_are_told_from_everyday_ones() {
        let e = |k: &str, v: &str| entry(k, v);
        let before = vec![
            e("core.bare", "false"),
            e("remote.origin.url", "https://h/r"),
        ];
        let mut after = before.clone();
        after.extend([
            e("core.fsmonitor", "touch /tmp/x"),
            e("remote.origin.fetch", "+refs/*"),
            e("branch.main.remote", "origin"),
            e("diff.x.textconv", "evil"),
        ]);
        assert_eq!(
            new_unusual(&before, &after),
            ["core.fsmonitor=touch /tmp/x", "diff.x.textconv=evil"]
        );
        // A changed value of a setting that runs things is new too.
        let before = vec![e("core.pager", "less")];
        let after = vec![e("core.pager", "evil")];
        assert_eq!(new_unusual(&before, &after), ["core.pager=evil"]);
        assert!(new_unusual(&after, &after).is_empty());
    }

    #[test]
    fn a_new_repository_may_be_a_clone_over_http_and_nothing_more() {
        let e = |k: &str, v: &str| entry(k, v);
        for ok in [
            e("core.bare", "false"),
            e("remote.origin.url", "https://github.com/o/r.git"),
            e("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
            e("branch.main.remote", "origin"),
            e("branch.main.merge", "refs/heads/main"),
        ] {
            assert!(benign_in_a_new_repository(&ok), "{ok:?}");
        }
        for risky in [
            e("remote.origin.url", "/tmp/evil.git"),
            e("remote.origin.url", "file:///tmp/evil.git"),
            e("remote.origin.url", "ssh://localhost/tmp/evil.git"),
            e("remote.origin.pushurl", "ext::sh -c evil"),
            e("remote.origin.url", "https://h/r x"),
            e("core.fsmonitor", "touch /tmp/x"),
            e("core.hookspath", "hooks"),
            e("branch.main.pushremote", "/tmp/evil.git"),
            e("branch.main.remote", "../evil"),
        ] {
            assert!(!benign_in_a_new_repository(&risky), "{risky:?}");
        }
    }

    #[test]
    fn where_git_pushes_may_only_be_what_it_was() {
        let e = |k: &str, v: &str| entry(k, v);
        let before = vec![
            e("remote.origin.url", "https://h/r"),
            e("remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"),
        ];
        for (k, v, unusual) in [
            ("remote.origin.pushurl", "https://h/r", false),
            ("branch.main.remote", "origin", false),
            ("branch.main.pushremote", "origin", false),
            ("remote.origin.pushurl", "evil.git", true),
            ("remote.origin.pushurl", "./evil.git", true),
            ("remote.origin.pushurl", "root@192.0.2.2:/p/evil.git", true),
            ("remote.origin.pushurl", "https://attacker.example/r", true),
            ("remote.up.url", "https://h/other", true),
            ("submodule.s.url", "../s.git", true),
            ("branch.main.remote", "evil.git", true),
            ("branch.main.pushremote", "up", true),
            ("remote.origin.mirror", "true", true),
            ("remote.origin.push", ":refs/heads/main", true),
        ] {
            let mut after = before.clone();
            after.push(e(k, v));
            assert_eq!(!new_unusual(&before, &after).is_empty(), unusual, "{k}={v}");
        }
    }
}
