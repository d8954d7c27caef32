//! The command's environment: which variables are credentials (by name or
//! by value), and what is kept, removed or set.

use std::path::{Path, PathBuf};

use super::lists::{
    CREDENTIAL_VAR_NAMES, CREDENTIAL_VAR_PARTS, CREDENTIAL_VAR_SUFFIXES, MINIMAL_ENV,
    SECRET_VALUE_KEYS, TOKEN_PREFIXES,
};
use super::paths::real;
use super::{EnvPlan, Host};
use crate::config::EnvMode;

/// Whether an environment variable looks like a credential, by its name.
#[cfg(test)]
pub fn is_credential_var(name: &str) -> bool {
    is_credential_env(name, "")
}

/// Whether an environment variable looks like a credential, by its name or
/// by its value: a password in any URL in it (`DATABASE_URL`, the second
/// index of `PIP_EXTRA_INDEX_URL`), in a query or connection string
/// (`?password=`, `;Password=`), or a bundler host credential
/// (`BUNDLE_GEMS__EXAMPLE__COM=user:pass`).
pub fn is_credential_env(name: &str, value: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    CREDENTIAL_VAR_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || CREDENTIAL_VAR_PARTS.iter().any(|p| upper.contains(p))
        || CREDENTIAL_VAR_NAMES.contains(&upper.as_str())
        || (upper.starts_with("BUNDLE_") && upper.contains("__") && value.contains(':'))
        || value_holds_secret(value)
}

/// A secret in the user part of any URL of the value, in a query or
/// connection string parameter, or an Oracle-style `user/password@host`.
fn value_holds_secret(value: &str) -> bool {
    // Most values (PATH, LANG, ...) have none of these: no search then (this
    // runs for every variable, on every run).
    if !value.contains(['=', '@']) {
        return false;
    }
    let url_secret = value.match_indices("://").any(|(i, _)| {
        // The authority ends at the path; a password may hold `;` or `,`.
        let authority = value[i + 3..]
            .split(['/', '?', '#', ' '])
            .next()
            .unwrap_or("");
        authority
            .rsplit_once('@')
            .is_some_and(|(userinfo, _)| secret_userinfo(userinfo))
    });
    let lower = value.to_ascii_lowercase();
    let keyed = SECRET_VALUE_KEYS.iter().any(|key| {
        lower.match_indices(key).any(|(i, _)| {
            // At the start of a parameter or of a word in its name
            // (`client_secret=`, `refresh_token=`, `api-key=`), not inside a
            // longer word (`monkey=`), and with a value.
            let starts = i == 0
                || matches!(
                    lower.as_bytes()[i - 1],
                    b'?' | b'&' | b';' | b' ' | b',' | b'_' | b'-'
                );
            let has_value = lower[i + key.len()..]
                .chars()
                .next()
                .is_some_and(|c| !matches!(c, '&' | ';' | ' ' | ','));
            starts && has_value
        })
    });
    url_secret || keyed || oracle_login(value)
}

/// A URL's user part that gives something away: `user:password`, or a
/// token on its own (`https://ghp_...@github.com`), told from a plain user
/// name (`git@`) by its length or its prefix.
fn secret_userinfo(userinfo: &str) -> bool {
    userinfo.contains(':')
        || userinfo.len() >= 20
        || TOKEN_PREFIXES.iter().any(|p| userinfo.starts_with(p))
}

/// `user/password@host` (Oracle's connect strings), without a scheme.
fn oracle_login(value: &str) -> bool {
    let Some((login, host)) = value.split_once('@') else {
        return false;
    };
    let Some((user, password)) = login.split_once('/') else {
        return false;
    };
    !value.contains("://")
        && !host.is_empty()
        && !password.is_empty()
        && !password.contains('/')
        && user
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '$' | '#'))
        && !value.contains(char::is_whitespace)
}

/// Whether a git config value given in the environment is an
/// authentication header (`http.extraHeader`) or otherwise a credential.
fn git_config_value_is_secret(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    lower.contains("authorization:") || lower.contains("bearer ") || value_holds_secret(value)
}

/// The inner shell for shell mode: the configured one, else bash, else sh.
pub(super) fn shell(configured: Option<&Path>) -> PathBuf {
    match configured {
        Some(p) => p.to_path_buf(),
        None if Path::new("/bin/bash").exists() => PathBuf::from("/bin/bash"),
        None => PathBuf::from("/bin/sh"),
    }
}

/// Package managers' retry settings that make a denied network fail in
/// seconds (npm retried for over a minute, pip for 8 s, cargo for 11 s),
/// each set only when the user has not set it.
const FAIL_FAST: &[(&str, &str)] = &[
    ("npm_config_fetch_retries", "0"),
    ("PIP_RETRIES", "0"),
    ("CARGO_NET_RETRY", "0"),
];

