//! "Runs later" paths: files inside a writable root that something on the
//! host runs or reads as instructions after the command is gone (git hooks
//! and config, editor and agent settings, shell start-up files, sbx's own
//! files). Each is made read-only, the directories above it are pinned so it
//! cannot be renamed away, and its identity is recorded so that one created
//! or replaced during the run is found afterwards.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};

use super::lists::{HOME_PROTECTED, PROJECT_PROTECTED};
use super::paths::{kind_of, lstat, real};
use super::settings::{ConfigFiles, Settings};
use super::{GitConfigWatch, Identity, Kind, Places, Protected};

/// What this step decides.
#[derive(Default)]
pub(super) struct RunsLater {
    /// Shallowest first.
    pub protected: Vec<Protected>,
    /// Directories between a writable root and a protected path or a masked
    /// `.env`, shallowest first.
    pub pins: Vec<PathBuf>,
    /// Symbolic links in a writable root that git passes through to reach
    /// a protected path (or that are one), each mounted onto itself by the
    /// inner stage so that it cannot be pointed elsewhere during the run.
    pub links: Vec<PathBuf>,
    pub git_configs: Vec<GitConfigWatch>,
    layout: GitLayout,
    /// What `pins` holds, to look up: a tree with hundreds of `.env`
    /// files has thousands of directories to pin, and searching the list
    /// for each made resolution quadratic (120 ms with 500).
    pinned: HashSet<PathBuf>,
}

/// The `.git` entries of the project and of the other repositories in
/// writable roots, and their git directories (submodules' included): a
/// missing `hooks` or `config` directly inside one is created before the run.
#[derive(Default)]
struct GitLayout {
    gits: Vec<PathBuf>,
    git_dirs: Vec<PathBuf>,
}

impl RunsLater {
    /// The "runs later" paths of a restricted filesystem.
    /// The "runs later" paths of a restricted filesystem: the project's,
    /// home's (when writable) and sbx's own. Nothing here writes anything,
    /// so a refusal (a path both writable and kept read-only) comes before
    /// the walk of the project writes its cache.
    pub fn find(
        files: &ConfigFiles,
        s: &Settings,
        places: &Places,
        writable: &[PathBuf],
    ) -> Result<RunsLater> {
        let (mut candidates, layout) = git_candidates(places)?;
        if let Some(p) = &files.project_path {
            candidates.push(p.clone());
        }
        // Only those inside a writable root count (home itself, or for
        // example a writable ~/.config).
        candidates.extend(HOME_PROTECTED.iter().map(|r| places.home.join(r)));
        // Listing the Python versions costs a few directory reads: only
        // when some writable root can hold a user site.
        let site_roots = [places.home.join(".local/lib"), places.home.join("Library")];
        let sites_writable = site_roots.iter().any(|d| {
            let d = real(d).unwrap_or_else(|| d.clone());
            writable
                .iter()
                .any(|w| d.starts_with(w) || w.starts_with(&d))
        });
        if sites_writable {
            candidates.extend(python_user_sites(&places.home));
        }
        candidates.extend(path_dirs_in_home(places));
        candidates.push(files.user_path.clone());
        candidates.extend(files.explicit_path.iter().cloned());
        candidates.extend(places.host.cache_dir.iter().cloned());
        candidates.extend(s.deny_write.iter().cloned());
        let mut later = RunsLater::default();
        later.add_all(candidates, layout, places, writable)?;
        Ok(later)
    }

