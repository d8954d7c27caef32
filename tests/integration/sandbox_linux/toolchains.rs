//! Everyday toolchains on defaults, fetching what they need from a local
//! source (only loopback traffic): cargo's first build with a new
//! dependency, pip's install with its cache, go's module download. Each
//! writes to a cache of sbx's for the project, judged on the host, while
//! the user's own stays as it was.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use super::*;

/// The rest of the first line of the output that starts with `prefix`.
fn value_of(out: &Output, prefix: &str) -> String {
    stdout(out)
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .unwrap_or_default()
        .to_string()
}

/// Every file beneath `dir`.
fn files_beneath(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => todo.push(e.path()),
                Ok(_) => out.push(e.path()),
                Err(_) => {}
            }
        }
    }
    out
}

/// A first `cargo build` that needs a crate it has never fetched works
/// with the network open, as the README says: cargo's home is then the
/// project's own in sbx's cache, and the user's registry, which the
/// user's own builds compile from, stays untouched. The crate comes from a
/// local registry (cargo unpacks it into its home all the same). With the
/// network denied, cargo keeps the user's home (it builds offline from
/// what is there).
#[test]
fn a_first_cargo_build_fetches_into_a_home_of_its_own() {
    require_sandbox!();
    // The cargo running this suite, and the rustc beside it.
    let cargo = PathBuf::from(
        std::env::var_os("CARGO")
            .expect("CARGO is set when cargo runs the tests; run this one through cargo"),
    );
    let rustc = cargo.with_file_name("rustc");
    let world = World::new();
    world.git_repo();
    let registry = world.root.join("registry");
    let krate = world.root.join("crate-src/sbxdep-0.1.0");
    util::write(
        &krate.join("Cargo.toml"),
        "[package]\nname = \"sbxdep\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    util::write(&krate.join("src/lib.rs"), "pub fn answer() -> u32 { 42 }\n");
    std::fs::create_dir_all(registry.join("index/sb/xd")).unwrap();
    let archive = registry.join("sbxdep-0.1.0.crate");
    let tar = Command::new("tar")
        .arg("czf")
        .arg(&archive)
        .arg("sbxdep-0.1.0")
        .current_dir(krate.parent().unwrap())
        .status()
        .unwrap();
    assert!(tar.success());
    let sum = Command::new("sha256sum").arg(&archive).output().unwrap();
    let sum = String::from_utf8_lossy(&sum.stdout);
    let sum = sum.split_whitespace().next().unwrap();
    util::write(
        &registry.join("index/sb/xd/sbxdep"),
        &format!(
            "{{\"name\":\"sbxdep\",\"vers\":\"0.1.0\",\"deps\":[],\"cksum\":\"{sum}\",\"features\":{{}},\"yanked\":false}}\n"
        ),
    );
    let p = &world.project;
    util::write(
        &p.join("Cargo.toml"),
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nsbxdep = \"0.1\"\n",
    );
    util::write(
        &p.join("src/main.rs"),
        "fn main() { println!(\"ANSWER {}\", sbxdep::answer()); }\n",
    );
    util::write(
        &p.join(".cargo/config.toml"),
        &format!(
            "[source.crates-io]\nreplace-with = \"local\"\n\n[source.local]\nlocal-registry = \"{}\"\n",
            registry.display()
        ),
    );
    let own = world.home.join(".cargo/registry");
    std::fs::create_dir_all(&own).unwrap();
    let rustc_env = ("RUSTC", rustc.to_str().unwrap());
    let script = "echo \"home=$CARGO_HOME\"; \"$0\" run -q";
    let cargo = cargo.to_str().unwrap();

    // Denied: the user's home, read-only; the crate cannot be unpacked.
    let out = Sbx.run(&world, &[], &["sh", "-c", script, cargo], &[rustc_env]);
    assert_line(&out, "home=");
    assert!(!out.status.success(), "{}", both(&out));

    let out = Sbx.run(
        &world,
        &["--network", "allow"],
        &["sh", "-c", script, cargo],
        &[rustc_env],
    );
    assert_line(&out, "ANSWER 42");
    let home = PathBuf::from(value_of(&out, "home="));
    assert!(
        home.starts_with(world.home.join(".cache/sbx/projects")),
        "{}",
        both(&out)
    );
    assert!(
        files_beneath(&home.join("registry"))
            .iter()
            .any(|f| f.ends_with("sbxdep-0.1.0/src/lib.rs")),
        "{}",
        both(&out)
    );
    assert!(files_beneath(&own).is_empty(), "{:?}", files_beneath(&own));
}

/// A loopback HTTP server that serves `files` (path, content; a path
/// ending in `/` is a page) with a cache lifetime; its base URL, and how
/// many files it served.
fn serve(files: Vec<(String, Vec<u8>)>) -> (String, Arc<AtomicUsize>) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    // HTTP caches store nothing without a date.
    let date = Command::new("date")
        .args(["-u", "+%a, %d %b %Y %H:%M:%S GMT"])
        .output()
        .unwrap();
    let date = String::from_utf8_lossy(&date.stdout).trim().to_string();
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(&stream);
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            loop {
                let mut header = String::new();
                match reader.read_line(&mut header) {
                    Ok(n) if n > 2 => {}
                    _ => break,
                }
            }
            let path = line.split_whitespace().nth(1).unwrap_or_default();
            let found = files.iter().find(|(p, _)| p == path);
            let mut s = &stream;
            match found {
                Some((_, body)) => {
                    count.fetch_add(1, Ordering::SeqCst);
                    let kind = match path.ends_with('/') {
                        true => "text/html",
                        false => "application/octet-stream",
                    };
                    let _ = write!(
                        s,
                        "HTTP/1.1 200 OK\r\nDate: {date}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: max-age=3600\r\nConnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = s.write_all(body);
                }
                None => {
                    let _ = write!(
                        s,
                        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                }
            }
        }
    });
    (url, served)
}

