//! What the command may not read: the built-in credential list, agents'
//! tokens, `deny_read`, and the project's `.env` files (with directories the
//! scan could not list).

use std::path::{Path, PathBuf};

use super::lists::{AGENT_TOKENS, CREDENTIALS, CREDENTIALS_MACOS};
use super::paths::{kind_of, real};
use super::settings::Settings;
use super::{Credential, Kind, Places, Platform};
use crate::config::FsSetting;
use crate::envscan::env_files_in;
use crate::integrity::identity::Repositories;

/// Credentials: the built-in list plus `deny_read`, at written and real path.
pub(super) fn listed(s: &Settings, places: &Places, writable: &[PathBuf]) -> Vec<Credential> {
    let home = &places.home;
    let mut paths: Vec<PathBuf> = CREDENTIALS.iter().map(|c| home.join(c)).collect();
    if places.host.platform == Platform::Macos {
        paths.extend(CREDENTIALS_MACOS.iter().map(|c| home.join(c)));
    }
    paths.extend(hidden_agent_tokens(s, places, writable));
    // The home of the user database too, when HOME names another: there
    // lie the user's real keys (its agents' tokens are granted nowhere).
    // Those that exist: that home is not the one the command works in, and
    // a profile stays the same wherever HOME points at a fresh directory.
    if let Some(account) = &places.host.account_home {
        let mut theirs: Vec<PathBuf> = CREDENTIALS.iter().map(|c| account.join(c)).collect();
        if places.host.platform == Platform::Macos {
            theirs.extend(CREDENTIALS_MACOS.iter().map(|c| account.join(c)));
        }
        theirs.extend(AGENT_TOKENS.iter().map(|(_, token)| account.join(token)));
        paths.extend(theirs.into_iter().filter(|p| p.symlink_metadata().is_ok()));
    }
    paths.extend(s.deny_read.iter().cloned());
    let mut credentials = Vec::new();
    for written in paths {
        let r = real(&written);
        let kind = r.as_deref().map_or(Kind::Missing, kind_of);
        let credential = Credential {
            written: places.alias(written),
            real: r.map(|r| places.alias(r)),
            kind,
        };
        if !credentials.contains(&credential) {
            credentials.push(credential);
        }
    }
    credentials
}

/// The agents' tokens to hide: all but those whose agent directory (or the
/// directory in it holding the token) the user's own configuration or flags
/// made writable (see [`AGENT_TOKENS`]).
fn hidden_agent_tokens(s: &Settings, places: &Places, writable: &[PathBuf]) -> Vec<PathBuf> {
    let home = &places.home;
    let user_roots: Vec<PathBuf> = s
        .writable
        .iter()
        .filter_map(|(p, _)| places.real(p))
        .collect();
    let mut hidden = Vec::new();
    for (dir, token) in AGENT_TOKENS {
        let agent_dir = places
            .real(&home.join(dir))
            .unwrap_or_else(|| home.join(dir));
        let token_path = agent_dir.join(
            Path::new(token)
                .strip_prefix(dir)
                .unwrap_or(Path::new(token)),
        );
        let given = writable.iter().any(|w| {
            w.starts_with(&agent_dir) && token_path.starts_with(w) && user_roots.contains(w)
        });
        if !given {
            hidden.push(home.join(token));
        }
    }
    hidden
}

/// What the walk of the project found: the `.env` files a run masks, the
/// directories it could not list, and the repositories.
pub(super) struct EnvFiles {
    /// Real paths, sorted.
    pub files: Vec<PathBuf>,
    pub unreadable: Vec<PathBuf>,
    /// Every `.git` entry under the scan root (its own included), sorted.
    pub git_entries: Vec<PathBuf>,
    /// The bare repositories under the scan root, sorted.
    pub bare: Vec<PathBuf>,
    /// Where the walk started (none when it did not run).
    pub scan_root: Option<PathBuf>,
    /// Files masked because a `.env` link led to them in an earlier run,
    /// and no link does now, each with the list that remembers it.
    pub remembered: Vec<(PathBuf, PathBuf)>,
}

impl EnvFiles {
    /// A directory the scan could not list may hold a `.env`: it is masked
    /// whole, like a credential directory.
    pub fn unreadable_dirs(&self) -> impl Iterator<Item = Credential> + '_ {
        self.unreadable.iter().map(|dir| {
            // A path too long to mount on (a chain the command made, past
            // PATH_MAX) is masked at its deepest ancestor that is not.
            let dir = dir
                .ancestors()
                .find(|a| a.as_os_str().len() < MOUNTABLE_PATH)
                .unwrap_or(dir)
                .to_path_buf();
            Credential {
                written: dir.clone(),
                real: Some(dir),
                kind: Kind::Dir,
            }
        })
    }
}

