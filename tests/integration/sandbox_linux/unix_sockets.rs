//! Unix sockets on defaults (`unix_sockets = "own"`): the command's own
//! work (bind, listen, connect in `$TMPDIR`, between its processes and
//! threads; Python's multiprocessing; Node), every socket of the host stays
//! out of reach (those that existed before the run and one made during it,
//! in a writable root or not, reached by path, by link or through `/proc`,
//! and abstract ones), judged by what the host's listeners received; no
//! socket can be made where a host program would look for one (a fake tmux
//! server in /tmp), nor moved or symbolically linked there; `TMPDIR` is
//! the sandbox's own, seen neither by the host nor by another sandbox; and
//! renames and links across directories, and symbolic links in the project
//! and in `TMPDIR`, still work.
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
own, own_abstract = os.path.join(os.environ.get("TMPDIR", "/tmp"), sys.argv[1]), "\0" + sys.argv[2]
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
    # Out of its directory: a rename or a link to where host programs look,
    # or a symbolic link there that leads to it.
    for name, move in (("rename", os.rename), ("link", os.link), ("symlink", os.symlink)):
        try:
            move(own, os.path.join(sys.argv[3], "default"))
            print("MOVED", name, flush=True)
        except OSError as e:
            print("NOT-MOVED", name, e.errno, flush=True)
except OSError as e:
    print("OWN-REFUSED", e.errno, flush=True)
# Made where a host program looks for its server (tmux's directory).
try:
    fake = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    fake.bind(os.path.join(sys.argv[3], "fake"))
    fake.listen(4)
    print("FAKE-BOUND", flush=True)
except OSError as e:
    print("FAKE-REFUSED", e.errno, flush=True)
for spec in sys.argv[4:]:
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
/// decide (full mode), none moved out of `$TMPDIR`, none made in the host's
/// rendezvous directory; all refused by the filter in reduced mode.
fn own_sockets_as_expected(out: &Output) {
    if util::contained() {
        assert_line(out, "OWN-REFUSED 1");
        assert_line(out, "FAKE-REFUSED 1");
    } else {
        for line in [
            "CONNECTED own-path",
            "OWN-GOT hi",
            "CONNECTED own-abstract",
            "CONNECTED own-thread",
            "NOT-MOVED rename 18",
            "NOT-MOVED link 18",
            "NOT-MOVED symlink 13",
            "FAKE-REFUSED 13",
        ] {
            assert_line(out, line);
        }
    }
}

/// A directory in /tmp where a host program looks for its server (as tmux
/// does in `/tmp/tmux-UID`), removed on drop; nothing may appear in it.
struct Rendezvous(PathBuf);

impl Rendezvous {
    fn new() -> Rendezvous {
        let dir = PathBuf::from(format!("/tmp/sbx-rdv-{}", unique(14)));
        std::fs::create_dir(&dir).unwrap();
        Rendezvous(dir)
    }

    /// Nothing the command made is there.
    fn untouched(&self, out: &Output) {
        let left: Vec<_> = std::fs::read_dir(&self.0)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert!(
            left.is_empty(),
            "made in {}: {left:?}\n{}",
            self.0.display(),
            both(out)
        );
    }
}

impl Drop for Rendezvous {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
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
    let own = format!("sbx-own-{}.sock", unique(8));
    let rendezvous = Rendezvous::new();
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
        rendezvous.0.display().to_string(),
    ];
    argv.extend(specs.iter().cloned());
    let runtime = world.root.join("run/user");
    let mut cmd = Sbx.sbx_cmd(&world);
    cmd.arg("run")
        .arg("--")
        .args(&argv)
        .env("XDG_RUNTIME_DIR", &runtime);
    let up = world.project.join("up");
    let child = started_until(cmd, &up);
    // The socket made on the host during the run, now that the command
    // waits for it.
    let later = SocketFile::at(later);
    std::fs::write(world.project.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    crate::host::show("own and host sockets", &out);
    rendezvous.untouched(&out);
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
            crate::host::stderr(&out).contains("refused a Unix socket outside its own directory")
                && crate::host::stderr(&out).contains("--unix-sockets allow"),
            "{}",
            both(&out)
        );
    }
}