/// `pip install` with the network open caches what it downloads in the
/// project's pip cache of sbx's (it ran with its cache disabled before),
/// from a package index on loopback (a trusted host: pip caches nothing
/// from a plain-HTTP index otherwise); the user's own cache stays empty.
#[test]
fn pip_install_uses_a_cache_of_the_projects() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    world.git_repo();
    // A wheel, made on the host.
    let wheel_dir = world.root.join("wheel");
    std::fs::create_dir_all(&wheel_dir).unwrap();
    let name = "sbxpkg-0.1.0-py3-none-any.whl";
    let make = r#"
import sys, zipfile, hashlib, base64
def rec(data):
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
files = {
    "sbxpkg/__init__.py": b"ANSWER = 42\n",
    "sbxpkg-0.1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: sbxpkg\nVersion: 0.1.0\n",
    "sbxpkg-0.1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: sbx-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = "".join("%s,%s,%d\n" % (n, rec(d), len(d)) for n, d in files.items())
record += "sbxpkg-0.1.0.dist-info/RECORD,,\n"
with zipfile.ZipFile(sys.argv[1], "w") as z:
    for n, d in files.items():
        z.writestr(n, d)
    z.writestr("sbxpkg-0.1.0.dist-info/RECORD", record)
"#;
    let made = Command::new(python())
        .args(["-c", make])
        .arg(wheel_dir.join(name))
        .status()
        .unwrap();
    assert!(made.success());
    let wheel = std::fs::read(wheel_dir.join(name)).unwrap();
    let index = format!("<html><body><a href=\"/files/{name}\">{name}</a></body></html>\n");
    let (url, served) = serve(vec![
        ("/simple/sbxpkg/".into(), index.into_bytes()),
        (format!("/files/{name}"), wheel),
    ]);
    let own = world.home.join(".cache/pip");
    std::fs::create_dir_all(&own).unwrap();
    let script =
        "echo \"cache=$PIP_CACHE_DIR\"; \"$0\" -m pip install -q --disable-pip-version-check \
                  --break-system-packages --trusted-host 127.0.0.1 --target ./t --index-url \"$1/simple\" sbxpkg && \
                  PYTHONPATH=./t \"$0\" -c 'import sbxpkg; print(\"ANSWER\", sbxpkg.ANSWER)'";
    let out = Sbx.run(
        &world,
        &["--network", "allow"],
        &["sh", "-c", script, python().to_str().unwrap(), &url],
        &[],
    );
    assert_line(&out, "ANSWER 42");
    assert!(served.load(Ordering::SeqCst) >= 2, "{}", both(&out));
    let cache = PathBuf::from(value_of(&out, "cache="));
    assert!(
        cache.starts_with(world.home.join(".cache/sbx/projects")),
        "{}",
        both(&out)
    );
    assert!(
        !files_beneath(&cache).is_empty(),
        "nothing cached in {}:\n{}",
        cache.display(),
        both(&out)
    );
    assert!(files_beneath(&own).is_empty(), "{:?}", files_beneath(&own));
    assert!(
        !crate::host::stderr(&out).contains("cache"),
        "pip said something of its cache:\n{}",
        both(&out)
    );
}