/// The longest path masked as it is (PATH_MAX is 4096, with room to spare).
const MOUNTABLE_PATH: usize = 4000;

/// The most files kept masked from memory (see [`env_files`]): past it the
/// run is refused, so that planted links cannot push a real one out.
const MAX_REMEMBERED: usize = 256;

/// `.env` files in the project. A `.env` symlink may point outside the
/// project (`.env -> ~/secrets/app.env`): its target is masked too when it
/// is the user's own file outside the system directories. A target owned by
/// someone else or in /usr, /lib, /etc, ... is left alone, or the command
/// could plant `.env -> /usr/lib/libc.so.6` and break every later sandbox;
/// such files are readable by their own path anyway.
/// The scan starts at the outermost repository around the project (below
/// home): a `.git` planted in a subdirectory must not move the project root
/// down and leave a `.env` above it unmasked.
pub(super) fn env_files(places: &Places, early: crate::envscan::Early) -> anyhow::Result<EnvFiles> {
    if !places.host.scan_env_files {
        return Ok(EnvFiles {
            files: Vec::new(),
            unreadable: Vec::new(),
            git_entries: Vec::new(),
            bare: Vec::new(),
            scan_root: None,
            remembered: Vec::new(),
        });
    }
    let scan_root = super::paths::outermost_repository(&places.project, &places.homes());
    let cache = places.host.cache_dir.as_deref();
    let found = crate::envscan::walk_asked(&scan_root, cache, early);
    let kept = |p: &PathBuf| p.starts_with(&scan_root) || is_users_own_file(p);
    let mut files: Vec<PathBuf> = found.env_files.into_iter().filter(kept).collect();
    files.extend(above(&scan_root, &places.home_real));
    let mut unreadable = found.unreadable;
    let mut remembered = remembered_from(cache, &scan_root, &files, &kept)?;
    if unreached(&scan_root, &places.project) {
        // The project's own files, which that walk skips (remembered under
        // the name of this walk's root); its repositories are walked as
        // another writable root's (`other_repositories`).
        let own_root = own_root(&scan_root, &places.project);
        let own = crate::envscan::walk(&own_root, cache);
        let mut own_files: Vec<PathBuf> = own.env_files.into_iter().filter(kept).collect();
        // And those in the directories above it (the pruned ones too).
        own_files.extend(above(&own_root, &places.home_real));
        remembered.extend(remembered_from(cache, &own_root, &own_files, &kept)?);
        files.extend(own_files);
        unreadable.extend(own.unreadable);
        unreadable.sort();
        unreadable.dedup();
    }
    files.extend(remembered.iter().map(|(file, _)| file.clone()));
    // Never sbx itself nor a program on PATH: a link planted to one would
    // break every later run.
    if !files.is_empty() {
        let (sbx, path_dirs) = runs_here(places);
        files.retain(|f| {
            sbx.as_deref() != Some(f.as_path())
                && !f.parent().is_some_and(|d| path_dirs.iter().any(|p| p == d))
        });
    }
    files.sort();
    files.dedup();
    Ok(EnvFiles {
        files,
        unreadable,
        git_entries: found.git_entries,
        bare: found.bare,
        scan_root: Some(scan_root),
        remembered,
    })
}

/// The files masked in earlier runs of the walk from `root` that this
/// walk did not find, as they still are (with the list that remembers
/// them); `files` (this walk's) are remembered for later runs with them.
/// Every file masked is remembered while it exists: one found only
/// through a `.env` link (a file outside, in a pruned directory, not named
/// `.env`, or a link above the project) would otherwise come out of hiding
/// once the command removes the link or moves it where the walk does not
/// look.
fn remembered_from(
    cache: Option<&Path>,
    root: &Path,
    files: &[PathBuf],
    kept: &dyn Fn(&PathBuf) -> bool,
) -> anyhow::Result<Vec<(PathBuf, PathBuf)>> {
    let Some(cache) = cache else {
        return Ok(Vec::new());
    };
    let targets = crate::envscan::LinkedTargets::read(cache, root);
    let list = targets.file().to_path_buf();
    let mut remembered = Vec::new();
    let found: std::collections::HashSet<&PathBuf> = files.iter().collect();
    for old in targets.paths() {
        if found.contains(&old) {
            continue;
        }
        match std::fs::symlink_metadata(&old) {
            // Gone (or no longer a file): forgotten.
            Err(e) if super::paths::nothing_there(&e) => continue,
            Ok(m) if !m.is_file() => continue,
            // A file, or what it is cannot be told now (a directory on
            // its way made unreadable): still masked.
            _ => {}
        }
        if kept(&old) {
            remembered.push((old, list.clone()));
        }
    }
    if remembered.len() > MAX_REMEMBERED {
        anyhow::bail!(
            "{} files are kept masked because .env links led to them in earlier runs, more than the {MAX_REMEMBERED} sbx keeps; the command was not run (remove the lines of files you do not need hidden from {})",
            remembered.len(),
            list.display()
        );
    }
    let mut all: Vec<PathBuf> = files
        .iter()
        .chain(remembered.iter().map(|(file, _)| file))
        .cloned()
        .collect();
    all.sort();
    all.dedup();
    targets.remember(&all);
    Ok(remembered)
}

