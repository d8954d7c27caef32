//! Tests of the Seatbelt renderer. There is no Mac here, so the profile is
//! checked as text: golden files, a small s-expression reader that every
//! generated profile must pass, structural checks (order, escaping, forbidden
//! services), a property test with arbitrary paths, and the `.env` regex run
//! through the `regex` crate. Enforcement itself is tested on a macOS runner.

use std::path::PathBuf;

use proptest::prelude::*;

use super::*;
use crate::config::{BannerMode, FsSetting};
use crate::netrule::HostRule;
use crate::policy::{
    Credential, EnvPlan, Kind, Network, Platform, Policy, Protected, CREDENTIALS, CREDENTIALS_MACOS,
};

// ---------------------------------------------------------------- policies

const HOME: &str = "/Users/t";
const PROJECT: &str = "/Users/t/proj";
const TMPDIR: &str = "/private/var/folders/ab/xyz/T";
const SBX: &str = "/Users/t/.cargo/bin/sbx";

/// A macOS policy as `policy::resolve` would produce it for home `home` and
/// project `project` with the default configuration: writable project,
/// `/private/tmp` and TMPDIR; the project's "runs later" paths; every built-in
/// credential, a few existing (one of them through a symlink), the rest missing.
fn policy_for(home: &str, project: &str) -> Policy {
    let home = PathBuf::from(home);
    let project = PathBuf::from(project);
    let credentials = CREDENTIALS
        .iter()
        .chain(CREDENTIALS_MACOS)
        .chain(crate::policy::AGENT_TOKENS.iter().map(|(_, token)| token))
        .map(|rel| {
            let written = home.join(rel);
            let (real, kind) = match *rel {
                ".ssh" | "Library/Keychains" => (Some(written.clone()), Kind::Dir),
                ".netrc" | ".docker/config.json" => (Some(written.clone()), Kind::File),
                // A dotfiles-managed directory: the real path is elsewhere.
                ".aws" => (Some(home.join("dotfiles/aws")), Kind::Dir),
                _ => (None, Kind::Missing),
            };
            Credential {
                written,
                real,
                kind,
            }
        })
        .collect();
    let prot = |rel: &str, kind: Kind, create: bool| Protected {
        path: project.join(rel),
        kind,
        create,
        identity: None,
    };
    let mut writable = vec![
        PathBuf::from("/private/tmp"),
        project.clone(),
        PathBuf::from(TMPDIR),
    ];
    writable.sort_by_key(|p| p.components().count());
    Policy {
        platform: Platform::Macos,
        enabled: true,
        require: false,
        allow_unsandboxed: true,
        filesystem: FsSetting::Restricted,
        home: home.clone(),
        project: project.clone(),
        cwd: project.clone(),
        writable,
        protected: vec![
            prot(".sbx.toml", Kind::Missing, false),
            prot(".envrc", Kind::File, false),
            prot(".vscode", Kind::Missing, false),
            prot(".git/hooks", Kind::Dir, true),
            prot(".git/config", Kind::File, false),
        ],
        pins: vec![project.join(".git")],
        git_configs: Vec::new(),
        tool_caches: Vec::new(),
        credentials,
        env_files: Vec::new(),
        placeholder: PathBuf::from("/Users/t/.cache/sbx/empty"),
        network: Network::Deny,
        unix_sockets: false,
        env: EnvPlan {
            clear: false,
            set: vec![("SBX_SANDBOX".into(), "1".into())],
            unset: vec!["GITHUB_TOKEN".into()],
        },
        shell: PathBuf::from("/bin/bash"),
        banner: BannerMode::Auto,
        bwrap: None,
        system_paths: Vec::new(),
        command: vec!["/bin/echo".into(), "hi".into()],
        warnings: Vec::new(),
        origins: Vec::new(),
    }
}

fn default_policy() -> Policy {
    policy_for(HOME, PROJECT)
}

/// `filesystem = "read-only"` as resolution leaves it: no writable roots and
/// no "runs later" paths; the developer directory `xcode-select` chose.
fn read_only_policy() -> Policy {
    let mut p = default_policy();
    p.filesystem = FsSetting::ReadOnly;
    p.writable.clear();
    p.protected.clear();
    p.pins.clear();
    p.system_paths = vec![crate::policy::SystemPath::Dir(PathBuf::from(XCODE))];
    p
}

