//! Unix sockets on defaults (`unix_sockets = "own"`): the command's own
//! work (bind, listen, connect, between its processes and threads; Python's
//! multiprocessing; Node), every socket of the host stays out of reach
//! (those that existed before the run and one made during it, in a writable
//! root or not, reached by path, by link or through `/proc`, and abstract
//! ones), judged by what the host's listeners received.
//!
//! Reduced mode (the container-like pass) has no PID 1 to decide each
//! connection: there, Unix sockets are refused outright (EPERM).

use super::*;

/// The sandboxed side: makes its own sockets and connects to them, then
/// tries each `NAME=ADDRESS` given (`@name` abstract, `fd:PATH` through an
/// O_PATH descriptor's `/proc/self/fd` link, `wait:PATH` once the test has
/// made it); exits 3.
const PY_OWN_AND_HOST: &str = r#"
import os, socket, sys, threading, time
def connect(name, addr):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(addr)
        s.sendall(b"hi")
        s.close()
        print("CONNECTED", name, flush=True)
    except OSError as e:
        print("REFUSED", name, e.errno, flush=True)
own, own_abstract = sys.argv[1], "\0" + sys.argv[2]
try:
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(own)
    srv.listen(4)
    connect("own-path", own)
    c, _ = srv.accept()
    print("OWN-GOT", c.recv(2).decode(), flush=True)
    ab = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    ab.bind(own_abstract)
    ab.listen(4)
    connect("own-abstract", own_abstract)
    t = threading.Thread(target=connect, args=("own-thread", own))
    t.start()
    t.join()
except OSError as e:
    print("OWN-REFUSED", e.errno, flush=True)
for spec in sys.argv[3:]:
    name, addr = spec.split("=", 1)
    if addr.startswith("@"):
        addr = "\0" + addr[1:]
    elif addr.startswith("fd:"):
        addr = "/proc/self/fd/%d" % os.open(addr[3:], os.O_PATH)
    elif addr.startswith("wait:"):
        open("up", "w").close()
        i = 0
        while not os.path.exists("go") and i < 1200:
            time.sleep(0.05)
            i += 1
        addr = addr[5:]
    connect(name, addr)
sys.exit(3)
"#;

/// The host's listeners, made before the run.
struct HostSockets {
    /// A socket in `/tmp`, a writable root (ssh-agent's place).
    tmp: SocketFile,
    /// In the project, a writable root.
    project: SocketFile,
    /// `$XDG_RUNTIME_DIR/bus`-like, outside the writable roots.
    bus: SocketFile,
    /// `/var/run/docker.sock`-like, outside the writable roots.
    docker: SocketFile,
    /// In the host's abstract namespace.
    abstract_name: String,
    abstract_l: UnixListener,
}

impl HostSockets {
    fn new(world: &World) -> HostSockets {
        let dir = |d: &str| {
            let p = world.root.join(d);
            std::fs::create_dir_all(&p).unwrap();
            p
        };
        let abstract_name = format!("sbx-host-{}", unique(5));
        HostSockets {
            tmp: SocketFile::tmp(6),
            project: SocketFile::at(world.project.join("h.sock")),
            bus: SocketFile::at(dir("run/user").join("bus")),
            docker: SocketFile::at(dir("var/run").join("docker.sock")),
            abstract_l: abstract_listener(&abstract_name),
            abstract_name,
        }
    }

    /// Each listener by name, for the checks after the run.
    fn listeners(&self) -> Vec<(&'static str, &UnixListener)> {
        vec![
            ("tmp", &self.tmp.listener),
            ("project", &self.project.listener),
            ("bus", &self.bus.listener),
            ("docker", &self.docker.listener),
            ("abstract", &self.abstract_l),
        ]
    }
}

/// Nothing reached any of `listeners`.
fn none_received(listeners: &[(&str, &UnixListener)], out: &Output) {
    for (name, l) in listeners {
        let got = unix_received(l, LISTEN_GRACE);
        assert!(
            got.is_none(),
            "the host's {name} socket received {got:?}:\n{}",
            both(out)
        );
    }
}

