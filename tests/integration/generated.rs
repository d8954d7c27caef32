//! The committed man pages, configuration schema and completion scripts must
//! be what the binary generates; `SBX_BLESS=1 cargo test` rewrites them.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use crate::util::sbx_path;

fn check(file: &str, args: &[&str]) {
    let out = std::process::Command::new(sbx_path())
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "sbx {args:?} failed");
    let actual = String::from_utf8(out.stdout).unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    if std::env::var_os("SBX_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &actual).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == actual,
        "{file} is stale: regenerate it with `SBX_BLESS=1 cargo test --test integration generated`"
    );
}

#[test]
fn man_page_is_current() {
    check("man/sbx.1", &["man"]);
}

#[test]
fn config_man_page_is_current() {
    check("man/sbx.toml.5", &["man", "--section", "5"]);
}

#[test]
fn config_schema_is_current() {
    check("sbx.schema.json", &["man", "--schema"]);
}

#[test]
fn completions_are_current() {
    check("completions/sbx.bash", &["completions", "bash"]);
    check("completions/_sbx", &["completions", "zsh"]);
    check("completions/sbx.fish", &["completions", "fish"]);
}