const XCODE: &str = "/Applications/Xcode_16.app/Contents/Developer";

/// `filesystem = false`: no writable roots listed (everything is).
fn fs_false_policy() -> Policy {
    let mut p = read_only_policy();
    p.filesystem = FsSetting::Unrestricted;
    p
}

/// Extra `deny_read` (a directory inside the project, a file with a space in
/// a directory of home) and `deny_write` entries, and found `.env` files.
fn deny_extra_policy() -> Policy {
    let mut p = default_policy();
    p.credentials.push(Credential {
        written: PathBuf::from("/Users/t/proj/secrets"),
        real: Some(PathBuf::from("/Users/t/proj/secrets")),
        kind: Kind::Dir,
    });
    p.credentials.push(Credential {
        written: PathBuf::from("/Users/t/work notes/token.txt"),
        real: None,
        kind: Kind::Missing,
    });
    p.protected.push(Protected {
        path: PathBuf::from("/Users/t/proj/tools/deploy.sh"),
        kind: Kind::File,
        create: false,
        identity: None,
    });
    p.env_files = vec![
        PathBuf::from("/Users/t/proj/.env"),
        PathBuf::from("/Users/t/proj/sub/.env.local"),
    ];
    p
}

const AWKWARD: &str = r#"/Users/t/p q"r\s (x)"#;

fn awkward_policy() -> Policy {
    policy_for(HOME, AWKWARD)
}

fn plan(policy: &Policy) -> Plan {
    render(policy, Path::new(SBX), None).unwrap()
}

// ---------------------------------------------------------------- argv

/// The parts of a sandbox-exec argv, after checking its shape:
/// `-p PROFILE (-D NAME=VALUE)* -- COMMAND...`.
struct Argv {
    profile: String,
    params: Vec<(String, String)>,
    command: Vec<String>,
}

fn split_argv(plan: &Plan) -> Argv {
    assert_eq!(plan.program, PathBuf::from(SANDBOX_EXEC));
    let args: Vec<String> = plan
        .args
        .iter()
        .map(|a| a.to_str().unwrap().to_string())
        .collect();
    assert_eq!(args[0], "-p");
    let profile = args[1].clone();
    assert_eq!(plan.profile.as_deref(), Some(profile.as_str()));
    let mut params = Vec::new();
    let mut i = 2;
    while args[i] == "-D" {
        let (name, value) = args[i + 1].split_once('=').unwrap();
        assert!(
            !name.is_empty()
                && name
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
            "parameter name {name:?}"
        );
        params.push((name.to_string(), value.to_string()));
        i += 2;
    }
    assert_eq!(args[i], "--", "{args:?}");
    Argv {
        profile,
        params,
        command: args[i + 1..].to_vec(),
    }
}

// ---------------------------------------------------------------- golden files

/// The golden-file text of a plan: the argv around the profile as comments,
/// then the profile (so the file can be loaded with `sandbox-exec -f`).
fn golden_text(plan: &Plan) -> String {
    let argv = split_argv(plan);
    let mut text = String::from(
        ";; Golden file of src/backend/seatbelt_tests.rs: the Seatbelt plan for one fixed policy.\n\
         ;; Regenerate with `SBX_BLESS=1 cargo test seatbelt` and review the diff.\n",
    );
    text.push_str(&format!(";; {SANDBOX_EXEC} -p PROFILE\n"));
    for (name, value) in &argv.params {
        text.push_str(&format!(";;   -D {name}={value}\n"));
    }
    text.push_str(&format!(";;   -- {}\n", argv.command.join(" ")));
    text.push_str(";; PROFILE:\n");
    text.push_str(&argv.profile);
    text
}

/// Compare with `tests/golden/NAME`, or write it when `SBX_BLESS=1`.
fn golden(name: &str, plan: &Plan) {
    crate::backend::assert_golden(name, &golden_text(plan));
}

// ---------------------------------------------------------------- s-expression reader

#[derive(Debug, Clone, PartialEq)]
enum Sx {
    Atom(String),
    /// `"..."`, unescaped.
    Str(String),
    /// `#"..."`, as written.
    Raw(String),
    List(Vec<Sx>),
}

