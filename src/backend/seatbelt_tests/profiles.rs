//! The profile of each filesystem mode and of extra denies, against their
//! golden files.

use super::*;

#[test]
fn default_profile() {
    let p = plan(&default_policy());
    let (forms, argv) = check(&p, true);
    assert_eq!(argv.command, vec!["/bin/echo", "hi"]);
    // The environment, with this run's own TMPDIR.
    let mut env = default_policy().env;
    env.set.push(("TMPDIR".into(), RUN_DIR.into()));
    env.set.push(("TMUX_TMPDIR".into(), RUN_DIR.into()));
    env.set
        .push(("SCREENDIR".into(), format!("{RUN_DIR}/.screen")));
    assert_eq!(p.env, Some(env));
    assert_eq!(p.tmpdir.as_deref(), Some(Path::new(RUN_DIR)));
    assert!(p.placeholder.is_none() && p.create.is_empty());
    let params = &argv.params;
    default_writes(&forms, params);
    default_credentials(&forms, params);
    default_protected(&forms, params);
    default_move_protection(&forms, params);
    default_mach(&forms, &argv);
    golden("seatbelt-default.sb", &p);
}

/// The command's own Unix sockets: bound, accepted on and reached in this
/// run's directory only; no socket file enters or leaves it; in the
/// temporary directories (everywhere but the run's directory and the
/// project) no directory or symbolic link is made and no directory
/// removed; other runs' directories untouchable. Without a run directory
/// (or in read-only mode) no Unix socket at all.
#[test]
fn own_sockets_stay_in_the_runs_tmpdir() {
    let p = plan(&default_policy());
    let (forms, argv) = check(&p, true);
    let value = |name: &str| {
        argv.params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    };
    assert_eq!(value("OWN_TMPDIR").as_deref(), Some(RUN_DIR));
    assert_eq!(value("OWN_TMPDIR_PARENT").as_deref(), Some(RUNS));
    let own: Vec<&Sx> = forms
        .iter()
        .filter(|f| f.head() == "allow" && f.ops().iter().any(|o| o.starts_with("network")))
        .collect();
    assert_eq!(own.len(), 2, "{own:?}");
    for f in &own {
        assert_eq!(f.head(), "allow");
        assert!(f.filters().iter().all(|x| checks::is_own_socket_filter(x)));
    }
    let text = &argv.profile;
    for rule in [
        "(allow system-socket (socket-domain AF_UNIX))",
        r#"(allow file-write* (subpath (param "OWN_TMPDIR")))"#,
        r#"(deny file-write-create file-write-unlink (require-all (vnode-type SOCKET) (require-not (subpath (param "OWN_TMPDIR")))))"#,
        "(deny file-link file-clone (require-any (vnode-type SOCKET) (vnode-type SYMLINK) (vnode-type DIRECTORY)))",
        r#"(deny file-write-unlink file-write-create (literal (param "OWN_TMPDIR")))"#,
        r#"(deny file-read* file-read-data file-read-metadata file-read-xattr file-write* file-write-unlink file-link file-clone (require-all (subpath (param "OWN_TMPDIR_PARENT")) (require-not (literal (param "OWN_TMPDIR_PARENT"))) (require-not (subpath (param "OWN_TMPDIR")))))"#,
        "(deny file-write-create\n  (require-all\n    (require-any (vnode-type DIRECTORY) (vnode-type SYMLINK))\n    (require-not (subpath (param \"OWN_TMPDIR\")))\n    (require-not (subpath (param \"PROJECT_ROOT\")))))",
        "(deny file-write-unlink\n  (require-all\n    (vnode-type DIRECTORY)\n    (require-not (subpath (param \"OWN_TMPDIR\")))\n    (require-not (subpath (param \"PROJECT_ROOT\")))))",
    ] {
        assert!(text.contains(rule), "{rule}\n{text}");
    }
    // Without a directory made for the run, and in read-only mode: none.
    for p in [
        render(&default_policy(), Path::new(SBX), None, None).unwrap(),
        plan(&read_only_policy()),
    ] {
        let text = p.profile.as_deref().unwrap();
        assert!(!text.contains("unix-socket (subpath") && !text.contains("AF_UNIX"));
        assert!(!text.contains("OWN_TMPDIR") && p.tmpdir.is_none());
        assert!(!p.env.unwrap().set.iter().any(|(k, _)| k == "TMPDIR"));
    }
}

