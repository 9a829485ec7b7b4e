//! Building a sandbox with one backend and running commands under it.

#![allow(clippy::print_stderr)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use dsh_bash_local::{LocalShell, LocalShellOptions};
use dsh_sandbox::{NetworkAccess, Sandbox, SandboxError, SandboxMode};
use dsh_sandbox_local::{BackendKind, LocalSandbox, LocalSandboxOptions};
use dsh_shell::{ShellExecutor, ShellOutcome, ShellRequest};

/// The standalone Landlock launcher built with this package.
pub fn launcher() -> Vec<OsString> {
    vec![env!("CARGO_BIN_EXE_dsh-landlock-run").into()]
}

/// The standalone warm sandbox supervisor built with this package.
pub fn supervisor() -> Vec<OsString> {
    vec![env!("CARGO_BIN_EXE_dsh-sandbox-serve").into()]
}

/// A sandbox that probes only `kind`, in `mode` with `network`.
pub fn sandbox(kind: BackendKind, mode: SandboxMode, network: NetworkAccess) -> LocalSandbox {
    LocalSandbox::probe(LocalSandboxOptions {
        mode,
        network,
        backends: vec![kind],
        landlock_launcher: launcher(),
        supervisor: supervisor(),
        ..LocalSandboxOptions::default()
    })
}

/// `Some(sandbox)` when the backend works here; otherwise prints why the test is skipped.
pub fn usable(
    kind: BackendKind,
    mode: SandboxMode,
    network: NetworkAccess,
) -> Option<LocalSandbox> {
    let sb = sandbox(kind, mode, network);
    if sb.backend().is_some() {
        return Some(sb);
    }
    let why = sb
        .report()
        .backends
        .iter()
        .map(|r| format!("{}: {}", r.name, r.detail))
        .collect::<Vec<_>>()
        .join("; ");
    eprintln!(
        "SKIPPED: the {} backend is unusable on this host: {why}",
        kind.name()
    );
    None
}

/// A workspace under `/var/tmp` (so that its sibling `outside` is not under `/tmp`).
pub struct Layout {
    _root: tempfile::TempDir,
    pub ws: PathBuf,
    pub outside: PathBuf,
}

pub fn layout() -> Layout {
    let root = tempfile::Builder::new()
        .prefix("dsh-confine-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let ws = root.path().join("ws");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    Layout {
        _root: root,
        ws,
        outside,
    }
}

/// Runs `command` in `cwd` under the sandbox's policy for that workspace.
pub async fn run(
    sb: &LocalSandbox,
    cwd: &Path,
    command: &str,
) -> Result<ShellOutcome, SandboxError> {
    let policy = sb.policy("s", cwd, None);
    let confined = sb.confine(&policy, Vec::new())?;
    let shell = LocalShell::new(LocalShellOptions::default());
    let request = ShellRequest::new(command, cwd).with_wrapper(confined.argv);
    Ok(shell.run(request).await.unwrap())
}

/// Runs `command` through `shell` (whose pool keeps warm sandboxes between runs) with the
/// confinement's supervisor: the warm path.
pub async fn run_warm(
    shell: &LocalShell,
    sb: &LocalSandbox,
    cwd: &Path,
    command: &str,
) -> Result<ShellOutcome, SandboxError> {
    run_request(shell, sb, ShellRequest::new(command, cwd)).await
}

/// Runs `request` (its wrapper and supervisor set from `sb`'s policy for its cwd) through
/// `shell`.
pub async fn run_request(
    shell: &LocalShell,
    sb: &LocalSandbox,
    request: ShellRequest,
) -> Result<ShellOutcome, SandboxError> {
    let policy = sb.policy("s", &request.cwd, None);
    let confined = sb.confine(&policy, Vec::new())?;
    let request = request
        .with_wrapper(confined.argv)
        .with_supervisor(confined.supervisor);
    Ok(shell.run(request).await.unwrap())
}

pub fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