    /// The other repositories in writable roots, protected like the
    /// project's own: `nested` (their roots, as the walk of the project
    /// found them: nested at any depth, submodule checkouts, linked
    /// worktrees) and those a writable root is or holds at its top.
    pub fn add_repositories(
        &mut self,
        nested: &[PathBuf],
        bare: &[PathBuf],
        places: &Places,
        writable: &[PathBuf],
    ) -> Result<()> {
        // Each as (its git directory or `.git` entry, its working tree; a
        // bare repository is both).
        let mut others: Vec<(PathBuf, PathBuf)> =
            nested.iter().map(|r| (r.join(".git"), r.clone())).collect();
        others.extend(bare.iter().map(|b| (b.clone(), b.clone())));
        others.extend(writable_git_dirs(writable));
        others.retain(|(_, tree)| *tree != places.project);
        others.sort();
        others.dedup();
        if others.len() > MAX_SUBMODULES {
            bail!(
                "{}: more than {MAX_SUBMODULES} git repositories in writable places, whose hooks and config sbx cannot all keep read-only; the command was not run (remove those you do not use)",
                places.project.display()
            );
        }
        let mut layout = std::mem::take(&mut self.layout);
        let mut candidates = Vec::new();
        for (git, tree) in &others {
            repository_candidates(git, tree, &places.home, &mut candidates, &mut layout)?;
        }
        self.add_all(candidates, layout, places, writable)
    }

    /// Protect each candidate inside a writable root; keep the layout for
    /// the candidates added later.
    fn add_all(
        &mut self,
        candidates: Vec<PathBuf>,
        layout: GitLayout,
        places: &Places,
        writable: &[PathBuf],
    ) -> Result<()> {
        let roots = super::paths::Roots::new(writable.iter().map(PathBuf::as_path));
        for c in candidates {
            self.add(&c, &layout, places, &roots)?;
        }
        self.layout = layout;
        self.pins.sort_by_cached_key(|p| p.components().count());
        self.protected
            .sort_by_cached_key(|p| p.path.components().count());
        Ok(())
    }

    /// Every directory between a writable root and a masked path (a `.env`,
    /// a credential, a `deny_read` entry) becomes a mount point of itself:
    /// renaming one (say to `node_modules`, which the scan prunes, or
    /// `secrets/` to `s2/` for a path the configuration names) would
    /// otherwise leave the file unmasked in the next run.
    pub fn pin_masked(&mut self, masked: &[PathBuf], writable: &[PathBuf]) {
        for file in masked {
            if let Some(root) = writable.iter().find(|w| file.starts_with(w)) {
                pin_parents(&mut self.pins, &mut self.pinned, file, root, false);
            }
        }
        self.pins.sort_by_cached_key(|p| p.components().count());
    }

    /// Protect one candidate, if it lies inside a writable root.
    fn add(
        &mut self,
        c: &Path,
        layout: &GitLayout,
        places: &Places,
        roots: &super::paths::Roots<'_>,
    ) -> Result<()> {
        let in_writable = |p: &Path| roots.find(p).map(Path::to_path_buf);
        let meta = super::paths::lstat_result(c);
        if meta
            .as_ref()
            .is_err_and(|e| *e == std::io::ErrorKind::NotFound)
        {
            // Resolving it later costs no second look.
            super::paths::note_missing(c);
        }
        // A link on the way to a protected path (`lib/cfg -> cfgA` for
        // `lib/cfg/config`) could be pointed elsewhere for the next run:
        // each is watched like a protected link.
        for place in links_on_the_way(c, places) {
            if let Some(root) = in_writable(&place) {
                self.watch_link(place, &root);
            }
        }
        // A protected path that is itself a symlink living in a writable
        // root cannot be mounted over (a mount follows the link), and the
        // command could replace the link whatever it points to: it is
        // watched by the identity of the link itself and moved aside
        // after the run if replaced.
        if meta.is_ok_and(|m| m.file_type().is_symlink()) {
            let Some(place) = link_place(c, places) else {
                return Ok(());
            };
            if let Some(root) = in_writable(&place) {
                self.watch_link(place, &root);
            }
            // And what it points to is protected like any other path
            // (`.git/hooks -> ../githooks` keeps the hooks in the tree),
            // except a linked `.git` itself: git must write its objects
            // and refs there; its hooks and config are candidates of
            // their own.
            if layout.gits.iter().any(|g| g == c) {
                return Ok(());
            }
        }
        let (resolved, followed) = resolved_place(c, places);
        for place in followed {
            if let Some(root) = in_writable(&place) {
                self.watch_link(place, &root);
            }
        }
        let Some(root) = in_writable(&resolved) else {
            return Ok(());
        };
        if resolved == root {
            // A path that must stay read-only cannot be a writable root
            // (sbx's cache or config, a hooks directory, ...).
            bail!(
                "{} is both a writable path and one sbx keeps read-only (code that runs later, or sbx's own files): remove it from `writable`",
                root.display()
            );
        }
        let entry = protected_entry(resolved, layout);
        if self.protected.contains(&entry) {
            return Ok(());
        }
        if let Some(watch) = git_config_watch(&entry, layout, places) {
            self.git_configs.push(watch);
        }
        pin_parents(&mut self.pins, &mut self.pinned, &entry.path, &root, true);
        self.protected.push(entry);
        Ok(())
    }
}

