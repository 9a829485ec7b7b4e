//! What a command can and cannot do under each backend.

use std::net::TcpListener;

use dsh_sandbox::{NetworkAccess, Sandbox, SandboxError, SandboxMode};
use dsh_sandbox_local::{BackendKind, LocalSandbox, LocalSandboxOptions};

use crate::support::{entries, layout, run, sandbox, usable};

const BACKENDS: [BackendKind; 2] = [BackendKind::Bwrap, BackendKind::Landlock];

#[tokio::test]
async fn workspace_write_refuses_every_way_out_and_leaves_nothing() {
    for kind in BACKENDS {
        let Some(sb) = usable(kind, SandboxMode::WorkspaceWrite, NetworkAccess::Off) else {
            continue;
        };
        let l = layout();
        let home_marker = format!("/root/.dsh-sandbox-test-{}", kind.name());
        let attempts = [
            "touch ../outside/x".to_owned(),
            format!("echo x > {home_marker}"),
            format!("echo x > /proc/self/root{}/y", l.outside.display()),
            "cd / && touch x".to_owned(),
            format!("ln -s {} link && touch link/z", l.outside.display()),
            format!("mkdir -p {}/newdir", l.outside.display()),
        ];
        for cmd in &attempts {
            let out = run(&sb, &l.ws, cmd).await.unwrap();
            assert!(
                !out.termination.success(),
                "{}: `{cmd}` succeeded: {}",
                kind.name(),
                out.stderr.text()
            );
        }
        assert!(
            entries(&l.outside).is_empty(),
            "{}: {:?}",
            kind.name(),
            entries(&l.outside)
        );
        assert!(!std::path::Path::new(&home_marker).exists());
        assert!(!std::path::Path::new("/x").exists());
        // The workspace and /tmp are writable.
        let tmp = tempfile::tempdir_in("/tmp").unwrap();
        let cmd = format!(
            "echo a > in-ws && mkdir -p sub && echo b > sub/f && echo c > {}/t",
            tmp.path().display()
        );
        let out = run(&sb, &l.ws, &cmd).await.unwrap();
        assert!(
            out.termination.success(),
            "{}: {}",
            kind.name(),
            out.stderr.text()
        );
        assert_eq!(std::fs::read_to_string(l.ws.join("sub/f")).unwrap(), "b\n");
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("t")).unwrap(),
            "c\n"
        );
    }
}

#[tokio::test]
async fn read_only_refuses_every_write_and_full_access_allows() {
    for kind in BACKENDS {
        let Some(sb) = usable(kind, SandboxMode::ReadOnly, NetworkAccess::Off) else {
            continue;
        };
        let l = layout();
        let tmp = tempfile::tempdir_in("/tmp").unwrap();
        for cmd in [
            "touch a".to_owned(),
            format!("touch {}/t", tmp.path().display()),
            "mkdir d".to_owned(),
        ] {
            let out = run(&sb, &l.ws, &cmd).await.unwrap();
            assert!(
                !out.termination.success(),
                "{}: `{cmd}` succeeded",
                kind.name()
            );
        }
        // Reading works, and /dev/null stays writable.
        let out = run(&sb, &l.ws, "cat /etc/hostname >/dev/null && echo ok")
            .await
            .unwrap();
        assert!(
            out.termination.success(),
            "{}: {}",
            kind.name(),
            out.stderr.text()
        );
        assert!(entries(&l.ws).is_empty());
        assert!(entries(tmp.path()).is_empty());
    }
    let full = sandbox(
        BackendKind::Bwrap,
        SandboxMode::DangerFullAccess,
        NetworkAccess::Off,
    );
    let l = layout();
    let out = run(&full, &l.ws, "touch ../outside/x").await.unwrap();
    assert!(out.termination.success(), "{}", out.stderr.text());
    assert_eq!(entries(&l.outside), ["x"]);
}

