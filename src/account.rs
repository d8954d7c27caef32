//! The home directory the user database gives this user (`getpwuid`), for
//! the credentials of an account whose `HOME` points elsewhere.
//!
//! A glibc build asks its C library, which follows `/etc/nsswitch.conf`.
//! musl never loads a name-service module, so a static build reads
//! `/etc/passwd` as glibc's `files` source does, and asks the system's
//! `getent` whenever glibc's answer could differ: when `nsswitch.conf`
//! names a source of accounts before `files` (`sss files`, `compat`), or
//! after it and the account is not in `/etc/passwd`, or has actions
//! (`[SUCCESS=continue]`). When `getent` cannot answer, it says why.

use std::path::PathBuf;

/// What the user database says of this user's home.
pub struct AccountHome {
    /// The home directory, when the database has one.
    pub home: Option<PathBuf>,
    /// Why the database could not be asked as the system would (a warning
    /// for every run: credentials under that home may stay readable).
    pub problem: Option<String>,
}

/// This user's home directory from the user database.
pub fn home() -> AccountHome {
    let uid = nix::unistd::getuid();
    if !cfg!(target_env = "musl") {
        let home = nix::unistd::User::from_uid(uid)
            .ok()
            .flatten()
            .map(|u| u.dir);
        return AccountHome {
            home,
            problem: None,
        };
    }
    let local = std::fs::read("/etc/passwd")
        .ok()
        .and_then(|text| files_home(&text, uid.as_raw()));
    let conf = std::fs::read("/etc/nsswitch.conf").unwrap_or_default();
    let sources = passwd_sources(&conf);
    let only_files = sources.names.iter().all(|s| s == "files");
    let files_first = sources.names.first().is_some_and(|s| s == "files");
    if !sources.actions && (only_files || (files_first && local.is_some())) {
        // Where glibc would have taken the same line from /etc/passwd.
        return AccountHome {
            home: local,
            problem: None,
        };
    }
    match home_from_getent(uid.as_raw()) {
        Ok(home) => AccountHome {
            home,
            problem: None,
        },
        Err(why) => AccountHome {
            home: local,
            problem: Some(format!(
                "/etc/nsswitch.conf names other sources of accounts than /etc/passwd ({}), and {why}",
                sources.names.join(" ")
            )),
        },
    }
}

/// The `passwd` line of `nsswitch.conf`.
struct Sources {
    /// The sources, in order.
    names: Vec<String>,
    /// Whether it has actions (`[NOTFOUND=return]`): then which source
    /// answers is left to glibc.
    actions: bool,
}

/// The `passwd` sources of an `nsswitch.conf`, as glibc reads it: bytes,
/// ASCII blanks (C's `isspace`), comments from `#`, the database name
/// ending at a blank or a colon, the last `passwd` line counting, and
/// `files` without one.
fn passwd_sources(conf: &[u8]) -> Sources {
    let blank = |b: &u8| b" \t\n\x0b\x0c\r".contains(b);
    let mut found = Sources {
        names: vec!["files".to_string()],
        actions: false,
    };
    for line in conf.split(|&b| b == b'\n') {
        let line = line.split(|&b| b == b'#').next().unwrap_or_default();
        let start = line.iter().position(|b| !blank(b)).unwrap_or(line.len());
        let line = &line[start..];
        let end = line
            .iter()
            .position(|b| blank(b) || *b == b':')
            .unwrap_or(line.len());
        if &line[..end] != b"passwd" || end == line.len() {
            continue;
        }
        let mut words = Vec::new();
        let mut actions = false;
        let mut in_action = false;
        for &b in &line[end + 1..] {
            match b {
                b'[' => (in_action, actions) = (true, true),
                b']' => {
                    in_action = false;
                    words.push(b' ');
                }
                b':' => words.push(b' '),
                _ if in_action => {}
                _ => words.push(b),
            }
        }
        found = Sources {
            names: words
                .split(blank)
                .filter(|w| !w.is_empty())
                .map(|w| String::from_utf8_lossy(w).into_owned())
                .collect(),
            actions,
        };
    }
    found
}

/// The home of `uid` in `/etc/passwd` as glibc's `files` source reads
/// it: blank and comment lines skipped, and NIS `+`/`-` lines too (musl's
/// own lookup would take a `#old:x:UID:...` line).
fn files_home(text: &[u8], uid: u32) -> Option<PathBuf> {
    text.split(|&b| b == b'\n')
        .map(|line| {
            let start = line
                .iter()
                .position(|b| *b != b' ' && *b != b'\t')
                .unwrap_or(line.len());
            &line[start..]
        })
        .filter(|line| !matches!(line.first(), None | Some(b'#' | b'+' | b'-')))
        .find_map(|line| passwd_home(line, uid))
}

