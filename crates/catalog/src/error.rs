//! Errors of the SQLite catalog.

use std::path::PathBuf;

use dsh_catalog_api::CatalogError;

/// A failed catalog operation.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SQLite refused or failed.
    #[error("catalog database: {0}")]
    Sql(#[from] rusqlite::Error),
    /// A file-system operation on the catalog failed.
    #[error("catalog file {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// The file holds a schema this build does not know (it is rebuilt).
    #[error("the catalog has schema version {found}; this dsh writes version {expected}")]
    Version {
        /// Found in the file.
        found: i64,
        /// Written by this build.
        expected: i64,
    },
    /// A query ran past its time budget and was interrupted.
    #[error("the catalog query ran past its budget of {budget_ms} ms")]
    Timeout {
        /// The budget.
        budget_ms: u64,
    },
    /// A stored text cannot be read back (the catalog is damaged: it is rebuilt).
    #[error("catalog text: {0}")]
    Unpack(#[from] crate::pack::UnpackError),
    /// Reading the session logs failed.
    #[error("reading the session logs: {0}")]
    Logs(#[from] dsh_session::SessionError),
}

impl Error {
    /// Whether the file is damaged or foreign (not a database, corrupt, another schema): the
    /// catalog is then deleted and rebuilt from the logs.
    pub fn is_damage(&self) -> bool {
        use rusqlite::ErrorCode;
        match self {
            Error::Version { .. } | Error::Unpack(_) => true,
            Error::Sql(rusqlite::Error::SqliteFailure(e, _)) => {
                matches!(e.code, ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt)
            }
            _ => false,
        }
    }

    /// Whether the location cannot be written (read-only directory or file).
    pub fn is_read_only(&self) -> bool {
        use rusqlite::ErrorCode;
        match self {
            Error::Io { source, .. } => matches!(
                source.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            ),
            Error::Sql(rusqlite::Error::SqliteFailure(e, _)) => matches!(
                e.code,
                ErrorCode::ReadOnly | ErrorCode::CannotOpen | ErrorCode::PermissionDenied
            ),
            _ => false,
        }
    }
}

impl From<Error> for CatalogError {
    fn from(e: Error) -> Self {
        match e {
            Error::Timeout { budget_ms } => CatalogError::Timeout { budget_ms },
            e if e.is_read_only() => CatalogError::ReadOnly,
            e => CatalogError::Storage(Box::new(e)),
        }
    }
}
