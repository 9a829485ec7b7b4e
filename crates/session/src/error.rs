//! Error types.

/// An append (or a replayed row) that breaks a rule of the format. Nothing was committed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("event {seq} (\"{kind}\") rejected: {reason}")]
pub struct AppendError {
    /// The seq the event would have had.
    pub seq: u64,
    /// Its type.
    pub kind: String,
    /// The rule it breaks.
    pub reason: String,
}

/// Why a stored log cannot be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    /// A version or form dsh does not read (newer/older generation, unknown required event type,
    /// a v3 form the conversion cannot carry). The message names the file.
    #[error("{0}")]
    Unsupported(String),
    /// Malformed committed data. The message names the file.
    #[error("{0}")]
    Corrupt(String),
}

impl LogError {
    /// Prefixes the message with a file path (refusals name the selected file).
    pub fn at(self, path: &str) -> Self {
        match self {
            LogError::Unsupported(m) => LogError::Unsupported(format!("{m} ({path})")),
            LogError::Corrupt(m) => LogError::Corrupt(format!("{m} ({path})")),
        }
    }
}

/// Errors of the session service and persistence seam.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// Another writer (this process or another) holds the session open for write.
    #[error("SESSION_LOCKED: session \"{0}\" is open for write elsewhere")]
    Locked(String),
    /// No such session.
    #[error("SESSION_NOT_FOUND: no session \"{0}\"")]
    NotFound(String),
    /// The id is already taken.
    #[error("SESSION_EXISTS: session \"{0}\" already exists")]
    Exists(String),
    /// The stored log cannot be opened.
    #[error(transparent)]
    Log(#[from] LogError),
    /// An append broke a rule.
    #[error(transparent)]
    Rejected(#[from] AppendError),
    /// A fork request was refused.
    #[error("fork refused: {0}")]
    Fork(String),
    /// The session was closed.
    #[error("session \"{0}\" is closed")]
    Closed(String),
    /// Storage failure.
    #[error("session storage: {0}")]
    Io(String),
}

impl SessionError {
    /// A stable machine code (`SESSION_LOCKED`, …).
    pub fn code(&self) -> &'static str {
        match self {
            SessionError::Locked(_) => "SESSION_LOCKED",
            SessionError::NotFound(_) => "SESSION_NOT_FOUND",
            SessionError::Exists(_) => "SESSION_EXISTS",
            SessionError::Log(LogError::Unsupported(_)) => "SESSION_UNSUPPORTED",
            SessionError::Log(LogError::Corrupt(_)) => "SESSION_CORRUPT",
            SessionError::Rejected(_) => "EVENT_REJECTED",
            SessionError::Fork(_) => "FORK_REFUSED",
            SessionError::Closed(_) => "SESSION_CLOSED",
            SessionError::Io(_) => "SESSION_IO",
        }
    }
}

impl From<std::io::Error> for SessionError {
    fn from(e: std::io::Error) -> Self {
        SessionError::Io(e.to_string())
    }
}
