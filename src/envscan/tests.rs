//! The `.env` walk and its cache, on real directory trees.

use super::cache::*;
use super::*;
use std::fs;
use std::fs::File;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::os::unix::process::CommandExt;

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
    let format = [MAGIC, b"\0", FORMAT, b"\0"].concat();
    for (from, to) in [
        (&format[..], &b"sbx-envscan\x003\x00"[..]),
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
    ] {
        b.extend_from_slice(tok);
        b.push(0);
    }
    b.extend_from_slice(&0i128.to_le_bytes());
    b.extend_from_slice(&u64::MAX.to_le_bytes());
    b.extend_from_slice(&[0; 64]);
    assert!(decode(&b, &p).is_none());
    // Nor does a huge count of names.
    let mut b = encode(&p, later(), &honest()[..1]);
    let names = b.len() - 8;
    b[names..names + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode(&b, &p).is_none());
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
    for n in [
        ".env",
        ".env.local",
        ".env.production",
        ".ENV",
        ".Env.Local",
        ".env.",
    ] {
        assert!(is_env_file_name(n.as_bytes()), "{n}");
    }
    // Not UTF-8: judged by its bytes like any other name.
    assert!(is_env_file_name(b".env.\xff"));
    assert!(!is_env_file_name(b".envx\xff"));
    for n in [
        ".envrc",
        ".env.example",
        ".env.sample",
        ".env.template",
        ".ENV.Example",
        "env",
        ".en",
        "",
        ".environment",
    ] {
        assert!(!is_env_file_name(n.as_bytes()), "{n}");
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

/// The cache file the previous layout (format 3: decimal tokens, each
/// ended by a NUL byte) wrote for `records`.
fn encode_format_3(project: &Path, walk: i128, records: &[(Vec<u8>, Dir)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut tok = |b: &[u8]| {
        out.extend_from_slice(b);
        out.push(0);
    };
    tok(MAGIC);
    tok(b"3");
    tok(env!("CARGO_PKG_VERSION").as_bytes());
    tok(project.as_os_str().as_bytes());
    tok(walk.to_string().as_bytes());
    tok(records.len().to_string().as_bytes());
    for (rel, d) in records {
        tok(rel);
        for n in [
            d.stamp.dev.into(),
            d.stamp.ino.into(),
            d.stamp.mtime,
            d.stamp.ctime,
        ] {
            tok(n.to_string().as_bytes());
        }
        for list in [&d.subdirs, &d.envs] {
            tok(list.len().to_string().as_bytes());
            for name in list {
                tok(name);
            }
        }
    }
    out
}

/// The records an honest walk of `p` (holding `a/.env`) caches.
fn records_of_a_env(p: &Path) -> Vec<(Vec<u8>, Dir)> {
    let stamp = |d: &Path| Stamp::of(&fs::symlink_metadata(d).unwrap());
    let dir = |stamp, subdirs: &[&[u8]], envs: &[&[u8]]| Dir {
        stamp,
        subdirs: subdirs.iter().map(|n| n.to_vec()).collect(),
        envs: envs.iter().map(|n| n.to_vec()).collect(),
        unreadable: false,
    };
    vec![
        (Vec::new(), dir(stamp(p), &[b"a", b"b"], &[])),
        (b"a".to_vec(), dir(stamp(&p.join("a")), &[], &[b".env"])),
        (b"b".to_vec(), dir(stamp(&p.join("b")), &[], &[])),
    ]
}

#[test]
fn cache_of_the_previous_format_is_ignored() {
    let (_t, p, cache) = setup();
    touch(&p.join("a/.env"));
    fs::create_dir(p.join("b")).unwrap();
    let file = cache_file(&p, &cache);
    fs::create_dir_all(&cache).unwrap();
    // A true account of the tree, in the old layout: not read at all.
    let old = encode_format_3(&p, later(), &records_of_a_env(&p));
    assert!(decode(&old, &p).is_none());
    fs::write(&file, &old).unwrap();
    let walk = later();
    let (got, stats) = scan(&p, Some(&cache), walk);
    assert_eq!(got, vec![real(&p.join("a/.env"))]);
    assert_eq!((stats.read, stats.reused, stats.wrote), (3, 0, true));
    // Replaced by the current layout, which the next walk uses.
    let new = fs::read(&file).unwrap();
    assert_eq!(new, encode(&p, walk, &records_of_a_env(&p)));
    let (got, stats) = scan(&p, Some(&cache), later());
    assert_eq!(got, vec![real(&p.join("a/.env"))]);
    assert_eq!((stats.read, stats.reused, stats.wrote), (0, 3, false));
}

#[test]
fn truncated_or_corrupt_cache_is_ignored() {
    let (_t, p, cache) = setup();
    touch(&p.join("a/.env"));
    fs::create_dir(p.join("b")).unwrap();
    let want = vec![real(&p.join("a/.env"))];
    let file = cache_file(&p, &cache);
    fs::create_dir_all(&cache).unwrap();
    let honest = records_of_a_env(&p);
    let good = encode(&p, later(), &honest);
    assert!(decode(&good, &p).is_some());
    let full_walk = |bytes: &[u8]| {
        assert!(decode(bytes, &p).is_none());
        fs::write(&file, bytes).unwrap();
        let (got, stats) = scan(&p, Some(&cache), later());
        assert_eq!(got, want);
        assert!(stats.read == 3 && stats.wrote, "{stats:?}");
    };
    // Cut anywhere.
    for len in 0..good.len() {
        assert!(decode(&good[..len], &p).is_none(), "{len}");
    }
    full_walk(&good[..good.len() / 3]);
    // Anything after the last record.
    full_walk(&[&good[..], b"\0"].concat());
    // A record count one off.
    let count = good.len()
        - honest
            .iter()
            .map(|(rel, d)| record_len(rel, d))
            .sum::<usize>()
        - 8;
    for n in [2u64, 4, u64::from(u32::MAX) + 3] {
        let mut bad = good.clone();
        bad[count..count + 8].copy_from_slice(&n.to_le_bytes());
        full_walk(&bad);
    }
    // Records out of order, or twice.
    let mut swapped = records_of_a_env(&p);
    swapped.swap(1, 2);
    full_walk(&encode(&p, later(), &swapped));
    let mut twice = records_of_a_env(&p);
    twice.insert(1, records_of_a_env(&p).remove(1));
    full_walk(&encode(&p, later(), &twice));
    // A component `.` or `..` or empty, past a prefix shared with the
    // previous path.
    for bad in [&b"a/.."[..], b"a/", b"a//b", b"a/./b"] {
        let mut r = records_of_a_env(&p);
        let mut extra = records_of_a_env(&p).remove(2);
        extra.0 = bad.to_vec();
        r.insert(2, extra);
        full_walk(&encode(&p, later(), &r));
    }
    // Names out of order, twice, empty, with a NUL.
    for names in [
        vec![b"b".to_vec(), b"a".to_vec()],
        vec![b"a".to_vec(), b"a".to_vec(), b"b".to_vec()],
        vec![b"a".to_vec(), b"b".to_vec(), Vec::new()],
        vec![b"a".to_vec(), b"b".to_vec(), b"c\0".to_vec()],
    ] {
        let mut r = records_of_a_env(&p);
        r[0].1.subdirs = names;
        full_walk(&encode(&p, later(), &r));
    }
    // A path or name length past the end.
    let first = good.len()
        - honest
            .iter()
            .map(|(rel, d)| record_len(rel, d))
            .sum::<usize>();
    let mut bad = good.clone();
    bad[first..first + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    full_walk(&bad);
    let mut bad = good.clone();
    let name = first + 4 + STAMP + 8;
    bad[name..name + 2].copy_from_slice(&u16::MAX.to_le_bytes());
    full_walk(&bad);
    // Any byte changed: the file is rejected (full walk, as above), or
    // used without a panic (a stamp that no longer matches, or a name that
    // no longer does, is taken as it is: a record is trusted).
    for i in 0..good.len() {
        for flip in [0x01, 0x80, 0xff] {
            let mut bad = good.clone();
            bad[i] ^= flip;
            if decode(&bad, &p).is_some() {
                fs::write(&file, &bad).unwrap();
                scan(&p, Some(&cache), later());
            }
        }
    }
}

/// dev, ino, mtime, ctime.
const STAMP: usize = 32;

/// The length of a record in the cache file.
fn record_len(rel: &[u8], d: &Dir) -> usize {
    let names: usize = d.subdirs.iter().chain(&d.envs).map(|n| 2 + n.len()).sum();
    4 + rel.len() + STAMP + 8 + names
}

/// Top-level directories of [`varied_tree`], each with 8 subdirectories of
/// 4 more.
const VARIED: usize = 20;

/// A tree with some of everything a walk reports: 800 directories.
fn varied_tree(p: &Path, outside: &Path) {
    for i in 0..VARIED {
        for j in 0..8 {
            let d = p.join(format!("m{i}/n{j}"));
            for k in 0..4 {
                fs::create_dir_all(d.join(format!("o{k}"))).unwrap();
            }
            match (i * 8 + j) % 7 {
                0 => touch(&d.join(".env")),
                1 => touch(&d.join("o1/.env.local")),
                2 => fs::create_dir_all(d.join(".git/objects")).unwrap(),
                3 => touch(&d.join("o2/.git")),
                4 => touch(&d.join("node_modules/x/.env")),
                5 => symlink(outside.join("secret"), d.join("o3/.env")).unwrap(),
                _ => touch(&d.join(".env.example")),
            }
        }
    }
    // A bare repository.
    touch(&p.join("m3/bare.git/HEAD"));
    fs::create_dir_all(p.join("m3/bare.git/objects")).unwrap();
    fs::create_dir_all(p.join("m3/bare.git/refs")).unwrap();
}

/// Everything a walk reports.
fn report(found: Vec<PathBuf>, stats: &Stats) -> [Vec<PathBuf>; 4] {
    [
        found,
        stats.unreadable.clone(),
        stats.git_entries.clone(),
        stats.bare.clone(),
    ]
}

#[test]
fn several_workers_find_what_one_does() {
    let (t, p, cache) = setup();
    let outside = t.path().join("outside");
    touch(&outside.join("secret"));
    varied_tree(&p, &outside);
    let walk = later();
    let (one, stats) = scan_with(&p, Some(&cache), walk, 1);
    assert_eq!(
        (stats.workers, stats.read),
        (1, 1 + VARIED * (1 + 8 * 5) + 3)
    );
    let single = report(one, &stats);
    // Secrets in 2 of 7 cases, and links to one outside; 2 of 7 are
    // repositories.
    let cases = |c: &[usize]| (0..VARIED * 8).filter(|n| c.contains(&(n % 7))).count();
    assert_eq!(single[0].len(), cases(&[0, 1]) + 1);
    assert_eq!(single[2].len(), cases(&[2, 3]));
    assert_eq!(single[3], vec![p.join("m3/bare.git")]);
    let cached = fs::read(cache_file(&p, &cache)).unwrap();
    // The workers share the tree out only when one waits for work: try
    // until several took part (the first time, nearly always).
    let mut shared_out = false;
    for _ in 0..50 {
        let other = t.path().join("cache-parallel");
        let (found, stats) = scan_with(&p, Some(&other), walk, 4);
        assert_eq!(report(found, &stats), single);
        // The same cache, byte for byte.
        assert_eq!(fs::read(cache_file(&p, &other)).unwrap(), cached);
        let (found, again) = scan_with(&p, Some(&other), later(), 4);
        assert_eq!(report(found, &again), single);
        assert_eq!((again.read, again.wrote), (0, false), "{again:?}");
        if stats.workers > 1 && again.workers > 1 {
            shared_out = true;
            break;
        }
    }
    assert!(shared_out, "the walk was never shared out");
}

#[test]
fn deep_tree_keeps_few_descriptors() {
    let (_t, p, cache) = setup();
    let mut deep = p.clone();
    let mut want = Vec::new();
    for depth in 1..=300 {
        // A sibling waits on the stack while "d" is walked: a descriptor
        // per level could stay open.
        fs::create_dir_all(deep.join("e")).unwrap();
        deep.push("d");
        if depth % 100 == 0 {
            touch(&deep.join(".env"));
            want.push(real(&deep.join(".env")));
        }
    }
    want.sort();
    for workers in [1, 2] {
        let (got, stats) = scan_with(&p, Some(&cache), later(), workers);
        assert_eq!(got, want);
        assert_eq!(stats.read + stats.reused, 601);
        // One per level until the budget (one worker), none left open.
        assert!(stats.peak_fds <= walker::FD_BUDGET, "{stats:?}");
        if workers == 1 {
            assert_eq!(stats.peak_fds, walker::FD_BUDGET);
        }
        assert_eq!(stats.fds_left, 0);
    }
    let (got, stats) = scan(&p, Some(&cache), later());
    assert_eq!((got, stats.read), (want, 0));
}

/// Directories the walk may not list are reported whichever worker meets
/// them. Root lists any directory whatever its mode: as root, this test
/// runs again in a child process as `nobody`.
#[test]
fn unreadable_directories_are_reported_by_every_worker() {
    const AS_NOBODY: &str = "SBX_TEST_ENVSCAN_AS_NOBODY";
    if nix::unistd::geteuid().is_root() {
        assert!(std::env::var_os(AS_NOBODY).is_none(), "still root");
        let name = format!(
            "{}::unreadable_directories_are_reported_by_every_worker",
            module_path!().split_once("::").unwrap().1
        );
        let run = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &name, "--test-threads=1"])
            .env(AS_NOBODY, "1")
            .uid(65534)
            .gid(65534)
            .output();
        match run {
            Ok(out) => {
                let said = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success() && said.contains("1 passed"),
                    "as nobody: {said}{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            Err(e) => eprintln!("NOTE: running as root, and not as nobody either ({e}): skipped"),
        }
        return;
    }
    let (t, p, cache) = setup();
    let outside = t.path().join("outside");
    touch(&outside.join("secret"));
    varied_tree(&p, &outside);
    // Not listable; listable but not searchable; searchable only.
    let modes = [("m5/n2", 0o000), ("m11/n6/o1", 0o444), ("m17", 0o311)];
    touch(&p.join("m11/n6/o1/.env"));
    fs::create_dir_all(p.join("m11/n6/o1/sub")).unwrap();
    for (d, mode) in modes {
        fs::set_permissions(p.join(d), fs::Permissions::from_mode(mode)).unwrap();
    }
    // Restored even on failure, so that the tree can be removed.
    struct Restore<'a>(&'a Path, [(&'a str, u32); 3]);
    impl Drop for Restore<'_> {
        fn drop(&mut self) {
            for (d, _) in self.1 {
                let _ = fs::set_permissions(self.0.join(d), fs::Permissions::from_mode(0o755));
            }
        }
    }
    let _restore = Restore(&p, modes);
    let mut want: Vec<PathBuf> = modes.iter().map(|(d, _)| p.join(d)).collect();
    want.sort();
    let mut single = None;
    for workers in [1, 4, 1, 4] {
        // The first walk of each count reads everything, the second reuses
        // what it may.
        let (found, stats) =
            scan_with(&p, Some(&cache.join(workers.to_string())), later(), workers);
        assert_eq!(stats.unreadable, want, "{workers} workers");
        let got = report(found, &stats);
        assert_eq!(single.get_or_insert_with(|| got.clone()), &got);
    }
}

#[test]
fn records_sort_in_walk_order() {
    let mut paths: Vec<&[u8]> = vec![
        b"a-b", b"a/b", b"a", b"", b"a/b/c", b"ab", b"a.b", b"a/a", b"b",
    ];
    paths.sort_by(|a, b| cmp_rel(a, b));
    // A directory, then everything under it, then its next sibling; long
    // shared prefixes too.
    let want: Vec<&[u8]> = vec![
        b"", b"a", b"a/a", b"a/b", b"a/b/c", b"a-b", b"a.b", b"ab", b"b",
    ];
    assert_eq!(paths, want);
    let long = [b'x'; 40];
    let (a, b) = ([&long[..], b"/y"].concat(), [&long[..], b"-y"].concat());
    assert_eq!(cmp_rel(&a, &b), std::cmp::Ordering::Less);
    assert_eq!(cmp_rel(&a[..20], &a), std::cmp::Ordering::Less);
    assert_eq!(cmp_rel(&a, &a.clone()), std::cmp::Ordering::Equal);
}

/// A directory dated in the future (here past 2262, beyond the cache's
/// 64-bit nanoseconds) is never settled: every walk reads it again, and a
/// `.env` made there is found.
#[test]
fn a_directory_dated_past_2262_is_read_every_time() {
    let (_t, p, cache) = setup();
    fs::create_dir_all(p.join("far/inner")).unwrap();
    fs::create_dir_all(p.join("near")).unwrap();
    let year_2300 = std::time::UNIX_EPOCH + std::time::Duration::from_secs(10_413_792_000);
    let set = |d: &Path| {
        File::open(d).unwrap().set_modified(year_2300).unwrap();
    };
    set(&p.join("far"));
    let (_, first) = scan(&p, Some(&cache), later());
    assert!(first.wrote && first.read == 4, "{first:?}");
    let (_, second) = scan(&p, Some(&cache), later());
    assert_eq!((second.read, second.reused), (1, 3), "{second:?}");
    // A `.env` made there, with its time put back: found.
    touch(&p.join("far/.env"));
    set(&p.join("far"));
    let (found, _) = scan(&p, Some(&cache), later());
    assert_eq!(found, vec![real(&p.join("far/.env"))]);
}

/// A time the cache cannot hold is not written, never clamped or wrapped:
/// that directory gets no record (it is read every time), and nothing is
/// left half written.
#[test]
fn a_time_past_64_bits_gets_no_record() {
    let stamp = |mtime: i128, ctime: i128| Stamp {
        dev: 1,
        ino: 2,
        mtime,
        ctime,
    };
    let past = i128::from(i64::MAX) + 1;
    let mut out = b"kept".to_vec();
    let none = std::iter::empty::<&[u8]>();
    for bad in [
        stamp(past, 0),
        stamp(0, past),
        stamp(i128::from(i64::MIN) - 1, 0),
    ] {
        assert_eq!(
            put_record(&mut out, b"a", &bad, none.clone(), none.clone()),
            None
        );
        assert_eq!(out, b"kept");
    }
    let edge = stamp(i128::from(i64::MAX), i128::from(i64::MIN));
    assert!(put_record(&mut out, b"a", &edge, none.clone(), none).is_some());
    let (rel, body) = (b"a".as_slice(), &out[4 + 4 + 1..]);
    assert_eq!(record_rel(&out[4..]), rel);
    assert_eq!(Body::parse(body).unwrap().stamp, edge);
}

#[test]
fn real_file_agrees_with_canonicalize() {
    let t = tempfile::tempdir().unwrap();
    let base = t.path();
    touch(&base.join("a/b/.env"));
    touch(&base.join("target"));
    fs::create_dir_all(base.join("dir")).unwrap();
    symlink(base.join("a"), base.join("via")).unwrap();
    symlink("../target", base.join("a/.env.link")).unwrap();
    symlink(base.join("nowhere"), base.join(".env.gone")).unwrap();
    symlink(base.join(".env.loop"), base.join(".env.loop")).unwrap();
    symlink(base.join("dir"), base.join(".env.dir")).unwrap();
    nix::unistd::mkfifo(&base.join(".env.fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let expected = |p: &Path| match fs::canonicalize(p) {
        Ok(r) if r.is_file() => Ok(Some(r)),
        Ok(_) => Ok(None),
        Err(e) => Err(e.raw_os_error()),
    };
    for rel in [
        "a/b/.env",
        "via/b/.env",
        "a/.env.link",
        "via/.env.link",
        "a/b/../b/.env",
        "a/./b/.env",
        "a//b/.env",
        ".env.gone",
        ".env.loop",
        ".env.dir",
        ".env.fifo",
        "dir",
        "target/.env",
        "missing/.env",
    ] {
        let p = base.join(rel);
        let got = real_file(&p).map_err(|e| e.raw_os_error());
        assert_eq!(got, expected(&p), "{rel}");
    }
    #[cfg(target_os = "linux")]
    {
        assert!(normal_absolute(Path::new("/a/b")));
        for odd in ["a/b", "/a/../b", "/a/./b", "/a//b", "/a/", "/"] {
            assert!(!normal_absolute(Path::new(odd)), "{odd}");
        }
    }
}

/// The walk's arena gives back each record as written, across chunks, with
/// a record larger than a chunk among them, and none for a record that
/// could not be written.
#[test]
fn the_arena_keeps_every_record_whole() {
    use walker::{Arena, Src, CHUNK};
    let mut arena = Arena::default();
    let mut kept = Vec::new();
    for i in 0..6000usize {
        let len = if i == 3000 { CHUNK + 7 } else { 1 + i % 300 };
        let record: Vec<u8> = (0..len).map(|k| (i + k) as u8).collect();
        let src = arena
            .add(|out| {
                out.extend_from_slice(&record);
                Some(())
            })
            .unwrap();
        kept.push((src, record));
    }
    assert!(arena
        .add(|out| {
            out.extend_from_slice(b"half");
            None
        })
        .is_none());
    let mut chunks = std::collections::BTreeSet::new();
    for (src, record) in &kept {
        let Src::New(chunk, start, end) = *src else {
            panic!("not a new record");
        };
        chunks.insert(chunk);
        assert_eq!(arena.get(chunk, start, end), Some(&record[..]));
    }
    assert!(chunks.len() >= 4, "{chunks:?}");
    assert_eq!(arena.get(u32::MAX, 0, 1), None);
}
