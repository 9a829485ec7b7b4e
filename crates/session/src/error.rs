//! Error types. Every rejection names what was wrong (seq, type, field) and is told apart by
//! variant; causes are kept as `#[source]`.

use std::sync::Arc;

use crate::json::JsonError;

/// Why one stored line is not an event row (format §4.2): the envelope is broken. Returned by
/// [`crate::Event::from_line`]; a payload that breaks a rule is not an envelope error (it is
/// reported when the event is admitted, see [`Rejection`]).
#[derive(Debug, Clone, thiserror::Error)]
pub enum EventError {
    /// The line is not a JSON object with the envelope members (or repeats one).
    #[error("event row is not a JSON object of envelope members: {0}")]
    Malformed(#[source] Arc<serde_json::Error>),
    /// A member outside the envelope.
    #[error("event row has unknown envelope member \"{0}\"")]
    UnknownMember(String),
    /// No non-empty string `type`.
    #[error("event row lacks a string \"type\"")]
    MissingType,
    /// No valid `seq`.
    #[error("event \"{kind}\" lacks a valid \"seq\"")]
    MissingSeq {
        /// The row's type.
        kind: String,
    },
    /// A `seq` other than the expected next index.
    #[error("event \"{kind}\" has seq {seq}, expected {expected}")]
    SeqMismatch {
        /// The row's type.
        kind: String,
        /// The row's seq.
        seq: u64,
        /// The expected next index.
        expected: u64,
    },
    /// No valid `time`.
    #[error("event {seq} (\"{kind}\") lacks a valid \"time\"")]
    MissingTime {
        /// The row's seq.
        seq: u64,
        /// The row's type.
        kind: String,
    },
    /// No `data`.
    #[error("event {seq} (\"{kind}\") lacks \"data\"")]
    MissingData {
        /// The row's seq.
        seq: u64,
        /// The row's type.
        kind: String,
    },
    /// A malformed `surfaceOp`.
    #[error("event {seq} (\"{kind}\"): {reason}")]
    SurfaceOp {
        /// The row's seq.
        seq: u64,
        /// The row's type.
        kind: String,
        /// What is wrong.
        reason: SurfaceOpError,
    },
    /// A malformed `sourceEventSeqs`.
    #[error("event {seq} (\"{kind}\"): {reason}")]
    Sources {
        /// The row's seq.
        seq: u64,
        /// The row's type.
        kind: String,
        /// What is wrong.
        reason: SeqsError,
    },
    /// `ignorable` present but not exactly `true`.
    #[error("event {seq} (\"{kind}\"): ignorable must be exactly true")]
    Ignorable {
        /// The row's seq.
        seq: u64,
        /// The row's type.
        kind: String,
    },
}

/// A malformed `surfaceOp` (format §4.4).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SurfaceOpError {
    /// Neither `"append"` nor exactly `{op:"replace", startSeq, endSeq}`.
    #[error("surfaceOp must be \"append\" or exactly {{op:\"replace\", startSeq, endSeq}}")]
    Shape,
    /// Bounds that are not non-negative safe integers.
    #[error("surfaceOp replace needs non-negative integer startSeq and endSeq")]
    Bounds,
    /// Bounds not earlier than the event.
    #[error("surfaceOp replace bounds {start}..{end} must be earlier than seq {seq}")]
    NotEarlier {
        /// `startSeq`.
        start: u64,
        /// `endSeq`.
        end: u64,
        /// The event's seq.
        seq: u64,
    },
}

/// A malformed `sourceEventSeqs` (format §3.3).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SeqsError {
    /// Not an array.
    #[error("sourceEventSeqs must be an array")]
    NotArray,
    /// A run that is not `[start, end]` of non-negative integers, or is reversed.
    #[error("sourceEventSeqs run {0} is malformed (must be [start, end], start <= end)")]
    BadRun(String),
    /// A member that is not a non-negative safe integer.
    #[error("sourceEventSeqs members must be non-negative integers")]
    BadMember,
    /// The logical list is empty.
    #[error("sourceEventSeqs must not be empty")]
    Empty,
    /// A member not earlier than the event.
    #[error("sourceEventSeqs member {member} is not earlier than the event's seq {seq}")]
    NotEarlier {
        /// The member.
        member: u64,
        /// The event's seq.
        seq: u64,
    },
    /// A repeated member.
    #[error("sourceEventSeqs repeats {0}")]
    Repeated(u64),
}

