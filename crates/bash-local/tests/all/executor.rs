//! Plain runs: output, exit codes, signals, working directories, environment, errors.

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use dsh_bash_local::{LocalShell, LocalShellOptions};
use dsh_shell::{
    InvalidRequest, ShellError, ShellExecutor, ShellRequest, Termination, WorkdirProblem,
};

use crate::common::{options, run, shell};

#[tokio::test]
async fn echo_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let sh = shell(dir.path());
    let out = run(
        &sh,
        ShellRequest::new("echo dsh-sdk-proof-7391", dir.path()),
    )
    .await;
    assert_eq!(out.stdout.tail, b"dsh-sdk-proof-7391\n");
    assert_eq!(out.stdout.total_bytes, 19);
    assert!(out.stderr.is_empty());
    assert_eq!(out.termination, Termination::Exited { code: 0 });
    assert!(!out.timed_out && !out.cancelled && !out.truncated());
}

#[tokio::test]
async fn stderr_is_separate() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        &shell(dir.path()),
        ShellRequest::new("echo out; echo err >&2; exit 3", dir.path()),
    )
    .await;
    assert_eq!(out.stdout.text(), "out\n");
    assert_eq!(out.stderr.text(), "err\n");
    assert_eq!(out.termination, Termination::Exited { code: 3 });
}

#[tokio::test]
async fn exit_codes_and_signals() {
    let dir = tempfile::tempdir().unwrap();
    let sh = shell(dir.path());
    for (cmd, want) in [
        ("true", Termination::Exited { code: 0 }),
        ("false", Termination::Exited { code: 1 }),
        ("exit 255", Termination::Exited { code: 255 }),
        ("exit 256", Termination::Exited { code: 0 }),
        (
            "kill -KILL $$",
            Termination::Signaled {
                signal: 9,
                name: "SIGKILL".into(),
            },
        ),
        (
            "kill -SEGV $$",
            Termination::Signaled {
                signal: 11,
                name: "SIGSEGV".into(),
            },
        ),
        // bash reports a child killed by a signal as 128 + n.
        (
            "bash -c 'kill -TERM $$'; exit $?",
            Termination::Exited { code: 143 },
        ),
    ] {
        let out = run(&sh, ShellRequest::new(cmd, dir.path())).await;
        assert_eq!(out.termination, want, "{cmd}");
    }
}

#[tokio::test]
async fn cwd_with_unicode_and_spaces() {
    let dir = tempfile::tempdir().unwrap();
    let cwd = dir.path().join("dír with spaces ü 漢字");
    std::fs::create_dir(&cwd).unwrap();
    let out = run(&shell(dir.path()), ShellRequest::new("pwd -P", &cwd)).await;
    let want = cwd.canonicalize().unwrap();
    assert_eq!(out.stdout.text(), format!("{}\n", want.display()));
}

#[tokio::test]
async fn environment_is_scrubbed_and_managed() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        &shell(dir.path()),
        ShellRequest::new("env", dir.path())
            .with_session_id("sess-42")
            .with_env("EXTRA_FOR_RUN", "x y"),
    )
    .await;
    let text = out.stdout.text();
    let vars: Vec<&str> = text.lines().collect();
    assert!(!text.contains("sk-planted-secret"), "API key leaked");
    assert!(!vars.iter().any(|l| l.starts_with("DEEPSEEK_API_KEY=")));
    assert!(!vars.iter().any(|l| l.starts_with("DSH_TEST_VISIBLE=")));
    for want in [
        "DSH_SESSION_ID=sess-42",
        "DSH_SHELL=1",
        "PLAIN_VISIBLE=yes",
        "EXTRA_FOR_RUN=x y",
        "NO_COLOR=1",
        "TERM=dumb",
        "PAGER=cat",
        "GIT_PAGER=cat",
    ] {
        assert!(vars.contains(&want), "{want} missing from {vars:?}");
    }
}

#[tokio::test]
async fn scrub_list_is_configurable() {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = options(dir.path());
    opts.scrub_env = vec!["plain_visible".into()];
    let out = run(
        &LocalShell::new(opts),
        ShellRequest::new("echo \"[${PLAIN_VISIBLE-unset}]\"", dir.path()),
    )
    .await;
    assert_eq!(out.stdout.text(), "[unset]\n");
}

