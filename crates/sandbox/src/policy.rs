//! The per-call policy: mode, network, and the real paths of the writable roots.

use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use crate::error::SandboxError;
use crate::mode::{NetworkAccess, SandboxMode};

/// What one confined effect may do. Built per call from the effective mode (an approved
/// escalation, else the session's `sandbox/mode`, else the configured default) and the
/// session's working directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SandboxPolicy {
    /// The mode in force.
    pub mode: SandboxMode,
    /// Whether confined commands may use the network (ignored by `danger-full-access`).
    pub network: NetworkAccess,
    /// The real path of the workspace root (the session's working directory).
    pub workspace_root: PathBuf,
    /// The real paths writes may go under: in `workspace-write` the workspace root, `/tmp` and
    /// the process's temp directory (`TMPDIR`); empty otherwise.
    pub writable_roots: Vec<PathBuf>,
}

impl SandboxPolicy {
    /// The policy of `mode` for a workspace at `workspace` (resolved to its real path; a path
    /// that cannot be resolved is kept as given). `extra_roots` are further writable roots for
    /// `workspace-write` (resolved the same way; missing ones are dropped).
    pub fn new(
        mode: SandboxMode,
        network: NetworkAccess,
        workspace: &Path,
        extra_roots: &[PathBuf],
    ) -> Self {
        let workspace_real = std::fs::canonicalize(workspace).ok();
        let workspace_root = workspace_real
            .clone()
            .unwrap_or_else(|| workspace.to_path_buf());
        let mut writable_roots = Vec::new();
        if mode == SandboxMode::WorkspaceWrite {
            let fixed = [PathBuf::from("/tmp"), std::env::temp_dir()];
            let fixed_real = fixed.iter().chain(extra_roots).map(|r| real_root(r));
            for real in std::iter::once(workspace_real).chain(fixed_real).flatten() {
                if !writable_roots.contains(&real) {
                    writable_roots.push(real);
                }
            }
        }
        Self {
            mode,
            network,
            workspace_root,
            writable_roots,
        }
    }

    /// The same policy under another mode (an approved one-shot escalation).
    pub fn with_mode(&self, mode: SandboxMode) -> Self {
        let mut p = Self::new(mode, self.network, &self.workspace_root, &[]);
        if mode == SandboxMode::WorkspaceWrite {
            for root in &self.writable_roots {
                if !p.writable_roots.contains(root) {
                    p.writable_roots.push(root.clone());
                }
            }
        }
        p
    }

    /// Whether the network is reachable under this policy.
    pub fn network_allowed(&self) -> bool {
        !self.mode.is_restricted() || self.network == NetworkAccess::On
    }

    /// Whether `real` (an absolute, fully resolved path) lies under a writable root.
    pub fn allows_real(&self, real: &Path) -> bool {
        match self.mode {
            SandboxMode::DangerFullAccess => true,
            SandboxMode::ReadOnly => false,
            SandboxMode::WorkspaceWrite => self
                .writable_roots
                .iter()
                .any(|root| real.starts_with(root)),
        }
    }

    /// Checks a write to `path` (absolute): resolves it to the real path it would write (the
    /// target of a final symlink; the real path of the deepest existing ancestor plus the
    /// components still to be created) and refuses it with [`SandboxError::Denied`] unless it
    /// lies under a writable root. Returns the resolved path.
    pub fn check_write(&self, path: &Path) -> Result<PathBuf, SandboxError> {
        if self.mode == SandboxMode::DangerFullAccess {
            return Ok(path.to_path_buf());
        }
        let deny = |why: String| SandboxError::Denied {
            path: path.to_path_buf(),
            mode: self.mode,
            why,
        };
        if self.mode == SandboxMode::ReadOnly {
            return Err(deny("the read-only mode allows no writes".into()));
        }
        let real =
            resolve_for_write(path).map_err(|e| deny(format!("it cannot be resolved: {e}")))?;
        if self.allows_real(&real) {
            Ok(real)
        } else {
            Err(deny(format!(
                "it resolves to \"{}\", outside the writable roots ({})",
                real.display(),
                self.roots_text()
            )))
        }
    }

