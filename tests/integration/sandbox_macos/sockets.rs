//! Unix sockets on defaults (`unix_sockets = "own"`): the command binds,
//! listens and connects in its own `$TMPDIR` (a directory sbx makes for the
//! run in `/private/tmp/sbx-UID`, removed after it); every socket of the
//! host stays out of reach (in `/tmp`, in the project, outside the writable
//! roots, one made during the run), judged by what the host's listeners
//! received; no socket of the command's, nor a directory holding one, can
//! be moved or linked to where a host program looks for its server, and no
//! host socket, nor a directory holding one, can be brought into
//! `$TMPDIR`.

use super::*;

/// The sandboxed side: binds its own socket in `$TMPDIR` (one directory
/// down, as Python and tsx do) and connects to it; tries to take it, or
/// its directory, to the rendezvous directory `argv[1]` (rename, hard
/// link, symbolic link, bind there); tries to bring the host socket
/// `argv[2]`, or its directory, into `$TMPDIR`; then connects to each
/// `NAME=PATH` given, `wait:` ones once the test has made them. Exits 3.
const PY_OWN_AND_HOST: &str = r#"
import os, socket, sys, time
def connect(name, addr):
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(addr)
        s.sendall(b"hi")
        s.close()
        print("CONNECTED", name, flush=True)
    except OSError as e:
        print("REFUSED", name, e.errno, flush=True)
def attempt(name, act):
    try:
        act()
        print("DONE", name, flush=True)
    except OSError as e:
        print("NOT-DONE", name, e.errno, flush=True)
tmp = os.environ["TMPDIR"]
print("TMPDIR=" + tmp, flush=True)
rdv, host_sock = sys.argv[1], sys.argv[2]
own_dir = os.path.join(tmp, "d")
os.mkdir(own_dir)
own = os.path.join(own_dir, "own.sock")
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(own)
srv.listen(4)
connect("own", own)
c, _ = srv.accept()
print("OWN-GOT", c.recv(2).decode(), flush=True)
attempt("rename-out", lambda: os.rename(own, os.path.join(rdv, "default")))
attempt("link-out", lambda: os.link(own, os.path.join(rdv, "hard")))
attempt("symlink-out", lambda: os.symlink(own, os.path.join(rdv, "sym")))
attempt("dir-out", lambda: os.rename(own_dir, os.path.join(rdv, "moved")))
def bind_there():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(os.path.join(rdv, "fake"))
attempt("bind-out", bind_there)
# Onto a file that is there already, swapped with it, and through a link
# or a clone of a symbolic link or a directory: whatever type Seatbelt
# gives a destination, the source is judged.
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
def checked(r):
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
existing = os.path.join(rdv, "existing")
attempt("rename-over", lambda: os.rename(own, existing))
attempt("swap-out", lambda: checked(libc.renamex_np(own.encode(), existing.encode(), 2)))
sym = os.path.join(tmp, "sym")
os.symlink(own, sym)
attempt("link-symlink-out", lambda: os.link(sym, os.path.join(rdv, "lsym"), follow_symlinks=False))
attempt("clone-symlink-out", lambda: checked(libc.clonefile(sym.encode(), os.path.join(rdv, "csym").encode(), 1)))
attempt("clone-dir-out", lambda: checked(libc.clonefile(own_dir.encode(), os.path.join(rdv, "cdir").encode(), 1)))
attempt("rename-in", lambda: os.rename(host_sock, os.path.join(tmp, "in.sock")))
attempt("link-in", lambda: os.link(host_sock, os.path.join(tmp, "in-hard.sock")))
attempt("dir-in", lambda: os.rename(os.path.dirname(host_sock), os.path.join(tmp, "in-dir")))
for name in ("in.sock", "in-hard.sock", "in-dir/" + os.path.basename(host_sock)):
    if os.path.exists(os.path.join(tmp, name)):
        connect("brought-" + name, os.path.join(tmp, name))
for spec in sys.argv[3:]:
    name, addr = spec.split("=", 1)
    if addr.startswith("wait:"):
        open("up", "w").close()
        i = 0
        while not os.path.exists("go") and i < 1200:
            time.sleep(0.05)
            i += 1
        addr = addr[5:]
    connect(name, addr)
sys.exit(3)
"#;

/// A directory in /tmp where a host program looks for its server (as tmux
/// does in `/tmp/tmux-UID`), removed on drop; nothing may appear in it.
struct Rendezvous(PathBuf);