/// With the network open the sandbox shares the host's network namespace,
/// abstract names included, where the command could bind one a host
/// program connects to: no Unix socket then (as `deny`), and the host's
/// stay out of reach.
#[test]
fn with_the_network_open_there_are_no_unix_sockets() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    let world = World::new();
    let host = HostSockets::new(&world);
    let rendezvous = Rendezvous::new();
    let abstract_spec = format!("abstract=@{}", host.abstract_name);
    let tmp_spec = format!("tmp={}", host.tmp.path.display());
    let out = Sbx.run(
        &world,
        &["--network", "allow"],
        &[
            python().to_str().unwrap(),
            "-c",
            PY_OWN_AND_HOST,
            "own.sock",
            &format!("sbx-own-{}", unique(11)),
            rendezvous.0.to_str().unwrap(),
            &abstract_spec,
            &tmp_spec,
        ],
        &[],
    );
    assert_line(&out, "OWN-REFUSED 1");
    assert_line(&out, "FAKE-REFUSED 1");
    assert_line(&out, "REFUSED abstract 1");
    assert_line(&out, "REFUSED tmp 1");
    none_received(&host.listeners(), &out);
    rendezvous.untouched(&out);
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
    let rendezvous = Rendezvous::new();
    let tmp_spec = format!("tmp={}", host.tmp.path.display());
    let out = Sbx.run(
        &world,
        &["--unix-sockets", "deny"],
        &[
            python().to_str().unwrap(),
            "-c",
            PY_OWN_AND_HOST,
            "own.sock",
            "sbx-own-deny",
            rendezvous.0.to_str().unwrap(),
            &tmp_spec,
        ],
        &[],
    );
    assert_line(&out, "OWN-REFUSED 1");
    assert_line(&out, "FAKE-REFUSED 1");
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

/// A masked `.env` whose name is not UTF-8 puts that name in the sandbox's
/// mount table, which PID 1 read as UTF-8 text to check the socket
/// directory: every later run lost its own Unix sockets (found by stop
/// 32's review; a command could do it to the next run on purpose).
#[test]
fn a_mount_table_that_is_not_utf8_keeps_the_commands_own_sockets() {
    require_sandbox!();
    if !have_python() {
        return;
    }
    use std::os::unix::ffi::OsStrExt;
    let world = World::new();
    let name = std::ffi::OsStr::from_bytes(b".env.\xff");
    util::write(&world.project.join(name), &format!("TOKEN={SECRET}\n"));
    let out = Sbx.run(
        &world,
        &[],
        &[
            python().to_str().unwrap(),
            "-c",
            "import os, socket\n\
             s = socket.socket(socket.AF_UNIX)\n\
             s.bind(os.path.join(os.environ['TMPDIR'], 'a.sock'))\n\
             print('BOUND', flush=True)",
        ],
        &[],
    );
    if util::contained() {
        // Reduced mode gives no Unix socket (see python_multiprocessing_works).
        return;
    }
    assert_line(&out, "BOUND");
    assert!(
        !crate::host::stderr(&out).contains("refused"),
        "{}",
        both(&out)
    );
}

/// A Node program listens on a Unix socket in its temporary directory and
/// connects to it, as tsx and other tools do with their worker processes.
#[test]
fn node_listens_and_connects_on_a_unix_socket() {
    require_sandbox!();
    let Some(node) = tool(&["/usr/bin/node", "/usr/bin/nodejs"]) else {
        return;
    };
    let world = World::new();
    let js = "const net = require('net');\n\
         const sock = require('path').join(require('os').tmpdir(), 'n.sock');\n\
         const srv = net.createServer(c => c.on('data', d => { console.log('GOT', d.toString()); c.end(); srv.close(); }));\n\
         srv.on('error', e => { console.log('LISTEN-ERROR', e.code); process.exit(4); });\n\
         srv.listen(sock, () => {\n\
         \x20 const c = net.connect(sock, () => c.write('hello'));\n\
         \x20 c.on('error', e => { console.log('CONNECT-ERROR', e.code); process.exit(5); });\n\
         });\n";
    let out = Sbx.run(&world, &[], &[node, "-e", js], &[]);
    if util::contained() {
        assert_line(&out, "LISTEN-ERROR EPERM");
        return;
    }
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "GOT hello");
}

