//! The home directory the user database gives this user (`getpwuid`), for
//! the credentials of an account whose `HOME` points elsewhere.
//!
//! A glibc build asks its C library, which follows `/etc/nsswitch.conf`.
//! musl reads `/etc/passwd` (and nscd) only, so a static build asks the
//! system's `getent` whenever glibc's answer could differ from musl's: when
//! `nsswitch.conf` names a source of accounts before `files` (`sss files`,
//! `compat`), or after it and the account is not in `/etc/passwd`.

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
    let local = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.dir);
    if !cfg!(target_env = "musl") {
        return AccountHome {
            home: local,
            problem: None,
        };
    }
    let conf = std::fs::read_to_string("/etc/nsswitch.conf").unwrap_or_default();
    let services = passwd_services(&conf);
    let files_first = services.first().is_some_and(|s| s == "files");
    if services.iter().all(|s| s == "files") || (files_first && local.is_some()) {
        // Where glibc would have found the same line musl read.
        return AccountHome {
            home: local,
            problem: None,
        };
    }
    match home_from_getent(uid.as_raw()) {
        Ok(home) => AccountHome { home, problem: None },
        Err(why) => AccountHome {
            home: local,
            problem: Some(format!(
                "/etc/nsswitch.conf names other sources of accounts than /etc/passwd ({}), and {why}",
                services.join(" ")
            )),
        },
    }
}

/// The sources of the `passwd` database, in order, as glibc reads
/// `nsswitch.conf`: the database name ends at a blank or a colon, the last
/// `passwd` line counts, actions (`[NOTFOUND=return]`) are not sources, and
/// without a line glibc takes `files`.
fn passwd_services(conf: &str) -> Vec<String> {
    let mut services = vec!["files".to_string()];
    for line in conf.lines() {
        let line = line.split('#').next().unwrap_or_default().trim_start();
        let end = line
            .find(|c: char| c.is_whitespace() || c == ':')
            .unwrap_or(line.len());
        if &line[..end] != "passwd" || end == line.len() {
            continue;
        }
        let mut words = String::new();
        let mut in_action = false;
        for c in line[end + 1..].chars() {
            match c {
                '[' => in_action = true,
                ']' => in_action = false,
                ':' => words.push(' '),
                c if !in_action => words.push(c),
                _ => {}
            }
            if c == ']' {
                words.push(' ');
            }
        }
        services = words.split_whitespace().map(str::to_string).collect();
    }
    services
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
        Some(0) => Ok(passwd_home(&out.stdout, uid)),
        // No such account.
        Some(2) => Ok(None),
        _ => Err(format!("{getent} failed ({})", out.status)),
    }
}

/// The home directory of the first `passwd` line
/// (`name:pw:uid:gid:gecos:home:shell`) of `out`, if it is `uid`'s.
fn passwd_home(out: &[u8], uid: u32) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let line = out.split(|&b| b == b'\n').next().unwrap_or_default();
    let fields: Vec<&[u8]> = line.split(|&b| b == b':').collect();
    let [_, _, id, _, _, home, _] = fields.as_slice() else {
        return None;
    };
    (*id == uid.to_string().as_bytes() && !home.is_empty())
        .then(|| PathBuf::from(std::ffi::OsStr::from_bytes(home)))
}

#[cfg(test)]
mod tests {
    use super::{passwd_home, passwd_services};
    use std::path::PathBuf;

    #[test]
    fn the_passwd_sources_are_read_as_glibc_reads_them() {
        let sources = |conf: &str| passwd_services(conf).join(" ");
        assert_eq!(sources("passwd: files\ngroup: files ldap\n"), "files");
        assert_eq!(sources("# passwd: ldap\npasswd:\tfiles # ldap\n"), "files");
        assert_eq!(sources("passwd:         files systemd\n"), "files systemd");
        assert_eq!(
            sources("passwd: files [NOTFOUND=return] sss\n"),
            "files sss"
        );
        assert_eq!(
            sources("passwd: files [ NOTFOUND = return ] sss\n"),
            "files sss"
        );
        assert_eq!(sources("passwd: sss files\n"), "sss files");
        assert_eq!(sources("passwd: compat\n"), "compat");
        // The name ends at a blank or a colon.
        assert_eq!(sources("passwd : files ldap\n"), "files ldap");
        assert_eq!(sources("passwd\tfiles ldap\n"), "files ldap");
        assert_eq!(sources("  passwd:ldap files\n"), "ldap files");
        assert_eq!(sources("passwdx: ldap\n"), "files");
        // The last line counts; none means files.
        assert_eq!(sources("passwd: ldap\npasswd: files\n"), "files");
        assert_eq!(sources("passwd: files\npasswd: files sss\n"), "files sss");
        assert_eq!(sources(""), "files");
        assert_eq!(sources("passwd:\n"), "");
    }

    #[test]
    fn a_passwd_line_names_the_home_of_its_uid_only() {
        let home = |line: &[u8], uid| passwd_home(line, uid);
        assert_eq!(
            home(b"ann:x:1000:1000:Ann,,,:/home/ann:/bin/bash\n", 1000),
            Some(PathBuf::from("/home/ann"))
        );
        assert_eq!(home(b"ann:*:1000:100::/h:\n", 1000), Some("/h".into()));
        assert_eq!(home(b"ann:x:1000:1000::/home/ann:/bin/sh\n", 1001), None);
        assert_eq!(home(b"ann:x:10000:1000::/home/ann:/bin/sh\n", 1000), None);
        assert_eq!(home(b"ann:x:1000:1000::/home/ann\n", 1000), None);
        assert_eq!(home(b"ann:x:1000:1000:::/bin/sh\n", 1000), None);
        assert_eq!(
            home(
                b"ann:x:1000:1::/a:/bin/sh\nann:x:1000:1::/b:/bin/sh\n",
                1000
            ),
            Some("/a".into())
        );
        assert_eq!(home(b"", 1000), None);
    }
}
