//! What is allowed: the grants beside the denials of the other modules.

use super::*;

#[test]
fn writes_in_project_and_tmp_reach_the_host() {
    require_sandbox!();
    let world = World::new();
    scenarios::writes_in_project_and_tmp_reach_the_host(&Sbx, &world, Path::new("/tmp"), |_, _| {});
}

#[test]
fn project_files_are_readable() {
    require_sandbox!();
    let world = World::new();
    util::write(&world.project.join("notes.txt"), "project notes 123\n");
    world
        .sbx()
        .args(["run", "--", "cat", "notes.txt"])
        .assert()
        .success()
        .stdout("project notes 123\n");
}

#[test]
fn git_works_in_a_repository() {
    require_sandbox!();
    let world = World::new();
    world.git_repo();
    let out = Sbx.run_sh_env(
        &world,
        "set -e
         git status --short
         git checkout -q -b feature
         echo change > file.txt
         git add file.txt
         git commit -q -m 'from the sandbox'
         echo DONE",
        &[
            ("GIT_AUTHOR_NAME", "t"),
            ("GIT_AUTHOR_EMAIL", "t@example.invalid"),
            ("GIT_COMMITTER_NAME", "t"),
            ("GIT_COMMITTER_EMAIL", "t@example.invalid"),
        ],
    );
    assert!(out.status.success(), "{}", both(&out));
    assert_line(&out, "DONE");
    // Host side: the branch and the commit exist.
    let log = Command::new("git")
        .args(["log", "--format=%s", "-1", "feature"])
        .current_dir(&world.project)
        .output()
        .unwrap();
    assert_eq!(stdout(&log), "from the sandbox\n", "{}", both(&log));
    let head = Command::new("git")
        .args(["rev-parse", "--abbrev-ref", "HEAD"])
        .current_dir(&world.project)
        .output()
        .unwrap();
    assert_eq!(stdout(&head), "feature\n");
}

#[test]
fn exit_code_comes_back() {
    require_sandbox!();
    scenarios::exit_code_comes_back(&Sbx);
}

#[test]
fn stdin_reaches_the_command() {
    require_sandbox!();
    scenarios::stdin_reaches_the_command(&Sbx);
}

#[test]
fn project_path_with_a_space_works() {
    require_sandbox!();
    let world = World::new();
    assert!(world.project.to_str().unwrap().contains(' '));
    let out = Sbx.run_sh(&world, "pwd && echo ok > 'a file with spaces.txt'");
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(stdout(&out), format!("{}\n", world.project.display()));
    assert!(world.project.join("a file with spaces.txt").is_file());
}