    /// The writable roots as one line (for messages and the runtime context).
    pub fn roots_text(&self) -> String {
        if self.writable_roots.is_empty() {
            return "none".into();
        }
        self.writable_roots
            .iter()
            .map(|r| r.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The real path of a writable root other than the workspace (`/tmp`, the temp directory, a
/// configured root), resolved once per process: every policy of every call would otherwise
/// resolve them again (a `readlink` per component), and what they resolve to is fixed for the
/// process's life. Keyed on the path given, so another `TMPDIR` or root is resolved afresh;
/// only successes are remembered, so a root that does not exist yet is looked for again.
/// (The workspace, which the agent's commands can change, is resolved on every call.)
fn real_root(root: &Path) -> Option<PathBuf> {
    static RESOLVED: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());
    let mut resolved = RESOLVED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, real)) = resolved.iter().find(|(given, _)| given == root) {
        return Some(real.clone());
    }
    let real = std::fs::canonicalize(root).ok()?;
    if resolved.len() < MAX_RESOLVED_ROOTS {
        resolved.push((root.to_path_buf(), real.clone()));
    }
    Some(real)
}

/// At most this many fixed roots are remembered (a few are configured).
const MAX_RESOLVED_ROOTS: usize = 32;

/// The real path a write to `path` lands on: `canonicalize(path)` when it exists (so a final
/// symlink is followed, as the write tools do); otherwise the real path of its deepest
/// existing ancestor joined with the remaining components, which must be plain names.
pub fn resolve_for_write(path: &Path) -> std::io::Result<PathBuf> {
    if let Ok(real) = std::fs::canonicalize(path) {
        return Ok(real);
    }
    // A dangling final symlink: resolve what it points at.
    if let Ok(meta) = std::fs::symlink_metadata(path)
        && meta.file_type().is_symlink()
    {
        let target = std::fs::read_link(path)?;
        let base = path.parent().unwrap_or(Path::new("/"));
        let joined = if target.is_absolute() {
            target
        } else {
            base.join(target)
        };
        if joined == path {
            return Err(std::io::Error::other("a symlink loop"));
        }
        return resolve_for_write(&joined);
    }
    let mut rest = Vec::new();
    let mut cur = path.to_path_buf();
    loop {
        let Some(name) = cur.file_name().map(|n| n.to_owned()) else {
            return Err(std::io::Error::other("no existing ancestor"));
        };
        rest.push(name);
        if !cur.pop() {
            return Err(std::io::Error::other("no existing ancestor"));
        }
        if let Ok(real) = std::fs::canonicalize(&cur) {
            let mut out = real;
            for comp in rest.iter().rev() {
                let p = Path::new(comp);
                if p.components().any(|c| !matches!(c, Component::Normal(_))) {
                    return Err(std::io::Error::other("a path component that is not a name"));
                }
                out.push(p);
            }
            return Ok(out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_write_roots_are_real_paths() {
        let dir = tempfile::tempdir().unwrap();
        let p = SandboxPolicy::new(
            SandboxMode::WorkspaceWrite,
            NetworkAccess::Off,
            dir.path(),
            &[],
        );
        assert_eq!(
            p.writable_roots[0],
            std::fs::canonicalize(dir.path()).unwrap()
        );
        assert!(p.writable_roots.contains(&PathBuf::from("/tmp")));
        assert!(!p.network_allowed());
        let ro = SandboxPolicy::new(SandboxMode::ReadOnly, NetworkAccess::On, dir.path(), &[]);
        assert!(ro.writable_roots.is_empty());
        assert!(ro.check_write(&dir.path().join("x")).is_err());
        let full = p.with_mode(SandboxMode::DangerFullAccess);
        assert!(full.check_write(Path::new("/etc/x")).is_ok());
        assert!(full.network_allowed());
    }
}
