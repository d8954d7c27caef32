//! With home writable (`--writable ~`), what runs later from a home stays
//! out of the command's reach: Python's user site, rustup's env file.

use super::*;

/// A `.pth` file in Python's user site runs at every Python start on the
/// host; the command could make the directory and plant one.
#[test]
fn python_user_site_is_kept_from_a_writable_home() {
    require_sandbox!();
    let Some(python) = tool(&["/usr/bin/python3"]) else {
        return;
    };
    let world = World::new();
    let home = world.home.to_str().unwrap().to_string();
    let marker = world.home.join("PWNED-PTH");
    let out = sbx_sh(
        &world,
        &world.project,
        &["--writable", &home],
        r#"d=$("$1" -c 'import site; print(site.getusersitepackages())')
mkdir -p "$d" && printf 'import os; os.system("touch %s")\n' "$2" > "$d/evil.pth" && echo PLANTED
printf 'touch %s\n' "$2" >> "$HOME/.cargo/env" 2>/dev/null && echo CARGO-ENV
touch "$HOME/ok" && echo HOME-WRITABLE"#,
        &[python, marker.to_str().unwrap()],
    );
    if util::contained() {
        // Reduced mode refuses a writable home, which holds sbx's cache.
        assert_eq!(out.status.code(), Some(125), "{}", both(&out));
        assert!(stderr(&out).contains("cache directory"), "{}", both(&out));
        assert!(!marker.exists());
        return;
    }
    // Positive control: home is writable.
    assert!(stdout(&out).contains("HOME-WRITABLE"), "{}", both(&out));
    // Run by the host's Python as the user would.
    let host = world
        .host_cmd(python)
        .args(["-c", "import site; print(site.getusersitepackages())"])
        .output()
        .unwrap();
    assert!(host.status.success(), "{host:?}");
    assert!(
        !marker.exists(),
        "the host's Python ran the planted .pth file: {}",
        both(&out)
    );
    let _ = world
        .host_cmd("sh")
        .args(["-c", ". \"$HOME/.cargo/env\" 2>/dev/null; true"])
        .output()
        .unwrap();
    assert!(!marker.exists(), "~/.cargo/env ran: {}", both(&out));
}