#[tokio::test]
async fn a_loopback_listener_outside_is_unreachable_with_network_off_only() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let cmd = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    for kind in BACKENDS {
        for (network, reach) in [(NetworkAccess::Off, false), (NetworkAccess::On, true)] {
            let Some(sb) = usable(kind, SandboxMode::WorkspaceWrite, network) else {
                continue;
            };
            let l = layout();
            let out = run(&sb, &l.ws, &cmd).await.unwrap();
            assert_eq!(
                out.termination.success(),
                reach,
                "{} network {network}: {} {}",
                kind.name(),
                out.stdout.text(),
                out.stderr.text()
            );
        }
    }
}

#[tokio::test]
async fn a_setsid_daemon_dies_with_the_call_under_bwrap() {
    let Some(sb) = usable(
        BackendKind::Bwrap,
        SandboxMode::WorkspaceWrite,
        NetworkAccess::Off,
    ) else {
        return;
    };
    let l = layout();
    let marker = format!("1000.{}", std::process::id());
    let cmd = format!("setsid sh -c 'sleep {marker}' >/dev/null 2>&1 & echo started");
    let out = run(&sb, &l.ws, &cmd).await.unwrap();
    assert!(out.termination.success(), "{}", out.stderr.text());
    let alive: Vec<_> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| String::from_utf8_lossy(c).contains(&marker))
        .collect();
    assert!(alive.is_empty(), "a daemon outlived the call");
}

#[tokio::test]
async fn the_parent_environment_is_out_of_reach_under_bwrap() {
    let Some(sb) = usable(
        BackendKind::Bwrap,
        SandboxMode::WorkspaceWrite,
        NetworkAccess::Off,
    ) else {
        return;
    };
    let l = layout();
    // Inside the PID namespace the parent is the namespace's init, and no process of the
    // harness is visible at all: the test process's own pid does not exist there.
    let cmd = format!(
        "echo ppid=$PPID; test -e /proc/{}/environ && echo visible; ls /proc | grep -c '^[0-9]'",
        std::process::id()
    );
    let out = run(&sb, &l.ws, &cmd).await.unwrap();
    let text = out.stdout.text();
    assert!(text.contains("ppid=1\n"), "{text}");
    assert!(!text.contains("visible"), "{text}");
}

#[tokio::test]
async fn no_backend_refuses_with_sandbox_unavailable_and_runs_nothing() {
    let sb = LocalSandbox::probe(LocalSandboxOptions {
        backends: Vec::new(),
        ..LocalSandboxOptions::default()
    });
    let l = layout();
    let err = run(&sb, &l.ws, "touch ran").await.unwrap_err();
    assert!(matches!(err, SandboxError::Unavailable { .. }), "{err:?}");
    assert_eq!(err.code(), dsh_sandbox::SANDBOX_UNAVAILABLE);
    assert!(err.to_string().contains("danger-full-access"), "{err}");
    assert!(entries(&l.ws).is_empty());
    // A missing bwrap is skipped with the reason, and the next backend is used.
    let sb = LocalSandbox::probe(LocalSandboxOptions {
        backends: vec![BackendKind::Bwrap, BackendKind::Landlock],
        bwrap: "/nonexistent/bwrap".into(),
        landlock_launcher: crate::support::launcher(),
        ..LocalSandboxOptions::default()
    });
    let report = sb.report();
    assert!(!report.backends[0].usable);
    assert!(
        report.backends[0].detail.contains("not found"),
        "{:?}",
        report.backends[0]
    );
    if let Some(selected) = report.selected() {
        assert_eq!(selected.name, "landlock");
    }
}

#[test]
fn a_background_probe_reaches_the_same_verdict() {
    let options = LocalSandboxOptions {
        landlock_launcher: crate::support::launcher(),
        ..LocalSandboxOptions::default()
    };
    let now = LocalSandbox::probe(options.clone()).report();
    let later = LocalSandbox::probe_in_background(options).report();
    assert_eq!(now, later);
}
