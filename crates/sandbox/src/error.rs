//! Typed sandbox errors and their tool error codes.

use std::path::PathBuf;

use dsh_tools::{ToolError, ToolErrorCode};

use crate::mode::SandboxMode;

/// A file effect outside the writable roots was refused.
pub const FS_SANDBOX_DENIED: ToolErrorCode = ToolErrorCode::tool_defined("FS_SANDBOX_DENIED");
/// The mode cannot be enforced on this host: nothing was run.
pub const SANDBOX_UNAVAILABLE: ToolErrorCode = ToolErrorCode::tool_defined("SANDBOX_UNAVAILABLE");

/// Why the sandbox refused an effect.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SandboxError {
    /// A write to `path` (really `real`, after resolving symlinks and `..`) is outside the
    /// writable roots of `mode`.
    #[error(
        "[sandbox: file access denied under {mode} mode] writing \"{path}\" is not allowed: {why}",
        path = path.display()
    )]
    Denied {
        /// The path as the tool was given it.
        path: PathBuf,
        /// The mode in force.
        mode: SandboxMode,
        /// What the path resolved to and why that is refused.
        why: String,
    },
    /// No backend can enforce `mode` here.
    #[error(
        "the {mode} sandbox mode cannot be enforced on this host, so the command was not run \
         (refusing to run unconfined). Install bubblewrap (`apt-get install bubblewrap`) and \
         allow user namespaces, or use a kernel with Landlock, or choose \
         `--sandbox danger-full-access` to run without a sandbox. {detail}"
    )]
    Unavailable {
        /// The mode that was asked for.
        mode: SandboxMode,
        /// What the probes found.
        detail: String,
    },
}

impl SandboxError {
    /// The tool error code of this refusal.
    pub fn code(&self) -> ToolErrorCode {
        match self {
            SandboxError::Denied { .. } => FS_SANDBOX_DENIED,
            SandboxError::Unavailable { .. } => SANDBOX_UNAVAILABLE,
        }
    }
}

impl From<SandboxError> for ToolError {
    fn from(error: SandboxError) -> Self {
        ToolError::new(error.code(), error.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_tool_defined_and_canonical() {
        assert!(FS_SANDBOX_DENIED.is_canonical());
        assert!(SANDBOX_UNAVAILABLE.is_canonical());
        let e = SandboxError::Unavailable {
            mode: SandboxMode::WorkspaceWrite,
            detail: "bwrap: not found".into(),
        };
        let t: ToolError = e.into();
        assert_eq!(t.code, SANDBOX_UNAVAILABLE);
        assert!(
            t.message.contains("apt-get install bubblewrap"),
            "{}",
            t.message
        );
    }
}
