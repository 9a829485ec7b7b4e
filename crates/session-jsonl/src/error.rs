//! [`StoreError`]: the typed errors of the JSONL backend. Causes are kept (`#[source]`); the
//! [`dsh_session::SessionPersistence`] seam converts them into [`SessionError`] at its boundary.

use std::path::PathBuf;

use dsh_session::codec::LoadError;
use dsh_session::{LogError, SessionError};

/// A damaged zstd frame (format §1.8).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZstdError {
    /// A complete frame whose content checksum does not match.
    #[error("zstd frame {frame}: content checksum mismatch")]
    Checksum {
        /// 0-based frame index.
        frame: usize,
    },
    /// A complete frame that does not end with `\n`.
    #[error("zstd frame {frame} does not end with a complete line")]
    PartialLine {
        /// 0-based frame index.
        frame: usize,
    },
    /// A frame that ends before its end with more bytes after it.
    #[error("zstd frame {frame} is incomplete")]
    Incomplete {
        /// 0-based frame index.
        frame: usize,
    },
    /// The decoder refused a frame that is not the file's tail.
    #[error("zstd frame {frame}: {detail}")]
    Decode {
        /// 0-based frame index.
        frame: usize,
        /// The decoder's message.
        detail: String,
    },
}

/// Errors of [`crate::JsonlStore`].
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No stored session with this id.
    #[error("SESSION_NOT_FOUND: no session \"{0}\"")]
    NotFound(String),
    /// Another writer (this process or another) holds the session, or won the race to create it.
    #[error("SESSION_LOCKED: session \"{0}\" is open for write elsewhere")]
    Locked(String),
    /// The id is already taken.
    #[error("SESSION_EXISTS: session \"{0}\" already exists")]
    Exists(String),
    /// A file-system operation failed.
    #[error("session storage: {op} {}: {source}", path.display())]
    Io {
        /// What was being done (`"creating"`, `"writing"`, …).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The stored log cannot be read: file, line, byte offset and cause.
    #[error(transparent)]
    Load(#[from] Box<LoadError>),
    /// The stored log is refused by admission or by the v3 conversion.
    #[error(transparent)]
    Log(#[from] LogError),
    /// A damaged zstd frame.
    #[error("corrupt session log: {source} ({})", path.display())]
    Zstd {
        /// The file.
        path: PathBuf,
        /// The damage.
        #[source]
        source: ZstdError,
    },
    /// A session directory holding both plain and zstd generations (format §1.4).
    #[error(
        "session directory mixes plain and zstd generations; refusing it ({})",
        path.display()
    )]
    MixedEncodings {
        /// The selected file.
        path: PathBuf,
    },
    /// A repair of a zstd-compressed session (repair moves plain bytes aside; frames are not
    /// cut there).
    #[error(
        "session \"{id}\" is stored zstd-compressed, which `repair` does not handle; resume it instead (a torn final frame is dropped on resume) ({})",
        path.display()
    )]
    ZstdRepair {
        /// The session.
        id: String,
        /// The selected file.
        path: PathBuf,
    },
    /// The v3 file changed between the write open and the publication of its v4 successor.
    #[error(
        "{} changed since it was opened; refusing to publish its v4 successor",
        path.display()
    )]
    SourceChanged {
        /// The v3 file.
        path: PathBuf,
    },
    /// The v4 successor of a v3 log did not read back as written.
    #[error("the v4 successor of {} did not verify", path.display())]
    SuccessorUnverified {
        /// The v3 file.
        path: PathBuf,
    },
    /// A repair that cannot keep a valid prefix (the header itself is refused, the log is a
    /// v3 generation that is never modified, or the refusal is not about one row).
    #[error("session \"{id}\" cannot be repaired: {reason}")]
    Unrepairable {
        /// The session.
        id: String,
        /// Why.
        reason: String,
    },
}

impl StoreError {
    /// An I/O failure of `op` on `path`.
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        StoreError::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

impl From<LoadError> for StoreError {
    fn from(e: LoadError) -> Self {
        StoreError::Load(Box::new(e))
    }
}

impl From<StoreError> for SessionError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(id) => SessionError::NotFound(id),
            StoreError::Locked(id) => SessionError::Locked(id),
            StoreError::Exists(id) => SessionError::Exists(id),
            StoreError::Load(e) => SessionError::Log(LogError::Load(e)),
            StoreError::Log(e) => SessionError::Log(e),
            e @ (StoreError::MixedEncodings { .. } | StoreError::ZstdRepair { .. }) => {
                SessionError::Log(LogError::Unsupported(e.to_string()))
            }
            e @ StoreError::Zstd { .. } => SessionError::Log(LogError::Corrupt(e.to_string())),
            StoreError::Io { op, path, source } => SessionError::Storage {
                context: format!("{op} {}", path.display()),
                source,
            },
            e @ (StoreError::SourceChanged { .. }
            | StoreError::SuccessorUnverified { .. }
            | StoreError::Unrepairable { .. }) => SessionError::Io(e.to_string()),
        }
    }
}
