//! The warm path: one confinement kept alive by the supervisor and reused across runs, with
//! the same guarantees as a fresh confinement per run.

use std::net::TcpListener;
use std::time::Duration;

use dsh_bash_local::{LocalShell, LocalShellOptions};
use dsh_sandbox::{NetworkAccess, SandboxMode};
use dsh_sandbox_local::BackendKind;
use dsh_shell::ShellRequest;

use crate::support::{entries, layout, run_request, run_warm, usable};

const BACKENDS: [BackendKind; 2] = [BackendKind::Bwrap, BackendKind::Landlock];

fn shell() -> LocalShell {
    LocalShell::new(LocalShellOptions::default())
}

/// Processes anywhere on the host whose command line contains `marker`.
fn alive_with(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(marker))
        .collect()
}

/// The parent of the command: its pid and whether it is the supervisor.
async fn parent(
    shell: &LocalShell,
    sb: &dsh_sandbox_local::LocalSandbox,
    cwd: &std::path::Path,
) -> (String, bool) {
    let out = run_warm(
        shell,
        sb,
        cwd,
        "echo $PPID; tr '\\0' ' ' < /proc/$PPID/cmdline",
    )
    .await
    .unwrap();
    let text = out.stdout.text();
    let mut lines = text.lines();
    let ppid = lines.next().unwrap_or("").to_owned();
    let supervised = lines.next().unwrap_or("").contains("dsh-sandbox-serve");
    (ppid, supervised)
}

#[tokio::test]
async fn runs_reuse_one_supervised_sandbox_and_every_way_out_stays_refused() {
    for kind in BACKENDS {
        let Some(sb) = usable(kind, SandboxMode::WorkspaceWrite, NetworkAccess::Off) else {
            continue;
        };
        let shell = shell();
        let l = layout();
        let (first, supervised) = parent(&shell, &sb, &l.ws).await;
        assert!(
            supervised,
            "{}: the command did not run under the supervisor",
            kind.name()
        );
        let home_marker = format!("/root/.dsh-warm-test-{}", kind.name());
        for cmd in [
            "touch ../outside/x".to_owned(),
            format!("echo x > {home_marker}"),
            format!("echo x > /proc/self/root{}/y", l.outside.display()),
            "cd / && touch x".to_owned(),
            format!("ln -s {} link && touch link/z", l.outside.display()),
            format!("mkdir -p {}/newdir", l.outside.display()),
        ] {
            let out = run_warm(&shell, &sb, &l.ws, &cmd).await.unwrap();
            assert!(
                !out.termination.success(),
                "{}: `{cmd}` succeeded: {}",
                kind.name(),
                out.stderr.text()
            );
        }
        assert!(entries(&l.outside).is_empty(), "{}", kind.name());
        assert!(!std::path::Path::new(&home_marker).exists());
        let tmp = tempfile::tempdir_in("/tmp").unwrap();
        let cmd = format!(
            "echo a > in-ws && mkdir -p sub && echo b > sub/f && echo c > {}/t",
            tmp.path().display()
        );
        let out = run_warm(&shell, &sb, &l.ws, &cmd).await.unwrap();
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
        // Still the same supervisor: the sandbox was reused, not rebuilt.
        let (last, supervised) = parent(&shell, &sb, &l.ws).await;
        assert!(supervised);
        assert_eq!(first, last, "{}: the sandbox was rebuilt", kind.name());
        // Exit codes, stdout and stderr come through as on the cold path.
        let out = run_warm(&shell, &sb, &l.ws, "echo out; echo err >&2; exit 7")
            .await
            .unwrap();
        assert_eq!(out.termination.code(), Some(7));
        assert_eq!(out.stdout.text(), "out\n");
        assert_eq!(out.stderr.text(), "err\n");
    }
}

#[tokio::test]
async fn a_setsid_daemon_is_gone_when_the_call_ends_under_both_backends() {
    for kind in BACKENDS {
        let Some(sb) = usable(kind, SandboxMode::WorkspaceWrite, NetworkAccess::Off) else {
            continue;
        };
        let shell = shell();
        let l = layout();
        let marker = format!("1000.{}{}", std::process::id(), kind.name().len());
        for cmd in [
            format!("setsid sh -c 'sleep {marker}' >/dev/null 2>&1 & echo started"),
            format!("(set -m; sleep {marker}1 >/dev/null 2>&1 &) ; echo started"),
            format!("sleep {marker}2 & echo started"),
        ] {
            let out = run_warm(&shell, &sb, &l.ws, &cmd).await.unwrap();
            assert!(out.termination.success(), "{}", out.stderr.text());
            assert_eq!(out.stdout.text(), "started\n");
            let alive = alive_with(&marker);
            assert!(alive.is_empty(), "{}: `{cmd}` left {alive:?}", kind.name());
        }
        // And the sandbox is still usable afterwards.
        let out = run_warm(&shell, &sb, &l.ws, "echo ok").await.unwrap();
        assert_eq!(out.stdout.text(), "ok\n");
    }
}

