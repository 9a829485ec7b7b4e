//! Typed errors of the PostgreSQL store, converted to [`SessionError`] at the persistence seam.

use dsh_session::SessionError;
use dsh_session::error::LogError;

/// A failed operation of the PostgreSQL store.
#[derive(Debug, thiserror::Error)]
pub enum PgStoreError {
    /// The URL does not parse as a PostgreSQL connection string.
    #[error("invalid PostgreSQL store URL: {0}")]
    BadUrl(#[source] tokio_postgres::Error),
    /// No connection could be made (within the reconnect window).
    #[error("cannot connect to the PostgreSQL store {target}: {source}")]
    Connect {
        /// The server, as shown (socket directory or host and database; never a password).
        target: String,
        /// The cause.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A statement failed.
    #[error("PostgreSQL store: {op} failed: {source}")]
    Sql {
        /// What was being done.
        op: &'static str,
        /// The cause.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The store's own thread (its runtime) could not be started or is gone.
    #[error("PostgreSQL store: the store's runtime is unavailable: {0}")]
    Runtime(String),
    /// No such session.
    #[error("SESSION_NOT_FOUND: no session \"{0}\" in the PostgreSQL store")]
    NotFound(String),
    /// The id is already taken.
    #[error("SESSION_EXISTS: session \"{0}\" already exists in the PostgreSQL store")]
    Exists(String),
    /// Another writer holds a lease on the session that has not expired.
    #[error(
        "SESSION_LOCKED: session \"{session}\" is open for write by {owner} (lease epoch {epoch}, expires in {expires_in_ms} ms)"
    )]
    Locked {
        /// The session.
        session: String,
        /// The lease's owner.
        owner: String,
        /// The lease's epoch.
        epoch: i64,
        /// Milliseconds until the lease expires.
        expires_in_ms: i64,
    },
    /// The session is not open for write through this store.
    #[error("session \"{0}\" is not open for write in this PostgreSQL store")]
    NotOpen(String),
    /// This writer's lease on the session is gone: it expired (the writer was paused or cut off
    /// past its expiry) or another writer took the session over with a newer epoch. Nothing of
    /// the refused batch was written; the writer must stop writing this session.
    #[error(
        "SESSION_LEASE_LOST: the write lease on session \"{session}\" (epoch {epoch}, owner {owner}) is lost: {cause}; nothing of this batch was written"
    )]
    LeaseLost {
        /// The session.
        session: String,
        /// This writer's owner id.
        owner: String,
        /// This writer's epoch.
        epoch: i64,
        /// What happened to the lease.
        cause: LeaseLoss,
    },
    /// The stored rows disagree with what this writer committed (a bug or a manual edit).
    #[error(
        "PostgreSQL store: session \"{session}\" holds {stored} events but this writer committed {expected}"
    )]
    SeqConflict {
        /// The session.
        session: String,
        /// The writer's committed count.
        expected: i64,
        /// The stored count.
        stored: i64,
    },
    /// The stored rows of a session do not form a log (a missing row, a header that does not
    /// read).
    #[error("{0}")]
    Log(#[from] LogError),
}

/// How a lease was lost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseLoss {
    /// Another writer took the session over.
    TakenOver {
        /// The new owner.
        owner: String,
        /// The new epoch.
        epoch: i64,
    },
    /// The lease expired before this append (nobody has taken it yet).
    Expired {
        /// How long ago, in milliseconds.
        ago_ms: i64,
    },
    /// The session was released or deleted.
    Released,
}

impl std::fmt::Display for LeaseLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LeaseLoss::TakenOver { owner, epoch } => {
                write!(f, "taken over by {owner} with epoch {epoch}")
            }
            LeaseLoss::Expired { ago_ms } => write!(
                f,
                "it expired {ago_ms} ms ago (the writer was paused or cut off past its lease)"
            ),
            LeaseLoss::Released => write!(f, "the session was released or deleted"),
        }
    }
}

impl PgStoreError {
    /// Whether this is a lost lease.
    pub fn is_lease_lost(&self) -> bool {
        matches!(self, PgStoreError::LeaseLost { .. })
    }
}

impl From<PgStoreError> for SessionError {
    fn from(e: PgStoreError) -> Self {
        match e {
            PgStoreError::NotFound(id) => SessionError::NotFound(id),
            PgStoreError::Exists(id) => SessionError::Exists(id),
            PgStoreError::Locked { session, .. } => SessionError::Locked(session),
            PgStoreError::Log(e) => SessionError::Log(e),
            // A lost lease ends the turn like any storage failure (`SESSION_IO`, the
            // protocol's `STORAGE_FAILED`), its text naming the cause.
            other => SessionError::Io(other.to_string()),
        }
    }
}
