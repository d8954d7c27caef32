//! The `.env` walk and its cache, on real directory trees.

use super::cache::*;
use super::*;
use std::fs;
use std::fs::File;
use std::os::unix::fs::{symlink, PermissionsExt};

/// A walk "later": every directory created by the test is settled.
fn later() -> i128 {
    now_ns() + 10 * RACE_NS
}

fn real(p: &Path) -> PathBuf {
    fs::canonicalize(p).unwrap()
}

fn touch(p: &Path) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, "SECRET=1\n").unwrap();
}

fn setup() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let project = t.path().join("proj");
    fs::create_dir(&project).unwrap();
    let project = real(&project);
    let cache = t.path().join("cache").join("sbx");
    (t, project, cache)
}

#[test]
fn finds_nested_and_skips_templates_and_pruned() {
    let (_t, p, cache) = setup();
    let deep = p.join("a/b/c/d/e/.env");
    touch(&deep);
    touch(&p.join(".env.local"));
    touch(&p.join("x/.ENV.Production"));
    for n in [
        ".env.example",
        ".env.sample",
        ".env.template",
        ".envrc",
        "env",
        "x.env",
    ] {
        touch(&p.join("a").join(n));
    }
    for d in PRUNED {
        touch(&p.join("a/b").join(d).join(".env"));
    }
    // A directory named .env is walked into, not returned.
    touch(&p.join("venvs/.env/inner/.env"));
    let want = vec![
        real(&p.join(".env.local")),
        real(&deep),
        real(&p.join("venvs/.env/inner/.env")),
        real(&p.join("x/.ENV.Production")),
    ];
    let mut want_sorted = want.clone();
    want_sorted.sort();
    assert_eq!(find(&p, None), want_sorted);
    assert_eq!(find(&p, Some(&cache)), want_sorted);
    // From the cache, same answer.
    let (got, stats) = scan(&p, Some(&cache), later());
    assert_eq!(got, want_sorted);
    assert!(stats.read > 0, "{stats:?}"); // the first run's directories were too recent
    let (got, stats) = scan(&p, Some(&cache), later());
    assert_eq!(got, want_sorted);
    assert_eq!(stats.read, 0, "{stats:?}");
    assert!(!stats.wrote);
}

#[test]
fn unchanged_tree_is_one_stat_per_directory() {
    let (_t, p, cache) = setup();
    for i in 0..20 {
        touch(&p.join(format!("d{i}/e/f{i}")));
    }
    let (_, first) = scan(&p, Some(&cache), later());
    assert!(first.wrote);
    assert_eq!(first.read, 1 + 20 * 2);
    let (_, second) = scan(&p, Some(&cache), later());
    assert_eq!((second.read, second.reused, second.wrote), (0, 41, false));
    // The cache directory is private.
    let mode = fs::metadata(&cache).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    // No temporary file is left behind.
    assert_eq!(fs::read_dir(&cache).unwrap().count(), 1);
}

#[test]
fn created_and_deleted_files_are_seen() {
    let (_t, p, cache) = setup();
    touch(&p.join("a/b/c/keep.txt"));
    touch(&p.join("z/.env"));
    let (got, _) = scan(&p, Some(&cache), later());
    assert_eq!(got, vec![real(&p.join("z/.env"))]);

    // Created after the cached run, deep in an otherwise unchanged tree.
    touch(&p.join("a/b/c/.env.local"));
    // A new subtree.
    touch(&p.join("a/new/deeper/.env"));
    fs::remove_file(p.join("z/.env")).unwrap();
    let (got, stats) = scan(&p, Some(&cache), later());
    assert_eq!(
        got,
        vec![
            real(&p.join("a/b/c/.env.local")),
            real(&p.join("a/new/deeper/.env"))
        ]
    );
    assert!(stats.reused > 0 && stats.read > 0, "{stats:?}");

    fs::remove_dir_all(p.join("a/new")).unwrap();
    let (got, _) = scan(&p, Some(&cache), later());
    assert_eq!(got, vec![real(&p.join("a/b/c/.env.local"))]);
}

#[test]
fn recent_directories_are_read_again() {
    let (_t, p, cache) = setup();
    touch(&p.join("a/.env"));
    // Cache written "now": every directory was modified within the window.
    let (_, first) = scan(&p, Some(&cache), now_ns());
    let (_, second) = scan(&p, Some(&cache), later());
    assert_eq!(first.read, 2);
    assert_eq!(second.read, 2);
}

#[test]
fn reset_mtime_is_noticed() {
    let (_t, p, cache) = setup();
    touch(&p.join("a/x"));
    scan(&p, Some(&cache), later());
    let before = fs::metadata(p.join("a")).unwrap().modified().unwrap();
    touch(&p.join("a/.env"));
    let times = fs::FileTimes::new().set_modified(before);
    File::open(p.join("a")).unwrap().set_times(times).unwrap();
    assert_eq!(
        fs::metadata(p.join("a")).unwrap().modified().unwrap(),
        before
    );
    let (got, _) = scan(&p, Some(&cache), later());
    assert_eq!(got, vec![real(&p.join("a/.env"))]);
}

