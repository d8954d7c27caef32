//! `sbx check`: the backend, the effective policy with where each value came
//! from, and a live self-test that runs a real sandbox and judges it from the
//! host: did a file appear outside the writable roots, did a planted secret
//! come back, did a listener on the host's loopback receive a connection.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;

use crate::banner;
use crate::cli::FormatArg;
use crate::policy::{Host, Platform, Policy};

/// What one self-test found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The policy forbids it and the sandbox stopped it.
    Enforced,
    /// The policy forbids it and it happened anyway.
    NotEnforced,
    /// The policy allows it (e.g. `network = "allow"`).
    Allowed,
}

impl Verdict {
    fn text(&self) -> String {
        match self {
            Verdict::Enforced => "enforced".into(),
            Verdict::NotEnforced => "NOT enforced".into(),
            Verdict::Allowed => "allowed by the policy".into(),
        }
    }
    fn ok(&self) -> bool {
        !matches!(self, Verdict::NotEnforced)
    }
}

/// Run `sbx check`.
pub fn run(policy: &Policy, host: &Host, format: FormatArg) -> Result<ExitCode> {
    let mut backend = backend(policy, host);
    let mut reduced = reduced_only(policy);
    let (mut started, mut tests) = match &backend {
        Ok(_) if policy.enabled => self_test(policy, host, reduced),
        Ok(_) => (Ok(()), Vec::new()),
        Err(e) => (Err(NotStarted::from(e.clone())), Vec::new()),
    };
    // As a run does: where bubblewrap is missing or cannot start on this
    // machine, reduced mode, when it is allowed.
    let falls_back = policy.enabled
        && policy.platform == Platform::Linux
        && policy.backend == crate::config::Backend::Auto
        && policy.require != crate::config::Require::Full
        && reduced.is_none()
        && (backend.is_err() || started.as_ref().is_err_and(|e| e.environment));
    if let (true, Some(landlock)) = (falls_back, crate::run::landlock()) {
        let why = match (&backend, &started) {
            (Err(e), _) => e.clone(),
            (_, Err(e)) => e.text.clone(),
            _ => String::new(),
        };
        backend = Ok(reduced_text(
            landlock,
            &format!("bubblewrap cannot start here: {why}"),
        ));
        reduced = Some(landlock);
        (started, tests) = self_test(policy, host, reduced);
    }
    let unenforced = reduced
        .map(|l| crate::backend::reduced::unenforced(policy, l))
        .unwrap_or_default();
    let started = started.map_err(|e| e.text);
    // A disabled sandbox enforces nothing: never report it as enforced.
    let ok =
        policy.enabled && backend.is_ok() && started.is_ok() && tests.iter().all(|(_, v)| v.ok());
    let report = Report {
        policy,
        backend,
        started,
        tests,
        unenforced,
        ok,
        walk: walk_status(policy, host),
    };
    match format {
        FormatArg::Json => report.print_json(),
        FormatArg::Text => report.print_text(),
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// What `sbx check` found.
struct Report<'a> {
    policy: &'a Policy,
    backend: Result<String, String>,
    started: Result<(), String>,
    tests: Vec<(&'static str, Verdict)>,
    /// What reduced mode does not enforce here (empty in full mode).
    unenforced: Vec<String>,
    ok: bool,
    /// Whether a watcher answers for the project's `.env` walk.
    walk: Option<String>,
}

/// The `.env` walk's watcher, as `envscan::watch::status` sees it.
#[cfg(target_os = "linux")]
fn walk_status(policy: &Policy, host: &Host) -> Option<String> {
    let root = &policy.repositories.as_ref()?.scan_root;
    crate::envscan::watch::status(root, host.cache_dir.as_deref()?)
}

#[cfg(not(target_os = "linux"))]
fn walk_status(_policy: &Policy, _host: &Host) -> Option<String> {
    None
}

impl Report<'_> {
    /// Where each effective value came from.
    fn origins(&self) -> Vec<(String, String)> {
        self.policy
            .origins
            .iter()
            .map(|(k, s)| (k.to_string(), s.to_string()))
            .collect()
    }

    /// The resource limits, each enforced or not on this host.
    fn limits(&self) -> Vec<crate::limits::Status> {
        let linux = self.policy.platform == Platform::Linux;
        let mut limits = self.policy.limits.status_here(linux);
        // Without a sandbox nothing sets them.
        let running = self.policy.enabled && self.backend.is_ok() && self.started.is_ok();
        if !running {
            for l in &mut limits {
                l.how = Err("no sandbox starts, so nothing sets it");
            }
        }
        limits
    }

    fn print_json(&self) {
        let (policy, backend, started) = (self.policy, &self.backend, &self.started);
        let (tests, ok, origins) = (&self.tests, self.ok, self.origins());
        let value = serde_json::json!({
            "ok": ok,
            "backend": backend.as_ref().ok(),
            "backend_error": backend.as_ref().err(),
            "sandbox_error": started.as_ref().err(),
            "enabled": policy.enabled,
            "project": policy.project,
            "writable": policy.writable,
            "policy": banner::summary(policy, ""),
            "tests": tests.iter().map(|(name, v)| serde_json::json!({"test": name, "result": v.text(), "ok": v.ok()})).collect::<Vec<_>>(),
            "origins": origins.iter().map(|(k, s)| serde_json::json!({"key": k, "source": s})).collect::<Vec<_>>(),
            "limits": self.limits().iter().map(|l| serde_json::json!({
                "key": l.key,
                "value": l.value,
                "enforced": l.how.is_ok(),
                "how": l.how.unwrap_or_else(|why| why),
            })).collect::<Vec<_>>(),
            "warnings": policy.warnings,
            "unenforced": self.unenforced,
            "walk": self.walk,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        );
    }

    fn print_text(&self) {
        let (policy, backend, started) = (self.policy, &self.backend, &self.started);
        let (tests, ok, origins) = (&self.tests, self.ok, self.origins());
        match backend {
            Ok(b) => println!("backend:  {b}"),
            Err(e) => println!("backend:  NOT available: {e}"),
        }
        if let Err(e) = started {
            if backend.is_ok() {
                println!("sandbox:  cannot start: {e}");
            }
        }
        if policy.enabled {
            println!("policy:   {}", banner::summary(policy, "sandbox"));
        } else {
            println!("sandbox:  disabled (`enabled = false`): commands run WITHOUT any sandbox");
        }
        println!(
            "project:  {}",
            banner::sanitize(&policy.project.display().to_string())
        );
        if let Some(walk) = &self.walk {
            println!("walk:     {}", banner::sanitize(walk));
        }
        for (name, verdict) in tests {
            println!("test:     {name}: {}", verdict.text());
        }
        for u in &self.unenforced {
            println!("reduced:  NOT enforced: {u}");
        }
        for l in self.limits() {
            match l.how {
                Ok(how) => println!("limit:    {} {}: enforced ({how})", l.key, l.value),
                Err(why) => println!("limit:    {} {}: NOT enforced ({why})", l.key, l.value),
            }
        }
        for (k, s) in &origins {
            println!("setting:  {k} from {}", banner::sanitize(s));
        }
        for w in &policy.warnings {
            println!("warning:  {}", banner::sanitize(w));
        }
        println!(
            "{}",
            if ok && !self.unenforced.is_empty() {
                "result:   reduced mode: the self-tests pass, and what the `reduced:` lines name is NOT enforced here"
            } else if ok {
                "result:   everything the policy asks for is enforced"
            } else if !policy.enabled {
                "result:   nothing is enforced: the sandbox is disabled"
            } else {
                "result:   NOT everything the policy asks for is enforced"
            }
        );
    }
}

/// Reduced mode's Landlock, when `backend = "reduced"` asks for it alone.
fn reduced_only(policy: &Policy) -> Option<crate::backend::reduced::Landlock> {
    let asked =
        policy.platform == Platform::Linux && policy.backend == crate::config::Backend::Reduced;
    asked.then(crate::run::landlock).flatten()
}

/// How `sbx check` names reduced mode.
fn reduced_text(landlock: crate::backend::reduced::Landlock, why: &str) -> String {
    format!(
        "reduced mode: Landlock ABI {}{} and seccomp ({why})",
        landlock.abi,
        if landlock.scopes() { " or later" } else { "" }
    )
}

/// The backend that would run, with its version.
fn backend(policy: &Policy, host: &Host) -> Result<String, String> {
    match policy.platform {
        Platform::Linux if policy.backend == crate::config::Backend::Reduced => {
            match reduced_only(policy) {
                Some(l) => Ok(reduced_text(l, "backend = \"reduced\"")),
                None => Err("reduced mode needs Landlock ABI 3 (Linux 6.2) or newer, which this kernel does not offer".into()),
            }
        }
        Platform::Linux => {
            let path = crate::exec::find_bwrap(policy, host.var("PATH").map(|p| p.as_os_str()))
                .map_err(|no| no.text)?;
            let version = std::process::Command::new(&path)
                .arg("--version")
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                .unwrap_or_default();
            Ok(format!("{} ({version})", path.display()))
        }
        Platform::Macos => {
            let exe = crate::backend::seatbelt::SANDBOX_EXEC;
            if Path::new(exe).exists() {
                Ok(exe.to_string())
            } else {
                Err(format!("{exe} is missing"))
            }
        }
    }
}

/// Why the self-test's sandbox did not start.
#[derive(Debug, Clone)]
struct NotStarted {
    text: String,
    /// Nothing that sandbox can start on this machine (not this policy).
    environment: bool,
}

impl From<String> for NotStarted {
    fn from(text: String) -> Self {
        NotStarted {
            text,
            environment: false,
        }
    }
}

impl From<&str> for NotStarted {
    fn from(text: &str) -> Self {
        NotStarted::from(text.to_string())
    }
}

/// Whether the self-test's sandbox started (why not), and each verdict.
type SelfTest = (Result<(), NotStarted>, Vec<(&'static str, Verdict)>);

/// Run a real sandbox (reduced mode's with `reduced`) with the effective
/// policy plus one planted secret, and judge from the host what it could
/// do.
fn self_test(
    policy: &Policy,
    host: &Host,
    reduced: Option<crate::backend::reduced::Landlock>,
) -> SelfTest {
    match try_self_test(policy, host, reduced.is_some()) {
        Ok(tests) => (Ok(()), tests),
        Err(e) => (Err(e), Vec::new()),
    }
}

/// [`self_test`], or why its sandbox could not be run.
fn try_self_test(
    policy: &Policy,
    host: &Host,
    reduced: bool,
) -> Result<Vec<(&'static str, Verdict)>, NotStarted> {
    use crate::config::FsSetting;
    use crate::policy::Network;
    use std::net::TcpListener;
    use std::time::Duration;

    let sbx = host
        .self_exe
        .clone()
        .ok_or_else(|| NotStarted::from("cannot find sbx's own executable"))?;
    let scratch = scratch_dir(policy, host)
        .ok_or_else(|| NotStarted::from("no scratch directory outside the writable roots"))?;
    let _cleanup = RemoveOnDrop(scratch.clone());
    let marker = format!("sbx-check-secret-{}", std::process::id());
    let secret = scratch.join("secret");
    let written = scratch.join("written");
    if std::fs::write(&secret, &marker).is_err() {
        return Err("cannot write the scratch directory".into());
    }
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot listen on loopback: {e}"))?;
    let _ = listener.set_nonblocking(true);
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();

    let probe = probe_policy(policy, &sbx, &secret, &written, &addr);
    let plan = match reduced {
        true => crate::backend::reduced::render(&probe, &sbx, None),
        false => probe_plan(&probe, host, &sbx)?,
    };
    let (stdout, stderr) = crate::exec::run_captured(&plan, Duration::from_secs(10))
        .map_err(|e| NotStarted::from(format!("{e:#}")))?;
    if !stdout.lines().any(|l| l == "started") {
        if reduced {
            return Err(NotStarted::from(crate::banner::sanitize(stderr.trim())));
        }
        let (text, environment) = crate::run::probe_not_started(&plan, &stderr);
        return Err(NotStarted { text, environment });
    }

    let mut tests = Vec::new();
    let wrote = written.exists();
    tests.push((
        "write outside the writable roots",
        match (policy.filesystem, wrote) {
            (FsSetting::Unrestricted, _) => Verdict::Allowed,
            (_, true) => Verdict::NotEnforced,
            (_, false) => Verdict::Enforced,
        },
    ));
    tests.push((
        "read of a credential",
        if stdout.contains(&marker) {
            Verdict::NotEnforced
        } else {
            Verdict::Enforced
        },
    ));
    tests.push((
        "network to the host's loopback",
        match (&policy.network, connection_arrived(&listener)) {
            (Network::Allow, _) => Verdict::Allowed,
            (_, true) => Verdict::NotEnforced,
            (_, false) => Verdict::Enforced,
        },
    ));
    Ok(tests)
}

/// A scratch directory outside every writable root, if there is one.
fn scratch_dir(policy: &Policy, host: &Host) -> Option<PathBuf> {
    let candidates: Vec<PathBuf> = host
        .cache_dir
        .iter()
        .cloned()
        .chain([PathBuf::from("/var/tmp")])
        .collect();
    candidates.iter().find_map(|dir| {
        let path = dir.join(format!("sbx-check-{}", std::process::id()));
        std::fs::create_dir_all(&path).ok()?;
        let real = std::fs::canonicalize(&path).ok()?;
        if policy.writable.iter().any(|w| real.starts_with(w)) {
            let _ = std::fs::remove_dir_all(&path);
            None
        } else {
            Some(real)
        }
    })
}

/// The effective policy with `secret` planted as a credential, running
/// `sbx __probe` to try writing `written`, reading `secret` and reaching
/// `addr`.
fn probe_policy(policy: &Policy, sbx: &Path, secret: &Path, written: &Path, addr: &str) -> Policy {
    use std::ffi::OsString;
    let mut probe = policy.clone();
    probe.credentials.push(crate::policy::Credential {
        written: secret.to_path_buf(),
        real: Some(secret.to_path_buf()),
        kind: crate::policy::Kind::File,
    });
    probe.command = vec![
        sbx.as_os_str().to_owned(),
        OsString::from("__probe"),
        written.as_os_str().to_owned(),
        secret.as_os_str().to_owned(),
        OsString::from(addr),
    ];
    probe
}

/// Whether the probe connected to `listener` (non-blocking).
fn connection_arrived(listener: &std::net::TcpListener) -> bool {
    use std::io::Read;
    use std::time::{Duration, Instant};
    // Give a connection that is on its way a moment to arrive.
    let deadline = Instant::now() + Duration::from_millis(200);
    let mut connected = false;
    while Instant::now() < deadline && !connected {
        match listener.accept() {
            Ok((mut stream, _)) => {
                let mut buf = [0u8; 16];
                let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
                let _ = stream.read(&mut buf);
                connected = true;
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
    connected
}

/// The plan that runs the probe policy on this platform.
fn probe_plan(probe: &Policy, host: &Host, sbx: &Path) -> Result<crate::backend::Plan, String> {
    match probe.platform {
        Platform::Linux => {
            let path = host.var("PATH").map(|p| p.as_os_str());
            let bwrap = crate::exec::find_bwrap(probe, path).map_err(|no| no.text)?;
            Ok(crate::backend::bwrap::render(
                probe,
                &bwrap,
                sbx,
                None,
                crate::backend::PerRun::default(),
            ))
        }
        Platform::Macos => {
            crate::backend::seatbelt::render(probe, sbx, None, None).map_err(|e| format!("{e:#}"))
        }
    }
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `sbx __probe WRITE READ ADDR`, run inside the self-test sandbox: try each
/// thing and say what happened. The verdicts are taken on the host side; this
/// output only carries what was read.
pub fn probe(write: &Path, read: &Path, addr: &str) -> ExitCode {
    use std::io::Write;
    println!("started");
    match std::fs::File::create(write) {
        Ok(_) => println!("write: ok"),
        Err(e) => println!("write: {e}"),
    }
    match std::fs::read_to_string(read) {
        Ok(text) => println!("read: {text}"),
        Err(e) => println!("read: {e}"),
    }
    let connected = addr
        .parse()
        .ok()
        .and_then(|a| {
            std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_secs(1)).ok()
        })
        .map(|mut s| s.write_all(b"sbx-probe").is_ok());
    println!(
        "connect: {}",
        if connected.is_some() { "ok" } else { "refused" }
    );
    ExitCode::SUCCESS
}
