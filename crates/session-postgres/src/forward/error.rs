//! Why a forwarded op failed.

use dsh_protocol::{ErrorCode, ProtocolError};

use crate::PgStoreError;

/// The wire spelling of [`ForwardError::OwnerLost`]'s code (`ErrorCode::SessionOwnerLost`).
pub const OWNER_LOST: &str = "SESSION_OWNER_LOST";

/// A forwarded op that has no answer from the session's owner.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// The owner took the op, then lost the session's lease (it stopped, was killed or was cut
    /// off past the lease) before it answered: the op may or may not have been applied.
    #[error(
        "{OWNER_LOST}: {owner} took op {op} for session \"{session}\" and lost the session's lease \
         before it answered (it stopped or was cut off); the op may or may not have been applied: \
         the session's log says what happened"
    )]
    OwnerLost {
        /// The session.
        session: String,
        /// The owner that took the op.
        owner: String,
        /// The op's row id.
        op: i64,
    },
    /// The session changed hands each time an op was routed to it.
    #[error(
        "the owner of session \"{session}\" changed {attempts} times while an op was forwarded to \
         it; try again"
    )]
    Unsettled {
        /// The session.
        session: String,
        /// How many routes were tried.
        attempts: u32,
    },
    /// The owner's reply could not be read.
    #[error("the reply of op {op} could not be read: {source}")]
    BadReply {
        /// The op's row id.
        op: i64,
        /// Why.
        #[source]
        source: serde_json::Error,
    },
    /// The store failed.
    #[error(transparent)]
    Store(#[from] PgStoreError),
}

impl ForwardError {
    /// The protocol error a client gets.
    pub fn to_protocol(&self) -> ProtocolError {
        let code = match self {
            ForwardError::OwnerLost { .. } => ErrorCode::SessionOwnerLost,
            ForwardError::Unsettled { .. } => ErrorCode::Conflict,
            ForwardError::BadReply { .. } => ErrorCode::Internal,
            ForwardError::Store(_) => ErrorCode::StorageFailed,
        };
        ProtocolError::new(code, self.to_string())
    }
}

impl From<ForwardError> for ProtocolError {
    fn from(e: ForwardError) -> Self {
        e.to_protocol()
    }
}