/// The rule an event breaks (format §4.3–§4.7, §8, §11). The variant is the class of rule; the
/// text names the field and values.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Rejection {
    /// A type outside the 60 known names that is not marked ignorable (format §4.3): the log is
    /// unsupported, not corrupt.
    #[error("unknown required event type \"{0}\" (not marked ignorable)")]
    UnknownRequiredType(String),
    /// `data` is not lossless JSON (format §3.2), or `time` is outside the safe range.
    #[error("{0}")]
    NotLossless(#[source] JsonError),
    /// The payload of a known type does not decode into its typed form.
    #[error("data does not decode: {0}")]
    Decode(#[source] Arc<serde_json::Error>),
    /// The payload does not serialise (a typed append).
    #[error("payload does not serialize: {0}")]
    Serialize(#[source] Arc<serde_json::Error>),
    /// Surface metadata (`surfaceOp`, `sourceEventSeqs`) where it is not allowed or missing, or
    /// a malformed provenance list (format §4.4).
    #[error("{0}")]
    Metadata(String),
    /// A stateless per-type payload rule (format §4.5, §4.6, embedded streams §3.4).
    #[error("{0}")]
    Payload(String),
    /// Turn, step and tool-call structure (format §4.7).
    #[error("{0}")]
    Structure(String),
    /// Surface replacement or projection rules (format §8.5, §8.6).
    #[error("{0}")]
    Surface(String),
    /// Inbox splice bounds and queued-id uniqueness (format §11).
    #[error("{0}")]
    Inbox(String),
    /// Cross-event references: `headerSeq`, feature relationships, `isSeeded` (format §4.7).
    #[error("{0}")]
    Relation(String),
}

impl From<JsonError> for Rejection {
    fn from(e: JsonError) -> Self {
        Rejection::NotLossless(e)
    }
}

/// An append (or a replayed row) that breaks a rule of the format. Nothing was committed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("event {seq} (\"{kind}\") rejected: {reason}")]
pub struct AppendError {
    /// The seq the event would have had.
    pub seq: u64,
    /// Its type.
    pub kind: String,
    /// The rule it breaks.
    #[source]
    pub reason: Rejection,
}

/// Why a stored log cannot be opened.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LogError {
    /// A version or form dsh does not read (newer/older generation, unknown required event type,
    /// a v3 form the conversion cannot carry). The message names the file.
    #[error("{0}")]
    Unsupported(String),
    /// Malformed committed data. The message names the file.
    #[error("{0}")]
    Corrupt(String),
    /// A stored row that admission refuses (format §4): the row's seq, type and rule.
    #[error("session log rejected at {error}{}", path.as_ref().map(|p| format!(" ({p})")).unwrap_or_default())]
    Rejected {
        /// The refusal.
        #[source]
        error: AppendError,
        /// The file, when known.
        path: Option<String>,
    },
    /// A stored log refused while reading or admitting it, located: the file, the 1-based line,
    /// the byte offset of that line and the cause (see [`crate::codec::LoadError`]).
    #[error(transparent)]
    Load(Box<crate::codec::LoadError>),
}

impl LogError {
    /// Prefixes the message with a file path (refusals name the selected file).
    pub fn at(self, path: &str) -> Self {
        match self {
            LogError::Unsupported(m) => LogError::Unsupported(format!("{m} ({path})")),
            LogError::Corrupt(m) => LogError::Corrupt(format!("{m} ({path})")),
            LogError::Rejected { error, .. } => LogError::Rejected {
                error,
                path: Some(path.to_owned()),
            },
            located @ LogError::Load(_) => located,
        }
    }

    /// Whether the refusal is "unsupported" (a version or form dsh does not read) rather than
    /// "corrupt" (format §4.1).
    pub fn is_unsupported(&self) -> bool {
        match self {
            LogError::Unsupported(_) => true,
            LogError::Corrupt(_) => false,
            LogError::Rejected { error, .. } => {
                matches!(error.reason, Rejection::UnknownRequiredType(_))
            }
            LogError::Load(e) => e.is_unsupported(),
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
    /// An invalid session id (empty).
    #[error("invalid session id \"{0}\"")]
    InvalidId(String),
    /// The stored log cannot be opened.
    #[error(transparent)]
    Log(#[from] LogError),
    /// An append broke a rule.
    #[error(transparent)]
    Rejected(#[from] AppendError),
    /// A fork request was refused.
    #[error("fork refused: {0}")]
    Fork(#[from] ForkError),
    /// The session was closed.
    #[error("session \"{0}\" is closed")]
    Closed(String),
    /// Storage failure, described by the backend.
    #[error("session storage: {0}")]
    Io(String),
    /// Storage failure with its operating-system cause.
    #[error("session storage: {context}: {source}")]
    Storage {
        /// What was being done (and on which file).
        context: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An earlier append was not handed to storage; reported by the next barrier.
    #[error("an earlier append was not persisted: {0}")]
    Unpersisted(#[source] Box<SessionError>),
    /// The durability barrier (`session/flush`) failed in a listener.
    #[error("session/flush failed: {0}")]
    Flush(#[source] dsh_kernel::KernelError),
}

/// Why a fork was refused (format §12).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ForkError {
    /// The boundary is not a seq of the log.
    #[error("boundary {boundary} is beyond the log (len {len})")]
    BeyondLog {
        /// The requested boundary.
        boundary: u64,
        /// The log's length.
        len: u64,
    },
    /// The boundary lies inside an open turn.
    #[error("boundary {0} is inside an open turn")]
    InsideOpenTurn(u64),
    /// Copying the prefix or appending the seed failed.
    #[error("fork seed: {0}")]
    Seed(#[source] AppendError),
}

impl SessionError {
    /// A stable machine code (`SESSION_LOCKED`, …).
    pub fn code(&self) -> &'static str {
        match self {
            SessionError::Locked(_) => "SESSION_LOCKED",
            SessionError::NotFound(_) => "SESSION_NOT_FOUND",
            SessionError::Exists(_) => "SESSION_EXISTS",
            SessionError::InvalidId(_) => "SESSION_INVALID_ID",
            SessionError::Log(e) if e.is_unsupported() => "SESSION_UNSUPPORTED",
            SessionError::Log(_) => "SESSION_CORRUPT",
            SessionError::Rejected(_) => "EVENT_REJECTED",
            SessionError::Fork(_) => "FORK_REFUSED",
            SessionError::Closed(_) => "SESSION_CLOSED",
            SessionError::Io(_)
            | SessionError::Storage { .. }
            | SessionError::Unpersisted(_)
            | SessionError::Flush(_) => "SESSION_IO",
        }
    }
}

impl From<std::io::Error> for SessionError {
    fn from(source: std::io::Error) -> Self {
        SessionError::Storage {
            context: "I/O".to_owned(),
            source,
        }
    }
}