/// With home writable, the directories where container engines keep their
/// sockets, and the directories above them, cannot move (into `TMPDIR`).
#[test]
fn host_socket_directories_cannot_move_when_home_is_writable() {
    let mut policy = default_policy();
    policy.writable.push(PathBuf::from(HOME));
    let p = plan(&policy);
    let (forms, argv) = check(&p, true);
    let unlink = unlink_filters(&forms, &argv.params);
    for dir in [
        "/Users/t/.docker",
        "/Users/t/.docker/run",
        "/Users/t/.colima",
        "/Users/t/Library/Group Containers/2BUA8C4S2C.com.1password/t",
    ] {
        assert!(has(&unlink, "literal", dir), "{dir}: {unlink:?}");
    }
    // Home itself is a writable root: it can move no more than it could.
    assert!(has(&unlink, "literal", HOME));
    // Without own sockets, nothing of theirs.
    policy.own_sockets = None;
    let args = format!("{:?}", plan(&policy).args);
    assert!(!args.contains("/.docker/run") && !args.contains("1password"));
    assert!(format!("{:?}", p.args).contains("/.docker/run"));
}

fn default_writes(forms: &[Sx], params: &[(String, String)]) {
    // Writable roots, by value.
    let writes: Vec<(String, String)> = forms
        .iter()
        .filter(|f| f.head() == "allow" && f.ops() == vec!["file-write*"])
        .flat_map(|f| path_filters(f, params))
        .collect();
    let want: Vec<(String, String)> = ["/private/tmp", PROJECT, TMPDIR, RUN_DIR]
        .iter()
        .map(|p| ("subpath".to_string(), p.to_string()))
        .collect();
    assert_eq!(writes, want);
}

fn default_credentials(forms: &[Sx], params: &[(String, String)]) {
    // Credentials: subpath for directories, literal for files, both when
    // missing; both spellings of the symlinked one.
    let creds = credential_filters(forms, params);
    for dir in [".ssh", ".aws", "Library/Keychains"] {
        let path = format!("{HOME}/{dir}");
        assert!(has(&creds, "subpath", &path), "{dir}");
        assert!(!has(&creds, "literal", &path), "{dir}");
    }
    assert!(has(&creds, "subpath", "/Users/t/dotfiles/aws"));
    for file in [".netrc", ".docker/config.json"] {
        let path = format!("{HOME}/{file}");
        assert!(has(&creds, "literal", &path), "{file}");
        assert!(!has(&creds, "subpath", &path), "{file}");
    }
    for missing in [".gnupg", ".config/gh", ".kube", ".git-credentials"] {
        let path = format!("{HOME}/{missing}");
        assert!(has(&creds, "literal", &path) && has(&creds, "subpath", &path));
    }
    let cred_rule = forms
        .iter()
        .find(|f| f.head() == "deny" && f.ops().contains(&"file-read-metadata"))
        .unwrap();
    for op in [
        "file-read*",
        "file-read-data",
        "file-read-metadata",
        "file-read-xattr",
        "file-write*",
        "file-write-unlink",
        "file-link",
        "file-clone",
    ] {
        assert!(cred_rule.ops().contains(&op), "{op}");
    }
}

fn default_protected(forms: &[Sx], params: &[(String, String)]) {
    // "Runs later" paths: literal and subpath, denied for writes, after the
    // write allows.
    let protected: Vec<(String, String)> = forms
        .iter()
        .filter(|f| f.head() == "deny" && f.ops() == vec!["file-write*"])
        .flat_map(|f| path_filters(f, params))
        .collect();
    for rel in [
        ".git/hooks",
        ".git/config",
        ".envrc",
        ".vscode",
        ".sbx.toml",
    ] {
        let path = format!("{PROJECT}/{rel}");
        assert!(
            has(&protected, "literal", &path) && has(&protected, "subpath", &path),
            "{rel}"
        );
    }
}

fn default_move_protection(forms: &[Sx], params: &[(String, String)]) {
    // Move protection: the project root and `.git` cannot be renamed;
    // home is not writable, so its directories need nothing.
    let unlink = unlink_filters(forms, params);
    assert_eq!(
        unlink,
        vec![
            ("literal".to_string(), PROJECT.to_string()),
            ("literal".to_string(), format!("{PROJECT}/.git")),
        ]
    );
}

