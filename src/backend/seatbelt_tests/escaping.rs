//! Host paths reach the profile only as parameters: odd, awkward and
//! arbitrary paths, quoting of sbx's constants, and move protection.

use proptest::prelude::*;

use super::*;

#[test]
fn control_characters_and_odd_paths_are_refused() {
    for bad in [
        "/Users/t/a\nb",
        "/Users/t/a\0b",
        "/Users/t/a\tb",
        "/Users/t/\u{7f}",
        "/Users/t/\u{85}",
    ] {
        let mut p = default_policy();
        p.project = PathBuf::from(bad);
        assert!(render(&p, Path::new(SBX), None, None).is_err(), "{bad:?}");
        let mut p = default_policy();
        p.credentials[0].real = Some(PathBuf::from(bad));
        assert!(render(&p, Path::new(SBX), None, None).is_err(), "{bad:?}");
    }
    for odd in ["relative/path", "/Users/t/../x", ""] {
        let mut p = default_policy();
        p.writable.push(PathBuf::from(odd));
        assert!(render(&p, Path::new(SBX), None, None).is_err(), "{odd:?}");
    }
}

#[test]
fn lexical_variants_are_normalised() {
    for (odd, clean) in [
        ("/Users/t/./x", "/Users/t/x"),
        ("/Users/t/x/", "/Users/t/x"),
        ("//Users//t/x", "/Users/t/x"),
    ] {
        let mut p = default_policy();
        p.writable.push(PathBuf::from(odd));
        let (_, argv) = check(&plan(&p), true);
        assert!(argv.params.iter().any(|(_, v)| v == clean), "{odd:?}");
    }
    // `$HOME` with a trailing slash is the same home.
    let mut p = default_policy();
    p.home = PathBuf::from("/Users/t/");
    assert_eq!(plan(&p), plan(&default_policy()));
}

#[test]
fn root_as_home_or_project() {
    // Suffixes are never appended to `/` (that would give `//.ssh`).
    let mut p = policy_for("/", "/");
    p.writable = vec![PathBuf::from("/private/tmp")];
    for mode in [
        FsSetting::Restricted,
        FsSetting::ReadOnly,
        FsSetting::Unrestricted,
    ] {
        p.filesystem = mode;
        let (forms, argv) = check(&plan(&p), true);
        let creds = credential_filters(&forms, &argv.params);
        assert!(has(&creds, "subpath", "/.ssh"), "{mode:?}");
        assert!(has(&creds, "literal", "/.netrc"), "{mode:?}");
        assert!(!argv.profile.contains("string-append (param"), "{mode:?}");
    }
}

#[test]
fn quoting() {
    assert_eq!(quote("plain").unwrap(), r#""plain""#);
    assert_eq!(quote(r#"a "b" \c"#).unwrap(), r#""a \"b\" \\c""#);
    assert_eq!(quote("é ( ) ; #").unwrap(), "\"é ( ) ; #\"");
    for bad in ["a\nb", "a\0b", "\r", "\u{1b}[0m"] {
        assert!(quote(bad).is_err(), "{bad:?}");
    }
    // Round trip through the reader.
    for s in [r#"\"#, r#"""#, r#"\\""#, r#"x\"y"#, "a b"] {
        let forms = read_forms(&quote(s).unwrap()).unwrap();
        assert_eq!(forms, vec![Sx::Str(s.to_string())]);
    }
}

#[test]
fn ancestors_stop_at_the_root_that_holds_the_path() {
    let roots = vec![PathBuf::from("/w")];
    let got = ancestors_in_roots(
        &[
            Guarded::Path(PathBuf::from("/w/a/b/c")),
            Guarded::Path(PathBuf::from("/elsewhere/x")),
            Guarded::Path(PathBuf::from("/w")),
            Guarded::Contents(PathBuf::from("/w/p")),
        ],
        &roots,
    );
    let want: Vec<PathBuf> = ["/w", "/w/a", "/w/p", "/w/a/b"]
        .iter()
        .map(PathBuf::from)
        .collect();
    assert_eq!(got, want);
}

/// An absolute path of 1 to 4 components, each any text without `/` or
/// control characters (and not `.` or `..`).
fn any_path() -> impl Strategy<Value = String> {
    prop::collection::vec(
        "[^/\\p{Cc}]{1,10}".prop_filter("no . or ..", |s| s != "." && s != ".."),
        1..4,
    )
    .prop_map(|parts| format!("/{}", parts.join("/")))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_paths_stay_parameters(project in any_path(), home in any_path(), extra in any_path()) {
        let mut policy = policy_for(&home, &project);
        policy.writable = vec![PathBuf::from(&extra), PathBuf::from(&project)];
        for mode in [FsSetting::Restricted, FsSetting::ReadOnly, FsSetting::Unrestricted] {
            policy.filesystem = mode;
            let p = render(&policy, Path::new(SBX), None, None).unwrap();
            let (forms, argv) = check(&p, false);
            for path in [&project, &home] {
                let n = argv.params.iter().filter(|(_, v)| v == path).count();
                prop_assert_eq!(n, 1, "{} in {:?}", path, argv.params);
            }
            if mode == FsSetting::Restricted {
                let n = argv.params.iter().filter(|(_, v)| *v == extra).count();
                prop_assert_eq!(n, 1);
                let writes: Vec<String> = forms
                    .iter()
                    .filter(|f| f.head() == "allow" && f.ops() == vec!["file-write*"])
                    .flat_map(|f| path_filters(f, &argv.params))
                    .map(|(_, p)| p)
                    .collect();
                prop_assert!(writes.contains(&extra) && writes.contains(&project));
            }
            let creds = credential_filters(&forms, &argv.params);
            let ssh = format!("{home}/.ssh");
            prop_assert!(has(&creds, "subpath", &ssh));
            // The -D arguments carry each value byte for byte.
            for (name, value) in &argv.params {
                let arg = format!("{name}={value}");
                prop_assert!(p.args.iter().any(|a| a.to_str() == Some(arg.as_str())));
            }
        }
    }
}

#[test]
fn runs_later_names_match_in_any_case() {
    use super::super::escape::any_case_tail;
    assert_eq!(
        any_case_tail(".git/hooks"),
        r"/\.[gG][iI][tT]/[hH][oO][oO][kK][sS](/|$)"
    );
    assert_eq!(
        any_case_tail(".devcontainer.json"),
        r"/\.[dD][eE][vV][cC][oO][nN][tT][aA][iI][nN][eE][rR]\.[jJ][sS][oO][nN](/|$)"
    );
    // Every constant suffix gives a regex with no character left to
    // mean anything but itself.
    for tail in super::super::escape::any_case_tails() {
        let bare = tail.trim_end_matches("(/|$)");
        assert!(
            !bare.contains(['(', ')', '|', '*', '+', '?', '{', '^', '$']),
            "{tail}"
        );
    }
}
