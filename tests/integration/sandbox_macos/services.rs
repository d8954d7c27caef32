//! Services that act outside the sandbox: `open`, Apple Events, the
//! keychain, the pasteboard.

use super::*;

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn open_cannot_launch_anything_outside() {
    require_sandbox!();
    let Some(open) = tool(&["/usr/bin/open"]) else {
        return;
    };
    let world = World::new();
    let apps = ["TextEdit", "Calculator", "Terminal"];
    let before: Vec<u32> = apps.iter().flat_map(|a| pgrep_exact(a)).collect();
    // A `.command` file opens in Terminal, outside the sandbox: if it ran,
    // the marker (outside every writable root) would appear.
    let marker = world.root.join("opened-outside");
    let command_file = PathBuf::from(format!("/private/tmp/sbx-{}.command", unique(4)));
    std::fs::write(
        &command_file,
        format!("#!/bin/sh\ntouch {}\n", shq_path(&marker)),
    )
    .unwrap();
    std::fs::set_permissions(&command_file, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = Seatbelt.run_sh(
        &world,
        &format!(
            "{open} -a TextEdit ; echo \"textedit=$?\"
             {open} -g -a Calculator ; echo \"calculator=$?\"
             {open} {cf} ; echo \"command-file=$?\"
             {open} . ; echo \"finder=$?\"
             echo RAN",
            cf = shq_path(&command_file)
        ),
    );
    let new = new_app_pids(&apps, &before, Duration::from_secs(5));
    kill_all(&new);
    let _ = std::fs::remove_file(&command_file);
    assert_line(&out, "RAN");
    assert!(new.is_empty(), "apps started: {new:?}\n{}", both(&out));
    assert!(
        !marker.exists(),
        "the .command file ran outside:\n{}",
        both(&out)
    );
    for l in ["textedit=0", "calculator=0", "command-file=0", "finder=0"] {
        assert_no_line_starting(&out, l);
    }
    // Positive control: the same `open` on the host does start the app, so
    // its absence above is the sandbox's doing.
    if intrusive_ok("launching Calculator on the host") {
        let before: Vec<u32> = pgrep_exact("Calculator");
        let host_out = host(open, &["-g", "-a", "Calculator"], Duration::from_secs(30));
        let started = new_app_pids(&["Calculator"], &before, Duration::from_secs(15));
        kill_all(&started);
        if started.is_empty() {
            loud_skip(
                "the host control of `open`",
                &format!(
                    "this runner cannot launch apps at all, so the refusal above proves less\n{}",
                    both(&host_out)
                ),
            );
        }
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn osascript_cannot_drive_other_apps() {
    require_sandbox!();
    let Some(osa) = tool(&["/usr/bin/osascript"]) else {
        return;
    };
    let world = World::new();
    let before = pgrep_exact("Terminal");
    let marker = world.root.join("terminal-ran");
    let out = Seatbelt.run_sh(
        &world,
        &format!(
            "{osa} -e 'return \"OSA-\" & \"ALIVE\"'
             {osa} -e 'tell application \"Finder\" to get name' ; echo \"finder=$?\"
             {osa} -e {terminal} ; echo \"terminal=$?\"
             echo RAN",
            terminal = shq(&format!(
                "tell application \"Terminal\" to do script \"touch {}\"",
                marker.display()
            ))
        ),
    );
    std::thread::sleep(Duration::from_secs(2));
    let new = new_app_pids(&["Terminal"], &before, Duration::from_secs(1));
    kill_all(&new);
    assert_line(&out, "RAN");
    assert!(
        !lines(&out).iter().any(|l| l == "Finder"),
        "Finder answered an Apple Event:\n{}",
        both(&out)
    );
    assert_no_line_starting(&out, "finder=0");
    assert_no_line_starting(&out, "terminal=0");
    assert!(!marker.exists(), "Terminal ran a command:\n{}", both(&out));
    assert!(new.is_empty(), "Terminal started: {new:?}\n{}", both(&out));
    // The control that osascript itself runs in the sandbox (so the refusals
    // are the Apple Events'): reported, not required.
    if !lines(&out).iter().any(|l| l == "OSA-ALIVE") {
        loud_skip(
            "the osascript control",
            &format!(
                "osascript does not run at all in the sandbox, so the refusals above prove less\n{}",
                both(&out)
            ),
        );
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn login_keychain_items_are_unreadable() {
    require_sandbox!();
    if tool(&["/usr/bin/security"]).is_none()
        || !intrusive_ok("adding an item to the login keychain")
    {
        return;
    }
    let world = World::new();
    let service = format!("sbx-test-{}", unique(5));
    let added = host(
        "/usr/bin/security",
        &[
            "add-generic-password",
            "-a",
            "sbx",
            "-s",
            &service,
            "-w",
            SECRET,
        ],
        Duration::from_secs(30),
    );
    if !added.status.success() {
        loud_skip(
            "the login keychain check",
            &format!("the runner has no usable login keychain\n{}", both(&added)),
        );
        return;
    }
    let _item = KeychainItem {
        service: service.clone(),
        keychain: None,
        created: false,
    };
    // Host control: the item reads outside the sandbox.
    let found = host(
        "/usr/bin/security",
        &["find-generic-password", "-s", &service, "-w"],
        Duration::from_secs(30),
    );
    if !stdout(&found).contains(SECRET) {
        loud_skip(
            "the login keychain check",
            &format!(
                "the item does not read even outside the sandbox\n{}",
                both(&found)
            ),
        );
        return;
    }
    // The real login keychain file lies outside the test's fake HOME, so no
    // file rule covers it here: only SecurityServer being out of reach does.
    let default_kc = stdout(&host(
        "/usr/bin/security",
        &["default-keychain"],
        Duration::from_secs(30),
    ))
    .trim()
    .trim_matches('"')
    .to_string();
    let mut script = find_password_line(&service, None);
    if !default_kc.is_empty() {
        script.push('\n');
        script.push_str(&find_password_line(&service, Some(Path::new(&default_kc))));
    }
    script.push_str("\necho RAN");
    let out = Seatbelt.run_sh(&world, &script);
    assert_line(&out, "RAN");
    assert_no_secret(&out);
    assert_no_line_starting(&out, "FOUND=0");
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn keychain_in_home_is_unreadable_even_with_network_allow() {
    require_sandbox!();
    if tool(&["/usr/bin/security"]).is_none()
        || !intrusive_ok("creating a keychain (it joins the search list)")
    {
        return;
    }
    let world = World::new();
    let dir = world.home.join("Library/Keychains");
    std::fs::create_dir_all(&dir).unwrap();
    let kc = dir.join("sbx-test.keychain-db");
    let kc_s = kc.to_str().unwrap();
    let service = format!("sbx-test-{}", unique(6));
    let security = |args: &[&str]| host("/usr/bin/security", args, Duration::from_secs(30));
    let created = security(&["create-keychain", "-p", "pw", kc_s]);
    if !created.status.success() {
        loud_skip(
            "the home keychain check",
            &format!("cannot create a keychain here\n{}", both(&created)),
        );
        return;
    }
    let _item = KeychainItem {
        service: service.clone(),
        keychain: Some(kc.clone()),
        created: true,
    };
    let _ = security(&["unlock-keychain", "-p", "pw", kc_s]);
    let added = security(&[
        "add-generic-password",
        "-a",
        "sbx",
        "-s",
        &service,
        "-w",
        SECRET,
        kc_s,
    ]);
    let found = security(&["find-generic-password", "-s", &service, "-w", kc_s]);
    if !added.status.success() || !stdout(&found).contains(SECRET) {
        loud_skip(
            "the home keychain check",
            &format!(
                "the item does not read even outside the sandbox\n{}\n{}",
                both(&added),
                both(&found)
            ),
        );
        return;
    }
    let script = format!(
        "{}\ncat {} >/dev/null && echo CAT-OK\necho RAN",
        find_password_line(&service, Some(&kc)),
        shq_path(&kc)
    );
    // `network = "allow"` grants SecurityServer (TLS needs it): the file
    // rule on ~/Library/Keychains must hold on its own. Deny mode as well.
    for flags in [&["--network", "allow"][..], &[][..]] {
        let out = Seatbelt.run_sh_flags(&world, flags, &script);
        assert_line(&out, "RAN");
        assert_no_secret(&out);
        assert_no_line_starting(&out, "FOUND=0");
        assert_no_line_starting(&out, "CAT-OK");
    }
}

#[test]
#[cfg_attr(
    not(target_os = "macos"),
    ignore = "macOS only: run by the macOS CI job"
)]
fn pasteboard_is_out_of_reach() {
    require_sandbox!();
    if tool(&["/usr/bin/pbcopy"]).is_none() || !intrusive_ok("using the pasteboard") {
        return;
    }
    let world = World::new();
    let clip = format!("SBX-CLIP-{}", unique(7));
    let mut copy = Command::new("/usr/bin/pbcopy")
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut copy.stdin.take().unwrap(), clip.as_bytes()).unwrap();
    let _ = copy.wait();
    let pasted = host("/usr/bin/pbpaste", &[], Duration::from_secs(30));
    if stdout(&pasted) != clip {
        loud_skip(
            "the pasteboard check",
            &format!(
                "the pasteboard does not work on this host\n{}",
                both(&pasted)
            ),
        );
        return;
    }
    let out = Seatbelt.run_sh(
        &world,
        "/usr/bin/pbpaste ; echo ; echo sbx-wrote-this | /usr/bin/pbcopy ; echo RAN",
    );
    let after = stdout(&host("/usr/bin/pbpaste", &[], Duration::from_secs(30)));
    assert_line(&out, "RAN");
    assert_absent(&out, &clip);
    assert_eq!(
        after,
        clip,
        "the sandbox wrote the pasteboard:\n{}",
        both(&out)
    );
}
