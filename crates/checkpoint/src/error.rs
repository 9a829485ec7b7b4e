//! The crate's error type.

use std::path::PathBuf;

/// Why a checkpoint operation failed.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// A file system operation failed.
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// On which path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An object of the store is missing or damaged.
    #[error("checkpoint store: {0}")]
    Corrupt(String),
    /// No checkpoint with this id (or prefix).
    #[error("no checkpoint `{0}`")]
    NotFound(String),
    /// A record could not be encoded or decoded.
    #[error("checkpoint record: {0}")]
    Json(#[from] serde_json::Error),
    /// The walk of the workspace failed.
    #[error("walking the workspace: {0}")]
    Walk(#[from] ignore::Error),
    /// A blocking task failed.
    #[error("a checkpoint task failed: {0}")]
    Task(String),
}

impl CheckpointError {
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| CheckpointError::Io { op, path, source }
    }
}

/// Results of this crate.
pub type Result<T, E = CheckpointError> = std::result::Result<T, E>;