#[test]
fn symlinks() {
    let (t, p, cache) = setup();
    let outside = t.path().join("outside");
    touch(&outside.join(".env"));
    touch(&outside.join("secret"));
    // A directory symlink is not followed.
    symlink(&outside, p.join("linked")).unwrap();
    // A .env symlink to a file outside: its real target is returned.
    symlink(outside.join("secret"), p.join(".env")).unwrap();
    // To a file inside.
    touch(&p.join("real.txt"));
    symlink("../real.txt", {
        fs::create_dir(p.join("s")).unwrap();
        p.join("s/.env.dev")
    })
    .unwrap();
    // Dangling, and to a directory: not returned.
    symlink(t.path().join("missing"), p.join(".env.gone")).unwrap();
    symlink(&outside, p.join(".env.dir")).unwrap();
    let mut want = vec![real(&outside.join("secret")), real(&p.join("real.txt"))];
    want.sort();
    assert_eq!(find(&p, None), want);
    scan(&p, Some(&cache), later());
    // A dangling target that appears is found without a directory change.
    touch(&t.path().join("missing"));
    let (got, stats) = scan(&p, Some(&cache), later());
    assert_eq!(stats.read, 0);
    want.push(real(&t.path().join("missing")));
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn non_utf8_names() {
    let (_t, p, cache) = setup();
    let dir = p.join(OsStr::from_bytes(b"d\xff\n"));
    touch(&dir.join(".env"));
    touch(&p.join(OsStr::from_bytes(b".env.\xfe")));
    let want = {
        let mut w = vec![
            real(&dir.join(".env")),
            real(&p.join(OsStr::from_bytes(b".env.\xfe"))),
        ];
        w.sort();
        w
    };
    assert_eq!(find(&p, None), want);
    scan(&p, Some(&cache), later());
    let (got, stats) = scan(&p, Some(&cache), later());
    assert_eq!((got, stats.read), (want, 0));
}

fn cache_file(p: &Path, cache: &Path) -> PathBuf {
    cache.join(cache_name(p))
}

#[test]
fn corrupt_cache_is_ignored() {
    let (_t, p, cache) = setup();
    touch(&p.join("a/.env"));
    let want = vec![real(&p.join("a/.env"))];
    scan(&p, Some(&cache), later());
    let file = cache_file(&p, &cache);
    let good = fs::read(&file).unwrap();
    assert!(decode(&good, &p).is_some());
    let mut bad: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"\xff\xfe garbage \x00\x00\x01".to_vec(),
        good[..good.len() - 1].to_vec(),
        good[..good.len() / 2].to_vec(),
        [&good[..], b"extra\0"].concat(),
    ];
    // Another format version, sbx version, project.
    for (from, to) in [
        (&b"\x001\x00"[..], &b"\x002\x00"[..]),
        (env!("CARGO_PKG_VERSION").as_bytes(), b"0.0.0-other"),
        (p.as_os_str().as_bytes(), b"/elsewhere"),
    ] {
        let i = good.windows(from.len()).position(|w| w == from).unwrap();
        bad.push([&good[..i], to, &good[i + from.len()..]].concat());
    }
    for b in bad {
        assert!(
            decode(&b, &p).is_none(),
            "{:?}",
            String::from_utf8_lossy(&b)
        );
        fs::write(&file, &b).unwrap();
        let (got, stats) = scan(&p, Some(&cache), later());
        assert_eq!(got, want);
        assert!(stats.read == 2 && stats.wrote, "{stats:?}");
    }
}