impl Rendezvous {
    /// With one regular file in it, `existing`, to rename onto.
    fn new() -> Rendezvous {
        let dir = PathBuf::from(format!("/private/tmp/sbx-rdv-{}", unique(14)));
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("existing"), "").unwrap();
        Rendezvous(dir)
    }

    /// Nothing the command made is there, and `existing` is still the
    /// empty regular file it was.
    fn untouched(&self, out: &Output) {
        let left: Vec<_> = std::fs::read_dir(&self.0)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(
            left,
            ["existing"],
            "made in {}:\n{}",
            self.0.display(),
            both(out)
        );
        let meta = std::fs::symlink_metadata(self.0.join("existing")).unwrap();
        assert!(meta.is_file() && meta.len() == 0, "{meta:?}\n{}", both(out));
    }
}

impl Drop for Rendezvous {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn own_sockets_connect_and_the_hosts_stay_out_of_reach() {
    require_sandbox!();
    let Some(py) = tool(&[PYTHON]) else {
        return;
    };
    let world = World::new();
    // The host's: in /tmp inside a directory of its own (as ssh-agent's
    // and launchd's are), in the project, outside every writable root,
    // and one made while the command runs.
    let agent_dir = PathBuf::from(format!("/private/tmp/sbx-agent-{}", unique(15)));
    std::fs::create_dir(&agent_dir).unwrap();
    let agent = SocketFile::at(agent_dir.join("agent.sock"));
    let plain = SocketFile::tmp(16);
    let project = SocketFile::at(world.project.join("h.sock"));
    let outside_dir = world.root.join("run");
    std::fs::create_dir_all(&outside_dir).unwrap();
    let outside = SocketFile::at(outside_dir.join("docker.sock"));
    let later = PathBuf::from(format!("/private/tmp/sbx-later-{}.sock", unique(17)));
    let rendezvous = Rendezvous::new();
    let specs = [
        format!("agent={}", agent.path.display()),
        format!("tmp={}", plain.path.display()),
        format!("project={}", project.path.display()),
        "project-rel=h.sock".to_string(),
        format!("outside={}", outside.path.display()),
        format!("later=wait:{}", later.display()),
    ];
    let mut cmd = Seatbelt.sbx_cmd(&world);
    cmd.args(["run", "--", py, "-c", PY_OWN_AND_HOST])
        .arg(&rendezvous.0)
        .arg(&agent.path)
        .args(&specs);
    let up = world.project.join("up");
    let child = started_until(cmd, &up);
    let later = SocketFile::at(later);
    std::fs::write(world.project.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    show("own and host sockets", &out);
    // The host socket and its directory are where they were.
    let stayed = std::fs::symlink_metadata(&agent.path).is_ok();
    let _ = std::fs::remove_dir_all(&agent_dir);
    assert!(stayed, "the host's socket was moved:\n{}", both(&out));
    rendezvous.untouched(&out);
    assert!(
        up.exists(),
        "never got to the later socket:\n{}",
        both(&out)
    );
    assert_eq!(out.status.code(), Some(3), "{}", both(&out));
    // sbx checked once, under this profile, that a socket stays put.
    let verdict = std::fs::read_to_string(world.home.join(".cache/sbx/macos-sockets"));
    assert!(
        verdict
            .as_deref()
            .is_ok_and(|v| v.trim_end().ends_with(" stay")),
        "{verdict:?}\n{}",
        both(&out)
    );
    // Positive control: its own socket works.
    assert_line(&out, "CONNECTED own");
    assert_line(&out, "OWN-GOT hi");
    for name in [
        "rename-out",
        "rename-over",
        "swap-out",
        "link-symlink-out",
        "clone-symlink-out",
        "clone-dir-out",
        "link-out",
        "symlink-out",
        "dir-out",
        "bind-out",
        "rename-in",
        "link-in",
        "dir-in",
    ] {
        assert!(
            lines(&out)
                .iter()
                .any(|l| l.starts_with(&format!("NOT-DONE {name} "))),
            "{name} was not refused:\n{}",
            both(&out)
        );
    }
    assert_no_line_starting(&out, "CONNECTED brought-");
    for spec in &specs {
        let name = spec.split('=').next().unwrap();
        assert!(
            lines(&out)
                .iter()
                .any(|l| l.starts_with(&format!("REFUSED {name} "))),
            "{name} was not refused:\n{}",
            both(&out)
        );
    }
    for (name, l) in [
        ("agent", &agent.listener),
        ("tmp", &plain.listener),
        ("project", &project.listener),
        ("outside", &outside.listener),
        ("later", &later.listener),
    ] {
        let got = unix_received(l, LISTEN_GRACE);
        assert!(
            got.is_none(),
            "the host's {name} socket received {got:?}:\n{}",
            both(&out)
        );
    }
}

/// `$TMPDIR` is a directory of this run's: private, unseen by another run
/// going on at the same time, and gone once the run is over.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn tmpdir_is_the_runs_own_and_gone_after_it() {
    require_sandbox!();
    let world = World::new();
    let first = Seatbelt.run_sh(
        &world,
        "echo \"TMPDIR=$TMPDIR\"; echo x > \"$TMPDIR/file\" && echo WROTE
         ls -ld \"$TMPDIR\"",
    );
    assert_line(&first, "WROTE");
    let line = lines(&first)
        .into_iter()
        .find_map(|l| l.strip_prefix("TMPDIR=").map(str::to_string))
        .unwrap();
    let dir = PathBuf::from(&line);
    let uid = std::fs::metadata(&world.home).unwrap().uid();
    assert_eq!(
        dir.parent(),
        Some(Path::new(&format!("/private/tmp/sbx-{uid}"))),
        "{}",
        both(&first)
    );
    assert!(!dir.exists(), "left after the run: {}", dir.display());
    // Two runs at once: neither sees nor touches the other's.
    let mut cmd = Seatbelt.sbx_cmd(&world);
    cmd.args([
        "run",
        "--",
        "/bin/sh",
        "-c",
        "echo \"TMPDIR=$TMPDIR\"; echo mine > \"$TMPDIR/mine\"; : > up; \
         i=0; while [ ! -e go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; cat \"$TMPDIR/mine\"",
    ]);
    let up = world.project.join("up");
    let child = started_until(cmd, &up);
    let other = std::fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect::<Vec<_>>();
    let script = other
        .iter()
        .map(|o| {
            format!(
                "cat {p}/mine 2>/dev/null && echo READ-OTHER; echo no > {p}/mine 2>/dev/null && echo WROTE-OTHER; ls {p} >/dev/null 2>&1 && echo LISTED-OTHER",
                p = shq_path(o)
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    let second = Seatbelt.run_sh(&world, &format!("{script}\necho RAN"));
    std::fs::write(world.project.join("go"), "").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(!other.is_empty(), "the first run's directory was not there");
    assert_line(&second, "RAN");
    for l in ["READ-OTHER", "WROTE-OTHER", "LISTED-OTHER"] {
        assert_no_line_starting(&second, l);
    }
    assert_line(&out, "mine");
}

/// What the tools that reported `listen EPERM .../T/tsx-501/...pipe` do:
/// Python's multiprocessing (a Manager, and the forkserver start method)
/// and a Node server on a socket in `os.tmpdir()`.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn python_multiprocessing_and_node_servers_work() {
    require_sandbox!();
    let Some(py) = tool(&[PYTHON]) else {
        return;
    };
    let world = World::new();
    let out = Seatbelt.run(
        &world,
        &[],
        &[
            py,
            "-c",
            "import multiprocessing as mp\n\
             def sq(x): return x * x\n\
             if __name__ == '__main__':\n\
             \x20   with mp.Manager() as m:\n\
             \x20       d = m.dict(); d['k'] = 7; print('MANAGER', d['k'], flush=True)\n\
             \x20   ctx = mp.get_context('forkserver')\n\
             \x20   with ctx.Pool(2) as p: print('POOL', sum(p.map(sq, range(4))), flush=True)\n",
        ],
        &[],
    );
    assert_line(&out, "MANAGER 7");
    assert_line(&out, "POOL 14");
    if let Some(node) = on_path("node") {
        let out = Seatbelt.run(
            &world,
            &[],
            &[
                node.to_str().unwrap(),
                "-e",
                "const net=require('net'),os=require('os'),path=require('path'),fs=require('fs');\
                 const d=path.join(os.tmpdir(),'tsx-'+process.getuid());fs.mkdirSync(d,{recursive:true});\
                 const p=path.join(d,process.pid+'.pipe');\
                 const s=net.createServer(c=>{c.on('data',b=>{console.log('NODE-GOT',b.toString());s.close();c.end();});});\
                 s.listen(p,()=>{net.connect(p,()=>{}).end('hi');});",
            ],
            &[],
        );
        assert_line(&out, "NODE-GOT hi");
    }
}
