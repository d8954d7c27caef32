//! sbx: run any command inside an OS-enforced sandbox.

mod account;
mod app;
mod backend;
mod banner;
mod check;
mod cli;
mod config;
mod envscan;
mod error;
mod exec;
mod generate;
mod integrity;
mod limits;
mod netrule;
mod policy;
mod proxy;
mod run;
mod supervise;

use std::process::ExitCode;

/// The static release build's allocator (musl's own was a quarter of
/// sbx's time before bubblewrap starts; measured in the README's
/// "Performance" section). The glibc build keeps the C library's.
#[cfg(all(target_os = "linux", target_env = "musl"))]
#[global_allocator]
static ALLOCATOR: dlmalloc::GlobalDlmalloc = dlmalloc::GlobalDlmalloc;

fn main() -> ExitCode {
    // dlmalloc has one lock and, unlike the C libraries' allocators, no
    // fork handler of its own: a child forked while another thread held
    // the lock (the inner stage's relay threads, a `pre_exec` spawn) would
    // wait forever at its first allocation. This registers the handlers
    // (pthread_atfork) that take the lock around a fork.
    // SAFETY: the crate asks for the call before any allocation of ours
    // and once: this is the first line of `main`, still one thread.
    #[cfg(all(target_os = "linux", target_env = "musl"))]
    #[allow(unsafe_code)]
    unsafe {
        dlmalloc::enable_alloc_after_fork();
    }
    match app::run(std::env::args_os().collect()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("sbx: error: {}", banner::sanitize(&format!("{err:#}")));
            ExitCode::from(error::exit_code(&err))
        }
    }
}