/// The files never masked: sbx's own executable, and the directories of
/// `PATH` (the programs the sandbox runs), by real path. Resolved only when
/// there is something to mask, once per run.
fn runs_here(places: &Places) -> (Option<PathBuf>, Vec<PathBuf>) {
    let sbx = places.host.self_exe.as_deref().and_then(super::paths::real);
    let path_dirs = places
        .host
        .var("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .filter_map(|d| super::paths::real(&d))
                .collect()
        })
        .unwrap_or_default();
    (sbx, path_dirs)
}

/// Whether the walk from `scan_root` leaves `dir` out: `dir`, or a
/// directory on the way down to it, bears a name the walk prunes, as a
/// project in `.venv/src/PKG` (pip's editable installs from git) or in
/// `node_modules/dep` of an outer repository does.
fn unreached(scan_root: &Path, dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    dir.strip_prefix(scan_root).is_ok_and(|rest| {
        rest.components()
            .any(|c| crate::envscan::is_pruned(c.as_os_str().as_bytes()))
    })
}

/// Where pip clones the repositories of editable installs from git:
/// `.venv/src` and `venv/src` of the scan root, of the project, and of
/// each directory between the working directory and them (each clone a
/// working tree there). The walk prunes them, but git (and an editor's
/// git, which does not skip them) runs a clone's hooks and config when it
/// enters it.
pub(super) fn clone_dirs(scan_root: Option<&Path>, project: &Path, cwd: &Path) -> Vec<PathBuf> {
    let top = scan_root.unwrap_or(project);
    let mut bases: Vec<&Path> = vec![top, project];
    bases.extend(cwd.ancestors().take_while(|d| d.starts_with(top)));
    // Usually one and the same directory: looked at once.
    let mut dirs: Vec<PathBuf> = Vec::new();
    for base in bases {
        for venv in [".venv", "venv"] {
            let src = base.join(venv).join("src");
            if !dirs.contains(&src) {
                dirs.push(src);
            }
        }
    }
    dirs
}

/// The repositories found where pip clones ([`clone_dirs`]).
#[derive(Debug, Default)]
pub(crate) struct Clones {
    /// Their `.git` entries (of any type, as the walk counts them), sorted:
    /// the clones', and those of the environment and its `src` when they
    /// are repositories themselves (git run anywhere below enters those).
    pub gits: Vec<PathBuf>,
    /// The `src` directories that exist but cannot be listed: what they
    /// hold is unknown (after a run, they are opened to look).
    pub unlistable: Vec<PathBuf>,
}

/// What [`clone_dirs`] hold: two failed system calls per environment name
/// where there is none.
pub(crate) fn clone_gits(dirs: &[PathBuf]) -> Clones {
    let mut found = Clones::default();
    let mut note = |git: PathBuf| {
        if std::fs::symlink_metadata(&git).is_ok() {
            found.gits.push(git);
        }
    };
    let mut unlistable = Vec::new();
    for dir in dirs {
        if let Some(venv) = dir.parent() {
            note(venv.join(".git"));
        }
        let entries = match std::fs::read_dir(dir) {
            Ok(entries) => entries,
            Err(e) if super::paths::nothing_there(&e) => continue,
            Err(_) => {
                unlistable.push(dir.clone());
                continue;
            }
        };
        note(dir.join(".git"));
        for tree in entries.flatten() {
            note(tree.path().join(".git"));
        }
    }
    found.unlistable = unlistable;
    found.gits.sort();
    found.gits.dedup();
    found
}

/// Where the walk of a project the walk from `scan_root` leaves out
/// starts: the outermost repository around it below the last pruned name
/// on the way, as [`super::paths::outermost_repository`] finds it below
/// home, so that a repository in a subdirectory of a checkout in
/// `.venv/src` does not leave that checkout's other `.env` files out.
fn own_root(scan_root: &Path, project: &Path) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    let mut top = project.to_path_buf();
    for dir in project.ancestors() {
        let pruned = dir
            .file_name()
            .is_some_and(|n| crate::envscan::is_pruned(n.as_bytes()));
        if pruned || dir == scan_root || !dir.starts_with(scan_root) {
            break;
        }
        if super::paths::exists(&dir.join(".git")) {
            top = dir.to_path_buf();
        }
    }
    top
}

