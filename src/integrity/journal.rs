//! What a run still has to check after its command, written down before the
//! command starts: if sbx dies first (an agent's timeout sends SIGKILL), the
//! next run finds the note and does the post-run sweep in its place, so a
//! "runs later" file planted in the meantime is not taken for one that was
//! always there.
//!
//! One JSON file per run in `CACHE/pending`, named after the process and
//! its start time (so a reused PID is not taken for the run). A run removes
//! its own when its sweep is done; a run that starts takes over the others
//! whose process is gone, by renaming them first (two runs starting at once
//! do not both sweep).
//!
//! An after-the-fact run's note also holds its snapshot (the fingerprints
//! of the paths it copied, and where the copies are: `snapshot-KEY`, which
//! the note's checks remove once its paths are put back, and nothing else
//! does).
//!
//! The notes of the runs still going are read too, by an after-the-fact run
//! about to start ([`live_notes`]): what their commands changed is not to
//! be taken for what was there before its own (see `super::overlap`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::identity::{GitConfigWatch, Identity, Repositories};
use super::snapshot::Snapshot;

/// What one run watches, as written before its command starts. Paths are
/// stored as the hex of their bytes: any path can be written down.
#[derive(Debug, Serialize, Deserialize)]
struct Note {
    /// "Runs later" paths with their identity before the run (`None`:
    /// missing).
    watch: Vec<Watched>,
    /// Git config files with what they set before the run.
    #[serde(default)]
    git_configs: Vec<GitConfigWatch>,
    /// The repositories under the project before the run.
    #[serde(default)]
    repositories: Option<Repositories>,
    /// The repositories in the other writable roots before the run.
    #[serde(default)]
    other_repositories: Vec<Repositories>,
    /// What an after-the-fact run copied, to be put back
    /// ([`super::snapshot`]); none for a run that kept its "runs later"
    /// paths read-only.
    #[serde(default)]
    snapshot: Option<Snapshot>,
}

/// What a run writes in its note.
pub struct Contents<'a> {
    pub watch: &'a [(PathBuf, Option<Identity>)],
    pub git_configs: &'a [GitConfigWatch],
    pub repositories: &'a [&'a Repositories],
    pub snapshot: Option<&'a Snapshot>,
}

/// One watched path and its identity before the run.
#[derive(Debug, Serialize, Deserialize)]
struct Watched {
    #[serde(with = "super::identity::hex_path")]
    path: PathBuf,
    before: Option<Identity>,
}

/// This process's entry in the pending directory; removed when dropped
/// (after the sweep), or left behind if sbx is killed before that.
pub struct Pending(PathBuf);

impl Drop for Pending {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl Pending {
    /// Write the note again with `contents` (an after-the-fact run's,
    /// once its copies are made), whole, in place of the one written.
    pub fn rewrite(&self, contents: &Contents) -> anyhow::Result<()> {
        use anyhow::Context;
        let key = own_key().context("reading /proc/self/stat")?;
        store(&self.0, &key, contents)
    }
}

pub(super) fn dir(cache: &Path) -> PathBuf {
    cache.join("pending")
}

/// Give sbx's own directories back the mode sbx made them with (0700):
/// without a mount to keep them read-only (reduced mode), the command can
/// `chmod` them (Landlock does not rule it), and a check that cannot read
/// its notes or copies must not be what lets a planted file stay.
pub fn reclaim(cache: &Path) {
    use std::os::unix::fs::PermissionsExt;
    // A directory whose mode is 0700 already is left as it is: the same
    // answer without a write to its inode (a chmod changes its change
    // time, and costs a journal entry, seven times a run).
    let own = |path: &Path| {
        let mode = std::fs::symlink_metadata(path)
            .ok()
            .filter(std::fs::Metadata::is_dir)
            .map(|m| m.permissions().mode() & 0o7777);
        if mode.is_some_and(|m| m != 0o700) {
            let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700));
        }
    };
    own(cache);
    let pending = dir(cache);
    own(&pending);
    if let Ok(entries) = std::fs::read_dir(&pending) {
        for e in entries.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("snapshot-") || name.starts_with("copies-") {
                own(&e.path());
            }
        }
    }
}