fn default_mach(forms: &[Sx], argv: &Argv) {
    // Mach: the user lookup, nothing for the network.
    let mach = mach_allowed(forms);
    assert!(mach
        .iter()
        .any(|m| m == "com.apple.system.opendirectoryd.libinfo"));
    for net in [
        "com.apple.SecurityServer",
        "com.apple.dnssd.service",
        "com.apple.trustd",
    ] {
        assert!(!mach.iter().any(|m| m == net), "{net}");
    }
    assert!(network_allows(forms).is_empty());
    assert!(!argv.profile.contains("mDNSResponder"));
    assert!(argv.profile.contains("\n(allow file-read*)\n"));
}

#[test]
fn read_only_profile() {
    let p = plan(&read_only_policy());
    let (forms, argv) = check(&p, true);
    let params = &argv.params;
    let text = &argv.profile;
    assert!(!text.contains("(allow file-read*)"), "unscoped read");
    assert!(text.contains("(allow file-read* (literal \"/\"))"));
    let reads: Vec<(String, String)> = forms
        .iter()
        .filter(|f| f.head() == "allow" && f.ops() == vec!["file-read*"])
        .flat_map(|f| path_filters(f, params))
        .collect();
    assert!(has(&reads, "subpath", PROJECT));
    assert!(has(&reads, "subpath", "/usr/lib"));
    // The xcrun shims' developer directory: read and loaded from.
    assert!(has(&reads, "subpath", XCODE));
    let code: Vec<(String, String)> = forms
        .iter()
        .filter(|f| f.head() == "allow" && f.ops() == vec!["file-map-executable"])
        .flat_map(|f| path_filters(f, params))
        .collect();
    assert!(has(&code, "subpath", XCODE) && has(&code, "subpath", PROJECT));
    assert!(!reads.iter().any(|(_, p)| p == HOME || p == "/System"));
    // Metadata on the project's ancestors, not their contents.
    let meta: Vec<(String, String)> = forms
        .iter()
        .filter(|f| f.head() == "allow" && f.ops() == vec!["file-read-metadata"])
        .flat_map(|f| path_filters(f, params))
        .collect();
    assert!(has(&meta, "literal", HOME) && has(&meta, "literal", "/Users"));
    // Writes: only device sinks.
    for form in forms.iter().filter(|f| f.head() == "allow") {
        if form.ops().iter().any(|o| o.starts_with("file-write")) {
            for t in form.texts() {
                assert!(
                    t.starts_with("/dev/") || t.starts_with("^/dev/"),
                    "{form:?}"
                );
            }
        }
    }
    // Exactly one mach service: the user lookup.
    let mach_rules: Vec<&Sx> = forms
        .iter()
        .filter(|f| f.head() == "allow" && f.ops().contains(&"mach-lookup"))
        .collect();
    assert_eq!(mach_rules.len(), 1);
    assert_eq!(
        mach_allowed(&forms),
        vec!["com.apple.system.opendirectoryd.libinfo"]
    );
    assert!(network_allows(&forms).is_empty());
    assert!(!params
        .iter()
        .any(|(_, v)| v == TMPDIR || v == "/private/tmp"));

    // The network is forced off.
    let mut with_net = read_only_policy();
    with_net.network = Network::Allow;
    assert_eq!(plan(&with_net), p);

    // A working directory outside the project is readable too.
    let mut elsewhere = read_only_policy();
    elsewhere.cwd = PathBuf::from("/Users/t/other/dir");
    let (forms, argv) = check(&plan(&elsewhere), true);
    let reads: Vec<(String, String)> = forms
        .iter()
        .filter(|f| f.head() == "allow" && f.ops() == vec!["file-read*"])
        .flat_map(|f| path_filters(f, &argv.params))
        .collect();
    assert!(has(&reads, "subpath", "/Users/t/other/dir"));

    golden("seatbelt-readonly.sb", &p);
}