/// `TMPDIR` is the sandbox's own tmpfs at `/tmp/sbx-UID`: nothing written
/// there reaches the host (the directory there stays empty, and the
/// user's), and a second sandbox running at the same time sees none of the
/// first one's sockets and cannot move the directory.
#[test]
fn tmpdir_is_the_sandboxs_own() {
    require_sandbox!();
    if util::contained() || !have_python() {
        // Reduced mode has no own sockets, and no directory for them.
        return;
    }
    let world = World::new();
    let first = r#"
import os, socket, sys, time
tmp = os.environ["TMPDIR"]
print("TMPDIR=" + tmp, flush=True)
open(os.path.join(tmp, "file"), "w").write("x")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(os.path.join(tmp, "a.sock"))
srv.listen(4)
srv.setblocking(False)
open("up", "w").close()
i = 0
while not os.path.exists("go") and i < 1200:
    time.sleep(0.05)
    i += 1
try:
    srv.accept()
    print("A-GOT-ONE", flush=True)
except BlockingIOError:
    print("A-GOT-NONE", flush=True)
"#;
    let mut cmd = world.sbx_std();
    cmd.args(["run", "--"]).arg(python()).args(["-c", first]);
    let up = world.project.join("up");
    let child = started_until(cmd, &up);
    let uid = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    let dir = PathBuf::from(format!("/tmp/sbx-{}", uid.unwrap()));
    let on_host: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    let second = r#"
import os, socket
print("SECOND-SEES", sorted(os.listdir(os.environ["TMPDIR"])), flush=True)
for name, act in (("connect", lambda: socket.socket(socket.AF_UNIX).connect(os.path.join(os.environ["TMPDIR"], "a.sock"))),
                  ("rename", lambda: os.rename(os.environ["TMPDIR"], os.environ["TMPDIR"] + "-moved"))):
    try:
        act()
        print("SECOND", name, "done", flush=True)
    except OSError as e:
        print("SECOND", name, e.errno, flush=True)
"#;
    let out2 = Sbx.run(
        &world,
        &[],
        &[python().to_str().unwrap(), "-c", second],
        &[],
    );
    std::fs::write(world.project.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert_line(&out, &format!("TMPDIR={}", dir.display()));
    assert!(
        on_host.is_empty(),
        "on the host during the run: {on_host:?}"
    );
    assert_line(&out2, "SECOND-SEES []");
    assert_line(&out2, "SECOND connect 2");
    assert_line(&out2, "SECOND rename 16");
    assert_line(&out, "A-GOT-NONE");
    let meta = std::fs::symlink_metadata(&dir).unwrap();
    assert!(meta.is_dir());
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o700
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

/// The ruleset that keeps sockets and symbolic links in their places rules
/// nothing else: files and directories move and link across directories
/// (`git mv`), and symbolic links are made in the project (npm's
/// `node_modules/.bin`) and in `$TMPDIR` (a virtual environment there), as
/// without it. In /tmp they are refused, and none appears on the host.
#[test]
fn renames_links_and_project_symlinks_still_work() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    util::write(&world.project.join("a/f"), "f");
    let tmp_link = PathBuf::from(format!("/tmp/sbx-link-{}", unique(32)));
    let out = Sbx.run_sh(
        &world,
        &format!(
            "mkdir b c && mv a/f b/f && ln b/f c/hard && mv c b/ && ln -s ../b/f a/sym \
             && {{ [ -z \"$TMPDIR\" ] || ln -s f \"$TMPDIR/l\"; }} && git add b && git mv b/f a/g && echo DONE; \
             ln -s /etc/hostname {} || echo TMP-LINK-REFUSED",
            tmp_link.display()
        ),
    );
    assert!(stdout(&out).contains("DONE"), "{}", both(&out));
    let p = &world.project;
    let link = std::fs::symlink_metadata(&tmp_link);
    let _ = std::fs::remove_file(&tmp_link);
    if util::contained() {
        // Reduced mode has no own sockets, and no need to keep links out.
        assert!(link.is_ok(), "{}", both(&out));
    } else {
        assert_line(&out, "TMP-LINK-REFUSED");
        assert!(link.is_err(), "a link was made in /tmp:\n{}", both(&out));
    }
    assert_eq!(std::fs::read_to_string(p.join("a/g")).unwrap(), "f");
    assert_eq!(std::fs::read_to_string(p.join("b/c/hard")).unwrap(), "f");
    assert_eq!(
        std::fs::read_link(p.join("a/sym")).unwrap(),
        Path::new("../b/f")
    );
}

/// A project in /tmp lies inside the writable root /tmp, where no link may
/// be made: it keeps its own links all the same (npm in a scratch clone).
#[test]
fn a_project_in_tmp_keeps_its_links() {
    require_sandbox!();
    let world = World::new();
    let project = PathBuf::from(format!("/tmp/sbx-proj-{}", unique(33)));
    std::fs::create_dir(&project).unwrap();
    util::git(&project, &["init", "-q"]);
    let mut cmd = world.sbx_std();
    cmd.current_dir(&project)
        .args(["run", "--", "sh", "-c", "ln -s a l && echo LINKED"])
        .stdin(Stdio::null());
    let out = cmd.output().unwrap();
    let link = std::fs::read_link(project.join("l"));
    let _ = std::fs::remove_dir_all(&project);
    assert_line(&out, "LINKED");
    assert_eq!(link.unwrap(), Path::new("a"), "{}", both(&out));
}