/// Whether `key` has the shape of a run's key (`PID-START`, digits).
pub fn is_key(key: &str) -> bool {
    let mut parts = key.split('-');
    let digits =
        |p: Option<&str>| p.is_some_and(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    digits(parts.next()) && digits(parts.next()) && parts.next().is_none()
}

/// `PID-STARTTIME` for a live process, from `/proc/PID/stat` (the state is
/// field 3 and the start time field 22, after the command name in
/// parentheses, which may hold spaces). None for a process that is gone,
/// and for one that has died but is not reaped yet (a zombie, state `Z`, or
/// `X` on its way out): a killed sbx whose parent does not wait for it
/// (container init processes, `Popen.kill()` without `wait()`) keeps its
/// `/proc` entry, and it is not doing its checks either.
pub fn process_key(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, after) = stat.rsplit_once(')')?;
    let mut fields = after.split_whitespace();
    if matches!(fields.next()?, "Z" | "X" | "x") {
        return None;
    }
    let start = fields.nth(18)?;
    Some(format!("{pid}-{start}"))
}

/// Wait while the process of `key` (see [`process_key`]) is alive, `limit`
/// at most; whether it is gone.
pub fn wait_until_gone(key: &str, limit: std::time::Duration) -> bool {
    let Some(pid) = key.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
        return true;
    };
    let start = std::time::Instant::now();
    loop {
        if process_key(pid).as_deref() != Some(key) {
            return true;
        }
        if start.elapsed() >= limit {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[cfg(test)]
thread_local! {
    /// A test's stand-in for this process's key (see [`own_key`]): one test
    /// process then holds the notes of two runs.
    pub(super) static TEST_KEY: std::cell::RefCell<Option<String>> =
        const { std::cell::RefCell::new(None) };
}

/// This run's key (`PID-START`), which names its note and its snapshot.
pub(super) fn own_key() -> Option<String> {
    #[cfg(test)]
    if let Some(key) = TEST_KEY.with(|k| k.borrow().clone()) {
        return Some(key);
    }
    this_process_key()
}

/// This process's key, read once: its PID and start time do not change
/// while it runs (each run asked `/proc/self/stat` three times).
pub(crate) fn this_process_key() -> Option<String> {
    static KEY: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    KEY.get_or_init(|| process_key(std::process::id())).clone()
}

/// What another run still going wrote down before its command (see
/// [`live_notes`]).
pub(super) struct Recorded {
    /// Its watched paths, with their identity then (`None`: missing).
    pub watch: Vec<(PathBuf, Option<Identity>)>,
    /// Its git configs with their content then.
    pub git_configs: Vec<GitConfigWatch>,
    /// What it copied, after the fact.
    pub snapshot: Option<Snapshot>,
}

/// The notes of the runs whose sbx is still going, other than this one's:
/// a run's own note, or a dead run's that a live one took over and is
/// checking (its command's changes are being undone). One that cannot be
/// read is left out (a note is renamed into place whole: gone meanwhile).
pub(super) fn live_notes(cache: &Path) -> Vec<Recorded> {
    let mine = own_key().unwrap_or_default();
    let Ok(entries) = std::fs::read_dir(dir(cache)) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let (key, _) = owner(&name)?;
            if key == mine || !alive(&key) {
                return None;
            }
            let text = std::fs::read_to_string(entry.path()).ok()?;
            let note = serde_json::from_str::<Note>(&text).ok()?;
            Some(Recorded {
                watch: note.watch.into_iter().map(|w| (w.path, w.before)).collect(),
                git_configs: note.git_configs,
                snapshot: note.snapshot,
            })
        })
        .collect()
}

/// Write this run's note before its command starts. An error when it
/// cannot be written: the caller refuses the run rather than run it with
/// checks that a killed sbx would leave undone.
pub fn write(cache: &Path, contents: &Contents) -> anyhow::Result<Pending> {
    use anyhow::Context;
    use std::os::unix::fs::DirBuilderExt;
    let key = own_key().context("reading /proc/self/stat")?;
    let dir = dir(cache);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(format!("run-{key}.json"));
    store(&path, &key, contents)?;
    Ok(Pending(path))
}

