//! sbx: run any command inside an OS-enforced sandbox.

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
mod identity;
// Its checks run after a bubblewrap run (Seatbelt rules follow the path, so
// a config git replaced on the host stays protected on macOS).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
mod gitconfig;
#[cfg(target_os = "linux")]
mod inner;
#[cfg(target_os = "linux")]
mod journal;
mod netrule;
mod policy;
mod probe;
mod proxy;
#[cfg(target_os = "linux")]
mod seccomp;
mod supervise;

use std::process::ExitCode;

fn main() -> ExitCode {
    match app::run(std::env::args_os().collect()) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("sbx: error: {}", banner::sanitize(&format!("{err:#}")));
            ExitCode::from(error::exit_code(&err))
        }
    }
}
