//! The checks every generated profile must pass, and helpers that pick
//! rules out of a profile.

use super::*;

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
pub(super) fn check(plan: &Plan, strict: bool) -> (Vec<Sx>, Argv) {
    let argv = split_argv(plan);
    let text = &argv.profile;
    let params = &argv.params;
    assert!(
        !text.chars().any(|c| c.is_control() && c != '\n'),
        "control character in the profile"
    );
    let forms = read_forms(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    check_header(&forms, text);
    check_params(&forms, params);
    check_regex_literals(&forms);
    if strict {
        check_values_only_in_params(&forms, params);
        check_private_spellings(text, params);
    }
    check_allows(&forms, text);
    check_order(&forms);
    check_terminal_and_ipc(&forms);
    (forms, argv)
}

fn check_header(forms: &[Sx], text: &str) {
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
}

fn check_params(forms: &[Sx], params: &[(String, String)]) {
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
}

fn check_regex_literals(forms: &[Sx]) {
    // Host paths: only as parameter values. Regex literals are sbx's own
    // constants, whatever the paths.
    let root_env = [format!("^{ENV_REGEX}"), format!("^{ENV_TEMPLATE_REGEX}")];
    // "Runs later" paths in any letter case: built from sbx's own names.
    let any_case = super::super::escape::any_case_tails();
    for raw in forms.iter().flat_map(Sx::raws) {
        let known = [
            ENV_REGEX,
            ENV_TEMPLATE_REGEX,
            r"^/dev/ttys[0-9]+$",
            r"^/private/(tmp|var/run)/com\.apple\.launchd\.[^/]+/Listeners$",
        ];
        assert!(
            known.contains(&raw.as_str())
                || SHM_NAMES.contains(&raw.as_str())
                || root_env.contains(&raw)
                || any_case.contains(&raw),
            "unexpected regex literal {raw}"
        );
    }
}

/// Strict: no parameter value appears in a literal of the profile.
fn check_values_only_in_params(forms: &[Sx], params: &[(String, String)]) {
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
}

/// Strict: `/tmp` and `/var/folders` only as their real paths below `/private`.
fn check_private_spellings(text: &str, params: &[(String, String)]) {
    for haystack in std::iter::once(text).chain(params.iter().map(|(_, v)| v.as_str())) {
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

fn check_allows(forms: &[Sx], text: &str) {
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
}

fn check_order(forms: &[Sx]) {
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
}

/// TIOCSTI denied after every rule that allows an ioctl; shared memory only
/// by name; never the privileged host port, another process's arguments
/// (`kern.procargs2`) or an unfiltered sysctl read.
fn check_terminal_and_ipc(forms: &[Sx]) {
    let is_tiocsti = |f: &Sx| {
        f.head() == "deny"
            && f.ops() == vec!["file-ioctl"]
            && f.filters().iter().any(|x| {
                x.list().first().and_then(Sx::atom) == Some("ioctl-command")
                    && x.list().get(1).and_then(Sx::atom) == Some("TIOCSTI")
            })
    };
    let deny = forms.iter().rposition(is_tiocsti).expect("no TIOCSTI deny");
    let last_ioctl_allow = forms
        .iter()
        .rposition(|f| f.head() == "allow" && f.ops().iter().any(|o| o.contains("ioctl")));
    assert!(last_ioctl_allow.is_some_and(|a| a < deny));
    for form in forms.iter().filter(|f| f.head() == "allow") {
        for op in form.ops() {
            if op.starts_with("ipc-posix-shm") || op.starts_with("sysctl") {
                assert!(!form.filters().is_empty(), "unfiltered {op}: {form:?}");
            }
            assert!(!op.starts_with("mach-priv"), "{form:?}");
            assert!(op != "mach*" && op != "hid-control", "{form:?}");
        }
        if form.ops().iter().any(|o| o.starts_with("sysctl")) {
            for t in form.texts() {
                assert!(!t.contains("procargs"), "{form:?}");
                assert!(!"kern.procargs2".starts_with(t.as_str()), "{form:?}");
            }
        }
    }
}

/// The evaluated `(kind, path)` filters of every credential deny.
pub(super) fn credential_filters(
    forms: &[Sx],
    params: &[(String, String)],
) -> Vec<(String, String)> {
    forms
        .iter()
        .filter(|f| f.head() == "deny" && f.ops().contains(&"file-read-metadata"))
        .filter(|f| f.ops().contains(&"file-write*"))
        .flat_map(|f| path_filters(f, params))
        .collect()
}

/// The evaluated `(kind, path)` filters of every rule that denies only
/// `file-write-unlink` (what may not be renamed or removed).
pub(super) fn unlink_filters(forms: &[Sx], params: &[(String, String)]) -> Vec<(String, String)> {
    forms
        .iter()
        .filter(|f| f.head() == "deny" && f.ops() == vec!["file-write-unlink"])
        .flat_map(|f| path_filters(f, params))
        .collect()
}

pub(super) fn has(filters: &[(String, String)], kind: &str, path: &str) -> bool {
    filters.iter().any(|(k, p)| k == kind && p == path)
}

/// The mach services a profile allows.
pub(super) fn mach_allowed(forms: &[Sx]) -> Vec<String> {
    forms
        .iter()
        .filter(|f| f.head() == "allow" && f.ops().contains(&"mach-lookup"))
        .flat_map(Sx::texts)
        .collect()
}

/// Whether `filter` is `(local|remote unix-socket (subpath (param "OWN_TMPDIR")))`.
pub(super) fn is_own_socket_filter(filter: &Sx) -> bool {
    match filter.list() {
        [Sx::Atom(side), Sx::Atom(kind), sub] => {
            (side == "local" || side == "remote")
                && kind == "unix-socket"
                && sub.list().first().and_then(Sx::atom) == Some("subpath")
                && sub.params() == vec!["OWN_TMPDIR".to_string()]
        }
        _ => false,
    }
}

/// The network allows of a profile, but for the command's own Unix sockets.
pub(super) fn network_allows(forms: &[Sx]) -> Vec<&Sx> {
    forms
        .iter()
        .filter(|f| !f.filters().iter().all(|x| is_own_socket_filter(x)))
        .filter(|f| f.head() == "allow" && f.ops().iter().any(|o| o.starts_with("network")))
        .collect()
}
