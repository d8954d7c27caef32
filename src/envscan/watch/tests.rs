//! The watcher's picture against a walk of the same tree, after every kind
//! of change, and the answer's encoding against hostile bytes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::client::{decode, encode};
use super::tree::{Answer, Broken, Tree};
use super::*;
use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};

fn setup() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let root = fs::canonicalize(t.path()).unwrap().join("proj");
    fs::create_dir(&root).unwrap();
    (t, root)
}

fn touch(p: &Path) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, "SECRET=1\n").unwrap();
}

/// What the watcher says, resolved; beside what a fresh walk finds.
fn compare(tree: &mut Tree, root: &Path) -> Found {
    tree.drain().unwrap();
    let watched = found(root, &tree.answer(), Wanted::All);
    let (env_files, stats) = crate::envscan::scan(root, None, crate::envscan::now_ns());
    assert_eq!(watched.env_files, env_files, "env files");
    assert_eq!(watched.git_entries, stats.git_entries, ".git entries");
    assert_eq!(watched.bare, stats.bare, "bare repositories");
    watched
}

#[test]
fn follows_creates_renames_and_deletes() {
    let (_t, root) = setup();
    touch(&root.join("a/b/.env"));
    fs::create_dir_all(root.join("node_modules/x")).unwrap();
    let mut tree = Tree::build(&root, usize::MAX).unwrap();
    let f = compare(&mut tree, &root);
    assert_eq!(f.env_files, vec![root.join("a/b/.env")]);

    // Made in a new directory, made deep at once, renamed into place.
    touch(&root.join("n/e/w/.env.local"));
    fs::create_dir_all(root.join("x/y")).unwrap();
    touch(&root.join("x/y/notes"));
    fs::rename(root.join("x/y/notes"), root.join("x/y/.env")).unwrap();
    let f = compare(&mut tree, &root);
    assert_eq!(f.env_files.len(), 3);

    // A directory renamed inside the tree, one moved in from outside, one
    // moved out, one deleted.
    fs::rename(root.join("a"), root.join("n/a2")).unwrap();
    let outside = root.parent().unwrap().join("outside");
    touch(&outside.join("deep/.env"));
    fs::rename(&outside, root.join("x/in")).unwrap();
    fs::rename(root.join("n/e"), root.parent().unwrap().join("gone")).unwrap();
    fs::remove_dir_all(root.join("x/y")).unwrap();
    let f = compare(&mut tree, &root);
    assert_eq!(
        f.env_files,
        vec![root.join("n/a2/b/.env"), root.join("x/in/deep/.env")]
    );

    // Into a pruned directory and out of it again (a pruned directory is
    // never walked, by the watcher as by the walk).
    fs::rename(root.join("x/in"), root.join("node_modules/in")).unwrap();
    compare(&mut tree, &root);
    fs::rename(root.join("node_modules/in"), root.join("back")).unwrap();
    let f = compare(&mut tree, &root);
    assert!(f.env_files.contains(&root.join("back/deep/.env")));

    // Renamed over an existing empty directory.
    fs::create_dir_all(root.join("empty")).unwrap();
    compare(&mut tree, &root);
    fs::rename(root.join("back"), root.join("empty")).unwrap();
    let f = compare(&mut tree, &root);
    assert!(f.env_files.contains(&root.join("empty/deep/.env")));
}

#[test]
fn git_entries_bare_repositories_and_links() {
    let (_t, root) = setup();
    let mut tree = Tree::build(&root, usize::MAX).unwrap();
    fs::create_dir_all(root.join("sub/.git")).unwrap();
    fs::write(root.join("wt/.git"), "gitdir: /elsewhere\n").unwrap_or_else(|_| {
        fs::create_dir_all(root.join("wt")).unwrap();
        fs::write(root.join("wt/.git"), "gitdir: /elsewhere\n").unwrap();
    });
    for d in ["bare/objects", "bare/refs"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    fs::write(root.join("bare/HEAD"), "ref: refs/heads/main\n").unwrap();
    // A `.env` link to a file outside, and one to a directory (not a file).
    let target = root.parent().unwrap().join("secret.env");
    touch(&target);
    symlink(&target, root.join("sub/.env")).unwrap();
    symlink(root.parent().unwrap(), root.join(".env.dir")).unwrap();
    let f = compare(&mut tree, &root);
    assert_eq!(f.git_entries.len(), 2);
    assert_eq!(f.bare, vec![root.join("bare")]);
    assert_eq!(f.env_files, vec![target.clone()]);
    // The link's target changes without any event in the tree: resolved
    // on every answer.
    fs::remove_file(&target).unwrap();
    let f = compare(&mut tree, &root);
    assert!(f.env_files.is_empty());
}

#[test]
fn directories_that_may_not_be_read_are_answered() {
    if nix::unistd::geteuid().is_root() {
        // Root reads every directory: nothing to report.
        return;
    }
    let (_t, root) = setup();
    touch(&root.join("locked/.env"));
    fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o000)).unwrap();
    let mut tree = Tree::build(&root, usize::MAX).unwrap();
    tree.drain().unwrap();
    assert_eq!(tree.answer().closed, vec![b"locked".to_vec()]);
    // Opened again: walked, and its `.env` found.
    fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o755)).unwrap();
    tree.drain().unwrap();
    assert!(tree.answer().closed.is_empty());
    compare(&mut tree, &root);
    // Closed after being watched: reported again.
    fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o300)).unwrap();
    tree.drain().unwrap();
    assert_eq!(tree.answer().closed, vec![b"locked".to_vec()]);
    fs::set_permissions(root.join("locked"), fs::Permissions::from_mode(0o755)).unwrap();
}

