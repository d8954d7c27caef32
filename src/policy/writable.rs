//! Writable roots: the configured ones as real paths (the project's own
//! narrowing applied), and the per-project caches sbx adds for tools that
//! cannot work without writing theirs.

use std::path::{Path, PathBuf};

use super::lists::{FETCH_CACHES, TOOL_CACHES, TOOL_CACHES_MACOS};
use super::settings::Settings;
use super::{Host, Places};
use crate::config::Source;

/// The writable roots of a run and the warnings about entries left out.
pub(super) struct Roots {
    /// Real paths, shallowest first, none inside another.
    pub paths: Vec<PathBuf>,
    /// The same before those inside another were dropped (a project in
    /// the writable /tmp is one).
    pub asked: Vec<PathBuf>,
    pub warnings: Vec<String>,
}

/// The writable roots of a restricted filesystem. The default `.` never
/// makes home (or one of its ancestors, such as `/`) writable: that is what
/// happens when sbx runs in a directory that is not a project, and it would
/// hand over every dotfile and PATH directory. An explicit `writable =
/// ["~"]` still can.
pub(super) fn roots(s: &Settings, places: &Places, project_given: bool) -> Roots {
    let mut warnings = Vec::new();
    let project = &places.project;
    let unsafe_project = if project_given {
        None
    } else {
        unsafe_default_project(project, &places.home_real, places.host)
    };
    let mut wanted: Vec<PathBuf> = Vec::new();
    for (p, source) in &s.writable {
        let is_default_project = *source == Source::Default && p == project;
        if let Some(why) = unsafe_project.as_ref().filter(|_| is_default_project) {
            warnings.push(format!(
                "{} is not made writable: {why}; cd into a project or pass --project DIR",
                project.display()
            ));
            continue;
        }
        wanted.push(p.clone());
    }
    if places.host.platform == super::Platform::Macos {
        if let Some(t) = places.host.var("TMPDIR").filter(|t| !t.is_empty()) {
            wanted.push(PathBuf::from(t));
        }
    }
    let mut trusted = Vec::new();
    for p in wanted {
        match places.real(&p) {
            Some(r) => trusted.push(r),
            None => warnings.push(format!(
                "writable path {} does not exist; it is not made writable",
                p.display()
            )),
        }
    }
    let mut paths = match &s.project_writable {
        None => trusted,
        Some((paths, file)) => narrowed(s, places, &trusted, paths, file, &mut warnings),
    };
    if paths.iter().any(|p| project.starts_with(p)) {
        paths.extend(worktree_common_dir(project, &places.home_real).map(|d| places.alias(d)));
    }
    Roots {
        asked: paths.clone(),
        paths: outermost(paths),
        warnings,
    }
}