impl RunsLater {
    /// Watch a link by its own identity (moved aside if replaced), and pin
    /// it for the run, with the directories between its writable `root`
    /// and it (renaming one would carry the pinned link away, and free its
    /// name for another).
    fn watch_link(&mut self, place: PathBuf, root: &Path) {
        if !self.links.contains(&place) {
            pin_parents(&mut self.pins, &mut self.pinned, &place, root, true);
            self.links.push(place.clone());
        }
        let entry = Protected {
            identity: identity(&place),
            path: place,
            kind: Kind::Missing,
            create: false,
        };
        if !self.protected.contains(&entry) {
            self.protected.push(entry);
        }
    }
}

/// The links git would pass through to reach `c`: among its directories,
/// and on the way to where each link points (`lib/z/.git/config ->
/// ../../cfg/config` with `cfg -> cfgA`: `cfg` could be pointed elsewhere
/// for the next run). Each where it lives (its real parent and its name).
/// From the real paths already resolved: a path whose real path is not its
/// real parent's plus its name is a link.
fn links_on_the_way(c: &Path, places: &Places) -> Vec<PathBuf> {
    // Most paths have no link on the way: their real path is themselves
    // (or their parent's is, when they do not exist).
    let is_real = |p: &Path| real(p).as_deref() == Some(p);
    if is_real(c) || (real(c).is_none() && c.parent().is_some_and(is_real)) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut todo = vec![c.to_path_buf()];
    let mut hops = 0;
    while let Some(path) = todo.pop() {
        hops += 1;
        if hops > 40 {
            break;
        }
        let prefixes: Vec<&Path> = path.ancestors().collect();
        for prefix in prefixes.into_iter().rev() {
            let (Some(parent), Some(name)) = (prefix.parent(), prefix.file_name()) else {
                continue;
            };
            let Some(real_parent) = real(parent) else {
                break;
            };
            let here = real_parent.join(name);
            let Some(real_here) = real(prefix) else {
                break;
            };
            if real_here == here {
                continue;
            }
            out.push(places.alias(here.clone()));
            if let (Ok(target), Ok(rest)) = (std::fs::read_link(&here), path.strip_prefix(prefix)) {
                todo.push(real_parent.join(target).join(rest));
            }
            break;
        }
    }
    out
}

/// Where a symlink candidate itself lives: its real parent and its name.
fn link_place(c: &Path, places: &Places) -> Option<PathBuf> {
    match (c.parent().and_then(real), c.file_name()) {
        (Some(parent), Some(name)) => Some(places.alias(parent.join(name))),
        _ => None,
    }
}