/// Read every top-level form. Strings must be closed and may only use the
/// escapes `\\` and `\"`; parentheses must balance; comments run from `;`
/// to the end of the line.
fn read_forms(text: &str) -> Result<Vec<Sx>, String> {
    let chars: Vec<char> = text.chars().collect();
    let mut stack: Vec<Vec<Sx>> = vec![Vec::new()];
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            ';' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            c if c.is_whitespace() => i += 1,
            '(' => {
                stack.push(Vec::new());
                i += 1;
            }
            ')' => {
                if stack.len() < 2 {
                    return Err(format!("unbalanced `)` at {i}"));
                }
                let list = stack.pop().unwrap();
                stack.last_mut().unwrap().push(Sx::List(list));
                i += 1;
            }
            '"' => {
                i += 1;
                let mut s = String::new();
                loop {
                    let Some(&c) = chars.get(i) else {
                        return Err("unclosed string".into());
                    };
                    i += 1;
                    match c {
                        '"' => break,
                        '\\' => match chars.get(i) {
                            Some(&e @ ('\\' | '"')) => {
                                s.push(e);
                                i += 1;
                            }
                            other => return Err(format!("escape \\{other:?} in a string")),
                        },
                        c if c.is_control() => {
                            return Err(format!("control character {c:?} in a string"))
                        }
                        c => s.push(c),
                    }
                }
                stack.last_mut().unwrap().push(Sx::Str(s));
            }
            '#' if chars.get(i + 1) == Some(&'"') => {
                i += 2;
                let start = i;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i].is_control() {
                        return Err("control character in a regex literal".into());
                    }
                    i += 1;
                }
                if i == chars.len() {
                    return Err("unclosed regex literal".into());
                }
                let raw: String = chars[start..i].iter().collect();
                stack.last_mut().unwrap().push(Sx::Raw(raw));
                i += 1;
            }
            _ => {
                let start = i;
                while i < chars.len()
                    && !chars[i].is_whitespace()
                    && !matches!(chars[i], '(' | ')' | '"' | ';')
                {
                    i += 1;
                }
                let atom: String = chars[start..i].iter().collect();
                stack.last_mut().unwrap().push(Sx::Atom(atom));
            }
        }
    }
    if stack.len() != 1 {
        return Err("unclosed `(`".into());
    }
    Ok(stack.pop().unwrap())
}

impl Sx {
    fn list(&self) -> &[Sx] {
        match self {
            Sx::List(l) => l,
            _ => &[],
        }
    }
    fn atom(&self) -> Option<&str> {
        match self {
            Sx::Atom(a) => Some(a),
            _ => None,
        }
    }
    /// `allow`/`deny` of a top-level rule.
    fn head(&self) -> &str {
        self.list().first().and_then(Sx::atom).unwrap_or("")
    }
    /// The operation names of a rule.
    fn ops(&self) -> Vec<&str> {
        self.list().iter().skip(1).map_while(Sx::atom).collect()
    }
    /// The filters of a rule.
    fn filters(&self) -> Vec<&Sx> {
        self.list()
            .iter()
            .skip(1)
            .skip_while(|s| s.atom().is_some())
            .collect()
    }
    /// Every string and regex literal inside, at any depth.
    fn texts(&self) -> Vec<String> {
        match self {
            Sx::Atom(_) => Vec::new(),
            Sx::Str(s) | Sx::Raw(s) => vec![s.clone()],
            Sx::List(l) => l.iter().flat_map(Sx::texts).collect(),
        }
    }
    fn raws(&self) -> Vec<String> {
        match self {
            Sx::Raw(s) => vec![s.clone()],
            Sx::List(l) => l.iter().flat_map(Sx::raws).collect(),
            _ => Vec::new(),
        }
    }
    fn params(&self) -> Vec<String> {
        match self.list() {
            [Sx::Atom(a), Sx::Str(name)] if a == "param" => vec![name.clone()],
            l => l.iter().flat_map(Sx::params).collect(),
        }
    }
}

