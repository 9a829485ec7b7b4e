//! `write_atomically` under `workspace-write` and `read-only`: every way out is refused and
//! leaves nothing behind; writes in the workspace and `/tmp` succeed.

use std::path::{Path, PathBuf};

use dsh_sandbox::fence::{FenceError, write_atomically};
use dsh_sandbox::{NetworkAccess, SandboxError, SandboxMode, SandboxPolicy};

struct Layout {
    _root: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

/// `<tmp>/ws` is the workspace, `<tmp>/outside` a sibling. The temp dir is made under
/// `/var/tmp`, so that "outside" is not under `/tmp` (a writable root).
fn layout() -> Layout {
    let root = tempfile::Builder::new()
        .prefix("dsh-fence-")
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

fn policy(mode: SandboxMode, ws: &Path) -> SandboxPolicy {
    SandboxPolicy::new(mode, NetworkAccess::Off, ws, &[])
}

fn denied(result: Result<(), FenceError>) -> String {
    match result {
        Err(FenceError::Sandbox(e @ SandboxError::Denied { .. })) => e.to_string(),
        other => panic!("expected a sandbox denial, got {other:?}"),
    }
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn workspace_and_tmp_writes_succeed() {
    let l = layout();
    let p = policy(SandboxMode::WorkspaceWrite, &l.ws);
    write_atomically(Some(&p), &l.ws.join("sub/dir/a.txt"), b"hi").unwrap();
    assert_eq!(std::fs::read(l.ws.join("sub/dir/a.txt")).unwrap(), b"hi");
    let tmp = tempfile::tempdir_in("/tmp").unwrap();
    write_atomically(Some(&p), &tmp.path().join("t.txt"), b"t").unwrap();
    assert_eq!(std::fs::read(tmp.path().join("t.txt")).unwrap(), b"t");
}

#[test]
fn dotdot_symlinked_dirs_and_proc_self_root_are_refused() {
    let l = layout();
    let p = policy(SandboxMode::WorkspaceWrite, &l.ws);
    // `..` (unnormalised, as a raw path).
    let msg = denied(write_atomically(Some(&p), &l.ws.join("../outside/x"), b"x"));
    assert!(
        msg.contains("FS_SANDBOX_DENIED") || msg.contains("outside the writable roots"),
        "{msg}"
    );
    // A directory symlink inside the workspace pointing outside.
    std::os::unix::fs::symlink(&l.outside, l.ws.join("link")).unwrap();
    denied(write_atomically(Some(&p), &l.ws.join("link/x"), b"x"));
    denied(write_atomically(
        Some(&p),
        &l.ws.join("link/new/deeper/x"),
        b"x",
    ));
    // A dangling final symlink pointing outside.
    std::os::unix::fs::symlink(l.outside.join("made"), l.ws.join("dangling")).unwrap();
    denied(write_atomically(Some(&p), &l.ws.join("dangling"), b"x"));
    // /proc/self/root is the root directory: the real path is still outside.
    let via_proc = PathBuf::from(format!("/proc/self/root{}", l.outside.display())).join("x");
    denied(write_atomically(Some(&p), &via_proc, b"x"));
    // Nothing was created outside, not even a directory.
    assert!(entries(&l.outside).is_empty(), "{:?}", entries(&l.outside));
    // Home directory rc files.
    denied(write_atomically(
        Some(&p),
        Path::new("/root/.bashrc-dsh-test"),
        b"x",
    ));
    assert!(!Path::new("/root/.bashrc-dsh-test").exists());
}

#[test]
fn a_hard_link_to_an_outside_file_is_replaced_not_written_through() {
    let l = layout();
    let p = policy(SandboxMode::WorkspaceWrite, &l.ws);
    let secret = l.outside.join("secret");
    std::fs::write(&secret, b"original").unwrap();
    std::fs::hard_link(&secret, l.ws.join("hard")).unwrap();
    write_atomically(Some(&p), &l.ws.join("hard"), b"changed").unwrap();
    assert_eq!(std::fs::read(&secret).unwrap(), b"original");
    assert_eq!(std::fs::read(l.ws.join("hard")).unwrap(), b"changed");
}

#[test]
fn read_only_refuses_every_write_and_full_access_allows() {
    let l = layout();
    let ro = policy(SandboxMode::ReadOnly, &l.ws);
    let msg = denied(write_atomically(Some(&ro), &l.ws.join("a"), b"x"));
    assert!(msg.contains("read-only"), "{msg}");
    assert!(entries(&l.ws).is_empty());
    let full = policy(SandboxMode::DangerFullAccess, &l.ws);
    write_atomically(Some(&full), &l.outside.join("ok"), b"x").unwrap();
    assert!(l.outside.join("ok").exists());
}
