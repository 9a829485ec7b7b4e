//! dsh-checkpoint integration tests: real files, real `git`, real shell commands.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod follow;
mod plugin;
mod preview;
mod rewind;
mod store;

use std::path::{Path, PathBuf};
use std::process::Command;

use dsh_checkpoint::{Manifest, Store, diff};

pub(crate) struct Fixture {
    _tmp: tempfile::TempDir,
    pub ws: PathBuf,
    pub root: PathBuf,
}

impl Fixture {
    /// A workspace (a git repository when `git` is true) and a store root beside it.
    pub fn new(git: bool) -> Fixture {
        let tmp = tempfile::tempdir().expect("tempdir");
        let ws = tmp.path().join("ws");
        let root = tmp.path().join("home").join("checkpoints");
        std::fs::create_dir_all(&ws).expect("ws");
        let ws = ws.canonicalize().expect("canonical");
        let f = Fixture {
            _tmp: tmp,
            ws,
            root,
        };
        if git {
            f.git(&["init", "-q"]);
            f.git(&["config", "user.email", "t@example.invalid"]);
            f.git(&["config", "user.name", "t"]);
        }
        f
    }

    pub fn store(&self) -> Store {
        Store::open(&self.root, &self.ws, 1024 * 1024).expect("store")
    }

    pub fn sh(&self, script: &str) {
        let out = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(&self.ws)
            .output()
            .expect("sh");
        assert!(
            out.status.success(),
            "`{script}` failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(&self.ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git");
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn read(&self, rel: &str) -> Option<Vec<u8>> {
        std::fs::read(self.ws.join(rel)).ok()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.ws.join(rel)
    }
}

/// Asserts the workspace is byte for byte (content, links, execute bits) the snapshot `want`.
pub(crate) fn assert_same(store: &Store, want: &Manifest) {
    let now = store.snapshot().expect("snapshot");
    let d = diff(want, &now.manifest);
    assert!(d.is_empty(), "the workspace differs: {d:?}");
}

pub(crate) fn is_exec(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