#[test]
fn fs_false_profile() {
    let p = plan(&fs_false_policy());
    let (forms, argv) = check(&p, true);
    let text = &argv.profile;
    let write = text.find("(allow file-write* (subpath \"/\"))").unwrap();
    let link = text
        .find("(allow file-link file-clone (subpath \"/\"))")
        .unwrap();
    assert!(text.contains("\n(allow file-read*)\n"));
    let creds = credential_filters(&forms, &argv.params);
    assert!(has(&creds, "subpath", "/Users/t/.ssh"));
    assert!(text.find("(deny file-read* file-read-data").unwrap() > write);
    // Links and clones of credentials stay denied: the deny comes after.
    assert!(text.find("(deny file-read* file-read-data").unwrap() > link);
    // Everything is writable, so every directory above a credential is
    // protected against renaming.
    let unlink = unlink_filters(&forms, &argv.params);
    for dir in [
        "/Users",
        HOME,
        "/Users/t/.config",
        "/Users/t/Library",
        PROJECT,
    ] {
        assert!(has(&unlink, "literal", dir), "{dir}");
    }
    assert!(!has(&unlink, "literal", "/"));
    golden("seatbelt-fs-false.sb", &p);
}

#[test]
fn deny_extra_profile() {
    let p = plan(&deny_extra_policy());
    let (forms, argv) = check(&p, true);
    let params = &argv.params;
    let creds = credential_filters(&forms, params);
    assert!(has(&creds, "subpath", "/Users/t/proj/secrets"));
    assert!(has(&creds, "literal", "/Users/t/work notes/token.txt"));
    assert!(has(&creds, "subpath", "/Users/t/work notes/token.txt"));
    let unlink = unlink_filters(&forms, params);
    for dir in [PROJECT, "/Users/t/proj/.git", "/Users/t/proj/tools"] {
        assert!(has(&unlink, "literal", dir), "{dir}");
    }
    // Found `.env` files are denied by name as well as by the regex.
    let env: Vec<(String, String)> = forms
        .iter()
        .filter(|f| f.head() == "deny" && f.ops().contains(&"file-clone"))
        .filter(|f| !f.ops().contains(&"file-write*"))
        .flat_map(|f| path_filters(f, params))
        .collect();
    assert!(has(&env, "literal", "/Users/t/proj/.env"));
    assert!(has(&env, "literal", "/Users/t/proj/sub/.env.local"));
    golden("seatbelt-deny-extra.sb", &p);
}

#[test]
fn awkward_project_path() {
    let p = plan(&awkward_policy());
    let (forms, argv) = check(&p, true);
    assert!(!argv.profile.contains("p q"));
    let project: Vec<&(String, String)> =
        argv.params.iter().filter(|(_, v)| v == AWKWARD).collect();
    assert_eq!(project.len(), 1);
    assert_eq!(project[0].0, "PROJECT_ROOT");
    let args: Vec<String> = p
        .args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    assert!(args.contains(&format!("PROJECT_ROOT={AWKWARD}")));
    let protected: Vec<(String, String)> = forms
        .iter()
        .filter(|f| f.head() == "deny" && f.ops() == vec!["file-write*"])
        .flat_map(|f| path_filters(f, &argv.params))
        .collect();
    assert!(has(&protected, "subpath", &format!("{AWKWARD}/.git/hooks")));
    golden("seatbelt-awkward-path.sb", &p);
}

#[test]
fn forbidden_services_in_every_mode() {
    let mut allow = default_policy();
    allow.network = Network::Allow;
    let mut fs_false_allow = fs_false_policy();
    fs_false_allow.network = Network::Allow;
    for policy in [
        default_policy(),
        read_only_policy(),
        fs_false_policy(),
        allow,
        fs_false_allow,
        deny_extra_policy(),
        awkward_policy(),
    ] {
        let (forms, argv) = check(&plan(&policy), true);
        let mach = mach_allowed(&forms);
        if policy.network != Network::Allow || policy.filesystem == FsSetting::ReadOnly {
            assert!(!mach.iter().any(|m| m.contains("SecurityServer")));
            assert!(!mach.iter().any(|m| m.contains("securityd")));
        }
        // The defence-in-depth denies are the last rules.
        let tail = &argv.profile[argv.profile.find(";; defence in depth").unwrap()..];
        assert!(tail.contains("(deny lsopen)"));
        assert!(tail.contains("com.apple.coreservices.launchservicesd"));
    }
}
