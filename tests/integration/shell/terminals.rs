//! Terminals: TIOCSTI, and an interactive login shell in tmux.

use super::*;

#[test]
fn tiocsti_is_refused_in_shell_mode_on_a_pty() {
    require_sandbox!();
    let (Some(script), Some(python)) = (tool("/usr/bin/script"), tool("/usr/bin/python3")) else {
        return;
    };
    let world = World::new();
    let py = |code: &str| format!("{} -c {}", shq_path(&python), shq(code));
    let sbx_c = |command: &str| format!("{} -c {}", shq_path(&sbx_path()), shq(command));
    let run = |command: &str| {
        let mut cmd = client(&world, &script);
        // `script` runs its command with $SHELL: make that a plain shell, so
        // the command line below is the only sbx involved.
        cmd.env("SHELL", "/bin/sh")
            .args(["-qec", &sbx_c(command), "/dev/null"]);
        output(cmd, None)
    };
    // Control: the command does have a terminal on stdin.
    let out = run(&py("import os; print(os.isatty(0))"));
    assert_eq!(text(&out.stdout), "True\r\n", "{}", both(&out));
    let out = run(&py(
        "import fcntl,termios; fcntl.ioctl(0, termios.TIOCSTI, b\"x\")",
    ));
    assert!(!out.status.success(), "{}", both(&out));
    assert!(
        text(&out.stdout).contains("Operation not permitted"),
        "{}",
        both(&out)
    );
}

/// A tmux server on its own socket, killed on drop (also on panic).
struct Tmux {
    tmux: PathBuf,
    sock: PathBuf,
    env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    cwd: PathBuf,
}

impl Tmux {
    fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.tmux);
        cmd.env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd)
            .arg("-S")
            .arg(&self.sock)
            .args(args)
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str]) -> String {
        let out = output(self.cmd(args), None);
        assert!(out.status.success(), "tmux {args:?}: {}", both(&out));
        text(&out.stdout)
    }

    fn pane(&self) -> String {
        self.run(&["capture-pane", "-p", "-J", "-S", "-500"])
    }

    fn type_line(&self, line: &str) {
        self.run(&["send-keys", "-l", line]);
        self.run(&["send-keys", "Enter"]);
    }

    /// Wait until the pane satisfies `ok`; panic with the pane otherwise.
    fn wait(&self, what: &str, ok: impl Fn(&str) -> bool) -> String {
        poll(Duration::from_secs(30), || {
            Some(self.pane()).filter(|p| ok(p))
        })
        .unwrap_or_else(|| panic!("timed out waiting for {what}; pane:\n{}", self.pane()))
    }

    fn foreground_command(&self) -> String {
        self.run(&["display-message", "-p", "#{pane_current_command}"])
            .trim()
            .to_string()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]).output();
    }
}

const PROMPT: &str = "sbx-prompt>";

fn prompts(pane: &str) -> usize {
    pane.lines().filter(|l| l.starts_with(PROMPT)).count()
}

fn has_line(pane: &str, want: &str) -> bool {
    pane.lines().any(|l| l.trim_end() == want)
}

