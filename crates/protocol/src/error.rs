//! Error codes and the error body every client sees.

use std::borrow::Cow;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A machine-readable failure code (`SCREAMING_SNAKE_CASE` on the wire). Codes the protocol does
/// not know (a plugin's, a newer server's) arrive as [`ErrorCode::Other`], verbatim.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    // The provider (format §6).
    /// The API key was refused.
    Auth,
    /// No credit or quota left.
    Quota,
    /// Too many requests.
    RateLimit,
    /// The request is larger than the model's context window.
    ContextWindowExceeded,
    /// The provider failed.
    Server,
    /// The connection failed.
    Transport,
    /// A deadline passed.
    Timeout,
    /// The stream ended early.
    StreamClosed,
    /// The provider's answer could not be read.
    MalformedResponse,
    /// The provider answered nothing.
    EmptyResponse,
    /// No API key is configured.
    MissingCredential,
    // Sessions.
    /// No session has this id.
    SessionNotFound,
    /// Another process writes this session.
    SessionLocked,
    /// The session exists but is ended or closed.
    SessionEnded,
    /// The session's stored log cannot be read (`dsh sessions repair` keeps its valid part).
    SessionCorrupt,
    /// The session's log cannot be written (a read-only or full disk).
    StorageFailed,
    /// An op was forwarded to the server that held the session (a shared store, several
    /// servers), which took it and then lost the session's lease before it answered: the op may
    /// or may not have been applied; the session's log says which.
    SessionOwnerLost,
    // Requests from a client.
    /// The op or body is malformed or names an unknown thing.
    InvalidRequest,
    /// The op is not allowed in the session's state (e.g. answering a question nobody asked).
    Conflict,
    /// No slash command has this name.
    UnknownCommand,
    /// The command ran and failed.
    CommandFailed,
    /// No open question or approval has this id.
    UnknownRequest,
    /// The caller may not do this (a read-only client sending an op).
    Forbidden,
    /// The caller is not authenticated.
    Unauthorized,
    /// The host is shutting down.
    ShuttingDown,
    /// A subscriber fell too far behind the live events; subscribe again from its last seq.
    SubscriberLagged,
    /// A failure inside the host (a bug: it says what failed).
    Internal,
    /// Any other code, verbatim.
    #[serde(untagged)]
    Other(String),
}

impl ErrorCode {
    /// The wire spelling.
    pub fn as_str(&self) -> Cow<'_, str> {
        match self {
            ErrorCode::Other(s) => Cow::Borrowed(s),
            known => match serde_json::to_value(known) {
                Ok(serde_json::Value::String(s)) => Cow::Owned(s),
                _ => Cow::Borrowed("INTERNAL"),
            },
        }
    }

    /// Reads a wire spelling (unknown spellings become [`ErrorCode::Other`]).
    pub fn from_wire(s: &str) -> Self {
        serde_json::from_value(serde_json::Value::String(s.to_owned()))
            .unwrap_or_else(|_| ErrorCode::Other(s.to_owned()))
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// A failure: a code and a message for a person. The error of every [`crate::Client`] call and
/// the body of every HTTP error answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema, thiserror::Error)]
#[serde(rename_all = "camelCase")]
#[error("{code}: {message}")]
pub struct ProtocolError {
    /// What failed.
    pub code: ErrorCode,
    /// What happened, for a person (never a credential).
    pub message: String,
}

impl ProtocolError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ProtocolError {
            code,
            message: message.into(),
        }
    }
}
