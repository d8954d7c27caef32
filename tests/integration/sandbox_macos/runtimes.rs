//! What runtimes and everyday tools need from macOS, each beside what it
//! must not open: `ps` without other processes' arguments, shared memory
//! by name without other programs' segments, Node's CPU list and file
//! watching, and no keystrokes pushed into the terminal sbx was started
//! from (TIOCSTI).

use super::*;

/// `ps`, `pgrep` and `brew shellenv`'s `ps -p "$PPID" -c -o comm=` see the
/// process table; the arguments of a host process (where tokens often
/// are) stay unreadable.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn ps_lists_processes_but_not_their_arguments() {
    require_sandbox!();
    let world = World::new();
    let duration = unique(60);
    let mut victim = Command::new("/bin/sh")
        .args(["-c", &format!("sleep {duration}; : {SECRET}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = victim.id();
    let out = Seatbelt.run_sh(
        &world,
        &format!(
            "/bin/ps -p $$ -o comm= && echo PS-SELF
             /bin/ps -p \"$PPID\" -c -o comm= && echo PS-PARENT
             /bin/ps -A -o pid= | grep -qx ' *{pid}' && echo PS-SEES-HOST
             /usr/bin/pgrep -x sleep | grep -qx '[0-9]*' && echo PGREP-OK
             /bin/ps -axww -o args=
             echo RAN"
        ),
    );
    let _ = victim.kill();
    let _ = victim.wait();
    assert_line(&out, "RAN");
    for l in ["PS-SELF", "PS-PARENT", "PS-SEES-HOST", "PGREP-OK"] {
        assert_line(&out, l);
    }
    assert_no_secret(&out);
    // Positive control: on the host the same listing shows the secret, so
    // its absence inside is the sandbox's doing.
    let host_ps = host("/bin/ps", &["-axww", "-o", "args="], LIMIT);
    assert!(
        String::from_utf8_lossy(&host_ps.stdout).contains(SECRET),
        "host control: the secret argument is not visible on the host either"
    );
}

/// Python's `multiprocessing.shared_memory` between two processes; a
/// segment of another program's, by another name, stays out of reach.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn shared_memory_of_its_own_works_and_others_stay_out_of_reach() {
    require_sandbox!();
    let Some(py) = tool(&[PYTHON]) else {
        return;
    };
    let world = World::new();
    // A host program's segment (as an app's would be), holding the secret.
    let name = format!("sbxhost{}", unique(18));
    let holder = "import sys, time\n\
                  from multiprocessing import shared_memory as s\n\
                  m = s.SharedMemory(name=sys.argv[1], create=True, size=64)\n\
                  m.buf[:len(sys.argv[2])] = sys.argv[2].encode()\n\
                  open(sys.argv[3], 'w').close()\n\
                  time.sleep(60)\n";
    let ready = world.root.join("shm-ready");
    let mut host_holder = Command::new(py)
        .args(["-c", holder, &name, SECRET])
        .arg(&ready)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !ready.exists() && start.elapsed() < util::DEADLINE {
        std::thread::sleep(Duration::from_millis(20));
    }
    let inside = format!(
        "import multiprocessing as mp\n\
         from multiprocessing import shared_memory as s\n\
         def child(n):\n\
         \x20   m = s.SharedMemory(name=n); m.buf[0] = 42; m.close()\n\
         if __name__ == '__main__':\n\
         \x20   m = s.SharedMemory(create=True, size=16)\n\
         \x20   p = mp.Process(target=child, args=(m.name,)); p.start(); p.join()\n\
         \x20   print('SHM-OWN', m.buf[0], flush=True); m.close(); m.unlink()\n\
         \x20   try:\n\
         \x20       o = s.SharedMemory(name={name:?}); print('SHM-OTHER', bytes(o.buf[:40]), flush=True)\n\
         \x20   except OSError as e:\n\
         \x20       print('SHM-OTHER-REFUSED', e.errno, flush=True)\n"
    );
    let out = Seatbelt.run(&world, &[], &[py, "-c", &inside], &[]);
    let _ = host_holder.kill();
    let _ = host_holder.wait();
    assert!(ready.exists(), "the host's segment was never made");
    assert_line(&out, "SHM-OWN 42");
    assert!(
        lines(&out)
            .iter()
            .any(|l| l.starts_with("SHM-OTHER-REFUSED ")),
        "{}",
        both(&out)
    );
    assert_no_secret(&out);
}

/// Node's `os.cpus()` (yarn, npm and node-gyp size their workers by it)
/// and `fs.watch` (FSEvents: dev servers, test watchers).
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn node_sees_its_cpus_and_watches_files() {
    require_sandbox!();
    let Some(node) = on_path("node") else {
        return;
    };
    let world = World::new();
    std::fs::create_dir_all(world.project.join("watched")).unwrap();
    let out = Seatbelt.run(
        &world,
        &[],
        &[
            node.to_str().unwrap(),
            "-e",
            "const os=require('os'),fs=require('fs');\
             console.log('CPUS', os.cpus().length > 0 ? 'some' : 'none');\
             const w=fs.watch('watched',{recursive:true},(e,f)=>{if(f&&f.includes('touched')){console.log('WATCHED');w.close();process.exit(0);}});\
             setTimeout(()=>fs.writeFileSync('watched/touched','x'),200);\
             setTimeout(()=>{console.log('NO-EVENT');process.exit(1);},20000);",
        ],
        &[],
    );
    assert_line(&out, "CPUS some");
    assert_line(&out, "WATCHED");
}

/// A command run from a terminal cannot push keystrokes into it: they
/// would be read by the user's shell once sbx has exited (CVE-2017-5226's
/// class). The pty is `script`'s, made on the host, so the sandboxed
/// command inherits it as bubblewrap's would.
#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn tiocsti_cannot_push_input_into_the_terminal() {
    require_sandbox!();
    let (Some(script), Some(py)) = (tool(&["/usr/bin/script"]), tool(&[PYTHON])) else {
        return;
    };
    let world = World::new();
    // Pushes `Z` into its terminal's input, then reads what is there.
    let inject = "import fcntl, os, sys, termios, select\n\
                  try:\n\
                  \x20   fcntl.ioctl(0, termios.TIOCSTI, b'Z'); print('PUSHED', flush=True)\n\
                  except OSError as e:\n\
                  \x20   print('PUSH-REFUSED', e.errno, flush=True)\n\
                  r, _, _ = select.select([0], [], [], 1)\n\
                  print('READ', os.read(0, 8) if r else b'', flush=True)\n";
    // sbx's environment as the suite gives it, around `script`.
    let mut cmd = world.host_cmd(PathBuf::from(script));
    if let Some(t) = std::env::var_os("TMPDIR") {
        cmd.env("TMPDIR", t);
    }
    cmd.args(["-q", "/dev/null"])
        .arg(util::sbx_path())
        .args(["run", "--", py, "-c", inject]);
    let out = output_within(cmd, LIMIT, true);
    show("TIOCSTI in the sandbox", &out);
    assert!(
        lines(&out).iter().any(|l| l.starts_with("PUSH-REFUSED")),
        "{}",
        both(&out)
    );
    assert_no_line_starting(&out, "READ b'Z");
    // Positive control: outside the sandbox, on the same kind of pty, the
    // push works, so the refusal above is the sandbox's.
    let mut control = Command::new(script);
    control.args(["-q", "/dev/null", py, "-c", inject]);
    let out = output_within(control, LIMIT, true);
    show("TIOCSTI on the host", &out);
    if !lines(&out).iter().any(|l| l == "PUSHED") {
        loud_skip(
            "the TIOCSTI control",
            &format!(
                "this macOS refuses TIOCSTI outside any sandbox too\n{}",
                both(&out)
            ),
        );
    }
}
