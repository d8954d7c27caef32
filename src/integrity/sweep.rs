//! The sweep: a "runs later" path that the run created or replaced is moved
//! aside, never deleted.

use std::path::Path;

use super::aside::{set_aside, RealDir};
use super::identity::Identity;

/// Neutralise a "runs later" path that the run created or replaced: rename
/// it to `NAME.sbx-blocked[-N]` (nothing is deleted) and say so. Its
/// directory must still be the real directory it was when the policy was
/// resolved (reached without a link, see [`RealDir`]), so the rename never
/// follows a link the command planted. False when such a path is still in
/// place.
pub fn sweep(path: &Path, before: Option<&Identity>, warn: &dyn Fn(&str)) -> bool {
    let Some(now) = Identity::of(path) else {
        return true;
    };
    if Some(&now) == before {
        return true;
    }
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        return true;
    };
    let Ok(dir) = RealDir::open(parent) else {
        warn(&format!(
            "{} runs later outside the sandbox and was created or replaced during the run, but its directory changed too, so sbx did not touch it: review it before use",
            path.display()
        ));
        return false;
    };
    match set_aside(&dir, name) {
        Ok(target) => {
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
