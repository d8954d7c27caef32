//! The sweep: a "runs later" path that the run created or replaced is moved
//! aside, never deleted.

use std::path::Path;

use super::identity::Identity;

/// Neutralise a "runs later" path that the run created or replaced: rename
/// it to `NAME.sbx-blocked[-N]` (nothing is deleted) and say so. Its
/// directory must still be the real directory it was when the policy was
/// resolved, so the rename never follows a link the command planted. False
/// when such a path is still in place.
pub fn sweep(path: &Path, before: Option<&Identity>, warn: &dyn Fn(&str)) -> bool {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Some(now) = Identity::of(path) else {
        return true;
    };
    if Some(&now) == before {
        return true;
    }
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return true;
    };
    if std::fs::canonicalize(parent).ok().as_deref() != Some(parent) {
        warn(&format!(
            "{} runs later outside the sandbox and was created or replaced during the run, but its directory changed too, so sbx did not touch it: review it before use",
            path.display()
        ));
        return false;
    }
    let name = name.to_string_lossy().into_owned();
    let mut target = parent.join(format!("{name}.sbx-blocked"));
    let mut n = 1;
    while std::fs::symlink_metadata(&target).is_ok() {
        n += 1;
        target = parent.join(format!("{name}.sbx-blocked-{n}"));
    }
    let mut moved = std::fs::rename(path, &target);
    if moved.is_err() {
        // The command may have taken the write bit off the directory.
        if let Ok(m) = std::fs::metadata(parent) {
            if m.uid() == nix::unistd::geteuid().as_raw() {
                let mut perms = m.permissions();
                perms.set_mode(perms.mode() | 0o700);
                let _ = std::fs::set_permissions(parent, perms);
                moved = std::fs::rename(path, &target);
            }
        }
    }
    match moved {
        Ok(()) => {
            warn(&format!(
                "the command created or replaced {}, which runs later outside the sandbox; it was moved to {} (review it, and rename it back only if you trust it)",
                path.display(),
                target.display()
            ));
            true
        }
        Err(e) => {
            warn(&format!(
                "the command created or replaced {}, which runs later outside the sandbox, and it could not be moved away ({e}): review it before use",
                path.display()
            ));
            false
        }
    }
}
