//! A fixed policy for renderer tests.

use std::path::PathBuf;

use super::{Credential, EnvPlan, Kind, Network, Platform, Policy, Protected};
use crate::config::{BannerMode, FsSetting};

/// A policy with fixed paths for renderer tests: home `/home/t`, project
/// `/home/t/proj`, the default grants, and a few credentials of each kind.
pub(crate) fn test_policy(platform: Platform) -> Policy {
    let home = PathBuf::from(match platform {
        Platform::Linux => "/home/t",
        Platform::Macos => "/Users/t",
    });
    let project = home.join("proj");
    let tmp = PathBuf::from(match platform {
        Platform::Linux => "/tmp",
        Platform::Macos => "/private/tmp",
    });
    let cred = |rel: &str, kind: Kind| Credential {
        written: home.join(rel),
        real: (kind != Kind::Missing).then(|| home.join(rel)),
        kind,
    };
    Policy {
        platform,
        enabled: true,
        require: crate::config::Require::Nothing,
        backend: crate::config::Backend::Auto,
        allow_unsandboxed: true,
        filesystem: FsSetting::Restricted,
        home: home.clone(),
        project: project.clone(),
        cwd: project.clone(),
        writable: vec![tmp, project.clone()],
        protected: vec![
            Protected {
                path: project.join(".envrc"),
                kind: Kind::File,
                create: false,
                identity: None,
            },
            Protected {
                path: project.join(".git/config"),
                kind: Kind::File,
                create: false,
                identity: None,
            },
            Protected {
                path: project.join(".git/hooks"),
                kind: Kind::Dir,
                create: true,
                identity: None,
            },
        ],
        pins: vec![project.join(".git")],
        pinned_links: Vec::new(),
        git_configs: Vec::new(),
        tool_caches: Vec::new(),
        credentials: vec![
            cred(".ssh", Kind::Dir),
            cred(".netrc", Kind::File),
            cred(".aws", Kind::Missing),
        ],
        env_files: vec![project.join(".env"), project.join("sub/.env.local")],
        repositories: None,
        other_repositories: Vec::new(),
        placeholder: home.join(".cache/sbx/empty"),
        network: Network::Deny,
        unix_sockets: crate::config::UnixSockets::Own,
        own_sockets: None,
        env: EnvPlan {
            clear: false,
            set: vec![("SBX_SANDBOX".into(), "1".into())],
            unset: vec!["GITHUB_TOKEN".into()],
        },
        shell: PathBuf::from("/bin/bash"),
        banner: BannerMode::Auto,
        bwrap: None,
        system_paths: Vec::new(),
        command: vec!["echo".into(), "hi".into()],
        warnings: Vec::new(),
        origins: Vec::new(),
        limits: crate::limits::Limits::default(),
    }
}