/// Write a note to `path`: whole, then renamed into place, so that a note
/// is never read half written.
fn store(path: &Path, key: &str, contents: &Contents) -> anyhow::Result<()> {
    use anyhow::Context;
    let repositories = contents.repositories;
    let text = serde_json::to_string(&Note {
        watch: contents
            .watch
            .iter()
            .map(|(path, before)| Watched {
                path: path.clone(),
                before: before.clone(),
            })
            .collect(),
        git_configs: contents.git_configs.to_vec(),
        // All are checked alike; the first keeps the field older notes had.
        repositories: repositories.first().map(|r| (*r).clone()),
        other_repositories: repositories.iter().skip(1).map(|r| (*r).clone()).collect(),
        snapshot: contents.snapshot.cloned(),
    })
    .context("writing down what the run watches")?;
    let partial = path.with_file_name(format!("partial-{key}"));
    std::fs::write(&partial, text).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The process a note's file name belongs to, and the name of the note as
/// its run wrote it: `run-PID-START.json` is its run's; a note renamed to
/// `claimed-PID-START-run-...` by a run that took it over is that run's.
fn owner(name: &str) -> Option<(String, &str)> {
    if name.starts_with("run-") && name.ends_with(".json") {
        let key = name.strip_prefix("run-")?.strip_suffix(".json")?;
        return Some((key.to_string(), name));
    }
    let rest = name.strip_prefix("claimed-")?;
    let mut parts = rest.splitn(3, '-');
    let (pid, start, note) = (parts.next()?, parts.next()?, parts.next()?);
    note.starts_with("run-")
        .then(|| (format!("{pid}-{start}"), note))
}

/// Whether the process `key` (`PID-START`) is still running.
fn alive(key: &str) -> bool {
    key.split('-')
        .next()
        .and_then(|p| p.parse::<u32>().ok())
        .and_then(process_key)
        .is_some_and(|k| k == key)
}

/// Do the checks of every run whose sbx is gone without having done them,
/// then drop its note: each path is checked against the identity its run
/// recorded, and each git config against what it set, as that run would
/// have done. False when something is left for the user to review (a
/// planted path that could not be moved away, new git settings).
pub fn recover(cache: &Path, warn: &dyn Fn(&str)) -> bool {
    reclaim(cache);
    let dir = dir(cache);
    let mine = this_process_key().unwrap_or_default();
    wait_for_guardians(&dir, &mine);
    let (clean, busy) = recover_pass(cache, &mine, true, warn);
    if !busy {
        return clean;
    }
    // A note another live process took over: a guardian that began after
    // the wait above. Its report is shown once it is written.
    wait_for_guardians(&dir, &mine);
    recover_pass(cache, &mine, true, warn).0 && clean
}

/// [`recover`] for a guardian: without waiting for other guardians (two
/// would wait for each other), and leaving the reports to the next run.
pub fn recover_now(cache: &Path, warn: &dyn Fn(&str)) -> bool {
    reclaim(cache);
    let mine = this_process_key().unwrap_or_default();
    recover_pass(cache, &mine, false, warn).0
}

/// One look at the pending directory (see [`recover`]), showing the
/// guardians' reports with `reports`; whether it left nothing to review,
/// and whether another live process is checking a note.
fn recover_pass(cache: &Path, mine: &str, reports: bool, warn: &dyn Fn(&str)) -> (bool, bool) {
    let dir = dir(cache);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return (true, false);
    };
    let (mut clean, mut busy) = (true, false);
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let dead = |key: &str| key != mine && !alive(key);
        // Half written by a run killed before its command started: nothing
        // to check.
        if let Some(key) = name.strip_prefix("partial-") {
            if dead(key) {
                let _ = std::fs::remove_file(entry.path());
            }
            continue;
        }
        // What a guardian's checks said (its run's sbx was killed): shown
        // now, once. Whole once it has its name, even while the guardian
        // that wrote it is still exiting.
        if let Some(key) = name.strip_prefix("report-") {
            if reports && key != mine && !show_report(&entry.path(), warn) {
                clean = false;
            }
            continue;
        }
        // A killed run's private git config copies: never applied (see
        // `copies`), only removed.
        if let Some(key) = name.strip_prefix("copies-") {
            // Only a run's own (`PID-START`); `copies-PER-RUN`, which `sbx
            // profile` names, may be a dry run's, made by hand.
            if is_key(key) && dead(key) {
                let _ = std::fs::remove_dir_all(entry.path());
            }
            continue;
        }
        // A run's own note, or one a run took over and died checking.
        let Some((key, note_name)) = owner(&name) else {
            continue;
        };
        if !dead(&key) {
            busy |= key != mine && name.starts_with("claimed-");
            continue;
        }
        // Claim it: of two runs starting at once, one renames it. Another
        // process claimed it between the listing and here (a guardian,
        // which marked itself checking first): busy, so that the caller
        // waits for its checks rather than go on while they move files.
        let claimed = dir.join(format!("claimed-{mine}-{note_name}"));
        if std::fs::rename(entry.path(), &claimed).is_err() {
            busy = true;
            continue;
        }
        if !check_note(&claimed, cache, warn) {
            clean = false;
        }
        let _ = std::fs::remove_file(&claimed);
    }
    (clean, busy)
}