/// Random changes, checked against a walk after each batch.
#[test]
fn random_changes_agree_with_a_walk() {
    let (_t, root) = setup();
    let mut tree = Tree::build(&root, usize::MAX).unwrap();
    let mut seed: u64 = 0x5eed;
    let mut next = |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    let names = [
        "a",
        "b",
        "c",
        ".env",
        ".env.x",
        "node_modules",
        "HEAD",
        ".git",
    ];
    let outside = root.parent().unwrap().join("outside");
    fs::create_dir_all(&outside).unwrap();
    for round in 0..60 {
        for _ in 0..8 {
            // A path of up to four components under the root.
            let depth = 1 + next(4) as usize;
            let mut p = root.clone();
            for _ in 0..depth {
                p.push(names[next(names.len() as u64) as usize]);
            }
            let q = root
                .join(names[next(3) as usize])
                .join(names[next(names.len() as u64) as usize]);
            let _ = match next(6) {
                0 => fs::create_dir_all(&p),
                1 => fs::create_dir_all(p.parent().unwrap()).and_then(|()| fs::write(&p, "S")),
                2 => fs::rename(&p, &q),
                3 => fs::remove_dir_all(&p).or_else(|_| fs::remove_file(&p)),
                4 => fs::rename(&p, outside.join(format!("o{round}"))),
                _ => fs::rename(outside.join(format!("o{}", round.max(1) - 1)), &p),
            };
        }
        compare(&mut tree, &root);
    }
}

#[test]
fn the_limit_of_watches_ends_it() {
    let (_t, root) = setup();
    for d in ["a/b", "c/d", "e"] {
        fs::create_dir_all(root.join(d)).unwrap();
    }
    assert_eq!(Tree::build(&root, 3).err(), Some(Broken::OutOfWatches));
    let mut tree = Tree::build(&root, 6).unwrap();
    fs::create_dir_all(root.join("f/g")).unwrap();
    assert_eq!(tree.drain().err(), Some(Broken::OutOfWatches));
}

#[test]
fn a_moved_root_ends_it() {
    let (t, root) = setup();
    let mut tree = Tree::build(&root, usize::MAX).unwrap();
    fs::rename(&root, t.path().join("elsewhere")).unwrap();
    assert_eq!(tree.drain().err(), Some(Broken::RootGone));
}