#[tokio::test]
async fn no_startup_files_and_stdin_is_null() {
    let dir = tempfile::tempdir().unwrap();
    let rc = dir.path().join("rc.sh");
    std::fs::write(&rc, "echo rc-loaded\n").unwrap();
    std::fs::write(dir.path().join(".bashrc"), "echo bashrc-loaded\n").unwrap();
    std::fs::write(dir.path().join(".bash_profile"), "echo profile-loaded\n").unwrap();
    let mut opts = options(dir.path());
    let base = opts.base_env.as_mut().unwrap();
    base.retain(|(n, _)| n != "HOME" && n != "BASH_ENV");
    base.push(("HOME".into(), dir.path().into()));
    base.push(("BASH_ENV".into(), rc.into()));
    let out = run(
        &LocalShell::new(opts),
        // `cat` would block forever on a terminal or an open pipe; /dev/null ends it.
        ShellRequest::new("cat; echo done", dir.path()),
    )
    .await;
    assert_eq!(out.stdout.text(), "done\n");
    assert!(out.stderr.is_empty(), "{}", out.stderr.text());
}

#[tokio::test]
async fn infrastructure_errors() {
    let dir = tempfile::tempdir().unwrap();
    let sh = shell(dir.path());
    let missing = dir.path().join("nope");
    match sh.run(ShellRequest::new("true", &missing)).await {
        Err(ShellError::WorkingDirectory {
            path,
            reason: WorkdirProblem::Unreadable(error),
        }) => {
            assert_eq!(path, missing);
            assert_eq!(error.kind(), std::io::ErrorKind::NotFound, "{error}");
        }
        other => panic!("{other:?}"),
    }
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    match sh.run(ShellRequest::new("true", &file)).await {
        Err(ShellError::WorkingDirectory {
            reason: WorkdirProblem::NotADirectory,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    // A directory without search permission. Root (as in CI) bypasses permissions: then the
    // run simply succeeds, which is also what the kernel would allow.
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let privileged = std::fs::metadata(locked.join(".")).is_ok();
    match sh.run(ShellRequest::new("true", &locked)).await {
        Err(ShellError::WorkingDirectory {
            reason: WorkdirProblem::NotEnterable(error),
            ..
        }) if !privileged => {
            assert_eq!(
                error.kind(),
                std::io::ErrorKind::PermissionDenied,
                "{error}"
            );
        }
        Ok(out) if privileged => assert!(out.termination.success()),
        other => panic!("privileged={privileged}: {other:?}"),
    }
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    match sh.run(ShellRequest::new("echo a\0b", dir.path())).await {
        Err(ShellError::InvalidRequest(InvalidRequest::NulByte)) => {}
        other => panic!("{other:?}"),
    }
    // Linux limits one argument to 128 KiB: a clear message instead of a bare E2BIG.
    let huge = format!("echo {}", "x".repeat(200_000));
    match sh.run(ShellRequest::new(huge, dir.path())).await {
        Err(err @ ShellError::InvalidRequest(InvalidRequest::TooLong { bytes: 200_005 })) => {
            assert!(err.to_string().contains("too long"), "{err}");
        }
        other => panic!("{other:?}"),
    }
    let broken = LocalShell::new(LocalShellOptions {
        program: dir.path().join("no-such-bash"),
        ..options(dir.path())
    });
    match broken.run(ShellRequest::new("true", dir.path())).await {
        Err(err @ ShellError::Spawn { .. }) => {
            assert!(err.to_string().contains("no-such-bash"), "{err}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn timeout_is_clamped() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        &shell(dir.path()),
        ShellRequest::new("true", dir.path()).with_timeout(Duration::from_secs(10_000)),
    )
    .await;
    assert_eq!(out.timeout, dsh_shell::limits::MAX_TIMEOUT);
}

#[tokio::test]
async fn concurrent_runs_are_independent() {
    let dir = tempfile::tempdir().unwrap();
    let sh = shell(dir.path());
    let runs = (0..8).map(|i| {
        let sh = &sh;
        let cwd = dir.path().to_path_buf();
        async move { run(sh, ShellRequest::new(format!("echo {i}; exit {i}"), cwd)).await }
    });
    let outs = futures::future::join_all(runs).await;
    for (i, out) in outs.iter().enumerate() {
        assert_eq!(out.stdout.text(), format!("{i}\n"));
        assert_eq!(out.termination.code(), Some(i as i32));
    }
}

/// A signal bit in a `/proc/<pid>/status` mask line (`SigBlk:`, `SigIgn:`).
fn mask_has(status: &str, field: &str, signal: i32) -> bool {
    let mask = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .map(str::trim)
        .unwrap_or_else(|| panic!("no {field} in {status}"));
    let mask = u64::from_str_radix(mask, 16).unwrap();
    mask & (1 << (signal - 1)) != 0
}

/// The child starts with the default disposition of SIGPIPE, which the Rust runtime ignores in
/// the harness (an ignored disposition would survive `exec` and make `yes | head` loop on
/// EPIPE), and leads its own process group.
#[tokio::test]
async fn child_signal_state_and_group() {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        &shell(dir.path()),
        ShellRequest::new("cat /proc/$$/status", dir.path()),
    )
    .await;
    let status = out.stdout.text();
    assert!(
        !mask_has(&status, "SigIgn:", 13),
        "SIGPIPE ignored: {status}"
    );
    let pgid = status
        .lines()
        .find_map(|l| l.strip_prefix("NSpgid:"))
        .map(str::trim);
    if let Some(pgid) = pgid {
        assert_eq!(pgid, out.pid.to_string(), "{status}");
    }
}

/// A bare program name is looked up in the command's own PATH (the scrubbed environment the
/// child gets), not the harness's.
#[tokio::test]
async fn program_name_is_looked_up_in_the_childs_path() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let fake = bin.join("fake-shell");
    std::fs::write(&fake, "#!/bin/sh\necho fake-shell-ran \"$@\"\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut opts = options(dir.path());
    opts.program = "fake-shell".into();
    let base = opts.base_env.as_mut().unwrap();
    base.retain(|(n, _)| n != "PATH");
    base.push((
        "PATH".into(),
        format!("/nonexistent:{}", bin.display()).into(),
    ));
    let out = run(
        &LocalShell::new(opts),
        ShellRequest::new("true", dir.path()),
    )
    .await;
    assert_eq!(
        out.stdout.text(),
        "fake-shell-ran --noprofile --norc -c true\n"
    );
}

/// The session spill cap bounds the spill directory as a whole: a stream whose spill would
/// pass it is not written, and the outcome says why.
#[tokio::test]
async fn session_spill_cap_is_enforced() {
    use dsh_shell::SpillSkipped;
    let dir = tempfile::tempdir().unwrap();
    let spill = dir.path().join("spill");
    std::fs::create_dir(&spill).unwrap();
    std::fs::write(spill.join("earlier"), vec![b'x'; 50_000]).unwrap();
    let sh = shell(&spill);
    let request = |cap: u64| {
        ShellRequest::new("head -c 200000 /dev/zero", dir.path())
            .with_spill_dir(&spill)
            .with_spill_total_cap(cap)
    };
    // 50,000 already there + 200,000 > 220,000: not spilled.
    let out = run(&sh, request(220_000)).await;
    assert!(out.stdout.truncated);
    assert_eq!(out.stdout.spill_path, None);
    assert_eq!(
        out.stdout.spill_skipped,
        Some(SpillSkipped::SessionCap { cap: 220_000 })
    );
    let files: Vec<_> = std::fs::read_dir(&spill).unwrap().collect();
    assert_eq!(files.len(), 1, "only the earlier file remains");
    // With room for it, the same run spills the whole stream.
    let out = run(&sh, request(250_000)).await;
    let path = out.stdout.spill_path.expect("spilled");
    assert_eq!(std::fs::metadata(path).unwrap().len(), 200_000);
    assert_eq!(out.stdout.spill_skipped, None);
}
