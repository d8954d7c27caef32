//! The documentation must stay true: the man pages pass groff's lint, the
//! README's quick start is two commands and its first one does what the
//! README says, and the README's configuration table names the keys and
//! defaults of the schema that `sbx man --schema` generates.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

fn repo_file(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Whether groff is installed; without it the lint is skipped loudly, or
/// fails under `SBX_TEST_REQUIRE_SANDBOX=1` (CI), which installs groff-base.
fn groff_available() -> bool {
    if Command::new("groff").arg("--version").output().is_ok() {
        return true;
    }
    if std::env::var_os("SBX_TEST_REQUIRE_SANDBOX").is_some_and(|v| v == "1") {
        panic!(
            "SBX_TEST_REQUIRE_SANDBOX=1 but groff is not installed (apt-get install groff-base)"
        );
    }
    eprintln!("skipped: groff is not installed, so the man pages are not linted (apt-get install groff-base)");
    false
}

/// `groff -ww -z -man PAGE`: every warning enabled, no output; any message
/// on stderr is a defect in the page.
fn lint(page: &str) {
    if !groff_available() {
        return;
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(page);
    let out = Command::new("groff")
        .args(["-ww", "-z", "-man"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.is_empty(),
        "groff -ww -z -man {page} complained (fix src/generate/, then SBX_BLESS=1 cargo test --test integration generated):\n{stderr}"
    );
}

#[test]
fn sbx_1_passes_groff_lint() {
    lint("man/sbx.1");
}

#[test]
fn sbx_toml_5_passes_groff_lint() {
    lint("man/sbx.toml.5");
}

/// The lines of the README's first fenced code block.
fn quick_start() -> Vec<String> {
    let readme = repo_file("README.md");
    let mut lines = readme.lines();
    lines
        .by_ref()
        .find(|l| l.starts_with("```"))
        .expect("README has a fenced code block");
    lines
        .take_while(|l| !l.starts_with("```"))
        .filter(|l| !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// The quick start's first command: `cargo run ... -- SBX-ARGS`.
fn quick_start_sbx_args() -> String {
    let lines = quick_start();
    let first = &lines[0];
    assert!(
        first.starts_with("cargo run "),
        "the quick start's first command builds and runs sbx with cargo run: {first}"
    );
    let (_, args) = first
        .split_once(" -- ")
        .unwrap_or_else(|| panic!("no ` -- ` between cargo's arguments and sbx's: {first}"));
    args.to_string()
}

#[test]
fn quick_start_is_two_commands() {
    let lines = quick_start();
    assert_eq!(
        lines.len(),
        2,
        "the README's quick start is exactly two commands: {lines:?}"
    );
    assert_eq!(lines[1], "cargo test", "the second command runs the tests");
    quick_start_sbx_args();
}

/// Split a command line the way sh would, for the plain words and
/// single-quoted strings the quick start uses; anything else fails the test
/// (extend this splitter rather than guess).
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                let mut closed = false;
                for c in chars.by_ref() {
                    if c == '\'' {
                        closed = true;
                        break;
                    }
                    word.push(c);
                }
                assert!(closed, "unclosed quote in {line}");
            }
            ' ' | '\t' => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '"' | '\\' | '$' | '`' | '*' | '?' | '~' | ';' | '&' | '|' | '<' | '>' | '(' | ')'
            | '#' => panic!(
                "`{c}` outside single quotes in the README's quick start: this test does not \
                 split such command lines; extend shell_words"
            ),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

#[test]
fn shell_words_splits_like_sh() {
    assert_eq!(
        shell_words("run -- sh -c 'echo ok > f; cat ~/x'  a'b c'd"),
        ["run", "--", "sh", "-c", "echo ok > f; cat ~/x", "ab cd"]
    );
}

/// The README says of its first command: "the write inside the project
/// works, the key read and the write to your home are refused". Run the same
/// sbx invocation in a test world (a fake home with a planted key, the
/// project inside it) and judge from the host.
#[cfg(target_os = "linux")]
#[test]
fn quick_start_does_what_the_readme_says() {
    crate::require_sandbox!();
    let args = quick_start_sbx_args();
    for needle in ["sbx-demo.txt", "~/.ssh/id_*", "~/sbx-demo.txt"] {
        assert!(
            args.contains(needle),
            "the quick start no longer mentions {needle}: update this test with it: {args}"
        );
    }
    let world = crate::util::World::new();
    let out = world.sbx().args(shell_words(&args)).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let shown = format!(
        "status {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    if crate::util::contained() {
        // `--require` asks for the full sandbox: in the container-like
        // place it refuses, and says how to accept reduced mode.
        assert_eq!(out.status.code(), Some(125), "{shown}");
        assert!(stderr.contains("require = \"reduced\""), "{shown}");
        assert!(!world.project.join("sbx-demo.txt").exists(), "{shown}");
        return;
    }
    assert_eq!(
        std::fs::read_to_string(world.project.join("sbx-demo.txt")).ok(),
        Some("ok\n".to_string()),
        "the write inside the project must land\n{shown}"
    );
    assert!(
        !world.home.join("sbx-demo.txt").exists(),
        "the write to the home directory must be refused\n{shown}"
    );
    assert!(
        !stdout.contains(crate::util::SECRET) && !stderr.contains(crate::util::SECRET),
        "the key must not be read\n{shown}"
    );
    assert!(
        !stderr.contains("NOT sandboxed"),
        "the command must run sandboxed\n{shown}"
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "the refused write is the last command, so sh exits 1\n{shown}"
    );
}

/// The rows of the README's configuration table: (key, default) as written.
fn readme_config_table() -> Vec<(String, String)> {
    let readme = repo_file("README.md");
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Configuration"))
        .expect("README has a Configuration section");
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split(" | ").collect();
            let key = cells[0].trim_start_matches("| ").trim_matches('`');
            (key.to_string(), cells[1].trim().to_string())
        })
        .collect()
}

#[test]
fn readme_config_table_matches_the_schema() {
    let schema: serde_json::Value = serde_json::from_str(&repo_file("sbx.schema.json")).unwrap();
    let props = schema["properties"]["sandbox"]["properties"]
        .as_object()
        .unwrap();
    let rows = readme_config_table();
    let mut readme_keys: Vec<&str> = rows.iter().map(|(k, _)| k.as_str()).collect();
    let mut schema_keys: Vec<&str> = props.keys().map(String::as_str).collect();
    readme_keys.sort_unstable();
    schema_keys.sort_unstable();
    assert_eq!(
        readme_keys, schema_keys,
        "the README's configuration table and sbx.schema.json name different keys"
    );
    for (key, default) in &rows {
        let Some(want) = props[key.as_str()].get("default") else {
            continue;
        };
        let text = default.trim_matches('`');
        let table: toml::Table = toml::from_str(&format!("v = {text}"))
            .unwrap_or_else(|e| panic!("README default of {key} is not TOML: {default}: {e}"));
        let got = serde_json::to_value(&table["v"]).unwrap();
        assert_eq!(
            &got, want,
            "README and schema disagree on the default of {key}"
        );
    }
}