/// A candidate's real path. A missing path is watched at its first missing
/// component, placed under the real directory that exists: that component
/// is what the command would create. A link to nothing on the way
/// (`.git/hooks -> ../tools/hooks` before that exists, or with `tools ->
/// elsewhere` and no `elsewhere`) is followed: the place is where it
/// points, which git would fill through it (a bind of the link itself
/// would find no source, and the place of the link is taken already).
/// Also the links on the way from each link so followed, and those links
/// themselves, each where it lives: the command could point one
/// elsewhere.
fn resolved_place(c: &Path, places: &Places) -> (PathBuf, Vec<PathBuf>) {
    let mut c = c.to_path_buf();
    let mut links = Vec::new();
    for _ in 0..40 {
        if let Some(r) = real(&c) {
            return (places.alias(r), links);
        }
        // The first component that does not resolve, under one that does.
        let mut missing = c.as_path();
        while let Some(parent) = missing.parent() {
            if real(parent).is_some() || parent.parent().is_none() {
                break;
            }
            missing = parent;
        }
        let place = match (missing.parent().and_then(real), missing.file_name()) {
            (Some(parent), Some(name)) => places.alias(parent.join(name)),
            _ => return (places.alias(c.clone()), links),
        };
        // Most candidates are simply missing: the remembered `lstat` says
        // so without a `readlink` each.
        let target = lstat(missing)
            .filter(|m| m.file_type().is_symlink())
            .and_then(|_| std::fs::read_link(missing).ok());
        let (Some(target), Ok(rest)) = (target, c.strip_prefix(missing)) else {
            return (place, links);
        };
        let mut next = missing
            .parent()
            .map_or_else(|| target.clone(), |p| p.join(&target));
        if !rest.as_os_str().is_empty() {
            next.push(rest);
        }
        links.push(place);
        // And the links that do resolve on the way from there (`tools ->
        // scripts` before `scripts/hooks` exists): pointed elsewhere, they
        // would lead git to what the command made.
        links.extend(links_on_the_way(&next, places));
        c = next;
    }
    // Links past counting: what the system says, or the path as it is.
    (places.alias(real(&c).unwrap_or(c)), links)
}

/// [`Identity::of`], from what this resolution already looked at.
fn identity(path: &Path) -> Option<Identity> {
    lstat(path).map(|m| Identity::from_lstat(path, &m))
}

/// The protected entry for a resolved path inside a writable root.
fn protected_entry(resolved: PathBuf, layout: &GitLayout) -> Protected {
    let mut kind = kind_of(&resolved);
    let mut create = false;
    if kind == Kind::Missing
        && resolved
            .parent()
            .is_some_and(|p| layout.git_dirs.iter().any(|g| g == p))
    {
        // `.git/hooks` or `.git/config` in a repository that has none:
        // created empty (as git itself would) so they can be mounted
        // read-only. Nothing is created in the working tree.
        if resolved.ends_with("hooks") {
            (kind, create) = (Kind::Dir, true);
        } else if resolved.ends_with("config") {
            (kind, create) = (Kind::File, true);
        }
    }
    Protected {
        identity: identity(&resolved),
        path: resolved,
        kind,
        create,
    }
}

/// A git config file among the protected paths, with what it sets now.
fn git_config_watch(
    entry: &Protected,
    layout: &GitLayout,
    places: &Places,
) -> Option<GitConfigWatch> {
    let path = &entry.path;
    let is_config = path
        .file_name()
        .is_some_and(|n| n == "config" || n == "config.worktree");
    let in_git_dir = path.components().any(|c| c.as_os_str() == ".git")
        || path.parent().is_some_and(|p| {
            layout
                .git_dirs
                .iter()
                .any(|g| places.real(g).is_some_and(|r| r == p))
        });
    (entry.kind == Kind::File && is_config && in_git_dir).then(|| GitConfigWatch {
        path: path.clone(),
        identity: entry.identity.clone(),
        before: crate::integrity::identity::read_regular_file(path, 1 << 20)
            .ok()
            .flatten()
            .unwrap_or_default(),
    })
}

