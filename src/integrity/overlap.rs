//! Runs that overlap in one project, after the fact: what another run's
//! command changed while it runs is not what was there before this one's.
//!
//! An after-the-fact run copies its "runs later" paths before its command
//! and puts the copies back after it. If another run is going meanwhile,
//! what its command planted (an `.envrc` it created, a hook it added to a
//! `.git/hooks` it copied) would be copied as this run's "before", and put
//! back by this run after the other one moved it aside. So, before it
//! copies anything, a run reads the notes of the runs still going
//! ([`super::journal::live_notes`]), and each of its protected paths that
//! one of them may have changed is not copied but swept after the run like
//! a missing one (moved aside if its identity changed, never put back): a
//! path such a run recorded as missing that is there now, or whose
//! identity changed since it recorded it; one that is, holds or lies inside
//! one of its kept paths that is no longer as it was, or lies inside a
//! directory above them that it had that was replaced; one that is or holds
//! one of its git configs whose content changed. A git config whose content
//! alone changed keeps the content that run recorded as its "before" (the
//! other run puts it back; this one would then put it back too).
//!
//! The other run's own checks still undo what its command did, whichever
//! run ends first: a path it put back has a new identity, so this run moves
//! it aside after its command, never putting back what the other's command
//! left.

use std::path::Path;

use super::identity::{read_regular_file, GitConfigWatch, Identity};
use super::journal::{self, Recorded};
use super::snapshot_configs::MAX_CONFIG_BYTES;

/// What the runs still going (other than this one) recorded before their
/// commands.
#[derive(Default)]
pub struct Others(Vec<Recorded>);

/// Whether a path can be taken as it is now for what was there before this
/// run's command.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// No run going may have changed it.
    Trusted,
    /// Another run's command may have changed it: swept after the run, not
    /// copied.
    Untrusted,
    /// A git config whose content changed since a run going recorded this
    /// content, and nothing else about it: that content is its "before".
    ConfigWas(&'a [u8]),
}

impl Others {
    /// Read the notes of the runs going in `cache`.
    pub fn read(cache: &Path) -> Others {
        Others(journal::live_notes(cache))
    }

    /// What is known of `path` (see [`Verdict`]).
    pub fn verdict(&self, path: &Path) -> Verdict<'_> {
        let overlaps = |p: &Path| p.starts_with(path) || path.starts_with(p);
        let disturbed = self.0.iter().any(|r| {
            r.watch
                .iter()
                .any(|(w, before)| overlaps(w) && Identity::of(w) != *before)
                || r.snapshot.as_ref().is_some_and(|s| s.touched(path))
        });
        if disturbed {
            return Verdict::Untrusted;
        }
        let changed: Vec<&GitConfigWatch> = self
            .0
            .iter()
            .flat_map(|r| {
                r.git_configs
                    .iter()
                    .chain(r.snapshot.iter().flat_map(|s| &s.configs))
            })
            .filter(|c| overlaps(&c.path) && !config_as_before(c))
            .collect();
        match changed.as_slice() {
            [] => Verdict::Trusted,
            // Two runs that recorded different contents: which one was
            // there first cannot be told.
            [first, rest @ ..]
                if first.path == path
                    && !first.before.is_empty()
                    && rest
                        .iter()
                        .all(|c| c.path == path && c.before == first.before) =>
            {
                Verdict::ConfigWas(&first.before)
            }
            _ => Verdict::Untrusted,
        }
    }
}

/// Whether the git config `c` is still as its run recorded it (the same
/// content, or still missing), read without following a link or waiting on
/// a FIFO.
fn config_as_before(c: &GitConfigWatch) -> bool {
    match read_regular_file(&c.path, MAX_CONFIG_BYTES) {
        Ok(Some(now)) => c.identity.is_some() && now == c.before,
        Ok(None) => c.identity.is_none(),
        Err(_) => false,
    }
}
