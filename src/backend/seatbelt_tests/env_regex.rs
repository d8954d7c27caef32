//! The `.env` regex, run through the `regex` crate as Seatbelt would build it.

use super::*;

/// What `regex-quote` does: a backslash before each ERE metacharacter.
fn regex_quote(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if ".^$*+?()[]{}|\\".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Evaluate a `(regex ...)` filter as Seatbelt would build it.
fn regex_of(filter: &Sx, params: &[(String, String)]) -> regex::Regex {
    let text = match filter.list() {
        [Sx::Atom(r), Sx::Raw(raw)] if r == "regex" => raw.clone(),
        [Sx::Atom(r), Sx::List(parts)] if r == "regex" => {
            assert_eq!(parts[0].atom(), Some("string-append"));
            parts[1..]
                .iter()
                .map(|p| match p {
                    Sx::Str(s) | Sx::Raw(s) => s.clone(),
                    Sx::List(l) => {
                        assert_eq!(l[0].atom(), Some("regex-quote"));
                        regex_quote(&eval(&l[1], params).unwrap())
                    }
                    Sx::Atom(a) => panic!("atom {a}"),
                })
                .collect()
        }
        other => panic!("not a regex filter: {other:?}"),
    };
    regex::Regex::new(&text).unwrap()
}

/// Whether the profile's `.env` rule denies `path`.
fn env_denied(policy: &Policy) -> impl Fn(&str) -> bool {
    let (forms, argv) = check(&plan(policy), true);
    let rule = forms
        .iter()
        .find(|f| {
            f.head() == "deny"
                && f.ops().contains(&"file-read*")
                && f.filters().iter().any(|x| {
                    x.list().first().and_then(Sx::atom) == Some("require-all")
                        && x.list().get(1).and_then(|r| r.list().first()?.atom()) == Some("regex")
                })
        })
        .expect("no .env rule")
        .clone();
    assert_eq!(rule.head(), "deny");
    for op in [
        "file-read*",
        "file-read-data",
        "file-read-metadata",
        "file-write-unlink",
        "file-link",
        "file-clone",
    ] {
        assert!(rule.ops().contains(&op), "{op}");
    }
    let all = rule.filters()[0].list().to_vec();
    assert_eq!(all[0].atom(), Some("require-all"));
    let env = regex_of(&all[1], &argv.params);
    let not = all[2].list();
    assert_eq!(not[0].atom(), Some("require-not"));
    let template = regex_of(&not[1], &argv.params);
    move |path: &str| env.is_match(path) && !template.is_match(path)
}

#[test]
fn env_regex_matches_what_it_should() {
    let denied = env_denied(&default_policy());
    for yes in [
        "/.env",
        "/.ENV",
        "/.Env",
        "/a/b/.env",
        "/a/b/.ENV.local",
        "/.env.production",
        "/sub dir/.env.local",
    ] {
        assert!(denied(&format!("{PROJECT}{yes}")), "{yes}");
    }
    for no in [
        "/.envrc",
        "/env",
        "/.env.example",
        "/.ENV.Example",
        "/a/.env.sample",
        "/.env.template",
        "/.environment",
        "/.env/x",
        "/a.env",
        "/x.env",
    ] {
        assert!(!denied(&format!("{PROJECT}{no}")), "{no}");
    }
    assert!(!denied("/Users/t/projother/.env"));
    assert!(!denied("/Users/t/.env"));
    assert!(!denied(".env"));
}

#[test]
fn env_regex_quotes_the_project_root() {
    let root = "/Users/t/my.proj+1 (x)";
    let denied = env_denied(&policy_for(HOME, root));
    assert!(denied(&format!("{root}/.env")));
    assert!(denied(&format!("{root}/a/.env.local")));
    // Unquoted, `.` would match any character and `+` repeat the `j`.
    assert!(!denied("/Users/t/myXproj+1 (x)/.env"));
    assert!(!denied("/Users/t/my.projj1 (x)/.env"));
    assert!(!denied("/Users/t/my.proj+1 x/.env"));

    let denied = env_denied(&awkward_policy());
    assert!(denied(&format!("{AWKWARD}/.env")));
    assert!(!denied(&format!("{AWKWARD}/.env.example")));
}

#[test]
fn env_regex_for_the_root_directory() {
    let mut policy = default_policy();
    policy.project = PathBuf::from("/");
    policy.cwd = PathBuf::from("/");
    policy.writable = vec![PathBuf::from("/private/tmp")];
    policy.protected.clear();
    let denied = env_denied(&policy);
    assert!(denied("/.env"));
    assert!(denied("/a/b/.env.local"));
    assert!(!denied("/a/.env.example"));
}
