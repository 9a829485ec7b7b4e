//! Typed errors of the queue.

/// A failed queue operation.
#[derive(Debug, thiserror::Error)]
pub enum FleetError {
    /// The URL does not parse as a PostgreSQL connection string.
    #[error("invalid PostgreSQL URL for the task queue: {0}")]
    BadUrl(#[source] tokio_postgres::Error),
    /// No connection could be made.
    #[error("cannot connect to the task queue's PostgreSQL server: {0}")]
    Connect(#[source] tokio_postgres::Error),
    /// A statement failed.
    #[error("task queue: {op} failed: {source}")]
    Sql {
        /// What was being done.
        op: &'static str,
        /// The cause.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A row holds a value this version does not know (written by a newer dsh, or by hand).
    #[error("task queue: task {id} has an unknown {field} `{value}`")]
    BadRow {
        /// The task.
        id: i64,
        /// The column.
        field: &'static str,
        /// What it holds.
        value: String,
    },
}

pub(crate) fn sql(op: &'static str) -> impl FnOnce(tokio_postgres::Error) -> FleetError {
    move |source| FleetError::Sql { op, source }
}