/// Make the checks of a dead run's note, as that run would have; false
/// when they leave something to review.
fn check_note(claimed: &Path, cache: &Path, warn: &dyn Fn(&str)) -> bool {
    warn(
        "an earlier sbx run ended before it could check what its command left behind; checking now",
    );
    let note = std::fs::read_to_string(claimed)
        .ok()
        .and_then(|t| serde_json::from_str::<Note>(&t).ok());
    let Some(note) = note else {
        warn(&format!(
            "its note {} cannot be read: look for \"runs later\" files its command may have left (.envrc, .vscode, .git/hooks, ...)",
            claimed.display()
        ));
        return false;
    };
    let mut clean = true;
    // In the order of `Checks::verify`.
    let mut rebuilt = Vec::new();
    if let Some(snapshot) = &note.snapshot {
        let settled = snapshot.finish_killed(warn);
        clean &= settled.clean;
        rebuilt = settled.rebuilt;
    }
    for w in &note.watch {
        if !super::sweep(&w.path, w.before.as_ref(), warn) {
            clean = false;
        }
    }
    if !super::gitconfig::check_git_configs(&note.git_configs, warn) {
        clean = false;
    }
    for r in note.repositories.iter().chain(&note.other_repositories) {
        if !super::repositories::check_new_repositories(r, Some(cache), &rebuilt, warn) {
            clean = false;
        }
    }
    clean
}

/// A guardian making a killed run's checks (`run/linux/guardian.rs`): its
/// `checking-KEY` file, removed when dropped, once its report is written.
pub struct Checking(PathBuf);

impl Drop for Checking {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Say that this process (a guardian) is making a killed run's checks, so
/// that a run starting meanwhile waits for them and shows their report.
pub fn begin_checking(cache: &Path) -> anyhow::Result<Checking> {
    use anyhow::Context;
    let key = this_process_key().context("reading /proc/self/stat")?;
    let path = dir(cache).join(format!("checking-{key}"));
    std::fs::write(&path, "").with_context(|| format!("writing {}", path.display()))?;
    Ok(Checking(path))
}

/// Wait (ten seconds at most) while a live guardian makes a killed run's
/// checks: the run starting now then shows what they found, and refuses
/// to run its command if they left something to review.
fn wait_for_guardians(dir: &Path, mine: &str) {
    let start = std::time::Instant::now();
    loop {
        let busy = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                match name.strip_prefix("checking-") {
                    Some(key) if key != mine && alive(key) => true,
                    Some(key) if key != mine => {
                        let _ = std::fs::remove_file(e.path());
                        false
                    }
                    _ => false,
                }
            });
        if !busy || start.elapsed() > std::time::Duration::from_secs(10) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// Leave what a guardian's checks said (`run/linux/guardian.rs`) for the
/// next run to show: `clean` says whether they left anything to review.
pub fn leave_report(cache: &Path, clean: bool, said: &[String]) -> anyhow::Result<()> {
    use anyhow::Context;
    let key = this_process_key().context("reading /proc/self/stat")?;
    let text = serde_json::to_string(&Report {
        clean,
        said: said.to_vec(),
    })?;
    let path = dir(cache).join(format!("report-{key}"));
    let partial = dir(cache).join(format!("partial-{key}"));
    std::fs::write(&partial, text).with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// What a guardian's checks said.
#[derive(Debug, Serialize, Deserialize)]
struct Report {
    clean: bool,
    said: Vec<String>,
}

/// Show a guardian's report and remove it; false when it left something
/// to review (or cannot be read).
fn show_report(path: &Path, warn: &dyn Fn(&str)) -> bool {
    let report = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<Report>(&t).ok());
    let _ = std::fs::remove_file(path);
    let Some(report) = report else {
        warn(&format!(
            "the report of an earlier run's checks, {}, cannot be read",
            path.display()
        ));
        return false;
    };
    warn("an earlier sbx run was killed; its checks were made at once, and said:");
    for text in &report.said {
        warn(text);
    }
    report.clean
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A note of `watch` alone.
    fn write_watch(cache: &Path, watch: &[(PathBuf, Option<Identity>)]) -> Pending {
        let contents = Contents {
            watch,
            git_configs: &[],
            repositories: &[],
            snapshot: None,
        };
        write(cache, &contents).unwrap()
    }

    /// Only `PID-START` names a run: a copies directory is never looked
    /// for under any other name (`copies-PER-RUN` is a dry run's).
    #[test]
    fn a_runs_key_is_two_numbers() {
        assert!(is_key("123-456"));
        for other in [
            "PER-RUN", "123", "123-", "-456", "1-2-3", "1/../2-3", "12-3a", "",
        ] {
            assert!(!is_key(other), "{other}");
        }
    }

    #[test]
    fn a_note_left_by_a_dead_run_is_swept_once() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let planted = tmp.path().join(".envrc");
        let watch = vec![(planted.clone(), None)];
        // This run's own note is not touched while it runs.
        let pending = write_watch(&cache, &watch);
        std::fs::write(&planted, "evil").unwrap();
        assert!(recover(&cache, &|_| {}));
        assert!(planted.exists());
        // A note of a process that is gone (PID 0 never names a run).
        std::fs::rename(&pending.0, dir(&cache).join("run-0-1.json")).unwrap();
        std::mem::forget(pending);
        let said = std::cell::RefCell::new(Vec::new());
        assert!(recover(&cache, &|t| said.borrow_mut().push(t.to_string())));
        assert!(!planted.exists());
        assert!(tmp.path().join(".envrc.sbx-blocked").exists());
        assert!(said.borrow().iter().any(|t| t.contains("earlier sbx run")));
        assert_eq!(std::fs::read_dir(dir(&cache)).unwrap().count(), 0);
        // Nothing left to do the second time.
        std::fs::write(&planted, "the user's own, made after").unwrap();
        assert!(recover(&cache, &|_| {}));
        assert!(planted.exists());
    }