#[test]
fn answers_round_trip_and_hostile_ones_are_refused() {
    let answer = Answer {
        entries: vec![
            (Vec::new(), b".env".to_vec()),
            (b"a/b".to_vec(), b".git".to_vec()),
        ],
        closed: vec![b"c".to_vec()],
        watched: 7,
    };
    let bytes = encode(&answer);
    assert_eq!(decode(&bytes), Some(answer));
    for bad in [
        &b""[..],
        b"sbx-watch\0stale\0",
        b"sbx-watch\0ok\0",
        b"sbx-watch\0ok\x001\x001\0a\0.env\x000\0end",
        b"sbx-watch\0ok\x001\x001\0../x\0.env\x000\0end\0",
        b"sbx-watch\0ok\x001\x001\0a//b\0.env\x000\0end\0",
        b"sbx-watch\0ok\x001\x001\0a\0x/y\x000\0end\0",
        b"sbx-watch\0ok\x001\x001\0a\0..\x000\0end\0",
        b"sbx-watch\0ok\x001\x009999999999999\0a\0.env\x000\0end\0",
        b"sbx-watch\0ok\x001\x000\x000\0end\0extra\0",
        b"sbx-watch\0ok\x00-1\x000\x000\0end\0",
    ] {
        assert_eq!(decode(bad), None, "{:?}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn socket_place_is_per_root_and_short() {
    let a = Place::of(Path::new("/c"), Path::new("/p/one")).unwrap();
    let b = Place::of(Path::new("/c"), Path::new("/p/two")).unwrap();
    assert_ne!(a.socket, b.socket);
    assert!(a.socket.starts_with("/c/watch"));
    assert!(Place::of(&PathBuf::from("/x".repeat(60)), Path::new("/p")).is_none());
}

/// `renameat2(RENAME_EXCHANGE)` queues two pairs of moves: their order must
/// not lose either side.
#[test]
fn exchanged_entries_are_both_seen() {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    let (_t, root) = setup();
    touch(&root.join("a/.env"));
    fs::write(root.join("a/notes.txt"), "x").unwrap();
    touch(&root.join("d1/deep/.env.one"));
    touch(&root.join("d2/deep/.env.two"));
    fs::write(root.join("plain"), "x").unwrap();
    let mut tree = Tree::build(&root, usize::MAX).unwrap();
    let exchange = |a: &str, b: &str| {
        renameat_with(CWD, root.join(a), CWD, root.join(b), RenameFlags::EXCHANGE).unwrap();
    };
    exchange("a/.env", "a/notes.txt");
    let f = compare(&mut tree, &root);
    assert!(f.env_files.contains(&root.join("a/.env")));
    exchange("d1", "d2");
    let f = compare(&mut tree, &root);
    assert!(f.env_files.contains(&root.join("d1/deep/.env.two")));
    assert!(f.env_files.contains(&root.join("d2/deep/.env.one")));
    // A directory and a file.
    exchange("d1", "plain");
    let f = compare(&mut tree, &root);
    assert!(f.env_files.contains(&root.join("plain/deep/.env.two")));
}

/// A directory above renamed away, changed through a descriptor, and
/// renamed back: walked again (the race where the renames' events are
/// applied after its return is in `tree.rs`).
#[test]
fn a_parent_renamed_away_and_back_is_walked_again() {
    let (t, root) = setup();
    fs::create_dir_all(root.join("a/b/L")).unwrap();
    let mut tree = Tree::build(&root, usize::MAX).unwrap();
    let inside = fs::File::open(root.join("a/b/L")).unwrap();
    fs::rename(root.join("a"), t.path().join("away")).unwrap();
    // Made through the directory's descriptor while its path leads nowhere.
    let fd = std::os::fd::AsRawFd::as_raw_fd(&inside);
    nix::sys::stat::mkdirat(Some(fd), ".git", nix::sys::stat::Mode::S_IRWXU).unwrap();
    let env = nix::fcntl::openat(
        Some(fd),
        ".env",
        nix::fcntl::OFlag::O_CREAT | nix::fcntl::OFlag::O_WRONLY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::S_IRUSR,
    )
    .unwrap();
    nix::unistd::close(env).unwrap();
    // The watcher reads those events now, while `a` is away...
    tree.drain().unwrap();
    // ...and `a` comes back under the same name: its inode unchanged.
    fs::rename(t.path().join("away"), root.join("a")).unwrap();
    tree.settle().unwrap();
    let f = compare(&mut tree, &root);
    assert_eq!(f.env_files, vec![root.join("a/b/L/.env")]);
    assert_eq!(f.git_entries, vec![root.join("a/b/L/.git")]);
}

/// A directory above the root renamed, another made at the same path: the
/// root's path leads elsewhere, and the watcher stops answering.
#[test]
fn a_directory_above_the_root_renamed_ends_it() {
    let (t, _) = setup();
    let root = t.path().join("proj/inner");
    fs::create_dir_all(&root).unwrap();
    let root = fs::canonicalize(root).unwrap();
    let mut tree = Tree::build(&root, usize::MAX).unwrap();
    tree.settle().unwrap();
    fs::rename(t.path().join("proj"), t.path().join("proj.old")).unwrap();
    fs::create_dir_all(&root).unwrap();
    touch(&root.join(".env"));
    assert_eq!(tree.settle().err(), Some(Broken::RootGone));
}

#[test]
fn mount_points_inside_the_root_are_found() {
    use super::daemon::mount_points_inside;
    let table = b"22 1 8:1 / / rw - ext4 /dev/sda1 rw\n\
        30 22 0:5 / /home/u/my\\040proj/data rw - tmpfs none rw\n\
        31 22 0:6 / /home/u/other rw - tmpfs none rw\n";
    assert!(mount_points_inside(table, Path::new("/home/u/my proj")));
    assert!(!mount_points_inside(
        table,
        Path::new("/home/u/my proj/data")
    ));
    assert!(!mount_points_inside(table, Path::new("/home/u/my")));
    assert!(!mount_points_inside(table, Path::new("/srv")));
    // A backslash that starts no escape the kernel writes stays itself.
    let odd = b"30 22 0:5 / /p/a\\777b rw - tmpfs none rw\n";
    assert!(mount_points_inside(odd, Path::new("/p")));
}

#[test]
fn an_answer_for_repositories_resolves_no_env_file() {
    let (_t, root) = setup();
    touch(&root.join("a/.env"));
    fs::create_dir_all(root.join("a/sub/.git")).unwrap();
    fs::create_dir_all(root.join("bare/refs")).unwrap();
    fs::create_dir_all(root.join("bare/objects")).unwrap();
    fs::write(root.join("bare/HEAD"), "ref: refs/heads/main\n").unwrap();
    let mut tree = Tree::build(&root, usize::MAX).unwrap();
    let all = compare(&mut tree, &root);
    let repositories = found(&root, &tree.answer(), Wanted::Repositories);
    assert_eq!(all.env_files, vec![root.join("a/.env")]);
    assert!(repositories.env_files.is_empty());
    assert_eq!(repositories.git_entries, all.git_entries);
    assert_eq!(repositories.git_entries, vec![root.join("a/sub/.git")]);
    assert_eq!(repositories.bare, all.bare);
    assert_eq!(repositories.bare.len(), 1, "{:?}", repositories.bare);
}