/// The value of a path expression: a string, `(param "X")` or
/// `(string-append ...)` of those.
fn eval(sx: &Sx, params: &[(String, String)]) -> Option<String> {
    match sx {
        Sx::Str(s) => Some(s.clone()),
        Sx::List(l) => match l.as_slice() {
            [Sx::Atom(a), Sx::Str(name)] if a == "param" => params
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone()),
            [Sx::Atom(a), rest @ ..] if a == "string-append" => {
                rest.iter().map(|s| eval(s, params)).collect()
            }
            _ => None,
        },
        _ => None,
    }
}

/// `(literal X)`/`(subpath X)` filters of a rule, evaluated: `(kind, path)`.
fn path_filters(rule: &Sx, params: &[(String, String)]) -> Vec<(String, String)> {
    rule.filters()
        .iter()
        .filter_map(|f| match f.list() {
            [Sx::Atom(kind), arg] if kind == "literal" || kind == "subpath" => {
                Some((kind.clone(), eval(arg, params)?))
            }
            _ => None,
        })
        .collect()
}

// ---------------------------------------------------------------- checks

const FORBIDDEN: &[&str] = &[
    "launchservicesd",
    "lsd.",
    "appleevents",
    "quarantine-resolver",
    "pasteboard",
    "lsopen",
    "appleevent-send",
];

/// Checks that hold for every profile sbx generates. `strict` adds those that
/// need realistic paths (no value is a substring of a constant).
fn check(plan: &Plan, strict: bool) -> (Vec<Sx>, Argv) {
    let argv = split_argv(plan);
    let text = &argv.profile;
    let params = &argv.params;
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "control character in the profile"
    );
    let forms = read_forms(text).unwrap_or_else(|e| panic!("{e}\n{text}"));

    // Header.
    assert_eq!(
        forms[0],
        Sx::List(vec![Sx::Atom("version".into()), Sx::Atom("1".into())])
    );
    assert!(text.starts_with("(version 1)\n"));
    assert_eq!(text.matches("(deny default").count(), 1);
    assert_eq!(forms[1].ops(), vec!["default"]);
    assert_eq!(forms[1].head(), "deny");
    for bad in ["(allow default", "no-sandbox", "(import", "(regex #\"^/\")"] {
        assert!(!text.contains(bad), "{bad}");
    }

    // Parameters: defined once each, all used, each value unique.
    let used: Vec<String> = forms.iter().flat_map(Sx::params).collect();
    for (i, (name, value)) in params.iter().enumerate() {
        assert!(used.contains(name), "{name} defined but unused");
        assert!(
            params[..i].iter().all(|(n, v)| n != name && v != value),
            "{name} repeats"
        );
    }
    for name in &used {
        assert!(params.iter().any(|(n, _)| n == name), "{name} undefined");
    }

    // Host paths: only as parameter values. Regex literals are sbx's own
    // constants, whatever the paths.
    let root_env = [format!("^{ENV_REGEX}"), format!("^{ENV_TEMPLATE_REGEX}")];
    for raw in forms.iter().flat_map(Sx::raws) {
        let known = [
            ENV_REGEX,
            ENV_TEMPLATE_REGEX,
            r"^/dev/ttys[0-9]+$",
            r"^/__KMP_REGISTERED_LIB_[0-9]+$",
            r"^/private/(tmp|var/run)/com\.apple\.launchd\.[^/]+/Listeners$",
        ];
        assert!(
            known.contains(&raw.as_str()) || root_env.contains(&raw),
            "unexpected regex literal {raw}"
        );
    }
    if strict {
        for raw in forms.iter().flat_map(Sx::raws) {
            for (_, value) in params {
                assert!(
                    value.len() < 2 || !raw.contains(value.as_str()),
                    "{raw} has {value}"
                );
            }
        }
        for s in forms.iter().flat_map(Sx::texts) {
            for (_, value) in params {
                assert!(
                    value == "/" || !s.contains(value.as_str()),
                    "{s:?} has {value}"
                );
            }
        }
        for haystack in std::iter::once(text.as_str()).chain(params.iter().map(|(_, v)| v.as_str()))
        {
            for (i, _) in haystack.match_indices("/tmp") {
                assert!(haystack[..i].ends_with("/private"), "/tmp in {haystack}");
            }
            for (i, _) in haystack.match_indices("/var/folders") {
                assert!(
                    haystack[..i].ends_with("/private"),
                    "/var/folders in {haystack}"
                );
            }
        }
    }

    // Allows: no forbidden service, no unfiltered network, no local filter
    // on outbound traffic.
    for form in forms.iter().filter(|f| f.head() == "allow") {
        let ops = form.ops();
        let all: Vec<String> = form
            .texts()
            .into_iter()
            .chain(ops.iter().map(|s| s.to_string()))
            .collect();
        for bad in FORBIDDEN {
            assert!(
                !all.iter().any(|t| t.contains(bad)),
                "{bad} allowed: {form:?}"
            );
        }
        for op in &ops {
            assert!(!op.starts_with("network*"), "{form:?}");
            if op.starts_with("network") {
                assert!(!form.filters().is_empty(), "unfiltered {op}");
            }
        }
        if ops.contains(&"network-outbound") {
            for f in form.filters() {
                assert_ne!(f.list()[0].atom(), Some("local"), "{form:?}");
            }
        }
        if ops.contains(&"file-write*") {
            assert!(!form.filters().is_empty(), "unfiltered file-write*");
        }
    }
    assert!(!text.contains("(allow network-outbound)"));

    // Order: the first credential deny comes after the last file allow
    // (both must exist, so a missing rule cannot pass).
    let last_allow = forms
        .iter()
        .rposition(|f| {
            f.head() == "allow"
                && f.ops()
                    .iter()
                    .any(|o| o.starts_with("file-read") || o.starts_with("file-write"))
        })
        .expect("no file allow");
    let first_credential = forms
        .iter()
        .position(|f| f.head() == "deny" && f.ops().contains(&"file-link"))
        .expect("no credential deny");
    assert!(first_credential > last_allow);
    // Nothing but denies after the first one.
    let first_deny = forms
        .iter()
        .skip(2)
        .position(|f| f.head() == "deny")
        .unwrap()
        + 2;
    assert!(forms[first_deny..].iter().all(|f| f.head() == "deny"));
    (forms, argv)
}