/// The home directory `getent passwd UID` names (the system's C library,
/// with every source it is configured for); `None` when it knows no such
/// account.
fn home_from_getent(uid: u32) -> Result<Option<PathBuf>, String> {
    let getent = ["/usr/bin/getent", "/bin/getent"]
        .into_iter()
        .find(|p| std::path::Path::new(p).is_file())
        .ok_or("there is no getent in /usr/bin or /bin to ask them")?;
    let out = std::process::Command::new(getent)
        .args(["passwd", &uid.to_string()])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("{getent} could not be run: {e}"))?;
    match out.status.code() {
        Some(0) => {
            let first = out.stdout.split(|&b| b == b'\n').next().unwrap_or_default();
            passwd_home(first, uid)
                .map(Some)
                .ok_or_else(|| format!("{getent} gave no line sbx can read"))
        }
        // No such account.
        Some(2) => Ok(None),
        _ => Err(format!("{getent} failed ({})", out.status)),
    }
}

/// The home directory of a `passwd` line (`name:pw:uid:gid:gecos:home:shell`)
/// if it is `uid`'s.
fn passwd_home(line: &[u8], uid: u32) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let fields: Vec<&[u8]> = line.split(|&b| b == b':').collect();
    let [_, _, id, _, _, home, _] = fields.as_slice() else {
        return None;
    };
    (*id == uid.to_string().as_bytes() && !home.is_empty())
        .then(|| PathBuf::from(std::ffi::OsStr::from_bytes(home)))
}

#[cfg(test)]
mod tests {
    use super::{files_home, passwd_home, passwd_sources};
    use std::path::PathBuf;

    #[test]
    fn the_passwd_sources_are_read_as_glibc_reads_them() {
        let sources = |conf: &[u8]| passwd_sources(conf).names.join(" ");
        assert_eq!(sources(b"passwd: files\ngroup: files ldap\n"), "files");
        assert_eq!(sources(b"# passwd: ldap\npasswd:\tfiles # ldap\n"), "files");
        assert_eq!(sources(b"passwd:         files systemd\n"), "files systemd");
        assert_eq!(
            sources(b"passwd: files [NOTFOUND=return] sss\n"),
            "files sss"
        );
        assert_eq!(
            sources(b"passwd: files [ NOTFOUND = return ] sss\n"),
            "files sss"
        );
        assert_eq!(sources(b"passwd: sss files\n"), "sss files");
        assert_eq!(sources(b"passwd: compat\n"), "compat");
        // The name ends at a blank or a colon.
        assert_eq!(sources(b"passwd : files ldap\n"), "files ldap");
        assert_eq!(sources(b"passwd\tfiles ldap\n"), "files ldap");
        assert_eq!(sources(b"  passwd:ldap files\n"), "ldap files");
        assert_eq!(sources(b"passwdx: ldap\n"), "files");
        // The last line counts; none means files.
        assert_eq!(sources(b"passwd: ldap\npasswd: files\n"), "files");
        assert_eq!(sources(b"passwd: files\npasswd: files sss\n"), "files sss");
        assert_eq!(sources(b""), "files");
        assert_eq!(sources(b"passwd:\n"), "");
        // Bytes, not text: a Latin-1 comment, a multi-byte space.
        assert_eq!(sources(b"# J\xfcrgen\npasswd: files sss\n"), "files sss");
        assert_eq!(sources("passwd\u{a0}files sss\n".as_bytes()), "files");
        assert_eq!(
            sources("passwd: files\u{a0}sss\n".as_bytes()),
            "files\u{a0}sss"
        );
        // Actions are told apart.
        assert!(!passwd_sources(b"passwd: files sss\n").actions);
        assert!(passwd_sources(b"passwd: files [SUCCESS=continue] sss\n").actions);
    }

    #[test]
    fn the_files_source_skips_comments_and_nis_lines() {
        let text = b"#old:x:1000:1000::/old:/bin/sh\n+old:x:1000:1::/nis:/bin/sh\n-x\n\n  ann:x:1000:1000::/home/ann:/bin/sh\n";
        assert_eq!(files_home(text, 1000), Some(PathBuf::from("/home/ann")));
        assert_eq!(files_home(text, 1001), None);
        assert_eq!(files_home(b"", 0), None);
    }

    #[test]
    fn a_passwd_line_names_the_home_of_its_uid_only() {
        let home = |line: &[u8], uid| passwd_home(line, uid);
        assert_eq!(
            home(b"ann:x:1000:1000:Ann,,,:/home/ann:/bin/bash", 1000),
            Some(PathBuf::from("/home/ann"))
        );
        assert_eq!(home(b"ann:*:1000:100::/h:", 1000), Some("/h".into()));
        assert_eq!(
            home(b"ann:*:1000:100::/h:/bin/sh\r", 1000),
            Some("/h".into())
        );
        assert_eq!(home(b"ann:x:1000:1000::/home/ann:/bin/sh", 1001), None);
        assert_eq!(home(b"ann:x:10000:1000::/home/ann:/bin/sh", 1000), None);
        assert_eq!(home(b"ann:x:1000:1000::/home/ann", 1000), None);
        assert_eq!(home(b"ann:x:1000:1000:::/bin/sh", 1000), None);
        assert_eq!(home(b"", 1000), None);
    }
}
