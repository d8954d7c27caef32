//! What a run checks on the host after its command, and what it writes
//! down before, so that the checks are made even when this sbx never gets
//! to make them.
//!
//! Some "runs later" paths (`.envrc`, `.vscode`, `.git/hooks`, ...) cannot
//! be kept read-only by a mount alone: a missing one cannot be mounted, so
//! the command could create it, and an existing one loses its read-only
//! mount when something outside removes or renames it meanwhile. These
//! checks follow a bubblewrap run only: Seatbelt's rules follow the path,
//! whatever is there, so on macOS nothing is left to check.
//!
//! # Before the command starts ([`Checks::record`])
//!
//! - **Identities**: every protected path with its
//!   [`identity::Identity`] when the policy was resolved (none when it
//!   was missing), as the policy found it.
//! - **The watch list**: those paths, less the ones sbx creates itself before
//!   the run and the files inside `.git` that exist (git on the host replaces
//!   those itself; see `checks::watch_list`).
//! - **The repositories**: every `.git` entry under the project, as the
//!   walk that finds `.env` files saw it, with what it is (device, inode,
//!   type: [`identity::EntryId`]) ([`identity::Repositories`]).
//! - **Git config snapshots**: each git config file mounted read-only, with
//!   its identity and content ([`identity::GitConfigWatch`]).
//! - **Private config copies** ([`copies`]): each of those configs gets a
//!   copy in `CACHE/pending/copies-RUN`, which the command writes instead
//!   (made after the note, so a killed run's copies are always found).
//! - **The note** ([`journal`]): the watch list, the snapshots and the
//!   repositories, in a file
//!   of `CACHE/pending` named after this process. When it cannot be written
//!   the command is not run: a killed sbx would leave its checks undone.
//!
//! # After the command ([`Checks::verify`])
//!
//! Only when the sandbox came up: one that never started ran nothing, and
//! its note is simply dropped.
//!
//! 1. [`sweep()`]: each watched path whose identity changed is renamed to
//!    `NAME.sbx-blocked[-N]` (nothing is deleted), and said.
//! 2. [`gitconfig::check_git_configs`]: each config file replaced during the
//!    run is read by git, and settings it did not have before, beyond what
//!    everyday git commands write, are reported; the file stays as it is.
//! 3. [`copies::apply`]: what the command changed in each private config
//!    copy is read by git; everyday settings are applied to the real file
//!    by git, every other change is named and refused; the copies go.
//! 4. New repositories (`repositories::check_new_repositories`): the project
//!    is walked again (from the walk's cache) and each `.git` entry that was
//!    not there, or that another took the place of (the project's `.git`
//!    renamed away and a file `gitdir: /tmp/evil` put there), is checked: a
//!    file or link (it sends git to a repository the
//!    command prepared elsewhere) is swept like any watched path; a new
//!    repository with hooks or config keys `git init` does not write
//!    ([`gitconfig::inspect_new_git`]) is swept too; a plain one stays.
//!
//! Anything left in place for the user to review (a path that could not be
//! moved away, new git settings) makes sbx exit 125 whatever the command
//! returned. Then the note is removed.
//!
//! # After the fact (`Checks::record(.., after_the_fact: true)`)
//!
//! A sandbox without a mount namespace (Landlock, which grants whole trees)
//! cannot keep a sub-path of a writable root read-only: `.git/hooks`,
//! `.vscode` or `.envrc` are writable during the run, and are protected
//! after it instead. Each protected path has one owner:
//!
//! - **Copied** ([`snapshot`]): every one that exists (files, directories,
//!   links; a missing `.git/hooks` or `.git/config` is created first, as
//!   the other mode does) is copied to `CACHE/pending/snapshot-KEY` and
//!   fingerprinted (each entry's type, mode, inode, size, link target and
//!   change time, which the command cannot set back). After the run each
//!   one whose fingerprint (or content) changed is moved to
//!   `NAME.sbx-blocked[-N]` and its copy put back, inside a directory
//!   reached without following a link ([`aside`]). At most 10,000 entries
//!   and 64 MiB a run: beyond that the command is not run. The directories
//!   above them inside a writable root (`.git`) are recorded too: one the
//!   command replaced, renamed or removed is moved aside in turn (what is
//!   at its path), made again empty, and the paths (and configs) put back
//!   into it; said, with where the directory from before went when it is
//!   found beside, and sbx exits 125 (the user's repository is elsewhere).
//!   A FIFO, socket or device is fingerprinted alone, never opened nor
//!   copied: one that changed is moved aside and not made again (said).
//! - **Git configs** ([`snapshot_configs`]): one with content is not
//!   copied; if its content changed, the content from before is renamed
//!   back over it and what the command changed is sorted like a private
//!   copy's ([`copies::apply`]): everyday settings applied, the rest
//!   refused and named (the command's version then kept beside it).
//! - **Swept**: the missing ones, as above; and those another run going in
//!   the same cache may have changed ([`overlap`]): read from the notes of
//!   the runs still going, a path such a run recorded as missing that is
//!   there now, whose identity changed since, or that is, holds or lies in
//!   one of its copied paths no longer as it was (or below a directory
//!   above them it had that was replaced) is not taken for what was there
//!   before this run's command: never copied, so never put back. A git
//!   config whose content alone such a run's command changed keeps the
//!   content that run recorded as its "before".
//!
//! The note holds the fingerprints and the snapshot directory; written
//! before the copies are made and again once they are, so that a killed
//! run's paths are put back by the next run (its configs too, but their
//! changes are never applied: kept beside them as `config.sbx-blocked`).
//! Something that cannot be put back is said, its copy kept, and sbx exits
//! 125.
//!
//! # A killed run
//!
//! An sbx killed between writing its note and removing it (an agent's
//! timeout sends SIGKILL) leaves the note behind. The next run, before its
//! own policy looks at the project, takes over every note whose process is
//! gone ([`journal::recover`]): it renames it first (of two runs starting at
//! once, one does the checks), sweeps each path against the identity the
//! killed run recorded and checks each git config against its snapshot, as
//! that run would have done, and checks the repositories it made, then
//! removes it. A killed run's config copies are removed, never applied. When they leave something to review, or a note cannot be
//! read, that run refuses to run its own command. A dead run is one whose
//! process is gone or a zombie (killed, not yet reaped by its parent). Until
//! a later run starts, what a killed run planted stays in place.

// What tells a file from another is recorded by policy resolution on every
// platform; the checks themselves follow a bubblewrap run only (Seatbelt's
// rules follow the path, so a path or a git config replaced on the host
// stays protected on macOS).
pub mod identity;

#[cfg(target_os = "linux")]
mod aside;
#[cfg(target_os = "linux")]
mod checks;
#[cfg(target_os = "linux")]
pub mod copies;
#[cfg(target_os = "linux")]
pub mod gitconfig;
#[cfg(target_os = "linux")]
pub mod journal;
#[cfg(target_os = "linux")]
mod overlap;
#[cfg(target_os = "linux")]
mod repositories;
#[cfg(target_os = "linux")]
mod snapshot;
#[cfg(target_os = "linux")]
mod snapshot_configs;
#[cfg(target_os = "linux")]
mod sweep;
#[cfg(all(test, target_os = "linux"))]
mod test_support;

#[cfg(target_os = "linux")]
pub use checks::Checks;
#[cfg(target_os = "linux")]
pub use sweep::sweep;