/// The own sockets' lines: all connected where the sandbox has a PID 1 to
/// decide (full mode), all refused by the filter in reduced mode.
fn own_sockets_as_expected(out: &Output) {
    if util::contained() {
        assert_line(out, "OWN-REFUSED 1");
    } else {
        for line in [
            "CONNECTED own-path",
            "OWN-GOT hi",
            "CONNECTED own-abstract",
            "CONNECTED own-thread",
        ] {
            assert_line(out, line);
        }
    }
}

#[test]
fn own_sockets_connect_and_the_hosts_stay_out_of_reach() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    let host = HostSockets::new(&world);
    std::os::unix::fs::symlink(&host.bus.path, world.project.join("link.sock")).unwrap();
    let later = PathBuf::from(format!("/tmp/sbx-later-{}.sock", unique(7)));
    let own = format!("/tmp/sbx-own-{}.sock", unique(8));
    let specs = [
        format!("tmp={}", host.tmp.path.display()),
        format!("project={}", host.project.path.display()),
        // Relative, from the working directory (the project).
        "project-rel=h.sock".to_string(),
        format!("bus={}", host.bus.path.display()),
        format!("docker={}", host.docker.path.display()),
        "link=link.sock".to_string(),
        format!("magic=fd:{}", host.docker.path.display()),
        format!("abstract=@{}", host.abstract_name),
        format!("later=wait:{}", later.display()),
    ];
    let own_abstract = format!("sbx-own-{}", unique(9));
    let mut argv = vec![
        python().to_str().unwrap().to_string(),
        "-c".into(),
        PY_OWN_AND_HOST.into(),
        own.clone(),
        own_abstract,
    ];
    argv.extend(specs.iter().cloned());
    let runtime = world.root.join("run/user");
    let mut cmd = Sbx.sbx_cmd(&world);
    cmd.arg("run")
        .arg("--")
        .args(&argv)
        .env("XDG_RUNTIME_DIR", &runtime)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = cmd.spawn().unwrap();
    // The socket made on the host during the run, once the command waits
    // for it.
    let up = world.project.join("up");
    let start = Instant::now();
    while !up.exists() && start.elapsed() < util::DEADLINE {
        std::thread::sleep(Duration::from_millis(20));
    }
    let later = SocketFile::at(later);
    std::fs::write(world.project.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    let _ = std::fs::remove_file(&own);
    crate::host::show("own and host sockets", &out);
    assert!(
        up.exists(),
        "the command never got to the socket made later:\n{}",
        both(&out)
    );
    assert_eq!(out.status.code(), Some(3), "{}", both(&out));
    own_sockets_as_expected(&out);
    let mut listeners = host.listeners();
    listeners.push(("later", &later.listener));
    none_received(&listeners, &out);
    for spec in &specs {
        let name = spec.split('=').next().unwrap();
        let errno = match name {
            _ if util::contained() => 1,
            // The sandbox's own network namespace has no such name.
            "abstract" => 111,
            _ => 13,
        };
        assert_line(&out, &format!("REFUSED {name} {errno}"));
    }
    if !util::contained() {
        assert!(
            crate::host::stderr(&out).contains("refused a Unix socket of the host")
                && crate::host::stderr(&out).contains("--unix-sockets allow"),
            "{}",
            both(&out)
        );
    }
}

