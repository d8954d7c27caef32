//! What sbx says on stderr. stdout belongs to the command, always.
//!
//! One line when the sandbox is in force, one loud line for every protection
//! that is not, every time. Colour only on a terminal and never with
//! `NO_COLOR`; plain ASCII prefixes when the locale is not UTF-8. Text that
//! comes from the host (paths) is stripped of control characters so it cannot
//! drive the terminal.

use std::io::{IsTerminal, Write};
use std::path::Path;

use owo_colors::OwoColorize;

use crate::config::{BannerMode, FsSetting};
use crate::policy::{Network, Policy};

/// How stderr should be written.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
    pub unicode: bool,
}

impl Style {
    /// Decide from the environment and whether stderr is a terminal.
    pub fn detect(env: &[(std::ffi::OsString, std::ffi::OsString)]) -> Style {
        let get = |name: &str| {
            env.iter()
                .find(|(k, _)| k == name)
                .and_then(|(_, v)| v.to_str())
                .filter(|v| !v.is_empty())
        };
        let locale = get("LC_ALL")
            .or_else(|| get("LC_CTYPE"))
            .or_else(|| get("LANG"))
            .unwrap_or("");
        let lower = locale.to_ascii_lowercase();
        Style {
            color: std::io::stderr().is_terminal() && get("NO_COLOR").is_none(),
            unicode: lower.contains("utf-8") || lower.contains("utf8"),
        }
    }
}

/// Remove control characters (escape sequences, newlines) from host text.
pub fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

/// Whether the banner line is printed for this run.
pub fn wanted(mode: BannerMode, shell_command: bool) -> bool {
    match mode {
        BannerMode::Always => true,
        BannerMode::Never => false,
        BannerMode::Auto => !shell_command && std::io::stderr().is_terminal(),
    }
}

fn tilde(p: &Path, home: &Path) -> String {
    match p.strip_prefix(home) {
        Ok(rest) if rest.as_os_str().is_empty() => "~".into(),
        Ok(rest) => format!("~/{}", rest.display()),
        Err(_) => p.display().to_string(),
    }
}

/// The one-line summary of a sandbox in force (without prefix).
pub fn summary(policy: &Policy, backend: &str) -> String {
    let network = match &policy.network {
        Network::Deny => "network deny".to_string(),
        // The Seatbelt profile of read-only mode permits none of the
        // services that `allow` needs.
        Network::Allow
            if policy.platform == crate::policy::Platform::Macos
                && policy.filesystem == FsSetting::ReadOnly =>
        {
            "network deny (read-only mode)".to_string()
        }
        Network::Allow => "network allow".to_string(),
        Network::Allowlist(rules) => {
            format!("network allowlist ({} hosts, via proxy)", rules.len())
        }
    };
    let write = match policy.filesystem {
        FsSetting::Unrestricted => "write anywhere".to_string(),
        FsSetting::ReadOnly => "read-only".to_string(),
        FsSetting::Restricted if policy.writable.is_empty() => "write nowhere".to_string(),
        FsSetting::Restricted => {
            let roots: Vec<String> = policy
                .writable
                .iter()
                .map(|w| tilde(w, &policy.home))
                .collect();
            format!("write {}", roots.join(", "))
        }
    };
    let parts: Vec<&str> = [backend, network.as_str(), write.as_str()]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect();
    sanitize(&parts.join(" · "))
}

/// Print the banner line for a sandbox in force.
pub fn print_active(style: Style, text: &str) {
    let line = if style.unicode {
        format!("🔒 sbx: {text}")
    } else {
        format!("[sbx] {}", text.replace('·', "|"))
    };
    let line = if style.color {
        line.dimmed().to_string()
    } else {
        line
    };
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Print a warning. Warnings are never silenced.
pub fn warn(style: Style, text: &str) {
    let text = sanitize(text);
    let line = if style.unicode {
        format!("⚠ sbx: {text}")
    } else {
        format!("[sbx WARNING] {text}")
    };
    let line = if style.color {
        line.yellow().to_string()
    } else {
        line
    };
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Print the loud line for a command that runs without the sandbox.
pub fn not_sandboxed(style: Style, cause: &str) {
    let text = sanitize(cause);
    let line = if style.unicode {
        format!("⚠ sbx: NOT sandboxed: {text}")
    } else {
        format!("[sbx WARNING] NOT sandboxed: {text}")
    };
    let line = if style.color {
        line.red().bold().to_string()
    } else {
        line
    };
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_strips_escapes() {
        assert_eq!(sanitize("a\x1b[31mb\nc"), "a?[31mb?c");
    }

    #[test]
    fn tilde_shortens_home() {
        let home = Path::new("/home/u");
        assert_eq!(tilde(Path::new("/home/u/p"), home), "~/p");
        assert_eq!(tilde(Path::new("/home/u"), home), "~");
        assert_eq!(tilde(Path::new("/tmp"), home), "/tmp");
        assert_eq!(tilde(Path::new("/home/user2"), home), "/home/user2");
    }
}
