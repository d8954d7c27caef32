//! Discovery of `.env` files in the project (placeholder: a full walk; being
//! replaced by a cached walk).

use std::path::{Path, PathBuf};

/// Directories never searched: they do not hold the user's own secrets.
pub const PRUNED: &[&str] = &[".git", "node_modules", "target", ".venv", "venv", "__pycache__"];

/// Real paths of the `.env` files under `project`.
pub fn find(project: &Path, _cache_dir: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![project.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                if !PRUNED.contains(&name) {
                    stack.push(e.path());
                }
            } else if crate::policy::is_env_file_name(name) {
                if let Ok(real) = std::fs::canonicalize(e.path()) {
                    if real.is_file() {
                        out.push(real);
                    }
                }
            }
        }
    }
    out.sort();
    out
}