/// When the project is a linked worktree (`.git` is a file naming
/// `COMMON/worktrees/NAME`), git writes what is committed there in the
/// main repository's git directory: its objects, refs, logs, and that
/// worktree's own directory. So that directory is writable with the
/// project; its hooks, config, `commondir` and the other worktrees' files
/// stay read-only like those of any repository in a writable root.
///
/// The `.git` file is project content, so it is trusted only as far as git
/// itself would have written it: the named directory is `worktrees/NAME` of
/// a git directory that its `commondir` leads back to, whose `gitdir` file
/// names this very `.git` file, and the git directory is not home or above.
fn worktree_common_dir(project: &Path, home_real: &Path) -> Option<PathBuf> {
    let dot_git = project.join(".git");
    let meta = std::fs::symlink_metadata(&dot_git).ok()?;
    if !meta.is_file() {
        return None;
    }
    // As git reads it (a name read otherwise could grant the wrong
    // directory).
    let named = crate::integrity::identity::gitdir_named(&dot_git)?;
    let own = super::paths::real(&named)?;
    if own.parent()?.file_name()? != "worktrees" {
        return None;
    }
    let common = own.parent()?.parent()?.to_path_buf();
    let small = |p: PathBuf| {
        crate::integrity::identity::read_regular_file(&p, 4096)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    let commondir = crate::integrity::identity::common_dir_named(&own)?;
    let back = small(own.join("gitdir"))?;
    let leads_back = super::paths::real(&commondir).as_deref() == Some(&common);
    let names_us = super::paths::real(Path::new(back.trim())).as_deref() == Some(&dot_git);
    let plausible = super::runs_later::is_bare_repository(&common)
        && !home_real.starts_with(&common)
        && common.parent().is_some();
    (leads_back && names_us && plausible).then_some(common)
}

/// The project file's `writable`: each entry kept only inside a trusted
/// root. The command line is applied after the project file: its
/// `--writable` paths stay whatever the project narrows.
fn narrowed(
    s: &Settings,
    places: &Places,
    trusted: &[PathBuf],
    paths: &[PathBuf],
    file: &Path,
    warnings: &mut Vec<String>,
) -> Vec<PathBuf> {
    let mut kept: Vec<PathBuf> = s
        .writable
        .iter()
        .filter(|(_, source)| *source == Source::Flags)
        .filter_map(|(p, _)| places.real(p))
        .collect();
    for p in paths {
        let Some(r) = places.real(p) else {
            warnings.push(format!(
                "{}: writable path {} does not exist; it is not made writable",
                file.display(),
                p.display()
            ));
            continue;
        };
        if trusted.iter().any(|t| r.starts_with(t)) {
            kept.push(r);
        } else {
            warnings.push(format!(
                "{}: ignored `writable = [\"{}\"]`: it is not inside a path your own config makes writable (a project file can only narrow the policy; set it in your user config instead)",
                file.display(),
                p.display()
            ));
        }
    }
    kept
}

/// Shallowest first, and none inside another.
fn outermost(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    paths.sort_by_cached_key(|p| p.components().count());
    let mut roots: Vec<PathBuf> = Vec::new();
    for p in paths {
        if !roots.iter().any(|r| p.starts_with(r)) {
            roots.push(p);
        }
    }
    roots
}

/// One of sbx's tool caches: the variable, the directory, and the file in
/// it the variable names (when it names a file).
pub(super) type ToolCache = (String, PathBuf, Option<String>);

/// Caches some tools cannot work without writing (npm, go's build cache,
/// uv): when theirs in the home directory is not writable, they get one of
/// sbx's, kept per project so that what one project's command puts in it
/// reaches no other project's builds. Gives back the writable roots with
/// those caches added (shallowest first) and each cache with its variable.
pub(super) fn with_tool_caches(
    mut writable: Vec<PathBuf>,
    places: &Places,
    network_open: bool,
) -> (Vec<PathBuf>, Vec<ToolCache>) {
    let host: &Host = places.host;
    let mut caches = Vec::new();
    let base = host
        .cache_dir
        .as_ref()
        .and_then(|c| places.real(c))
        .map(|c| tool_cache_base(&c.join("projects"), &places.project))
        // Inside a writable root sbx's cache directory is read-only (it
        // holds sbx's own state), and so would be the caches in it.
        .filter(|b| !writable.iter().any(|w| b.starts_with(w)));
    if let Some(base) = &base {
        let fetch: &[_] = if network_open { FETCH_CACHES } else { &[] };
        let macos: &[_] = match host.platform {
            super::Platform::Macos => TOOL_CACHES_MACOS,
            super::Platform::Linux => &[],
        };
        for (var, name, defaults, file) in TOOL_CACHES.iter().chain(macos).chain(fetch) {
            let writable_now = defaults.iter().any(|rel| {
                let default = places
                    .real(&places.home.join(rel))
                    .unwrap_or_else(|| places.alias(places.home_real.join(rel)));
                writable.iter().any(|w| default.starts_with(w))
            });
            if writable_now || host.var(var).is_some() {
                continue;
            }
            let dir = base.join(name);
            writable.push(dir.clone());
            caches.push((var.to_string(), dir, file.map(str::to_string)));
        }
    }
    writable.sort_by_cached_key(|p| p.components().count());
    (writable, caches)
}

/// A short stable name for a project directory (FNV-1a of its path).
fn project_key(project: &Path) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in project.as_os_str().as_encoded_bytes() {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

/// The file in a project's tool cache directory that names its project.
pub const TOOL_CACHE_OWNER: &str = "PROJECT";

/// The directory of a project's tool caches under `projects`: named after
/// the project's key, and checked against the project it records, so that
/// two projects never share one, even if a command chose a path whose key
/// collides (the key is short and not cryptographic). The first free or
/// matching of `KEY`, `KEY-1`, `KEY-2`, ...
fn tool_cache_base(projects: &Path, project: &Path) -> PathBuf {
    let key = project_key(project);
    let mut n = 0;
    loop {
        let dir = if n == 0 {
            projects.join(&key)
        } else {
            projects.join(format!("{key}-{n}"))
        };
        match std::fs::read(dir.join(TOOL_CACHE_OWNER)) {
            Ok(owner) if owner == project.as_os_str().as_encoded_bytes() => return dir,
            Ok(_) => n += 1,
            Err(_) => return dir,
        }
    }
}

/// Why the default `.` must not make `project` writable, if it must not:
/// the working directory the command was started in decides it, and a
/// command can choose where the next one starts. Home and its ancestors, the
/// hidden directories of home (`~/.config`, `~/.local/bin`, ...), a directory
/// on `PATH`, and outside home any directory that is not a git repository
/// hold what runs later (or everything) rather than a project.
fn unsafe_default_project(project: &Path, home_real: &Path, host: &Host) -> Option<String> {
    if home_real.starts_with(project) {
        return Some("it is your home directory or holds it (not in a project)".into());
    }
    if let Ok(rest) = project.strip_prefix(home_real) {
        let hidden = rest
            .components()
            .next()
            .is_some_and(|c| c.as_os_str().as_encoded_bytes().first() == Some(&b'.'));
        if hidden {
            return Some(
                "it lies in a hidden directory of your home (settings, caches, programs)".into(),
            );
        }
    } else if !project.join(".git").exists() {
        return Some("it is outside your home directory and not a git repository".into());
    }
    let on_path = host.var("PATH").is_some_and(|path| {
        std::env::split_paths(path).any(|d| super::paths::real(&d).as_deref() == Some(project))
    });
    if on_path {
        return Some("it is a directory on PATH".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_caches_of_two_projects_never_share_a_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let projects = tmp.path();
        let a = Path::new("/home/t/a");
        let base = tool_cache_base(projects, a);
        assert_eq!(base, projects.join(project_key(a)));
        std::fs::create_dir_all(&base).unwrap();
        std::fs::write(base.join(TOOL_CACHE_OWNER), "/home/t/a").unwrap();
        assert_eq!(tool_cache_base(projects, a), base);
        // Another project whose key is the same (as a command could arrange
        // with a path of its choosing) gets the next directory.
        std::fs::write(base.join(TOOL_CACHE_OWNER), "/home/t/b").unwrap();
        let other = tool_cache_base(projects, a);
        assert_eq!(other, projects.join(format!("{}-1", project_key(a))));
    }
}