impl EnvPlan {
    /// With the network denied, no package manager waits for it.
    pub(super) fn add_fail_fast(&mut self, host: &Host) {
        for (var, value) in FAIL_FAST {
            if host.var(var).is_none() {
                self.set.push(((*var).to_string(), (*value).to_string()));
            }
        }
        self.set.sort();
    }

    /// Point each tool at the cache sbx gives it.
    pub(super) fn add_tool_caches(&mut self, caches: &[super::writable::ToolCache]) {
        for (var, dir, file) in caches {
            let path = file.as_ref().map_or(dir.clone(), |f| dir.join(f));
            self.set.push((var.clone(), path.display().to_string()));
        }
        self.set.sort();
    }
}

/// Decide which variables the command gets.
pub(super) fn plan_env(
    host: &Host,
    mode: EnvMode,
    passthrough: &[String],
    shell: &Path,
) -> EnvPlan {
    let mut plan = EnvPlan {
        clear: mode == EnvMode::Minimal,
        ..EnvPlan::default()
    };
    // $SHELL naming sbx itself would make every program that spawns $SHELL
    // start a nested sbx; inside, the shell is the inner shell.
    let shell_is_sbx = host
        .var("SHELL")
        .and_then(|s| real(Path::new(s)))
        .is_some_and(|s| Some(&s) == host.self_exe.as_ref());
    // Config given to git through the environment (GIT_CONFIG_COUNT,
    // GIT_CONFIG_KEY_n, GIT_CONFIG_VALUE_n) goes as a whole when one value
    // is a credential: a gap in the numbering makes git refuse to run.
    let git_config_secret = host.env.iter().any(|(k, v)| {
        k.to_str()
            .is_some_and(|k| k.starts_with("GIT_CONFIG_VALUE_") || k.starts_with("GIT_CONFIG_KEY_"))
            && v.to_str().is_some_and(git_config_value_is_secret)
    });
    let is_git_config = |k: &str| {
        k == "GIT_CONFIG_COUNT"
            || k.starts_with("GIT_CONFIG_KEY_")
            || k.starts_with("GIT_CONFIG_VALUE_")
    };
    for (k, v) in &host.env {
        let (Some(k), Some(v)) = (k.to_str(), v.to_str()) else {
            continue;
        };
        let passed = passthrough.iter().any(|p| p == k);
        if k == "SBX_SANDBOX" || (k == "SHELL" && shell_is_sbx) {
            continue;
        }
        let secret = is_credential_env(k, v)
            || (git_config_secret && is_git_config(k))
            || (k == "GIT_CONFIG_PARAMETERS" && git_config_value_is_secret(v));
        if secret && !passed {
            if !plan.clear {
                plan.unset.push(k.to_string());
            }
            continue;
        }
        if plan.clear && (MINIMAL_ENV.contains(&k) || k.starts_with("LC_") || passed) {
            plan.set.push((k.to_string(), v.to_string()));
        }
    }
    if shell_is_sbx {
        plan.set.push(("SHELL".into(), shell.display().to_string()));
    }
    plan.set.push(("SBX_SANDBOX".into(), "1".into()));
    plan.set.sort();
    plan.unset.sort();
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Platform;
    use std::ffi::OsString;

    #[test]
    fn credential_variables() {
        for v in [
            "GITHUB_TOKEN",
            "ANTHROPIC_API_KEY",
            "AWS_SECRET_ACCESS_KEY",
            "DB_PASSWORD",
            "SSH_AUTH_SOCK",
            "my_secret_thing",
        ] {
            assert!(is_credential_var(v), "{v}");
        }
        for v in [
            "PATH",
            "HOME",
            "TERM",
            "CARGO_HOME",
            "EDITOR",
            "PWD",
            "OLDPWD",
            "KEYMAP",
        ] {
            assert!(!is_credential_var(v), "{v}");
        }
        for v in [
            "DB_PASS",
            "GPG_PASSPHRASE",
            "STRIPE_APIKEY",
            "SESSION_JWT",
            "SLACK_WEBHOOK_URL",
            "PGPASSWORD",
            "MYSQL_PWD",
            "GITHUB_PAT",
            "NPM_CONFIG__AUTH",
            "TOKEN",
            "PASSWORD",
            "SENTRY_DSN",
            "NPM_CONFIG__AUTH_TOKEN",
        ] {
            assert!(is_credential_var(v), "{v}");
        }
        assert!(is_credential_env(
            "DATABASE_URL",
            "postgres://app:hunter2@db:5432/x"
        ));
        assert!(!is_credential_env("DATABASE_URL", "postgres://db:5432/x"));
        assert!(!is_credential_env("HOMEPAGE", "https://example.com/a:b@c"));
        // Found by the seventh review.
        for (k, v) in [
            ("AWS_BEARER_TOKEN_BEDROCK", "x"),
            ("TF_TOKEN_app_terraform_io", "x"),
            ("BUNDLE_GEMS__CONTRIBSYS__COM", "user:pass"),
            (
                "PIP_EXTRA_INDEX_URL",
                "https://pypi.org/simple https://u:p@corp.example/simple",
            ),
            (
                "GOPROXY",
                "https://proxy.golang.org,https://u:p@corp.example",
            ),
            ("JDBC_URL", "jdbc:postgresql://db/x?user=a&password=b"),
            (
                "ConnectionStrings__Default",
                "Server=db;User Id=a;Password=b;",
            ),
            ("VSS_NUGET_EXTERNAL_FEED_ENDPOINTS", "{}"),
            ("SOME_URL", "https://api.example/x?access_token=abc"),
            // Found by the eighth review.
            (
                "AZURE_STORAGE",
                "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc==;",
            ),
            (
                "SB",
                "Endpoint=sb://x/;SharedAccessKeyName=k;SharedAccessKey=abc=",
            ),
            (
                "BLOB_URL",
                "https://a.blob.core.windows.net/c?sv=1&sig=abc%3D",
            ),
            ("GITLAB_URL", "https://gitlab.example/api?private_token=abc"),
            ("OAUTH", "client_id=x&client_secret=abc"),
            ("REFRESH", "grant_type=refresh_token&refresh_token=abc"),
            (
                "REPO_URL",
                "https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/o/r",
            ),
            ("DB", "postgres://u:pa;ss@db/x"),
            ("ORACLE_CONN", "scott/tiger@db.example:1521/orcl"),
            ("BW_SESSION", "abc"),
            ("OP_SESSION_my", "abc"),
            ("ORG_GRADLE_PROJECT_signingKey", "abc"),
            ("GOOGLE_CLOUD_KEYFILE_JSON", "{}"),
        ] {
            assert!(is_credential_env(k, v), "{k}={v}");
        }
        for (k, v) in [
            ("TOKENIZERS_PARALLELISM", "false"),
            ("BUNDLE_PATH", "vendor/bundle"),
            ("BUNDLE_GEMFILE", "/x/Gemfile"),
            ("GOPROXY", "https://proxy.golang.org,direct"),
            ("REPO_URL", "ssh://git@github.com/o/r.git"),
            ("HOMEPAGE", "https://example.com/?email=me@example.com"),
            ("NODE_PATH", "/usr/lib/node_modules"),
            ("KEYMAP", "us"),
            ("XDG_SESSION_TYPE", "tty"),
            ("LESS", "-R"),
            // A bare `password=` with nothing after it gives nothing away.
            ("SQL", "select password= from t"),
        ] {
            assert!(!is_credential_env(k, v), "{k}={v}");
        }
    }

    #[test]
    fn git_config_in_the_environment_goes_whole_when_it_holds_a_secret() {
        let host = |vars: &[(&str, &str)]| Host {
            platform: Platform::Linux,
            cwd: "/".into(),
            home: "/home/t".into(),
            account_home: None,
            account_problem: None,
            env: vars
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
            self_exe: None,
            cache_dir: None,
            scan_env_files: false,
        };
        let vars = [
            ("GIT_CONFIG_COUNT", "2"),
            ("GIT_CONFIG_KEY_0", "safe.directory"),
            ("GIT_CONFIG_VALUE_0", "*"),
            ("GIT_CONFIG_KEY_1", "http.extraHeader"),
            ("GIT_CONFIG_VALUE_1", "Authorization: Bearer abc"),
        ];
        let plan = plan_env(&host(&vars), EnvMode::Inherit, &[], Path::new("/bin/sh"));
        for (k, _) in vars {
            assert!(plan.unset.contains(&k.to_string()), "{k}: {plan:?}");
        }
        let plan = plan_env(
            &host(&vars[..3]),
            EnvMode::Inherit,
            &[],
            Path::new("/bin/sh"),
        );
        assert!(plan.unset.is_empty(), "{plan:?}");
        // A token in a key (`url.<base>.insteadOf`), and the single-variable
        // form git also reads.
        let vars = [
            ("GIT_CONFIG_COUNT", "1"),
            (
                "GIT_CONFIG_KEY_0",
                "url.https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/.insteadOf",
            ),
            ("GIT_CONFIG_VALUE_0", "https://github.com/"),
            (
                "GIT_CONFIG_PARAMETERS",
                "'http.extraheader'='AUTHORIZATION: basic abc'",
            ),
        ];
        let plan = plan_env(&host(&vars), EnvMode::Inherit, &[], Path::new("/bin/sh"));
        for (k, _) in vars {
            assert!(plan.unset.contains(&k.to_string()), "{k}: {plan:?}");
        }
    }
}