/// The repositories in the writable roots the project's walk does not
/// cover (`--writable ~/src`, or the project itself inside a directory
/// that walk prunes): each root walked the same way (from the walk's
/// cache), for its `.git` entries. Not the system's `/tmp` (shared
/// with every user and every tool: its content is not the user's
/// repositories), not home or a directory above it (the whole home walked
/// on every run), not sbx's own tool caches, not a git directory.
pub(super) fn other_repositories(
    places: &Places,
    writable: &[PathBuf],
    scan_root: Option<&Path>,
) -> Vec<Repositories> {
    let Some(scan_root) = scan_root.filter(|_| places.host.scan_env_files) else {
        return Vec::new();
    };
    let cache = places.host.cache_dir.as_deref();
    writable
        .iter()
        .filter(|w| !w.starts_with(scan_root) || unreached(scan_root, w))
        .filter(|w| !places.home_real.starts_with(w))
        .filter(|w| !cache.is_some_and(|c| w.starts_with(c)))
        .filter(|w| !matches!(w.to_str(), Some("/tmp" | "/private/tmp" | "/var/tmp")))
        .filter(|w| !shared_scratch(w))
        // A git directory made writable (a linked worktree's main one) is
        // protected as a repository already; nothing to find inside.
        .filter(|w| !w.components().any(|c| c.as_os_str() == ".git"))
        .map(|root| walked(root, cache))
        .collect()
}

/// The repositories under `root`, as a walk finds them (`cache`: sbx's
/// cache directory, never walked).
pub(crate) fn walked(root: &Path, cache: Option<&Path>) -> Repositories {
    let found = crate::envscan::walk_repositories(root, cache);
    Repositories {
        scan_root: root.to_path_buf(),
        modules: super::runs_later::module_dirs(&found.git_entries),
        indexes: Repositories::index_identities(&found.git_entries),
        git_entries: found.git_entries,
        unreadable: found.unreadable,
        bare: found.bare,
        clone_dirs: Vec::new(),
    }
}

/// A directory every user may write in, sticky like `/tmp` (`/dev/shm`, a
/// team's scratch directory): another user could fill it with repositories.
fn shared_scratch(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(dir).is_ok_and(|m| m.permissions().mode() & 0o1002 == 0o1002)
}

/// The most repositories of one other writable root whose hooks and config
/// are kept read-only: each costs bubblewrap mounts, and a few hundred made
/// every run take seconds.
pub(super) const MAX_OTHER_REPOSITORIES: usize = 64;

/// dotenv loaders also look in the directories above the project
/// (python-dotenv's find_dotenv walks up): their `.env` files, up to and
/// including home, are masked too. A few directory listings.
fn above(scan_root: &Path, home_real: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for dir in scan_root.ancestors().skip(1) {
        if dir == Path::new("/") {
            break;
        }
        for name in env_files_in(dir) {
            if let Ok(real) = std::fs::canonicalize(dir.join(name)) {
                if real.is_file() && (real.starts_with(dir) || is_users_own_file(&real)) {
                    found.push(real);
                }
            }
        }
        if dir == home_real {
            break;
        }
    }
    found
}

/// The placeholder bound over credential files: in sbx's cache, unless
/// that lies where some sandbox could write (then it could be swapped for
/// a link to a secret between the check and the mount): /dev/null then,
/// which hides the content just as well, only readable as empty.
pub(super) fn placeholder(places: &Places, writable: &[PathBuf], fs: FsSetting) -> PathBuf {
    match places.host.cache_dir.as_deref().and_then(real) {
        Some(dir)
            if fs == FsSetting::Restricted && !writable.iter().any(|w| dir.starts_with(w)) =>
        {
            dir.join("empty")
        }
        _ => PathBuf::from("/dev/null"),
    }
}

/// A regular file owned by the user running sbx, outside the system
/// directories (a `.env` symlink target worth masking).
fn is_users_own_file(p: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    const SYSTEM: &[&str] = &[
        "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/boot", "/nix",
        "/proc", "/sys", "/dev", "/snap",
    ];
    !SYSTEM.iter().any(|s| p.starts_with(s))
        && std::fs::metadata(p)
            .is_ok_and(|m| m.is_file() && m.uid() == nix::unistd::geteuid().as_raw())
}
