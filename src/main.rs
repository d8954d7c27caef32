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
    match app::run(std::env::args_os().collect()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("sbx: error: {}", banner::sanitize(&format!("{err:#}")));
            ExitCode::from(error::exit_code(&err))
        }
    }
}