/// With the network open the sandbox shares the host's network namespace,
/// abstract names included: the host's abstract socket is refused as its
/// path sockets are, the command's own still connect.
#[test]
fn with_the_network_open_the_hosts_abstract_sockets_stay_out_of_reach() {
    require_sandbox!();
    if !have_python() || util::contained() {
        return;
    }
    let world = World::new();
    let host = HostSockets::new(&world);
    let own = format!("/tmp/sbx-own-{}.sock", unique(10));
    let own_abstract = format!("sbx-own-{}", unique(11));
    let abstract_spec = format!("abstract=@{}", host.abstract_name);
    let tmp_spec = format!("tmp={}", host.tmp.path.display());
    let out = Sbx.run(
        &world,
        &["--network", "allow"],
        &[
            python().to_str().unwrap(),
            "-c",
            PY_OWN_AND_HOST,
            &own,
            &own_abstract,
            &abstract_spec,
            &tmp_spec,
        ],
        &[],
    );
    let _ = std::fs::remove_file(&own);
    own_sockets_as_expected(&out);
    assert_line(&out, "REFUSED abstract 13");
    assert_line(&out, "REFUSED tmp 13");
    none_received(&host.listeners(), &out);
}

/// `unix_sockets = "deny"`: no Unix socket at all, the refusal the filter's.
#[test]
fn unix_sockets_deny_refuses_every_socket() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    let host = HostSockets::new(&world);
    let own = format!("/tmp/sbx-own-{}.sock", unique(12));
    let tmp_spec = format!("tmp={}", host.tmp.path.display());
    let out = Sbx.run(
        &world,
        &["--unix-sockets", "deny"],
        &[
            python().to_str().unwrap(),
            "-c",
            PY_OWN_AND_HOST,
            &own,
            "sbx-own-deny",
            &tmp_spec,
        ],
        &[],
    );
    let _ = std::fs::remove_file(&own);
    assert_line(&out, "OWN-REFUSED 1");
    assert_line(&out, "REFUSED tmp 1");
    none_received(&host.listeners(), &out);
}

/// Python's multiprocessing: a Manager, and a Pool with the forkserver
/// start method (the default from Python 3.14), talk over Unix sockets.
#[test]
fn python_multiprocessing_works() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    util::write(
        &world.project.join("mp.py"),
        "import multiprocessing as mp\n\
         def sq(x):\n    return x * x\n\
         if __name__ == '__main__':\n\
         \x20   m = mp.Manager()\n\
         \x20   d = m.dict()\n\
         \x20   d['a'] = 1\n\
         \x20   print('MANAGER', dict(d), flush=True)\n\
         \x20   with mp.get_context('forkserver').Pool(2) as p:\n\
         \x20       print('POOL', p.map(sq, range(4)), flush=True)\n",
    );
    let out = Sbx.run(&world, &[], &[python().to_str().unwrap(), "mp.py"], &[]);
    if util::contained() {
        assert!(!out.status.success(), "{}", both(&out));
        assert!(
            crate::host::stderr(&out).contains("PermissionError: [Errno 1]"),
            "{}",
            both(&out)
        );
        return;
    }
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "MANAGER {'a': 1}");
    assert_line(&out, "POOL [0, 1, 4, 9]");
}

/// A Node program listens on a Unix socket under /tmp and connects to it,
/// as tsx and other tools do with their worker processes.
#[test]
fn node_listens_and_connects_on_a_unix_socket() {
    require_sandbox!();
    let Some(node) = tool(&["/usr/bin/node", "/usr/bin/nodejs"]) else {
        return;
    };
    let world = World::new();
    let sock = format!("/tmp/sbx-node-{}.sock", unique(13));
    let js = format!(
        "const net = require('net');\n\
         const srv = net.createServer(c => c.on('data', d => {{ console.log('GOT', d.toString()); c.end(); srv.close(); }}));\n\
         srv.on('error', e => {{ console.log('LISTEN-ERROR', e.code); process.exit(4); }});\n\
         srv.listen('{sock}', () => {{\n\
         \x20 const c = net.connect('{sock}', () => c.write('hello'));\n\
         \x20 c.on('error', e => {{ console.log('CONNECT-ERROR', e.code); process.exit(5); }});\n\
         }});\n"
    );
    let out = Sbx.run(&world, &[], &[node, "-e", &js], &[]);
    let _ = std::fs::remove_file(&sock);
    if util::contained() {
        assert_line(&out, "LISTEN-ERROR EPERM");
        return;
    }
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "GOT hello");
}