#[tokio::test]
async fn neither_the_supervisor_nor_the_harness_environment_is_readable() {
    for kind in BACKENDS {
        let Some(sb) = usable(kind, SandboxMode::WorkspaceWrite, NetworkAccess::Off) else {
            continue;
        };
        let shell = shell();
        let l = layout();
        let cmd = format!(
            "cat /proc/$PPID/environ >/dev/null 2>&1 && echo parent-readable; \
             cat /proc/$PPID/maps >/dev/null 2>&1 && echo maps-readable; \
             cat /proc/{}/environ >/dev/null 2>&1 && echo harness-readable; echo done",
            std::process::id()
        );
        let out = run_warm(&shell, &sb, &l.ws, &cmd).await.unwrap();
        assert_eq!(out.stdout.text(), "done\n", "{}", kind.name());
    }
}

#[tokio::test]
async fn a_new_policy_gets_its_own_sandbox() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let cmd = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    for kind in BACKENDS {
        let (Some(off), Some(on)) = (
            usable(kind, SandboxMode::WorkspaceWrite, NetworkAccess::Off),
            usable(kind, SandboxMode::WorkspaceWrite, NetworkAccess::On),
        ) else {
            continue;
        };
        let shell = shell();
        let l = layout();
        for (sb, reach) in [(&off, false), (&on, true), (&off, false), (&on, true)] {
            let out = run_warm(&shell, sb, &l.ws, &cmd).await.unwrap();
            assert_eq!(
                out.termination.success(),
                reach,
                "{}: {} {}",
                kind.name(),
                out.stdout.text(),
                out.stderr.text()
            );
        }
        // read-only in the same shell: refused, although a workspace-write sandbox is idle.
        let ro = usable(kind, SandboxMode::ReadOnly, NetworkAccess::Off).unwrap();
        let out = run_warm(&shell, &ro, &l.ws, "touch ro").await.unwrap();
        assert!(!out.termination.success());
        assert!(!l.ws.join("ro").exists());
    }
}

#[tokio::test]
async fn deadlines_and_a_killed_supervisor_end_the_run_and_the_next_one_works() {
    for kind in BACKENDS {
        let Some(sb) = usable(kind, SandboxMode::WorkspaceWrite, NetworkAccess::Off) else {
            continue;
        };
        let shell = shell();
        let l = layout();
        let marker = format!("2000.{}{}", std::process::id(), kind.name().len());
        let request = ShellRequest::new(format!("setsid sleep {marker} & sleep {marker}"), &l.ws)
            .with_timeout(Duration::from_millis(300));
        let out = run_request(&shell, &sb, request).await.unwrap();
        assert!(out.timed_out, "{}", kind.name());
        assert_eq!(out.termination.signal_name(), Some("SIGTERM"));
        assert!(alive_with(&marker).is_empty(), "{}", kind.name());
        // A command that kills its supervisor: the run still ends (under bwrap the namespace
        // goes with it; under Landlock the command's processes would outlive it, see the
        // README), and the next run gets a new sandbox.
        if kind == BackendKind::Bwrap {
            let out = run_warm(&shell, &sb, &l.ws, "kill -9 $PPID; sleep 5")
                .await
                .unwrap();
            assert!(
                !out.termination.success(),
                "{:?} {} {}",
                out.termination,
                out.stdout.text(),
                out.stderr.text()
            );
            let out = run_warm(&shell, &sb, &l.ws, "echo again").await.unwrap();
            assert_eq!(out.stdout.text(), "again\n", "{}", kind.name());
        }
        // A command too long for one message takes the cold path and still runs confined.
        let long = format!(": {}; touch ../outside/long; echo long", "x".repeat(70_000));
        let out = run_warm(&shell, &sb, &l.ws, &long).await.unwrap();
        assert_eq!(out.stdout.text(), "long\n");
        assert!(entries(&l.outside).is_empty());
    }
}