/// Pin each directory between `root` (excluded) and `path` (excluded):
/// each becomes a mount point of itself, so it cannot be renamed away.
/// With `only_dirs`, an ancestor that is not (or no longer) a directory is
/// skipped.
fn pin_parents(
    pins: &mut Vec<PathBuf>,
    pinned: &mut HashSet<PathBuf>,
    path: &Path,
    root: &Path,
    only_dirs: bool,
) {
    let mut dir = path.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) {
            break;
        }
        if (!only_dirs || kind_of(d) == Kind::Dir) && pinned.insert(d.to_path_buf()) {
            pins.push(d.to_path_buf());
        }
        dir = d.parent();
    }
}

/// The project's git layout as candidates: hooks, configs, `commondir`
/// files, worktrees, submodules, a `.git` link or file, and the hooks
/// directory `core.hooksPath` names (the repository's or the user's).
fn git_candidates(places: &Places) -> Result<(Vec<PathBuf>, GitLayout)> {
    let (project, home) = (&places.project, &places.home);
    let mut candidates: Vec<PathBuf> = Vec::new();
    let git = project.join(".git");
    let mut layout = GitLayout {
        gits: vec![git.clone()],
        git_dirs: vec![git.clone()],
    };
    let git_is_dir = kind_of(&git) == Kind::Dir;
    for rel in PROJECT_PROTECTED {
        // Hooks and config of a worktree or submodule (`.git` is a file)
        // live in another directory, handled as any other path.
        if rel.starts_with(".git/") && !git_is_dir {
            continue;
        }
        candidates.push(project.join(rel));
    }
    candidates.extend(git_entry_candidates(&git, &mut layout));
    // A hooks directory set by `core.hooksPath` (husky, lefthook) runs
    // like .git/hooks, whether the repository or the user's own git
    // config sets it.
    // git's user config under $XDG_CONFIG_HOME, when that is not
    // ~/.config (whose git directory is on the home list).
    let xdg_git = places
        .host
        .var("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|x| x.is_absolute())
        .map(|x| x.join("git"));
    candidates.extend(xdg_git.clone());
    for config in repository_configs(&git)
        .into_iter()
        .chain([home.join(".gitconfig"), home.join(".config/git/config")])
        .chain(xdg_git.map(|g| g.join("config")))
    {
        if let Some(hooks) = hooks_path(&config, project, home) {
            candidates.push(hooks);
        }
    }
    submodule_candidates(&git, &mut candidates, &mut layout)?;
    Ok((candidates, layout))
}

/// Another repository than the project's (nested at any depth, a submodule
/// checkout, a linked worktree, one in a `--writable` path): protected like
/// the project's own.
fn repository_candidates(
    git: &Path,
    tree: &Path,
    home: &Path,
    candidates: &mut Vec<PathBuf>,
    layout: &mut GitLayout,
) -> Result<()> {
    let git = git.to_path_buf();
    if kind_of(&git) == Kind::Dir {
        candidates.push(git.join("hooks"));
        candidates.push(git.join("config"));
        candidates.push(git.join("remotes"));
        candidates.push(git.join("branches"));
        // A linked worktree's git directory (`.bare/worktrees/NAME`, which
        // the walk finds like a bare repository): git takes its hooks and
        // config from the common directory its `commondir` names (a
        // candidate of its own, below), so none is made here, only
        // watched. A `commondir` naming the directory itself changes
        // nothing.
        let common = crate::integrity::identity::common_dir_named(&git);
        if common.is_none_or(|c| same_directory(&c, &git)) {
            layout.git_dirs.push(git.clone());
        }
    }
    candidates.extend(git_entry_candidates(&git, layout));
    for config in repository_configs(&git) {
        if let Some(hooks) = hooks_path(&config, tree, home) {
            candidates.push(hooks);
        }
    }
    layout.gits.push(git.clone());
    submodule_candidates(&git, candidates, layout)
}

/// Submodules keep their hooks and config under .git/modules, and may have
/// a `commondir` or worktrees of their own.
fn submodule_candidates(
    git: &Path,
    candidates: &mut Vec<PathBuf>,
    layout: &mut GitLayout,
) -> Result<()> {
    if !git.is_dir() {
        return Ok(());
    }
    // A linked worktree's submodules live under its own directory,
    // `worktrees/NAME/modules`, not in the common `modules`.
    let mut places = vec![git.join("modules")];
    places.extend(
        std::fs::read_dir(git.join("worktrees"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|wt| wt.path().join("modules")),
    );
    let mut modules = Vec::new();
    for place in &places {
        modules.extend(submodule_git_dirs(place));
        if modules.len() > MAX_SUBMODULES {
            bail!(
                "{}: more than {MAX_SUBMODULES} submodule git directories, whose hooks and config sbx cannot all keep read-only; the command was not run (remove those no submodule uses)",
                place.display()
            );
        }
    }
    for module in modules {
        candidates.push(module.join("hooks"));
        candidates.push(module.join("config"));
        candidates.push(module.join("config.worktree"));
        candidates.push(module.join("commondir"));
        layout.git_dirs.push(module);
    }
    Ok(())
}

/// The submodule git directories of the repositories whose `.git` entries
/// are `gits` (those that are directories): under `modules` and each
/// worktree's `modules`.
pub(crate) fn module_dirs(gits: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for git in gits
        .iter()
        .filter(|g| std::fs::symlink_metadata(g).is_ok_and(|m| m.is_dir()))
    {
        let mut layout = GitLayout::default();
        let mut ignored = Vec::new();
        // Too many is refused by the resolution itself; here, take them all.
        let _ = submodule_candidates(git, &mut ignored, &mut layout);
        out.extend(layout.git_dirs);
    }
    out.sort();
    out
}

/// Python's user site directories: every Python start imports what a
/// `.pth` file there names, and runs `usercustomize.py`. One per Python
/// version this machine has (or the home already holds), whether or not it
/// exists yet.
fn python_user_sites(home: &Path) -> Vec<PathBuf> {
    let mut versions: Vec<std::ffi::OsString> = Vec::new();
    for dir in [
        home.join(".local/lib"),
        PathBuf::from("/usr/lib"),
        PathBuf::from("/usr/local/lib"),
    ] {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = entry.file_name();
            // `python3.13`, and builds such as `python3.13t` (free-threaded).
            let is_version = name.to_str().is_some_and(|n| {
                n.strip_prefix("python3.").is_some_and(|v| {
                    v.bytes().next().is_some_and(|b| b.is_ascii_digit())
                        && v.bytes().all(|b| b.is_ascii_alphanumeric())
                })
            });
            if is_version && !versions.contains(&name) {
                versions.push(name);
            }
        }
    }
    versions.sort();
    let mut sites: Vec<PathBuf> = versions
        .iter()
        .map(|v| home.join(".local/lib").join(v).join("site-packages"))
        .collect();
    // macOS: ~/Library/Python/3.X/lib/python/site-packages.
    for entry in std::fs::read_dir(home.join("Library/Python"))
        .into_iter()
        .flatten()
        .flatten()
    {
        sites.push(entry.path().join("lib/python/site-packages"));
    }
    sites
}

/// The directories on the user's `PATH` inside home but outside the
/// project (`~/.bun/bin`, `~/go/bin`, ...): a program planted there runs
/// in place of the one the user meant, in the next shell.
fn path_dirs_in_home(places: &Places) -> Vec<PathBuf> {
    let Some(path) = places.host.var("PATH") else {
        return Vec::new();
    };
    std::env::split_paths(path)
        .filter(|d| d.is_absolute())
        .filter(|d| d.starts_with(&places.home) || d.starts_with(&places.home_real))
        .filter(|d| {
            super::paths::real(d).is_none_or(|r| !r.starts_with(&places.project))
                && !d.starts_with(&places.project)
        })
        .collect()
}

/// Repositories a writable root is, or holds at its top, or is the git
/// directory of (`--writable repo`, `--writable repo/.git`, a bare
/// repository, the main repository's git directory of a linked worktree),
/// as (git directory or `.git` entry, working tree): their hooks and
/// config must not become writable with them.
fn writable_git_dirs(writable: &[PathBuf]) -> Vec<(PathBuf, PathBuf)> {
    let mut out = Vec::new();
    for w in writable {
        if lstat(&w.join(".git")).is_some() {
            out.push((w.join(".git"), w.clone()));
        } else if w.file_name().is_some_and(|n| n == ".git") {
            out.extend(w.parent().map(|tree| (w.clone(), tree.to_path_buf())));
        } else if is_bare_repository(w) {
            out.push((w.clone(), w.clone()));
        }
    }
    out
}

/// Whether two paths name the same directory (a `commondir` of `.`).
fn same_directory(a: &Path, b: &Path) -> bool {
    matches!((real(a), real(b)), (Some(x), Some(y)) if x == y)
}

/// A directory git takes for a git directory (see
/// [`crate::envscan::git_dir_like`]).
pub(super) fn is_bare_repository(dir: &Path) -> bool {
    crate::envscan::git_dir_like(dir)
}

/// What `.git` itself adds: the link or `gitdir:` file (rewritten, it points
/// git at a directory the command prepared), or in a git directory the
/// files that send git elsewhere for its config and hooks.
fn git_entry_candidates(git: &Path, layout: &mut GitLayout) -> Vec<PathBuf> {
    let mut candidates = Vec::new();
    let git_is_link = lstat(git).is_some_and(|m| m.file_type().is_symlink());
    if git_is_link {
        // `.git -> elsewhere` (a separate git dir): the link itself is
        // watched, or the command could swap it for a repository of its
        // own; the hooks and config behind it are candidates below.
        candidates.push(git.to_path_buf());
    }
    let what = super::paths::stat(git);
    if what.as_ref().is_some_and(|m| m.is_file()) {
        // `gitdir: PATH` of a worktree or submodule checkout: rewritten,
        // it points git at a directory the command prepared.
        candidates.push(git.to_path_buf());
        // And the git directory it names, wherever that is: git runs its
        // hooks and config as a directory `.git`'s (one the walk prunes,
        // `node_modules/gd`, or one not made yet, which the command could
        // make). A worktree's or a submodule's is found again with its
        // repository; a missing `hooks` or `config` there is only watched.
        if let Some(dir) = crate::integrity::identity::gitdir_named(git) {
            // A linked worktree's git directory sends git on to its common
            // directory for hooks and config: that one too.
            let common = crate::integrity::identity::common_dir_named(&dir);
            for name in ["hooks", "config", "config.worktree", "commondir"] {
                candidates.push(dir.join(name));
            }
            if let Some(common) = &common {
                candidates.push(common.join("hooks"));
                candidates.push(common.join("config"));
            }
            // A git directory like `.git`, whose config gets a private
            // copy (and whose missing hooks and config sbx makes): the one
            // git takes its config from, when it is laid out as a git
            // directory and not inside another (whose layout has the files
            // git reads there and no others).
            let own = common.unwrap_or(dir);
            let inside_git = own.components().any(|c| c.as_os_str() == ".git");
            if !inside_git && is_bare_repository(&own) {
                layout.git_dirs.push(own);
            }
        }
    } else if what.is_some_and(|m| m.is_dir()) {
        // `commondir` sends git to another directory for its config and
        // hooks; a normal repository has none, so it is watched. The
        // same files of linked worktrees live under .git/worktrees.
        candidates.push(git.join("commondir"));
        // One there already: that directory's hooks and config are the
        // ones git runs (found by review: a `.git` whose `commondir` named
        // `../store` left store's hooks and config writable). Laid out as
        // a git directory, it is one like `.git` (private config copy,
        // missing hooks and config made).
        if let Some(common) =
            crate::integrity::identity::common_dir_named(git).filter(|c| !same_directory(c, git))
        {
            candidates.push(common.join("hooks"));
            candidates.push(common.join("config"));
            let inside_git = common.components().any(|c| c.as_os_str() == ".git");
            if !inside_git && is_bare_repository(&common) {
                layout.git_dirs.push(common);
            }
        }
        // The main worktree's own config, read when
        // `extensions.worktreeConfig` is set (sparse-checkout sets it).
        candidates.push(git.join("config.worktree"));
        for wt in std::fs::read_dir(git.join("worktrees"))
            .into_iter()
            .flatten()
            .flatten()
        {
            candidates.push(wt.path().join("commondir"));
            candidates.push(wt.path().join("gitdir"));
            candidates.push(wt.path().join("config.worktree"));
        }
    }
    candidates
}

/// The config files of a repository whose `.git` entry is `git`, where a
/// `core.hooksPath` may be set: `config` and `config.worktree` of its git
/// directory (the one a `.git` file names), and the config of the common
/// directory a linked worktree's `commondir` leads to. A relative
/// `core.hooksPath` in any of them is the worktree's.
fn repository_configs(git: &Path) -> Vec<PathBuf> {
    // A `.git` directory is its own git directory.
    let dir = crate::integrity::identity::gitdir_named(git).unwrap_or_else(|| git.to_path_buf());
    let mut configs = vec![dir.join("config"), dir.join("config.worktree")];
    if let Some(common) = crate::integrity::identity::common_dir_named(&dir) {
        configs.push(common.join("config"));
    }
    configs
}

/// The directory `core.hooksPath` names in a git config file, made
/// absolute (relative to the working tree; `~/` expanded), if any. A plain
/// line scan: enough to find the key git itself reads, and a miss only
/// leaves the hooks directory unprotected as it was before.
fn hooks_path(config: &Path, worktree: &Path, home: &Path) -> Option<PathBuf> {
    // Never waited on: a FIFO or a device there would hang every run.
    let real = real(config)?;
    let bytes = crate::integrity::identity::read_regular_file(&real, 1 << 20).ok()??;
    let text = String::from_utf8_lossy(&bytes);
    let mut in_core = false;
    let mut found = None;
    for line in text.lines() {
        let mut line = line.trim();
        if let Some(rest) = line.strip_prefix('[') {
            // `[core]`, possibly followed by a key on the same line.
            let (head, after) = rest.split_once(']').unwrap_or((rest, ""));
            in_core = head.trim().eq_ignore_ascii_case("core");
            line = after.trim();
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if in_core && key.trim().eq_ignore_ascii_case("hookspath") {
            // A comment starts at `;` or `#` outside quotes.
            let value = value.trim();
            let value = match value.strip_prefix('"') {
                Some(quoted) => quoted.split('"').next().unwrap_or(""),
                None => value.split([';', '#']).next().unwrap_or("").trim(),
            };
            found = Some(if let Some(rest) = value.strip_prefix("~/") {
                home.join(rest)
            } else {
                worktree.join(value)
            });
        }
    }
    found
}

/// The git directories of submodules (`.git/modules/NAME`, nested ones
/// included): those holding a `config` file.
/// More submodule git directories than this are refused: each takes
/// several mounts, and bubblewrap's argument list has a limit (a command
/// could otherwise make every later run fail at it, or crawl).
const MAX_SUBMODULES: usize = 500;

fn submodule_git_dirs(modules: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![modules.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if out.len() > MAX_SUBMODULES {
                break;
            }
            if path.join("config").is_file() {
                stack.push(path.join("modules"));
                out.push(path);
            } else if out.len() < 1000 {
                // Submodule names may contain slashes: look one level deeper.
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}
