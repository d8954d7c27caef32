//! What the integrity tests share: git run as the checks run it, and the
//! repositories of a tree as policy resolution records them.

// Test code: a failure is a panic.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use super::gitconfig::TRUSTED_GIT;
use super::identity::Repositories;

/// `git config --file FILE KEY VALUE`, by the git the checks trust.
pub fn git_config(file: &Path, key: &str, value: &str) {
    let ok = std::process::Command::new(TRUSTED_GIT)
        .args(["config", "--file"])
        .arg(file)
        .args([key, value])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

/// The repositories under `root` as policy resolution records them.
pub fn repositories_of(root: &Path) -> Repositories {
    crate::policy::walked_repositories(root, None)
}