    #[test]
    fn a_running_sbx_keeps_its_note() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let planted = tmp.path().join(".envrc");
        let pending = write_watch(&cache, &[(planted.clone(), None)]);
        let name = pending
            .0
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert_eq!(
            name,
            format!("run-{}.json", process_key(std::process::id()).unwrap())
        );
        // Another process that is alive: its note stays, its paths untouched.
        let mut other = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let key = process_key(other.id()).unwrap();
        std::fs::rename(&pending.0, dir(&cache).join(format!("run-{key}.json"))).unwrap();
        std::mem::forget(pending);
        std::fs::write(&planted, "being written by that run's command").unwrap();
        assert!(recover(&cache, &|_| {}));
        assert!(planted.exists());
        assert_eq!(std::fs::read_dir(dir(&cache)).unwrap().count(), 1);
        // Once it is dead its note is acted on, even before it is reaped
        // (a zombie keeps its /proc entry and its start time).
        other.kill().unwrap();
        let stat = format!("/proc/{}/stat", other.id());
        let start = std::time::Instant::now();
        while !std::fs::read_to_string(&stat).unwrap().contains(") Z ") {
            assert!(start.elapsed() < std::time::Duration::from_secs(60));
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(recover(&cache, &|_| {}));
        assert!(!planted.exists());
        other.wait().unwrap();
    }

    #[test]
    fn any_path_can_be_written_down() {
        use std::os::unix::ffi::OsStrExt;
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        // Not UTF-8: a name the command chose (a submodule under .git/modules).
        let planted = tmp
            .path()
            .join(std::ffi::OsStr::from_bytes(b"sub\xff\n.envrc"));
        let pending = write_watch(&cache, &[(planted.clone(), None)]);
        std::fs::rename(&pending.0, dir(&cache).join("run-0-1.json")).unwrap();
        std::mem::forget(pending);
        std::fs::write(&planted, "evil").unwrap();
        assert!(recover(&cache, &|_| {}));
        assert!(!planted.exists());
    }

    #[test]
    fn a_note_taken_over_by_a_run_that_died_is_checked_again() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let planted = tmp.path().join(".envrc");
        let pending = write_watch(&cache, &[(planted.clone(), None)]);
        std::fs::rename(&pending.0, dir(&cache).join("claimed-0-1-run-0-2.json")).unwrap();
        std::mem::forget(pending);
        std::fs::write(&planted, "evil").unwrap();
        assert!(recover(&cache, &|_| {}));
        assert!(!planted.exists());
        assert_eq!(std::fs::read_dir(dir(&cache)).unwrap().count(), 0);
    }

    #[test]
    fn an_unreadable_note_is_reported() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        std::fs::create_dir_all(dir(&cache)).unwrap();
        std::fs::write(dir(&cache).join("run-0-1.json"), "{\"watch\": [").unwrap();
        let said = std::cell::RefCell::new(Vec::new());
        assert!(!recover(&cache, &|t| said.borrow_mut().push(t.to_string())));
        assert!(said.borrow().iter().any(|t| t.contains("cannot be read")));
        // Said once.
        assert!(recover(&cache, &|_| {}));
    }

    #[test]
    fn an_unchanged_path_is_left_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let kept = tmp.path().join(".envrc");
        std::fs::write(&kept, "mine").unwrap();
        let watch = vec![(kept.clone(), Identity::of(&kept))];
        let pending = write_watch(&cache, &watch);
        std::fs::rename(&pending.0, dir(&cache).join("run-0-1.json")).unwrap();
        std::mem::forget(pending);
        assert!(recover(&cache, &|_| {}));
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "mine");
    }
}