#[test]
fn tmux_default_shell_is_an_interactive_sandboxed_login_shell() {
    require_sandbox!();
    let Some(tmux) = tool("/usr/bin/tmux") else {
        return;
    };
    let world = World::new();
    // A fixed prompt, read by the login shell as any user's profile is.
    util::write(
        &world.home.join(".bash_profile"),
        &format!("PS1='{PROMPT} '\n"),
    );
    let template = client(&world, "tmux");
    let env = template
        .get_envs()
        .filter(|(k, _)| *k != "SHELL")
        .filter_map(|(k, v)| Some((k.to_owned(), v?.to_owned())))
        .collect();
    let tmux = Tmux {
        tmux,
        sock: world.root.join("tmux.sock"),
        env,
        cwd: world.project.clone(),
    };
    let sbx = sbx_path();
    // The first window runs a placeholder; the window opened after
    // `default-shell` is set runs sbx as a login shell (argv[0] "-sbx").
    let pane = tmux.run(&[
        "-f",
        "/dev/null",
        "new-session",
        "-d",
        "-x",
        "120",
        "-y",
        "40",
        "cat",
        ";",
        "set",
        "-g",
        "default-shell",
        sbx.to_str().unwrap(),
        ";",
        "new-window",
        "-P",
        "-F",
        "#{pane_id} #{pane_pid}",
        ";",
        "kill-window",
        "-t",
        ":0",
    ]);
    let (_pane_id, pane_pid) = pane.trim().split_once(' ').unwrap();
    let pane_pid: u32 = pane_pid.parse().unwrap();

    tmux.wait("a prompt", |p| prompts(p) >= 1);
    tmux.type_line("echo marker-$((6*7)); shopt -q login_shell && echo login-yes");
    tmux.wait("marker-42", |p| {
        has_line(p, "marker-42") && has_line(p, "login-yes")
    });
    tmux.type_line("pwd");
    tmux.wait("the project as working directory", |p| {
        has_line(p, world.project.to_str().unwrap())
    });

    // Job control: stop a foreground job, list it, kill it.
    let secs = unique(3);
    let sleep = format!("sleep {secs}");
    tmux.type_line(&sleep);
    poll(Duration::from_secs(30), || {
        Some(()).filter(|()| tmux.foreground_command() == "sleep")
    })
    .expect("sleep never became the foreground job");
    tmux.run(&["send-keys", "C-z"]);
    tmux.wait("Stopped", |p| p.contains("Stopped"));
    tmux.type_line("jobs");
    tmux.wait("jobs listing the stopped sleep", |p| {
        p.lines()
            .filter(|l| l.contains("Stopped") && l.contains(&sleep))
            .count()
            >= 2
    });
    tmux.type_line("kill %1");
    let dead = poll(Duration::from_secs(30), || {
        Some(()).filter(|()| pids_with_argv(&["sleep", &secs]).is_empty())
    });
    assert!(dead.is_some(), "kill %1 did not end the stopped sleep");
    // bash reports the job's end before a later prompt. (Under load, bash
    // 5.2 itself, sandbox or not, sometimes misses the SIGCHLD of a stopped
    // job killed this way and shows it as Stopped until it next reaps a
    // child: running an external command makes it look again.)
    let mut round = 0;
    let reported = poll(Duration::from_secs(30), || {
        round += 1;
        tmux.type_line(&format!("/bin/true; jobs; echo jobs-listed-{round}"));
        let pane = tmux.wait("the jobs listing", |p| {
            has_line(p, &format!("jobs-listed-{round}"))
        });
        Some(()).filter(|()| pane.contains("Terminated"))
    });
    assert!(
        reported.is_some(),
        "bash never reported the job as ended:\n{}",
        tmux.pane()
    );

    // Ctrl-C interrupts the foreground command and the prompt returns.
    tmux.type_line(&sleep);
    poll(Duration::from_secs(30), || {
        Some(()).filter(|()| tmux.foreground_command() == "sleep")
    })
    .expect("sleep never became the foreground job");
    let before = prompts(&tmux.pane());
    tmux.run(&["send-keys", "C-c"]);
    tmux.wait("the prompt after Ctrl-C", |p| prompts(p) > before);
    tmux.type_line("echo status=$?");
    tmux.wait("status 130", |p| has_line(p, "status=130"));

    // Writes: refused outside the project, allowed inside.
    let outside = world.home.join("outside");
    tmux.type_line(&format!(
        "touch {} || echo touch-failed; touch inside-ok && echo touch-ok",
        shq_path(&outside)
    ));
    tmux.wait("the touch results", |p| {
        has_line(p, "touch-failed") && has_line(p, "touch-ok")
    });
    assert!(
        tmux.pane().contains("Read-only file system"),
        "{}",
        tmux.pane()
    );
    assert!(!outside.exists(), "the write outside reached the host");
    assert!(world.project.join("inside-ok").exists());

    // Closing the terminal ends the sandboxed shell.
    drop(tmux);
    let gone = poll(DEADLINE, || Some(()).filter(|()| !alive(pane_pid)));
    assert!(gone.is_some(), "sbx (pid {pane_pid}) outlived its terminal");
}