/// `go mod download` on defaults (the network denied) from a module proxy
/// in a local directory (`GOPROXY=file://...`): the module lands in the
/// project's module cache of sbx's, not the user's `~/go/pkg/mod`.
#[test]
fn go_mod_download_works_from_a_local_proxy() {
    require_sandbox!();
    let Some(go) = tool(&["/usr/bin/go", "/usr/local/go/bin/go"]) else {
        return;
    };
    let world = World::new();
    world.git_repo();
    let proxy = world.root.join("goproxy/example.com/sbxmod/@v");
    std::fs::create_dir_all(&proxy).unwrap();
    util::write(&proxy.join("list"), "v0.1.0\n");
    util::write(
        &proxy.join("v0.1.0.info"),
        "{\"Version\":\"v0.1.0\",\"Time\":\"2026-01-01T00:00:00Z\"}\n",
    );
    util::write(&proxy.join("v0.1.0.mod"), "module example.com/sbxmod\n");
    let zip = r#"
import sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w") as z:
    z.writestr("example.com/sbxmod@v0.1.0/go.mod", "module example.com/sbxmod\n")
    z.writestr("example.com/sbxmod@v0.1.0/sbxmod.go", "package sbxmod\n\nconst Answer = 42\n")
"#;
    let made = Command::new(tool(PYTHONS).unwrap())
        .args(["-c", zip])
        .arg(proxy.join("v0.1.0.zip"))
        .status()
        .unwrap();
    assert!(made.success());
    let p = &world.project;
    util::write(
        &p.join("go.mod"),
        "module example.com/app\n\ngo 1.19\n\nrequire example.com/sbxmod v0.1.0\n",
    );
    util::write(
        &p.join("main.go"),
        "package main\n\nimport (\n\t\"fmt\"\n\n\t\"example.com/sbxmod\"\n)\n\nfunc main() { fmt.Println(\"ANSWER\", sbxmod.Answer) }\n",
    );
    let goproxy = format!("file://{}", world.root.join("goproxy").display());
    let script =
        "echo \"modcache=$GOMODCACHE\"; \"$0\" mod download -x example.com/sbxmod && \"$0\" run .";
    let out = Sbx.run(
        &world,
        &[],
        &["sh", "-c", script, go],
        &[
            ("GOPROXY", &goproxy),
            ("GOSUMDB", "off"),
            ("GOFLAGS", "-modcacherw -mod=mod"),
        ],
    );
    assert_line(&out, "ANSWER 42");
    let cache = PathBuf::from(value_of(&out, "modcache="));
    assert!(
        cache.starts_with(world.home.join(".cache/sbx/projects")),
        "{}",
        both(&out)
    );
    assert!(
        cache.join("example.com/sbxmod@v0.1.0/sbxmod.go").is_file(),
        "{}",
        both(&out)
    );
    assert!(!world.home.join("go/pkg/mod").exists());
}