/// The evaluated `(kind, path)` filters of every credential deny.
fn credential_filters(forms: &[Sx], params: &[(String, String)]) -> Vec<(String, String)> {
    forms
        .iter()
        .filter(|f| f.head() == "deny" && f.ops().contains(&"file-read-metadata"))
        .filter(|f| f.ops().contains(&"file-write*"))
        .flat_map(|f| path_filters(f, params))
        .collect()
}

fn has(filters: &[(String, String)], kind: &str, path: &str) -> bool {
    filters.iter().any(|(k, p)| k == kind && p == path)
}

/// The mach services a profile allows.
fn mach_allowed(forms: &[Sx]) -> Vec<String> {
    forms
        .iter()
        .filter(|f| f.head() == "allow" && f.ops().contains(&"mach-lookup"))
        .flat_map(Sx::texts)
        .collect()
}

fn network_allows(forms: &[Sx]) -> Vec<&Sx> {
    forms
        .iter()
        .filter(|f| f.head() == "allow" && f.ops().iter().any(|o| o.starts_with("network")))
        .collect()
}

// ---------------------------------------------------------------- tests

#[test]
fn default_profile() {
    let p = plan(&default_policy());
    let (forms, argv) = check(&p, true);
    assert_eq!(argv.command, vec!["/bin/echo", "hi"]);
    assert_eq!(p.env, Some(default_policy().env));
    assert!(p.placeholder.is_none() && p.create.is_empty());
    let params = &argv.params;

    // Writable roots, by value.
    let writes: Vec<(String, String)> = forms
        .iter()
        .filter(|f| f.head() == "allow" && f.ops() == vec!["file-write*"])
        .flat_map(|f| path_filters(f, params))
        .collect();
    let want: Vec<(String, String)> = ["/private/tmp", PROJECT, TMPDIR]
        .iter()
        .map(|p| ("subpath".to_string(), p.to_string()))
        .collect();
    assert_eq!(writes, want);

    // Credentials: subpath for directories, literal for files, both when
    // missing; both spellings of the symlinked one.
    let creds = credential_filters(&forms, params);
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

    // Move protection: the project root and `.git` cannot be renamed;
    // home is not writable, so its directories need nothing.
    let unlink: Vec<(String, String)> = forms
        .iter()
        .filter(|f| f.head() == "deny" && f.ops() == vec!["file-write-unlink"])
        .flat_map(|f| path_filters(f, params))
        .collect();
    assert_eq!(
        unlink,
        vec![
            ("literal".to_string(), PROJECT.to_string()),
            ("literal".to_string(), format!("{PROJECT}/.git")),
        ]
    );

    // Mach: the user lookup, nothing for the network.
    let mach = mach_allowed(&forms);
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
    assert!(network_allows(&forms).is_empty());
    assert!(!argv.profile.contains("mDNSResponder"));
    assert!(argv.profile.contains("\n(allow file-read*)\n"));

    golden("seatbelt-default.sb", &p);
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
    assert!(text.contains("\n(allow file-read*)\n"));
    let creds = credential_filters(&forms, &argv.params);
    assert!(has(&creds, "subpath", "/Users/t/.ssh"));
    assert!(text.find("(deny file-read* file-read-data").unwrap() > write);
    // Everything is writable, so every directory above a credential is
    // protected against renaming.
    let unlink: Vec<(String, String)> = forms
        .iter()
        .filter(|f| f.head() == "deny" && f.ops() == vec!["file-write-unlink"])
        .flat_map(|f| path_filters(f, &argv.params))
        .collect();
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
fn network_allow_profile() {
    let mut policy = default_policy();
    policy.network = Network::Allow;
    let p = plan(&policy);
    let (forms, argv) = check(&p, true);
    let text = &argv.profile;
    assert!(text.contains("\n(allow network-outbound (remote ip \"*:*\"))\n"));
    assert!(text.contains("(allow network-outbound (literal \"/private/var/run/mDNSResponder\"))"));
    assert!(text.contains("(allow network-bind (local ip \"*:*\"))"));
    assert!(text.contains("(allow network-inbound (local ip \"*:*\"))"));
    let mach = mach_allowed(&forms);
    for name in [
        "com.apple.dnssd.service",
        "com.apple.trustd",
        "com.apple.SecurityServer",
    ] {
        assert!(mach.iter().any(|m| m == name), "{name}");
    }
    // Outbound only by remote IP or the resolver socket.
    for form in network_allows(&forms) {
        if form.ops().contains(&"network-outbound") {
            let f = &form.filters()[0];
            let ok = matches!(f.list(), [Sx::Atom(r), Sx::Atom(ip), Sx::Str(_)] if r == "remote" && ip == "ip")
                || f.texts() == vec!["/private/var/run/mDNSResponder"];
            assert!(ok, "{form:?}");
        }
    }
    golden("seatbelt-network-allow.sb", &p);
}

#[test]
fn network_allowlist_without_its_proxy_is_deny() {
    let mut policy = default_policy();
    policy.network = Network::Allowlist(vec![HostRule::parse("example.com").unwrap()]);
    let p = plan(&policy);
    let (forms, argv) = check(&p, true);
    assert!(network_allows(&forms).is_empty());
    assert!(!argv.profile.contains("*:*"));
    assert!(!argv.profile.contains("dnssd"));
    assert!(!argv.profile.contains("mDNSResponder"));
    assert_eq!(p, plan(&default_policy()));
}

fn test_proxy(port: u16) -> Proxy {
    Proxy {
        listen: super::super::Listen::Loopback(port),
        token: "T0KEN".into(),
    }
}

#[test]
fn network_allowlist_reaches_only_the_proxy_port() {
    let mut policy = default_policy();
    policy.network = Network::Allowlist(vec![HostRule::parse("example.com").unwrap()]);
    let proxy = test_proxy(49152);
    let p = render(&policy, Path::new(SBX), Some(&proxy)).unwrap();
    let (forms, argv) = check(&p, true);
    // Exactly one network rule, the proxy's port, by remote address.
    let allows = network_allows(&forms);
    assert_eq!(allows.len(), 1, "{allows:?}");
    assert_eq!(allows[0].ops(), vec!["network-outbound"]);
    let filter = allows[0].filters()[0].list().to_vec();
    assert_eq!(
        filter,
        vec![
            Sx::Atom("remote".into()),
            Sx::Atom("tcp".into()),
            Sx::Str("localhost:49152".into())
        ]
    );
    // No name resolution, no trust daemon (it fetches URLs for its caller).
    for absent in [
        "*:*",
        ":53",
        "dnssd",
        "mDNSResponder",
        "trustd",
        "ocspd",
        "configd",
        "SecurityServer",
        "network-bind",
        "network-inbound",
        "AF_SYSTEM",
    ] {
        assert!(!argv.profile.contains(absent), "{absent}");
    }
    // The command is pointed at the proxy with the credential; nothing else
    // in its environment changes.
    let env = p.env.as_ref().unwrap();
    let get = |k: &str| {
        env.set
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
    };
    let url = "http://sbx:T0KEN@127.0.0.1:49152";
    for k in ["HTTP_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"] {
        assert_eq!(get(k), Some(url), "{k}");
    }
    assert_eq!(get("NO_PROXY"), Some(""));
    assert_eq!(
        get("GIT_SSH_COMMAND"),
        Some("ssh -o ProxyCommand='/Users/t/.cargo/bin/sbx __connect %h %p'")
    );
    assert!(get("JAVA_TOOL_OPTIONS")
        .unwrap()
        .contains("-Dhttps.proxyPort=49152"));
    // Apart from the network section, the profile is the deny profile's.
    let deny = plan(&default_policy());
    let strip = |t: &str| {
        t.lines()
            .filter(|l| !l.contains("network"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        strip(&argv.profile),
        strip(deny.profile.as_deref().unwrap())
    );
    golden("seatbelt-network-allowlist.sb", &p);
}

#[test]
fn network_allowlist_in_read_only_mode_keeps_the_proxy() {
    let mut policy = read_only_policy();
    policy.network = Network::Allowlist(vec![HostRule::parse("example.com").unwrap()]);
    let p = render(&policy, Path::new(SBX), Some(&test_proxy(50000))).unwrap();
    let (forms, argv) = check(&p, true);
    assert_eq!(network_allows(&forms).len(), 1);
    assert!(argv.profile.contains(r#"(remote tcp "localhost:50000")"#));
    // Still no service beyond the user lookup.
    assert!(!argv.profile.contains("trustd"));
}

#[test]
fn network_allowlist_needs_a_real_port() {
    let mut policy = default_policy();
    policy.network = Network::Allowlist(vec![HostRule::parse("example.com").unwrap()]);
    assert!(render(&policy, Path::new(SBX), Some(&test_proxy(0))).is_err());
    // A proxy given outside allowlist mode changes nothing.
    let p = render(&default_policy(), Path::new(SBX), Some(&test_proxy(50000))).unwrap();
    assert_eq!(p, plan(&default_policy()));
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
    let unlink: Vec<(String, String)> = forms
        .iter()
        .filter(|f| f.head() == "deny" && f.ops() == vec!["file-write-unlink"])
        .flat_map(|f| path_filters(f, params))
        .collect();
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
        assert!(render(&p, Path::new(SBX), None).is_err(), "{bad:?}");
        let mut p = default_policy();
        p.credentials[0].real = Some(PathBuf::from(bad));
        assert!(render(&p, Path::new(SBX), None).is_err(), "{bad:?}");
    }
    for odd in ["relative/path", "/Users/t/../x", ""] {
        let mut p = default_policy();
        p.writable.push(PathBuf::from(odd));
        assert!(render(&p, Path::new(SBX), None).is_err(), "{odd:?}");
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
fn reader_rejects_broken_text() {
    for bad in ["(a", "a)", "(a \"b)", "(a \"b\\n\")", "(a #\"x)", "\"\\q\""] {
        assert!(read_forms(bad).is_err(), "{bad}");
    }
    assert!(read_forms("(a ; ) comment\n b)").is_ok());
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

// ---------------------------------------------------------------- .env regex

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
                && f.filters()
                    .iter()
                    .any(|x| x.list().first().and_then(Sx::atom) == Some("require-all"))
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

// ---------------------------------------------------------------- property

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
            let p = render(&policy, Path::new(SBX), None).unwrap();
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