#[test]
fn hostile_cache_is_ignored() {
    let (t, p, cache) = setup();
    touch(&p.join("a/.env"));
    touch(&t.path().join("outside/.env"));
    touch(&t.path().join("outside/sub/.env"));
    let stamp = |d: &Path| Stamp::of(&fs::symlink_metadata(d).unwrap());
    let honest = || {
        vec![
            (
                Vec::new(),
                Dir {
                    stamp: stamp(&p),
                    subdirs: vec![b"a".to_vec()],
                    envs: vec![],
                    unreadable: false,
                },
            ),
            (
                b"a".to_vec(),
                Dir {
                    stamp: stamp(&p.join("a")),
                    subdirs: vec![],
                    envs: vec![b".env".to_vec()],
                    unreadable: false,
                },
            ),
        ]
    };
    let hostile: Vec<Vec<(Vec<u8>, Dir)>> = vec![
        // A subdirectory "..".
        {
            let mut r = honest();
            r[0].1.subdirs.push(b"..".to_vec());
            r
        },
        // A name with a slash.
        {
            let mut r = honest();
            r[1].1.envs.push(b"../../outside/.env".to_vec());
            r
        },
        // A relative path leaving the project.
        {
            let mut r = honest();
            r.push((
                b"../outside".to_vec(),
                Dir {
                    stamp: stamp(&p),
                    subdirs: vec![],
                    envs: vec![b".env".to_vec()],
                    unreadable: false,
                },
            ));
            r
        },
        // An absolute relative path.
        {
            let mut r = honest();
            r.push((
                b"/outside/sub".to_vec(),
                Dir {
                    stamp: stamp(&p),
                    subdirs: vec![],
                    envs: vec![],
                    unreadable: false,
                },
            ));
            r
        },
        // Two records for one directory.
        {
            let mut r = honest();
            let dup = Dir {
                stamp: stamp(&p.join("a")),
                subdirs: vec![],
                envs: vec![],
                unreadable: false,
            };
            r.push((b"a".to_vec(), dup));
            r
        },
    ];
    let file = cache_file(&p, &cache);
    fs::create_dir_all(&cache).unwrap();
    // The honest cache is used as is (a record is trusted).
    fs::write(&file, encode(&p, later(), &honest())).unwrap();
    let (got, stats) = scan(&p, Some(&cache), later());
    assert_eq!((got, stats.read), (vec![real(&p.join("a/.env"))], 0));
    for records in hostile {
        let bytes = encode(&p, later(), &records);
        assert!(decode(&bytes, &p).is_none());
        fs::write(&file, bytes).unwrap();
        let (got, stats) = scan(&p, Some(&cache), later());
        assert_eq!(got, vec![real(&p.join("a/.env"))]);
        assert_eq!(stats.read, 2);
    }
    // A huge count does not allocate.
    let mut b = Vec::new();
    for tok in [
        MAGIC,
        FORMAT,
        env!("CARGO_PKG_VERSION").as_bytes(),
        p.as_os_str().as_bytes(),
        b"0",
        b"18446744073709551615",
        b"",
        b"1",
        b"1",
        b"1",
        b"1",
        b"18446744073709551615",
    ] {
        b.extend_from_slice(tok);
        b.push(0);
    }
    assert!(decode(&b, &p).is_none());
    for n in ["", "+1", "1 ", "0x10", "-", "1-", "--1", "1e3", "\u{661}"] {
        assert_eq!(num::<i128>(n.as_bytes()), None, "{n}");
    }
    assert_eq!(num::<u64>(b"-1"), None);
    assert_eq!(num::<u64>(b"18446744073709551616"), None);
    assert_eq!(num::<u64>(b"18446744073709551615"), Some(u64::MAX));
    assert_eq!(num::<i128>(&[b'9'; 39]), None);
    assert_eq!(num::<i128>(&[b'9'; 38]), Some(10i128.pow(38) - 1));
    assert_eq!(num::<i128>(b"-5"), Some(-5));
}

#[test]
fn unwritable_cache_is_silent() {
    let (t, p, _) = setup();
    touch(&p.join(".env"));
    // The cache directory's place is taken by a file.
    let blocked = t.path().join("blocked");
    fs::write(&blocked, "").unwrap();
    let (got, stats) = scan(&p, Some(&blocked.join("sbx")), later());
    assert_eq!(got, vec![real(&p.join(".env"))]);
    assert!(!stats.wrote);
}

#[test]
fn stable_hash() {
    assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    assert_eq!(
        cache_name(Path::new("/p")),
        format!("envscan-{:016x}", fnv1a(b"/p"))
    );
}

#[test]
fn env_file_names() {
    for n in [".env", ".env.local", ".env.production", ".ENV"] {
        assert!(is_env_file_name(n), "{n}");
    }
    for n in [
        ".envrc",
        ".env.example",
        ".env.sample",
        ".env.template",
        "env",
        ".environment",
    ] {
        assert!(!is_env_file_name(n), "{n}");
    }
}

#[test]
fn every_git_entry_is_found_from_the_cache_too() {
    let (_t, p, cache) = setup();
    fs::create_dir_all(p.join(".git")).unwrap();
    fs::create_dir_all(p.join("vendor/lib/.git")).unwrap();
    // A submodule checkout or linked worktree: `.git` is a file.
    touch(&p.join("deep/a/b/wt/.git"));
    fs::create_dir_all(p.join("linked")).unwrap();
    symlink("/nowhere", p.join("linked/.git")).unwrap();
    // Pruned directories are not searched, for repositories either.
    fs::create_dir_all(p.join("node_modules/x/.git")).unwrap();
    let expected: Vec<PathBuf> = ["", "deep/a/b/wt/", "linked/", "vendor/lib/"]
        .iter()
        .map(|d| p.join(format!("{d}.git")))
        .collect();
    let (_, first) = scan(&p, Some(&cache), later());
    assert_eq!(first.git_entries, expected);
    let (_, cached) = scan(&p, Some(&cache), later());
    assert!(cached.reused > 0 && cached.read == 0, "{cached:?}");
    assert_eq!(cached.git_entries, expected);
    // One created later, in a directory the cache knew.
    touch(&p.join("vendor/.git"));
    let found = walk(&p, Some(&cache));
    assert!(found.git_entries.contains(&p.join("vendor/.git")));
}
